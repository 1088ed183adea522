// mass_pool_bench: create N small objects from T threads, link each to the
// previous one of its thread, then release all of them, then create them
// again; report creation time, release time, re-creation time and peak RSS as
// a Markdown table on stdout.
//
// Variants (each measured in its own child process, so peak RSS is its own):
//   mass_pool     tenon::mass_pool<E>, released with one clear (O(blocks))
//   mass_pool_dense  tenon::mass_pool<E>(tenon::dense_indices): indices
//                 exactly 0 .. n-1, one shared fetch_add per element
//   mass_pool_n   mass_pool filled with emplace_n (each thread claims up to
//                 64 slots of its lane at once, then fills them)
//   mass_pool_keep   mass_pool released with clear(tenon::keep_memory): the
//                 blocks stay mapped for the next fill, as malloc keeps freed
//                 memory in its arenas
//   atomic_slots  one global atomic counter handing out slots of one
//                 preallocated region: the simple design whose shared
//                 fetch_add is the bottleneck mass_pool avoids
//   writes_only   the floor of any creation from fresh memory: each thread
//                 writes its share of the elements into its own part of one
//                 such region, no claim at all (what is left is the page
//                 faults, the kernel's zeroing of fresh pages and the
//                 stores); its "create vs new_tenon" is the best ratio any
//                 pool could reach on this machine
//   new_glibc     new E per object, delete per object, glibc malloc
//   new_tenon     the same program re-executed with LD_PRELOAD=libtenon.so
//
// With --sort, each variant then sorts its objects by payload (the pool
// through its iterators, the new_* rows through a vector of pointers they
// gather first, atomic_slots as one array) and reports the sort's time.
//
// Without --elements, two configurations run: 8 million 16-byte elements
// from 8 threads (1 million each) with --sort, then 80 million of 16 and of
// 64 bytes. --repeat R runs every variant R times, interleaved, and reports
// medians, the spread of the creation times, and the creation ratios as the
// median of the ratios of runs made back to back.
//
// Usage: mass_pool_bench [--smoke] [--elements N] [--threads T] [--tenon PATH]
//                        [--sizes 16,64] [--sort] [--repeat R] [--no-warm]
//                        [--variants new_glibc,new_tenon,mass_pool]
// (--variants: only those rows; new_glibc and new_tenon stay the ratios' bases,
// so leave them in to get ratios.)
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
#include <algorithm>
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

// User + system CPU seconds of the whole process (every thread, joined
// ones included).
double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + double(u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
}

// Starts `threads` threads that wait, runs body(t) on each at once, and
// returns the wall time from the start signal to the last join; the CPU time
// the process spent meanwhile goes to *cpu_s. On this shared machine the CPU
// time is the steadier of the two: wall time also counts other jobs' turns.
template <class Body>
double run_threads(unsigned threads, Body body, double* cpu_s = nullptr) {
  std::atomic<bool> go{false};
  std::vector<std::thread> ts;
  for (unsigned t = 0; t < threads; ++t)
    ts.emplace_back([&, t] {
      go.wait(false, std::memory_order_acquire);
      body(t);
    });
  const double c0 = cpu_seconds();
  const auto t0 = clock_type::now();
  go.store(true, std::memory_order_release);
  go.notify_all();
  for (auto& th : ts) th.join();
  const double wall = seconds_since(t0);
  if (cpu_s) *cpu_s = cpu_seconds() - c0;
  return wall;
}

std::uint64_t share(std::uint64_t n, unsigned threads, unsigned t) {
  return n / threads + (t < n % threads ? 1 : 0);
}

// Where thread t's share starts when the shares lie side by side: after the
// shares of threads 0 .. t-1.
std::uint64_t share_start(std::uint64_t n, unsigned threads, unsigned t) {
  return t * (n / threads) + std::min<std::uint64_t>(t, n % threads);
}

struct Result {
  double create_s = 0, release_s = 0;
  double recreate_s = 0;  // the second creation, after the release
  double create_cpu_s = 0;  // CPU time (all threads) of the first creation
  std::uint64_t check = 0;  // elements found again after creation
  double rss_after_mib = 0;  // resident set right after the release
  double sort_s = 0;  // sorting the objects by payload, right after creation (--sort)
};

// The order --sort puts the objects in: by payload (each thread counts down
// from its share, so the threads' objects interleave).
template <class E>
bool by_payload(const E& a, const E& b) noexcept {
  return a.payload[0] < b.payload[0];
}

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
Result bench_pool(std::uint64_t n, unsigned threads, bool dense, bool keep, bool batch, bool sort) {
  using E = Elem<S>;
  auto pool = dense ? std::make_unique<tenon::mass_pool<E>>(tenon::dense_indices)
                    : std::make_unique<tenon::mass_pool<E>>();
  auto fill = [&](double* cpu_s = nullptr) {
    return run_threads(
        threads,
        [&](unsigned t) {
          std::uint64_t prev = TENON_POOL_NO_INDEX;
          std::uint64_t i = share(n, threads, t);
          if (batch) {
            pool->emplace_n(i, [&](std::uint32_t index) noexcept {
              const std::uint64_t link = prev;
              prev = index;
              return E(link, i--);
            });
            return;
          }
          for (; i > 0; --i) prev = pool->emplace(prev, i).index;
        },
        cpu_s);
  };
  Result r;
  r.create_s = fill(&r.create_cpu_s);
  r.check = pool->size();
  if (sort) {
    const auto ts = clock_type::now();
    std::sort(pool->begin(), pool->end(), by_payload<E>);
    r.sort_s = seconds_since(ts);
    if (!std::is_sorted(pool->begin(), pool->end(), by_payload<E>)) r.check = 0;
  }
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

// Preallocated (lazily committed, huge-page advised) like the pool's blocks,
// so the only difference is how a slot is claimed: one shared counter bumped
// per element (atomic_slots), or none, each thread writing its own share
// (writes_only).
template <std::size_t S>
Result bench_preallocated(std::uint64_t n, unsigned threads, bool sort, bool shared_counter) {
  using E = Elem<S>;
  const std::size_t bytes = n * sizeof(E);
  alignas(64) static std::atomic<std::uint64_t> next{0};
  char* base = nullptr;
  auto fill = [&](double* cpu_s = nullptr) {
    base = static_cast<char*>(tenon_pool_reserve_block(bytes, 1));
    if (!base) std::abort();
    next = 0;
    return run_threads(
        threads,
        [&](unsigned t) {
          std::uint64_t prev = ~0ull;
          const std::uint64_t mine = share(n, threads, t);
          if (!shared_counter) {
            std::uint64_t k = share_start(n, threads, t);
            for (std::uint64_t i = mine; i > 0; --i, ++k) {
              ::new (base + k * sizeof(E)) E(prev, i);
              prev = k;
            }
            next.fetch_add(mine, std::memory_order_relaxed);
            return;
          }
          for (std::uint64_t i = mine; i > 0; --i) {
            const std::uint64_t k = next.fetch_add(1, std::memory_order_relaxed);
            ::new (base + k * sizeof(E)) E(prev, i);
            prev = k;
          }
        },
        cpu_s);
  };
  Result r;
  r.create_s = fill(&r.create_cpu_s);
  r.check = next.load();
  if (sort) {
    E* first = reinterpret_cast<E*>(base);
    const auto ts = clock_type::now();
    std::sort(first, first + n, by_payload<E>);
    r.sort_s = seconds_since(ts);
    if (!std::is_sorted(first, first + n, by_payload<E>)) r.check = 0;
  }
  const auto t0 = clock_type::now();
  tenon_pool_release_block(base, bytes);
  r.release_s = seconds_since(t0);
  r.rss_after_mib = current_rss_mib();
  r.recreate_s = fill();
  tenon_pool_release_block(base, bytes);
  return r;
}

template <std::size_t S>
Result bench_new(std::uint64_t n, unsigned threads, bool sort) {
  using E = Elem<S>;
  std::vector<E*> heads(threads, nullptr);
  std::vector<std::uint64_t> freed(threads, 0);
  auto create = [&](double* cpu_s = nullptr) {
    return run_threads(
        threads,
        [&](unsigned t) {
          E* head = nullptr;
          for (std::uint64_t i = share(n, threads, t); i > 0; --i)
            head = new E(reinterpret_cast<std::uint64_t>(head), i);
          heads[t] = head;
        },
        cpu_s);
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
  bool sorted_ok = true;
  r.create_s = create(&r.create_cpu_s);
  if (sort) {
    // What a program built on new does to sort its objects: gather
    // pointers, sort them by the objects' payload (the array is part of the
    // cost, and of the peak RSS).
    const auto ts = clock_type::now();
    std::vector<E*> all;
    all.reserve(n);
    for (E* head : heads)
      for (E* e = head; e; e = reinterpret_cast<E*>(e->link)) all.push_back(e);
    auto less = [](const E* a, const E* b) { return by_payload(*a, *b); };
    std::sort(all.begin(), all.end(), less);
    r.sort_s = seconds_since(ts);
    sorted_ok = all.size() == n && std::is_sorted(all.begin(), all.end(), less);
  }
  r.release_s = release();
  for (auto f : freed) r.check += f;
  if (!sorted_ok) r.check = 0;
  r.rss_after_mib = current_rss_mib();
  r.recreate_s = create();
  release();
  return r;
}

Result run_variant(const std::string& v, std::size_t size, std::uint64_t n, unsigned threads, bool sort) {
  const bool s16 = size == 16;
  if (v.rfind("mass_pool", 0) == 0) {
    const bool dense = v == "mass_pool_dense", keep = v == "mass_pool_keep", batch = v == "mass_pool_n";
    return s16 ? bench_pool<16>(n, threads, dense, keep, batch, sort)
               : bench_pool<64>(n, threads, dense, keep, batch, sort);
  }
  if (v == "atomic_slots" || v == "writes_only") {
    const bool shared = v == "atomic_slots";
    return s16 ? bench_preallocated<16>(n, threads, sort, shared) : bench_preallocated<64>(n, threads, sort, shared);
  }
  return s16 ? bench_new<16>(n, threads, sort) : bench_new<64>(n, threads, sort);
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
              bool sort, const std::string& tenon_so) {
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
          ts.c_str(), sort ? "1" : "0", static_cast<char*>(nullptr));
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
      std::sscanf(out.c_str(), "RESULT %lf %lf %llu %lf %lf %lf %lf", &row.r.create_s, &row.r.release_s,
                  &check, &row.r.rss_after_mib, &row.r.recreate_s, &row.r.sort_s, &row.r.create_cpu_s) == 7) {
    row.r.check = check;
    row.ok = check == n;
    if (!row.ok) row.note = "wrong element count (or order after the sort) " + std::to_string(check);
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

int usage() {
  std::fprintf(stderr,
               "usage: mass_pool_bench [--smoke] [--elements N] [--threads T] [--tenon PATH] "
               "[--sizes 16,64] [--sort] [--repeat R] [--no-warm] [--variants a,b,...]\n");
  return 2;
}

// Touches `bytes` of fresh memory once and gives it back. On a virtual
// machine the first process to touch guest memory pays the hypervisor's cost
// of backing it (measured here: 1.4 s of system time instead of 0.05 s for
// 640 MB), which would otherwise land on whichever variant runs first. With
// free page reporting (this VM reports free 8 MiB runs to the host after
// about 2 s), memory freed a few seconds ago is cold again, so the parent
// warms right before every child, not once.
double warm_memory(std::size_t bytes) {
  const auto t0 = clock_type::now();
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return 0;
  madvise(p, bytes, MADV_HUGEPAGE);
  for (std::size_t off = 0; off < bytes; off += 4096) static_cast<volatile char*>(p)[off] = 1;
  munmap(p, bytes);
  return seconds_since(t0);
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

// One configuration: every variant `repeat` times, interleaved (round r runs
// each variant once, back to back), one table per element size.
struct Config {
  std::uint64_t n = 0;
  unsigned threads = 8;
  std::vector<std::size_t> sizes;
  bool sort = false;
  unsigned repeat = 1;
  std::string only;  // --variants: a comma-separated list, empty for all
};

bool wanted(const Config& c, const char* variant) {
  if (c.only.empty()) return true;
  const std::string list = "," + c.only + ",";
  return list.find("," + std::string(variant) + ",") != std::string::npos;
}

const char* const kVariants[] = {"new_glibc", "new_tenon", "atomic_slots", "writes_only", "mass_pool",
                                 "mass_pool_n", "mass_pool_dense", "mass_pool_keep"};
constexpr std::size_t kNumVariants = sizeof(kVariants) / sizeof(kVariants[0]);

bool run_config(const Config& c, const std::string& tenon_so, bool have_tenon, bool warm) {
  std::printf("**mass_pool_bench**: %llu elements from %u threads%s, %ld CPUs, THP %s, %u run%s of each "
              "variant\n\n",
              (unsigned long long)c.n, c.threads, c.sort ? ", then std::sort by payload" : "",
              sysconf(_SC_NPROCESSORS_ONLN), thp_mode().c_str(), c.repeat, c.repeat == 1 ? "" : "s");
  std::size_t biggest = 0;  // the largest footprint of any variant: glibc's 16-byte header per object
  for (auto s : c.sizes) biggest = std::max<std::size_t>(biggest, c.n * (s + 16));
  if (warm)
    std::printf("Before each run the parent touches and frees %.2f GiB (--no-warm skips this).\n\n",
                double(biggest) / (1u << 30));
  std::printf("| variant | elem B | create s |%s create CPU s | release s | re-create s |%s peak RSS MiB | "
              "peak RSS / elem bytes | RSS after release MiB | create vs new_glibc | create vs new_tenon | "
              "create CPU vs new_tenon | release vs new_glibc | re-create vs new_glibc |\n",
              c.repeat > 1 ? " create min-max s |" : "", c.sort ? " sort s |" : "");
  std::printf("|---|---:|---:|%s---:|---:|---:|%s---:|---:|---:|---:|---:|---:|---:|---:|\n",
              c.repeat > 1 ? "---:|" : "", c.sort ? "---:|" : "");
  std::fflush(stdout);
  bool all_ok = true;
  std::string per_round;  // the paired creation ratios of every round, below the table
  for (auto size : c.sizes) {
    std::vector<Row> runs[kNumVariants];
    for (unsigned r = 0; r < c.repeat; ++r)
      for (std::size_t v = 0; v < kNumVariants; ++v) {
        if (std::string(kVariants[v]) == "new_tenon" && !have_tenon) continue;
        if (!wanted(c, kVariants[v])) continue;
        if (warm) warm_memory(biggest);
        runs[v].push_back(run_child(kVariants[v], size, c.n, c.threads, c.sort, tenon_so));
        if (!runs[v].back().ok) all_ok = false;
      }
    // Paired ratio: base over variant in the same round, median over rounds.
    auto paired = [&](std::size_t base, std::size_t v, double Result::*field) -> double {
      std::vector<double> q;
      for (unsigned r = 0; r < runs[v].size() && r < runs[base].size(); ++r)
        if (runs[v][r].ok && runs[base][r].ok && runs[v][r].r.*field > 0)
          q.push_back(runs[base][r].r.*field / runs[v][r].r.*field);
      return q.empty() ? -1 : median(q);
    };
    const double elem_mib = double(c.n) * double(size) / (1024.0 * 1024.0);
    for (std::size_t v = 0; v < kNumVariants; ++v) {
      if (!wanted(c, kVariants[v])) continue;
      if (runs[v].empty()) {
        std::printf("| %s | %zu | skipped: no libtenon.so (use --tenon PATH) |\n", kVariants[v], size);
        continue;
      }
      std::vector<double> create, create_cpu, release, recreate, sort_s, peak, after;
      std::string note;
      for (const Row& row : runs[v]) {
        if (!row.ok) {
          note = row.note;
          continue;
        }
        create.push_back(row.r.create_s);
        create_cpu.push_back(row.r.create_cpu_s);
        release.push_back(row.r.release_s);
        recreate.push_back(row.r.recreate_s);
        sort_s.push_back(row.r.sort_s);
        peak.push_back(row.peak_mib);
        after.push_back(row.r.rss_after_mib);
      }
      if (create.empty()) {
        std::printf("| %s | %zu | failed: %s |\n", kVariants[v], size, note.c_str());
        continue;
      }
      std::printf("| %s | %zu | %.3f |", kVariants[v], size, median(create));
      if (c.repeat > 1)
        std::printf(" %.3f-%.3f |", *std::min_element(create.begin(), create.end()),
                    *std::max_element(create.begin(), create.end()));
      std::printf(" %.3f | %.5f | %.3f |", median(create_cpu), median(release), median(recreate));
      if (c.sort) std::printf(" %.3f |", median(sort_s));
      const double pk = median(peak);
      std::printf(" %.1f | %.3f | %.1f |", pk, pk / elem_mib, median(after));
      // Release ratios span 1x to 10^5x (ratio() rounds the big ones);
      // the others get two decimals.
      auto cell = [](double x, bool wide_range) {
        if (x < 0) return std::string("-");
        if (wide_range) return ratio(x);
        char b[32];
        std::snprintf(b, sizeof b, "%.2fx", x);
        return std::string(b);
      };
      const std::size_t tenon_v = 1;
      std::printf(" %s | %s | %s | %s | %s |%s\n", cell(paired(0, v, &Result::create_s), false).c_str(),
                  cell(paired(tenon_v, v, &Result::create_s), false).c_str(),
                  cell(paired(tenon_v, v, &Result::create_cpu_s), false).c_str(),
                  cell(paired(0, v, &Result::release_s), true).c_str(),
                  cell(paired(0, v, &Result::recreate_s), false).c_str(),
                  note.empty() ? "" : (" " + note).c_str());
      std::fflush(stdout);
      if (c.repeat > 1 && v > tenon_v) {
        char b[64];
        for (std::size_t base : {std::size_t{0}, tenon_v}) {
          std::snprintf(b, sizeof b, "- %s %zu B, create %s / %s by round:", kVariants[v], size, kVariants[base],
                        kVariants[v]);
          std::string line = b;
          for (unsigned r = 0; r < runs[v].size() && r < runs[base].size(); ++r) {
            const bool both = runs[v][r].ok && runs[base][r].ok && runs[v][r].r.create_s > 0;
            std::snprintf(b, sizeof b, " %.2f", both ? runs[base][r].r.create_s / runs[v][r].r.create_s : 0.0);
            line += both ? b : " -";
          }
          if (!runs[base].empty()) per_round += line + "\n";
        }
      }
    }
  }
  std::printf("\n%s%s", per_round.c_str(), per_round.empty() ? "" : "\n");
  return all_ok;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 7 && std::strcmp(argv[1], "--child") == 0) {
    const Result r = run_variant(argv[2], std::strtoul(argv[3], nullptr, 10), std::strtoull(argv[4], nullptr, 10),
                                 unsigned(std::strtoul(argv[5], nullptr, 10)), std::strcmp(argv[6], "1") == 0);
    std::printf("RESULT %.9f %.9f %llu %.1f %.9f %.9f %.9f\n", r.create_s, r.release_s,
                (unsigned long long)r.check, r.rss_after_mib, r.recreate_s, r.sort_s, r.create_cpu_s);
    return 0;
  }
  Config one;
  one.n = 0;  // not given: the two default configurations
  one.sizes = {16, 64};
  bool sizes_given = false, smoke = false;
  std::string tenon_so =
#ifdef TENON_SO_PATH
      TENON_SO_PATH;
#else
      "";
#endif
  bool warm = true;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    if (a == "--smoke") {
      smoke = true;
    } else if (a == "--no-warm") {
      warm = false;
    } else if (a == "--sort") {
      one.sort = true;
    } else if (a == "--repeat") {
      const char* v = value();
      if (!v || std::atoi(v) < 1) return usage();
      one.repeat = unsigned(std::atoi(v));
    } else if (a == "--elements") {
      const char* v = value();
      if (!v) return usage();
      one.n = parse_count(v);
    } else if (a == "--threads") {
      const char* v = value();
      if (!v) return usage();
      one.threads = unsigned(std::strtoul(v, nullptr, 10));
    } else if (a == "--variants") {
      const char* v = value();
      if (!v) return usage();
      one.only = v;
    } else if (a == "--tenon") {
      const char* v = value();
      if (!v) return usage();
      tenon_so = v;
    } else if (a == "--sizes") {
      const char* v = value();
      if (!v) return usage();
      one.sizes.clear();
      sizes_given = true;
      for (char* p = const_cast<char*>(v); *p;) {
        one.sizes.push_back(std::strtoul(p, &p, 10));
        if (*p == ',') ++p;
      }
    } else {
      return usage();
    }
  }
  for (auto s : one.sizes)
    if (s != 16 && s != 64) {
      std::fprintf(stderr, "mass_pool_bench: sizes are 16 and 64\n");
      return 2;
    }
  std::vector<Config> configs;
  if (smoke) {
    one.n = 200'000;
    one.threads = 4;
    one.sort = true;
    configs.push_back(one);
  } else if (one.n != 0) {
    configs.push_back(one);
  } else {
    // The small configuration with the sort (8 threads x 1 M of 16 B), then the full size.
    Config small = one;
    small.n = 8'000'000;
    if (!sizes_given) small.sizes = {16};
    small.sort = true;
    Config full = one;
    full.n = 80'000'000;
    configs = {small, full};
  }
  for (const Config& c : configs)
    if (c.threads == 0 || c.n < c.threads) return usage();
  const bool have_tenon = !tenon_so.empty() && access(tenon_so.c_str(), R_OK) == 0;

  bool all_ok = true;
  for (const Config& c : configs) all_ok = run_config(c, tenon_so, have_tenon, warm) && all_ok;
  std::printf("Peak RSS is the child process's whole maximum resident set (program and\n"
              "libraries included; with the sort, the new_* rows' pointer array too);\n"
              "elem bytes = elements x element size. new_* rows link objects through\n"
              "their own pointers, so they need no extra pointer array to be created.\n"
              "Release times include giving the memory back to the OS where the variant\n"
              "does (see RSS after release); glibc and tenon keep freed memory in their\n"
              "arenas, and so does mass_pool_keep. Re-create is a second creation right\n"
              "after the release, where kept memory saves the page faults. Create CPU is\n"
              "the user and system time of all threads during the creation (wall time\n"
              "on a shared machine also counts other jobs' turns). Ratios are medians\n"
              "of per-run ratios (the runs of one round are made back to back).\n");
  return all_ok ? 0 : 1;
}
