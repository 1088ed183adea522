/* tenon under a limit on private writable memory (RLIMIT_DATA, `ulimit -d`).
 * Linux counts a private mapping's writable pages against RLIMIT_DATA, and
 * mprotect() that makes closed pages writable again is refused with ENOMEM
 * when that would pass the limit. libtenon-secure.so closes pages
 * (PROT_NONE) and opens them again: the guard pages around a large block,
 * a large block waiting in quarantine, a cached huge block. A closed page
 * gives its share of the limit to whatever is allocated next; opening it
 * again may then be refused. Whatever happens, every block malloc hands out
 * must be usable whole (docs/api.md: malloc_usable_size bytes may be
 * written), and the failure is NULL with ENOMEM.
 * Found outside the tests (2026-11-27): under libtenon-secure.so each case
 * below died by SIGSEGV at the first write to a block handed out with a
 * page still closed.
 *
 * Each case runs in a child under a limit 64 MiB above the data it already
 * has: blocks of size A until malloc fails (every usable byte written),
 * all freed, then blocks of size B the same way, three rounds. Memory freed
 * must serve again: each round gets at least 3/4 of the first round's
 * blocks of each size. Found outside the tests too (2026-11-27, fourth
 * session): under libtenon-secure.so the case 40000 then 300000 got 1173,
 * 502 and 72 blocks of 40000 bytes in its three rounds (86, 13, 13 of
 * 300000; libtenon.so 1066 and 203 every round): the guard pages a live
 * block closes had lent their share of the limit to chunks mapped
 * meanwhile, so a freed block's guards would not open again and its run was
 * kept out of use for good.
 * usage: data_limit            (the test: runs every case)
 *        data_limit A B        (one child) */
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../api/preload_check.h"

enum { kMaxBlocks = 200000 };
static void* blocks[kMaxBlocks];

/* VmData of this process in bytes (0 if unreadable). */
static size_t data_now(void) {
  FILE* f = fopen("/proc/self/status", "r");
  if (!f) return 0;
  char line[256];
  size_t kib = 0;
  while (fgets(line, sizeof line, f))
    if (sscanf(line, "VmData: %zu kB", &kib) == 1) break;
  fclose(f);
  return kib << 10;
}

/* Blocks of n bytes until malloc fails, each written whole; the count. */
static int fill(size_t n) {
  int k = 0;
  errno = 0;
  while (k < kMaxBlocks && (blocks[k] = malloc(n)) != NULL) {
    memset(blocks[k], 0x5a, malloc_usable_size(blocks[k]));
    ++k;
  }
  CHECK(k == kMaxBlocks || errno == ENOMEM, "malloc(%zu) failed with errno %d", n, errno);
  return k;
}

static int one_case(size_t a, size_t b) {
  struct rlimit r;
  if (getrlimit(RLIMIT_DATA, &r) != 0) return 2;
  r.rlim_cur = data_now() + (64u << 20);
  if (setrlimit(RLIMIT_DATA, &r) != 0) {
    perror("setrlimit");
    return 2;
  }
  int first_a = 0, first_b = 0;
  for (int round = 0; round < 3; ++round) {
    int k = fill(a);
    CHECK(k > 0, "no block of %zu bytes in round %d", a, round);
    if (round == 0) first_a = k;
    CHECK(k >= first_a * 3 / 4, "%d blocks of %zu bytes in round %d, %d in the first", k, a, round, first_a);
    for (int i = 0; i < k; ++i) free(blocks[i]);
    k = fill(b);
    CHECK(k > 0, "no block of %zu bytes in round %d", b, round);
    if (round == 0) first_b = k;
    CHECK(k >= first_b * 3 / 4, "%d blocks of %zu bytes in round %d, %d in the first", k, b, round, first_b);
    for (int i = 0; i < k; ++i) free(blocks[i]);
  }
  return preload_failures ? 1 : 0;
}

int main(int argc, char** argv) {
  if (argc == 3) return one_case(strtoul(argv[1], NULL, 0), strtoul(argv[2], NULL, 0));
  /* Large then large (the quarantine's and the guards' pages), large then
   * bigger large, huge then small then huge (a cached huge block's pages),
   * small then huge, huge then smaller huge. */
  static const char* cases[][2] = {{"262144", "262144"}, {"262144", "1000000"}, {"5000000", "48"},
                                   {"48", "5000000"},    {"3000000", "2200000"}, {"40000", "300000"}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
      execl("/proc/self/exe", argv[0], cases[i][0], cases[i][1], (char*)NULL);
      _exit(3);
    }
    int status = 0;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid, "fork or wait failed");
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "case %s then %s: %s %d", cases[i][0], cases[i][1],
          WIFSIGNALED(status) ? "killed by signal" : "exit status",
          WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
  }
  if (preload_failures) return 1;
  puts("data_limit: every case passed");
  return 0;
}
