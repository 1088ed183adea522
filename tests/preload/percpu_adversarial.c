// Adversarial stress of libtenon-percpu.so through the C API (LD_PRELOAD),
// one case an argument: every block is filled with a pattern of its address
// and size when it is handed out and checked when it is freed (a block lost,
// handed out twice or overwritten shows as a mismatch), and every answer of
// malloc_usable_size and of the aligned allocations is checked.
//
//   migrate      threads moved between the CPUs (sched_setaffinity) while
//                they allocate, free and hand blocks to each other
//   crowd        64 threads on the machine's CPUs, blocks freed by others
//   fork         fork from a busy process (one thread trims in a loop); the
//                child allocates, frees, trims and forks again
//   trim         malloc_trim in a loop while every CPU allocates
//   exits        threads that exit with blocks cached on their CPU, freed
//                by threads that come after them
//   realloc      realloc across the cached classes and beyond, aligned
//                allocations, malloc_usable_size
//   pretend_trim the main thread allocates while another trims (meant for
//                TENON_TEST_PERCPU_WITHOUT_RSEQ=1 without rseq)
//
// A defect prints one line and exits 1 (or the allocator aborts); a case
// runs for about a second (PERCPU_STRESS_SCALE multiplies it).
#define _GNU_SOURCE
#include <malloc.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static atomic_uint g_bad;
static atomic_int g_stop;
static int g_ncpu;
static int g_cpus[1024];
static unsigned g_scale = 1;

static void fail(const char* what, const void* p, size_t n) {
  if (atomic_fetch_add(&g_bad, 1) < 5) fprintf(stderr, "percpu_adversarial: %s (%p, %zu bytes)\n", what, p, n);
}

static uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// The pattern: every byte a function of the block's address, its size and
// the byte's offset.
static void fill(void* p, size_t n) {
  unsigned char* c = p;
  uint64_t s = (uintptr_t)p ^ n;
  for (size_t i = 0; i < n; ++i) c[i] = (unsigned char)(s >> (8 * (i % 8))) ^ (unsigned char)i;
}
// Whether bytes [from, to) of p hold the pattern of a block at `was` of n
// bytes (was != p after a realloc moved it).
static int intact_as(const void* p, const void* was, size_t n, size_t from, size_t to) {
  const unsigned char* c = p;
  uint64_t s = (uintptr_t)was ^ n;
  for (size_t i = from; i < to; ++i)
    if (c[i] != ((unsigned char)(s >> (8 * (i % 8))) ^ (unsigned char)i)) return 0;
  return 1;
}
static int intact(const void* p, size_t n) { return intact_as(p, p, n, 0, n); }

static size_t size_for(uint64_t r) {
  switch (r % 8) {
    case 0: return 1 + r % 16;
    case 1: return 16 + r % 48;
    case 2: return 64 + r % 192;
    case 3: case 4: return 1 + r % 1024;  // every cached class
    case 5: return 1025 + r % 3000;       // above the caches
    case 6: return 24;
    default: return 128;
  }
}

static void* get(size_t n) {
  void* p = malloc(n);
  if (!p) {
    fail("malloc returned null", p, n);
    return NULL;
  }
  if (malloc_usable_size(p) < n) fail("malloc_usable_size below the request", p, n);
  fill(p, n);
  return p;
}
static void put(void* p, size_t n) {
  if (!p) return;
  if (!intact(p, n)) fail("block's pattern changed while it was held", p, n);
  free(p);
}

static void pin(int cpu) {
  cpu_set_t s;
  CPU_ZERO(&s);
  CPU_SET(cpu, &s);
  sched_setaffinity(0, sizeof s, &s);
}
static void unpin_all(void) {
  cpu_set_t s;
  CPU_ZERO(&s);
  for (int i = 0; i < g_ncpu; ++i) CPU_SET(g_cpus[i], &s);
  sched_setaffinity(0, sizeof s, &s);
}

// A mailbox of blocks handed from one thread to another (a slot each,
// exchanged atomically: whoever takes a block out frees it). A posted block
// (16 bytes or more) carries its size in its first word; the rest of its
// pattern is checked by the thread that frees it.
#define MAILBOX 256
static _Atomic(void*) g_box[MAILBOX];

static void take_and_free(void* old) {
  size_t on;
  memcpy(&on, old, sizeof on);
  if (on < 16 || on > 1 << 20 || !intact_as(old, old, on, 8, on)) {
    fail("posted block's pattern changed", old, on);
    return;
  }
  // Every other one resized first by this thread (not its owner's): to
  // another class, moved or kept in place, its contents kept.
  if (on & 1) {
    size_t m = on < 600 ? on + 500 : on - 500;
    void* q = realloc(old, m);
    if (!q) {
      fail("realloc of another thread's block returned null", old, m);
      return;
    }
    size_t keep = on < m ? on : m;
    if (!intact_as(q, old, on, 8, keep)) fail("realloc of another thread's block lost its contents", q, keep);
    if (malloc_usable_size(q) < m) fail("malloc_usable_size below the realloc's size", q, m);
    old = q;
  }
  free(old);
}

static void post(uint64_t r, void* p, size_t n) {
  if (n < 16) {
    put(p, n);
    return;
  }
  memcpy(p, &n, sizeof n);
  void* old = atomic_exchange(&g_box[r % MAILBOX], p);
  if (old) take_and_free(old);
}

// The worker of migrate, crowd and trim: random steps over a set of live
// blocks, some handed to the mailbox, optionally moving between CPUs.
struct work {
  unsigned id;
  int migrate;
  size_t iters;
};

static void* worker(void* arg) {
  struct work* w = arg;
  enum { LIVE = 96 };
  void* held[LIVE] = {0};
  size_t size[LIVE] = {0};
  uint64_t r = mix(w->id + 1);
  for (size_t i = 0; i < w->iters && !atomic_load(&g_stop); ++i) {
    r = mix(r);
    if (w->migrate && i % 61 == 0) pin(g_cpus[(r >> 20) % (unsigned)g_ncpu]);
    if (w->migrate && i % 997 == 0) unpin_all();
    unsigned k = (unsigned)(r % LIVE);
    if (held[k]) {
      if ((r >> 40) % 5 == 0) {
        if (!intact(held[k], size[k])) fail("block's pattern changed while it was held", held[k], size[k]);
        post(r >> 8, held[k], size[k]);
      } else {
        put(held[k], size[k]);
      }
      held[k] = NULL;
    } else {
      size[k] = size_for(r >> 8);
      held[k] = get(size[k]);
    }
  }
  for (unsigned k = 0; k < LIVE; ++k) put(held[k], size[k]);
  return NULL;
}

static void run_workers(unsigned n, int migrate, size_t iters) {
  pthread_t* t = calloc(n, sizeof *t);
  struct work* w = calloc(n, sizeof *w);
  for (unsigned i = 0; i < n; ++i) {
    w[i] = (struct work){i, migrate, iters};
    if (pthread_create(&t[i], NULL, worker, &w[i]) != 0) fail("pthread_create", NULL, i);
  }
  for (unsigned i = 0; i < n; ++i) pthread_join(t[i], NULL);
  free(t);
  free(w);
}

static void drain_mailbox(void) {
  for (unsigned k = 0; k < MAILBOX; ++k) {
    void* p = atomic_exchange(&g_box[k], NULL);
    if (p) take_and_free(p);
  }
}

static int case_migrate(void) {
  run_workers(8, 1, 200000 * g_scale);
  return 0;
}

static int case_crowd(void) {
  run_workers(64, 0, 20000 * g_scale);
  return 0;
}

static void* trimmer(void* arg) {
  (void)arg;
  while (!atomic_load(&g_stop)) malloc_trim(0);
  return NULL;
}

static int case_trim(void) {
  pthread_t tr[2];  // two trims at once: each skips the CPUs the other drains
  for (int i = 0; i < 2; ++i) pthread_create(&tr[i], NULL, trimmer, NULL);
  run_workers((unsigned)g_ncpu * 2, 1, 100000 * g_scale);
  atomic_store(&g_stop, 1);
  for (int i = 0; i < 2; ++i) pthread_join(tr[i], NULL);
  atomic_store(&g_stop, 0);
  malloc_trim(0);
  return 0;
}

// The child of a fork: the parent's threads are gone, whatever their
// sequences were doing; the child allocates through the inherited regions.
static int child_work(int depth) {
  struct work w = {1000u + (unsigned)depth, 1, 30000 * g_scale};
  worker(&w);
  pthread_t t[4];
  struct work ws[4];
  for (int i = 0; i < 4; ++i) {
    ws[i] = (struct work){2000u + (unsigned)i, 1, 10000 * g_scale};
    pthread_create(&t[i], NULL, worker, &ws[i]);
  }
  for (int i = 0; i < 4; ++i) pthread_join(t[i], NULL);
  malloc_trim(0);
  worker(&w);
  return atomic_load(&g_bad) ? 1 : 0;
}

static void* busy(void* arg) {
  struct work* w = arg;
  while (!atomic_load(&g_stop)) worker(w);
  return NULL;
}

static int case_fork(void) {
  enum { N = 6 };
  pthread_t t[N];
  struct work w[N];
  for (int i = 0; i < N; ++i) {
    w[i] = (struct work){(unsigned)i, 1, 5000};
    pthread_create(&t[i], NULL, i == 0 ? trimmer : busy, &w[i]);  // forks cut trims too
  }
  for (unsigned f = 0; f < 6 * g_scale; ++f) {
    usleep(2000);
    pid_t pid = fork();
    if (pid == 0) {
      atomic_store(&g_stop, 0);
      int rc = child_work(0);
      if (rc == 0 && f % 4 == 0) {  // and a fork from the child
        pid_t g = fork();
        if (g == 0) _exit(child_work(1));
        int st = 0;
        waitpid(g, &st, 0);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) rc = 1;
      }
      _exit(rc);
    }
    int st = 0;
    if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
      fail("a forked child failed", NULL, (size_t)st);
  }
  atomic_store(&g_stop, 1);
  for (int i = 0; i < N; ++i) pthread_join(t[i], NULL);
  atomic_store(&g_stop, 0);
  return 0;
}

// Threads that allocate on a CPU, free most of it there (cached on that
// CPU's stacks) and exit with the rest still held by the program; the next
// generation frees those (blocks of exited threads' heaps) and allocates
// what the stacks kept.
struct gen {
  void* held[512];
  size_t size[512];
  unsigned id;
};

static void* generation(void* arg) {
  struct gen* g = arg;
  pin(g_cpus[g->id % (unsigned)g_ncpu]);
  for (int k = 0; k < 512; ++k) put(g->held[k], g->size[k]);  // the previous generation's
  uint64_t r = mix(g->id);
  void* tmp[2048];
  size_t tsz[2048];
  for (int k = 0; k < 2048; ++k) {
    r = mix(r);
    tsz[k] = size_for(r);
    tmp[k] = get(tsz[k]);
  }
  for (int k = 0; k < 2048; ++k) put(tmp[k], tsz[k]);  // cached on this CPU
  for (int k = 0; k < 512; ++k) {
    r = mix(r);
    g->size[k] = size_for(r);
    g->held[k] = get(g->size[k]);
  }
  return NULL;
}

static int case_exits(void) {
  enum { LINES = 4 };
  struct gen* g = calloc(LINES, sizeof *g);
  for (unsigned round = 0; round < 40 * g_scale; ++round) {
    pthread_t t[LINES];
    for (unsigned i = 0; i < LINES; ++i) {
      g[i].id = round * LINES + i;
      // Each line's blocks go to another line's next thread: freed by
      // threads of other CPUs than the one that cached them.
      pthread_create(&t[i], NULL, generation, &g[(i + round) % LINES]);
      pthread_join(t[i], NULL);  // one at a time, so that lines never share a gen
    }
    if (round % 10 == 9) malloc_trim(0);
  }
  for (unsigned i = 0; i < LINES; ++i)
    for (int k = 0; k < 512; ++k) put(g[i].held[k], g[i].size[k]);
  free(g);
  return 0;
}

static int case_realloc(void) {
  uint64_t r = 7;
  for (unsigned i = 0; i < 40000 * g_scale; ++i) {
    r = mix(r);
    size_t n = size_for(r);
    void* p = get(n);
    if (!p) continue;
    // Through every cached class and out of them, in both directions.
    for (int step = 0; step < 4; ++step) {
      r = mix(r);
      size_t m = size_for(r);
      void* q = realloc(p, m);
      if (!q) {
        fail("realloc returned null", p, m);
        break;
      }
      size_t keep = n < m ? n : m;
      if (!intact_as(q, p, n, 0, keep)) fail("realloc lost the block's contents", q, keep);
      if (malloc_usable_size(q) < m) fail("malloc_usable_size below the realloc's size", q, m);
      fill(q, m);
      p = q;
      n = m;
    }
    put(p, n);
    // Aligned allocations of cached sizes.
    size_t align = (size_t)16 << (r % 8);  // 16 .. 2048
    size_t an = 1 + (r >> 10) % 1024;
    void* a = NULL;
    if (posix_memalign(&a, align, an) != 0 || !a || ((uintptr_t)a & (align - 1))) {
      fail("posix_memalign", a, align);
    } else {
      if (malloc_usable_size(a) < an) fail("malloc_usable_size below an aligned request", a, an);
      fill(a, an);
      void* b = aligned_alloc(align, an);
      if (!b || ((uintptr_t)b & (align - 1))) fail("aligned_alloc", b, align);
      if (b) {
        fill(b, an);
        put(b, an);
      }
      put(a, an);
    }
  }
  return 0;
}

// The main thread allocates through the caches while another thread trims
// in a loop. Run with TENON_TEST_PERCPU_WITHOUT_RSEQ=1 and
// glibc.pthread.rseq=0 (CMakeLists.txt): the main thread, single-threaded at
// its first malloc, uses CPU 0's region with nothing to restart its
// sequences, and a trim must not drain that region under it (before
// 2026-11-27 it did: a block handed out and drained at once, SIGSEGV or a
// false double free within 0.3 s, 3 runs of 3).
static int case_pretend_trim(void) {
  void* warm = malloc(32);  // the first malloc: single-threaded
  free(warm);
  pthread_t tr;
  pthread_create(&tr, NULL, trimmer, NULL);
  enum { N = 64 };
  void* p[N] = {0};
  size_t n[N] = {0};
  uint64_t r = 3;
  for (unsigned long i = 0; i < 3000000ul * g_scale; ++i) {
    r = mix(r);
    unsigned k = (unsigned)(r % N);
    if (p[k]) {
      put(p[k], n[k]);
      p[k] = NULL;
    } else {
      n[k] = 16 + (r >> 8) % 200;
      p[k] = get(n[k]);
    }
  }
  atomic_store(&g_stop, 1);
  pthread_join(tr, NULL);
  atomic_store(&g_stop, 0);
  for (unsigned k = 0; k < N; ++k) put(p[k], n[k]);
  return 0;
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s migrate|crowd|fork|trim|exits|realloc|pretend_trim\n", argv[0]);
    return 2;
  }
  const char* sc = getenv("PERCPU_STRESS_SCALE");
  if (sc && atoi(sc) > 0) g_scale = (unsigned)atoi(sc);
  cpu_set_t s;
  CPU_ZERO(&s);
  sched_getaffinity(0, sizeof s, &s);
  for (int c = 0; c < CPU_SETSIZE && g_ncpu < 1024; ++c)
    if (CPU_ISSET(c, &s)) g_cpus[g_ncpu++] = c;
  if (g_ncpu == 0) g_cpus[g_ncpu++] = 0;
  const char* c = argv[1];
  int rc = !strcmp(c, "migrate")   ? case_migrate()
           : !strcmp(c, "crowd")   ? case_crowd()
           : !strcmp(c, "fork")    ? case_fork()
           : !strcmp(c, "trim")    ? case_trim()
           : !strcmp(c, "exits")   ? case_exits()
           : !strcmp(c, "realloc") ? case_realloc()
           : !strcmp(c, "pretend_trim") ? case_pretend_trim()
                                   : 2;
  drain_mailbox();
  if (rc == 2) fprintf(stderr, "unknown case %s\n", c);
  unsigned bad = atomic_load(&g_bad);
  if (bad) fprintf(stderr, "percpu_adversarial %s: %u defects\n", c, bad);
  return rc ? rc : bad ? 1 : 0;
}
