/* mass_pool.h is a C header: this C11 program includes it, allocates and
 * reads back a few slots, and exits 0 on success. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "tenon/mass_pool.h"

int main(void) {
  tenon_pool* p = tenon_pool_new(sizeof(double) * 3, _Alignof(double));
  if (!p) return perror("tenon_pool_new"), 1;
  for (unsigned i = 0; i < 100000; ++i) {
    uint32_t index;
    double* v = (double*)tenon_pool_alloc(p, &index);
    if (!v || index != i) return fprintf(stderr, "alloc %u gave index %u\n", i, index), 1;
    v[0] = i;
    v[1] = -1.0 * i;
    v[2] = 0.5;
  }
  for (unsigned i = 0; i < 100000; ++i) {
    const double* v = (const double*)tenon_pool_at(p, i);
    if (v[0] != i || v[1] != -1.0 * i || v[2] != 0.5) return fprintf(stderr, "slot %u\n", i), 1;
  }
  if (tenon_pool_size(p) != 100000) return fprintf(stderr, "size\n"), 1;
  tenon_pool_free(p);
  puts("pool_c_header_test: ok");
  return 0;
}
