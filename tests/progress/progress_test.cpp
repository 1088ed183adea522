// Lock-freedom, proved point by point (label `progress`, -DTENON_INJECT=ON).
//
// For one injection point (--point=NAME), a fresh child process runs a
// "victim" thread through a scenario that passes every slow path of the
// allocator; the first time the victim reaches NAME, the hook parks it there
// forever, in the middle of whatever multi-step operation it was doing. Other
// threads must then complete a fixed amount of allocation and freeing (every
// size range, blocks owned by the parked thread, the same size classes, new
// threads starting and exiting, huge blocks, trim) before a deadline. The
// background purger's own points (purger.*) park the purger thread instead.
//   exit 0: others finished: the point cannot block anyone.
//   exit 1: deadline passed: a thread parked at NAME stops the others.
//   exit 2: the scenario never reached NAME (extend the scenario).
// The test itself may wait (joins, sleeps); only the allocator may not.
// This program calls tenon only through the tenon_* API (libtenon.a); the
// test's own machinery (gtest, std::thread) uses the system allocator.
#include <gtest/gtest.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "tenon/common/inject.h"
#include "tenon/huge/huge.h"
#include "tenon/tenon.h"

namespace {

std::string g_point;
std::atomic<bool> g_parked{false};
std::atomic<bool> g_victim_done{false};
thread_local bool t_victim = false;

// TENON_TEST_PROGRESS_TRACE=1 prints every point the victim passes (with
// --point=none nothing parks): the way to see what the scenario reaches.
bool g_trace = false;

// The background purger's own points ("purger.*") park the purger thread,
// recognised by its name; every other point parks the victim.
bool is_purger_thread() {
  thread_local int known = -1;
  if (known < 0) {
    char name[16] = {};
    prctl(PR_GET_NAME, name, 0, 0, 0);
    known = std::strcmp(name, "tenon-purge") == 0;
  }
  return known == 1;
}

void park_hook(const char* point) {
  if (t_victim && g_trace) {
    ssize_t r = write(2, point, std::strlen(point));
    r = write(2, "\n", 1);
    (void)r;
  }
  bool mine = std::strncmp(point, "purger.", 7) == 0 ? is_purger_thread() : t_victim;
  if (!mine || g_parked.load(std::memory_order_relaxed) || g_point != point) return;
  g_parked.store(true, std::memory_order_release);
  for (;;) pause();  // forever: the child process exits around this thread
}

// Blocks handed between threads, published with a count.
struct handoff {
  std::vector<void*> blocks = std::vector<void*>(20000, nullptr);
  std::atomic<std::size_t> count{0};
  void publish(void* p) {
    std::size_t n = count.load(std::memory_order_relaxed);
    if (n < blocks.size()) {
      blocks[n] = p;
      count.store(n + 1, std::memory_order_release);
    }
  }
};
handoff g_gifts;     // allocated by the victim, freed by worker 0
handoff g_prekept;   // allocated by the pre-phase thread: first half freed by the victim, rest by worker 1
handoff g_mainkept;  // allocated by the child's main thread (its heap stays live), freed by the victim
handoff g_orphans;   // allocated by the pre-phase thread, freed by main once that thread has exited:
                     // they wait on the remote lists of unowned spans that the victim then adopts
handoff g_heap_gifts;  // allocated by the victim from g_shared_heap, freed by worker 1
tenon_heap_t* g_shared_heap = nullptr;  // a first-class heap every thread uses

std::atomic<int> g_stage{0};  // 1: victim asks for the pre-phase; 2: pre-phase done

void fill(void* p, std::size_t n, unsigned char v) { std::memset(p, v, n < 256 ? n : 256); }

// A key made after tenon's (the victim makes it after its first allocation),
// so its destructor runs after tenon's thread-exit hook: frees and an
// allocation with the victim's heap already released (span.borrow).
pthread_key_t g_late_key;
void after_exit_hook(void* p) {
  tenon_free(p);
  void* q = tenon_malloc(64);
  fill(q, 64, 3);
  tenon_free(q);
}

// A pointer tenon did not hand out, with glibc's header for a block it
// mapped alone (its offset 0, its size with IS_MMAPPED): free reads the
// header (foreign.read) and unmaps the block.
void free_foreign_block() {
  std::size_t bytes = 2 * static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  void* area = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (area == MAP_FAILED) std::abort();
  std::size_t header[2] = {0, bytes | 2};
  std::memcpy(area, header, sizeof header);
  tenon_free(static_cast<char*>(area) + 16);
}

void victim() {
  t_victim = true;
  // Initialisation: the first tenon call of the process.
  void* first = tenon_malloc(24);
  pthread_key_create(&g_late_key, after_exit_hook);
  // First-class heaps: the thread's heap id (heaps.thread), a record
  // (heaps.record), large-block slots (heaps.slot), destroy (heap.drop).
  tenon_heap_t* own = tenon_heap_new(nullptr);
  void* big = tenon_heap_malloc(own, 100000);
  for (int i = 0; i < 3000; ++i) tenon_heap_free(own, tenon_heap_malloc(own, 16 + (i * 7) % 3000));
  fill(tenon_heap_malloc(own, 5u << 20), 256, 4);
  tenon_free(big);
  for (int i = 0; i < 2000; ++i) g_heap_gifts.publish(tenon_heap_malloc(g_shared_heap, 16 + i % 1000));
  tenon_heap_destroy(own);
  void* huge = tenon_malloc(6u << 20);  // huge.map; options are read on this path
  fill(huge, 6u << 20, 1);
  if (tenon_malloc_usable_size(huge) < (6u << 20)) std::abort();  // huge.usable
  // Read in place as the secure build's malloc_usable_size reads a huge
  // block's end (huge.read: counted a reader, the block kept mapped for it).
  tenon::huge_view view;
  std::uint64_t word = 0;
  if (!tenon::huge_view_of(huge, &view) || !tenon::huge_copy_out(view, huge, &word, sizeof word)) std::abort();
  // A huge block freed while such a reader is counted in waits in a
  // deferral slot; the free's own scan of the slots (huge.deferred) finds
  // the reader still there, and the next huge call puts the block away.
  void* read_freed = tenon_malloc(6u << 20);
  tenon::huge_view read_view;
  if (!tenon::huge_view_of(read_freed, &read_view)) std::abort();
  {
    tenon::huge_reading reading(read_view);
    if (!reading.live()) std::abort();
    tenon_free(read_freed);  // huge.deferred
  }
  // Put away by this call's scan and taken again, so that the cache below
  // holds what it held before (huge.cache.split needs its 40 MiB block).
  void* read_freed_again = tenon_malloc(6u << 20);
  free_foreign_block();  // foreign.read
  tenon_free(huge);  // huge.free, huge.cache.put
  for (int i = 0; i < 2000; ++i) {
    std::size_t n = 8 + (i * 97) % 3000;
    void* p = tenon_malloc(n);
    fill(p, n, 2);
    g_gifts.publish(p);
  }
  // Let a thread allocate and exit, so there are spans and a heap to adopt.
  g_stage.store(1, std::memory_order_release);
  while (g_stage.load(std::memory_order_acquire) != 2) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  // Its heap is parked whole at its exit; once it has waited past
  // kParkedGraceMs (50 ms) with no thread taking it over, our next span
  // formation gives it up: span.abandon, span.float, then span.adopt.
  std::this_thread::sleep_for(std::chrono::milliseconds(120));

  std::vector<void*> mine;
  for (int i = 0; i < 6000; ++i) mine.push_back(tenon_malloc(i % 2 ? 64 : 1000));  // absorb, retire, take
  // Blocks of a thread that has exited: a new thread whose first call frees
  // one takes that thread's parked heap over (heap.take_over).
  std::vector<void*> leftover;
  std::thread([&] {
    for (int i = 0; i < 300; ++i) leftover.push_back(tenon_malloc(4000));
  }).join();
  std::thread([&] {
    t_victim = true;
    for (void* p : leftover) tenon_free(p);
  }).join();
  // A second victim thread attaches a recycled heap (stack.pop).
  std::thread([] {
    t_victim = true;
    tenon_free(tenon_malloc(100));
  }).join();
  // Remote frees into our spans, then allocate until they are collected.
  std::thread([&] {
    for (std::size_t i = 0; i < mine.size(); i += 2) tenon_free(mine[i]);
  }).join();
  for (std::size_t i = 0; i < mine.size(); i += 2) mine[i] = tenon_malloc(i % 4 ? 1000 : 64);
  for (void* p : mine) tenon_free(p);  // spans empty: chunk.release
  mine.clear();
  // Free blocks another thread owns: remote.push.
  std::size_t kept = g_prekept.count.load(std::memory_order_acquire);
  for (std::size_t i = 0; i < kept / 2; ++i) tenon_free(g_prekept.blocks[i]);
  // Free blocks of a live heap: they travel through its inbox (inbox.push).
  std::size_t from_main = g_mainkept.count.load(std::memory_order_acquire);
  for (std::size_t i = 0; i < from_main; ++i) tenon_free(g_mainkept.blocks[i]);
  // (delivered by the trim below, or at thread exit)
  // Huge reuse and resize.
  huge = tenon_malloc(6u << 20);  // huge.cache.take
  huge = tenon_realloc(huge, 40u << 20);  // huge.remap
  std::memset(huge, 3, 40u << 20);        // resident whole, as a reused block's tail must be to split
  tenon_free(huge);
  tenon_free(tenon_malloc(8u << 20));  // reuses the 40 MiB block: huge.cache.split
  tenon_free(read_freed_again);
  // A large block's run kept in this thread's run cache at its free, taken
  // again by the next of its size (runs.take), kept again, and flushed back
  // to the arena by the trim (runs.flush).
  void* run = tenon_malloc(100000);
  fill(run, 100000, 6);
  tenon_free(run);
  run = tenon_malloc(100000);
  fill(run, 100000, 7);
  tenon_free(run);
  tenon_malloc_trim(0);  // chunk.purge
  // Leave full spans behind at exit (the heap is parked with them: stack.push).
  for (int i = 0; i < 3000; ++i) mine.push_back(tenon_malloc(128));
  for (std::size_t i = 0; i + 1 < mine.size(); i += 600) tenon_free(mine[i]);
  pthread_setspecific(g_late_key, tenon_malloc(200));
  (void)first;
}  // thread exit: heap.release and the rest run in the key destructor, then after_exit_hook

// Allocates and exits. Its heap is parked, then given up by the victim:
// its 64 and 1000 byte spans are adopted by the victim; its 2048 byte spans
// (a class the victim never allocates) stay unowned, so the victim's frees
// into them are remote; its one full span of 128-byte blocks floats.
void prephase() {
  std::vector<void*> all;
  const std::size_t sizes[3] = {64, 1000, 2048};
  static void* full_span[512];  // 512 x 128 B: exactly one span, kept whole
  for (void*& p : full_span) p = tenon_malloc(128);
  for (int i = 0; i < 6000; ++i) all.push_back(tenon_malloc(sizes[i % 3]));
  for (std::size_t i = 0; i < all.size(); ++i) {
    if (i % 2 == 0) g_prekept.publish(all[i]);
    else if (i % 3 != 2 && i % 5 == 1) g_orphans.publish(all[i]);
    else tenon_free(all[i]);
  }
}

// The fixed amount of work the others must finish while the victim is parked.
void worker(int id) {
  std::mt19937 rng(id * 7919 + 1);
  constexpr int kSlots = 512;
  static std::atomic<void*> shared[kSlots];
  for (int i = 0; i < 30000; ++i) {
    unsigned r = rng();
    std::size_t n;
    if (r % 1000 == 0) n = (3u << 20) + r % (6u << 20);          // huge
    else if (r % 50 == 0) n = 40000 + r % 1500000;               // large
    else n = 1 + (r >> 8) % (i % 3 ? 1100 : 33000);              // every small class
    // One in 8 from the shared first-class heap (freed cross-thread below).
    void* p = r % 8 == 3 ? tenon_heap_malloc(g_shared_heap, n) : tenon_malloc(n);
    if (!p) std::abort();
    fill(p, n, static_cast<unsigned char>(i));
    if (n > (3u << 20)) p = tenon_realloc(p, n + (1u << 20));
    tenon_free(shared[r % kSlots].exchange(p));  // frees cross threads
  }
  handoff& owned = id == 0 ? g_gifts : g_prekept;
  std::size_t begin = id == 0 ? 0 : g_prekept.count.load() / 2;
  std::size_t end = owned.count.load(std::memory_order_acquire);
  for (std::size_t i = begin; i < end; ++i) tenon_free(owned.blocks[i]);
  if (id == 1) {
    std::size_t gifts = g_heap_gifts.count.load(std::memory_order_acquire);
    for (std::size_t i = 0; i < gifts; ++i) tenon_free(g_heap_gifts.blocks[i]);
  }
  for (int k = 0; k < 20; ++k) {  // heaps made, used and destroyed
    tenon_heap_t* h = tenon_heap_new(nullptr);
    if (!h) std::abort();
    for (int i = 0; i < 500; ++i) fill(tenon_heap_malloc(h, 16 + (i * 31) % 5000), 16, 5);
    fill(tenon_heap_malloc(h, 200000), 16, 5);
    fill(tenon_heap_malloc(h, 3u << 20), 16, 5);
    tenon_heap_destroy(h);
  }
  for (int t = 0; t < 10; ++t)  // threads starting and exiting
    std::thread([t] {
      std::vector<void*> v;
      for (int i = 0; i < 1000; ++i) v.push_back(tenon_malloc(16 + (i * 13 + t) % 700));
      for (void* p : v) tenon_free(p);
    }).join();
  tenon_malloc_trim(0);
}

// Runs in the child. Returns the exit code described at the top.
int run_child() {
  using clock = std::chrono::steady_clock;
  const char* env = std::getenv("TENON_TEST_PROGRESS_DEADLINE_S");
  const auto limit = std::chrono::seconds(env ? std::atoi(env) : 60);
  g_trace = std::getenv("TENON_TEST_PROGRESS_TRACE") != nullptr;
  tenon_inject_set_hook(park_hook);
  g_shared_heap = tenon_heap_new(nullptr);
  if (g_point.rfind("purger.", 0) == 0) {
    // Start the background purger: a huge block kept for reuse while this
    // process is still single-threaded. Then empty the cache again, so the
    // scenario below runs as it always does. The purger parks at its point on
    // its first pass; the others run with it parked.
    tenon_free(tenon_malloc(6u << 20));
    tenon_malloc_trim(0);
  }
  // The watcher learns the victim is done only once its thread has fully
  // exited (its heap released), or never if it is parked.
  std::thread([] {
    std::thread(victim).join();
    g_victim_done.store(true);
  }).detach();
  auto deadline = clock::now() + limit;
  // Main allocates first (it never allocates again, so it absorbs none of
  // the pre-phase thread's spans: the victim must), then the pre-phase
  // thread runs and exits, then main frees some of its blocks remotely.
  auto run_prephase = [] {
    for (int i = 0; i < 500; ++i) g_mainkept.publish(tenon_malloc(48 + i % 200));
    std::thread(prephase).join();
    for (std::size_t i = 0; i < g_orphans.count.load(); ++i) tenon_free(g_orphans.blocks[i]);
    g_stage.store(2);
  };
  while (!g_parked.load()) {
    if (g_stage.load() == 1) run_prephase();
    if (clock::now() > deadline) return 2;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
    if (g_victim_done.load()) break;
  }
  if (!g_parked.load()) return 2;
  if (g_stage.load() == 1) run_prephase();  // parked while asking for it: run it too
  std::atomic<int> finished{0};
  std::thread a([&] { worker(0); finished++; });
  std::thread b([&] { worker(1); finished++; });
  a.detach();
  b.detach();
  deadline = clock::now() + limit;
  while (finished.load() < 2) {
    if (clock::now() > deadline) return 1;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return 0;
}

TEST(Progress, ParkedThreadDoesNotStopOthers) {
  ASSERT_FALSE(g_point.empty()) << "run with --point=NAME";
  std::fflush(nullptr);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    int code = run_child();
    _exit(code);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "child died with signal " << WTERMSIG(status);
  int code = WEXITSTATUS(status);
  EXPECT_NE(code, 2) << "point " << g_point << " not covered: the scenario never reached it";
  EXPECT_NE(code, 1) << "a thread parked at " << g_point << " stopped the others (deadline passed)";
  EXPECT_EQ(code, 0);
  if (code == 0) std::printf("point %s: covered, other threads completed their work\n", g_point.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  for (int i = 1; i < argc; ++i)
    if (std::strncmp(argv[i], "--point=", 8) == 0) g_point = argv[i] + 8;
  return RUN_ALL_TESTS();
}
