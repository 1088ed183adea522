// Prints the locked variant's mutex waits at exit when TENON_STATS=1.
#include <stdio.h>
#include <stdlib.h>

#include "locked_sync.h"

__attribute__((destructor)) static void tenon_locked_print() {
  const char* on = getenv("TENON_STATS");
  if (!on || *on == '0') return;
  for (auto* c = tenon::locked::g_counters.load(); c; c = c->next)
    fprintf(stderr, "  %llu / %llu  mutex waits / entries: %s\n", (unsigned long long)c->waits.load(),
            (unsigned long long)c->entries.load(), c->name);
}
