/* locked_malloc: an LD_PRELOAD shim that serialises glibc's malloc family
 * behind ONE global mutex. It is the freeze probe's negative control: a
 * worker frozen while holding the lock must stop every other worker, so the
 * probe has to report stalls here. If it ever reports none, the probe has
 * stopped measuring what it claims (test freeze_detects_locked_malloc). */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stddef.h>

extern void* __libc_malloc(size_t);
extern void* __libc_calloc(size_t, size_t);
extern void* __libc_realloc(void*, size_t);
extern void* __libc_memalign(size_t, size_t);
extern void __libc_free(void*);

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

#define LOCKED(expr)                \
  do {                              \
    pthread_mutex_lock(&lock);      \
    expr;                           \
    pthread_mutex_unlock(&lock);    \
  } while (0)

void* malloc(size_t n) { void* p; LOCKED(p = __libc_malloc(n)); return p; }
void* calloc(size_t c, size_t n) { void* p; LOCKED(p = __libc_calloc(c, n)); return p; }
void* realloc(void* q, size_t n) { void* p; LOCKED(p = __libc_realloc(q, n)); return p; }
void free(void* q) { LOCKED(__libc_free(q)); }
void* memalign(size_t a, size_t n) { void* p; LOCKED(p = __libc_memalign(a, n)); return p; }
void* aligned_alloc(size_t a, size_t n) { return memalign(a, n); }
int posix_memalign(void** out, size_t a, size_t n) {
  void* p = memalign(a, n);
  if (p == NULL) return ENOMEM;
  *out = p;
  return 0;
}
