/* The C misuse programs of the security benchmark: one heap misuse per run,
 * chosen by name (misuse --list). What each does and how a run is read:
 * misuse.h and docs/security.md. Sizes follow the usual probes: 8 B (the
 * smallest class), 4 KiB (a page), 256 KiB (above glibc's mmap threshold,
 * a large block elsewhere), 4 MiB (huge: a mapping of its own in most
 * allocators). Built with -O1 -fno-builtin; misuse_opaque() keeps the
 * compiler from reasoning about the misuse. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <malloc.h>
#include <sys/mman.h>

#include "misuse.h"

#define B8 ((size_t)8)
#define K4 (4 * MISUSE_KIB)
#define K256 (256 * MISUSE_KIB)
#define M4 (4 * MISUSE_MIB)

/* ---- double free ------------------------------------------------------ */

static void double_free(size_t n) {
  char* p = misuse_alloc(n);
  free(p);
  misuse_call("free", p);
  free(misuse_opaque(p));
  misuse_done();
  misuse_check_duplicates(n, 4);
}

/* Another block of the size is freed in between: a check that only compares
 * with the last block freed (a list head) does not see this one. */
static void double_free_delayed(size_t n) {
  char* p = misuse_alloc(n);
  char* q = misuse_alloc(n);
  free(p);
  free(q);
  misuse_call("free", p);
  free(misuse_opaque(p));
  misuse_done();
  misuse_check_duplicates(n, 4);
}

/* ---- free of something that is not a live block start ----------------- */

static void free_interior(size_t n) {
  char* p = misuse_alloc(n);
  char* x = p + n / 2;
  misuse_call("free", x);
  free(misuse_opaque(x));
  misuse_done();
  misuse_check_overlap(p, n, n, 4);
  misuse_check_overlap(p, n, n / 2, 4);
}

static void free_unaligned(size_t n) {
  char* p = misuse_alloc(n);
  char* x = p + 1;
  misuse_call("free", x);
  free(misuse_opaque(x));
  misuse_done();
  misuse_check_overlap(p, n, n, 4);
}

/* An address near a live block, in the allocator's own region, that was never
 * handed out (distance is the argument): 16 KiB stays inside the 16 B
 * block's run or page group in most allocators; 1 MiB is usually still the
 * allocator's reservation but no block's. */
static void free_never_allocated(size_t distance) {
  char* p = misuse_alloc(16);
  char* x = p + distance;
  misuse_call("free", x);
  free(misuse_opaque(x));
  misuse_done();
  misuse_check_handed_out(x, 16, 64);
}

static void free_stack(size_t unused) {
  (void)unused;
  char buf[512] __attribute__((aligned(64)));
  memset(buf, 0, sizeof buf);
  char* x = buf + 64;
  misuse_call("free", x);
  free(misuse_opaque(x));
  misuse_done();
  misuse_check_overlap(buf, sizeof buf, 32, 16);
}

static char g_static_buf[4096] __attribute__((aligned(64)));

static void free_static(size_t unused) {
  (void)unused;
  char* x = g_static_buf + 64;
  misuse_call("free", x);
  free(misuse_opaque(x));
  misuse_done();
  misuse_check_overlap(g_static_buf, sizeof g_static_buf, 32, 16);
}

/* A pointer into an anonymous mapping that no allocator made (zero bytes in
 * front of it: no plausible header). */
static void free_foreign_mapping(size_t unused) {
  (void)unused;
  size_t len = 64 * MISUSE_KIB;
  char* m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) misuse_skip("mmap failed");
  char* x = m + 4096;
  misuse_call("free", x);
  free(misuse_opaque(x));
  misuse_done();
  misuse_check_overlap(m, len, 32, 16);
  misuse_check_overlap(m, len, 4096, 4);
}

/* realloc moved the block (and freed the old one); the program frees the
 * old pointer anyway: a double free through realloc. */
static void free_after_realloc(size_t n) {
  char* p = misuse_alloc(n);
  char* fence = misuse_alloc(n); /* keeps p from growing in place into free space */
  char* q = misuse_need(realloc(p, n * 16), "realloc");
  if (q == p) misuse_skip("realloc grew the block in place: nothing was freed");
  misuse_call("free", p);
  free(misuse_opaque(p));
  misuse_done();
  misuse_check_duplicates(n, 4);
  misuse_opaque(q);
  misuse_opaque(fence);
}

/* ---- overflow and underflow -------------------------------------------- */

/* Flips the low bit of `bytes` bytes starting at p + off (XOR: always a
 * change, whatever was there). */
static void flip(char* p, ptrdiff_t off, size_t bytes) {
  volatile char* v = (volatile char*)misuse_opaque(p);
  for (size_t i = 0; i < bytes; i++) v[off + (ptrdiff_t)i] ^= 1;
}

/* Writes past the block's usable end (malloc_usable_size: the bytes the
 * program may use; a write into the rounding slack is no overflow), with a
 * neighbour of the same size allocated after it, then frees both and
 * allocates the size again: the checks on free and on the next allocations
 * get their chance. */
static void overflow(size_t n, size_t bytes) {
  char* p = misuse_alloc(n);
  char* next = misuse_alloc(n);
  size_t usable = malloc_usable_size(p);
  misuse_access("write past the end of", p);
  flip(p, (ptrdiff_t)usable, bytes);
  misuse_done();
  free(p);
  free(next);
  for (int i = 0; i < 8; i++) free(misuse_alloc(n));
}
static void overflow_1(size_t n) { overflow(n, 1); }
static void overflow_8(size_t n) { overflow(n, 8); }

/* The 8 bytes in front of a block (the end of the block before it, or a
 * header). */
static void underflow_8(size_t n) {
  char* prev = misuse_alloc(n);
  char* p = misuse_alloc(n);
  misuse_access("write before the start of", p);
  flip(p, -8, 8);
  misuse_done();
  free(p);
  free(prev);
  for (int i = 0; i < 8; i++) free(misuse_alloc(n));
}

/* ---- use after free ---------------------------------------------------- */

/* One byte in the middle of a freed block (not its first words, where most
 * allocators keep a free-list link: see free_list_poison), then 64
 * allocations of the size: an allocator that checks freed blocks are
 * untouched (zero on free, check on allocation) sees it then. */
static void write_after_free(size_t n) {
  char* p = misuse_alloc(n);
  free(p);
  misuse_access("write into freed", p);
  flip(p, (ptrdiff_t)(n / 2), 1);
  misuse_done();
  void* got[64];
  for (int i = 0; i < 64; i++) got[i] = misuse_alloc(n);
  for (int i = 0; i < 64; i++) free(got[i]);
}

/* Reads the middle of a freed block: the program's old data (0x5a) still
 * there is an information leak. */
static void read_after_free(size_t n) {
  char* p = misuse_alloc(n);
  free(p);
  misuse_access("read freed", p);
  unsigned char c = ((volatile unsigned char*)misuse_opaque(p))[n / 2];
  misuse_done();
  if (c == 0x5a)
    misuse_say("NOTE the freed block still holds the program's data (read 0x5a)");
  else
    misuse_say("DEFENDED the freed block no longer holds the program's data (read 0x%02x)", c);
}

static char g_forged_target[256] __attribute__((aligned(64)));

/* Free-list poisoning: two blocks freed (so that the list holds a second
 * entry behind the head: glibc's tcache counts its entries and would not
 * follow the link of the last one), the first word of the one freed last
 * (the link in most allocators) overwritten with an address of the program's
 * choosing; does a later malloc return that address? */
static void free_list_poison(size_t n) {
  char* a = misuse_alloc(n);
  char* fence = misuse_alloc(n); /* a and p not adjacent: nothing coalesces */
  char* p = misuse_alloc(n);
  char* fence2 = misuse_alloc(n);
  free(a);
  free(p);
  misuse_access("forge the first word of freed", p);
  void* forged = g_forged_target;
  memcpy(misuse_opaque(p), &forged, sizeof forged);
  misuse_done();
  for (int i = 0; i < 8; i++) {
    void* q = misuse_need(malloc(n), "malloc");
    if (q == (void*)g_forged_target) {
      misuse_say("CORRUPT malloc(%zu) returned %p, the address forged into a freed block", n, q);
      return;
    }
  }
  misuse_opaque(fence);
  misuse_opaque(fence2);
  misuse_say("DEFENDED the forged address was not handed out");
}

/* ---- zero size --------------------------------------------------------- */

static void malloc0_write(size_t unused) {
  (void)unused;
  char* p = misuse_need(malloc(0), "malloc(0)");
  misuse_access("write to malloc(0) block", p);
  flip(p, 0, 1);
  misuse_done();
  free(p);
  for (int i = 0; i < 8; i++) free(malloc(0));
}

/* ---- sized free with the wrong size ------------------------------------- */

typedef void (*free_sized_fn)(void*, size_t);

static free_sized_fn find_free_sized(void) {
  /* Looked up first: dlsym may allocate (dlerror's buffer). */
  free_sized_fn f = (free_sized_fn)dlsym(RTLD_DEFAULT, "free_sized");
  if (!f) misuse_skip("no free_sized in the allocator or the C library");
  return f;
}

/* A 32 B block freed as 4 KiB, or a 256 KiB one as 16 B: an allocator that
 * trusts the size files the block under the wrong class, and a later malloc
 * of that size hands it out. Two things keep a correct allocator from
 * handing out p's memory for the wrong size legitimately: a block of the
 * wrong size allocated first (its class then has a run with room, which
 * serves the checks), and a live neighbour of p's size (p's run stays in use
 * and cannot be released and reused for another size). */
static void free_sized_wrong(size_t n) {
  free_sized_fn fs = find_free_sized();
  size_t wrong = n <= 64 ? 4096 : 16;
  void* warm = misuse_need(malloc(wrong), "malloc");
  char* p = misuse_alloc(n);
  char* neighbour = misuse_alloc(n);
  misuse_call("free_sized", p);
  fs(misuse_opaque(p), wrong);
  misuse_done();
  misuse_check_handed_out(p, wrong, 8);
  misuse_opaque(warm);
  misuse_opaque(neighbour);
}

/* ---- malloc_usable_size of something that is not a live block ----------- */

static void usable_size_report(size_t r) {
  if (r == 0)
    misuse_say("DEFENDED malloc_usable_size answered 0");
  else
    misuse_say("NOTE malloc_usable_size answered %zu", r);
}

static void usable_size_interior(size_t unused) {
  (void)unused;
  char* p = misuse_alloc(64);
  misuse_call("malloc_usable_size", p + 16);
  size_t r = malloc_usable_size(misuse_opaque(p + 16));
  misuse_done();
  usable_size_report(r);
}

static void usable_size_freed(size_t unused) {
  (void)unused;
  char* p = misuse_alloc(64);
  free(p);
  misuse_call("malloc_usable_size", p);
  size_t r = malloc_usable_size(misuse_opaque(p));
  misuse_done();
  usable_size_report(r);
}

static void usable_size_never_allocated(size_t unused) {
  (void)unused;
  char* p = misuse_alloc(16);
  char* x = p + 16 * MISUSE_KIB;
  misuse_call("malloc_usable_size", x);
  size_t r = malloc_usable_size(misuse_opaque(x));
  misuse_done();
  usable_size_report(r);
}

/* ---- reuse policy (no misuse: what a use after free would meet) ---------- */

static void reuse_immediate(size_t n) {
  char* p = misuse_alloc(n);
  free(p);
  char* q = misuse_need(malloc(n), "malloc");
  if (q == p)
    misuse_say("NOTE the next malloc(%zu) returned the block just freed", n);
  else
    misuse_say("DEFENDED the next malloc(%zu) returned another block", n);
}

/* Eight blocks written, freed and allocated again: does the first word of a
 * fresh block hold an address (a free-list link, an arena pointer), which
 * would tell an attacker who reads it where the heap or the C library is? */
static void fresh_block_pointer(size_t n) {
  enum { K = 8 };
  char* got[K];
  for (int i = 0; i < K; i++) got[i] = misuse_alloc(n);
  for (int i = 0; i < K; i++) free(got[i]);
  for (int i = 0; i < K; i++) got[i] = misuse_need(malloc(n), "malloc");
  for (int i = 0; i < K; i++) {
    uintptr_t w;
    memcpy(&w, got[i], sizeof w);
    char where[128];
    if (w && misuse_mapping_of(w, where, sizeof where)) {
      misuse_say("NOTE a fresh block's first word holds %#lx, an address inside %s", (unsigned long)w, where);
      return;
    }
  }
  misuse_say("DEFENDED no fresh block's first word is the address of mapped memory");
}

/* ---- controls for the death-test harness (tests/security), not misuses:
 * they stand in for an allocator that stops a misuse with a message, one
 * that misses it, and one that crashes. The benchmark leaves them out. */

static void control_abort(size_t unused) {
  (void)unused;
  char* p = misuse_alloc(16);
  misuse_call("free", p);
  char line[96];
  int n = snprintf(line, sizeof line, "control: stopped free(%p)\n", (void*)p);
  if (write(2, line, (size_t)n) < 0) _exit(3);
  abort();
}

static void control_exit(size_t unused) {
  (void)unused;
  char* p = misuse_alloc(16);
  misuse_call("free", p);
  free(p);
  misuse_done();
}

static void control_segv(size_t unused) {
  (void)unused;
  misuse_done();
  volatile char* nowhere = (volatile char*)misuse_opaque(NULL);
  *nowhere = 1;
}

#define CASE(name, group, about, fn, arg) {name, group, about, fn, arg}

static const misuse_case kCases[] = {
  CASE("double_free_8", "double free", "free(p); free(p), 8 B", double_free, B8),
  CASE("double_free_4k", "double free", "free(p); free(p), 4 KiB", double_free, K4),
  CASE("double_free_256k", "double free", "free(p); free(p), 256 KiB", double_free, K256),
  CASE("double_free_4m", "double free", "free(p); free(p), 4 MiB", double_free, M4),
  CASE("double_free_delayed_8", "double free", "free(p); free(q); free(p), 8 B", double_free_delayed, B8),
  CASE("double_free_delayed_4k", "double free", "free(p); free(q); free(p), 4 KiB", double_free_delayed, K4),
  CASE("double_free_delayed_256k", "double free", "free(p); free(q); free(p), 256 KiB", double_free_delayed, K256),
  CASE("double_free_delayed_4m", "double free", "free(p); free(q); free(p), 4 MiB", double_free_delayed, M4),
  CASE("free_after_realloc_8", "double free", "free(p) after realloc(p, 128) moved it", free_after_realloc, B8),
  CASE("free_after_realloc_4k", "double free", "free(p) after realloc(p, 64 KiB) moved it", free_after_realloc, K4),
  CASE("free_after_realloc_256k", "double free", "free(p) after realloc(p, 4 MiB) moved it", free_after_realloc, K256),
  CASE("free_after_realloc_4m", "double free", "free(p) after realloc(p, 64 MiB) moved it", free_after_realloc, M4),
  CASE("free_interior_64", "invalid free", "free(p + 32) of a 64 B block", free_interior, 64),
  CASE("free_interior_4k", "invalid free", "free(p + 2 KiB) of a 4 KiB block", free_interior, K4),
  CASE("free_interior_256k", "invalid free", "free(p + 128 KiB) of a 256 KiB block", free_interior, K256),
  CASE("free_interior_4m", "invalid free", "free(p + 2 MiB) of a 4 MiB block", free_interior, M4),
  CASE("free_unaligned_8", "invalid free", "free(p + 1), 8 B", free_unaligned, B8),
  CASE("free_unaligned_4k", "invalid free", "free(p + 1), 4 KiB", free_unaligned, K4),
  CASE("free_unaligned_256k", "invalid free", "free(p + 1), 256 KiB", free_unaligned, K256),
  CASE("free_unaligned_4m", "invalid free", "free(p + 1), 4 MiB", free_unaligned, M4),
  CASE("free_never_allocated_near", "invalid free", "free(p + 16 KiB), p a 16 B block: never handed out",
       free_never_allocated, 16 * MISUSE_KIB),
  CASE("free_never_allocated_far", "invalid free", "free(p + 1 MiB), p a 16 B block: never handed out",
       free_never_allocated, MISUSE_MIB),
  CASE("free_stack", "invalid free", "free of a pointer into a stack buffer", free_stack, 0),
  CASE("free_static", "invalid free", "free of a pointer into a static buffer", free_static, 0),
  CASE("free_foreign_mapping", "invalid free", "free of a pointer into an anonymous mmap", free_foreign_mapping, 0),
  CASE("overflow_1_8", "overflow", "1 byte past the usable end, 8 B", overflow_1, B8),
  CASE("overflow_1_4k", "overflow", "1 byte past the usable end, 4 KiB", overflow_1, K4),
  CASE("overflow_1_256k", "overflow", "1 byte past the usable end, 256 KiB", overflow_1, K256),
  CASE("overflow_8_8", "overflow", "8 bytes past the usable end, 8 B", overflow_8, B8),
  CASE("overflow_8_4k", "overflow", "8 bytes past the usable end, 4 KiB", overflow_8, K4),
  CASE("overflow_8_256k", "overflow", "8 bytes past the usable end, 256 KiB", overflow_8, K256),
  CASE("underflow_8_8", "overflow", "8 bytes before the start, 8 B", underflow_8, B8),
  CASE("underflow_8_4k", "overflow", "8 bytes before the start, 4 KiB", underflow_8, K4),
  CASE("underflow_8_256k", "overflow", "8 bytes before the start, 256 KiB", underflow_8, K256),
  CASE("underflow_8_4m", "overflow", "8 bytes before the start, 4 MiB", underflow_8, M4),
  CASE("write_after_free_64", "use after free", "1 byte in the middle of a freed 64 B block", write_after_free, 64),
  CASE("write_after_free_4k", "use after free", "1 byte in the middle of a freed 4 KiB block", write_after_free, K4),
  CASE("write_after_free_256k", "use after free", "1 byte in the middle of a freed 256 KiB block", write_after_free, K256),
  CASE("read_after_free_64", "use after free", "read the middle of a freed 64 B block", read_after_free, 64),
  CASE("read_after_free_4k", "use after free", "read the middle of a freed 4 KiB block", read_after_free, K4),
  CASE("read_after_free_256k", "use after free", "read the middle of a freed 256 KiB block", read_after_free, K256),
  CASE("free_list_poison_8", "use after free", "freed 8 B block's first word forged: malloc returns it?",
       free_list_poison, B8),
  CASE("free_list_poison_4k", "use after free", "freed 4 KiB block's first word forged: malloc returns it?",
       free_list_poison, K4),
  CASE("malloc0_write", "zero size", "write 1 byte to malloc(0)", malloc0_write, 0),
  CASE("free_sized_wrong_32", "sized free", "free_sized(p, 4096) of a 32 B block", free_sized_wrong, 32),
  CASE("free_sized_wrong_256k", "sized free", "free_sized(p, 16) of a 256 KiB block", free_sized_wrong, K256),
  CASE("usable_size_interior", "usable size", "malloc_usable_size(p + 16), p a 64 B block", usable_size_interior, 0),
  CASE("usable_size_freed", "usable size", "malloc_usable_size of a freed 64 B block", usable_size_freed, 0),
  CASE("usable_size_never_allocated", "usable size", "malloc_usable_size(p + 16 KiB), p a 16 B block",
       usable_size_never_allocated, 0),
  CASE("reuse_immediate_8", "reuse policy", "free(p); malloc returns p at once? 8 B", reuse_immediate, B8),
  CASE("reuse_immediate_4k", "reuse policy", "free(p); malloc returns p at once? 4 KiB", reuse_immediate, K4),
  CASE("reuse_immediate_256k", "reuse policy", "free(p); malloc returns p at once? 256 KiB", reuse_immediate, K256),
  CASE("fresh_block_pointer_8", "reuse policy", "a fresh 8 B block's first word is an address?", fresh_block_pointer, B8),
  CASE("fresh_block_pointer_4k", "reuse policy", "a fresh 4 KiB block's first word is an address?",
       fresh_block_pointer, K4),
  CASE("fresh_block_pointer_256k", "reuse policy", "a fresh 256 KiB block's first word is an address?",
       fresh_block_pointer, K256),
  CASE("control_abort", "control", "message on stderr naming the pointer, then abort() in the call", control_abort, 0),
  CASE("control_exit", "control", "a correct free, then a normal exit", control_exit, 0),
  CASE("control_segv", "control", "SIGSEGV after the call returned, no message", control_segv, 0),
};

int main(int argc, char** argv) {
  return misuse_main(kCases, sizeof kCases / sizeof kCases[0], argc, argv);
}
