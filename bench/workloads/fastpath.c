/* fastpath: N iterations of free(malloc(32)). Run under callgrind for N and
 * 2N; the difference in instructions divided by N is the cost of one
 * malloc(32)+free pair on the allocator's fast path, start-up cancelled.
 * Plain C so that nothing but the two calls sits in the loop.
 * "mixed": the sizes 16, 32, ..., 352 in turn instead of 32 (a size class
 * table's every entry in that range, as a program's small objects are); the
 * loop then costs 4 instructions more (the size's step, wrap and register move).
 * usage: fastpath N [mixed] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char** argv) {
  long n = argc > 1 ? strtol(argv[1], NULL, 10) : 1000000;
  int mixed = argc > 2 && strcmp(argv[2], "mixed") == 0;
  void* volatile sink;
  if (!mixed) {
    for (long i = 0; i < n; i++) {
      void* p = malloc(32);
      sink = p; /* the volatile store keeps the pair from being optimised away */
      free(sink);
    }
  } else {
    size_t size = 16;
    for (long i = 0; i < n; i++) {
      void* p = malloc(size);
      sink = p;
      free(sink);
      size = size == 352 ? 16 : size + 16;
    }
  }
  printf("OK fastpath n=%ld%s\n", n, mixed ? " mixed" : "");
  return 0;
}
