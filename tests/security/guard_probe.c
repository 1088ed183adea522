/* Guard pages and the order of fresh blocks under libtenon-secure.so
 * (bench/security/misuse.h's protocol: ACCESS before the access, DONE after
 * it; NOTE lines with what was seen; END at a normal end).
 * usage: guard_probe CASE
 *   large_overflow   write byte by byte past the end of a live 200 KiB
 *                    block, up to two pages on: faults at the guard page
 *                    after the block (before the canary's check at free)
 *   huge_overflow    the same past a fresh 5 MiB block (a mapping of its own)
 *   huge_underflow   write the 8 bytes before a fresh 5 MiB block: faults
 *                    at the guard page between the block's header page and
 *                    its data (before the canary's check at free)
 *   huge_underflow_reused  the same before a 5 MiB block reused from the huge
 *                    cache (NOTE reused in place|elsewhere)
 *   huge_underflow_aligned  the same before posix_memalign's 5 MiB block at
 *                    64 KiB alignment
 *   huge_underflow_far  the same at 4 MiB alignment (the block's header a
 *                    unit below it)
 *   huge_blocks      huge blocks used as a program would: realloc growing,
 *                    shrinking and moving them, aligned allocations, calloc,
 *                    a cached block reused smaller and larger, small blocks
 *                    at 4 to 16 MiB alignment; contents and
 *                    malloc_usable_size checked; NOTE bad N; END
 *   huge_double_free a 5 MiB block freed twice (ACCESS before the second
 *                    free): the second free must be reported
 *   huge_double_free_aligned  the same, the block from posix_memalign at
 *                    4 KiB alignment (a block at a larger one is not cached
 *                    but unmapped at its free: nothing of it is left to check)
 *   huge_double_free_unmapped  the same with blocks the huge cache does not
 *                    keep, unmapped at their first free: 100 MiB, and 5 MiB
 *                    at 64 KiB alignment; the second free must still be
 *                    reported (it ended by SIGSEGV, with no line, until
 *                    2026-11-27)
 *   large_reused:HOW:N:M  a large block of N bytes freed, then 8 more blocks
 *                    of N (allocated before it, held) freed, so that it has
 *                    left the secure quarantine (its run kept closed in the
 *                    thread's run cache since branch secrow), then
 *                    q = malloc(M) (NOTE reused in place|elsewhere), written
 *                    whole; HOW: overflow (write past q's end, up to two
 *                    pages on), underflow (the 8 bytes before q), whole
 *                    (q's malloc_usable_size bytes written and read back,
 *                    freed, and another block of M the same; NOTE bad N)
 *   large_after_wait:N  a large block of N bytes freed, then 8 more (held
 *                    before it) freed, so that it has left the quarantine;
 *                    then ACCESS: p[0] read
 *   chunk_end        read the last slice of the chunk of a small block: the
 *                    guard between the chunk's blocks and whatever is mapped
 *                    above (the next chunk's header)
 *   chunk_header_gap read slice 0 past the chunk header's pages: the guard
 *                    between the header and the first span (SKIP, exit 77,
 *                    with 64 KiB pages, where the header's page is the slice)
 *   many_large       10,000 live 40 KiB blocks (past the secure build's
 *                    budget of guarded large blocks, 4,096); NOTE vmas_before, vmas_after
 *                    (lines of /proc/self/maps) and chunks (distinct 4 MiB
 *                    units holding them); END
 *   many_waiting_large  2,000 threads alive at once, each having freed 8
 *                    large blocks of 33,000 bytes (its quarantine ring's
 *                    8 large slots full: 16,000 blocks waiting); NOTE
 *                    vmas_before, vmas_after, threads (those started) and
 *                    chunks (distinct 4 MiB units holding the blocks); END
 *   large_blocks     large blocks of every layout used as a program would:
 *                    sizes about the small/large and large/huge limits,
 *                    realloc growing and shrinking across them, aligned
 *                    allocations, calloc; contents and malloc_usable_size
 *                    (at least the size asked) checked; NOTE bad N (the
 *                    mismatches); END
 *   aligned_double_free  posix_memalign of 256 KiB at 8 KiB and at 64 KiB
 *                    alignment, each freed twice (ACCESS before the second
 *                    free of the first): the second free must be reported
 *                    (the program ends there: the 64 KiB one is the case
 *                    below)
 *   aligned_double_free:A:N  the same for one block, posix_memalign(A, N)
 *                    (decimal); about the small classes' limit, A plus N
 *                    past 32 KiB makes the block a large one
 *   aligned_double_free_by:F:A:N:D  a block of N bytes from F
 *                    (posix_memalign, aligned_alloc or memalign) at
 *                    alignment A, written whole and freed twice: at once
 *                    (D = 0) or with D blocks of the same kind freed between
 *                    (D = 1: free(p); free(q); free(p); D = 100: p has left
 *                    the secure quarantine's 64 slots); ACCESS before the
 *                    second free of p, which must be reported
 *   after_wait:OP:N  a block of N bytes from malloc, freed, then 100
 *                    blocks of N bytes (allocated before it, held) freed,
 *                    which push it out of the secure quarantine; ACCESS
 *                    before OP of it again: free, realloc (to N + 1) or
 *                    usable (malloc_usable_size), which must be reported
 *   large_double_free:N  a block of N bytes freed, then, with no allocation
 *                    of the program's between, freed again (ACCESS before):
 *                    must be reported
 *   free_race:N      a block of N bytes freed by two threads at the same
 *                    instant (both spin until both are ready); ACCESS
 *                    before: one of the two frees must be reported
 *   free_race_held:N[:POINT]  free_race, in a library built with
 *                    -DTENON_INJECT=ON (SKIP, exit 77, in any other): the
 *                    first of the two frees of p to reach injection point
 *                    POINT (canary.huge_end, the canary's hold of a huge
 *                    block, unless given) waits there until the other
 *                    free has returned (50 ms to 2 s)
 *   realloc_free_held:N:M  in a library built with -DTENON_INJECT=ON (SKIP,
 *                    exit 77, in any other): a block of N bytes freed in one
 *                    thread, held at injection point huge.take (the
 *                    free has found p a huge block's start and not yet
 *                    taken it), while another thread reallocs it to M
 *                    bytes, which moves it (a page mapped right after the
 *                    block: it cannot grow in place), until the realloc
 *                    has returned (50 ms to 2 s); ACCESS before: the
 *                    held free must be reported
 *   free_reuse_held:N  in a library built with -DTENON_INJECT=ON (SKIP,
 *                    exit 77, in any other): a block of N bytes freed in one
 *                    thread, held at injection point huge.take (as
 *                    realloc_free_held), while another thread frees it and
 *                    mallocs N bytes again, which may get the same place
 *                    (from the huge cache, or unmapped and mapped again),
 *                    until that thread has returned; ACCESS before: the
 *                    held free must be reported, never free the new block
 *                    (NOTE reused in place or elsewhere, then DONE, if it
 *                    was not)
 *   realloc_huge_free_held:N:M  in a library built with -DTENON_INJECT=ON
 *                    (SKIP, exit 77, in any other): a block of N bytes
 *                    realloc'd to M bytes (both huge) in one thread, held at
 *                    injection point canary.realloc_huge (the secure canary
 *                    has checked the block and given it back for the
 *                    engine's realloc) while another thread frees it, until
 *                    that free has returned; ACCESS before: the realloc must
 *                    be reported (NOTE what it returned, then DONE, if not)
 *   usable_free_held:N  in a library built with -DTENON_INJECT=ON (SKIP,
 *                    exit 77, in any other): malloc_usable_size of a block
 *                    of N bytes in one thread, held at injection point
 *                    huge.usable (it has found p a huge block's start and
 *                    read nothing of the block yet) while another thread
 *                    frees it, until that free has returned; ACCESS before:
 *                    no fault (NOTE the usable size, then DONE), or under
 *                    libtenon-secure.so the report of a freed block
 *   usable_read_held:N  as usable_free_held, held at injection point
 *                    huge.read instead (libtenon-secure.so: it has counted
 *                    itself a reader of the live block and is about to
 *                    read its end in place) while another thread frees it,
 *                    until that free has returned; ACCESS before: the
 *                    report of a freed block, no fault (the free leaves
 *                    the block mapped for the reader)
 *   foreign_free_held, foreign_usable_held  in a library built with
 *                    -DTENON_INJECT=ON (SKIP, exit 77, in any other): free
 *                    or malloc_usable_size of a pointer tenon did not hand
 *                    out (a glibc header made in a mapping of this
 *                    program's, as glibc makes a block it maps alone), held
 *                    at injection point foreign.read (about to read that
 *                    header) while another thread unmaps the mapping;
 *                    ACCESS before: free reported (nothing mapped there),
 *                    malloc_usable_size NOTE usable 0 then DONE, no fault
 *   realloc_race:N:M a block of N bytes realloc'd to M bytes in one thread
 *                    and freed in another at the same instant; ACCESS
 *                    before: one of the two must be reported
 *   remote_after_wait:N[:A]  a block of N bytes from malloc (from
 *                    aligned_alloc at alignment A if given, after 16 others
 *                    of the same that the other thread frees first), freed
 *                    by another
 *                    thread, which then frees 100 blocks of its own (p
 *                    leaves that thread's quarantine for the engine, a
 *                    remote free into this thread's inbox) and exits; ACCESS
 *                    before p is freed again here, before any allocation
 *                    could sort the inbox: must be reported as a double free
 *   aligned_write_after_free:F:A:N:K  a block of N bytes from F at
 *                    alignment A (100 more allocated and held), freed; ACCESS
 *                    before a one-byte write at offset K of it; then the 100
 *                    others freed, which push it out of the quarantine,
 *                    where the write must be found; DONE after them
 *   realloc_freed:N, realloc_interior:N, realloc_overflowed:N  realloc to
 *                    N / 2 bytes of a block of N bytes already freed, of a
 *                    pointer 32 bytes into one, of one overflowed by a byte
 *                    (ACCESS before the realloc): reported as realloc's
 *   fresh_order      64 blocks of 64 bytes from a fresh process; NOTE
 *                    ascending K (of the 63 neighbours, how many follow in
 *                    address order) and NOTE order ... (each block's rank
 *                    by address); END */
#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/mman.h>
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

/* p, a block of n bytes, freed and then 8 blocks of n allocated before it:
   it has left the secure quarantine's 8 large slots of this thread's
   stripe. */
static void free_past_quarantine(char* p, size_t n) {
  char* held[8];
  for (int i = 0; i < 8; ++i) {
    held[i] = malloc(n);
    if (!held[i]) exit(2);
    memset(held[i], 1, n);
  }
  memset(p, 0x5a, n);
  free(p);
  for (int i = 0; i < 8; ++i) free(held[i]);
}

/* A block of m bytes after a block of n has left the quarantine (above). */
static char* large_reused(size_t n, size_t m) {
  char* p = malloc(n);
  if (!p) exit(2);
  free_past_quarantine(p, n);
  char* q = malloc(m);
  if (!q) exit(2);
  printf("NOTE reused %s\n", q == p ? "in place" : "elsewhere");
  memset(q, 0x3c, m);
  return q;
}

/* Writes q's usable bytes and reads them back: the mismatches. */
static long written_whole(char* q) {
  size_t u = malloc_usable_size(q);
  long bad = 0;
  for (size_t i = 0; i < u; ++i) q[i] = (char)(i * 7);
  for (size_t i = 0; i < u; ++i) bad += q[i] != (char)(i * 7);
  return bad;
}

/* The 8 bytes before a live block, written. */
static void underflow(char* p, const char* what) {
  memset(p, 0x5a, 4096);
  printf("ACCESS write the 8 bytes before %s %p\n", what, (void*)p);
  fflush(stdout);
  for (int i = 1; i <= 8; ++i) ((volatile char*)p)[-i] ^= 1;
  printf("DONE\n");
  fflush(stdout);
  free(p);
}

static char* aligned(size_t align, size_t n) {
  void* p = NULL;
  if (posix_memalign(&p, align, n) != 0 || !p) exit(2);
  return p;
}

static void fill(char* p, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; i += 512) p[i] = (char)(seed + i / 512);
  p[n - 1] = (char)seed;
}
static int filled(const char* p, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; i += 512)
    if (p[i] != (char)(seed + i / 512)) return 0;
  return p[n - 1] == (char)seed;
}

/* A block from the aligned allocation function named `how`. */
static char* aligned_by(const char* how, size_t align, size_t n) {
  if (!strcmp(how, "posix_memalign")) return aligned(align, n);
  void* p = NULL;
  if (!strcmp(how, "aligned_alloc")) p = aligned_alloc(align, n);
  else if (!strcmp(how, "memalign")) p = memalign(align, n);
  if (!p) exit(2);
  return p;
}

/* free(p), then free(p) again after ACCESS: the second must be reported. */
static void free_twice(char* p) {
  free(p);
  printf("ACCESS free %p again\n", (void*)p);
  fflush(stdout);
  free(p);
  printf("DONE\n");
}

/* The mismatches (contents, usable size) of one size n among sizes[]: a
 * block of n taken through realloc to every size and back, then aligned
 * blocks of n up to max_align, then calloc's zeros. */
static long one_size(size_t i, const size_t* sizes, size_t nsizes, size_t max_align) {
  size_t n = sizes[i];
  long bad = 0;
  char* p = malloc(n);
  if (!p) exit(2);
  if (malloc_usable_size(p) < n) ++bad;
  fill(p, n, (unsigned)i);
  for (size_t j = 0; j < nsizes; ++j) {  /* to every other size and back */
    size_t m = sizes[j];
    char* q = realloc(p, m);
    if (!q) exit(2);
    if (!filled(q, n < m ? n : m, (unsigned)i) && n <= m) ++bad;
    if (malloc_usable_size(q) < m) ++bad;
    fill(q, m, (unsigned)j);
    p = realloc(q, n);
    if (!p) exit(2);
    fill(p, n, (unsigned)i);
  }
  if (!filled(p, n, (unsigned)i)) ++bad;
  free(p);
  for (size_t align = 16; align <= max_align; align *= 4) {
    char* a = aligned(align, n);
    if ((uintptr_t)a % align || malloc_usable_size(a) < n) ++bad;
    fill(a, n, (unsigned)align);
    if (!filled(a, n, (unsigned)align)) ++bad;
    free(a);
  }
  char* z = calloc(1, n);
  if (!z) exit(2);
  for (size_t k = 0; k < n; k += 4096)
    if (z[k]) ++bad;
  free(z);
  return bad;
}

/* The mismatches (contents, usable size) over the large-block cases. */
static long large_blocks(void) {
  static const size_t sizes[] = {32 * KIB - 40, 32 * KIB - 24, 32 * KIB, 40 * KIB, 64 * KIB - 24, 64 * KIB,
                                 200 * KIB, 256 * KIB, 2 * MIB - 4096, 2 * MIB - 24, 2 * MIB, 3 * MIB};
  const size_t nsizes = sizeof sizes / sizeof sizes[0];
  long bad = 0;
  for (size_t i = 0; i < nsizes; ++i) bad += one_size(i, sizes, nsizes, 2 * MIB);
  /* Many live at once, freed in another order (through the quarantine). */
  char* live[64];
  for (int k = 0; k < 64; ++k) {
    live[k] = malloc(40 * KIB + (size_t)k * 4096);
    if (!live[k]) exit(2);
    fill(live[k], 40 * KIB + (size_t)k * 4096, (unsigned)k);
  }
  for (int k = 0; k < 64; ++k) {
    int at = (k * 37) % 64;
    if (!filled(live[at], 40 * KIB + (size_t)at * 4096, (unsigned)at)) ++bad;
    free(live[at]);
  }
  return bad;
}

/* The mismatches (contents, usable size) over the huge-block cases. */
static long huge_blocks(void) {
  static const size_t sizes[] = {2 * MIB + 1, 3 * MIB, 5 * MIB + 100, 12 * MIB, 33 * MIB};
  const size_t nsizes = sizeof sizes / sizeof sizes[0];
  long bad = 0;
  /* Aligned up to 8 MiB: at 4 MiB, a header a unit below. */
  for (size_t i = 0; i < nsizes; ++i) bad += one_size(i, sizes, nsizes, 8 * MIB);
  /* A cached 33 MiB block reused for less, then for more. */
  for (size_t i = 0; i < nsizes; ++i) {
    char* big = malloc(33 * MIB);
    if (!big) exit(2);
    fill(big, 33 * MIB, 7);
    free(big);
    char* p = malloc(sizes[i]);
    if (!p) exit(2);
    fill(p, sizes[i], (unsigned)i);
    char* q = malloc(40 * MIB);
    if (!q) exit(2);
    fill(q, 40 * MIB, 9);
    if (!filled(p, sizes[i], (unsigned)i) || !filled(q, 40 * MIB, 9)) ++bad;
    free(q);
    free(p);
  }
  /* Small blocks at alignments only a huge block gives (a unit or more). */
  for (size_t align = 4 * MIB; align <= 16 * MIB; align *= 2) {
    char* a = aligned(align, 100);
    if ((uintptr_t)a % align || malloc_usable_size(a) < 100) ++bad;
    fill(a, 100, 3);
    if (!filled(a, 100, 3)) ++bad;
    free(a);
  }
  return bad;
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

/* many_waiting_large: each thread frees its 8 blocks, then waits with them in
 * its quarantine ring until every thread has counted. */
enum { kWaitingThreads = 2000, kWaitingPerThread = 8 };
static pthread_barrier_t g_freed, g_counted;
static uintptr_t g_waiting_units[kWaitingThreads * kWaitingPerThread];

static void* free_and_wait(void* arg) {
  uintptr_t* units = arg;
  char* b[kWaitingPerThread];
  for (int i = 0; i < kWaitingPerThread; ++i) {
    b[i] = malloc(33000);
    if (!b[i]) exit(2);
    b[i][0] = 1;
    units[i] = (uintptr_t)b[i] / CHUNK;
  }
  for (int i = 0; i < kWaitingPerThread; ++i) free(b[i]);
  pthread_barrier_wait(&g_freed);
  pthread_barrier_wait(&g_counted);
  return NULL;
}

static int many_waiting_large(void) {
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 64 * KIB);
  pthread_barrier_init(&g_freed, NULL, kWaitingThreads + 1);
  pthread_barrier_init(&g_counted, NULL, kWaitingThreads + 1);
  static pthread_t threads[kWaitingThreads];
  long before = count_maps();
  for (int i = 0; i < kWaitingThreads; ++i)
    if (pthread_create(&threads[i], &attr, free_and_wait, &g_waiting_units[i * kWaitingPerThread]) != 0) {
      printf("NOTE threads %d (pthread_create failed: no mapping left?)\n", i);
      exit(3);
    }
  pthread_barrier_wait(&g_freed);
  long after = count_maps();
  size_t count = kWaitingThreads * kWaitingPerThread, chunks = 0;
  qsort(g_waiting_units, count, sizeof *g_waiting_units, by_address);
  for (size_t i = 0; i < count; ++i)
    if (i == 0 || g_waiting_units[i] != g_waiting_units[i - 1]) ++chunks;
  printf("NOTE vmas_before %ld\nNOTE vmas_after %ld\nNOTE threads %d\nNOTE chunks %zu\n", before, after,
         (int)kWaitingThreads, chunks);
  pthread_barrier_wait(&g_counted);
  for (int i = 0; i < kWaitingThreads; ++i) pthread_join(threads[i], NULL);
  return 0;
}

static size_t g_remote_n;
/* Blocks of the main thread's freed just before p, so that p joins a remote
 * batch behind them (its third word then names one of them, as the batch's
 * prefetch pointer). */
static char* g_before[16];
static size_t g_before_n;
static void* free_then_hundred(void* arg) {
  for (size_t i = 0; i < g_before_n; ++i) free(g_before[i]);
  free(arg);
  char* own[100];
  for (size_t i = 0; i < 100; ++i)
    if (!(own[i] = malloc(g_remote_n))) exit(2);
  for (size_t i = 0; i < 100; ++i) free(own[i]);
  return NULL;
}

/* Two threads that free one block at the same instant (free_race). */
static char* g_race_p;
static volatile int g_race_ready;
static int g_other_done; /* the call racing the held one has returned */
/* In free(g_race_p): free_race_held holds here. Volatile: GCC knows free
 * reads no memory of the program's and dropped the plain store before it,
 * so until 2026-11-29 (branch hugeread) no thread was ever held. */
static _Thread_local volatile int t_armed;
static void* free_at_once(void* arg) {
  (void)arg;
  free(malloc(16)); /* this thread's heap and quarantine ring exist */
  __atomic_add_fetch(&g_race_ready, 1, __ATOMIC_SEQ_CST);
  while (__atomic_load_n(&g_race_ready, __ATOMIC_SEQ_CST) < 2) {
  }
  t_armed = 1;
  free(g_race_p);
  t_armed = 0;
  __atomic_store_n(&g_other_done, 1, __ATOMIC_SEQ_CST); /* the held one returns after this */
  return NULL;
}

/* free_race_held: the hook of a -DTENON_INJECT=ON library. The first
 * thread at g_hold_point in its free of g_race_p waits there until the
 * other thread's call returned (at most 2 s: a call that reports ends the
 * process; 50 ms at least); any later one passes. A wait of a fixed 50 ms
 * was too short on a loaded machine, where the other thread was not
 * scheduled in time and came after. */
static const char* g_hold_point = "canary.huge_end";
static int g_held;
static void hold_first(const char* point) {
  if (!t_armed || strcmp(point, g_hold_point) != 0 || __atomic_exchange_n(&g_held, 1, __ATOMIC_SEQ_CST)) return;
  usleep(50 * 1000);
  for (int i = 0; i < 2000 && !__atomic_load_n(&g_other_done, __ATOMIC_SEQ_CST); ++i) usleep(1000);
}

/* The library's tenon_inject_set_hook, or NULL (SKIP printed) in a library
 * built without -DTENON_INJECT=ON. */
typedef void (*set_hook_fn)(void (*)(const char*));
static set_hook_fn inject_hook_setter(void) {
  set_hook_fn set_hook = (set_hook_fn)dlsym(RTLD_DEFAULT, "tenon_inject_set_hook");
  if (!set_hook) printf("SKIP no injection points (a library built without -DTENON_INJECT=ON)\n");
  return set_hook;
}

/* The held cases' set-up: the hook (SKIP and 77 in a library without
 * one), the point to hold at, and g_race_p, a block of n bytes written
 * whole; 0, or the exit status. */
static int hold_at(const char* point, size_t n) {
  set_hook_fn set_hook = inject_hook_setter();
  if (!set_hook) return 77;
  g_hold_point = point;
  if (!(g_race_p = malloc(n))) return 2;
  memset(g_race_p, 0x5a, n);
  set_hook(hold_first);
  return 0;
}

/* realloc_race: one thread reallocs the block the other frees. */
static size_t g_race_m;

/* realloc_free_held: the realloc waits until the free is held. */
static void* realloc_after_hold(void* arg) {
  (void)arg;
  free(malloc(16));
  __atomic_add_fetch(&g_race_ready, 1, __ATOMIC_SEQ_CST);
  while (!__atomic_load_n(&g_held, __ATOMIC_SEQ_CST)) {
  }
  void* q = realloc(g_race_p, g_race_m);
  __atomic_store_n(&g_other_done, 1, __ATOMIC_SEQ_CST);
  return q;
}

/* free_reuse_held: once the free is held, this thread frees the block and
 * mallocs its size again, which may be handed the same place. */
static size_t g_race_n;
static char* g_reused;
static void* free_and_reuse_after_hold(void* arg) {
  (void)arg;
  free(malloc(16));
  __atomic_add_fetch(&g_race_ready, 1, __ATOMIC_SEQ_CST);
  while (!__atomic_load_n(&g_held, __ATOMIC_SEQ_CST)) {
  }
  free(g_race_p);
  g_reused = malloc(g_race_n);
  __atomic_store_n(&g_other_done, 1, __ATOMIC_SEQ_CST);
  return NULL;
}

/* realloc_huge_free_held, usable_free_held: one thread calls realloc or
 * malloc_usable_size, armed (it is the one held); the other frees once it
 * is held. */
static void* g_realloc_q;
static int g_realloc_errno;
static size_t g_usable;
static void* realloc_armed(void* arg) {
  (void)arg;
  free(malloc(16));
  t_armed = 1;
  g_realloc_q = realloc(g_race_p, g_race_m);
  g_realloc_errno = errno;
  t_armed = 0;
  return NULL;
}
static void* usable_armed(void* arg) {
  (void)arg;
  free(malloc(16));
  t_armed = 1;
  g_usable = malloc_usable_size(g_race_p);
  t_armed = 0;
  return NULL;
}
static void* free_after_hold(void* arg) {
  (void)arg;
  free(malloc(16));
  while (!__atomic_load_n(&g_held, __ATOMIC_SEQ_CST)) {
  }
  free(g_race_p);
  __atomic_store_n(&g_other_done, 1, __ATOMIC_SEQ_CST);
  return NULL;
}
/* The armed call in one thread, held, and the free in another. */
static int held_while_freed(void* (*armed)(void*)) {
  pthread_t a, b;
  return pthread_create(&a, NULL, armed, NULL) || pthread_create(&b, NULL, free_after_hold, NULL) ||
         pthread_join(a, NULL) || pthread_join(b, NULL);
}
static const char* never_held(void) { return __atomic_load_n(&g_held, __ATOMIC_SEQ_CST) ? "" : " (never held)"; }
/* foreign_*_held: the armed thread frees (or asks the size of) the foreign
 * block; the other unmaps it once the first is held. */
static int g_foreign_usable;
static size_t g_foreign_bytes;
static void* foreign_armed(void* arg) {
  (void)arg;
  free(malloc(16));
  t_armed = 1;
  if (g_foreign_usable) g_usable = malloc_usable_size(g_race_p);
  else free(g_race_p);
  t_armed = 0;
  return NULL;
}
static void* unmap_after_hold(void* arg) {
  (void)arg;
  while (!__atomic_load_n(&g_held, __ATOMIC_SEQ_CST)) {
  }
  munmap(g_race_p - 16, g_foreign_bytes);
  __atomic_store_n(&g_other_done, 1, __ATOMIC_SEQ_CST);
  return NULL;
}
/* Two pages mapped here with glibc's header for a block it mapped alone:
 * the mapping's offset (0) and its size with IS_MMAPPED (2), p 16 bytes in. */
static int foreign_held(int usable) {
  set_hook_fn set_hook = inject_hook_setter();
  if (!set_hook) return 77;
  g_foreign_bytes = 2 * (size_t)sysconf(_SC_PAGESIZE);
  char* area = mmap(NULL, g_foreign_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (area == MAP_FAILED) return 2;
  size_t header[2] = {0, g_foreign_bytes | 2};
  memcpy(area, header, sizeof header);
  g_race_p = area + 16;
  g_foreign_usable = usable;
  g_hold_point = "foreign.read";
  set_hook(hold_first);
  printf("ACCESS %s(%p), held while another thread unmaps it\n", usable ? "malloc_usable_size" : "free",
         (void*)g_race_p);
  fflush(stdout);
  pthread_t a, b;
  if (pthread_create(&a, NULL, foreign_armed, NULL) || pthread_create(&b, NULL, unmap_after_hold, NULL) ||
      pthread_join(a, NULL) || pthread_join(b, NULL))
    return 2;
  if (usable) printf("NOTE usable %zu%s\n", g_usable, never_held());
  printf("DONE\n");
  return 0;
}

/* The end of the run of mappings p lies in (its VMAs one after another,
 * the closed pages of the secure build's blocks included), from
 * /proc/self/maps; 0 if not found. */
static uintptr_t mapping_end(const void* p) {
  FILE* f = fopen("/proc/self/maps", "r");
  if (!f) return 0;
  uintptr_t at = (uintptr_t)p, end = 0, lo, hi;
  char line[512];
  while (fgets(line, sizeof line, f)) {
    if (sscanf(line, "%lx-%lx", &lo, &hi) != 2) continue;
    if ((lo <= at && at < hi) || (end && lo == end)) end = hi;
  }
  fclose(f);
  return end;
}

static void* realloc_at_once(void* arg) {
  (void)arg;
  free(malloc(16));
  __atomic_add_fetch(&g_race_ready, 1, __ATOMIC_SEQ_CST);
  while (__atomic_load_n(&g_race_ready, __ATOMIC_SEQ_CST) < 2) {
  }
  return realloc(g_race_p, g_race_m);
}

/* The two threads of a race: a frees (or reallocs), b frees. */
static int race_two(void* (*a_fn)(void*)) {
  pthread_t a, b;
  return pthread_create(&a, NULL, a_fn, NULL) || pthread_create(&b, NULL, free_at_once, NULL) ||
         pthread_join(a, NULL) || pthread_join(b, NULL);
}

int main(int argc, char** argv) {
  const char* c = argc > 1 ? argv[1] : "";
  if (!strcmp(c, "large_overflow")) {
    overflow(200 * KIB);
  } else if (!strcmp(c, "huge_overflow")) {
    overflow(5 * MIB + 100);
  } else if (!strcmp(c, "huge_underflow")) {
    char* p = malloc(5 * MIB + 100);
    if (!p) return 2;
    underflow(p, "a fresh huge block");
  } else if (!strcmp(c, "huge_underflow_reused")) {
    char* p = malloc(5 * MIB + 100);
    if (!p) return 2;
    memset(p, 0x5a, 5 * MIB + 100);
    free(p);
    char* q = malloc(5 * MIB + 100);
    if (!q) return 2;
    printf("NOTE reused %s\n", q == p ? "in place" : "elsewhere");
    underflow(q, "a reused huge block");
  } else if (!strcmp(c, "huge_underflow_aligned")) {
    underflow(aligned(64 * KIB, 5 * MIB), "a huge block aligned to 64 KiB");
  } else if (!strcmp(c, "huge_underflow_far")) {
    underflow(aligned(4 * MIB, 5 * MIB), "a huge block aligned to 4 MiB");
  } else if (!strcmp(c, "huge_blocks")) {
    printf("NOTE bad %ld\n", huge_blocks());
  } else if (!strcmp(c, "huge_double_free") || !strcmp(c, "huge_double_free_aligned")) {
    char* p = strcmp(c, "huge_double_free") ? aligned(4 * KIB, 5 * MIB) : malloc(5 * MIB);
    if (!p) return 2;
    memset(p, 0x5a, 5 * MIB);
    free_twice(p);
  } else if (!strcmp(c, "huge_double_free_unmapped") || !strcmp(c, "huge_double_free_unmapped_aligned")) {
    int big = !strcmp(c, "huge_double_free_unmapped");
    char* p = big ? malloc(100 * MIB) : aligned(64 * KIB, 5 * MIB);
    if (!p) return 2;
    p[0] = 1;
    free_twice(p);
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
  } else if (!strcmp(c, "many_waiting_large")) {
    if (many_waiting_large() != 0) return 2;
  } else if (!strcmp(c, "large_blocks")) {
    printf("NOTE bad %ld\n", large_blocks());
  } else if (!strcmp(c, "aligned_double_free")) {
    size_t aligns[] = {8 * KIB, 64 * KIB};
    for (size_t i = 0; i < 2; ++i) {
      void* p = NULL;
      if (posix_memalign(&p, aligns[i], 256 * KIB)) return 2;
      memset(p, 0x5a, 256 * KIB);
      free(p);
      printf("ACCESS free %p again (aligned to %zu)\n", p, aligns[i]);
      fflush(stdout);
      free(p);
      printf("DONE\n");
      fflush(stdout);
    }
  } else if (!strncmp(c, "aligned_double_free:", 20)) {
    size_t align = 0, n = 0;
    void* p = NULL;
    if (sscanf(c + 20, "%zu:%zu", &align, &n) != 2 || posix_memalign(&p, align, n)) return 2;
    memset(p, 0x5a, n);
    free(p);
    printf("ACCESS free %p again (%zu bytes aligned to %zu)\n", p, n, align);
    fflush(stdout);
    free(p);
    printf("DONE\n");
  } else if (!strncmp(c, "aligned_double_free_by:", 23)) {
    char how[16];
    size_t align = 0, n = 0, between = 0;
    if (sscanf(c + 23, "%15[a-z_]:%zu:%zu:%zu", how, &align, &n, &between) != 4 || between > 256) return 2;
    /* stdout's buffer had now: had at ACCESS, after the frees, it could take
     * the slices of p's span, given back empty (after_wait below). */
    printf("NOTE aligned_double_free_by %s\n", how);
    char* p = aligned_by(how, align, n);
    char** others = malloc((between ? between : 1) * sizeof *others);
    if (!others) return 2;
    for (size_t i = 0; i < between; ++i) others[i] = aligned_by(how, align, n);
    memset(p, 0x5a, n);
    free(p);
    for (size_t i = 0; i < between; ++i) free(others[i]);
    printf("ACCESS free %p again (%s, %zu bytes aligned to %zu, %zu frees between)\n", (void*)p, how, n, align,
           between);
    fflush(stdout);
    free(p);
    printf("DONE\n");
  } else if (!strncmp(c, "aligned_write_after_free:", 25)) {
    char how[16];
    size_t align = 0, n = 0, at = 0;
    enum { kOthers = 100 };
    char* others[kOthers];
    if (sscanf(c + 25, "%15[a-z_]:%zu:%zu:%zu", how, &align, &n, &at) != 4 || at >= n) return 2;
    printf("NOTE aligned_write_after_free %s\n", how);
    char* p = aligned_by(how, align, n);
    for (size_t i = 0; i < kOthers; ++i) others[i] = aligned_by(how, align, n);
    memset(p, 0x5a, n);
    free(p);
    printf("ACCESS write %p + %zu after free (%s, %zu bytes aligned to %zu)\n", (void*)p, at, how, n, align);
    fflush(stdout);
    ((volatile char*)p)[at] ^= 1;
    for (size_t i = 0; i < kOthers; ++i) free(others[i]);
    printf("DONE\n");
  } else if (!strncmp(c, "large_reused:", 13)) {
    char how[16];
    size_t n, m;
    if (sscanf(c + 13, "%15[a-z]:%zu:%zu", how, &n, &m) != 3) return 2;
    char* q = large_reused(n, m);
    if (!strcmp(how, "overflow")) {
      printf("ACCESS write past the end of %p\n", (void*)q);
      fflush(stdout);
      for (size_t i = m; i < m + 2 * 4096 + 64; ++i) ((volatile char*)q)[i] = 0x41;
      printf("DONE\n");
    } else if (!strcmp(how, "underflow")) {
      underflow(q, "a large block of a reused run");
    } else {
      long bad = written_whole(q);
      free(q);
      char* r = malloc(m);
      if (!r) return 2;
      bad += written_whole(r);
      free(r);
      printf("NOTE bad %ld\nEND\n", bad);
    }
  } else if (!strncmp(c, "large_after_wait:", 17)) {
    size_t n = strtoul(c + 17, NULL, 10);
    char* p = malloc(n);
    if (!p) return 2;
    free_past_quarantine(p, n);
    printf("ACCESS read %p after its wait\n", (void*)p);
    fflush(stdout);
    printf("NOTE read %d\n", ((volatile char*)p)[0]);
    printf("DONE\n");
  } else if (!strncmp(c, "large_double_free:", 18)) {
    size_t n = strtoul(c + 18, NULL, 10);
    printf("NOTE large_double_free %zu\n", n);
    char* p = malloc(n);
    if (!p) return 2;
    memset(p, 0x5a, n);
    free(p);
    printf("ACCESS free %p again (%zu bytes)\n", (void*)p, n);
    fflush(stdout);
    free(p);
    printf("DONE\n");
  } else if (!strncmp(c, "free_race:", 10)) {
    size_t n = strtoul(c + 10, NULL, 10);
    printf("NOTE free_race %zu\n", n);
    if (!(g_race_p = malloc(n))) return 2;
    memset(g_race_p, 0x5a, n);
    printf("ACCESS free %p in two threads at once (%zu bytes)\n", (void*)g_race_p, n);
    fflush(stdout);
    if (race_two(free_at_once)) return 2;
    printf("DONE\n");
  } else if (!strncmp(c, "free_race_held:", 15)) {
    char* end;
    size_t n = strtoul(c + 15, &end, 10);
    printf("NOTE free_race_held %zu %s\n", n, *end == ':' ? end + 1 : g_hold_point);
    int status = hold_at(*end == ':' ? end + 1 : g_hold_point, n);
    if (status) return status;
    printf("ACCESS free %p in two threads at once, the first held (%zu bytes)\n", (void*)g_race_p, n);
    fflush(stdout);
    if (race_two(free_at_once)) return 2;
    printf("DONE\n");
  } else if (!strncmp(c, "realloc_free_held:", 18)) {
    size_t n = 0;
    if (sscanf(c + 18, "%zu:%zu", &n, &g_race_m) != 2) return 2;
    printf("NOTE realloc_free_held %zu %zu\n", n, g_race_m);
    int status = hold_at("huge.take", n);
    if (status) return status;
    uintptr_t end = mapping_end(g_race_p);
    if (!end || mmap((void*)end, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0) != (void*)end)
      printf("NOTE no page mapped after the block\n");
    printf("ACCESS free %p held while another thread moves it by realloc (%zu bytes to %zu)\n", (void*)g_race_p, n,
           g_race_m);
    fflush(stdout);
    if (race_two(realloc_after_hold)) return 2;
    printf("DONE\n");
  } else if (!strncmp(c, "free_reuse_held:", 16)) {
    g_race_n = strtoul(c + 16, NULL, 10);
    printf("NOTE free_reuse_held %zu\n", g_race_n);
    int status = hold_at("huge.take", g_race_n);
    if (status) return status;
    printf("ACCESS free %p held while another thread frees it and mallocs %zu bytes again\n", (void*)g_race_p,
           g_race_n);
    fflush(stdout);
    if (race_two(free_and_reuse_after_hold)) return 2;
    /* The held free returned: it freed the new block if it got p's place. */
    printf("NOTE reused %s\n", g_reused == g_race_p ? "in place" : "elsewhere");
    printf("DONE\n");
  } else if (!strncmp(c, "realloc_huge_free_held:", 23)) {
    size_t n = 0;
    if (sscanf(c + 23, "%zu:%zu", &n, &g_race_m) != 2) return 2;
    printf("NOTE realloc_huge_free_held %zu %zu\n", n, g_race_m);
    int status = hold_at("canary.realloc_huge", n);
    if (status) return status;
    printf("ACCESS realloc %p to %zu bytes, held while another thread frees it\n", (void*)g_race_p, g_race_m);
    fflush(stdout);
    if (held_while_freed(realloc_armed)) return 2;
    printf("NOTE realloc returned %p, errno %d%s\n", g_realloc_q, g_realloc_q ? 0 : g_realloc_errno, never_held());
    printf("DONE\n");
  } else if (!strncmp(c, "usable_free_held:", 17) || !strncmp(c, "usable_read_held:", 17)) {
    size_t n = strtoul(c + 17, NULL, 10);
    int reading = c[7] == 'r';
    printf("NOTE %.16s %zu\n", c, n);
    int status = hold_at(reading ? "huge.read" : "huge.usable", n);
    if (status) return status;
    printf("ACCESS malloc_usable_size(%p), held while another thread frees it\n", (void*)g_race_p);
    fflush(stdout);
    if (held_while_freed(usable_armed)) return 2;
    printf("NOTE usable %zu%s\n", g_usable, never_held());
    printf("DONE\n");
  } else if (!strcmp(c, "foreign_free_held") || !strcmp(c, "foreign_usable_held")) {
    return foreign_held(c[8] == 'u');
  } else if (!strncmp(c, "realloc_race:", 13)) {
    size_t n = 0;
    if (sscanf(c + 13, "%zu:%zu", &n, &g_race_m) != 2) return 2;
    printf("NOTE realloc_race %zu %zu\n", n, g_race_m);
    if (!(g_race_p = malloc(n))) return 2;
    memset(g_race_p, 0x5a, n);
    printf("ACCESS realloc and free %p in two threads at once (%zu bytes to %zu)\n", (void*)g_race_p, n, g_race_m);
    fflush(stdout);
    if (race_two(realloc_at_once)) return 2;
    printf("DONE\n");
  } else if (!strncmp(c, "remote_after_wait:", 18)) {
    char* end;
    size_t n = strtoul(c + 18, &end, 10);
    size_t align = *end == ':' ? strtoul(end + 1, NULL, 10) : 0;
    if (n == 0) return 2;
    printf("NOTE remote_after_wait %zu %zu\n", n, align);
    free(malloc(8));
    char* p = align ? aligned_alloc(align, n) : malloc(n);
    if (align) {
      g_before_n = sizeof g_before / sizeof g_before[0];
      for (size_t i = 0; i < g_before_n; ++i)
        if (!(g_before[i] = aligned_alloc(align, n))) return 2;
    }
    char* keep = malloc(n); /* p's span keeps a live block */
    if (!p || !keep) return 2;
    memset(p, 0x5a, n);
    g_remote_n = n;
    pthread_t t;
    if (pthread_create(&t, NULL, free_then_hundred, p) || pthread_join(t, NULL)) return 2;
    printf("ACCESS free %p again (%zu bytes, freed by another thread)\n", (void*)p, n);
    fflush(stdout);
    free(p);
    printf("DONE\n");
  } else if (!strncmp(c, "after_wait:", 11)) {
    char how[16];
    size_t n = 0;
    enum { kOthers = 100 };
    char* others[kOthers];
    if (sscanf(c + 11, "%15[a-z]:%zu", how, &n) != 2 || n == 0) return 2;
    /* stdout's buffer is had now, not at ACCESS, and so is what the first
     * small free allocates (the secure quarantine's ring key: glibc's
     * pthread_setspecific callocs 256 bytes): after the frees either could
     * take the slices of p's span, given back empty, and p would lie in a
     * block of another size (no metadata of p's left to tell). */
    printf("NOTE after_wait %s %zu\n", how, n);
    free(malloc(8));
    char* p = malloc(n);
    for (size_t i = 0; i < kOthers; ++i)
      if (!(others[i] = malloc(n))) return 2;
    if (!p) return 2;
    memset(p, 0x5a, n);
    free(p);
    for (size_t i = 0; i < kOthers; ++i) free(others[i]);
    printf("ACCESS %s %p again (%zu bytes, %d frees since)\n", how, (void*)p, n, kOthers);
    fflush(stdout);
    if (!strcmp(how, "free")) free(p);
    else if (!strcmp(how, "realloc")) p = realloc(p, n + 1);
    else if (!strcmp(how, "usable")) printf("NOTE usable %zu\n", malloc_usable_size(p));
    else return 2;
    printf("DONE\n");
  } else if (!strncmp(c, "realloc_", 8) && strchr(c, ':')) {
    size_t n = strtoul(strchr(c, ':') + 1, NULL, 10);
    char* p = malloc(n);
    if (!p || n < 64) return 2;
    memset(p, 0x5a, n);
    char* bad = p;
    if (!strncmp(c, "realloc_freed:", 14)) free(p);
    else if (!strncmp(c, "realloc_interior:", 17)) bad = p + 32;
    /* XOR: the byte changes whatever it held. Writing 0x41 left the canary
     * intact when its first byte (a random key's) was 0x41: 1 run in 256 a
     * size (SecureDetects.ReallocOfOverflowedBlock failed so, once). */
    else if (!strncmp(c, "realloc_overflowed:", 19)) p[n] ^= 1;
    else return 2;
    printf("ACCESS realloc %p to %zu bytes\n", (void*)bad, n / 2);
    fflush(stdout);
    void* q = realloc(bad, n / 2);
    printf("DONE %p\n", q);
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
