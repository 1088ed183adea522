// heap_tree_bench: build a map of N nodes from T threads (N/T each, every
// thread its own map) and drop it, with one of:
//   new-delete      std::map over operator new/delete (the allocator is
//                   whatever malloc the process has: run it under LD_PRELOAD)
//   pmr-monotonic   std::pmr::map over a std::pmr::monotonic_buffer_resource
//                   per thread (it is single-threaded), dropped by release()
//   tenon-heap      std::pmr::map over a tenon heap per thread, dropped by
//                   tenon_heap_destroy (LIB: libtenon.so, opened with dlopen)
//   tenon-shared    the same with one tenon heap shared by the T threads
//   mimalloc-heap   over mi_heap_new per thread, dropped by mi_heap_destroy
//                   (LIB: a libmimalloc.so)
//   jemalloc-arena  over a jemalloc arena per thread (arenas.create, mallocx
//                   without tcache), dropped by arena.<i>.destroy
//                   (LIB: libjemalloc.so.2)
// "Dropped" means the nodes are never visited: new-delete destroys its maps
// (what a program without a heap must do); every other mode drops the
// memory under the maps at once.
// Usage: heap_tree_bench MODE [LIB] [--nodes N] [--threads T]
// Prints one line: RESULT mode=M build_ms=B drop_ms=D total_ms=S peak_rss_kb=R
#include <dlfcn.h>
#include <sys/resource.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory_resource>
#include <string>
#include <thread>
#include <vector>

namespace {

using key = std::uint64_t;
using clock_type = std::chrono::steady_clock;

// The heap APIs, found with dlsym so that this program links none of them.
struct heap_api {
  void* (*create)(void* lib_state) = nullptr;
  void* (*alloc)(void* heap, std::size_t n, std::size_t align) = nullptr;
  void (*dealloc)(void* heap, void* p) = nullptr;
  void (*drop)(void* heap) = nullptr;
};

void* g_lib = nullptr;
template <class F>
F sym(const char* name) {
  void* f = dlsym(g_lib, name);
  if (!f) {
    std::fprintf(stderr, "heap_tree_bench: %s not found: %s\n", name, dlerror());
    std::exit(2);
  }
  return reinterpret_cast<F>(f);
}

// tenon
void* (*t_new)(const void*);
void* (*t_malloc)(void*, std::size_t);
void* (*t_aligned)(void*, std::size_t, std::size_t);
void (*t_free)(void*, void*);
void (*t_destroy)(void*);
// mimalloc
void* (*m_new)();
void* (*m_malloc_aligned)(void*, std::size_t, std::size_t);
void (*m_free)(void*);
void (*m_destroy)(void*);
// jemalloc
int (*j_mallctl)(const char*, void*, std::size_t*, void*, std::size_t);
void* (*j_mallocx)(std::size_t, int);
void (*j_dallocx)(void*, int);
constexpr int kTcacheNone = 1 << 8;  // MALLOCX_TCACHE_NONE
int arena_flags(unsigned arena) { return static_cast<int>((arena + 1) << 20) | kTcacheNone; }  // MALLOCX_ARENA

heap_api load(const std::string& mode) {
  heap_api api;
  if (mode == "tenon-heap" || mode == "tenon-shared") {
    t_new = sym<void* (*)(const void*)>("tenon_heap_new");
    t_malloc = sym<void* (*)(void*, std::size_t)>("tenon_heap_malloc");
    t_aligned = sym<void* (*)(void*, std::size_t, std::size_t)>("tenon_heap_aligned_alloc");
    t_free = sym<void (*)(void*, void*)>("tenon_heap_free");
    t_destroy = sym<void (*)(void*)>("tenon_heap_destroy");
    api.create = [](void*) { return t_new(nullptr); };
    api.alloc = [](void* h, std::size_t n, std::size_t a) { return a <= 16 ? t_malloc(h, n) : t_aligned(h, a, n); };
    api.dealloc = [](void* h, void* p) { t_free(h, p); };
    api.drop = [](void* h) { t_destroy(h); };
  } else if (mode == "mimalloc-heap") {
    m_new = sym<void* (*)()>("mi_heap_new");
    m_malloc_aligned = sym<void* (*)(void*, std::size_t, std::size_t)>("mi_heap_malloc_aligned");
    m_free = sym<void (*)(void*)>("mi_free");
    m_destroy = sym<void (*)(void*)>("mi_heap_destroy");
    api.create = [](void*) { return m_new(); };
    api.alloc = [](void* h, std::size_t n, std::size_t a) { return m_malloc_aligned(h, n, a); };
    api.dealloc = [](void*, void* p) { m_free(p); };
    api.drop = [](void* h) { m_destroy(h); };
  } else if (mode == "jemalloc-arena") {
    j_mallctl = sym<int (*)(const char*, void*, std::size_t*, void*, std::size_t)>("mallctl");
    j_mallocx = sym<void* (*)(std::size_t, int)>("mallocx");
    j_dallocx = sym<void (*)(void*, int)>("dallocx");
    api.create = [](void*) -> void* {
      unsigned arena = 0;
      std::size_t len = sizeof arena;
      if (j_mallctl("arenas.create", &arena, &len, nullptr, 0) != 0) return nullptr;
      return reinterpret_cast<void*>(std::uintptr_t{arena} + 1);
    };
    api.alloc = [](void* h, std::size_t n, std::size_t) {
      return j_mallocx(n, arena_flags(static_cast<unsigned>(reinterpret_cast<std::uintptr_t>(h) - 1)));
    };
    api.dealloc = [](void*, void* p) { j_dallocx(p, kTcacheNone); };
    api.drop = [](void* h) {
      std::string name = "arena." + std::to_string(reinterpret_cast<std::uintptr_t>(h) - 1) + ".destroy";
      j_mallctl(name.c_str(), nullptr, nullptr, nullptr, 0);
    };
  }
  return api;
}

heap_api g_api;

// A memory_resource over one heap of g_api.
class api_resource : public std::pmr::memory_resource {
 public:
  explicit api_resource(void* heap) : heap_(heap) {}

 private:
  void* do_allocate(std::size_t n, std::size_t align) override {
    void* p = g_api.alloc(heap_, n, align);
    if (!p) throw std::bad_alloc();
    return p;
  }
  void do_deallocate(void* p, std::size_t, std::size_t) override { g_api.dealloc(heap_, p); }
  bool do_is_equal(const std::pmr::memory_resource& o) const noexcept override { return this == &o; }
  void* heap_;
};

// Keys in a scattered order, so that the tree is built by real inserts.
key key_at(std::size_t i, unsigned t) { return (i * 0x9e3779b97f4a7c15ull) ^ (std::uint64_t{t} << 56); }

template <class Map>
void fill(Map& m, std::size_t n, unsigned t) {
  for (std::size_t i = 0; i < n; ++i) m.emplace(key_at(i, t), i);
}

double ms_since(clock_type::time_point t0) {
  return std::chrono::duration<double, std::milli>(clock_type::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s MODE [LIB] [--nodes N] [--threads T]\n", argv[0]);
    return 2;
  }
  std::string mode = argv[1];
  std::size_t nodes = 10'000'000;
  unsigned threads = 4;
  const char* lib = nullptr;
  for (int i = 2; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--nodes") && i + 1 < argc) nodes = std::strtoull(argv[++i], nullptr, 10);
    else if (!std::strcmp(argv[i], "--threads") && i + 1 < argc) threads = static_cast<unsigned>(std::atoi(argv[++i]));
    else lib = argv[i];
  }
  bool heap_mode = mode == "tenon-heap" || mode == "tenon-shared" || mode == "mimalloc-heap" || mode == "jemalloc-arena";
  if (heap_mode) {
    if (!lib) {
      std::fprintf(stderr, "heap_tree_bench: %s needs the library\n", mode.c_str());
      return 2;
    }
    g_lib = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (!g_lib) {
      std::fprintf(stderr, "heap_tree_bench: %s\n", dlerror());
      return 2;
    }
    g_api = load(mode);
  } else if (mode != "new-delete" && mode != "pmr-monotonic") {
    std::fprintf(stderr, "heap_tree_bench: unknown mode %s\n", mode.c_str());
    return 2;
  }
  const std::size_t per_thread = nodes / threads;
  void* shared = mode == "tenon-shared" ? g_api.create(nullptr) : nullptr;

  // Each thread builds its map; the main thread times building (all threads
  // done) and dropping (all threads done) separately.
  std::vector<std::thread> pool;
  std::vector<double> drop_ms(threads);
  auto t0 = clock_type::now();
  double build_ms = 0;
  std::atomic<unsigned> built{0};
  std::atomic<bool> go_drop{false};
  for (unsigned t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      auto wait_drop = [&] {
        built.fetch_add(1);
        while (!go_drop.load()) std::this_thread::yield();
      };
      if (mode == "new-delete") {
        auto* m = new std::map<key, key>;
        fill(*m, per_thread, t);
        wait_drop();
        delete m;
      } else if (mode == "pmr-monotonic") {
        auto* res = new std::pmr::monotonic_buffer_resource;
        auto* m = new std::pmr::map<key, key>(res);
        fill(*m, per_thread, t);
        wait_drop();
        res->release();  // the nodes go at once; the map is never destroyed
        ::operator delete(m);
        delete res;
      } else {
        void* heap = shared ? shared : g_api.create(nullptr);
        if (!heap) std::abort();
        auto* res = new api_resource(heap);
        auto* m = new std::pmr::map<key, key>(res);
        fill(*m, per_thread, t);
        wait_drop();
        if (!shared) g_api.drop(heap);
        ::operator delete(m);
        delete res;
      }
    });
  while (built.load() < threads) std::this_thread::yield();
  build_ms = ms_since(t0);
  auto t1 = clock_type::now();
  go_drop.store(true);
  for (auto& th : pool) th.join();
  if (shared) g_api.drop(shared);
  double dropped_ms = ms_since(t1);
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  std::printf("RESULT mode=%s build_ms=%.1f drop_ms=%.1f total_ms=%.1f peak_rss_kb=%ld\n", mode.c_str(), build_ms,
              dropped_ms, build_ms + dropped_ms, ru.ru_maxrss);
  return 0;
}
