/* malloc_trim's answer (docs/api.md, "Freeing"): 1 if it released memory to
 * the system, else 0, on each of the three builds.
 *   - with nothing to give back (a class's span kept by a live block, the
 *     blocks freed beside it cached or waiting, no free slice, no cached
 *     huge block: a trim just before gave everything back) the answer is 0;
 *     until 2026-11-29 (branch audit2) libtenon-percpu.so answered 1 whenever
 *     its per-CPU caches held a block, with no system call made (strace: no
 *     madvise, no munmap), even in a fresh process;
 *   - a freed 20 MiB block (cached for reuse) is released: 1, and a trim
 *     right after has nothing left: 0. */
#define _GNU_SOURCE
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../api/preload_check.h"

int main(void) {
  void* anchor = malloc(64); /* keeps the 64 B class's span in use */
  memset(anchor, 1, 64);
  malloc_trim(0); /* whatever there was to give back */
  for (int round = 0; round < 3; ++round) {
    void* blocks[16];
    for (int i = 0; i < 16; ++i) {
      blocks[i] = malloc(64);
      memset(blocks[i], 2, 64);
    }
    for (int i = 0; i < 16; ++i) free(blocks[i]);
    int r = malloc_trim(0);
    CHECK(r == 0, "round %d: malloc_trim with nothing to release answered %d", round, r);
  }
  char* big = malloc(20u << 20);
  memset(big, 3, 20u << 20);
  free(big);
  int r = malloc_trim(0);
  CHECK(r == 1, "malloc_trim after a 20 MiB block was freed answered %d", r);
  r = malloc_trim(0);
  CHECK(r == 0, "malloc_trim right after a trim answered %d", r);
  free(anchor);
  printf("trim_answer: %s\n", preload_failures ? "FAILED" : "malloc_trim answers 1 only when it released memory");
  return preload_failures ? 1 : 0;
}
