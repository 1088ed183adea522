/* TENON_POPULATE=1 and a block bigger than the machine's memory. Blocks are
 * mapped MAP_NORESERVE, so malloc(1 TiB) gets its address space (README,
 * "Differences from glibc's malloc"); until 2026-11-29 tenon then asked
 * madvise(MADV_POPULATE_WRITE) to fault all of it in, and the kernel's page
 * allocator called the OOM killer on the way (MADV_POPULATE_WRITE answers
 * ENOMEM only after the OOM killer had its turn): the process died of
 * SIGKILL inside malloc, and other processes could be killed first.
 *
 * Letting that happen would be the test taking the machine down, so this
 * program defines madvise itself, exported (-rdynamic): the preloaded
 * allocator's calls come here. A populate request for more than half of the
 * memory free now is counted and refused (ENOMEM) without reaching the
 * kernel; every other call goes through. The checks: an 8 MiB block is
 * pre-faulted through this madvise (else the guard would not hold, and the
 * 1 TiB request is not made), no request over half the free memory is
 * made, malloc(1 TiB) answers (a block, or NULL + ENOMEM), and the next
 * calls work.
 *
 * `populate_beyond_ram cgroup` does the same with a 1 GiB request in a
 * child in a memory cgroup of its own with a 512 MiB limit (a container's):
 * the machine has far more free, so the request reaches the kernel unless
 * the allocator's bound reads the cgroup, and then the cgroup's OOM killer
 * ends the child (SIGKILL; until 2026-11-29), which only the child's 512 MiB
 * can feed. It needs a writable cgroup v1 memory hierarchy or cgroup v2 with
 * the memory controller (root in a container that has them); exit 77
 * (skipped) otherwise. The cgroup is removed at the end. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysinfo.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <unistd.h>

#include "../api/preload_check.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

static volatile size_t g_largest_populate;   /* bytes, any request */
static volatile size_t g_too_big;            /* requests refused here */
static volatile size_t g_too_big_bytes;

static size_t free_bytes(void) {
  struct sysinfo si;
  if (sysinfo(&si) != 0) return 0;
  return (size_t)(si.freeram + si.bufferram) * si.mem_unit;
}

int madvise(void* addr, size_t len, int advice) {
  static int (*real)(void*, size_t, int);
  if (!real) real = (int (*)(void*, size_t, int))dlsym(RTLD_NEXT, "madvise");
  if (advice == MADV_POPULATE_WRITE) {
    if (len > g_largest_populate) g_largest_populate = len;
    if (len > free_bytes() / 2) {
      ++g_too_big;
      g_too_big_bytes = len;
      errno = ENOMEM;
      return -1;
    }
  }
  return real(addr, len, advice);
}

/* malloc(8 MiB) with the option on: returns the largest pre-fault request
 * seen here (at least 8 MiB while the option works). */
static size_t populate_of_8_mib(void) {
  g_largest_populate = 0;
  char* r = malloc((size_t)8 << 20);
  CHECK(r != NULL, "malloc(8 MiB) failed");
  if (r) memset(r, 1, (size_t)8 << 20);
  free(r);
  /* Empty the cache of huge blocks: a big request that finds one there is
   * made from it, not from fresh memory, and is not pre-faulted at all. */
  malloc_trim(0);
  return g_largest_populate;
}

/* The checks, with `huge` the request too big to pre-fault. */
static int check(size_t huge) {
  /* First the guard itself: the allocator's pre-faults must reach this
   * madvise. If they did not (a raw syscall, say), the big request below
   * would go to the kernel unguarded: stop before it. */
  size_t seen = populate_of_8_mib();
  printf("malloc(8 MiB) pre-faulted %zu bytes\n", seen);
  if (seen < ((size_t)8 << 20)) {
    printf("FAIL: the allocator's pre-faults do not reach this program's madvise (largest %zu): "
           "the %zu MiB request is not made, it could take the machine down\n", seen, huge >> 20);
    return 1;
  }

  size_t before = free_bytes();
  errno = 0;
  void* p = malloc(huge);
  int err = errno;
  ESCAPE(p);
  printf("malloc(%zu MiB): %p (errno %d); populate requests over half the free memory (%zu MiB free): %zu, "
         "the last %zu MiB\n",
         huge >> 20, p, err, before >> 20, (size_t)g_too_big, (size_t)g_too_big_bytes >> 20);
  CHECK(g_too_big == 0, "asked the kernel to pre-fault %zu bytes with %zu free", (size_t)g_too_big_bytes, before);
  CHECK(p || err == ENOMEM, "NULL with errno %d", err);
  free(p);

  char* q = malloc(100);
  CHECK(q != NULL, "malloc(100) after the %zu MiB request failed", huge >> 20);
  free(q);
  seen = populate_of_8_mib();
  printf("malloc(8 MiB) after it pre-faulted %zu bytes\n", seen);
  CHECK(seen >= ((size_t)8 << 20), "an 8 MiB block is no longer pre-faulted (largest request %zu)", seen);
  return preload_failures ? 1 : 0;
}

static int write_text(const char* path, const char* text) {
  int fd = open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  ssize_t n = write(fd, text, strlen(text));
  close(fd);
  return n == (ssize_t)strlen(text) ? 0 : -1;
}

/* A fresh memory cgroup below this process's own with a limit of `limit`
 * bytes: its folder in dir, and the name of the file that takes a pid in
 * procs. v1's memory hierarchy first, then v2. 0, or -1 if neither can be
 * made here. */
static int make_cgroup(size_t limit, char* dir, size_t dir_size, const char** procs) {
  char text[4096];
  FILE* f = fopen("/proc/self/cgroup", "r");
  if (!f) return -1;
  size_t n = fread(text, 1, sizeof text - 1, f);
  fclose(f);
  text[n] = '\0';
  char limit_text[32];
  snprintf(limit_text, sizeof limit_text, "%zu", limit);
  for (char* line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
    char* c1 = strchr(line, ':');
    char* c2 = c1 ? strchr(c1 + 1, ':') : NULL;
    if (!c2) continue;
    *c2 = '\0';
    const char* controllers = c1 + 1;
    const char* path = c2 + 1;
    const char* mount = NULL;
    const char* limit_file = NULL;
    if (strcmp(controllers, "memory") == 0) {
      mount = "/sys/fs/cgroup/memory";
      limit_file = "memory.limit_in_bytes";
    } else if (*controllers == '\0') {
      mount = "/sys/fs/cgroup";
      limit_file = "memory.max";
    } else {
      continue;
    }
    snprintf(dir, dir_size, "%s%s/tenon-populate-%d", mount, strcmp(path, "/") == 0 ? "" : path, (int)getpid());
    if (mkdir(dir, 0755) != 0) continue;
    char file[600];
    snprintf(file, sizeof file, "%s/%s", dir, limit_file);
    if (write_text(file, limit_text) == 0) {
      *procs = "cgroup.procs";
      return 0;
    }
    rmdir(dir);
  }
  return -1;
}

/* The cgroup mode: a child joins a 512 MiB cgroup and runs the checks with
 * a 1 GiB request. */
static int in_a_cgroup(void) {
  const size_t limit = (size_t)512 << 20;
  char dir[512];
  const char* procs;
  if (make_cgroup(limit, dir, sizeof dir, &procs) != 0) {
    printf("SKIP: no memory cgroup can be made here\n");
    return 77;
  }
  printf("cgroup %s, limit %zu MiB\n", dir, limit >> 20);
  fflush(stdout);
  pid_t child = fork();
  if (child == 0) {
    char file[600];
    snprintf(file, sizeof file, "%s/%s", dir, procs);
    if (write_text(file, "0") != 0) {
      printf("FAIL: could not join %s\n", file);
      _exit(1);
    }
    int rc = check((size_t)1 << 30);
    fflush(stdout);
    _exit(rc);
  }
  int status = 0;
  waitpid(child, &status, 0);
  rmdir(dir);
  if (WIFSIGNALED(status)) {
    printf("FAIL: the child died of signal %d\n", WTERMSIG(status));
    return 1;
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

int main(int argc, char** argv) {
  const char* populate = getenv("TENON_POPULATE");
  CHECK(populate && strcmp(populate, "1") == 0, "run under TENON_POPULATE=1 (got %s)", populate ? populate : "nothing");
  if (preload_failures) return 1;
  if (argc > 1 && strcmp(argv[1], "cgroup") == 0) return in_a_cgroup();
  return check((size_t)1 << 40);
}
