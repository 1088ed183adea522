/* Threads created while memory is short (RLIMIT_AS, the 512-byte class
 * exhausted) each make one malloc and exit: each heap they attach must be
 * released at their exit. Found by review (2026-11-27): tenon's thread-exit
 * key at slot 64 needed glibc's second-level array, a calloc(512) at each
 * thread's first pthread_setspecific; refused, the key held nothing, and the
 * thread's heap stayed attached for good (50 threads: heaps in use 1 -> 51).
 * Exit 0 when no heap is left behind. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "preload_stats.h"

static int g_ok;
static void* body(void* a) {
  (void)a;
  void* p = malloc(16);
  if (p) { __sync_fetch_and_add(&g_ok, 1); free(p); }
  return NULL;
}
static void run(int n) {
  for (int i = 0; i < n; ++i) {
    pthread_t t;
    if (pthread_create(&t, NULL, body, NULL) != 0) { perror("create"); exit(1); }
    pthread_join(t, NULL);
  }
}

int main(int argc, char** argv) {
  int threads = argc > 1 ? atoi(argv[1]) : 50;
  free(malloc(1));
  run(20);
  long before = heaps_in_use();
  long pages = 0;
  FILE* f = fopen("/proc/self/statm", "r");
  if (fscanf(f, "%ld", &pages) != 1) return 1;
  fclose(f);
  struct rlimit old, lim;
  getrlimit(RLIMIT_AS, &old);
  lim = old;
  lim.rlim_cur = (rlim_t)pages * 4096 + (1 << 20);
  if (setrlimit(RLIMIT_AS, &lim)) { perror("setrlimit"); return 1; }
  /* exhaust the 512-byte class (glibc's second-level key array) */
  void* head = NULL;
  long n512 = 0;
  for (;;) { void** p = malloc(512); if (!p) break; *p = head; head = p; ++n512; }
  g_ok = 0;
  run(threads);
  int ok_under = g_ok;
  while (head) { void* next = *(void**)head; free(head); head = next; }
  setrlimit(RLIMIT_AS, &old);
  run(20);
  long after = heaps_in_use();
  printf("512-byte blocks had under the limit: %ld; %d threads under the limit (%d mallocs ok); heaps in use %ld -> %ld\n",
         n512, threads, ok_under, before, after);
  return after > before ? 2 : 0;
}
