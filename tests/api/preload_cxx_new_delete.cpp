// Every replaceable operator new/delete form, as a C++ program sees them under
// LD_PRELOAD=libtenon.so. Modes (argv[1]):
//   symbols    all 20 forms resolve into libtenon.so
//   behaviour  new_handler loop then std::bad_alloc, nothrow -> nullptr,
//              alignment up to 4 MiB, sized and aligned deletes
//   handler_throws  nothrow forms return nullptr when the handler throws
// A second argument `secure`: the preloaded library is libtenon-secure.so,
// which must give the same answers (g_secure is where one would differ).
// Built with -fno-builtin -fno-allocation-dce so every call stays as written.
#include <dlfcn.h>

#include <cstdint>
#include <cstring>
#include <new>
#include <string>
#include <vector>

#include "preload_check.h"

namespace {

const char* const kForms[] = {
    "_Znwm", "_Znam", "_ZnwmRKSt9nothrow_t", "_ZnamRKSt9nothrow_t",
    "_ZnwmSt11align_val_t", "_ZnamSt11align_val_t",
    "_ZnwmSt11align_val_tRKSt9nothrow_t", "_ZnamSt11align_val_tRKSt9nothrow_t",
    "_ZdlPv", "_ZdaPv", "_ZdlPvm", "_ZdaPvm",
    "_ZdlPvRKSt9nothrow_t", "_ZdaPvRKSt9nothrow_t",
    "_ZdlPvSt11align_val_t", "_ZdaPvSt11align_val_t",
    "_ZdlPvmSt11align_val_t", "_ZdaPvmSt11align_val_t",
    "_ZdlPvSt11align_val_tRKSt9nothrow_t", "_ZdaPvSt11align_val_tRKSt9nothrow_t",
};

int run_symbols() {
  for (const char* name : kForms) {
    void* sym = dlsym(RTLD_DEFAULT, name);
    CHECK(sym != nullptr, "%s is not defined", name);
    if (!sym) continue;
    Dl_info info;
    int ok = dladdr(sym, &info);
    CHECK(ok && info.dli_fname && std::strstr(info.dli_fname, "libtenon"),
          "%s resolves into %s, not libtenon.so", name, ok && info.dli_fname ? info.dli_fname : "?");
  }
  return preload_failures;
}

volatile std::size_t g_impossible = SIZE_MAX - 64;  // volatile: no folding, no warnings
volatile std::size_t g_impossible2 = static_cast<std::size_t>(PTRDIFF_MAX) + 1;
// Wraps to a small size if a layer adds its own bytes (a header, a canary) unchecked.
volatile std::size_t g_impossible3 = SIZE_MAX;
int g_handler_calls = 0;
// Run against libtenon-secure.so.
bool g_secure = false;

// Called by operator new on failure; gives up (uninstalls itself) on the third call.
void counting_handler() {
  if (++g_handler_calls >= 3) std::set_new_handler(nullptr);
}

void throwing_handler() {
  ++g_handler_calls;
  throw std::bad_alloc();
}

void fill(void* p, std::size_t n, unsigned seed) {
  auto* b = static_cast<unsigned char*>(p);
  for (std::size_t i = 0; i < n; ++i) b[i] = static_cast<unsigned char>(seed * 131u + i * 7u + (i >> 8));
}

bool intact(const void* p, std::size_t n, unsigned seed) {
  auto* b = static_cast<const unsigned char*>(p);
  for (std::size_t i = 0; i < n; ++i)
    if (b[i] != static_cast<unsigned char>(seed * 131u + i * 7u + (i >> 8))) return false;
  return true;
}

bool aligned(const void* p, std::size_t a) { return (reinterpret_cast<std::uintptr_t>(p) & (a - 1)) == 0; }

// Expects `call` to run the handler exactly 3 times and then throw std::bad_alloc.
template <class F>
void expect_handler_then_bad_alloc(const char* what, F call) {
  g_handler_calls = 0;
  std::set_new_handler(counting_handler);
  bool threw = false;
  try {
    void* p = call();
    ESCAPE(p);
    CHECK(false, "%s returned %p instead of throwing", what, p);
  } catch (const std::bad_alloc&) {
    threw = true;
  }
  CHECK(threw, "%s did not throw std::bad_alloc", what);
  CHECK(g_handler_calls == 3, "%s called the new_handler %d times, expected 3", what, g_handler_calls);
  std::set_new_handler(nullptr);
}

// Expects a nothrow form to run the handler 3 times and then return nullptr,
// and to return nullptr at once without a handler.
template <class F>
void expect_nothrow_null(const char* what, F call) {
  g_handler_calls = 0;
  std::set_new_handler(counting_handler);
  void* p = call();
  ESCAPE(p);
  CHECK(p == nullptr, "%s returned %p", what, p);
  CHECK(g_handler_calls == 3, "%s called the new_handler %d times, expected 3", what, g_handler_calls);
  std::set_new_handler(nullptr);
  p = call();
  ESCAPE(p);
  CHECK(p == nullptr, "%s without a handler returned %p", what, p);
}

void failures() {
  const std::align_val_t a64{64};
  for (volatile std::size_t* size : {&g_impossible, &g_impossible2, &g_impossible3}) {
    const std::size_t n = *size;
    expect_handler_then_bad_alloc("operator new", [n] { return ::operator new(n); });
    expect_handler_then_bad_alloc("operator new[]", [n] { return ::operator new[](n); });
    expect_handler_then_bad_alloc("operator new(align 64)", [n, a64] { return ::operator new(n, a64); });
    expect_handler_then_bad_alloc("operator new[](align 64)", [n, a64] { return ::operator new[](n, a64); });
    expect_nothrow_null("operator new(nothrow)", [n] { return ::operator new(n, std::nothrow); });
    expect_nothrow_null("operator new[](nothrow)", [n] { return ::operator new[](n, std::nothrow); });
    expect_nothrow_null("operator new(align 64, nothrow)",
                        [n, a64] { return ::operator new(n, a64, std::nothrow); });
    expect_nothrow_null("operator new[](align 64, nothrow)",
                        [n, a64] { return ::operator new[](n, a64, std::nothrow); });
  }
  // Without a handler: straight to bad_alloc.
  bool threw = false;
  try {
    void* p = ::operator new(g_impossible, std::align_val_t{std::size_t{1} << 22});
    ESCAPE(p);
  } catch (const std::bad_alloc&) {
    threw = true;
  }
  CHECK(threw, "operator new(impossible, align 4 MiB) did not throw");
  // A new-expression of an impossible array size throws too (bad_array_new_length is a bad_alloc).
  threw = false;
  try {
    volatile std::size_t count = SIZE_MAX / 4;
    auto* p = new std::uint64_t[count];
    ESCAPE(p);
  } catch (const std::bad_alloc&) {
    threw = true;
  }
  CHECK(threw, "new uint64_t[SIZE_MAX / 4] did not throw");
}

void plain_and_sized() {
  std::vector<std::pair<void*, std::size_t>> blocks;
  for (std::size_t n = 0; n < (std::size_t{6} << 20); n = n * 2 + 1) {
    void* p = ::operator new(n);
    CHECK(p != nullptr, "operator new(%zu)", n);
    CHECK(aligned(p, n >= 16 ? 16 : 8), "operator new(%zu) = %p misaligned", n, p);
    fill(p, n, static_cast<unsigned>(n));
    blocks.push_back({p, n});
  }
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    auto [p, n] = blocks[i];
    CHECK(intact(p, n, static_cast<unsigned>(n)), "operator new(%zu) block changed", n);
    if (i % 2) ::operator delete(p, n);  // sized
    else ::operator delete(p);
  }
  blocks.clear();
  for (std::size_t n = 1; n < (std::size_t{6} << 20); n = n * 3 + 1) {
    void* p = ::operator new[](n);
    fill(p, n, 1);
    blocks.push_back({p, n});
  }
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    auto [p, n] = blocks[i];
    CHECK(intact(p, n, 1), "operator new[](%zu) block changed", n);
    if (i % 2) ::operator delete[](p, n);
    else ::operator delete[](p);
  }
  void* z1 = ::operator new(0);
  void* z2 = ::operator new(0);
  CHECK(z1 && z2 && z1 != z2, "operator new(0) twice: %p %p", z1, z2);
  ::operator delete(z1);
  ::operator delete(z2, std::size_t{0});
  void* nt = ::operator new(100, std::nothrow);
  CHECK(nt != nullptr, "operator new(100, nothrow)");
  ::operator delete(nt, std::nothrow);
  nt = ::operator new[](100, std::nothrow);
  CHECK(nt != nullptr, "operator new[](100, nothrow)");
  ::operator delete[](nt, std::nothrow);
  ::operator delete(nullptr);
  ::operator delete[](nullptr);
}

void aligned_forms() {
  const std::size_t max_align = std::size_t{4} << 20;
  for (std::size_t a = 16; a <= max_align; a *= 2) {
    const std::align_val_t al{a};
    for (std::size_t n : {std::size_t{1}, a - 1, a, a + 1, 3 * a}) {
      void* p = ::operator new(n, al);
      CHECK(p && aligned(p, a), "operator new(%zu, align %zu) = %p", n, a, p);
      void* q = ::operator new[](n, al);
      CHECK(q && aligned(q, a), "operator new[](%zu, align %zu) = %p", n, a, q);
      void* r = ::operator new(n, al, std::nothrow);
      CHECK(r && aligned(r, a), "operator new(%zu, align %zu, nothrow) = %p", n, a, r);
      void* s = ::operator new[](n, al, std::nothrow);
      CHECK(s && aligned(s, a), "operator new[](%zu, align %zu, nothrow) = %p", n, a, s);
      if (!p || !q || !r || !s) continue;
      fill(p, n, 1);
      fill(q, n, 2);
      fill(r, n, 3);
      fill(s, n, 4);
      CHECK(intact(p, n, 1) && intact(q, n, 2) && intact(r, n, 3) && intact(s, n, 4),
            "aligned blocks of %zu (align %zu) overlap", n, a);
      if (n % 2) {
        ::operator delete(p, n, al);
        ::operator delete[](q, n, al);
      } else {
        ::operator delete(p, al);
        ::operator delete[](q, al);
      }
      ::operator delete(r, al, std::nothrow);
      ::operator delete[](s, al, std::nothrow);
    }
  }
  // new-expressions of over-aligned types pick the aligned forms.
  struct alignas(256) Wide {
    char bytes[300];
  };
  std::vector<Wide*> objects;
  for (int i = 0; i < 100; ++i) {
    Wide* w = new Wide;
    CHECK(aligned(w, 256), "new Wide = %p", static_cast<void*>(w));
    std::memset(w->bytes, i, sizeof w->bytes);
    objects.push_back(w);
  }
  for (Wide* w : objects) delete w;
  volatile std::size_t count = 17;
  Wide* arr = new Wide[count];
  CHECK(aligned(arr, 256), "new Wide[17] = %p", static_cast<void*>(arr));
  delete[] arr;
  // The standard library on top of all this.
  std::vector<std::string> strings;
  for (int i = 0; i < 10000; ++i) strings.push_back(std::string(i % 300, 'x') + std::to_string(i));
  std::size_t total = 0;
  for (const auto& s : strings) total += s.size();
  CHECK(total > 0, "strings");
}

// Nothrow forms whose new_handler throws std::bad_alloc must return nullptr
// (they behave as if calling the throwing form inside try/catch). Done in its
// own mode: if the exception escapes a noexcept operator, the program
// terminates, and the other checks should still be reported.
template <class F>
void expect_nothrow_null_with_throwing_handler(const char* what, F call) {
  g_handler_calls = 0;
  std::set_new_handler(throwing_handler);
  std::fprintf(stderr, "step: %s with a new_handler that throws std::bad_alloc\n", what);
  void* p = call();
  ESCAPE(p);
  CHECK(p == nullptr, "%s with a throwing handler returned %p", what, p);
  CHECK(g_handler_calls == 1, "%s called the throwing handler %d times", what, g_handler_calls);
  std::set_new_handler(nullptr);
}

int run_handler_throws() {
  const std::size_t n = g_impossible;
  const std::align_val_t a64{64};
  expect_nothrow_null_with_throwing_handler("operator new(nothrow)", [n] { return ::operator new(n, std::nothrow); });
  expect_nothrow_null_with_throwing_handler("operator new[](nothrow)",
                                            [n] { return ::operator new[](n, std::nothrow); });
  expect_nothrow_null_with_throwing_handler("operator new(align 64, nothrow)",
                                            [n, a64] { return ::operator new(n, a64, std::nothrow); });
  expect_nothrow_null_with_throwing_handler("operator new[](align 64, nothrow)",
                                            [n, a64] { return ::operator new[](n, a64, std::nothrow); });
  return preload_failures;
}

int run_behaviour() {
  failures();
  plain_and_sized();
  aligned_forms();
  return preload_failures;
}

}  // namespace

int main(int argc, char** argv) {
  g_secure = argc == 3 && !std::strcmp(argv[2], "secure");
  if (argc != 2 && !g_secure) {
    std::fprintf(stderr, "usage: %s symbols|behaviour|handler_throws [secure]\n", argv[0]);
    return 2;
  }
  int failed;
  if (!std::strcmp(argv[1], "symbols")) failed = run_symbols();
  else if (!std::strcmp(argv[1], "behaviour")) failed = run_behaviour();
  else if (!std::strcmp(argv[1], "handler_throws")) failed = run_handler_throws();
  else {
    std::fprintf(stderr, "unknown mode %s\n", argv[1]);
    return 2;
  }
  std::printf("%s: %d failed checks\n", argv[1], failed);
  return failed ? 1 : 0;
}
