/* Shared by the misuse programs (misuse.c, misuse_cxx.cpp): each run commits
 * ONE heap misuse, chosen by name, then does what a program would do next
 * (free, allocate again) so that an allocator that checks late gets its
 * chance, and looks for silent corruption. Independent of any allocator:
 * only the standard names, so LD_PRELOAD chooses what is measured.
 *
 * Protocol (stdout, written with write(2) so an abort loses nothing; the
 * program itself never writes to stderr, so anything there is the allocator's):
 *   MISUSE <case>            start
 *   CALL <what> <ptr>        about to make the bad call (free, realloc, ...)
 *   ACCESS <what> <ptr>      about to make the bad memory access
 *   DONE                     the bad call or access returned
 *   CORRUPT <what>           the follow-up saw silent corruption (e.g. two
 *                            mallocs returned the same address)
 *   DEFENDED <how>           the allocator answered the misuse harmlessly
 *                            (usable size 0, freed block not handed out at once)
 *   NOTE <what>              what happened instead, for the report
 *   SKIP <why>               not applicable here; exit status 77
 *   END                      reached the end; exit status 0
 * bench/tenonbench/security.py classifies a run from its signal, its stderr
 * and the last stage reached; docs/security.md explains the classes. */
#ifndef TENON_BENCH_MISUSE_H
#define TENON_BENCH_MISUSE_H

#include <fcntl.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MISUSE_KIB ((size_t)1024)
#define MISUSE_MIB ((size_t)1024 * 1024)

/* One formatted line on stdout. vsnprintf into a stack buffer: no stdio
 * buffer that an abort would lose, and no allocation of our own. */
static inline void misuse_say(const char* fmt, ...) {
  char line[256];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(line, sizeof line - 1, fmt, ap);
  va_end(ap);
  if (n < 0) return;
  if ((size_t)n > sizeof line - 2) n = (int)sizeof line - 2;
  line[n] = '\n';
  ssize_t off = 0;
  while (off <= n) {
    ssize_t w = write(1, line + off, (size_t)(n + 1 - off));
    if (w <= 0) return;
    off += w;
  }
}

/* Hides where a pointer came from, so the compiler can neither fold a
 * malloc/free pair away nor reason about (and drop) the misuse. */
static inline void* misuse_opaque(void* p) {
  __asm__ volatile("" : "+r"(p));
  return p;
}

static inline void misuse_call(const char* what, const void* p) { misuse_say("CALL %s %p", what, p); }
static inline void misuse_access(const char* what, const void* p) { misuse_say("ACCESS %s %p", what, p); }
static inline void misuse_done(void) { misuse_say("DONE"); }

static inline void misuse_skip(const char* why) {
  misuse_say("SKIP %s", why);
  _exit(77);
}

/* A setup allocation that failed is no finding: exit 2 (an error row).
 * Every allocation goes through here, and comes out opaque: malloc's
 * attribute lets the compiler assume its result equals no other pointer, and
 * it would fold the comparisons of the checks below to false. */
static inline void* misuse_need(void* p, const char* what) {
  if (!p) {
    misuse_say("NOTE setup failed: %s returned NULL", what);
    _exit(2);
  }
  return misuse_opaque(p);
}

static inline char* misuse_alloc(size_t n) {
  char* p = (char*)misuse_need(malloc(n), "malloc");
  memset(p, 0x5a, n);
  return p;
}

/* After a double free: k blocks of size n, pairwise distinct? Two equal ones
 * mean the freed block went on a free list twice and two owners now share it.
 * The blocks are not freed: freeing a shared block twice would be a second
 * misuse, and its outcome is not this case's. */
static inline void misuse_check_duplicates(size_t n, int k) {
  void* got[16];
  if (k > 16) k = 16;
  for (int i = 0; i < k; i++) {
    got[i] = misuse_need(malloc(n), "malloc");
    for (int j = 0; j < i; j++)
      if (got[j] == got[i]) {
        misuse_say("CORRUPT malloc(%zu) returned %p twice: two owners share one block", n, got[i]);
        return;
      }
  }
}

/* After a free of something that was not a block start (interior, unaligned,
 * stack, ...): does the allocator now hand out memory that overlaps [live,
 * live + live_n), memory that is still someone else's? */
static inline void misuse_check_overlap(const void* live, size_t live_n, size_t n, int k) {
  uintptr_t lo = (uintptr_t)live, hi = lo + live_n;
  for (int i = 0; i < k; i++) {
    char* q = (char*)misuse_need(malloc(n), "malloc");
    uintptr_t a = (uintptr_t)q, b = a + n;
    if (a < hi && lo < b) {
      misuse_say("CORRUPT malloc(%zu) returned %p, overlapping memory still in use at %p (%zu bytes)",
                 n, (void*)q, live, live_n);
      return;
    }
  }
}

/* Does one of k mallocs of size n return exactly x (an address that was never
 * a block of this allocator, or a forged free-list link)? */
static inline void misuse_check_handed_out(const void* x, size_t n, int k) {
  for (int i = 0; i < k; i++) {
    void* q = misuse_need(malloc(n), "malloc");
    if (q == x) {
      misuse_say("CORRUPT malloc(%zu) returned %p, an address the program chose", n, q);
      return;
    }
  }
}

/* The name of the mapping (from /proc/self/maps) that contains address a,
 * copied into name; 0 when none does. Raw read(2) into a stack buffer: stdio
 * would allocate, and the allocator's state is what is being observed. */
static inline int misuse_mapping_of(uintptr_t a, char* name, size_t cap) {
  int fd = open("/proc/self/maps", O_RDONLY);
  if (fd < 0) return 0;
  char buf[8192];
  size_t have = 0;
  int found = 0;
  for (;;) {
    ssize_t r = read(fd, buf + have, sizeof buf - 1 - have);
    if (r <= 0) break;
    have += (size_t)r;
    buf[have] = 0;
    char* line = buf;
    char* nl;
    while ((nl = strchr(line, '\n')) != NULL) {
      *nl = 0;
      unsigned long lo = 0, hi = 0;
      if (sscanf(line, "%lx-%lx", &lo, &hi) == 2 && a >= lo && a < hi) {
        const char* path = strchr(line, '/');
        if (!path) path = strchr(line, '[');
        snprintf(name, cap, "%s", path ? path : "anonymous mapping");
        found = 1;
        break;
      }
      line = nl + 1;
    }
    if (found) break;
    have = strlen(line);
    memmove(buf, line, have);
  }
  close(fd);
  return found;
}

typedef struct {
  const char* name;
  const char* group;
  const char* about;
  void (*run)(size_t);
  size_t arg;
} misuse_case;

/* misuse --list: one "name<TAB>group<TAB>about" line per case.
 * misuse CASE: runs it. */
static inline int misuse_main(const misuse_case* cases, size_t ncases, int argc, char** argv) {
  /* A crash is an expected outcome here: no core files. */
  struct rlimit none = {0, 0};
  setrlimit(RLIMIT_CORE, &none);
  if (argc == 2 && strcmp(argv[1], "--list") == 0) {
    for (size_t i = 0; i < ncases; i++)
      misuse_say("%s\t%s\t%s", cases[i].name, cases[i].group, cases[i].about);
    return 0;
  }
  if (argc != 2) {
    misuse_say("usage: %s --list | CASE", argv[0]);
    return 2;
  }
  for (size_t i = 0; i < ncases; i++) {
    if (strcmp(argv[1], cases[i].name) != 0) continue;
    misuse_say("MISUSE %s", cases[i].name);
    cases[i].run(cases[i].arg);
    misuse_say("END");
    return 0;
  }
  misuse_say("unknown case %s (--list lists them)", argv[1]);
  return 2;
}

#ifdef __cplusplus
}
#endif
#endif
