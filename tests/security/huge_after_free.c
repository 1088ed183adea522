/* A read of a freed 4 MiB block (bench/security/misuse.h's protocol: ACCESS
 * before the access, DONE after it). libtenon-secure.so keeps a freed huge
 * block inaccessible while it waits in its cache: the read faults. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(void) {
  size_t n = (size_t)4 << 20;
  char* p = malloc(n);
  if (!p) return 2;
  memset(p, 0x5a, n);
  free(p);
  printf("ACCESS read freed %p\n", (void*)(p + n / 2));
  fflush(stdout);
  volatile char c = ((volatile char*)p)[n / 2];
  (void)c;
  printf("DONE\n");
  printf("END\n");
  return 0;
}
