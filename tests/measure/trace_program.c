/* trace_program: a program whose worker threads make a known number of
 * allocator calls, for the trace round trip (trace_roundtrip.sh).
 *
 *   trace_program WORKERS ROUNDS [fork|print]
 *
 * Phase 1: each worker, every round: malloc, calloc, aligned_alloc,
 * posix_memalign, realloc of the malloc'd block, three frees; the realloc'd
 * block is left for phase 2, where worker i frees worker (i+1)'s blocks
 * (frees from another thread). With "fork", the main thread forks between
 * the phases; the child makes 5000 malloc/free pairs of 77 bytes and exits.
 * With "print", it ends by asking for the latency report (tenon_latency_print,
 * <tenon/latency.h>), or says that no latency layer is loaded.
 * Prints what the workers did:
 *   EXPECT calls=N malloc=.. calloc=.. realloc=.. aligned=.. free=.. bytes=B
 * Only write(2) for output, so that stdio's buffers stay out of the counts. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <tenon/latency.h>

static int workers, rounds;
static void** handed; /* [workers][rounds] */

static size_t size_of(int w, int r) { return (size_t)(16 + (w * 131 + r * 17) % 3000); }

static void* phase1(void* arg) {
  int w = (int)(intptr_t)arg;
  for (int r = 0; r < rounds; r++) {
    size_t n = size_of(w, r);
    char* p = malloc(n);
    char* q = calloc(3, n);
    void* a = aligned_alloc(64, 64 * (size_t)(1 + r % 8));
    void* x = NULL;
    if (!p || !q || !a || posix_memalign(&x, 32, 100) != 0) abort();
    memset(p, 1, n);
    p = realloc(p, 2 * n);
    if (!p) abort();
    free(q);
    free(a);
    free(x);
    handed[w * rounds + r] = p;
  }
  return NULL;
}

static void* phase2(void* arg) {
  int w = ((int)(intptr_t)arg + 1) % workers;
  for (int r = 0; r < rounds; r++) free(handed[w * rounds + r]);
  return NULL;
}

static void run(void* (*fn)(void*)) {
  pthread_t t[64];
  for (int w = 0; w < workers; w++) pthread_create(&t[w], NULL, fn, (void*)(intptr_t)w);
  for (int w = 0; w < workers; w++) pthread_join(t[w], NULL);
}

int main(int argc, char** argv) {
  workers = argc > 1 ? atoi(argv[1]) : 4;
  rounds = argc > 2 ? atoi(argv[2]) : 1000;
  int do_fork = argc > 3 && !strcmp(argv[3], "fork");
  int do_print = argc > 3 && !strcmp(argv[3], "print");
  if (workers < 1 || workers > 64 || rounds < 1) return 2;
  handed = calloc((size_t)workers * (size_t)rounds, sizeof(void*));
  run(phase1);
  if (do_fork) {
    pid_t pid = fork();
    if (pid == 0) {
      for (int i = 0; i < 5000; i++) free(malloc(77));
      exit(0); /* through the destructors: a traced child writes its file */
    }
    int status;
    if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return 3;
  }
  run(phase2);
  free(handed);
  unsigned long long bytes = 0;
  for (int w = 0; w < workers; w++)
    for (int r = 0; r < rounds; r++) {
      size_t n = size_of(w, r);
      bytes += n + 3 * n + 64 * (size_t)(1 + r % 8) + 100 + 2 * n;
    }
  unsigned long long wr = (unsigned long long)workers * (unsigned long long)rounds;
  char line[256];
  int len = snprintf(line, sizeof line, "EXPECT calls=%llu malloc=%llu calloc=%llu realloc=%llu aligned=%llu free=%llu bytes=%llu\n",
                     wr * 9, wr, wr, wr, 2 * wr, 4 * wr, bytes);
  if (write(1, line, (size_t)len) != len) return 1;
  if (do_print) {
    if (tenon_latency_print) {
      tenon_latency_print();
    } else {
      static const char none[] = "trace_program: no latency layer loaded\n";
      if (write(2, none, sizeof none - 1) < 0) return 1;
    }
  }
  return 0;
}
