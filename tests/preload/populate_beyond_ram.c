/* TENON_POPULATE=1 and a block bigger than the machine's memory. Blocks are
 * mapped MAP_NORESERVE, so malloc(1 TiB) gets its address space (README,
 * "Differences from glibc's malloc"); until 2026-11-29 tenon then asked
 * madvise(MADV_POPULATE_WRITE) to fault all of it in, and the kernel's page
 * allocator called the OOM killer on the way (MADV_POPULATE_WRITE answers
 * ENOMEM only after the OOM killer had its turn): the process died of
 * SIGKILL inside malloc, and other processes could be killed first.
 *
 * Letting that happen would be the test taking the machine down, so this
 * program defines madvise itself, exported (-rdynamic): the preloaded
 * allocator's calls come here. A populate request for more than half of the
 * memory free now is counted and refused (ENOMEM) without reaching the
 * kernel; every other call goes through. The checks: an 8 MiB block is
 * pre-faulted through this madvise (else the guard would not hold, and the
 * 1 TiB request is not made), no request over half the free memory is
 * made, malloc(1 TiB) answers (a block, or NULL + ENOMEM), and the next
 * calls work. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/sysinfo.h>

#include "../api/preload_check.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

static volatile size_t g_largest_populate;   /* bytes, any request */
static volatile size_t g_too_big;            /* requests refused here */
static volatile size_t g_too_big_bytes;

static size_t free_bytes(void) {
  struct sysinfo si;
  if (sysinfo(&si) != 0) return 0;
  return (size_t)(si.freeram + si.bufferram) * si.mem_unit;
}

int madvise(void* addr, size_t len, int advice) {
  static int (*real)(void*, size_t, int);
  if (!real) real = (int (*)(void*, size_t, int))dlsym(RTLD_NEXT, "madvise");
  if (advice == MADV_POPULATE_WRITE) {
    if (len > g_largest_populate) g_largest_populate = len;
    if (len > free_bytes() / 2) {
      ++g_too_big;
      g_too_big_bytes = len;
      errno = ENOMEM;
      return -1;
    }
  }
  return real(addr, len, advice);
}

/* malloc(8 MiB) with the option on: returns the largest pre-fault request
 * seen here (at least 8 MiB while the option works). */
static size_t populate_of_8_mib(void) {
  g_largest_populate = 0;
  char* r = malloc((size_t)8 << 20);
  CHECK(r != NULL, "malloc(8 MiB) failed");
  if (r) memset(r, 1, (size_t)8 << 20);
  free(r);
  return g_largest_populate;
}

int main(void) {
  const char* populate = getenv("TENON_POPULATE");
  CHECK(populate && strcmp(populate, "1") == 0, "run under TENON_POPULATE=1 (got %s)", populate ? populate : "nothing");
  const size_t huge = (size_t)1 << 40;

  /* First the guard itself: the allocator's pre-faults must reach this
   * madvise. If they did not (a raw syscall, say), the 1 TiB request below
   * would go to the kernel unguarded: stop before it. */
  size_t seen = populate_of_8_mib();
  printf("malloc(8 MiB) pre-faulted %zu bytes\n", seen);
  if (seen < ((size_t)8 << 20)) {
    printf("FAIL: the allocator's pre-faults do not reach this program's madvise (largest %zu): "
           "the 1 TiB request is not made, it could take the machine down\n", seen);
    return 1;
  }

  size_t before = free_bytes();
  errno = 0;
  void* p = malloc(huge);
  int err = errno;
  ESCAPE(p);
  printf("malloc(1 TiB): %p (errno %d); populate requests over half the free memory (%zu MiB free): %zu, "
         "the last %zu MiB\n",
         p, err, before >> 20, (size_t)g_too_big, (size_t)g_too_big_bytes >> 20);
  CHECK(g_too_big == 0, "asked the kernel to pre-fault %zu bytes with %zu free", (size_t)g_too_big_bytes, before);
  CHECK(p || err == ENOMEM, "NULL with errno %d", err);
  free(p);

  char* q = malloc(100);
  CHECK(q != NULL, "malloc(100) after the 1 TiB request failed");
  free(q);
  seen = populate_of_8_mib();
  printf("malloc(8 MiB) after it pre-faulted %zu bytes\n", seen);
  CHECK(seen >= ((size_t)8 << 20), "an 8 MiB block is no longer pre-faulted (largest request %zu)", seen);
  return preload_failures ? 1 : 0;
}
