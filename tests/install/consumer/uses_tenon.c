/* A consumer of an installed tenon (find_package, pkg-config or
 * add_subdirectory). argv[1]:
 *   shared  linked with libtenon.so: the program's malloc is tenon's
 *   static  linked with libtenon.a: tenon_* works beside glibc's malloc
 * Prints "uses_tenon: tenon VERSION, MODE: ok", exits 1 on a failed check. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tenon/tenon.h>

static int failures;
#define CHECK(cond, ...)                   \
  do {                                     \
    if (!(cond)) {                         \
      fprintf(stderr, "FAILED: " __VA_ARGS__); \
      fputc('\n', stderr);                 \
      ++failures;                          \
    }                                      \
  } while (0)

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "shared";
  void* t = tenon_malloc(100);
  CHECK(t && tenon_owns(t), "tenon_malloc(100) gave %p, which tenon_owns does not claim", t);
  memset(t, 1, 100);
  tenon_free(t);
  void* m = malloc(10);
  CHECK(m != NULL, "malloc(10) failed");
  if (strcmp(mode, "shared") == 0)
    CHECK(tenon_owns(m), "malloc is not tenon's in a program linked with libtenon.so");
  else
    CHECK(!tenon_owns(m), "malloc is tenon's although only libtenon.a (tenon_* only) is linked");
  free(m);
  const char* v = tenon_version();
  CHECK(v && strchr(v, '.'), "tenon_version() gave \"%s\"", v ? v : "(null)");
  if (failures) return 1;
  printf("uses_tenon: tenon %s, %s: ok\n", v, mode);
  return 0;
}
