/* A freed large block (32 KiB to 2 MiB) waiting in the secure build's
 * quarantine, read or written in its first page or its last (bench/security/misuse.h's
 * protocol: ACCESS before the access, DONE after it, END at a normal end).
 * usage: large_after_free read|write|read_last|write_last:N[:A]
 *   a block of N bytes (decimal) from malloc, or from posix_memalign at
 *   alignment A, written whole and freed; then a one-byte read or write 64
 *   bytes in (read, write) or at its last byte, N - 1 (read_last,
 *   write_last), while it waits; then 8 more blocks of N bytes freed, which
 *   push it out of the quarantine (where a check would report the write).
 *   Caught: a fault at the access, or a report before END. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "access_probe.h"

static char* block(size_t n, size_t align) {
  void* p = NULL;
  if (align ? posix_memalign(&p, align, n) != 0 : !(p = malloc(n))) exit(2);
  memset(p, 0x5a, n);
  return p;
}

int main(int argc, char** argv) {
  char op[16];
  size_t n = 0, align = 0;
  if (argc < 2 || sscanf(argv[1], "%15[a-z_]:%zu:%zu", op, &n, &align) < 2 || n < 64) return 2;
  int write = !strncmp(op, "write", 5);
  int last = strstr(op, "_last") != NULL;
  char* p = block(n, align);
  free(p);
  char* at = last ? p + n - 1 : p + 64;
  const char* what = last ? "the last byte of freed" : "the first page of freed";
  if (write) access_write(what, at);
  else access_read(what, at);
  fflush(stdout);
  for (int i = 0; i < 8; ++i) free(block(n, align));
  printf("END\n");
  return 0;
}
