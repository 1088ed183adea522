/* fork() while another thread is stopped at an arbitrary instruction inside
 * the allocator, under LD_PRELOAD (README: "a thread frozen at any
 * instruction in malloc or free never stops the others, and fork() from a
 * busy multithreaded process is safe"). Two threads allocate and free blocks
 * of every size range; each round parks one of them in a SIGUSR1 handler,
 * wherever the signal found it (inside malloc or free most of the time),
 * forks, and lets it go once the child is done. The child allocates and frees
 * every size range, the class the parked thread was using included, and must
 * exit within 10 s (a child that waits for the parked thread's progress hangs
 * and is killed by its alarm: counted, and the test fails). The parent
 * allocates meanwhile too. Under glibc's allocator fork() itself waits for
 * the arena lock the parked thread holds: this program does not finish.
 * usage: fork_while_frozen [ROUNDS]   (default 100) */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static atomic_int parked, let_go, stop;

/* Only atomics here: the thread it runs on may be anywhere in malloc. */
static void park(int sig) {
  (void)sig;
  atomic_store(&parked, 1);
  while (!atomic_load(&let_go)) {
  }
  atomic_store(&parked, 0);
}

/* Blocks of 16 B to 30 KB, one in 128 of up to 4 MB (large and huge). */
static void* churn(void* arg) {
  unsigned i = (unsigned)(long)arg;
  void* keep[64] = {0};
  while (!atomic_load(&stop)) {
    unsigned k = i % 64;
    free(keep[k]);
    keep[k] = malloc(16 + (i * 7919u) % ((i & 127) ? 30000 : 4000000));
    ++i;
  }
  for (int k = 0; k < 64; ++k) free(keep[k]);
  return NULL;
}

static int child(void) {
  alarm(10);
  static const size_t sizes[] = {16, 48, 1000, 20000, 30016, 300000, 4000000};
  for (int k = 0; k < 200; ++k) {
    for (size_t j = 0; j < sizeof sizes / sizeof sizes[0]; ++j) {
      char* p = malloc(sizes[j] + (size_t)k);
      if (!p) return 3;
      memset(p, 1, 16);
      free(p);
    }
  }
  return 0;
}

int main(int argc, char** argv) {
  int rounds = argc > 1 ? atoi(argv[1]) : 100;
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = park;
  sigaction(SIGUSR1, &sa, NULL);
  pthread_t threads[2];
  for (int i = 0; i < 2; ++i) pthread_create(&threads[i], NULL, churn, (void*)(long)(i * 12345));
  int failed = 0, hung = 0;
  for (int r = 0; r < rounds; ++r) {
    usleep(200 + (unsigned)(r % 500));
    atomic_store(&let_go, 0);
    pthread_kill(threads[r & 1], SIGUSR1);
    while (!atomic_load(&parked)) {
    }
    pid_t pid = fork();
    if (pid < 0) {
      perror("fork");
      return 1;
    }
    if (pid == 0) _exit(child());
    free(malloc(1000 + (size_t)r));
    int status = 0;
    waitpid(pid, &status, 0);
    if (WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM) {
      ++hung;
      fprintf(stderr, "FAILED: round %d: the child hung (killed by its alarm after 10 s)\n", r);
    } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      ++failed;
      fprintf(stderr, "FAILED: round %d: the child ended with status 0x%x\n", r, status);
    }
    atomic_store(&let_go, 1);
    while (atomic_load(&parked)) {
    }
  }
  atomic_store(&stop, 1);
  for (int i = 0; i < 2; ++i) pthread_join(threads[i], NULL);
  printf("fork while a thread is frozen in the allocator: %d rounds, %d children failed, %d hung\n", rounds, failed, hung);
  return failed || hung ? 1 : 0;
}
