/* fork() from a signal handler that interrupts malloc/free, under
 * LD_PRELOAD=libtenon.so. glibc's fork takes its malloc locks, so with an
 * allocator that holds locks this deadlocks when the signal lands inside
 * malloc; tenon holds none. Each child only _exits (malloc in the child of an
 * interrupted malloc is not async-signal-safe for any allocator). The parent
 * keeps allocating, with several other threads doing the same, and reaps
 * every child with a deadline. A watchdog ends the program if it stops
 * making progress. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { kForks = 200, kThreads = 3 };

static volatile sig_atomic_t forked = 0;
static pid_t children[kForks];
static atomic_long progress;       /* all threads' operations */
static atomic_long main_progress;  /* the signalled thread's operations */
static atomic_int stop;

static void on_alarm(int sig) {
  (void)sig;
  int saved = errno;
  int n = forked;
  if (n < kForks) {
    pid_t pid = fork();
    if (pid == 0) _exit(0);
    if (pid > 0) {
      children[n] = pid;
      forked = n + 1;
    }
  }
  errno = saved;
}

static void* churn(void* arg) {
  unsigned x = (unsigned)(size_t)arg * 7919u + 1;
  void* keep[64] = {0};
  while (!atomic_load(&stop)) {
    x = x * 1103515245u + 12345u;
    size_t slot = (x >> 8) % 64;
    free(keep[slot]);
    size_t size = (x >> 16) % 8 == 0 ? 1 + (x >> 4) % 200000 : 1 + (x >> 4) % 512;
    keep[slot] = malloc(size);
    if (!keep[slot]) { fprintf(stderr, "malloc(%zu) failed\n", size); exit(1); }
    memset(keep[slot], (int)x, size < 64 ? size : 64);
    atomic_fetch_add(&progress, 1);
  }
  for (int i = 0; i < 64; ++i) free(keep[i]);
  return NULL;
}

static void* watchdog(void* arg) {
  (void)arg;
  long last = -1;
  for (int idle = 0; idle < 20 && !atomic_load(&stop);) {
    sleep(1);
    long now = atomic_load(&main_progress);  /* the thread that forks in its handler */
    idle = now == last ? idle + 1 : 0;
    last = now;
  }
  if (!atomic_load(&stop)) {
    fprintf(stderr, "FAILED: the main thread made no progress for 20 s after %d forks (deadlock in malloc/free or fork?)\n", (int)forked);
    _exit(3);
  }
  return NULL;
}

int main(void) {
  /* Only the main thread takes the signal: the other threads are created
   * with SIGALRM blocked (they inherit the mask), then main unblocks it. */
  sigset_t alrm;
  sigemptyset(&alrm);
  sigaddset(&alrm, SIGALRM);
  pthread_sigmask(SIG_BLOCK, &alrm, NULL);
  pthread_t dog, workers[kThreads];
  pthread_create(&dog, NULL, watchdog, NULL);
  for (long i = 0; i < kThreads; ++i) pthread_create(&workers[i], NULL, churn, (void*)(i + 1));
  pthread_sigmask(SIG_UNBLOCK, &alrm, NULL);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_alarm;
  sa.sa_flags = SA_RESTART;
  sigaction(SIGALRM, &sa, NULL);
  struct itimerval every = {{0, 2000}, {0, 2000}};
  setitimer(ITIMER_REAL, &every, NULL);
  unsigned x = 99;
  void* keep[256] = {0};
  while (forked < kForks) {
    x = x * 1664525u + 1013904223u;
    size_t slot = (x >> 8) % 256;
    free(keep[slot]);
    keep[slot] = malloc(1 + (x >> 12) % 3000);
    void* r = realloc(keep[(slot + 1) % 256], 1 + (x >> 14) % 9000);
    if (!keep[slot] || !r) { fprintf(stderr, "FAILED: allocation failed\n"); return 1; }
    keep[(slot + 1) % 256] = r;
    atomic_fetch_add(&progress, 1);
    atomic_fetch_add(&main_progress, 1);
  }
  struct itimerval off = {{0, 0}, {0, 0}};
  setitimer(ITIMER_REAL, &off, NULL);
  for (int i = 0; i < 256; ++i) free(keep[i]);
  int failures = 0;
  for (int i = 0; i < kForks; ++i) {
    int status = 0;
    struct timespec start, now;
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (;;) {
      pid_t r = waitpid(children[i], &status, WNOHANG);
      if (r == children[i]) break;
      clock_gettime(CLOCK_MONOTONIC, &now);
      if (r < 0 || now.tv_sec - start.tv_sec > 10) {
        fprintf(stderr, "FAILED: child %d (pid %d) did not exit within 10 s\n", i, (int)children[i]);
        kill(children[i], SIGKILL);
        waitpid(children[i], &status, 0);
        ++failures;
        break;
      }
      usleep(1000);
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) != 0) ++failures;
  }
  atomic_store(&stop, 1);
  for (int i = 0; i < kThreads; ++i) pthread_join(workers[i], NULL);
  pthread_join(dog, NULL);
  printf("fork in signal handler: %d forks, %d failed, %ld allocator operations\n", kForks, failures,
         atomic_load(&progress));
  return failures ? 1 : 0;
}
