/* glibc's reporting calls under LD_PRELOAD=libtenon.so: mallinfo2,
 * mallinfo, malloc_stats and malloc_info answer with tenon's figures (not
 * glibc's empty arena) and agree with tenon_stats_get read just before.
 * Nothing allocates between the two reads: the figures are equal. */
#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tenon/tenon.h"

static int g_failures;
#define CHECK(cond, ...)                      \
  do {                                        \
    if (!(cond)) {                            \
      fprintf(stderr, "FAILED: " __VA_ARGS__); \
      fprintf(stderr, "\n");                  \
      ++g_failures;                           \
    }                                         \
  } while (0)

static int (*g_stats_get)(tenon_stats*);

static tenon_stats read_stats(void) {
  tenon_stats s;
  memset(&s, 0, sizeof s);
  s.version = TENON_STATS_VERSION;
  if (g_stats_get(&s) != 0) CHECK(0, "tenon_stats_get");
  return s;
}

/* The value after `key` in text, or -1. */
static long long value_after(const char* text, const char* key) {
  const char* p = strstr(text, key);
  return p ? atoll(p + strlen(key)) : -1;
}

/* Everything `fd` received while f ran, into buf (a temporary file in its
 * place, opened before: reading it back allocates nothing in between). */
static void capture(int fd, FILE* tmp, void (*f)(void*), void* arg, char* buf, size_t size) {
  fflush(NULL);
  int saved = dup(fd);
  dup2(fileno(tmp), fd);
  f(arg);
  dup2(saved, fd);
  close(saved);
  lseek(fileno(tmp), 0, SEEK_SET);
  ssize_t n = read(fileno(tmp), buf, size - 1);
  buf[n > 0 ? n : 0] = 0;
}

static tenon_stats g_before_call;
static void call_malloc_stats(void* unused) {
  (void)unused;
  g_before_call = read_stats();
  malloc_stats();
}
static void call_malloc_info(void* fp) {
  g_before_call = read_stats();
  if (malloc_info(0, (FILE*)fp) != 0) CHECK(0, "malloc_info(0, fp) failed");
}

int main(void) {
  g_stats_get = (int (*)(tenon_stats*))dlsym(RTLD_DEFAULT, "tenon_stats_get");
  if (!g_stats_get) {
    fprintf(stderr, "FAILED: tenon_stats_get not found: run under LD_PRELOAD=libtenon.so\n");
    return 1;
  }
  /* 1000 x 100 B, 10 x 100 kB (large), 3 x 8 MiB (huge): about 25 MiB live. */
  enum { kSmall = 1000, kLarge = 10, kHuge = 3 };
  void* blocks[kSmall + kLarge + kHuge];
  size_t live = 0, k = 0;
  for (int i = 0; i < kSmall; ++i, live += 100) blocks[k++] = malloc(100);
  for (int i = 0; i < kLarge; ++i, live += 100000) blocks[k++] = malloc(100000);
  for (int i = 0; i < kHuge; ++i, live += 8u << 20) blocks[k++] = malloc(8u << 20);
  for (size_t i = 0; i < k; ++i) CHECK(blocks[i] != NULL, "malloc");

  tenon_stats s = read_stats();
  struct mallinfo2 mi = mallinfo2();
  CHECK(mi.uordblks + mi.hblkhd >= live, "mallinfo2: %zu + %zu bytes in use, %zu live", mi.uordblks, mi.hblkhd,
        live);
  CHECK(mi.uordblks == s.small_in_use + s.large_in_use, "mallinfo2.uordblks %zu, tenon_stats_get %zu", mi.uordblks,
        s.small_in_use + s.large_in_use);
  CHECK(mi.hblkhd == s.huge_in_use && mi.hblks == s.huge_blocks && mi.hblks == kHuge,
        "mallinfo2.hblkhd %zu / hblks %zu, tenon_stats_get %zu / %zu", mi.hblkhd, mi.hblks, s.huge_in_use,
        s.huge_blocks);
  CHECK(mi.arena == s.chunks * (4u << 20) && mi.fordblks == mi.arena - mi.uordblks, "mallinfo2.arena %zu", mi.arena);
#if defined(__GLIBC__) && (__GLIBC__ > 2 || __GLIBC_MINOR__ >= 33)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
#endif
  s = read_stats();
  struct mallinfo old = mallinfo();
#if defined(__GLIBC__) && (__GLIBC__ > 2 || __GLIBC_MINOR__ >= 33)
#pragma GCC diagnostic pop
#endif
  CHECK((size_t)old.uordblks == s.small_in_use + s.large_in_use, "mallinfo.uordblks %d", old.uordblks);

  static char text[1 << 16];
  FILE* tmp = tmpfile();
  CHECK(tmp != NULL, "tmpfile");
  if (!tmp) return 1;
  capture(2, tmp, call_malloc_stats, NULL, text, sizeof text);
  const char* total = strstr(text, "Total (incl. mmap):");
  CHECK(total != NULL, "malloc_stats printed no total:\n%s", text);
  if (total) {
    CHECK(value_after(total, "in use bytes     =") == (long long)g_before_call.in_use,
          "malloc_stats in use %lld, tenon_stats_get %zu", value_after(total, "in use bytes     ="),
          g_before_call.in_use);
    CHECK(value_after(total, "system bytes     =") == (long long)g_before_call.mapped, "malloc_stats system bytes");
  }

  /* malloc_info into an unbuffered FILE: stdio needs no buffer for it. */
  FILE* xml = tmpfile();
  CHECK(xml != NULL && setvbuf(xml, NULL, _IONBF, 0) == 0, "tmpfile for malloc_info");
  if (!xml) return 1;
  call_malloc_info(xml);
  rewind(xml);
  size_t n = fread(text, 1, sizeof text - 1, xml);
  text[n] = 0;
  CHECK(strncmp(text, "<malloc version=\"1\"", 19) == 0 && strstr(text, "</malloc>\n"), "malloc_info XML:\n%s", text);
  CHECK(value_after(text, "<tenon in_use=\"") == (long long)g_before_call.in_use, "malloc_info in_use %lld, %zu",
        value_after(text, "<tenon in_use=\""), g_before_call.in_use);
  CHECK(value_after(text, "<total type=\"mmap\" count=\"") == kHuge, "malloc_info mmap count");
  errno = 0;
  CHECK(malloc_info(1, xml) == -1 && errno == EINVAL, "malloc_info(1, fp): -1, EINVAL");
  /* A write that fails, into a buffered FILE: the device refuses it when the
   * buffer goes out, and malloc_info answers -1 as docs/api.md says ("-1 if
   * a write failed"; found 2026-11-29, branch audit2: it answered 0 and the
   * text was lost at the program's fclose). */
  FILE* full = fopen("/dev/full", "w");
  if (full) {
    CHECK(malloc_info(0, full) == -1, "malloc_info(0, /dev/full): not -1");
    fclose(full);
  }

  for (size_t i = 0; i < k; ++i) free(blocks[i]);
  mi = mallinfo2();
  CHECK(mi.hblks == 0 && mi.hblkhd == 0 && mi.uordblks < live / 100, "after free: %zu + %zu bytes in use",
        mi.uordblks, mi.hblkhd);
  fclose(xml);
  fclose(tmp);
  if (g_failures) return 1;
  printf("preload_glibc_stats: mallinfo2, mallinfo, malloc_stats and malloc_info agree with tenon_stats_get\n");
  return 0;
}
