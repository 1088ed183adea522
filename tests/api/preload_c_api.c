/* The standard C allocation names, as a program sees them under
 * LD_PRELOAD=libtenon.so. Modes (argv[1]):
 *   symbols  every allocation name resolves into libtenon.so
 *   edge     the edge cases of docs/api.md through the standard names
 *   foreign  pointers from glibc's own allocator (__libc_malloc, heap and
 *            mmapped blocks, from the main and a thread arena) handed to
 *            free/realloc/malloc_usable_size
 *   foreign_arena_lock  the same calls return while another thread holds
 *            glibc's main-arena lock (a thread stopped inside glibc's
 *            allocator); exits 77 (skip) if the lock could not be held
 *   foreign_dl_lock  the first malloc_usable_size of a glibc block returns
 *            while another thread is stopped inside dlopen (holding the
 *            dynamic linker's lock); argv[2] is the library it loads
 * A second argument `secure` (symbols, edge, foreign, foreign_arena_lock):
 * the preloaded library is libtenon-secure.so, which must give the same
 * answers (no case differs since its huge aligned blocks were fixed,
 * 2026-11-27; g_secure is where one would be told apart).
 * Built with -fno-builtin so the compiler keeps every call as written. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "preload_check.h"

extern void* __libc_malloc(size_t);
extern void* __libc_calloc(size_t, size_t);
extern void* __libc_memalign(size_t, size_t);
extern void __libc_free(void*);

/* Run against libtenon-secure.so (argv[2] is "secure"). */
static int g_secure;

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Is any page of [p, p + n) still mapped? msync fails with ENOMEM on an
 * unmapped page. */
static int range_mapped(const void* p, size_t n) {
  const size_t page = (size_t)sysconf(_SC_PAGESIZE);
  uintptr_t start = (uintptr_t)p & ~(uintptr_t)(page - 1);
  for (uintptr_t a = start; a < (uintptr_t)p + n; a += page)
    if (msync((void*)a, page, MS_ASYNC) == 0) return 1;
  return 0;
}

/* volatile so that neither the compiler's folding nor its size warnings apply. */
static volatile size_t impossible[] = {
    SIZE_MAX, SIZE_MAX - 1, SIZE_MAX - 15, SIZE_MAX - 4095, (size_t)PTRDIFF_MAX + 1,
    (size_t)PTRDIFF_MAX, (size_t)1 << 62,
};
#define N_IMPOSSIBLE (sizeof impossible / sizeof impossible[0])

static volatile size_t bad_alignments[] = {0, 3, 6, 12, 24, 48, 100, 4097, 3u << 20, SIZE_MAX};
#define N_BAD (sizeof bad_alignments / sizeof bad_alignments[0])

static void fill(void* p, size_t n, unsigned seed) {
  unsigned char* b = p;
  for (size_t i = 0; i < n; ++i) b[i] = (unsigned char)(seed * 131u + i * 7u + (i >> 8));
}

static size_t first_mismatch(const void* p, size_t n, unsigned seed) {
  const unsigned char* b = p;
  for (size_t i = 0; i < n; ++i)
    if (b[i] != (unsigned char)(seed * 131u + i * 7u + (i >> 8))) return i;
  return n;
}

static int aligned(const void* p, size_t a) { return ((uintptr_t)p & (a - 1)) == 0; }

static void check_still_works(int line) {
  static const size_t sizes[] = {1, 100, 5000, 300000, 3u << 20};
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; ++i) {
    void* p = malloc(sizes[i]);
    CHECK(p != NULL, "malloc(%zu) failed after the failure checked at line %d", sizes[i], line);
    if (p) {
      fill(p, sizes[i], 3);
      CHECK(first_mismatch(p, sizes[i], 3) == sizes[i], "block of %zu", sizes[i]);
    }
    free(p);
  }
}

/* ---- symbols ----------------------------------------------------------- */

static const char* const c_names[] = {
    "malloc", "free", "calloc", "realloc", "reallocarray", "aligned_alloc", "posix_memalign",
    "memalign", "valloc", "pvalloc", "malloc_usable_size", "free_sized", "free_aligned_sized",
    "malloc_trim",
};

static int run_symbols(void) {
  for (size_t i = 0; i < sizeof c_names / sizeof c_names[0]; ++i) {
    void* sym = dlsym(RTLD_DEFAULT, c_names[i]);
    CHECK(sym != NULL, "%s is not defined by any loaded object", c_names[i]);
    if (!sym) continue;
    Dl_info info;
    int ok = dladdr(sym, &info);
    CHECK(ok && info.dli_fname && strstr(info.dli_fname, "libtenon"),
          "%s resolves into %s, not libtenon.so", c_names[i], ok && info.dli_fname ? info.dli_fname : "?");
  }
  /* The program's own calls go where dlsym says. */
  CHECK((void*)&malloc == dlsym(RTLD_DEFAULT, "malloc"), "&malloc differs from dlsym(\"malloc\")");
  CHECK((void*)&free == dlsym(RTLD_DEFAULT, "free"), "&free differs from dlsym(\"free\")");
  return preload_failures;
}

/* ---- edge cases -------------------------------------------------------- */

static void edge_malloc(void) {
  for (size_t i = 0; i < N_IMPOSSIBLE; ++i) {
    errno = 0;
    void* p = malloc(impossible[i]);
    CHECK(p == NULL && errno == ENOMEM, "malloc(%zu) = %p, errno %d", impossible[i], p, errno);
    free(p);
    check_still_works(__LINE__);
  }
  void* zeros[64];
  for (int i = 0; i < 64; ++i) {
    zeros[i] = malloc(0);
    CHECK(zeros[i] != NULL, "malloc(0) returned NULL");
    for (int j = 0; j < i; ++j) CHECK(zeros[i] != zeros[j] || !zeros[i], "malloc(0) returned %p twice", zeros[i]);
  }
  for (int i = 0; i < 64; ++i) free(zeros[i]);
  free(NULL);
  /* POSIX.1-2024: free() does not modify errno (foreign blocks included). */
  static const size_t kinds[] = {1, 5000, 300000, 3u << 20};
  for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; ++i) {
    void* p = malloc(kinds[i]);
    errno = 12345;
    free(p);
    CHECK(errno == 12345, "free of a block of %zu changed errno to %d", kinds[i], errno);
    p = __libc_malloc(kinds[i]);
    errno = 12345;
    free(p);
    CHECK(errno == 12345, "free of a glibc block of %zu changed errno to %d", kinds[i], errno);
  }
  CHECK(malloc_usable_size(NULL) == 0, "malloc_usable_size(NULL) = %zu", malloc_usable_size(NULL));
  for (size_t size = 0; size < 70000; size += 1 + size / 8) {
    void* p = malloc(size);
    CHECK(p != NULL, "malloc(%zu)", size);
    if (!p) continue;
    CHECK(aligned(p, size >= 16 ? 16 : 8), "malloc(%zu) = %p misaligned", size, p);
    size_t usable = malloc_usable_size(p);
    CHECK(usable >= size, "malloc_usable_size(malloc(%zu)) = %zu", size, usable);
    fill(p, usable, 5);
    CHECK(first_mismatch(p, usable, 5) == usable, "block of %zu", size);
    free(p);
  }
}

static void edge_calloc(void) {
  const size_t half = SIZE_MAX / 2 + 1;
  volatile size_t pairs[][2] = {{SIZE_MAX, 2}, {2, SIZE_MAX}, {half, 2}, {(size_t)1 << 32, (size_t)1 << 32},
                                {SIZE_MAX, SIZE_MAX}, {1, SIZE_MAX}};
  for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; ++i) {
    errno = 0;
    void* p = calloc(pairs[i][0], pairs[i][1]);
    CHECK(p == NULL && errno == ENOMEM, "calloc(%zu, %zu) = %p, errno %d", pairs[i][0], pairs[i][1], p, errno);
    free(p);
    check_still_works(__LINE__);
  }
  for (size_t size = 1; size < 300000; size = size * 3 + 1) {
    void* d = malloc(size);
    if (d) memset(d, 0xee, malloc_usable_size(d));
    free(d);
    unsigned char* z = calloc(1, size);
    CHECK(z != NULL, "calloc(1, %zu)", size);
    if (!z) continue;
    size_t nz = size;
    for (size_t k = 0; k < size; ++k)
      if (z[k]) { nz = k; break; }
    CHECK(nz == size, "calloc(1, %zu) byte %zu not zero", size, nz);
    free(z);
  }
}

static void edge_realloc(void) {
  void* p = realloc(NULL, 100);
  CHECK(p != NULL, "realloc(NULL, 100)");
  fill(p, 100, 9);
  for (size_t i = 0; i < N_IMPOSSIBLE; ++i) {
    errno = 0;
    void* q = realloc(p, impossible[i]);
    CHECK(q == NULL && errno == ENOMEM, "realloc(p, %zu) = %p, errno %d", impossible[i], q, errno);
    if (q) { p = q; fill(p, 100, 9); continue; }
    CHECK(first_mismatch(p, 100, 9) == 100, "failed realloc(p, %zu) changed p", impossible[i]);
  }
  errno = 0;
  void* q = reallocarray(p, SIZE_MAX, 2);
  CHECK(q == NULL && errno == ENOMEM, "reallocarray(p, SIZE_MAX, 2) = %p, errno %d", q, errno);
  CHECK(first_mismatch(p, 100, 9) == 100, "failed reallocarray changed p");
  static const size_t chain[] = {1000, 70000, 3u << 20, 9u << 20, 200000, 5000, 40, 8};
  size_t cur = 100;
  for (size_t i = 0; i < sizeof chain / sizeof chain[0]; ++i) {
    q = realloc(p, chain[i]);
    CHECK(q != NULL, "realloc %zu -> %zu", cur, chain[i]);
    if (!q) break;
    size_t keep = cur < chain[i] ? cur : chain[i];
    CHECK(first_mismatch(q, keep, 9) == keep, "realloc %zu -> %zu lost contents", cur, chain[i]);
    fill(q, chain[i], 9);
    p = q;
    cur = chain[i];
  }
  /* realloc(p, 0): NULL (p freed) or a freeable minimal block, both accepted. */
  q = realloc(p, 0);
  free(q);
  q = reallocarray(NULL, 10, 10);
  CHECK(q != NULL && malloc_usable_size(q) >= 100, "reallocarray(NULL, 10, 10)");
  free(q);
  check_still_works(__LINE__);
}

static void edge_aligned(void) {
  const size_t page = (size_t)sysconf(_SC_PAGESIZE);
  for (size_t i = 0; i < N_BAD; ++i) {
    size_t a = bad_alignments[i];
    errno = 0;
    void* p = aligned_alloc(a, 64);
    CHECK(p == NULL && errno == EINVAL, "aligned_alloc(%zu, 64) = %p, errno %d", a, p, errno);
    free(p);
    /* memalign follows glibc: rounds up to a power of two, EINVAL only when
       there is none to round to (above SIZE_MAX / 2 + 1). */
    size_t want = 16;
    while (want < a && want <= SIZE_MAX / 2) want <<= 1;
    errno = 0;
    if (a > SIZE_MAX / 2 + 1) {
      p = memalign(a, 64);
      CHECK(p == NULL && errno == EINVAL, "memalign(%zu, 64) = %p, errno %d", a, p, errno);
      free(p);
    } else {
      p = memalign(a, 64);
      CHECK(p != NULL && aligned(p, want) && malloc_usable_size(p) >= 64,
            "memalign(%zu, 64) = %p, errno %d (want a block aligned to %zu)", a, p, errno, want);
      free(p);
    }
    void* out = (void*)0x1234;
    int rc = posix_memalign(&out, a, 64);
    CHECK(rc == EINVAL && out == (void*)0x1234, "posix_memalign(&out, %zu, 64) = %d, out %p", a, rc, out);
  }
  for (size_t a = 1; a < sizeof(void*); a *= 2) {
    void* out = (void*)0x1234;
    int rc = posix_memalign(&out, a, 64);
    CHECK(rc == EINVAL && out == (void*)0x1234, "posix_memalign(&out, %zu, 64) = %d, out %p", a, rc, out);
  }
  check_still_works(__LINE__);
  for (size_t i = 0; i < N_IMPOSSIBLE; ++i) {
    errno = 0;
    void* p = aligned_alloc(4096, impossible[i]);
    CHECK(p == NULL && errno == ENOMEM, "aligned_alloc(4096, %zu) = %p, errno %d", impossible[i], p, errno);
    free(p);
    void* out = (void*)0x1234;
    int rc = posix_memalign(&out, 64, impossible[i]);
    CHECK(rc == ENOMEM && out == (void*)0x1234, "posix_memalign(&out, 64, %zu) = %d", impossible[i], rc);
    errno = 0;
    p = valloc(impossible[i]);
    CHECK(p == NULL && errno == ENOMEM, "valloc(%zu) = %p, errno %d", impossible[i], p, errno);
    free(p);
    errno = 0;
    p = pvalloc(impossible[i]);
    CHECK(p == NULL && errno == ENOMEM, "pvalloc(%zu) = %p, errno %d", impossible[i], p, errno);
    free(p);
  }
  volatile size_t wrap = SIZE_MAX - page + 2;
  errno = 0;
  void* w = pvalloc(wrap);
  CHECK(w == NULL && errno == ENOMEM, "pvalloc(SIZE_MAX - page + 2) = %p, errno %d (round-up wrapped?)", w, errno);
  free(w);
  check_still_works(__LINE__);
  size_t max_align = (size_t)4 << 20;
  for (size_t a = 8; a <= max_align; a *= 2) {
    void* p = memalign(a, a);
    CHECK(p != NULL && aligned(p, a), "memalign(%zu, %zu) = %p", a, a, p);
    if (p) { fill(p, a, 1); CHECK(first_mismatch(p, a, 1) == a, "memalign block %zu", a); }
    free(p);
    p = aligned_alloc(a, 3 * a);
    CHECK(p != NULL && aligned(p, a), "aligned_alloc(%zu, %zu) = %p", a, 3 * a, p);
    if (p) fill(p, 3 * a, 2);
    free(p);
    void* out = NULL;
    int rc = posix_memalign(&out, a, a + 1);
    CHECK(rc == 0 && out != NULL && aligned(out, a), "posix_memalign(&out, %zu, %zu) = %d, %p", a, a + 1, rc, out);
    free(out);
  }
  void* v = valloc(5000);
  CHECK(v != NULL && aligned(v, page), "valloc(5000) = %p", v);
  free(v);
  void* pv = pvalloc(5000);
  CHECK(pv != NULL && aligned(pv, page) && malloc_usable_size(pv) >= 2 * page,
        "pvalloc(5000) = %p, usable %zu", pv, pv ? malloc_usable_size(pv) : 0);
  if (pv) fill(pv, 2 * page, 4);
  free(pv);
}

static void edge_sized_free_and_trim(void) {
  void (*fs)(void*, size_t) = (void (*)(void*, size_t))dlsym(RTLD_DEFAULT, "free_sized");
  void (*fas)(void*, size_t, size_t) =
      (void (*)(void*, size_t, size_t))dlsym(RTLD_DEFAULT, "free_aligned_sized");
  CHECK(fs != NULL, "free_sized is not defined");
  CHECK(fas != NULL, "free_aligned_sized is not defined");
  if (fs) {
    fs(NULL, 0);
    for (size_t size = 1; size < 5000000; size = size * 5 + 3) {
      void* p = malloc(size);
      CHECK(p != NULL, "malloc(%zu)", size);
      fs(p, size);
    }
  }
  if (fas) {
    fas(NULL, 64, 0);
    for (size_t a = 16; a <= ((size_t)1 << 20); a *= 4) {
      void* p = aligned_alloc(a, 2 * a);
      CHECK(p != NULL, "aligned_alloc(%zu, %zu)", a, 2 * a);
      fas(p, a, 2 * a);
    }
    /* Zero bytes: aligned_alloc(a, 0) is a unique block, freed with the
     * size it was asked for (the secure build reported "size does not match
     * the block" until 2026-11-27: it serves such a request as one byte). */
    for (size_t a = 1; a <= ((size_t)4 << 20); a *= 8) {
      void* p = aligned_alloc(a, 0);
      CHECK(p != NULL, "aligned_alloc(%zu, 0)", a);
      fas(p, a, 0);
    }
  }
  if (fs) {
    void* p = calloc(0, 8);
    CHECK(p != NULL, "calloc(0, 8)");
    fs(p, 0);
  }
  int r = malloc_trim(0);
  CHECK(r == 0 || r == 1, "malloc_trim(0) = %d", r);
  check_still_works(__LINE__);
}

static int run_edge(void) {
  edge_malloc();
  edge_calloc();
  edge_realloc();
  edge_aligned();
  edge_sized_free_and_trim();
  return preload_failures;
}

/* ---- foreign pointers -------------------------------------------------- */

static void* libc_alloc_5000(void* out) {
  void* p = __libc_malloc(5000);
  if (p) fill(p, 5000, 14);
  *(void**)out = p;
  return NULL;
}

static int run_foreign(void) {
  /* A fixed threshold: glibc would otherwise raise it whenever glibc's own
   * free releases a mapped block, and the blocks below would not be mapped. */
  mallopt(M_MMAP_THRESHOLD, 128 * 1024);
  /* realloc of a pointer from no allocator (no glibc header before it):
   * NULL with EINVAL, the buffer left alone (docs/api.md), in the secure
   * build too (until 2026-11-27 it allocated, then ended the program in the
   * free of p, reported as free's) */
  static _Alignas(16) unsigned char buffer[64];
  memset(buffer, 0x33, sizeof buffer);
  memset(buffer, 0, 16);
  errno = 0;
  void* moved = realloc(buffer + 16, 100);
  CHECK(moved == NULL && errno == EINVAL, "realloc of a static buffer = %p, errno %d", moved, errno);
  CHECK(buffer[16] == 0x33 && buffer[63] == 0x33, "realloc wrote into a static buffer");
  /* free of a glibc block */
  void* p = __libc_malloc(100);
  CHECK(p != NULL, "__libc_malloc(100)");
  memset(p, 1, 100);
  free(p);
  /* realloc of a glibc block keeps its contents, both ways */
  void* q = __libc_malloc(50);
  CHECK(q != NULL, "__libc_malloc(50)");
  fill(q, 50, 7);
  q = realloc(q, 5000);
  CHECK(q != NULL, "realloc(foreign 50 bytes, 5000)");
  if (q) {
    CHECK(first_mismatch(q, 50, 7) == 50, "realloc of a foreign block lost its contents");
    fill(q, 5000, 8);
    free(q);
  }
  q = __libc_malloc(5000);
  fill(q, 5000, 9);
  q = realloc(q, 10);
  CHECK(q != NULL && first_mismatch(q, 10, 9) == 10, "shrinking realloc of a foreign block");
  free(q);
  /* realloc of a glibc block to a size that fits it answers p itself
   * (docs/api.md), a block glibc mapped when at least half of it stays in
   * use; in the secure build too (until 2026-11-29 it moved every glibc
   * block into a block of its own, whatever the size). */
  unsigned char* h = __libc_malloc(1000);
  CHECK(h != NULL, "__libc_malloc(1000)");
  size_t hu = malloc_usable_size(h);
  fill(h, hu, 5);
  unsigned char* kept = realloc(h, hu);
  CHECK(kept == h, "realloc(glibc block, its usable size %zu) = %p, not the block %p", hu, (void*)kept, (void*)h);
  unsigned char* shrunk = realloc(kept, 10);
  CHECK(shrunk == kept && first_mismatch(shrunk, 10, 5) == 10, "realloc(glibc block of %zu, 10) = %p, not the block %p",
        hu, (void*)shrunk, (void*)kept);
  free(shrunk);
  h = __libc_malloc(1u << 20);
  CHECK(h != NULL, "__libc_malloc(1 MiB)");
  hu = malloc_usable_size(h);
  fill(h, 4096, 6);
  kept = realloc(h, hu / 2 + 4096);
  CHECK(kept == h && first_mismatch(kept, 4096, 6) == 4096, "realloc(glibc mapped block of %zu, %zu) = %p, not the block %p",
        hu, hu / 2 + 4096, (void*)kept, (void*)h);
  free(kept);
  /* malloc_usable_size of a glibc block */
  void* r = __libc_malloc(100);
  size_t usable = malloc_usable_size(r);
  CHECK(usable >= 100, "malloc_usable_size(foreign 100-byte block) = %zu", usable);
  free(r);
  /* glibc's other entry points: calloc, memalign, and mmapped chunks */
  void* c = __libc_calloc(10, 10);
  CHECK(c != NULL, "__libc_calloc");
  free(c);
  void* m = __libc_memalign(64, 200);
  CHECK(m != NULL, "__libc_memalign");
  CHECK(malloc_usable_size(m) >= 200, "malloc_usable_size(foreign memalign block)");
  free(m);
  void* big = __libc_malloc(4u << 20);
  CHECK(big != NULL, "__libc_malloc(4 MiB)");
  fill(big, 4096, 2);
  CHECK(malloc_usable_size(big) >= (4u << 20), "malloc_usable_size(foreign 4 MiB block)");
  big = realloc(big, 8u << 20);
  CHECK(big != NULL && first_mismatch(big, 4096, 2) == 4096, "realloc of a foreign 4 MiB block");
  free(big);
  /* blocks glibc mapped on its own (IS_MMAPPED chunks): free gives the
   * mapping back, realloc copies them out, usable size reads their header */
  static const size_t mapped_sizes[] = {1u << 20, (1u << 20) + 12345, 300000, 5u << 20};
  for (size_t i = 0; i < sizeof mapped_sizes / sizeof mapped_sizes[0]; ++i) {
    size_t n = mapped_sizes[i];
    unsigned char* g = __libc_malloc(n);
    CHECK(g != NULL, "__libc_malloc(%zu)", n);
    if (!g) continue;
    size_t u = malloc_usable_size(g);
    CHECK(u >= n && u < n + 2 * (size_t)sysconf(_SC_PAGESIZE), "malloc_usable_size(glibc block of %zu) = %zu", n, u);
    fill(g, n, 11);
    errno = 4321;
    unsigned char* r = realloc(g, n / 3);
    CHECK(r != NULL && first_mismatch(r, n / 3, 11) == n / 3, "realloc(glibc block of %zu, %zu)", n, n / 3);
    CHECK(errno == 4321, "realloc of a glibc block changed errno to %d", errno);
    free(r);
    g = __libc_malloc(n);
    CHECK(g != NULL, "__libc_malloc(%zu)", n);
    if (!g) continue;
    fill(g, n, 12);
    errno = 4321;
    free(g);
    CHECK(errno == 4321, "free of a glibc block of %zu changed errno to %d", n, errno);
    CHECK(!range_mapped(g + 4096, n - 8192), "free of a mapped glibc block of %zu left it mapped", n);
  }
  /* an mmapped glibc block aligned beyond its mapping's start: its header
   * records the offset to the mapping (prev_size) */
  for (size_t a = 4096; a <= (1u << 20); a *= 16) {
    unsigned char* g = __libc_memalign(a, 2u << 20);
    CHECK(g != NULL && aligned(g, a), "__libc_memalign(%zu, 2 MiB) = %p", a, (void*)g);
    if (!g) continue;
    CHECK(malloc_usable_size(g) >= (2u << 20), "malloc_usable_size(glibc memalign(%zu, 2 MiB)) = %zu", a,
          malloc_usable_size(g));
    fill(g, 2u << 20, 13);
    free(g);
    CHECK(!range_mapped(g, 2u << 20), "free of glibc memalign(%zu, 2 MiB) left it mapped", a);
  }
  /* a block from a thread's glibc arena (NON_MAIN_ARENA), freed here */
  pthread_t t;
  void* from_thread = NULL;
  CHECK(pthread_create(&t, NULL, libc_alloc_5000, &from_thread) == 0, "pthread_create");
  pthread_join(t, NULL);
  CHECK(from_thread != NULL, "__libc_malloc(5000) in a thread");
  if (from_thread) {
    CHECK(malloc_usable_size(from_thread) >= 5000, "malloc_usable_size(thread-arena glibc block) = %zu",
          malloc_usable_size(from_thread));
    void* grown = realloc(from_thread, 9000);
    CHECK(grown != NULL && first_mismatch(grown, 5000, 14) == 5000, "realloc of a thread-arena glibc block");
    free(grown);
  }
  CHECK(pthread_create(&t, NULL, libc_alloc_5000, &from_thread) == 0, "pthread_create");
  pthread_join(t, NULL);
  free(from_thread);
  /* interleaved with tenon's own blocks, many times */
  for (int i = 0; i < 20000; ++i) {
    void* mine = malloc(16 + i % 500);
    void* theirs = __libc_malloc(16 + i % 700);
    CHECK(mine && theirs, "round %d", i);
    if (i % 2) { free(theirs); free(mine); } else { free(mine); free(theirs); }
    if (preload_failures > 20) break;
  }
  check_still_works(__LINE__);
  return preload_failures;
}


/* ---- foreign pointers while another thread holds a lock ---------------- */

/* One call run in its own thread, so that a call that waits shows up as a
 * deadline missed instead of a hung test. The thread is joined at the end,
 * once whatever it waited for is released. */
struct timed_call {
  void (*fn)(void*);
  void* arg;
  atomic_int done;
  pthread_t thread;
};

static void* timed_call_main(void* p) {
  struct timed_call* c = p;
  c->fn(c->arg);
  atomic_store(&c->done, 1);
  return NULL;
}

/* Starts c and waits up to limit_ms for it; returns 1 if it returned in time. */
static int returns_within(struct timed_call* c, double limit_ms) {
  atomic_store(&c->done, 0);
  if (pthread_create(&c->thread, NULL, timed_call_main, c) != 0) return 0;
  double start = now_ms();
  while (!atomic_load(&c->done) && now_ms() - start < limit_ms) usleep(1000);
  return atomic_load(&c->done);
}

static void* g_block_a;
static void* g_block_b;
static void* g_block_c;
static void* g_block_mapped;
static void* g_realloc_result;
static size_t g_usable;
static void call_free_a(void* unused) { (void)unused; free(g_block_a); }
static void call_realloc_b(void* unused) { (void)unused; g_realloc_result = realloc(g_block_b, 12000); }
static void call_usable_c(void* unused) { (void)unused; g_usable = malloc_usable_size(g_block_c); }
static void call_free_mapped(void* unused) { (void)unused; free(g_block_mapped); }
/* glibc's own mallinfo2 and malloc_stats: libtenon.so defines both names
 * (with tenon's figures), so glibc's are looked up in libc.so.6 itself. */
static struct mallinfo2 (*g_glibc_mallinfo2)(void);
static void (*g_glibc_malloc_stats)(void);
static int find_glibc_reporting(void) {
  void* libc = dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD);
  if (!libc) return 0;
  g_glibc_mallinfo2 = (struct mallinfo2 (*)(void))dlsym(libc, "mallinfo2");
  g_glibc_malloc_stats = (void (*)(void))dlsym(libc, "malloc_stats");
  return g_glibc_mallinfo2 && g_glibc_malloc_stats;
}
static void call_mallinfo(void* unused) {
  (void)unused;
  struct mallinfo2 mi = g_glibc_mallinfo2();
  ESCAPE(&mi);
}

static atomic_int g_holder_tid;
static atomic_int g_holder_done;

/* glibc's malloc_stats prints each arena's figures to stderr while it holds
 * that arena's lock; with stderr a full pipe, it stays in write(), holding
 * the main arena's lock, until the pipe is drained: a thread stopped inside
 * glibc's allocator, on demand. */
static void* hold_main_arena_lock(void* unused) {
  (void)unused;
  atomic_store(&g_holder_tid, (int)syscall(SYS_gettid));
  g_glibc_malloc_stats();
  atomic_store(&g_holder_done, 1);
  return NULL;
}

/* Is thread tid inside the write system call? (/proc/.../syscall begins
 * with the number of the call a blocked thread is in.) */
static int in_write(int tid) {
  char path[64], buf[64];
  snprintf(path, sizeof path, "/proc/self/task/%d/syscall", tid);
  int fd = open(path, O_RDONLY);
  if (fd < 0) return 0;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return 0;
  buf[n] = 0;
  return atol(buf) == SYS_write;
}

static int run_foreign_arena_lock(void) {
  const double limit_ms = 3000;
  if (!find_glibc_reporting()) {
    printf("foreign_arena_lock: SKIP glibc's mallinfo2/malloc_stats not found in libc.so.6\n");
    return 77;
  }
  /* The blocks, all from the main arena (this thread's): two in its heap,
   * one mapped on its own. */
  g_block_a = __libc_malloc(5000);
  g_block_b = __libc_malloc(6000);
  g_block_c = __libc_malloc(7000);
  g_block_mapped = __libc_malloc(1u << 20);
  if (!g_block_a || !g_block_b || !g_block_c || !g_block_mapped) {
    fprintf(stderr, "FAILED: __libc_malloc\n");
    return 1;
  }
  fill(g_block_b, 6000, 21);

  /* stderr becomes a full pipe; the original is kept to report on. */
  fflush(stderr);
  int saved_stderr = dup(2);
  int pipefd[2];
  if (saved_stderr < 0 || pipe(pipefd) != 0) {
    fprintf(stderr, "FAILED: dup/pipe\n");
    return 1;
  }
  fcntl(pipefd[1], F_SETFL, O_NONBLOCK);
  static char junk[4096];
  while (write(pipefd[1], junk, sizeof junk) > 0) {}
  while (write(pipefd[1], junk, 1) > 0) {}
  fcntl(pipefd[1], F_SETFL, 0);
  dup2(pipefd[1], 2);

  pthread_t holder;
  pthread_create(&holder, NULL, hold_main_arena_lock, NULL);
  double start = now_ms();
  int held = 0;
  while (!held && now_ms() - start < 5000) {
    int tid = atomic_load(&g_holder_tid);
    held = tid != 0 && in_write(tid);
    if (!held) usleep(1000);
  }
  /* Control: glibc's own mallinfo2 takes the same lock and must wait. */
  static struct timed_call control = {call_mallinfo, NULL, 0, 0};
  int control_returned = held ? returns_within(&control, 300) : 1;

  static struct timed_call calls[] = {
      {call_free_a, NULL, 0, 0},
      {call_realloc_b, NULL, 0, 0},
      {call_usable_c, NULL, 0, 0},
      {call_free_mapped, NULL, 0, 0},
  };
  static const char* const names[] = {
      "free of a glibc block", "realloc of a glibc block", "malloc_usable_size of a glibc block",
      "free of a mapped glibc block",
  };
  int returned[4] = {0, 0, 0, 0};
  double took[4] = {0, 0, 0, 0};
  if (held && !control_returned) {
    for (int i = 0; i < 4; ++i) {
      double t0 = now_ms();
      returned[i] = returns_within(&calls[i], limit_ms);
      took[i] = now_ms() - t0;
    }
  }

  /* Release the holder: drain the pipe until malloc_stats has returned. */
  fcntl(pipefd[0], F_SETFL, O_NONBLOCK);
  while (!atomic_load(&g_holder_done)) {
    if (read(pipefd[0], junk, sizeof junk) <= 0) usleep(1000);
  }
  pthread_join(holder, NULL);
  dup2(saved_stderr, 2);
  close(saved_stderr);
  close(pipefd[0]);
  close(pipefd[1]);
  if (held) pthread_join(control.thread, NULL);
  if (!held || control_returned) {
    printf("foreign_arena_lock: SKIP could not hold glibc's main-arena lock (%s)\n",
           held ? "mallinfo2 did not wait for it" : "malloc_stats did not block in write");
    return 77;
  }
  for (int i = 0; i < 4; ++i) {
    pthread_join(calls[i].thread, NULL);
    printf("foreign_arena_lock: %s: %s (%.1f ms)\n", names[i], returned[i] ? "returned" : "WAITED", took[i]);
    CHECK(returned[i], "%s waited %.0f ms for glibc's arena lock (held by a stopped thread)", names[i], limit_ms);
  }
  CHECK(g_realloc_result != NULL && first_mismatch(g_realloc_result, 6000, 21) == 6000,
        "realloc of a glibc block lost its contents");
  CHECK(g_usable >= 7000, "malloc_usable_size(glibc block of 7000) = %zu", g_usable);
  free(g_realloc_result);
  free(g_block_c);
  return preload_failures;
}

/* The library foreign_dl_lock loads stops in its constructor (inside
 * dlopen, where the dynamic linker holds its lock) until told to go on. */
static const char* g_parking_lib;
static void* g_parked_handle;
static void* load_parking_lib(void* unused) {
  (void)unused;
  g_parked_handle = dlopen(g_parking_lib, RTLD_NOW | RTLD_LOCAL);
  return NULL;
}

static int run_foreign_dl_lock(const char* lib) {
  /* Must be the process's first malloc_usable_size of a foreign block. */
  g_block_c = __libc_malloc(7000);
  int ready[2], go[2];
  if (!g_block_c || pipe(ready) != 0 || pipe(go) != 0) {
    fprintf(stderr, "FAILED: setup\n");
    return 1;
  }
  char fds[64];
  snprintf(fds, sizeof fds, "%d,%d", ready[1], go[0]);
  setenv("TENON_TEST_PARK_FDS", fds, 1);
  g_parking_lib = lib;
  pthread_t loader;
  pthread_create(&loader, NULL, load_parking_lib, NULL);
  struct pollfd pfd = {ready[0], POLLIN, 0};
  if (poll(&pfd, 1, 10000) != 1) {
    fprintf(stderr, "FAILED: the library's constructor did not start within 10 s\n");
    return 1;
  }
  char c;
  if (read(ready[0], &c, 1) != 1) return 1;
  static struct timed_call call = {call_usable_c, NULL, 0, 0};
  double t0 = now_ms();
  int returned = returns_within(&call, 3000);
  double took = now_ms() - t0;
  if (write(go[1], "g", 1) != 1) return 1;
  pthread_join(loader, NULL);
  pthread_join(call.thread, NULL);
  printf("foreign_dl_lock: malloc_usable_size of a glibc block: %s (%.1f ms)\n", returned ? "returned" : "WAITED",
         took);
  CHECK(returned, "malloc_usable_size of a glibc block waited for the dynamic linker's lock (held by dlopen)");
  CHECK(g_usable >= 7000, "malloc_usable_size(glibc block of 7000) = %zu", g_usable);
  CHECK(g_parked_handle != NULL, "dlopen(%s): %s", lib, dlerror());
  if (g_parked_handle) dlclose(g_parked_handle);
  free(g_block_c);
  return preload_failures;
}

int main(int argc, char** argv) {
  if (argc == 3 && !strcmp(argv[1], "foreign_dl_lock")) {
    int failures = run_foreign_dl_lock(argv[2]);
    printf("%s: %d failed checks\n", argv[1], failures);
    return failures ? 1 : 0;
  }
  g_secure = argc == 3 && !strcmp(argv[2], "secure");
  if (argc != 2 && !g_secure) {
    fprintf(stderr, "usage: %s symbols|edge|foreign|foreign_arena_lock [secure] | foreign_dl_lock LIBRARY\n",
            argv[0]);
    return 2;
  }
  if (!strcmp(argv[1], "foreign_arena_lock")) {
    int failures = run_foreign_arena_lock();
    if (failures == 77) return 77;
    printf("%s: %d failed checks\n", argv[1], failures);
    return failures ? 1 : 0;
  }
  int failures;
  if (!strcmp(argv[1], "symbols")) failures = run_symbols();
  else if (!strcmp(argv[1], "edge")) failures = run_edge();
  else if (!strcmp(argv[1], "foreign")) failures = run_foreign();
  else { fprintf(stderr, "unknown mode %s\n", argv[1]); return 2; }
  printf("%s: %d failed checks\n", argv[1], failures);
  return failures ? 1 : 0;
}
