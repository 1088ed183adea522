/* Minimal check macros for the LD_PRELOAD programs: they report every failed
 * check (file:line and what) instead of stopping at the first, and exit 1 when
 * any failed. Plain C so the C program can use it too. */
#ifndef TENON_PRELOAD_CHECK_H
#define TENON_PRELOAD_CHECK_H
#include <stdio.h>

static int preload_failures = 0;

#define CHECK(cond, ...)                                                    \
  do {                                                                      \
    if (!(cond)) {                                                          \
      ++preload_failures;                                                   \
      fprintf(stderr, "%s:%d: FAILED: %s: ", __FILE__, __LINE__, #cond);    \
      fprintf(stderr, __VA_ARGS__);                                         \
      fputc('\n', stderr);                                                  \
    }                                                                       \
  } while (0)

/* A compiler must not drop an allocation whose result is only tested. */
#define ESCAPE(p) __asm__ volatile("" : : "r"(p) : "memory")

#endif
