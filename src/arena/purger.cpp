#include "arena/purger.h"

#include <stdlib.h>

#include <atomic>

#include "arena/chunk.h"
#include "common/config.h"
#include "common/inject.h"
#include "common/options.h"
#include "platform/os.h"

namespace tenon::purger {

namespace {

// kRunning stays set in a fork child, which has no purger: it is never
// restarted there (a child of a multithreaded process cannot tell that it is
// alone; its memory is purged on allocator activity, as without the thread).
enum : int { kNotStarted, kStarting, kRunning, kFailed };
std::atomic<int> g_state{kNotStarted};

std::uint32_t sleep_time_ms() {
  std::uint32_t delay = options().purge_delay_ms;
  std::uint32_t longest = delay / 2 + 1;  // the pass's own period (arena::purge)
  std::uint32_t due = arena::ms_until_purge_due();
  std::uint32_t ms = due < longest ? due : longest;
  return ms < kPurgerMinSleepMs ? kPurgerMinSleepMs : ms;
}

void* run(void*) {
  os::name_this_thread("tenon-purge");
  for (;;) {
    TENON_INJECT_POINT("purger.pass");
    arena::purge(false, nullptr);  // skipped if another thread holds the pass
    os::sleep_ms(sleep_time_ms());
  }
  return nullptr;
}

}  // namespace

bool start() {
  int state = g_state.load(std::memory_order_relaxed);
  if (state != kNotStarted) return state == kRunning;
  // Whoever wins starts it; anyone else goes on (a racer never waits).
  if (!g_state.compare_exchange_strong(state, kStarting, std::memory_order_relaxed)) return false;
  bool ok = os::start_thread(run);
  g_state.store(ok ? kRunning : kFailed, std::memory_order_relaxed);
  return ok;
}

void note_retained() {
  if (g_state.load(std::memory_order_relaxed) != kNotStarted) return;
  // Single-threaded: no other thread exists to hold a lock pthread_create
  // needs (its stack-cache lock is held around frees only in thread teardown
  // paths, which a process that never had a thread cannot be in), and a
  // malloc or free that pthread_create makes finds the state kStarting.
  if (!os::single_threaded()) return;
  if (options().background_purge != purge_thread::lazy) return;
  start();
}

namespace {
// TENON_BACKGROUND_PURGE=2: at load, before the program has threads of its
// own. Read here without publishing the options, which a program linking
// libtenon.a may still set in main before its first allocation.
__attribute__((constructor)) void start_at_load() {
  const char* v = getenv("TENON_BACKGROUND_PURGE");
  if (v && v[0] == '2' && v[1] == '\0') start();
}
}  // namespace

}  // namespace tenon::purger
