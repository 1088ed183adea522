/* TENON_* variables in a program run in the kernel's secure-execution mode
 * (AT_SECURE: setuid or setgid, file capabilities): ignored, as glibc
 * ignores MALLOC_* and GLIBC_TUNABLES' malloc settings there (docs/options.md).
 * Until 2026-11-30 (branch audit3) tenon honoured them: TENON_STATS=1 and
 * TENON_VERBOSE=1 printed to the invoker's stderr, TENON_POPULATE and
 * TENON_HUGE_PAGES changed what the privileged program did, and
 * libtenon-trace.so linked into such a program would have written
 * TENON_TRACE's file with its privileges.
 *
 * Linked with the library under test (not preloaded: ld.so refuses an
 * LD_PRELOAD path in that mode). As root, the test copies itself into a
 * temporary directory twice, one copy setuid root, and runs both as nobody
 * with TENON_STATS=1, TENON_VERBOSE=1, a bad value and an unknown name: the
 * plain copy (the control) must print tenon's lines, the setuid copy none.
 * Skipped (77) unless run as root, where nobody cannot run the copies (the
 * build tree unreadable to it) or where the setuid bit gives no AT_SECURE
 * (a nosuid mount). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../api/preload_check.h"

enum { kSkip = 77, kNobody = 65534 };

static int copy_file(const char* from, const char* to, mode_t mode) {
  int in = open(from, O_RDONLY);
  int out = open(to, O_WRONLY | O_CREAT | O_TRUNC, 0700);
  if (in < 0 || out < 0) return -1;
  char buf[65536];
  ssize_t n;
  while ((n = read(in, buf, sizeof buf)) > 0)
    if (write(out, buf, (size_t)n) != n) return -1;
  close(in);
  close(out);
  return chmod(to, mode); /* after the writes: a write clears the setuid bit */
}

/* Runs path as nobody with tenon's variables set; its stderr into err, the
 * exit status back (-1 if it could not run). */
static int run_as_nobody(const char* path, char* err, size_t err_size, int* secure) {
  int pipe_err[2], pipe_out[2];
  if (pipe(pipe_err) || pipe(pipe_out)) return -1;
  pid_t pid = fork();
  if (pid == 0) {
    dup2(pipe_err[1], 2);
    dup2(pipe_out[1], 1);
    close(pipe_err[0]);
    close(pipe_out[0]);
    if (setgroups(0, NULL) || setresgid(kNobody, kNobody, kNobody) || setresuid(kNobody, kNobody, kNobody)) _exit(126);
    char* argv[] = {(char*)path, "child", NULL};
    char* envp[] = {"TENON_STATS=1", "TENON_VERBOSE=1", "TENON_PURGE_DELAY_MS=abc", "TENON_NO_SUCH_OPTION=1",
                    "TENON_POPULATE=1", NULL};
    execve(path, argv, envp);
    _exit(127);
  }
  close(pipe_err[1]);
  close(pipe_out[1]);
  size_t used = 0;
  ssize_t n;
  while (used + 1 < err_size && (n = read(pipe_err[0], err + used, err_size - 1 - used)) > 0) used += (size_t)n;
  err[used] = 0;
  char out[64] = {0};
  n = read(pipe_out[0], out, sizeof out - 1);
  *secure = n > 0 && strstr(out, "AT_SECURE=1") != NULL;
  close(pipe_err[0]);
  close(pipe_out[0]);
  int status;
  if (waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* The program run as nobody: a few calls that read the options. */
static int child(void) {
  printf("AT_SECURE=%lu\n", getauxval(AT_SECURE));
  fflush(stdout);
  for (int i = 0; i < 100; ++i) {
    char* p = malloc((size_t)i * 1000 + 1);
    memset(p, 1, (size_t)i * 1000 + 1);
    free(p);
  }
  free(malloc(8u << 20));
  return 0;
}

int main(int argc, char** argv) {
  if (argc > 1 && !strcmp(argv[1], "child")) return child();
  if (geteuid() != 0) {
    printf("skipped: needs root (a setuid-root copy of this program run as nobody)\n");
    return kSkip;
  }
  char dir[] = "/tmp/tenon_secure_exec_XXXXXX";
  if (!mkdtemp(dir) || chmod(dir, 0755)) {
    perror("mkdtemp");
    return 1;
  }
  char plain[64], setuid_copy[64];
  snprintf(plain, sizeof plain, "%s/plain", dir);
  snprintf(setuid_copy, sizeof setuid_copy, "%s/setuid", dir);
  int result = 0;
  if (copy_file("/proc/self/exe", plain, 0755) || copy_file("/proc/self/exe", setuid_copy, 04755)) {
    perror("copy");
    result = 1;
  } else {
    static char err[65536];
    int secure = 0;
    int rc = run_as_nobody(plain, err, sizeof err, &secure);
    if (rc != 0) {
      printf("skipped: nobody cannot run a copy of this program (exit %d: %.200s)\n", rc, err);
      result = kSkip;
    } else {
      CHECK(strstr(err, "tenon: settings of") && strstr(err, "tenon statistics"),
            "the control (no setuid bit) printed no settings or statistics: '%.300s'", err);
      rc = run_as_nobody(setuid_copy, err, sizeof err, &secure);
      if (rc == 0 && !secure) {
        printf("skipped: the setuid copy ran without AT_SECURE (a nosuid mount?)\n");
        result = kSkip;
      } else {
        CHECK(rc == 0, "the setuid copy exited with %d, stderr '%.300s'", rc, err);
        CHECK(strstr(err, "tenon") == NULL,
              "in secure-execution mode tenon read TENON_* variables: stderr '%.500s'", err);
        result = preload_failures ? 1 : 0;
        if (!result) printf("TENON_* honoured by the plain copy, ignored by the setuid one\n");
      }
    }
  }
  unlink(plain);
  unlink(setuid_copy);
  rmdir(dir);
  return result;
}
