/* libearly_alloc.so: a library whose constructor allocates. Preloaded after
 * libtenon-trace.so (LD_PRELOAD="libtenon-trace.so libearly_alloc.so") its
 * constructor runs before the trace library's, so these calls reach
 * tenon::next_allocator before it has looked the next allocator up. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char* kept;

__attribute__((constructor)) static void allocate_early(void) {
  char* p = malloc(10);
  if (!p) abort();
  strcpy(p, "early");
  p = realloc(p, 4000);
  void* z = calloc(4, 100);
  void* a = NULL;
  if (!p || !z || posix_memalign(&a, 256, 300) != 0 || strcmp(p, "early") != 0) abort();
  free(z);
  free(a);
  kept = p;
}

__attribute__((destructor)) static void check_early(void) {
  if (strcmp(kept, "early") != 0) abort();
  free(kept);
  static const char msg[] = "early_alloc: constructor-time blocks intact\n";
  if (write(2, msg, sizeof msg - 1) < 0) abort();
}
