/* fastpath: N iterations of free(malloc(32)). Run under callgrind for N and
 * 2N; the difference in instructions divided by N is the cost of one
 * malloc(32)+free pair on the allocator's fast path, start-up cancelled.
 * Plain C so that nothing but the two calls sits in the loop.
 * usage: fastpath N */
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char** argv) {
  long n = argc > 1 ? strtol(argv[1], NULL, 10) : 1000000;
  void* volatile sink;
  for (long i = 0; i < n; i++) {
    void* p = malloc(32);
    sink = p; /* the volatile store keeps the pair from being optimised away */
    free(sink);
  }
  printf("OK fastpath n=%ld\n", n);
  return 0;
}
