/* The standard C allocation names, as a program sees them under
 * LD_PRELOAD=libtenon.so. Modes (argv[1]):
 *   symbols  every allocation name resolves into libtenon.so
 *   edge     the edge cases of docs/api.md through the standard names
 *   foreign  pointers from glibc's own allocator (__libc_malloc) handed to
 *            free/realloc/malloc_usable_size are passed back to glibc
 * Built with -fno-builtin so the compiler keeps every call as written. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "preload_check.h"

extern void* __libc_malloc(size_t);
extern void* __libc_calloc(size_t, size_t);
extern void* __libc_memalign(size_t, size_t);
extern void __libc_free(void*);

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
    p = memalign(a, 64);
    if (a > SIZE_MAX / 2 + 1)
      CHECK(p == NULL && errno == EINVAL, "memalign(%zu, 64) = %p, errno %d", a, p, errno);
    else
      CHECK(p != NULL && aligned(p, want) && malloc_usable_size(p) >= 64,
            "memalign(%zu, 64) = %p, errno %d (want a block aligned to %zu)", a, p, errno, want);
    free(p);
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
  for (size_t a = 8; a <= ((size_t)4 << 20); a *= 2) {
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

static int run_foreign(void) {
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

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s symbols|edge|foreign\n", argv[0]);
    return 2;
  }
  int failures;
  if (!strcmp(argv[1], "symbols")) failures = run_symbols();
  else if (!strcmp(argv[1], "edge")) failures = run_edge();
  else if (!strcmp(argv[1], "foreign")) failures = run_foreign();
  else { fprintf(stderr, "unknown mode %s\n", argv[1]); return 2; }
  printf("%s: %d failed checks\n", argv[1], failures);
  return failures ? 1 : 0;
}
