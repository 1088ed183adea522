/* Threads whose C library frees memory after tenon's thread-exit hook, under
 * LD_PRELOAD=libtenon.so. A failing dlsym leaves a per-thread dlerror buffer
 * that glibc frees in __libc_thread_freeres, after every pthread-key
 * destructor (tenon's included) has run. That free, and any malloc in a late
 * key destructor, must not leave a thread heap behind: threads run one at a
 * time, so the heaps in use (attached minus released, from tenon's
 * statistics) and RSS must stay where they started.
 *
 * Also (last_round) threads whose first allocator call comes in the last
 * round of key destructors (glibc runs up to PTHREAD_DESTRUCTOR_ITERATIONS,
 * 4: a destructor that sets its key again three times, then allocates): no
 * hook had run, and until 2026-11-27 the heap it attached was never released
 * (3000 threads: 3000 heaps left in use, RSS +34 MiB; 70,000 threads: 65,536
 * heaps, RSS +740 MiB, and malloc returned NULL in every thread past that).
 *
 * Also (heaps_last_round) the same for first-class heaps: a thread whose
 * first tenon_heap_* call comes in the last round takes a heap-thread id
 * (1..8192) that the heaps' own key gives back only if its destructor runs
 * after that call. Until 2026-11-27 that key took the lowest free slot, below
 * the program's keys: 9000 threads left every id taken and
 * tenon_heap_malloc failed with ENOMEM in the last 808.
 *
 * usage: late_free_threads [THREADS]   (default 3000; the soak is 70000,
 * or set TENON_TEST_LATE_FREE_THREADS)
 *        late_free_threads last_round [THREADS]
 *        late_free_threads heaps_last_round [THREADS]   (default 9000) */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "preload_stats.h"
#include "../api/resident_kib.h"

/* A key created after tenon's (whose key is made at the first malloc, in the
 * last free key slot): glibc runs its destructor before tenon's in the first
 * round. It sets its value again, so it runs once more in the second round,
 * after tenon's hook, and allocates and frees in the state that hook left. */
static pthread_key_t g_late_key;
static __thread int t_late_calls;

static void late_destructor(void* arg) {
  if (++t_late_calls == 1) {
    pthread_setspecific(g_late_key, arg);
    return;
  }
  free(arg);                      /* a block of the thread's released heap */
  void* p = malloc(48);           /* allocation after the heap is gone */
  if (p) memset(p, 1, 48);
  free(p);
  p = malloc(200000);             /* a large block in that state too */
  if (p) memset(p, 1, 4096);
  free(p);
}

static int g_failed_mallocs;

/* last_round: a key whose destructor sets it again until the last round,
 * and only then makes the thread's first allocator calls. */
static pthread_key_t g_round_key;

static void round_destructor(void* arg) {
  long round = (long)arg;
  if (round < 4) {
    pthread_setspecific(g_round_key, (void*)(round + 1));
    return;
  }
  void* p = malloc(48);
  if (!p) __atomic_add_fetch(&g_failed_mallocs, 1, __ATOMIC_RELAXED);
  if (p) memset(p, 1, 48);
  free(p);
  p = malloc(200000);
  if (p) memset(p, 1, 4096);
  free(p);
}

/* heaps_last_round: the same key, but the thread's first heap call comes in
 * the last round. The heap functions are found with dlsym: the program links
 * no tenon library. */
static void* (*g_heap_new)(const void*);
static void* (*g_heap_malloc)(void*, size_t);
static void (*g_heap_free)(void*, void*);
static void* g_heap;
static int g_failed_heap_mallocs;

static void heap_round_destructor(void* arg) {
  long round = (long)arg;
  if (round < 4) {
    pthread_setspecific(g_round_key, (void*)(round + 1));
    return;
  }
  void* p = g_heap_malloc(g_heap, 48);
  if (!p) __atomic_add_fetch(&g_failed_heap_mallocs, 1, __ATOMIC_RELAXED);
  if (p) memset(p, 1, 48);
  g_heap_free(g_heap, p);
}

static void* last_round_body(void* arg) {
  (void)arg;
  pthread_setspecific(g_round_key, (void*)1L);  /* no allocator call in its life until then */
  return NULL;
}

static void* (*g_body)(void*);

static void* thread_body(void* arg) {
  (void)arg;
  void* p = malloc(100);
  if (!p) __atomic_add_fetch(&g_failed_mallocs, 1, __ATOMIC_RELAXED);
  free(p);
  pthread_setspecific(g_late_key, malloc(64));
  /* Fails: glibc keeps the message in a per-thread buffer it frees late. */
  if (dlsym(RTLD_DEFAULT, "no_such_symbol") != NULL) abort();
  return NULL;
}

static int run_threads(long n) {
  for (long i = 0; i < n; ++i) {
    pthread_t t;
    if (pthread_create(&t, NULL, g_body, NULL) != 0 || pthread_join(t, NULL) != 0) {
      fprintf(stderr, "FAILED: thread %ld could not be started (%s)\n", i, strerror(errno));
      return 0;
    }
  }
  return 1;
}

int main(int argc, char** argv) {
  long threads = 3000;
  int heaps = argc > 1 && strcmp(argv[1], "heaps_last_round") == 0;
  int last_round = heaps || (argc > 1 && strcmp(argv[1], "last_round") == 0);
  if (heaps) threads = 9000;
  if (last_round) {
    --argc;
    ++argv;
  }
  if (getenv("TENON_TEST_LATE_FREE_THREADS")) threads = atol(getenv("TENON_TEST_LATE_FREE_THREADS"));
  if (argc > 1) threads = atol(argv[1]);
  free(malloc(1));  /* tenon's key first, so that late_destructor runs after its hook */
  if (heaps) {
    g_heap_new = (void* (*)(const void*))dlsym(RTLD_DEFAULT, "tenon_heap_new");
    g_heap_malloc = (void* (*)(void*, size_t))dlsym(RTLD_DEFAULT, "tenon_heap_malloc");
    g_heap_free = (void (*)(void*, void*))dlsym(RTLD_DEFAULT, "tenon_heap_free");
    if (!g_heap_new || !g_heap_malloc || !g_heap_free) {
      fprintf(stderr, "FAILED: tenon_heap_* not found: run under LD_PRELOAD=libtenon.so\n");
      return 1;
    }
    /* The heap (and its key) made before the program's key, as a program
     * that sets up its heaps first and its own keys after. */
    g_heap = g_heap_new(NULL);
    g_heap_free(g_heap, g_heap_malloc(g_heap, 16));
  }
  pthread_key_create(&g_late_key, late_destructor);
  pthread_key_create(&g_round_key, heaps ? heap_round_destructor : round_destructor);
  g_body = last_round ? last_round_body : thread_body;
  /* Warm up: the first threads set up glibc's and tenon's per-process state. */
  if (!run_threads(20)) return 1;
  long heaps_before = heaps_in_use(), rss_before = resident_kib();
  if (!run_threads(threads)) return 1;
  long heaps_after = heaps_in_use(), rss_after = resident_kib();
  printf("late frees%s: %ld threads, %d failed heap mallocs, heaps in use %ld -> %ld, RSS %ld -> %ld KiB, %d failed mallocs\n",
         heaps ? " (first heap calls in the last destructor round)" : last_round ? " (first calls in the last destructor round)" : "", threads, g_failed_heap_mallocs, heaps_before, heaps_after,
         rss_before, rss_after, g_failed_mallocs);
  int ok = 1;
  if (heaps_before < 0 || heaps_after < 0) {
    fprintf(stderr, "FAILED: heap counters missing from tenon_stats_print\n");
    ok = 0;
  }
  /* Threads ran one at a time: every heap they used must be back. */
  if (heaps_after > heaps_before) {
    fprintf(stderr, "FAILED: %ld thread heaps left behind by %ld exited threads\n", heaps_after - heaps_before,
            threads);
    ok = 0;
  }
  if (g_failed_heap_mallocs) {
    fprintf(stderr, "FAILED: tenon_heap_malloc(48) returned NULL in %d of %ld threads\n", g_failed_heap_mallocs,
            threads);
    ok = 0;
  }
  if (g_failed_mallocs) {
    fprintf(stderr, "FAILED: malloc(100) returned NULL in %d threads\n", g_failed_mallocs);
    ok = 0;
  }
  if (rss_after - rss_before > 8 * 1024) {
    fprintf(stderr, "FAILED: RSS grew by %ld KiB\n", rss_after - rss_before);
    ok = 0;
  }
  return ok ? 0 : 1;
}
