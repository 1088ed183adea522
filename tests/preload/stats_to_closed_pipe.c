// tenon's messages on stderr never change how the program ends: with
// TENON_STATS=1 and stderr a pipe whose reader is gone (`prog 2>&1 | head`
// after head exits), the report at exit must not kill the program with
// SIGPIPE; the program's own exit status stands. The same for an option's
// warning at load (an unknown TENON_ name). Found 2026-11-29 (branch audit2):
// the program died of SIGPIPE (status 141 in a shell) instead of exiting 3.
//   usage: preload_stats_to_closed_pipe            (the test)
//          preload_stats_to_closed_pipe child      (what it runs)
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static int run_child(const char* self, const char* name, const char* value) {
  int fds[2];
  if (pipe(fds) != 0) return perror("pipe"), -1;
  close(fds[0]);  // the reader is gone before anything is written
  pid_t pid = fork();
  if (pid < 0) return perror("fork"), -1;
  if (pid == 0) {
    dup2(fds[1], 2);
    close(fds[1]);
    setenv(name, value, 1);
    execl(self, self, "child", (char*)NULL);
    _exit(127);
  }
  close(fds[1]);
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) return perror("waitpid"), -1;
  return status;
}

static int check(const char* self, const char* name, const char* value) {
  int status = run_child(self, name, value);
  if (status < 0) return 1;
  if (WIFEXITED(status) && WEXITSTATUS(status) == 3) {
    printf("%s=%s, stderr a closed pipe: exit 3, as the program said\n", name, value);
    return 0;
  }
  if (WIFSIGNALED(status))
    printf("FAIL %s=%s: killed by signal %d (%s)\n", name, value, WTERMSIG(status), strsignal(WTERMSIG(status)));
  else
    printf("FAIL %s=%s: exit %d, expected 3\n", name, value, WEXITSTATUS(status));
  return 1;
}

int main(int argc, char** argv) {
  if (argc > 1 && strcmp(argv[1], "child") == 0) {
    void* volatile p = malloc(100);
    free(p);
    return 3;
  }
  // Whatever the test runner set, the child gets the default SIGPIPE.
  signal(SIGPIPE, SIG_DFL);
  int failed = check(argv[0], "TENON_STATS", "1");
  failed += check(argv[0], "TENON_NO_SUCH_OPTION", "1");
  return failed ? 1 : 0;
}
