// arena<C>: the background purger, one thread that runs the purge pass on
// time, so that free memory goes back to the OS after TENON_PURGE_DELAY_MS
// even when the program makes no further allocator call (idle, or blocked on
// I/O).
//
// The thread only ever runs the existing pass, which claims its work by CAS
// and never waits; nobody waits for the thread either, so a purger that is
// stopped (or was lost to fork) costs only the purging. It is started either
// lazily, by the first release that keeps memory resident while the process
// has never had a second thread (then nobody else can hold a lock that
// pthread_create takes, and pthread_create's own malloc calls re-enter us
// harmlessly), or at load (TENON_BACKGROUND_PURGE=2, the engine's start-up).
// See docs/options.md and docs/architecture.md.
#include "tenon/arena/arena.h"
#include "tenon/common/inject.h"
#include "tenon/platform/options.h"

namespace tenon {

template <class C>
void* arena<C>::purger_main(void* self) {
  using platform = typename C::platform;
  auto* a = static_cast<arena*>(self);
  platform::name_this_thread("tenon-purge");
  for (;;) {
    TENON_INJECT_POINT("purger.pass");
    a->purge(false, nullptr);  // skipped if another thread holds the pass
    std::uint32_t longest = options().purge_delay_ms / 2 + 1;  // the pass's own period
    std::uint32_t due = a->ms_until_purge_due();
    std::uint32_t ms = due < longest ? due : longest;
    platform::sleep_ms(ms < kPurgerMinSleepMs ? kPurgerMinSleepMs : ms);
  }
  return nullptr;
}

template <class C>
bool arena<C>::start_purger() {
  int state = purger_state_.load(std::memory_order_relaxed);
  if (state != arena_detail::kNotStarted) return state == arena_detail::kRunning;
  // Whoever wins starts it; anyone else goes on (a racer never waits).
  if (!purger_state_.compare_exchange_strong(state, arena_detail::kStarting, std::memory_order_relaxed)) return false;
  bool ok = C::platform::start_thread(purger_main, this);
  purger_state_.store(ok ? arena_detail::kRunning : arena_detail::kFailed, std::memory_order_relaxed);
  return ok;
}

// The count of free resident slices that lets note_retained see memory kept
// a little in each of many chunks (release.ipp). Kept only while the purger
// may still start lazily: not started yet, in a process that has never had
// a second thread, so that this thread alone changes it (plain load and
// store; no shared counter for multithreaded programs, which never start it
// lazily). Once either ends, the count is stale and unused.
template <class C>
void arena<C>::count_kept(std::int64_t slices) {
  if (purger_state_.load(std::memory_order_relaxed) != arena_detail::kNotStarted) return;
  if (!C::platform::single_threaded()) return;
  kept_slices_.store(kept_slices_.load(std::memory_order_relaxed) + slices, std::memory_order_relaxed);
}

// A config that tells a second free from metadata after the block's run
// went back (the secure build: a large block's run is released as it leaves
// the quarantine, 8 large frees after its free, and a second free then
// reads the span) starts the purger before its first release of all: at the
// 1 MiB mark, later, the DTV took the slices of a run released before, and
// a second free of that run's block said "invalid pointer"
// (SecureDetects.SecondCallAfterTheQuarantineSaysFreedWithThePurger). A
// thread in every such program that gives back a run; none in the others.
template <class C>
constexpr bool purger_before_first_release() {
  if constexpr (requires { C::purger_before_first_release; }) return C::purger_before_first_release;
  else return false;
}

// A release of n slices that will start the purger (mark_over_cap: a run of
// kPurgerStartSlices, or that much kept in all) starts it first, while the
// run is still taken: pthread_create allocates (the new thread's DTV, by
// calloc), and on slices freed just before, that allocation formed a span
// whose first block was the freed block itself, so that the program's
// second free of it freed that live block unreported (issue 11's gaps,
// TenonDetects.DoubleFreeOfALargeBlockThatStartsThePurger). The start for
// a chunk over its cap stays after the release (mark_over_cap).
template <class C>
void arena<C>::start_purger_before_release(unsigned n) {
  if (purger_state_.load(std::memory_order_relaxed) != arena_detail::kNotStarted) return;
  if (n >= kPurgerStartSlices || purger_before_first_release<C>() ||
      kept_slices_.load(std::memory_order_relaxed) + n >= static_cast<std::int64_t>(kPurgerStartSlices))
    note_retained();
}

template <class C>
void arena<C>::note_retained() {
  if (purger_state_.load(std::memory_order_relaxed) != arena_detail::kNotStarted) return;
  // Single-threaded: no other thread exists to hold a lock pthread_create
  // needs (its stack-cache lock is held around frees only in thread teardown
  // paths, which a process that never had a thread cannot be in), and a
  // malloc or free that pthread_create makes finds the state kStarting.
  if (!C::platform::single_threaded()) return;
  if (options().background_purge != purge_thread::lazy) return;
  start_purger();
}

}  // namespace tenon
