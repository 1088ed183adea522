/* A fully static program (gcc -static) linked with libtenon-override.a and
 * -Wl,-u,malloc: a block from inside libc (strdup), the C names, glibc's
 * internal aliases and tuning calls, fork and a thread, all on tenon.
 * Exits 0 when every check passed. */
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <tenon/tenon.h>
#include <unistd.h>

void* __libc_malloc(size_t);
void __libc_free(void*);
void* __libc_memalign(size_t, size_t);

static int failures;
#define CHECK(cond, ...)                       \
  do {                                         \
    if (!(cond)) {                             \
      fprintf(stderr, "FAILED: " __VA_ARGS__); \
      fputc('\n', stderr);                     \
      ++failures;                              \
    }                                          \
  } while (0)

static void* thread_main(void* arg) {
  (void)arg;
  char* p = malloc(1000);
  return p && tenon_owns(p) ? p : NULL;
}

int main(void) {
  char* s = strdup("allocated by libc's strdup");
  CHECK(s && tenon_owns(s), "strdup's block (%p) is not tenon's: libc.a's malloc was linked", (void*)s);
  free(s);

  void* p = malloc(24);
  void* q = calloc(10, 10);
  p = realloc(p, 100000);
  void* a = NULL;
  CHECK(posix_memalign(&a, 4096, 100) == 0 && ((size_t)a & 4095) == 0, "posix_memalign(4096)");
  void* g = __libc_malloc(48);
  void* m = __libc_memalign(256, 10);
  CHECK(p && q && tenon_owns(p) && tenon_owns(q) && tenon_owns(a), "malloc/calloc/realloc/posix_memalign");
  CHECK(g && m && tenon_owns(g) && tenon_owns(m) && ((size_t)m & 255) == 0, "__libc_malloc/__libc_memalign");
  free(p);
  free(q);
  free(a);
  __libc_free(g);
  free(m);

  /* glibc's tuning and reporting names resolve too (no duplicate malloc.o). */
  CHECK(mallopt(M_ARENA_MAX, 1) == 1, "mallopt");
  struct mallinfo2 mi = mallinfo2();
  CHECK(mi.arena == 0, "mallinfo2");
  errno = 0;
  CHECK(malloc_info(1, stdout) == -1 && errno == EINVAL, "malloc_info(1, ...)");
  void (*stats)(void) = malloc_stats;
  CHECK(stats != NULL, "malloc_stats");

  pid_t pid = fork();
  if (pid == 0) {
    char* c = malloc(64);
    _exit(c && tenon_owns(c) ? 0 : 1);
  }
  int status = 0;
  CHECK(pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0,
        "a forked child allocating from tenon");
  pthread_t t;
  void* from_thread = NULL;
  CHECK(pthread_create(&t, NULL, thread_main, NULL) == 0 && pthread_join(t, &from_thread) == 0 && from_thread,
        "a thread allocating from tenon");
  free(from_thread);

  if (failures) return 1;
  printf("static_check: tenon %s is the allocator of this static program\n", tenon_version());
  return 0;
}
