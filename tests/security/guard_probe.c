/* Guard pages and the order of fresh blocks under libtenon-secure.so
 * (bench/security/misuse.h's protocol: ACCESS before the access, DONE after
 * it; NOTE lines with what was seen; END at a normal end).
 * usage: guard_probe CASE
 *   large_overflow   write byte by byte past the end of a live 200 KiB
 *                    block, up to two pages on: faults at the guard page
 *                    after the block (before the canary's check at free)
 *   huge_overflow    the same past a fresh 5 MiB block (a mapping of its own)
 *   chunk_end        read the last slice of the chunk of a small block: the
 *                    guard between the chunk's blocks and whatever is mapped
 *                    above (the next chunk's header)
 *   chunk_header_gap read slice 0 past the chunk header's pages: the guard
 *                    between the header and the first span (SKIP, exit 77,
 *                    with 64 KiB pages, where the header's page is the slice)
 *   many_large       10,000 live 40 KiB blocks (past the secure build's
 *                    budget of guarded large blocks, 8,192); NOTE vmas_before, vmas_after
 *                    (lines of /proc/self/maps) and chunks (distinct 4 MiB
 *                    units holding them); END
 *   fresh_order      64 blocks of 64 bytes from a fresh process; NOTE
 *                    ascending K (of the 63 neighbours, how many follow in
 *                    address order) and NOTE order ... (each block's rank
 *                    by address); END */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "access_probe.h"

#define KIB ((size_t)1024)
#define MIB (KIB * KIB)
#define CHUNK (4 * MIB)
#define SLICE (64 * KIB)

static void overflow(size_t n) {
  char* p = malloc(n);
  if (!p) exit(2);
  memset(p, 0x5a, n);
  printf("ACCESS write past the end of %p\n", (void*)p);
  fflush(stdout);
  for (size_t i = n; i < n + 2 * 4096 + 64; ++i) ((volatile char*)p)[i] = 0x41;
  printf("DONE\n");
  free(p);
}

static long count_maps(void) {
  FILE* f = fopen("/proc/self/maps", "r");
  if (!f) return -1;
  long lines = 0;
  int c;
  while ((c = fgetc(f)) != EOF)
    if (c == '\n') ++lines;
  fclose(f);
  return lines;
}

static int by_address(const void* a, const void* b) {
  uintptr_t x = *(const uintptr_t*)a, y = *(const uintptr_t*)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char** argv) {
  const char* c = argc > 1 ? argv[1] : "";
  if (!strcmp(c, "large_overflow")) {
    overflow(200 * KIB);
  } else if (!strcmp(c, "huge_overflow")) {
    overflow(5 * MIB + 100);
  } else if (!strcmp(c, "chunk_end") || !strcmp(c, "chunk_header_gap")) {
    char* p = malloc(64);
    if (!p) return 2;
    char* base = (char*)((uintptr_t)p & ~(uintptr_t)(CHUNK - 1));
    if (strcmp(c, "chunk_end") && sysconf(_SC_PAGESIZE) >= (long)SLICE) {
      printf("SKIP the header's page is all of slice 0\n");  /* 64 KiB pages: no room for that guard */
      return 77;
    }
    if (!strcmp(c, "chunk_end")) access_read("last slice of the chunk of", base + CHUNK - 8);
    else access_read("slice 0 past the header of the chunk of", base + SLICE - 8);
  } else if (!strcmp(c, "many_large")) {
    size_t count = 10000;
    char** blocks = calloc(count, sizeof *blocks);
    uintptr_t* units = calloc(count, sizeof *units);
    if (!blocks || !units) return 2;
    long before = count_maps();
    for (size_t i = 0; i < count; ++i) {
      blocks[i] = malloc(40 * KIB);
      if (!blocks[i]) return 2;
      units[i] = (uintptr_t)blocks[i] / CHUNK;
    }
    long after = count_maps();
    qsort(units, count, sizeof *units, by_address);
    size_t chunks = 0;
    for (size_t i = 0; i < count; ++i)
      if (i == 0 || units[i] != units[i - 1]) ++chunks;
    printf("NOTE vmas_before %ld\nNOTE vmas_after %ld\nNOTE chunks %zu\n", before, after, chunks);
    for (size_t i = 0; i < count; ++i) free(blocks[i]);
  } else if (!strcmp(c, "fresh_order")) {
    size_t count = 64;
    uintptr_t* a = calloc(count, sizeof *a);
    uintptr_t* sorted = calloc(count, sizeof *sorted);
    if (!a || !sorted) return 2;
    for (size_t i = 0; i < count; ++i) a[i] = (uintptr_t)malloc(64);
    size_t ascending = 0;
    for (size_t i = 1; i < count; ++i)
      if (a[i] > a[i - 1]) ++ascending;
    memcpy(sorted, a, count * sizeof *a);
    qsort(sorted, count, sizeof *sorted, by_address);
    printf("NOTE ascending %zu\nNOTE order", ascending);
    for (size_t i = 0; i < count; ++i)
      printf(" %zu", (size_t)((uintptr_t*)bsearch(&a[i], sorted, count, sizeof *sorted, by_address) - sorted));
    printf("\n");
  } else {
    printf("SKIP unknown case\n");
    return 77;
  }
  printf("END\n");
  return 0;
}
