/* free() of a glibc block that lies in the 4 MiB unit of a tenon huge block,
 * after the block's end, under LD_PRELOAD=libtenon.so. Only a pointer inside
 * the huge block's own range is tenon's; anything else in its unit is
 * foreign and must be handled as such, not taken for an interior pointer of
 * the huge block and dropped. And the other way round: a pointer inside the
 * huge block is never handed to glibc.
 * Where glibc's own mmap of a big block lands is the kernel's choice, so the
 * test builds the block exactly as glibc lays out a chunk it mmapped
 * (prev_size 0, size | IS_MMAPPED, user data 16 bytes in) at a chosen
 * address in the unit's free tail. glibc's free gives such a chunk back with
 * munmap; afterwards its range must be gone from /proc/self/maps.
 * Built with -fno-builtin so the compiler keeps every call as written. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "../api/preload_check.h"

#define UNIT ((uintptr_t)4 << 20)
#define CHUNK_BYTES ((size_t)128 << 10)

/* Is any byte of [p, p + n) mapped? (/proc/self/maps, as a person would check.) */
static int mapped(const void* p, size_t n) {
  FILE* f = fopen("/proc/self/maps", "r");
  if (!f) return -1;
  uintptr_t lo = (uintptr_t)p, hi = lo + n, a, b;
  char line[512];
  int found = 0;
  while (!found && fgets(line, sizeof line, f))
    if (sscanf(line, "%lx-%lx", &a, &b) == 2 && a < hi && lo < b) found = 1;
  fclose(f);
  return found;
}

/* A chunk laid out as glibc mmaps one, at `at`; returns its user pointer. */
static char* glibc_mmapped_chunk(uintptr_t at) {
  void* m = mmap((void*)at, CHUNK_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                 -1, 0);
  if (m == MAP_FAILED) return NULL;
  if ((uintptr_t)m != at) {
    munmap(m, CHUNK_BYTES);
    return NULL;
  }
  size_t* words = m;
  words[0] = 0;                /* prev_size */
  words[1] = CHUNK_BYTES | 2;  /* size | IS_MMAPPED */
  return (char*)m + 16;
}

int main(void) {
  int (*owns)(const void*) = (int (*)(const void*))dlsym(RTLD_DEFAULT, "tenon_owns");
  CHECK(owns != NULL, "tenon_owns is not exported: is libtenon.so preloaded?");
  if (!owns) return 1;
  /* 2.5 MiB: a huge block whose mapping ends inside its first unit. The rest
   * of the unit may hold other mappings already (whatever the kernel put
   * next to it): a block whose unit has no free room is kept aside and the
   * next one is tried. */
  size_t size = (size_t)5 << 19;
  char* huge = NULL;
  char* aside[8];
  int n_aside = 0;
  uintptr_t at = 0;
  char* foreign = NULL;
  while (!foreign && n_aside < 8) {
    huge = malloc(size);
    CHECK(huge != NULL, "malloc(%zu)", size);
    if (!huge) return 1;
    memset(huge, 7, size);
    CHECK(owns(huge), "tenon_owns(huge block %p) = 0", (void*)huge);
    uintptr_t unit = (uintptr_t)huge & ~(UNIT - 1);
    uintptr_t end = (uintptr_t)huge + malloc_usable_size(huge);
    for (at = (end + 0xffff) & ~(uintptr_t)0xffff; !foreign && at + CHUNK_BYTES <= unit + UNIT; at += 0x10000)
      if (!mapped((void*)at, CHUNK_BYTES)) foreign = glibc_mmapped_chunk(at);
    if (!foreign) aside[n_aside++] = huge;
  }
  CHECK(foreign != NULL, "precondition: no huge block of %zu bytes had %zu free bytes left in its unit", size,
        CHUNK_BYTES);
  if (!foreign || preload_failures) return 1;
  at = (uintptr_t)foreign - 16;
  memset(foreign, 1, CHUNK_BYTES - 16);

  CHECK(!owns(foreign), "tenon_owns(glibc chunk %p in the unit of huge block %p) = 1", (void*)foreign, (void*)huge);
  CHECK(!owns(huge + 4096), "tenon_owns(pointer 4 KiB into the huge block) = 1");
  CHECK(malloc_usable_size(foreign) >= CHUNK_BYTES - 16, "malloc_usable_size(glibc chunk in the unit) = %zu",
        malloc_usable_size(foreign));
  free(foreign);
  CHECK(!mapped((void*)at, CHUNK_BYTES),
        "free(%p), a glibc chunk in the unit of huge block %p after its end, did not free it (still mapped)",
        (void*)foreign, (void*)huge);

  /* A pointer inside the huge block that is not its start is not a block:
   * realloc refuses it, malloc_usable_size says 0 (neither may hand it to
   * glibc, which would read tenon's bytes before it as a chunk header); free
   * of it ends the program, which tests/security checks (FreeInterior4M). */
  errno = 0;
  void* r = realloc(huge + 8192, 100);
  CHECK(r == NULL && errno == EINVAL, "realloc(pointer 8 KiB into a huge block) = %p, errno %d", r, errno);
  CHECK(malloc_usable_size(huge + 8192) == 0, "malloc_usable_size(pointer 8 KiB into a huge block) = %zu",
        malloc_usable_size(huge + 8192));
  CHECK(owns(huge), "the huge block is no longer tenon's after realloc() of a pointer inside it");

  /* The huge block is untouched and still tenon's. */
  for (size_t i = 0; i < size; i += 4096)
    if (huge[i] != 7) {
      CHECK(0, "huge block byte %zu changed", i);
      break;
    }
  free(huge);
  for (int i = 0; i < n_aside; ++i) free(aside[i]);
  void* again = malloc(size);
  CHECK(again != NULL, "malloc(%zu) after the frees", size);
  free(again);
  printf("foreign_in_huge_unit: %d failed checks\n", preload_failures);
  return preload_failures ? 1 : 0;
}
