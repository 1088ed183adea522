// Randomised stress of the heaps handed from thread to thread (layer 5:
// park at thread exit, take-over by name and from the parked stack, the
// give-up of a parked heap, the trade of a heap attached on a free,
// outboxes and inboxes). The two defects found there by review (e231ece:
// a block freed into a span its thread no longer owned, handed out twice;
// b61ba54: remote frees lost when a heap attached on a free was traded)
// each needed one precise interleaving of these paths; this test makes
// them happen by the thousand, at random, and checks what any of them may
// break: no block handed out twice or overwritten (every block carries its
// identity and a pattern, stress_support.h, and the identity its holder
// expects), and no block lost (at the end, every block freed, the
// statistics count no block in use). It found a third (39e4c76: a parked
// heap taken by a trade kept its previous thread's "not traded" mark, and
// was traded away with its spans and cached blocks), and under
// ThreadSanitizer a race on a recycled span's class (cacdd48).
//
// Short threads start and exit all the time beside a few that run
// throughout. Each allocates blocks of 16 B to 32 KiB and now and then a
// large one, frees its own, leaves blocks for others in a lock-free
// hand-over table and frees what others left there (blocks of threads
// that exited, or are about to). Some begin with a free (they attach a heap
// on a free, taking over the block's parked heap by name or trading theirs
// at their first allocation); some exit right after that first free; some
// free and allocate after their heap was released (a key destructor that
// runs after tenon's).
//
// Its own executable: the end count needs a process of its own. Runs for
// TENON_TEST_SOAK_SECONDS (default 12 s; 3 s under emulation). Built with
// -DTENON_INJECT=ON (by hand: ninja -C build-inject tenon_heap_handover_tests),
// it also stalls at random injection points (stall_sometimes), which is what
// it takes to reach e231ece's window: 3 of 4 runs of 12 s crash with that
// fix undone, none of 4 without the stalls.
#include <gtest/gtest.h>

#include <pthread.h>

#include <sched.h>
#include <time.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <thread>
#include <vector>

#include "read_stats.h"
#include "stress_support.h"
#ifdef TENON_INJECT
#include "random_stall.h"  // stall_sometimes: e231ece's window (a free's read of the span's owner before its heap's attach) held open
#include "tenon/common/inject.h"
#endif

using namespace tenon_stress;

namespace {

using Clock = std::chrono::steady_clock;

constexpr std::size_t kHandoverSlots = 1024;
constexpr unsigned kShortThreadsLive = 8;  // short threads alive at once
constexpr unsigned kLongThreads = 2;       // threads that run from start to end
constexpr std::size_t kMostHeld = 96;      // blocks one thread holds at most


std::chrono::milliseconds run_time() {
  if (const char* s = std::getenv("TENON_TEST_SOAK_SECONDS")) return std::chrono::milliseconds(std::atol(s) * 1000);
  return std::chrono::milliseconds(std::getenv("TENON_TEST_EMULATED") ? 3000 : 12000);
}

// Sizes of every kind of small class (those with a block cache from 1 KiB
// up, those without below), and 2% large blocks, whose slices come from the
// chunks that spans come from (e231ece's lost span shared its slices with
// a large block).
std::size_t handover_size(std::mt19937_64& rng) {
  unsigned r = rng() % 100;
  if (r < 60) return 16 + rng() % 241;
  if (r < 85) return 257 + rng() % (4096 - 256);
  if (r < 98) return 4097 + rng() % (32768 - 4096);
  return 32769 + rng() % (512 * 1024 - 32768);
}

// A block and the identity its holder expects in it: a block handed out
// twice holds the identity its second holder wrote, with a pattern that
// matches it, so only the expected identity tells.
struct Held {
  void* block;
  std::uint64_t header;
};

// The hand-over table holds a block and 16 bits of its identity in one
// word (user addresses fit in 48 bits), so that an exchange of one atomic
// word hands both over: no lock, and no synchronisation between threads
// beyond what handing a block over needs (ThreadSanitizer sees the
// allocator's own).
std::uint64_t identity_tag(std::uint64_t header) { return tenon_test::mix(header) >> 48; }
std::uint64_t handover_word(Held h) { return reinterpret_cast<std::uintptr_t>(h.block) | identity_tag(h.header) << 48; }

struct Counts {
  std::atomic<std::uint64_t> threads{0}, first_free_threads{0}, late_callers{0}, blocks{0}, handed_frees{0};
};

struct World {
  std::vector<std::atomic<std::uint64_t>> handover = std::vector<std::atomic<std::uint64_t>>(kHandoverSlots);
  Failures failures;
  Counts counts;
  std::atomic<bool> stop{false};
  std::uint64_t seed = 0;
};

// Checks a handed-over block against the identity that came with it, then
// its pattern, and frees it. A block with another identity is not freed: it
// was handed out twice, and its other holder frees it.
void free_handed(World& w, std::uint64_t word) {
  auto* block = reinterpret_cast<void*>(word & ((std::uint64_t{1} << 48) - 1));
  std::uint64_t found = block_header(block);
  if (identity_tag(found) != word >> 48) {
    w.failures.add("handed-over block " + std::to_string(reinterpret_cast<std::uintptr_t>(block)) +
                   " holds another block's identity (" + std::to_string(found) + "): handed out twice");
    return;
  }
  check_and_free(block, w.failures);
  w.counts.handed_frees.fetch_add(1, std::memory_order_relaxed);
}

// One thread's life: the blocks it holds and what it does with them.
class Churner {
 public:
  Churner(World& w, std::uint64_t serial)
      : w_(w), rng_(tenon_test::mix(w.seed ^ serial)), owner_(static_cast<unsigned>(serial % 251)), seq_(serial << 12) {}

  std::mt19937_64& rng() { return rng_; }

  void allocate() {
    if (held_.size() >= kMostHeld) free_own();
    std::size_t size = handover_size(rng_);
    std::uint64_t seq = seq_++;
    void* b = make_sized_block(size, owner_, seq, w_.failures);
    if (!b) return;
    held_.push_back({b, pack(size, owner_, seq)});
    ++blocks_;
  }

  void free_own() {
    if (held_.empty()) return;
    Held h = take_held();
    if (block_header(h.block) != h.header) {
      w_.failures.add("block " + std::to_string(reinterpret_cast<std::uintptr_t>(h.block)) + " of " +
                      std::to_string(header_size(h.header)) + " B holds another block's identity: handed out twice");
      return;
    }
    check_and_free(h.block, w_.failures);
  }

  // Frees a block another thread left (it may have exited since); false if
  // the few slots looked at were empty.
  bool free_a_handed_block() {
    for (int tries = 0; tries < 16; ++tries) {
      std::uint64_t word = w_.handover[rng_() % kHandoverSlots].exchange(0, std::memory_order_acq_rel);
      if (word) {
        free_handed(w_, word);
        return true;
      }
    }
    return false;
  }

  // Leaves one of ours for another thread; frees the block it displaces.
  void leave_one() {
    if (held_.empty()) return;
    std::uint64_t old = w_.handover[rng_() % kHandoverSlots].exchange(handover_word(take_held()), std::memory_order_acq_rel);
    if (old) free_handed(w_, old);
  }

  // One step of a thread's ordinary life, picked at random.
  void step() {
    unsigned r = rng_() % 100;
    if (r < 45) allocate();
    else if (r < 70) free_own();
    else if (r < 85) free_a_handed_block();
    else leave_one();
  }

  // A burst of frees of others' blocks, then own work that rarely leaves
  // the fast paths: the batch for those blocks' heaps waits in this
  // thread's outbox meanwhile, while their threads exit and their heaps
  // are parked, taken over, given up and traded (b61ba54's stale batch).
  void remote_burst() {
    for (unsigned n = 1 + rng_() % 40; n-- > 0;) free_a_handed_block();
    for (unsigned n = rng_() % 64; n-- > 0;) {
      void* p = tenon_malloc(48);
      tenon_free(p);
    }
  }

  // The end of a life: what is still held is freed, or left for others
  // (its heap is then parked owning spans with blocks out, which later
  // frees reach by name).
  void finish() {
    bool leave = rng_() % 2;
    while (!held_.empty()) leave ? leave_one() : free_own();
    w_.counts.blocks.fetch_add(blocks_, std::memory_order_relaxed);
  }

 private:
  Held take_held() {
    std::size_t i = rng_() % held_.size();
    Held h = held_[i];
    held_[i] = held_.back();
    held_.pop_back();
    return h;
  }

  World& w_;
  std::mt19937_64 rng_;
  unsigned owner_;
  std::uint64_t seq_;
  std::vector<Held> held_;  // test-side memory comes from glibc, not tenon
  std::uint64_t blocks_ = 0;
};

// A pthread key whose destructor runs after tenon's thread-exit hook (the
// key is created after tenon's, and destructors run in key order): the
// calls it makes find the thread's heap released (exit.ipp: a free goes to
// the owner's inbox or the span's list alone, an allocation borrows an
// unowned span). Created once tenon's key exists.
pthread_key_t g_late_key;

void late_calls(void* arg) {
  auto& w = *static_cast<World*>(arg);
  w.counts.late_callers.fetch_add(1, std::memory_order_relaxed);
  std::mt19937_64 rng(tenon_test::mix(static_cast<std::uint64_t>(Clock::now().time_since_epoch().count())));
  for (int tries = 0; tries < 16; ++tries)
    if (std::uint64_t word = w.handover[rng() % kHandoverSlots].exchange(0, std::memory_order_acq_rel)) {
      free_handed(w, word);
      break;
    }
  std::size_t size = 16 + rng() % 1024;
  std::uint64_t seq = rng() >> 30;
  if (void* b = make_sized_block(size, 255, seq, w.failures)) {
    std::uint64_t old = w.handover[rng() % kHandoverSlots].exchange(handover_word({b, pack(size, 255, seq)}),
                                                                    std::memory_order_acq_rel);
    if (old) free_handed(w, old);
  }
}

void create_late_key() {
  std::thread([] { tenon_free(tenon_malloc(16)); }).join();  // tenon's key exists from here on
  ASSERT_EQ(pthread_key_create(&g_late_key, late_calls), 0);
}

// The kinds of short life, each aimed at one way a heap changes hands.
void short_life(World& w, std::uint64_t serial) {
  Churner c(w, serial);
  unsigned kind = c.rng()() % 100;
  w.counts.threads.fetch_add(1, std::memory_order_relaxed);
  if (c.rng()() % 8 == 0) pthread_setspecific(g_late_key, &w);
  if (kind < 15) {
    // The first and only call is a free: attaches a heap (the block's
    // parked one, taken over by name, else one from the free-heap stack
    // or a new one) and exits at once, parking it.
    if (c.free_a_handed_block()) w.counts.first_free_threads.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  if (kind < 25) {
    // A consumer: frees only, then exits.
    for (unsigned n = 1 + c.rng()() % 20; n-- > 0;) c.free_a_handed_block();
    return;
  }
  if (kind < 45) {
    // Begins with a free, then allocates: the heap attached on the free is
    // traded for a parked one at the first allocation slow path.
    if (c.free_a_handed_block()) w.counts.first_free_threads.fetch_add(1, std::memory_order_relaxed);
  }
  if (kind >= 90) {
    // A producer: allocates, leaves everything for others, exits.
    for (unsigned n = 1 + c.rng()() % 48; n-- > 0;) c.allocate();
    while (c.rng()() % 8) c.leave_one();
    c.finish();
    return;
  }
  for (unsigned n = 10 + c.rng()() % 200; n-- > 0;) {
    c.step();
    if (c.rng()() % 64 == 0) c.remote_burst();
  }
  c.finish();
}

// Runs throughout: its heap lives while others come and go, grows (so it
// gives up parked heaps) and keeps batches for their heaps in its outboxes.
void long_life(World& w, std::uint64_t serial) {
  Churner c(w, serial);
  while (!w.stop.load(std::memory_order_relaxed)) {
    c.step();
    if (c.rng()() % 256 == 0) c.remote_burst();
  }
  c.finish();
}

// A short thread's place: a new one starts there once the last has ended.
struct Place {
  std::thread thread;
  std::atomic<bool> ended{true};
};

// Keeps kShortThreadsLive short threads running until the deadline.
void churn_threads(World& w, Clock::time_point deadline, std::uint64_t& serial) {
  std::vector<Place> places(kShortThreadsLive);
  while (Clock::now() < deadline && w.failures.count() == 0) {
    bool started = false;
    for (Place& p : places) {
      if (!p.ended.load(std::memory_order_acquire)) continue;
      if (p.thread.joinable()) p.thread.join();
      p.ended.store(false, std::memory_order_relaxed);
      p.thread = std::thread([&w, &p, s = serial++] {
        short_life(w, s);
        p.ended.store(true, std::memory_order_release);
      });
      started = true;
    }
    if (!started) std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  for (Place& p : places)
    if (p.thread.joinable()) p.thread.join();
}

// Every block still in the hand-over table, freed by a thread that then
// exits (its exit delivers its outboxes: nothing it freed stays counted).
void sweep(World& w) {
  std::thread([&w] {
    for (auto& slot : w.handover)
      if (std::uint64_t word = slot.exchange(0, std::memory_order_acq_rel)) free_handed(w, word);
  }).join();
}

// Blocks the statistics still count in use, all classes and large and huge
// blocks: with every block freed and every thread gone, none may be.
void expect_nothing_in_use() {
  tenon_stats s = tenon_test::read_stats();
  for (unsigned c = 0; c < s.classes; ++c)
    EXPECT_EQ(s.class_stats[c].blocks_in_use, 0u)
        << s.class_stats[c].blocks_in_use << " blocks of " << s.class_stats[c].block_size
        << " B freed but still in use: lost on their way back to their span";
  EXPECT_EQ(s.large_blocks, 0u) << "large blocks freed but still live";
  EXPECT_EQ(s.huge_blocks, 0u) << "huge blocks freed but still live";
}

}  // namespace

TEST(HeapHandover, ChurningThreadsLoseNoBlockAndShareNone) {
  World w;
  for (auto& slot : w.handover) slot.store(0);
  w.seed = std::random_device{}();
  if (const char* s = std::getenv("TENON_TEST_SEED")) w.seed = std::strtoull(s, nullptr, 0);
  std::printf("heap hand-over: seed %llu (TENON_TEST_SEED; threads make it no replay)\n",
              static_cast<unsigned long long>(w.seed));
#ifdef TENON_INJECT
  tenon_inject_set_hook(tenon_test::stall_sometimes);
#endif
  create_late_key();
  std::uint64_t serial = 1;
  const auto deadline = Clock::now() + run_time();
  std::vector<std::thread> long_threads;
  for (unsigned i = 0; i < kLongThreads; ++i) long_threads.emplace_back(long_life, std::ref(w), serial++);
  churn_threads(w, deadline, serial);
  w.stop.store(true);
  for (auto& t : long_threads) t.join();
  sweep(w);
  EXPECT_EQ(w.failures.count(), 0) << w.failures.first();
  std::printf("heap hand-over: %llu threads (%llu began with a free, %llu called after their heap was released), "
              "%llu blocks, %llu freed by another thread\n",
              static_cast<unsigned long long>(w.counts.threads.load()),
              static_cast<unsigned long long>(w.counts.first_free_threads.load()),
              static_cast<unsigned long long>(w.counts.late_callers.load()),
              static_cast<unsigned long long>(w.counts.blocks.load()),
              static_cast<unsigned long long>(w.counts.handed_frees.load()));
  if (w.failures.count() == 0) expect_nothing_in_use();
#ifdef TENON_INJECT
  tenon_inject_set_hook(nullptr);
#endif
  pthread_key_delete(g_late_key);
}
