/* dlopen/dlclose of a library that allocates (static initialisers, thread
 * locals, its own threads), with blocks crossing between the library and the
 * program in both directions, under LD_PRELOAD=libtenon.so. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s LIBRARY\n", argv[0]);
    return 2;
  }
  int failures = 0;
  void* carried = NULL;  // a block allocated by one load, freed after the next
  for (int round = 0; round < 200; ++round) {
    void* lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      fprintf(stderr, "FAILED: dlopen: %s\n", dlerror());
      return 1;
    }
    void* (*make)(size_t) = (void* (*)(size_t))dlsym(lib, "lib_make");
    void (*release)(void*) = (void (*)(void*))dlsym(lib, "lib_release");
    int (*threads)(int) = (int (*)(int))dlsym(lib, "lib_threads");
    if (!make || !release || !threads) {
      fprintf(stderr, "FAILED: dlsym\n");
      return 1;
    }
    unsigned char* from_lib = make(100 + round * 37);
    for (int i = 0; i < 100 + round * 37; ++i)
      if (!from_lib || from_lib[i] != 0x5a) {
        fprintf(stderr, "FAILED: round %d: block from the library is wrong at %d\n", round, i);
        ++failures;
        break;
      }
    free(from_lib);                        // library's block freed by the program
    release(malloc(round * 101 + 1));      // program's block freed by the library
    if (round % 20 == 0 && threads(4) != 4) ++failures;
    free(carried);
    carried = make(3000);
    if (dlclose(lib) != 0) {
      fprintf(stderr, "FAILED: dlclose: %s\n", dlerror());
      ++failures;
    }
    if (failures > 5) break;
  }
  free(carried);
  printf("dlopen/dlclose: 200 rounds, %d failed\n", failures);
  return failures ? 1 : 0;
}
