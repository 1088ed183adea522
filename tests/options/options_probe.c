/* A program for the options checks: allocates and frees small blocks and
 * huge ones (whose cache reads TENON_PURGE_DELAY_MS, publishing the options
 * at that first use) and prints nothing of its own. Built twice: preloaded
 * with libtenon.so (standard names) and linked with libtenon.a (tenon_*). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef PROBE_TENON_API
#include <tenon/tenon.h>
#define ALLOC tenon_malloc
#define FREE tenon_free
#else
#define ALLOC malloc
#define FREE free
#endif

int main(void) {
  for (int round = 0; round < 4; ++round) {
    void* small[64];
    for (int i = 0; i < 64; ++i) small[i] = ALLOC(16 + 8 * (size_t)i);
    void* huge = ALLOC((size_t)8 << 20);
    if (!huge) return 1;
    memset(huge, 1, 4096);
    FREE(huge);
    for (int i = 0; i < 64; ++i) FREE(small[i]);
  }
  return 0;
}
