/* Memory that threads' freed blocks keep, under LD_PRELOAD (libtenon.so and
 * libtenon-secure.so): after malloc_trim, what they freed must not stay
 * resident.
 *
 * usage: idle_threads CASE
 *   waiting  50 threads each free 8 large blocks of 1,000,000 bytes (written
 *            whole), then wait, alive, while the main thread calls
 *            malloc_trim: RSS within 24 MiB of where it started. The secure
 *            build's quarantine held each thread's 8 in a ring of its own,
 *            closed but resident, which malloc_trim (the calling thread's
 *            ring only) could not reach: 400 MB (until 2026-11-27).
 *   exited   50 threads each free 64 blocks of 32,000 bytes (written whole)
 *            and, once all have, exit together; then malloc_trim: RSS
 *            within 24 MiB of the start. The
 *            secure build's quarantine gave back a thread's ring after
 *            tenon's thread-exit hook had parked its heap: the blocks went
 *            back to spans of a parked heap, held (empty) until a new thread
 *            took it over: 100 MB (until 2026-11-27).
 * Prints the figures; exit 0 when they hold, 1 when not. */
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "../api/resident_kib.h"

enum { kThreads = 50 };
static pthread_barrier_t g_freed, g_counted;
static int g_wait;  /* waiting: threads stay alive until counted */

static void churn(int count, size_t size) {
  char* b[64];
  for (int i = 0; i < count; ++i) {
    b[i] = malloc(size);
    if (!b[i]) {
      fprintf(stderr, "FAILED: malloc(%zu) returned NULL\n", size);
      exit(1);
    }
    memset(b[i], 0x5a, size);
  }
  for (int i = 0; i < count; ++i) free(b[i]);
}

static void* waiting_body(void* arg) {
  (void)arg;
  churn(8, 1000000);
  pthread_barrier_wait(&g_freed);
  pthread_barrier_wait(&g_counted);
  return NULL;
}

static void* exited_body(void* arg) {
  churn(64, 32000);
  if (arg) pthread_barrier_wait(&g_freed);  /* all alive at once: none takes over another's parked heap */
  return NULL;
}

int main(int argc, char** argv) {
  const char* c = argc > 1 ? argv[1] : "";
  g_wait = !strcmp(c, "waiting");
  if (!g_wait && strcmp(c, "exited")) {
    fprintf(stderr, "usage: idle_threads waiting|exited\n");
    return 2;
  }
  /* Whatever the first thread sets up once (keys, the first chunks) before the start figure. */
  pthread_t t;
  pthread_create(&t, NULL, exited_body, NULL);
  pthread_join(t, NULL);
  malloc_trim(0);
  long start = resident_kib();

  pthread_t threads[kThreads];
  pthread_barrier_init(&g_freed, NULL, kThreads + 1);
  pthread_barrier_init(&g_counted, NULL, kThreads + 1);
  for (int i = 0; i < kThreads; ++i)
    if (pthread_create(&threads[i], NULL, g_wait ? waiting_body : exited_body, &g_freed) != 0) {
      fprintf(stderr, "FAILED: pthread_create\n");
      return 1;
    }
  pthread_barrier_wait(&g_freed);
  if (!g_wait)
    for (int i = 0; i < kThreads; ++i) pthread_join(threads[i], NULL);
  long before_trim = resident_kib();
  malloc_trim(0);
  long after = resident_kib();
  if (g_wait) {
    pthread_barrier_wait(&g_counted);
    for (int i = 0; i < kThreads; ++i) pthread_join(threads[i], NULL);
  }
  printf("%s: %d threads (%s); RSS %ld KiB at the start, %ld before malloc_trim, %ld after\n", c, kThreads,
         g_wait ? "alive, each having freed 8 x 1,000,000 B" : "exited, each having freed 64 x 32,000 B", start,
         before_trim, after);
  if (after - start > 24 * 1024) {
    fprintf(stderr, "FAILED: %ld KiB still resident after malloc_trim (more than 24 MiB over the start)\n",
            after - start);
    return 1;
  }
  return 0;
}
