/* Pointers tenon did not hand out, under a seccomp filter that refuses
 * mincore() (EPERM or ENOSYS: sandboxes, container profiles, gVisor-like
 * kernels). Before free, realloc or malloc_usable_size reads the 16-byte
 * glibc header before such a pointer, tenon asks the kernel whether that
 * page is mapped; until 2026-11-29 it asked mincore only and took any error
 * but ENOMEM for "mapped", so free() of a pointer with nothing mapped before
 * it read the hole and died of SIGSEGV instead of the misuse report
 * (SIGABRT), and malloc_usable_size / realloc crashed where they answer 0 /
 * NULL + EINVAL (libtenon-secure.so's realloc: the misuse report, SIGABRT,
 * as its free, since 2026-11-29, branch usw: such a pointer is most often
 * a huge block freed and purged since).
 *
 * Each case runs in a child that installs the filter (PR_SET_NO_NEW_PRIVS,
 * then a BPF program answering SECCOMP_RET_ERRNO for the refused calls) and
 * then makes one kind of call; the parent checks how the child ended.
 * Cases refuse mincore alone (EPERM, ENOSYS), mincore with msync (the
 * first fallback), and process_vm_readv with mincore (tenon's first try
 * since 2026-11-29, branch usw: a copy of the header, then the probes), so
 * each probe the allocator has is exercised. A glibc
 * block (mapped header) freed through tenon must still be accepted.
 * Exit 77 (skipped) when the kernel has no seccomp filters.
 * usage: mincore_refused [secure]    (every case, each in a child; secure:
 *                                     the preloaded library is
 *                                     libtenon-secure.so) */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <malloc.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../api/preload_check.h"

extern void* __libc_malloc(size_t);

/* Refuse each call of nrs (n of them, at most 4) with err; allow the rest. */
static int refuse_calls(const int* nrs, int n, int err) {
  struct sock_filter f[2 + 2 * 4];
  int k = 0;
  f[k++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr));
  for (int i = 0; i < n; ++i) {
    f[k++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned)nrs[i], 0, 1);
    f[k++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ((unsigned)err & SECCOMP_RET_DATA));
  }
  f[k++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
  struct sock_fprog prog = {(unsigned short)k, f};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return -1;
  return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0);
}

/* A page with nothing mapped in the page before it. */
static unsigned char* after_hole(void) {
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  unsigned char* area = mmap(NULL, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (area == MAP_FAILED || munmap(area, page) != 0) return NULL;
  area[page] = 0x5a;
  return area + page;
}

enum what { kProbe, kUsableSize, kRealloc, kFreeForeign, kFreeGlibc };
static const char* const kWhat[] = {"filter works", "malloc_usable_size", "realloc", "free(after hole)",
                                    "free(glibc block)"};

/* The child's body: exit 0 when the call answered as documented. */
static int child(const int* nrs, int n, int err, enum what w) {
  unsigned char* hole = after_hole();
  void* glibc_block = __libc_malloc(100);
  if (!hole || !glibc_block) return 2;
  if (refuse_calls(nrs, n, err) != 0) return 3;
  unsigned char vec;
  switch (w) {
    case kProbe:
      return mincore(hole, 1, &vec) == -1 && errno == err ? 0 : 4;
    case kUsableSize:
      return malloc_usable_size(hole) == 0 ? 0 : 5;
    case kRealloc:
      errno = 0;
      return realloc(hole, 100) == NULL && errno == EINVAL && hole[0] == 0x5a ? 0 : 6;
    case kFreeForeign:
      free(hole);  /* must end the program: SIGABRT with the misuse line */
      return 7;
    case kFreeGlibc:
      free(glibc_block);
      return 0;
  }
  return 8;
}

/* How the child ended: 0 for exit(0), the signal for a signal, else 1000 + status. */
static int run(const int* nrs, int n, int err, enum what w) {
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) _exit(child(nrs, n, err, w));
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) != pid) return -1;
  if (WIFSIGNALED(status)) return WTERMSIG(status);
  return WEXITSTATUS(status) == 0 ? 0 : 1000 + WEXITSTATUS(status);
}

int main(int argc, char** argv) {
  int secure = argc == 2 && !strcmp(argv[1], "secure");
  static const int kMincore[] = {__NR_mincore};
  static const int kMincoreMsync[] = {__NR_mincore, __NR_msync};
  /* tenon copies the header through process_vm_readv first (since
   * 2026-11-29, branch usw), and probes only where that is refused. */
  static const int kCopyMincore[] = {__NR_process_vm_readv, __NR_mincore};
  struct { const int* nrs; int n; int err; const char* name; } cases[] = {
    {kMincore, 1, EPERM, "mincore EPERM"},
    {kMincore, 1, ENOSYS, "mincore ENOSYS"},
    {kMincoreMsync, 2, EPERM, "mincore+msync EPERM"},
    {kCopyMincore, 2, EPERM, "copy+mincore EPERM"},
  };
  if (run(kMincore, 1, EPERM, kProbe) != 0) {
    printf("no seccomp filter here: skipped\n");
    return 77;
  }
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; ++c) {
    for (int w = kUsableSize; w <= kFreeGlibc; ++w) {
      int got = run(cases[c].nrs, cases[c].n, cases[c].err, (enum what)w);
      int want = w == kFreeForeign || (secure && w == kRealloc) ? SIGABRT : 0;
      printf("%-20s %-20s ended %d (want %d)\n", cases[c].name, kWhat[w], got, want);
      CHECK(got == want, "%s, %s: ended %d (signal, or 1000 + exit code), want %d", cases[c].name, kWhat[w], got,
            want);
    }
  }
  return preload_failures ? 1 : 0;
}
