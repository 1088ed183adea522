/* Huge blocks under libtenon-secure.so (bench/security/misuse.h's protocol:
 * ACCESS before the access, DONE after it). A freed huge block waits in the
 * huge cache inaccessible past its first page, and a block reused from the
 * cache is accessible exactly as far as its usable size: the pages it keeps
 * past that, for a later and larger request, stay inaccessible.
 * usage: huge_after_free [CASE]
 *   (none)         read the middle of a freed 4 MiB block: faults
 *   first_page     write 64 bytes into a freed 4 MiB block (its first
 *                  page): faults
 *   first_page_reused  the same into a block reused from the cache (a
 *                  cached 32 MiB block reused for 8 MiB), freed again
 *   reuse_past     a cached 32 MiB block reused for 8 MiB: all 8 MiB
 *                  writable, a read 16 MiB in (past the request) faults
 *   reuse_free     the same block freed again: a read of a page the
 *                  request had opened faults
 *   reuse_grow     a cached 8 MiB block reused for 24 MiB (grown by mremap):
 *                  all of it writable, the old contents' place too; ends
 *                  normally (END, exit 0)
 *   reuse_split    a cached, resident 32 MiB block reused for 8 MiB: its
 *                  tail moves to a cached block of its own (an inaccessible
 *                  range until then), which a 20 MiB request then reuses,
 *                  written throughout; a read past that request faults
 *   realloc_untouched  16 blocks of 3 MiB, only their first and last bytes
 *                  written, each grown to 6 MiB by realloc: the contents
 *                  kept, and the growth of the resident set printed (NOTE
 *                  grew_kib): a grown block is committed page by page as it
 *                  is touched, as any other (README), not copied whole */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "access_probe.h"
#include "../api/resident_kib.h"

#define MIB ((size_t)1 << 20)

static int grow_untouched(void) {
  enum { kBlocks = 16 };
  const size_t was = 3 * MIB, now = 6 * MIB;
  char* b[kBlocks];
  for (int i = 0; i < kBlocks; i++) {
    b[i] = malloc(was);
    if (!b[i]) return 2;
    b[i][0] = (char)i;
    b[i][was - 1] = (char)(i + 1);
  }
  long before = resident_kib();
  for (int i = 0; i < kBlocks; i++) {
    char* q = realloc(b[i], now);
    if (!q) return 2;
    if (q[0] != (char)i || q[was - 1] != (char)(i + 1)) return 3;
    b[i] = q;
  }
  printf("NOTE grew_kib %ld\n", resident_kib() - before);
  for (int i = 0; i < kBlocks; i++) free(b[i]);
  return 0;
}

/* A freed block of `was` bytes, first and last pages written (the rest not
 * resident: the cache keeps it whole), then a block of `now` bytes that
 * reuses it, written throughout. */
static char* reuse(size_t was, size_t now) {
  char* p = malloc(was);
  if (!p) exit(2);
  p[0] = 1;
  p[was - 1] = 1;
  free(p);
  char* q = malloc(now);
  if (!q) exit(2);
  memset(q, 0x5a, now);
  printf("NOTE reused %s\n", q == p ? "in place" : "elsewhere");
  return q;
}

int main(int argc, char** argv) {
  const char* c = argc > 1 ? argv[1] : "";
  if (!strcmp(c, "")) {
    size_t n = 4 * MIB;
    char* p = malloc(n);
    if (!p) return 2;
    memset(p, 0x5a, n);
    free(p);
    access_read("freed", p + n / 2);
  } else if (!strcmp(c, "first_page")) {
    char* p = malloc(4 * MIB);
    if (!p) return 2;
    memset(p, 0x5a, 4 * MIB);
    free(p);
    access_write("the first page of freed", p + 64);
  } else if (!strcmp(c, "first_page_reused")) {
    char* q = reuse(32 * MIB, 8 * MIB);
    free(q);
    access_write("the first page of freed", q + 64);
  } else if (!strcmp(c, "reuse_past")) {
    char* q = reuse(32 * MIB, 8 * MIB);
    access_read("past the request", q + 16 * MIB);
  } else if (!strcmp(c, "reuse_free")) {
    char* q = reuse(32 * MIB, 8 * MIB);
    free(q);
    access_read("freed", q + 4 * MIB);
  } else if (!strcmp(c, "reuse_grow")) {
    char* q = reuse(8 * MIB, 24 * MIB);
    for (size_t i = 0; i < 24 * MIB; i += 4096)
      if (q[i] != 0x5a) return 3;
    free(q);
  } else if (!strcmp(c, "reuse_split")) {
    char* p = malloc(32 * MIB);
    if (!p) return 2;
    memset(p, 1, 32 * MIB);
    free(p);
    char* q = malloc(8 * MIB);
    char* t = malloc(20 * MIB);
    if (!q || !t) return 2;
    memset(q, 0x5a, 8 * MIB);
    memset(t, 0x5a, 20 * MIB);
    printf("NOTE tail %s\n", t > q && t < p + 32 * MIB ? "reused in place" : "elsewhere");
    access_read("past the request", t + 22 * MIB);
  } else if (!strcmp(c, "realloc_untouched")) {
    int rc = grow_untouched();
    if (rc) return rc;
  } else {
    return 2;
  }
  printf("END\n");
  return 0;
}
