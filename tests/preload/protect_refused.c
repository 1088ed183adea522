/* libtenon-secure.so when the kernel refuses mprotect() (ENOMEM: past
 * vm.max_map_count, or opening a page past RLIMIT_DATA when another thread
 * took the share its closing lent). This program defines mprotect itself,
 * exported (-rdynamic), so the preloaded allocator's calls come here: a
 * pattern armed before a call refuses chosen ones of the next calls.
 *
 * A large block's guard pages (the page before it, the page after its usable
 * bytes) are closed one at a time; when the second close is refused, the
 * first is opened again. Until 2026-11-27, when that opening was refused too
 * the block was taken for unguarded and its run went back to the arena at
 * its free with the page still closed: a later block there faulted at its
 * first write (SIGSEGV), found by a probe that refused 5% of mprotect calls
 * at random (a 380,945-byte block faulted 0x2f000 bytes in).
 *
 * Every block handed out must be usable whole (docs/api.md), whatever the
 * kernel refused. A child runs each pattern; a fault is a failure.
 * usage: protect_refused            (every pattern, each in a child)
 *        protect_refused MASK       (one child: refuse call i of the next
 *                                    ones where bit i of MASK is set) */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../api/preload_check.h"

/* volatile: glibc declares malloc a leaf function, so a compiler may take it
 * for one that never calls back into this file and drop the stores around it. */
static volatile unsigned g_refuse_mask;  /* bit i: refuse the i-th call from now */
static volatile unsigned g_calls;
static volatile unsigned g_refused;

int mprotect(void* addr, size_t len, int prot) {
  static int (*real)(void*, size_t, int);
  if (!real) real = (int (*)(void*, size_t, int))dlsym(RTLD_NEXT, "mprotect");
  unsigned i = g_calls++;
  if (i < 32 && (g_refuse_mask >> i) & 1) {
    ++g_refused;
    errno = ENOMEM;
    return -1;
  }
  return real(addr, len, prot);
}

enum { kSmall = 4000, kLarge = 24 };
static const size_t kSizes[] = {300000, 100000, 1000000};

/* Blocks that cover the runs just freed, every byte written: small blocks
 * (their spans are slices of the runs) and large ones from a slice earlier
 * (a run starting before a stale closed page covers it). */
static void write_over_freed_runs(void) {
  static void* small[kSmall];
  void* large[kLarge];
  for (int i = 0; i < kSmall; ++i) {
    small[i] = malloc(1000 + (size_t)(i % 7) * 16);
    if (small[i]) memset(small[i], 0xa5, malloc_usable_size(small[i]));
  }
  for (int i = 0; i < kLarge; ++i) {
    large[i] = malloc(kSizes[i % 3] + (size_t)i * 4096);
    if (large[i]) memset(large[i], 0xa5, malloc_usable_size(large[i]));
  }
  for (int i = 0; i < kSmall; ++i) free(small[i]);
  for (int i = 0; i < kLarge; ++i) free(large[i]);
  malloc_trim(0);
}

/* One child: the pattern armed around one large allocation (after another
 * just before it, freed after it, so that a later run starts before its
 * run), the block written whole and freed, then the freed runs written over
 * by blocks of every size. Exit 0, or a fault. */
static int one_pattern(unsigned mask) {
  for (int s = 0; s < 3; ++s) {
    void* before = malloc(70000);
    g_calls = 0;
    g_refuse_mask = mask;
    errno = 0;
    unsigned char* p = malloc(kSizes[s]);
    int err = errno;
    g_refuse_mask = 0;
    /* A refused guard is tenon's business: a block handed out leaves errno
     * as it was (found by review, 2026-11-27: ENOMEM after a usable block). */
    if (p && err != 0) return 3;
    if (p) memset(p, 0x5a, malloc_usable_size(p));
    free(before);
    free(p);
    malloc_trim(0);  /* the quarantine gives its blocks back to their runs */
    write_over_freed_runs();
  }
  return 0;
}

int main(int argc, char** argv) {
  if (argc == 2) return one_pattern((unsigned)strtoul(argv[1], NULL, 0));
  /* Every pattern of the first six calls: the guards' close, close, reopen
   * and the quarantine's close and open among them. */
  for (unsigned mask = 1; mask < 64; ++mask) {
    pid_t pid = fork();
    if (pid == 0) _exit(one_pattern(mask));
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
          "refusing mprotect calls %#x: the child %s %d (a signal: a block handed out with a page closed? exit 3: errno changed by a malloc that succeeded)", mask,
          WIFSIGNALED(status) ? "died by signal" : "exited with", WIFSIGNALED(status) ? WTERMSIG(status)
                                                                                      : WEXITSTATUS(status));
  }
  printf("mprotect refused: 63 patterns, %d failed\n", preload_failures);
  return preload_failures ? 1 : 0;
}
