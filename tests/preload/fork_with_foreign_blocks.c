/* fork() while threads free and reallocate blocks from glibc's own allocator
 * (__libc_malloc) through free/realloc, under LD_PRELOAD=libtenon.so.
 *
 * glibc's fork takes every glibc arena lock (__malloc_fork_lock_parent). An
 * allocator that hands glibc's blocks back to glibc's free or realloc can be
 * interrupted while that call holds an arena lock: a fork from a signal
 * handler on that thread then waits forever for its own lock, and a fork
 * beside a thread stopped there waits for that thread. Here:
 *   - the main thread frees and reallocates glibc blocks (its own and the
 *     workers') while SIGALRM forks from its handler every 2 ms (children
 *     only _exit), and forks plainly now and then (children free and
 *     reallocate inherited glibc blocks, allocate, and exit 0);
 *   - worker threads allocate glibc blocks, hand them to each other through
 *     atomic slots and free or reallocate them with free/realloc;
 *   - a watchdog fails the program when the main thread makes no progress
 *     for 20 s, and every child must exit within 10 s.
 * The program's own __libc_malloc calls take glibc's locks too, so the main
 * thread makes them with SIGALRM blocked: only free/realloc can be
 * interrupted. The small glibc blocks are 16-48 bytes: an allocator may keep
 * them instead of returning them to glibc (tenon does), a bounded cost here. */
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
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

extern void* __libc_malloc(size_t);

enum { kSignalForks = 200, kPlainForks = 40, kThreads = 3, kSlots = 64, kBatch = 64 };

static volatile sig_atomic_t forked = 0;
static pid_t signal_children[kSignalForks];
static _Atomic(void*) slots[kSlots];
static atomic_long progress;       /* all threads' operations */
static atomic_long main_progress;  /* the signalled thread's operations */
static atomic_int stop;

static void on_alarm(int sig) {
  (void)sig;
  int saved = errno;
  int n = forked;
  if (n < kSignalForks) {
    pid_t pid = fork();
    if (pid == 0) _exit(0);
    if (pid > 0) {
      signal_children[n] = pid;
      forked = n + 1;
    }
  }
  errno = saved;
}

/* A glibc block: mostly 16-48 bytes, now and then one glibc maps on its own. */
static void* glibc_block(unsigned x, size_t* size) {
  *size = (x >> 4) % 97 == 0 ? (256u << 10) + (x >> 8) % 65536 : 16 + (x >> 8) % 33;
  unsigned char* p = __libc_malloc(*size);
  if (!p) {
    fprintf(stderr, "FAILED: __libc_malloc(%zu)\n", *size);
    exit(1);
  }
  p[0] = (unsigned char)x;
  p[*size - 1] = (unsigned char)x;
  return p;
}

/* free or realloc-then-free: both hand a glibc block to the allocator. */
static void release(void* p, unsigned x) {
  if (x % 4 == 0) {
    void* q = realloc(p, 1 + x % 300);
    if (!q) {
      fprintf(stderr, "FAILED: realloc of a glibc block\n");
      exit(1);
    }
    free(q);
  } else {
    free(p);
  }
}

static void* worker(void* arg) {
  unsigned x = (unsigned)(size_t)arg * 7919u + 1;
  for (long ops = 0; !atomic_load(&stop); ++ops) {
    /* Paced: each glibc block freed may stay allocated (see above), and the
     * run's length is set by the forks, not by these threads. */
    if (ops % 32 == 31) usleep(1000);
    x = x * 1103515245u + 12345u;
    size_t size;
    void* p = glibc_block(x, &size);
    void* old = atomic_exchange(&slots[(x >> 16) % kSlots], p);
    if (old) release(old, x >> 3);
    atomic_fetch_add(&progress, 1);
  }
  return NULL;
}

static void* watchdog(void* arg) {
  (void)arg;
  long last = -1;
  for (int idle = 0; idle < 20 && !atomic_load(&stop);) {
    sleep(1);
    long now = atomic_load(&main_progress);
    idle = now == last ? idle + 1 : 0;
    last = now;
  }
  if (!atomic_load(&stop)) {
    fprintf(stderr,
            "FAILED: the main thread made no progress for 20 s after %d forks from its signal handler "
            "(fork waiting for a glibc lock held inside free/realloc?)\n",
            (int)forked);
    _exit(3);
  }
  return NULL;
}

/* Waits for pid up to 10 s; kills it when late. Returns 1 if it exited 0. */
static int reap(pid_t pid, int index) {
  int status = 0;
  struct timespec start, now;
  clock_gettime(CLOCK_MONOTONIC, &start);
  for (;;) {
    pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) break;
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (r < 0 || now.tv_sec - start.tv_sec > 10) {
      fprintf(stderr, "FAILED: child %d (pid %d) did not exit within 10 s\n", index, (int)pid);
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return 0;
    }
    usleep(1000);
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    fprintf(stderr, "FAILED: child %d (pid %d) ended with status 0x%x\n", index, (int)pid, status);
    return 0;
  }
  return 1;
}

/* A plainly forked child: frees and reallocates glibc blocks it inherited,
 * allocates, and exits 0 when all of it worked. */
static void child_after_plain_fork(void** batch, int n) {
  for (int i = 0; i < n; ++i) {
    if (!batch[i]) continue;
    if (i % 3 == 0) {
      unsigned char* q = realloc(batch[i], 5000);
      if (!q) _exit(10);
      memset(q, 1, 5000);
      free(q);
    } else {
      free(batch[i]);
    }
  }
  void* mine = malloc(100000);
  if (!mine) _exit(11);
  memset(mine, 2, 100000);
  free(mine);
  _exit(0);
}

int main(void) {
  /* A fixed threshold: glibc would otherwise raise it whenever its own free
   * releases a mapped block. */
  mallopt(M_MMAP_THRESHOLD, 128 * 1024);
  /* Only the main thread takes SIGALRM: the others are created with it
   * blocked (they inherit the mask), then main unblocks it. */
  sigset_t alrm;
  sigemptyset(&alrm);
  sigaddset(&alrm, SIGALRM);
  pthread_sigmask(SIG_BLOCK, &alrm, NULL);
  pthread_t dog, workers[kThreads];
  pthread_create(&dog, NULL, watchdog, NULL);
  for (long i = 0; i < kThreads; ++i) pthread_create(&workers[i], NULL, worker, (void*)(i + 1));
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_alarm;
  sa.sa_flags = SA_RESTART;
  sigaction(SIGALRM, &sa, NULL);
  struct itimerval every = {{0, 2000}, {0, 2000}};
  setitimer(ITIMER_REAL, &every, NULL);

  int failures = 0, plain = 0;
  unsigned x = 99;
  void* batch[kBatch];
  for (long round = 0; forked < kSignalForks || plain < kPlainForks; ++round) {
    /* glibc's allocator takes its locks: no fork may interrupt that. */
    pthread_sigmask(SIG_BLOCK, &alrm, NULL);
    for (int i = 0; i < kBatch; ++i) {
      size_t size;
      x = x * 1664525u + 1013904223u;
      batch[i] = glibc_block(x, &size);
    }
    pthread_sigmask(SIG_UNBLOCK, &alrm, NULL);
    if (round % 8 == 7 && plain < kPlainForks) {
      pthread_sigmask(SIG_BLOCK, &alrm, NULL);
      pid_t pid = fork();
      if (pid == 0) child_after_plain_fork(batch, kBatch);
      pthread_sigmask(SIG_UNBLOCK, &alrm, NULL);
      if (pid < 0 || !reap(pid, plain)) ++failures;
      ++plain;
    }
    /* Interruptible from here: the glibc blocks go to free and realloc, half
     * of them swapped for the workers' (from the workers' glibc arenas). */
    for (int i = 0; i < kBatch; ++i) {
      x = x * 1664525u + 1013904223u;
      void* p = batch[i];
      if (x % 2) {
        void* theirs = atomic_exchange(&slots[(x >> 16) % kSlots], p);
        p = theirs;
      }
      if (p) release(p, x >> 3);
      atomic_fetch_add(&progress, 1);
      atomic_fetch_add(&main_progress, 1);
    }
  }
  struct itimerval off = {{0, 0}, {0, 0}};
  setitimer(ITIMER_REAL, &off, NULL);
  for (int i = 0; i < kSignalForks; ++i)
    if (!reap(signal_children[i], i)) ++failures;
  atomic_store(&stop, 1);
  for (int i = 0; i < kThreads; ++i) pthread_join(workers[i], NULL);
  pthread_join(dog, NULL);
  for (int i = 0; i < kSlots; ++i) free(atomic_load(&slots[i]));
  printf("fork with glibc blocks: %d forks from a signal handler, %d plain forks, %d failed, %ld operations "
         "(%ld on the main thread)\n",
         kSignalForks, plain, failures, atomic_load(&progress), atomic_load(&main_progress));
  return failures ? 1 : 0;
}
