/* The process's resident set in KiB, for the plain C test programs that check
 * what the allocator gives back: /proc/self/statm's second field, in pages.
 * -1 when the file cannot be read, so that a caller's check fails loudly
 * instead of comparing zeros. */
#ifndef TENON_RESIDENT_KIB_H
#define TENON_RESIDENT_KIB_H
#include <stdio.h>
#include <unistd.h>

static long resident_kib(void) {
  FILE* f = fopen("/proc/self/statm", "r");
  long size = 0, resident = -1;
  if (f) {
    if (fscanf(f, "%ld %ld", &size, &resident) != 2) resident = -1;
    fclose(f);
  }
  return resident < 0 ? -1 : resident * (sysconf(_SC_PAGESIZE) / 1024);
}

#endif
