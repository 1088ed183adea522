// mass_pool_bench: create N small objects from T threads, link each to the
// previous one of its thread, then release all of them, then create them
// again; report creation time, release time, re-creation time and peak RSS as
// a Markdown table on stdout.
//
// Variants (each measured in its own child process, so peak RSS is its own):
//   mass_pool     tenon::mass_pool<E>, released with one clear (O(blocks))
//   mass_pool_dense  tenon::mass_pool<E>(tenon::dense_indices): indices
//                 exactly 0 .. n-1, one shared fetch_add per element
//   mass_pool_keep   mass_pool released with clear(tenon::keep_memory): the
//                 blocks stay mapped for the next fill, as malloc keeps freed
//                 memory in its arenas
//   atomic_slots  one global atomic counter handing out slots of one
//                 preallocated region: the simple design whose shared
//                 fetch_add is the bottleneck mass_pool avoids
//   new_glibc     new E per object, delete per object, glibc malloc
//   new_tenon     the same program re-executed with LD_PRELOAD=libtenon.so
//
// Usage: mass_pool_bench [--smoke] [--elements N] [--threads T] [--tenon PATH]
//                        [--sizes 16,64] [--no-warm]
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include "tenon/mass_pool.hpp"

namespace {

using clock_type = std::chrono::steady_clock;
double seconds_since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

// The object: a link to the thread's previous object (an index or a
// pointer) and payload, S bytes in all.
template <std::size_t S>
struct Elem {
  static_assert(S >= 16 && S % 8 == 0);
  std::uint64_t link;
  std::uint64_t payload[S / 8 - 1];
  Elem(std::uint64_t l, std::uint64_t v) noexcept : link(l) {
    for (auto& p : payload) p = v;
  }
};

// Starts `threads` threads that wait, runs body(t) on each at once, and
// returns the wall time from the start signal to the last join.
template <class Body>
double run_threads(unsigned threads, Body body) {
  std::atomic<bool> go{false};
  std::vector<std::thread> ts;
  for (unsigned t = 0; t < threads; ++t)
    ts.emplace_back([&, t] {
      go.wait(false, std::memory_order_acquire);
      body(t);
    });
  const auto t0 = clock_type::now();
  go.store(true, std::memory_order_release);
  go.notify_all();
  for (auto& th : ts) th.join();
  return seconds_since(t0);
}

std::uint64_t share(std::uint64_t n, unsigned threads, unsigned t) {
  return n / threads + (t < n % threads ? 1 : 0);
}

struct Result {
  double create_s = 0, release_s = 0;
  double recreate_s = 0;  // the second creation, after the release
  std::uint64_t check = 0;  // elements found again after creation
  double rss_after_mib = 0;  // resident set right after the release
};

// Current resident set from /proc/self/statm, in MiB.
double current_rss_mib() {
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (!f) return 0;
  unsigned long long size = 0, resident = 0;
  if (std::fscanf(f, "%llu %llu", &size, &resident) != 2) resident = 0;
  std::fclose(f);
  return double(resident) * double(sysconf(_SC_PAGESIZE)) / (1024.0 * 1024.0);
}

template <std::size_t S>
Result bench_pool(std::uint64_t n, unsigned threads, bool dense, bool keep) {
  using E = Elem<S>;
  auto pool = dense ? std::make_unique<tenon::mass_pool<E>>(tenon::dense_indices)
                    : std::make_unique<tenon::mass_pool<E>>();
  auto fill = [&] {
    return run_threads(threads, [&](unsigned t) {
      std::uint64_t prev = TENON_POOL_NO_INDEX;
      for (std::uint64_t i = share(n, threads, t); i > 0; --i) prev = pool->emplace(prev, i).index;
    });
  };
  Result r;
  r.create_s = fill();
  r.check = pool->size();
  const auto t0 = clock_type::now();
  if (keep)
    pool->clear(tenon::keep_memory);  // blocks stay mapped for the next fill
  else
    pool->clear();  // every block back to the OS
  r.release_s = seconds_since(t0);
  r.rss_after_mib = current_rss_mib();
  r.recreate_s = fill();
  if (pool->size() != r.check) r.check = 0;
  return r;
}

template <std::size_t S>
Result bench_atomic_slots(std::uint64_t n, unsigned threads) {
  using E = Elem<S>;
  // Preallocated (lazily committed, huge-page advised) like the pool's blocks,
  // so the only difference is one shared counter bumped per element.
  const std::size_t bytes = n * sizeof(E);
  alignas(64) static std::atomic<std::uint64_t> next{0};
  char* base = nullptr;
  auto fill = [&] {
    base = static_cast<char*>(tenon_pool_reserve_block(bytes, 1));
    if (!base) std::abort();
    next = 0;
    return run_threads(threads, [&](unsigned t) {
      std::uint64_t prev = ~0ull;
      for (std::uint64_t i = share(n, threads, t); i > 0; --i) {
        const std::uint64_t k = next.fetch_add(1, std::memory_order_relaxed);
        ::new (base + k * sizeof(E)) E(prev, i);
        prev = k;
      }
    });
  };
  Result r;
  r.create_s = fill();
  r.check = next.load();
  const auto t0 = clock_type::now();
  tenon_pool_release_block(base, bytes);
  r.release_s = seconds_since(t0);
  r.rss_after_mib = current_rss_mib();
  r.recreate_s = fill();
  tenon_pool_release_block(base, bytes);
  return r;
}

template <std::size_t S>
Result bench_new(std::uint64_t n, unsigned threads) {
  using E = Elem<S>;
  std::vector<E*> heads(threads, nullptr);
  std::vector<std::uint64_t> freed(threads, 0);
  auto create = [&] {
    return run_threads(threads, [&](unsigned t) {
      E* head = nullptr;
      for (std::uint64_t i = share(n, threads, t); i > 0; --i)
        head = new E(reinterpret_cast<std::uint64_t>(head), i);
      heads[t] = head;
    });
  };
  auto release = [&] {
    return run_threads(threads, [&](unsigned t) {
      std::uint64_t k = 0;
      for (E* e = heads[t]; e;) {
        E* next = reinterpret_cast<E*>(e->link);
        delete e;
        e = next;
        ++k;
      }
      freed[t] = k;
    });
  };
  Result r;
  r.create_s = create();
  r.release_s = release();
  for (auto f : freed) r.check += f;
  r.rss_after_mib = current_rss_mib();
  r.recreate_s = create();
  release();
  return r;
}

Result run_variant(const std::string& v, std::size_t size, std::uint64_t n, unsigned threads) {
  const bool s16 = size == 16;
  if (v.rfind("mass_pool", 0) == 0) {
    const bool dense = v == "mass_pool_dense", keep = v == "mass_pool_keep";
    return s16 ? bench_pool<16>(n, threads, dense, keep) : bench_pool<64>(n, threads, dense, keep);
  }
  if (v == "atomic_slots")
    return s16 ? bench_atomic_slots<16>(n, threads) : bench_atomic_slots<64>(n, threads);
  return s16 ? bench_new<16>(n, threads) : bench_new<64>(n, threads);
}

struct Row {
  std::string variant;
  std::size_t size = 0;
  bool ok = false;
  std::string note;
  Result r;
  double peak_mib = 0;
};

// Runs one variant in a fresh child (this program with --child ...), with
// LD_PRELOAD set for new_tenon; peak RSS comes from the child's rusage.
Row run_child(const std::string& variant, std::size_t size, std::uint64_t n, unsigned threads,
              const std::string& tenon_so) {
  Row row;
  row.variant = variant;
  row.size = size;
  int fds[2];
  if (pipe(fds) != 0) std::abort();
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(fds[1], 1);
    close(fds[0]);
    close(fds[1]);
    if (variant == "new_tenon") setenv("LD_PRELOAD", tenon_so.c_str(), 1);
    else unsetenv("LD_PRELOAD");
    const std::string s = std::to_string(size), ns = std::to_string(n), ts = std::to_string(threads);
    execl("/proc/self/exe", "mass_pool_bench", "--child", variant.c_str(), s.c_str(), ns.c_str(),
          ts.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  close(fds[1]);
  std::string out;
  char buf[256];
  for (ssize_t k; (k = read(fds[0], buf, sizeof buf)) > 0;) out.append(buf, std::size_t(k));
  close(fds[0]);
  int status = 0;
  rusage ru{};
  wait4(pid, &status, 0, &ru);
  row.peak_mib = double(ru.ru_maxrss) / 1024.0;  // ru_maxrss is in KiB on Linux
  unsigned long long check = 0;
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0 &&
      std::sscanf(out.c_str(), "RESULT %lf %lf %llu %lf %lf", &row.r.create_s, &row.r.release_s,
                  &check, &row.r.rss_after_mib, &row.r.recreate_s) == 5) {
    row.r.check = check;
    row.ok = check == n;
    if (!row.ok) row.note = "wrong element count " + std::to_string(check);
  } else {
    row.note = "child failed (status " + std::to_string(status) + ")";
  }
  return row;
}

std::uint64_t parse_count(const char* s) {
  char* end = nullptr;
  double v = std::strtod(s, &end);
  if (end && (*end == 'M' || *end == 'm')) v *= 1e6;
  if (end && (*end == 'k' || *end == 'K')) v *= 1e3;
  return std::uint64_t(v);
}

std::string ratio(double r) {
  char buf[32];
  if (!(r < 1e9)) return "-";  // a time below the clock's resolution
  std::snprintf(buf, sizeof buf, r >= 10 ? "%.0fx" : "%.2fx", r);
  return buf;
}

int usage() {
  std::fprintf(stderr,
               "usage: mass_pool_bench [--smoke] [--elements N] [--threads T] [--tenon PATH] "
               "[--sizes 16,64] [--no-warm]\n");
  return 2;
}

// Touches `bytes` of fresh memory once and gives it back. On a virtual
// machine the first process to touch guest memory pays the hypervisor's cost
// of backing it (measured here: 1.4 s of system time instead of 0.05 s for
// 640 MB), which would otherwise land on whichever variant runs first.
double warm_memory(std::size_t bytes) {
  const auto t0 = clock_type::now();
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return 0;
  madvise(p, bytes, MADV_HUGEPAGE);
  for (std::size_t off = 0; off < bytes; off += 4096) static_cast<volatile char*>(p)[off] = 1;
  munmap(p, bytes);
  return seconds_since(t0);
}

std::string thp_mode() {
  FILE* f = std::fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
  if (!f) return "unknown";
  char line[128] = {};
  if (!std::fgets(line, sizeof line, f)) line[0] = 0;
  std::fclose(f);
  std::string s(line);
  auto a = s.find('['), b = s.find(']');
  return a != std::string::npos && b != std::string::npos ? s.substr(a + 1, b - a - 1) : s;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 6 && std::strcmp(argv[1], "--child") == 0) {
    const Result r = run_variant(argv[2], std::strtoul(argv[3], nullptr, 10),
                                 std::strtoull(argv[4], nullptr, 10), unsigned(std::strtoul(argv[5], nullptr, 10)));
    std::printf("RESULT %.9f %.9f %llu %.1f %.9f\n", r.create_s, r.release_s,
                (unsigned long long)r.check, r.rss_after_mib, r.recreate_s);
    return 0;
  }
  std::uint64_t n = 80'000'000;
  unsigned threads = 8;
  std::string tenon_so =
#ifdef TENON_SO_PATH
      TENON_SO_PATH;
#else
      "";
#endif
  std::vector<std::size_t> sizes{16, 64};
  bool warm = true;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    if (a == "--smoke") {
      n = 200'000;
      threads = 4;
    } else if (a == "--no-warm") {
      warm = false;
    } else if (a == "--elements") {
      const char* v = value();
      if (!v) return usage();
      n = parse_count(v);
    } else if (a == "--threads") {
      const char* v = value();
      if (!v) return usage();
      threads = unsigned(std::strtoul(v, nullptr, 10));
    } else if (a == "--tenon") {
      const char* v = value();
      if (!v) return usage();
      tenon_so = v;
    } else if (a == "--sizes") {
      const char* v = value();
      if (!v) return usage();
      sizes.clear();
      for (char* p = const_cast<char*>(v); *p;) {
        sizes.push_back(std::strtoul(p, &p, 10));
        if (*p == ',') ++p;
      }
    } else {
      return usage();
    }
  }
  for (auto s : sizes)
    if (s != 16 && s != 64) {
      std::fprintf(stderr, "mass_pool_bench: sizes are 16 and 64\n");
      return 2;
    }
  if (threads == 0 || n < threads) return usage();
  const bool have_tenon = !tenon_so.empty() && access(tenon_so.c_str(), R_OK) == 0;

  std::printf("**mass_pool_bench**: %llu elements from %u threads, %ld CPUs, THP %s\n\n",
              (unsigned long long)n, threads, sysconf(_SC_NPROCESSORS_ONLN), thp_mode().c_str());
  if (warm) {
    // The largest footprint of any variant: glibc's 16-byte header per object.
    std::size_t biggest = 0;
    for (auto s : sizes) biggest = std::max<std::size_t>(biggest, n * (s + 16));
    const double w = warm_memory(biggest);
    std::printf("Warmed %.2f GiB of memory first in %.2f s (--no-warm skips this).\n\n",
                double(biggest) / (1u << 30), w);
  }
  std::printf("| variant | elem B | create s | release s | re-create s | peak RSS MiB | "
              "peak RSS / elem bytes | RSS after release MiB | create vs new_glibc | "
              "release vs new_glibc | re-create vs new_glibc |\n");
  std::printf("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  bool all_ok = true;
  for (auto size : sizes) {
    std::vector<Row> rows;
    for (const char* v : {"new_glibc", "new_tenon", "atomic_slots", "mass_pool", "mass_pool_dense",
                          "mass_pool_keep"}) {
      if (std::string(v) == "new_tenon" && !have_tenon) {
        Row skipped;
        skipped.variant = v;
        skipped.size = size;
        skipped.note = "skipped: no libtenon.so (use --tenon PATH)";
        rows.push_back(skipped);
        continue;
      }
      rows.push_back(run_child(v, size, n, threads, tenon_so));
      if (!rows.back().ok) all_ok = false;
      std::fflush(stdout);
    }
    const Row& glibc = rows[0];
    const double elem_mib = double(n) * double(size) / (1024.0 * 1024.0);
    for (const Row& row : rows) {
      if (!row.ok) {
        std::printf("| %s | %zu | - | - | - | - | - | - | - | - | - | %s\n", row.variant.c_str(),
                    size, row.note.c_str());
        continue;
      }
      std::printf("| %s | %zu | %.3f | %.5f | %.3f | %.1f | %.3f | %.1f |", row.variant.c_str(), size,
                  row.r.create_s, row.r.release_s, row.r.recreate_s, row.peak_mib,
                  row.peak_mib / elem_mib, row.r.rss_after_mib);
      if (glibc.ok)
        std::printf(" %.2fx | %s | %.2fx |\n", glibc.r.create_s / row.r.create_s,
                    ratio(glibc.r.release_s / row.r.release_s).c_str(),
                    glibc.r.recreate_s / row.r.recreate_s);
      else
        std::printf(" - | - | - |\n");
    }
  }
  std::printf("\nPeak RSS is the child process's whole maximum resident set (program and\n"
              "libraries included); elem bytes = elements x element size. new_* rows link\n"
              "objects through their own pointers, so they need no extra pointer array.\n"
              "Release times include giving the memory back to the OS where the variant\n"
              "does (see RSS after release); glibc and tenon keep freed memory in their\n"
              "arenas, and so does mass_pool_keep. Re-create is a second creation right\n"
              "after the release, where kept memory saves the page faults.\n");
  return all_ok ? 0 : 1;
}
