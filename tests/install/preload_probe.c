/* Run under tenon-run: prints LD_PRELOAD and whether this process's malloc
 * is tenon's (tenon_owns found with dlsym, so that the probe itself does not
 * link tenon). Exits 0 when it is, 1 when not. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

int main(void) {
  const char* preload = getenv("LD_PRELOAD");
  printf("LD_PRELOAD=%s\n", preload ? preload : "");
  int (*owns)(const void*) = (int (*)(const void*))dlsym(RTLD_DEFAULT, "tenon_owns");
  void* p = malloc(10);
  int yes = owns && p && owns(p);
  printf("malloc is tenon's: %s\n", yes ? "yes" : "no");
  free(p);
  return yes ? 0 : 1;
}
