/* A block tenon did not hand out (glibc's: here from __libc_malloc, in a
 * real program one made before the preload or by a library that calls glibc
 * directly), freed through a composition: tenon passes it to glibc
 * (docs/api.md, "Foreign pointers"), and the next malloc must still work.
 * Under the stacked example (a live-bytes budget), that free subtracted
 * bytes it never charged: the budget wrapped below zero and every malloc
 * smaller than the foreign block failed with ENOMEM from then on.
 * Run under LD_PRELOAD of a composition; exit 0 when malloc still works. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

extern void* __libc_malloc(size_t);

int main(void) {
  void* foreign = __libc_malloc(100000);
  if (!foreign) return 2;
  free(foreign);
  for (size_t n = 16; n <= (size_t)1 << 20; n *= 4) {
    errno = 0;
    void* p = malloc(n);
    if (!p) {
      printf("foreign_free: malloc(%zu) failed after a foreign free (errno %d)\n", n, errno);
      return 1;
    }
    free(p);
  }
  puts("foreign_free: malloc works after a foreign free");
  return 0;
}
