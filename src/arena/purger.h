// The background purger: one thread that runs the purge pass on time, so that
// free memory goes back to the OS after TENON_PURGE_DELAY_MS even when the
// program makes no further allocator call (idle, or blocked on I/O).
//
// The thread only ever runs the existing pass (arena::purge), which claims its
// work by CAS and never waits; nobody waits for the thread either, so a
// purger that is stopped (or was lost to fork) costs only the purging. It is
// started either lazily, by the first release that keeps memory resident
// while the process has never had a second thread (then nobody else can hold
// a lock that pthread_create takes, and pthread_create's own malloc calls
// re-enter us harmlessly), or at load (TENON_BACKGROUND_PURGE=2). See
// docs/options.md and docs/architecture.md.
#pragma once

namespace tenon::purger {

// Memory was just kept resident for reuse: start the purger if the options
// ask for it to start lazily and it can be started now without waiting for
// another thread. One relaxed load once started or ruled out.
void note_retained();

// Start the purger now, whatever the process; true if it runs. Called at load
// for TENON_BACKGROUND_PURGE=2 (library constructors run before the program's
// threads exist).
bool start();

}  // namespace tenon::purger
