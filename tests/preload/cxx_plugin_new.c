/* A C program (no libstdc++ of its own) that dlopens a C++ library, as Python
 * loads a C++ extension module: libstdc++ arrives after libtenon.so, in the
 * library's local scope. A failing operator new in that library must throw
 * std::bad_alloc and call its new_handler (docs/api.md, "C++ operator new
 * and delete"), as without LD_PRELOAD; until 2026-11-27 tenon found no
 * libstdc++ and ended the program ("tenon: operator new failed and libstdc++
 * is not loaded to throw std::bad_alloc"). Also after a dlclose and a second
 * dlopen (libstdc++ unloaded and loaded again, maybe elsewhere).
 *
 * usage: cxx_plugin_new LIBRARY */
#include <dlfcn.h>
#include <stdio.h>

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s LIBRARY\n", argv[0]);
    return 2;
  }
  if (dlsym(RTLD_DEFAULT, "_ZSt15get_new_handlerv")) {
    fprintf(stderr, "FAILED: libstdc++ is loaded before the library: the test tests nothing\n");
    return 1;
  }
  int failures = 0;
  for (int round = 0; round < 2; ++round) {
    void* lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      fprintf(stderr, "FAILED: dlopen: %s\n", dlerror());
      return 1;
    }
    int (*cases)(void) = (int (*)(void))dlsym(lib, "plugin_new_cases");
    if (!cases) {
      fprintf(stderr, "FAILED: dlsym: %s\n", dlerror());
      return 1;
    }
    int wrong = cases();
    if (wrong) {
      fprintf(stderr, "FAILED: round %d: cases wrong (mask) %d\n", round, wrong);
      ++failures;
    }
    dlclose(lib);
  }
  printf("C++ library loaded by a C program: %s\n", failures ? "FAILED" : "operator new answers as C++ says");
  return failures ? 1 : 0;
}
