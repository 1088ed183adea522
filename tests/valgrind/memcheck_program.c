/* Runs under valgrind's memcheck with libtenon-valgrind.so preloaded
 * (memcheck_check.sh). "planted": one error of each kind memcheck should
 * report on tenon's heap, each on a line of its own; "clean": a churn of every
 * allocation function, threads freeing each other's blocks and huge blocks,
 * in which memcheck must find nothing (tenon's own work on its free lists
 * must not show as the program's errors). */
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void* volatile g_sink;

/* PLANTED: a leak. In a function of its own, so that no register or stack
 * slot of the caller still holds the pointer when memcheck looks for one. */
__attribute__((noinline)) static void leak_100_bytes(void) {
  char* leak = malloc(100);
  leak[0] = 1;
  g_sink = leak;
  g_sink = NULL;
}

/* Overwrites the stack below the caller (where leak_100_bytes ran). */
__attribute__((noinline)) static void scrub_stack(void) {
  volatile char pad[4096];
  memset((char*)pad, 0, sizeof pad);
}

static int planted(void) {
  leak_100_bytes();
  scrub_stack();
  char* p = malloc(20);                 /* a 32-byte class: the overrun lands in tenon's tail */
  memset(p, 1, 20);
  p[20] = 7;                             /* PLANTED: overflow */
  char* q = malloc(64);
  memset(q, 2, 64);
  free(q);
  volatile char c = q[10];               /* PLANTED: read after free */
  (void)c;
  free(q);                               /* PLANTED: double free */
  char* u = malloc(16);
  if (u[3] == 5) puts("five");           /* PLANTED: uninitialised */
  free(u);
  free(p);
  return 0;
}

enum { kSlots = 256 };
static void* g_slots[kSlots];

static void* churn(void* arg) {
  unsigned seed = (unsigned)(size_t)arg;
  for (int i = 0; i < 4000; ++i) {
    seed = seed * 1103515245u + 12345u;
    size_t n = 1 + (seed >> 8) % 3000;
    unsigned k = (seed >> 20) % kSlots;
    void* b = __atomic_exchange_n(&g_slots[k], NULL, __ATOMIC_ACQ_REL);
    if (b) {
      if (seed & 1) free(b);
      else {
        b = realloc(b, n);                 /* grow or shrink, kept contents */
        if (((unsigned char*)b)[0] != 0xAB) abort();
        free(b);
      }
    }
    unsigned char* fresh = (seed & 2) ? calloc(1, n) : malloc(n);
    if (!fresh) abort();
    if ((seed & 2) && fresh[n - 1] != 0) abort();
    memset(fresh, 0xAB, n);
    if (malloc_usable_size(fresh) < n) abort();
    b = __atomic_exchange_n(&g_slots[k], fresh, __ATOMIC_ACQ_REL);
    free(b);                               /* another thread's block, often */
  }
  return NULL;
}

static int clean(void) {
  pthread_t t[3];
  for (size_t i = 0; i < 3; ++i) pthread_create(&t[i], NULL, churn, (void*)(i + 1));
  for (int i = 0; i < 3; ++i) pthread_join(t[i], NULL);
  for (int k = 0; k < kSlots; ++k) free(g_slots[k]);
  void* a = aligned_alloc(4096, 5000);
  void* m = NULL;
  if (!a || posix_memalign(&m, 64, 100) != 0 || ((size_t)a & 4095) || ((size_t)m & 63)) abort();
  memset(a, 1, 5000);
  memset(m, 1, 100);
  free(a);
  free(m);
  for (int i = 0; i < 4; ++i) {                 /* huge blocks, reused from tenon's cache */
    char* h = malloc((size_t)8 << 20);
    memset(h, 1, 1 << 20);
    h = realloc(h, (size_t)12 << 20);
    if (h[1000] != 1) abort();
    free(h);
  }
  char* s = strdup("a string from libc");  /* libc's calls reach tenon too */
  free(s);
  return 0;
}

int main(int argc, char** argv) {
  if (argc == 2 && strcmp(argv[1], "planted") == 0) return planted();
  if (argc == 2 && strcmp(argv[1], "clean") == 0) return clean();
  fprintf(stderr, "usage: memcheck_program planted|clean\n");
  return 2;
}
