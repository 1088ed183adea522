// freeze_probe: proves from outside that a thread suspended at an arbitrary
// instruction inside the allocator does not stop the other threads.
//
// The probe is NOT linked with tenon: it calls malloc/free/realloc/new and the
// allocator under test is swapped in with LD_PRELOAD. T worker threads allocate
// and free random sizes, handing blocks to one another through lock-free
// exchange slots (so many frees are cross-thread), each publishing a progress
// counter. A controller freezes one worker at a time with a signal (tgkill +
// a handler that parks on a futex until released), then checks that every
// OTHER worker completes at least K more operations before a deadline. A freeze
// where some other worker does not is counted as stalled.
//
// With --churn, one more thread keeps creating short-lived threads that
// allocate, hand blocks to the workers and exit, and every 4th freeze targets
// the current one of them: freezes then also land in the allocator's thread
// start (first-use heap setup) and thread-exit (abandon) paths, and the
// workers free blocks of heaps whose thread is gone.
//
// With --foreign N, one acquisition in N takes its block from glibc's own
// allocator (__libc_malloc) instead: a small block freed later with free()
// (often by another thread), a small block grown with realloc(), or now and
// then a block big enough that glibc maps it on its own (>= 256 KiB). The
// allocator under test must handle those pointers without waiting for glibc:
// glibc's free and realloc take its arena locks, so a victim frozen inside
// them would stop every other thread that needs the same arena. Each worker
// allocates from its own glibc arena, so the probe's own __libc_malloc calls
// never wait for another worker. glibc's per-thread caches hide most of its
// locking; GLIBC_TUNABLES=glibc.malloc.tcache_count=0:glibc.malloc.mxfast=0
// (set by the CTest entry) makes every glibc call on these blocks take the
// lock, so that a path that calls glibc is caught in fewer freezes. The small
// blocks are 16-48 bytes because an allocator may keep such blocks instead of
// returning them to glibc (tenon does); the probe's memory then grows by a
// few MiB a second.
//
// With --heaps N (tenon only: its first-class heaps, found with dlsym), one
// acquisition in N comes from a heap all workers share (freed with free(),
// mostly by another thread), and every worker also fills and resets a heap
// of its own now and then: freezes land in the heaps' paths too.
//
// Nothing in the probe's own code ever waits for another worker: the handoff is
// an atomic exchange, so a stall can only come from the allocator (or from the
// machine not scheduling the workers at all for a whole deadline).
//
// With --stop-after-stalls N the freeze loop ends once N freezes have
// stalled: a control that must see a stall (a lock-based allocator, whose
// victim holds a mutex in only a small share of its freezes) then runs as many
// freezes as it takes, up to --freezes, instead of a fixed count that a
// loaded machine can leave without a single stall.
//
// Final line, always: RESULT freezes=<int> stalled=<int> max_stall_ms=<float>
// Exit 0 (a measurement); with --require-progress exit 1 when stalled > 0.
// Exit 2 on a usage error, a handshake failure, or a corrupted block.
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <new>
#include <thread>

#include <pthread.h>

#include <dlfcn.h>
#include <linux/futex.h>
#include <malloc.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace {

struct Options {
  long freezes = 2000;
  int threads = 4;
  double deadline_ms = 2000;   // generous: a loaded 2-core machine
  long min_ops = 32;           // K: operations each other worker must complete
  double max_seconds = 60;     // total time cap for the freeze loop
  long stop_after_stalls = 0;  // --stop-after-stalls N: end the loop at the Nth stall (0: never)
  bool require_progress = false;
  bool churn = false;
  unsigned foreign_every = 0;  // --foreign N: one acquisition in N is glibc's
  unsigned heaps_every = 0;    // --heaps N: one acquisition in N from a shared tenon heap
  const char* expect_malloc_from = nullptr;  // skip (77) unless malloc is from here
  unsigned seed = 12345;
};

constexpr int kMaxThreads = 64;
constexpr int kSlots = 64;          // shared handoff slots (atomic exchange)
constexpr int kLocalLive = 32;      // blocks each worker keeps alive locally
constexpr size_t kMagic = 0x7465'6e6f'6e21'0000ull;  // stamped into each block

// One worker's shared state, on its own cache lines so that progress counters
// don't bounce between cores more than needed.
struct alignas(128) Worker {
  std::atomic<uint64_t> progress{0};  // single writer: the worker
  std::atomic<pid_t> tid{0};
  std::atomic<uint32_t> release{0};   // futex word: controller bumps to release
  std::atomic<int> frozen{0};         // 1 while parked in the signal handler
  std::atomic<int> frozen_in_alloc{0};  // was the worker inside an allocator call?
};

Worker g_workers[kMaxThreads];
Worker g_child;                      // the current short-lived thread (--churn)
std::atomic<long> g_churned{0};      // short-lived threads that ran to the end
std::atomic<void*> g_slots[kSlots];
std::atomic<bool> g_stop{false};
std::atomic<long> g_corrupt{0};
std::atomic<bool> g_no_park{false};  // set when shutting down after a failure
unsigned g_foreign_every = 0;        // set once before the workers start
// --heaps: tenon's heap functions (set once before the workers start).
unsigned g_heaps_every = 0;
void* (*g_heap_new)(const void*) = nullptr;
void* (*g_heap_malloc)(void*, size_t) = nullptr;
void (*g_heap_reset)(void*) = nullptr;
void* g_shared_heap = nullptr;

// Per-thread, read by the signal handler of the same thread only.
thread_local Worker* t_self = nullptr;
thread_local volatile sig_atomic_t t_in_alloc = 0;

double now_ms() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

void sleep_us(long us) {
  timespec ts{us / 1000000, (us % 1000000) * 1000};
  nanosleep(&ts, nullptr);
}

long futex(std::atomic<uint32_t>* word, int op, uint32_t val) {
  return syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), op, val, nullptr, nullptr, 0);
}

// The freeze: async-signal-safe only (atomics, futex syscall, errno restore).
// It parks until the controller bumps `release`; the TEST waits here, the
// allocator under test never does.
void on_freeze(int) {
  int saved_errno = errno;
  Worker* w = t_self;
  if (w != nullptr && !g_no_park.load(std::memory_order_acquire)) {
    uint32_t r = w->release.load(std::memory_order_acquire);
    w->frozen_in_alloc.store(t_in_alloc ? 1 : 0, std::memory_order_relaxed);
    w->frozen.store(1, std::memory_order_release);
    while (w->release.load(std::memory_order_acquire) == r && !g_no_park.load())
      futex(&w->release, FUTEX_WAIT_PRIVATE, r);
    w->frozen.store(0, std::memory_order_release);
  }
  errno = saved_errno;
}

struct Rng {
  uint64_t s;
  uint64_t next() {  // xorshift64*
    s ^= s >> 12; s ^= s << 25; s ^= s >> 27;
    return s * 0x2545F4914F6CDD1Dull;
  }
};

// 8 B ... 64 KiB, log-uniform, and about 1 in 100 between 64 KiB and 1 MiB.
size_t random_size(Rng& rng) {
  uint64_t r = rng.next();
  if (r % 100 == 0) return 65536 + (r >> 8) % (1u << 20);
  unsigned e = 3 + (r >> 8) % 14;            // 2^3 .. 2^16
  size_t lo = size_t{1} << (e - 1);
  size_t n = lo + (r >> 16) % lo;
  return n < 8 ? 8 : (n > 65536 ? 65536 : n);
}

// Blocks carry their size so that whoever frees them (often another thread)
// can check the allocator did not hand the same memory out twice.
// The top byte of the size records which call made the block, so that it is
// released by the matching function.
enum Kind : uint8_t { kMalloc, kNew };

void stamp(void* p, size_t n, Kind kind) {
  size_t tag = kMagic ^ (n | (size_t{kind} << 56));
  std::memcpy(p, &tag, sizeof tag);
  // The tail copy would overlap the head below 16 bytes.
  if (n >= 2 * sizeof tag) std::memcpy(static_cast<char*>(p) + n - sizeof tag, &tag, sizeof tag);
}

void check_and_release(void* p) {
  size_t head, n, tail;
  std::memcpy(&head, p, sizeof head);
  n = head ^ kMagic;
  Kind kind = static_cast<Kind>(n >> 56);
  n &= (size_t{1} << 56) - 1;
  if (n < 8 || n > (size_t{1} << 22)) {
    g_corrupt.fetch_add(1, std::memory_order_relaxed);
    return;  // leak it: freeing garbage would only add confusion
  }
  tail = head;
  if (n >= 2 * sizeof tail) std::memcpy(&tail, static_cast<char*>(p) + n - sizeof tail, sizeof tail);
  if (tail != head) g_corrupt.fetch_add(1, std::memory_order_relaxed);
  t_in_alloc = 1;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  if (kind == kNew) ::operator delete[](static_cast<char*>(p)); else free(p);
  std::atomic_signal_fence(std::memory_order_seq_cst);
  t_in_alloc = 0;
}

}  // namespace
// glibc's own allocator under its exported internal names: reachable whatever
// LD_PRELOAD puts in front of malloc.
extern "C" void* __libc_malloc(size_t);
namespace {

// --foreign: a block from glibc's allocator. Returns it with its size in n
// (its own choice of size, see the file comment); nullptr when glibc fails.
void* acquire_foreign(Rng& rng, size_t& n) {
  uint64_t r = rng.next();
  size_t small = 16 + (r >> 8) % 33;
  void* p;
  if (r % 32 == 0) {
    n = (size_t{256} << 10) + (r >> 16) % (size_t{256} << 10);
    p = __libc_malloc(n);  // mmapped by glibc: its own mapping
  } else if (r % 4 == 1) {
    // realloc of a glibc block: the allocator under test must copy it out
    // (or leave it to glibc) without waiting for glibc's locks.
    p = __libc_malloc(small);
    if (p != nullptr) {
      std::memset(p, 3, small);
      p = realloc(p, n);
    }
  } else {
    n = small;
    p = __libc_malloc(n);
    if (p != nullptr && malloc_usable_size(p) < n) g_corrupt.fetch_add(1, std::memory_order_relaxed);
  }
  return p;
}

void* acquire(Rng& rng, size_t n) {
  uint64_t r = rng.next() % 16;
  Kind kind = r == 0 ? kNew : kMalloc;
  void* p;
  t_in_alloc = 1;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  if (g_foreign_every != 0 && rng.next() % g_foreign_every == 0) {
    kind = kMalloc;  // released with free()
    p = acquire_foreign(rng, n);
  } else if (g_heaps_every != 0 && rng.next() % g_heaps_every == 0) {
    kind = kMalloc;  // released with free()
    p = g_heap_malloc(g_shared_heap, n);
  } else if (kind == kNew) p = new (std::nothrow) char[n];
  else if (r == 1) p = calloc(1, n);
  else if (r == 2 && n >= 64) {
    // Grow from a smaller block: exercises realloc's copy path.
    p = malloc(n / 2);
    if (p != nullptr) { std::memset(p, 1, 8); p = realloc(p, n); }
  } else p = malloc(n);
  std::atomic_signal_fence(std::memory_order_seq_cst);
  t_in_alloc = 0;
  if (p == nullptr) return nullptr;
  stamp(p, n, kind);
  return p;
}

void worker_main(int index, unsigned seed) {
  Worker& w = g_workers[index];
  t_self = &w;
  w.tid.store(static_cast<pid_t>(syscall(SYS_gettid)), std::memory_order_release);
  Rng rng{0x9E3779B97F4A7C15ull * (seed + index + 1)};
  void* local[kLocalLive] = {};
  void* own_heap = nullptr;  // --heaps: filled now and then, reset every 8th time
  uint64_t ops = 0;
  while (!g_stop.load(std::memory_order_relaxed)) {
    if (g_heaps_every != 0 && ops % 256 == 0) {
      t_in_alloc = 1;
      std::atomic_signal_fence(std::memory_order_seq_cst);
      if (!own_heap) own_heap = g_heap_new(nullptr);
      for (int i = 0; own_heap && i < 16; ++i) {
        size_t m = random_size(rng);
        if (void* q = g_heap_malloc(own_heap, m)) stamp(q, m, kMalloc);
      }
      if (own_heap && ops % 2048 == 0) g_heap_reset(own_heap);
      std::atomic_signal_fence(std::memory_order_seq_cst);
      t_in_alloc = 0;
    }
    size_t n = random_size(rng);
    void* p = acquire(rng, n);
    if (p != nullptr) {
      uint64_t r = rng.next();
      void* old;
      if (r & 1) {
        // Hand it to whichever thread next takes this slot; free what was there
        // (most likely allocated by another thread: a cross-thread free).
        old = g_slots[(r >> 1) % kSlots].exchange(p, std::memory_order_acq_rel);
      } else {
        void*& keep = local[(r >> 1) % kLocalLive];
        old = keep;
        keep = p;
      }
      if (old != nullptr) check_and_release(old);
    }
    w.progress.store(++ops, std::memory_order_release);
  }
  for (void* p : local)
    if (p != nullptr) check_and_release(p);
}

// --churn: one short-lived thread's life. Its blocks handed to the slots are
// freed later by the workers, usually after this thread has exited.
void* churn_child(void* arg) {
  t_self = &g_child;
  g_child.tid.store(static_cast<pid_t>(syscall(SYS_gettid)), std::memory_order_release);
  Rng rng{0xD1B54A32D192ED03ull * (reinterpret_cast<uintptr_t>(arg) + 1)};
  void* local[8] = {};
  for (int i = 0; i < 1000; ++i) {
    void* p = acquire(rng, random_size(rng));
    if (p == nullptr) continue;
    uint64_t r = rng.next();
    void* old;
    if (r & 1) {
      old = g_slots[(r >> 1) % kSlots].exchange(p, std::memory_order_acq_rel);
    } else {
      old = local[(r >> 1) % 8];
      local[(r >> 1) % 8] = p;
    }
    if (old != nullptr) check_and_release(old);
  }
  for (void* p : local)
    if (p != nullptr) check_and_release(p);
  return nullptr;
}

void churner_main() {
  for (uintptr_t gen = 0; !g_stop.load(std::memory_order_relaxed); ++gen) {
    pthread_t t;
    if (pthread_create(&t, nullptr, churn_child, reinterpret_cast<void*>(gen)) != 0) continue;
    pthread_join(t, nullptr);
    g_churned.fetch_add(1, std::memory_order_relaxed);
  }
}

bool parse(int argc, char** argv, Options& o) {
  for (int i = 1; i < argc; ++i) {
    auto arg = [&](const char* name) { return std::strcmp(argv[i], name) == 0 && i + 1 < argc; };
    if (arg("--freezes")) o.freezes = std::atol(argv[++i]);
    else if (arg("--threads")) o.threads = std::atoi(argv[++i]);
    else if (arg("--deadline-ms")) o.deadline_ms = std::atof(argv[++i]);
    else if (arg("--min-ops")) o.min_ops = std::atol(argv[++i]);
    else if (arg("--max-seconds")) o.max_seconds = std::atof(argv[++i]);
    else if (arg("--stop-after-stalls")) o.stop_after_stalls = std::atol(argv[++i]);
    else if (arg("--seed")) o.seed = static_cast<unsigned>(std::atol(argv[++i]));
    else if (arg("--expect-malloc-from")) o.expect_malloc_from = argv[++i];
    else if (std::strcmp(argv[i], "--require-progress") == 0) o.require_progress = true;
    else if (std::strcmp(argv[i], "--churn") == 0) o.churn = true;
    else if (arg("--foreign")) o.foreign_every = static_cast<unsigned>(std::atol(argv[++i]));
    else if (arg("--heaps")) o.heaps_every = static_cast<unsigned>(std::atol(argv[++i]));
    else return false;
  }
  return o.freezes >= 0 && o.threads >= 2 && o.threads <= kMaxThreads && o.deadline_ms > 0 &&
         o.min_ops > 0 && o.max_seconds > 0 && o.stop_after_stalls >= 0;
}

// Waits (test code, so waiting is fine) until flag == want, up to limit_ms.
bool wait_flag(const std::atomic<int>& flag, int want, double limit_ms) {
  double start = now_ms();
  for (int spins = 0; flag.load(std::memory_order_acquire) != want; ++spins) {
    if (now_ms() - start > limit_ms) return false;
    if (spins > 64) sleep_us(20);
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!parse(argc, argv, o)) {
    std::fprintf(stderr,
                 "usage: %s [--freezes N] [--threads T] [--deadline-ms D] [--min-ops K]\n"
                 "          [--max-seconds S] [--stop-after-stalls N] [--seed N]\n"
                 "          [--require-progress] [--churn]\n"
                 "          [--foreign N] [--heaps N]\n"
                 "          [--expect-malloc-from LIBNAME]\n", argv[0]);
    return 2;
  }
  // Say which allocator is measured: the object that defines the malloc this
  // program binds to (the LD_PRELOADed library, or libc).
  Dl_info info{};
  void* bound = dlsym(RTLD_DEFAULT, "malloc");
  const char* from = (bound && dladdr(bound, &info) && info.dli_fname) ? info.dli_fname : "?";
  std::printf("freeze_probe: malloc from %s\n", from);
  if (o.expect_malloc_from && !std::strstr(from, o.expect_malloc_from)) {
    // E.g. a libtenon.so that does not override malloc yet: measuring libc
    // instead would say nothing about tenon.
    std::printf("freeze_probe: SKIP malloc is not from %s\n", o.expect_malloc_from);
    return 77;
  }
  if (o.heaps_every != 0) {
    g_heap_new = reinterpret_cast<void* (*)(const void*)>(dlsym(RTLD_DEFAULT, "tenon_heap_new"));
    g_heap_malloc = reinterpret_cast<void* (*)(void*, size_t)>(dlsym(RTLD_DEFAULT, "tenon_heap_malloc"));
    g_heap_reset = reinterpret_cast<void (*)(void*)>(dlsym(RTLD_DEFAULT, "tenon_heap_reset"));
    if (!g_heap_new || !g_heap_malloc || !g_heap_reset) {
      std::printf("freeze_probe: SKIP --heaps: the allocator has no tenon_heap_* functions\n");
      return 77;
    }
    g_shared_heap = g_heap_new(nullptr);
    if (!g_shared_heap) return 2;
    g_heaps_every = o.heaps_every;
  }

  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_freeze;
  sigfillset(&sa.sa_mask);  // nothing else interrupts a parked worker
  sa.sa_flags = SA_RESTART;
  sigaction(SIGUSR1, &sa, nullptr);
  g_foreign_every = o.foreign_every;
  if (o.foreign_every) std::printf("freeze_probe: one block in %u from glibc's __libc_malloc\n", o.foreign_every);

  std::thread threads[kMaxThreads];
  for (int i = 0; i < o.threads; ++i) threads[i] = std::thread(worker_main, i, o.seed);
  // Warm-up: every worker running and past its first operations.
  for (int i = 0; i < o.threads; ++i)
    while (g_workers[i].progress.load(std::memory_order_acquire) < 64) sleep_us(100);
  std::thread churner;
  if (o.churn) churner = std::thread(churner_main);

  // From here on the controller must not allocate: a lock-based allocator
  // could have the frozen victim holding the lock the controller would need.
  Rng rng{o.seed * 2654435761ull + 1};
  const pid_t pid = getpid();
  long done = 0, stalled = 0, in_alloc = 0, handshake_failures = 0;
  long churn_frozen = 0, churn_missed = 0;
  double max_stall = 0, total_stall = 0;
  bool capped = false;
  const double loop_start = now_ms();
  const double handshake_ms = o.deadline_ms + 5000;  // a victim not yet scheduled
  uint64_t snap[kMaxThreads];

  for (long f = 0; done < o.freezes; ++f) {  // f: attempts (churn ones may miss)
    if (o.stop_after_stalls && stalled >= o.stop_after_stalls) break;
    if (now_ms() - loop_start > o.max_seconds * 1e3) { capped = true; break; }
    const bool churn_victim = o.churn && f % 4 == 3;
    // v == -1: the victim is the short-lived thread; every worker must advance.
    int v = churn_victim ? -1 : static_cast<int>(rng.next() % o.threads);
    Worker& victim = churn_victim ? g_child : g_workers[v];
    // A victim released by an earlier freeze may not have been scheduled yet
    // to leave its handler; only the same victim has to be waited for.
    if (!wait_flag(victim.frozen, 0, handshake_ms)) { ++handshake_failures; break; }
    const pid_t tid = victim.tid.load(std::memory_order_acquire);
    if (churn_victim) {
      // The thread may be gone (or going) before the signal lands: then the
      // signal is dropped and this freeze is missed, not counted.
      bool got = false;
      if (tid != 0 && syscall(SYS_tgkill, pid, tid, SIGUSR1) == 0) {
        const double start = now_ms();
        for (int spins = 0;; ++spins) {
          if (victim.frozen.load(std::memory_order_acquire) == 1) { got = true; break; }
          if (syscall(SYS_tgkill, pid, tid, 0) != 0 || now_ms() - start > handshake_ms) break;
          if (spins > 64) sleep_us(20);
        }
      }
      if (!got) { ++churn_missed; continue; }
      ++churn_frozen;
    } else {
      syscall(SYS_tgkill, pid, tid, SIGUSR1);
      if (!wait_flag(victim.frozen, 1, handshake_ms)) { ++handshake_failures; break; }
    }

    // The victim is parked at whatever instruction the signal found it on.
    for (int i = 0; i < o.threads; ++i) snap[i] = g_workers[i].progress.load(std::memory_order_acquire);
    const double t0 = now_ms();
    double waited = 0;
    bool all = false;
    for (int spins = 0;; ++spins) {
      all = true;
      for (int i = 0; i < o.threads && all; ++i)
        if (i != v && g_workers[i].progress.load(std::memory_order_acquire) - snap[i] < uint64_t(o.min_ops))
          all = false;
      waited = now_ms() - t0;
      if (all || waited > o.deadline_ms) break;
      if (spins > 16) sleep_us(spins > 1000 ? 500 : 20);
    }
    if (!all) ++stalled;
    if (waited > max_stall) max_stall = waited;
    total_stall += waited;
    in_alloc += victim.frozen_in_alloc.load(std::memory_order_relaxed);
    ++done;

    victim.release.fetch_add(1, std::memory_order_acq_rel);
    futex(&victim.release, FUTEX_WAKE_PRIVATE, 1);
  }
  for (int i = 0; i < o.threads; ++i)
    if (!wait_flag(g_workers[i].frozen, 0, handshake_ms)) ++handshake_failures;
  if (!wait_flag(g_child.frozen, 0, handshake_ms)) ++handshake_failures;
  const double loop_ms = now_ms() - loop_start;

  // Unpark everyone (a failed handshake may leave a signal still in flight).
  g_no_park.store(true);
  for (Worker* w = g_workers; w != g_workers + o.threads; ++w) {
    w->release.fetch_add(1);
    futex(&w->release, FUTEX_WAKE_PRIVATE, 1);
  }
  g_child.release.fetch_add(1);
  futex(&g_child.release, FUTEX_WAKE_PRIVATE, 1);
  g_stop.store(true);
  for (int i = 0; i < o.threads; ++i) threads[i].join();
  if (churner.joinable()) churner.join();
  uint64_t total_ops = 0;
  for (int i = 0; i < o.threads; ++i) total_ops += g_workers[i].progress.load();

  std::printf("freeze_probe: threads=%d deadline_ms=%.0f min_ops=%ld loop_s=%.2f ops=%llu "
              "in_allocator=%ld/%ld mean_stall_ms=%.3f\n",
              o.threads, o.deadline_ms, o.min_ops, loop_ms / 1e3,
              static_cast<unsigned long long>(total_ops), in_alloc, done,
              done ? total_stall / done : 0.0);
  if (o.churn)
    std::printf("freeze_probe: churn threads=%ld frozen=%ld missed=%ld\n", g_churned.load(),
                churn_frozen, churn_missed);
  if (capped)
    std::printf("freeze_probe: hit the time cap of %.0f s after %ld of %ld freezes\n",
                o.max_seconds, done, o.freezes);
  if (handshake_failures)
    std::printf("freeze_probe: ERROR a victim did not enter/leave its freeze within %.0f ms\n",
                handshake_ms);
  long corrupt = g_corrupt.load();
  if (corrupt) std::printf("freeze_probe: ERROR %ld corrupted blocks\n", corrupt);
  std::printf("RESULT freezes=%ld stalled=%ld max_stall_ms=%.3f\n", done, stalled, max_stall);
  std::fflush(stdout);
  if (handshake_failures || corrupt) return 2;
  return (o.require_progress && stalled > 0) ? 1 : 0;
}
