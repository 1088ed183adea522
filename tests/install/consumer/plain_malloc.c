/* Allocates through plain malloc/free; a preloaded composition counts it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(void) {
  for (int i = 0; i < 100; ++i) {
    char* p = malloc(16 + (size_t)i * 100);
    if (!p) return 1;
    memset(p, i, 16);
    free(p);
  }
  puts("plain_malloc: done");
  return 0;
}
