// Prints the locked variant's mutex waits at exit when TENON_STATS is on
// (the same switch parser as the allocator's: 1, on, yes, true).
#include <stdio.h>

#include "locked_sync.h"
#include "tenon/platform/options.h"

__attribute__((destructor)) static void tenon_locked_print() {
  if (!tenon::read_options().stats) return;
  for (auto* c = tenon::locked::g_counters.load(); c; c = c->next)
    fprintf(stderr, "  %llu / %llu  mutex waits / entries: %s\n", (unsigned long long)c->waits.load(),
            (unsigned long long)c->entries.load(), c->name);
}
