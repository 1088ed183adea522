/* launch: runs one workload and reports its resource use, so that run.py's
 * own memory does not leak into the numbers.
 *
 * Why not os.wait4 on the workload directly: Linux records the RSS
 * high-water mark of the address space an exec replaces (signal->maxrss),
 * and Python starts children with vfork, so every child's ru_maxrss would be
 * at least the driver's ~60 MiB. This small launcher forks a fresh child
 * (whose inherited mark is only the launcher's ~1 MiB), sets LD_PRELOAD from
 * TENON_BENCH_PRELOAD there only (the launcher itself stays on glibc), execs
 * the workload, and writes the child's wait4 rusage to OUTFILE as
 *   status=<exit code or -signal> wall_s=.. user_s=.. sys_s=.. maxrss_kib=.. minflt=.. majflt=..
 * usage: launch OUTFILE PROGRAM [ARGS...]   exit code: the child's */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double tv(struct timeval t) { return (double)t.tv_sec + (double)t.tv_usec * 1e-6; }

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: launch OUTFILE PROGRAM [ARGS...]\n");
    return 2;
  }
  const char* preload = getenv("TENON_BENCH_PRELOAD");
  double t0 = now();
  pid_t pid = fork();
  if (pid < 0) { perror("launch: fork"); return 2; }
  if (pid == 0) {
    if (preload && *preload) setenv("LD_PRELOAD", preload, 1);
    else unsetenv("LD_PRELOAD");
    unsetenv("TENON_BENCH_PRELOAD");
    execvp(argv[2], argv + 2);
    perror("launch: exec");
    _exit(127);
  }
  int status = 0;
  struct rusage ru;
  while (wait4(pid, &status, 0, &ru) < 0) {}
  double wall = now() - t0;
  int code = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
  FILE* f = fopen(argv[1], "w");
  if (f) {
    fprintf(f, "status=%d wall_s=%.6f user_s=%.6f sys_s=%.6f maxrss_kib=%ld minflt=%ld majflt=%ld\n", code, wall,
            tv(ru.ru_utime), tv(ru.ru_stime), ru.ru_maxrss, ru.ru_minflt, ru.ru_majflt);
    fclose(f);
  }
  return code >= 0 ? code : 128 - code;
}
