/* First-class heaps through the standard names: with libtenon.so preloaded,
 * free() and realloc() of a heap's blocks, from the allocating thread and
 * from another one, then destroy with blocks still live. Exit 0 on success;
 * a failed check prints what and exits 1. */
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tenon/tenon.h"

static int failures;
#define CHECK(cond)                                              \
  do {                                                           \
    if (!(cond)) {                                               \
      fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, #cond); \
      ++failures;                                                \
    }                                                            \
  } while (0)

enum { kBlocks = 3000 };
static void* blocks[kBlocks];

static void* free_all(void* arg) {
  (void)arg;
  for (int i = 0; i < kBlocks; ++i) free(blocks[i]);
  return NULL;
}

int main(void) {
  tenon_heap_options o = {.limit = 64u << 20}; /* a round takes about 40 MiB */
  tenon_heap_t* h = tenon_heap_new(&o);
  CHECK(h != NULL);
  for (int round = 0; round < 4; ++round) {
    for (int i = 0; i < kBlocks; ++i) {
      size_t n = i % 50 == 0 ? 100000 : (i % 333 == 0 ? (3u << 20) : 16 + (size_t)(i * 7) % 2000);
      blocks[i] = tenon_heap_malloc(h, n);
      CHECK(blocks[i] != NULL);
      if (!blocks[i]) return 1;
      memset(blocks[i], i & 0xff, n < 64 ? n : 64);
      CHECK(malloc_usable_size(blocks[i]) >= n);
    }
    /* Plain free() from another thread, every round: the limit only holds
     * the four rounds if those frees reach the heap. */
    pthread_t t;
    CHECK(pthread_create(&t, NULL, free_all, NULL) == 0);
    pthread_join(t, NULL);
  }
  void* p = tenon_heap_malloc(h, 100);
  memset(p, 7, 100);
  void* q = realloc(p, 5000); /* moves: the new block is the default allocator's */
  CHECK(q != NULL && ((unsigned char*)q)[99] == 7);
  free(q);
  for (int i = 0; i < 1000; ++i) CHECK(tenon_heap_malloc(h, 64) != NULL); /* left live */
  tenon_heap_destroy(h);
  void* after = malloc(64);
  CHECK(after != NULL);
  free(after);
  if (failures) return 1;
  printf("preload_heaps: ok\n");
  return 0;
}
