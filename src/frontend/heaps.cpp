// First-class heaps (tenon_heap_*, docs/heaps.md): a heap is an instance of
// the thread-heaps engine part over the default engine's arena. Each thread
// that uses a heap gets a sub-heap of it (a thread_heap<C> of that part), found by
// the thread's heap-thread id in the heap's table; small blocks come from
// the sub-heaps' spans, large ones from the arena, recorded in slots of the
// heap. Destroy gives every span and every recorded large block back to the
// arena at once, without visiting a block.
//
// Lock-free like the rest: ids, records and slots come from counters and
// tagged stacks (CAS loops); nothing here waits for another thread.
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include <new>

#include "tenon/common/checks.h"
#include "tenon/common/id_stack.h"
#include "tenon/common/inject.h"
#include "tenon/engine/engine.h"
#include "tenon/frontend/large_owner.h"
#include "tenon/heap/heap.h"
#include "tenon/huge/huge.h"
#include "tenon/lookup/chunk_map.h"
#include "tenon/lookup/slice_index.h"
#include "tenon/platform/misuse.h"
#include "tenon/platform/os.h"
#include "tenon/tenon.h"

namespace tenon::first_class {

using config = default_config;
using parts = thread_heaps<config>;
using sub_heap = thread_heap<config>;

// Threads using first-class heaps at once (each holds an id while it lives).
constexpr std::uint32_t kMaxHeapThreads = 8192;
// First-class heaps at once (records are recycled, never unmapped).
constexpr std::uint32_t kMaxRecords = 1u << 16;
// Large blocks live in first-class heaps at once, all heaps together.
constexpr std::uint32_t kSlotsPerSegment = 4096;
constexpr std::uint32_t kMaxSlots = 1u << 20;

}  // namespace tenon::first_class

// The heap record behind a tenon_heap_t. Type-stable: records are never
// unmapped, a destroyed one waits on the free-record stack for the next
// tenon_heap_new.
struct tenon_heap {
  explicit tenon_heap(std::uint32_t i) : index(i) { heaps.set_budget(&budget); }

  tenon::first_class::parts heaps{tenon::g_default_engine.chunks};
  tenon::span_budget budget;
  // Large-block slots: every slot this heap took (a push-only list through
  // slot::all_next, walked by destroy), and those not holding a block.
  std::atomic<std::uint32_t> all_slots{0};
  struct slot_link {
    std::atomic<std::uint32_t>& operator()(std::uint32_t id) const;
  };
  tenon::id_stack<slot_link> free_slots;
  std::atomic<std::uint32_t> stack_next{0};  // link on the free-record stack
  std::uint32_t index;
  // By heap-thread id - 1: that thread's sub-heap. Plain words: an entry is
  // only used by the thread holding the id, and ids pass from an exited
  // thread to a new one through a release/acquire stack (with its sub-heaps,
  // which the new thread continues).
  tenon::first_class::sub_heap* subs[tenon::first_class::kMaxHeapThreads];
};

namespace tenon::first_class {

namespace {

// --- heap-thread ids ----------------------------------------------------

struct thread_link {
  std::atomic<std::uint32_t>& operator()(std::uint32_t id) const;
};
std::atomic<std::uint32_t> g_thread_links[kMaxHeapThreads];
constinit id_stack<thread_link> g_free_threads;
std::atomic<std::uint32_t> g_thread_count{0};
std::atomic<long> g_thread_key{-1};
__attribute__((visibility("hidden"))) constinit thread_local std::uint32_t t_thread_id
    __attribute__((tls_model("initial-exec"))) = 0;

std::atomic<std::uint32_t>& thread_link::operator()(std::uint32_t id) const { return g_thread_links[id - 1]; }

// At thread exit the id goes back for another thread, with the sub-heaps it
// names in every heap (their spans and cached blocks stay with them).
void on_thread_exit(void* value) {
  t_thread_id = 0;
  g_free_threads.push(static_cast<std::uint32_t>(reinterpret_cast<std::uintptr_t>(value)));
}

// Created lazily with no once-primitive: racers each create a key, one CAS
// wins, the others delete theirs (as thread_heaps::thread_key). Above the
// program's first keys, as the default engine's: an id taken by their
// destructors, in any round, the last one included, comes back in that
// round (preload.late_free_threads_heaps_last_round).
long thread_key() {
  long key = g_thread_key.load(std::memory_order_acquire);
  if (key != -1) return key;
  long k = os::thread_key_create_above(on_thread_exit, kHeapsThreadKeyMinSlot);
  if (k == -1) return -1;
  if (g_thread_key.compare_exchange_strong(key, k, std::memory_order_acq_rel)) return k;
  os::thread_key_delete(k);
  return key;
}

// The calling thread's id (1-based), claimed on its first heap call; 0 if
// none can be had (kMaxHeapThreads threads hold one, or no thread key).
std::uint32_t claim_thread_id() {
  TENON_INJECT_POINT("heaps.thread");
  long key = thread_key();
  if (key == -1) return 0;  // without the exit hook the id would never come back
  unsigned retries = 0;
  std::uint32_t id = g_free_threads.pop(&retries);
  if (!id) {
    std::uint32_t n = g_thread_count.load(std::memory_order_relaxed);
    do {
      if (n >= kMaxHeapThreads) return 0;
    } while (!g_thread_count.compare_exchange_weak(n, n + 1, std::memory_order_relaxed));
    id = n + 1;
  }
  if (!os::thread_key_set(key, reinterpret_cast<void*>(std::uintptr_t{id}))) {
    g_free_threads.push(id);
    return 0;
  }
  t_thread_id = id;
  return id;
}

inline std::uint32_t thread_id() {
  if (std::uint32_t id = t_thread_id) return id;
  return claim_thread_id();
}

// The calling thread's sub-heap of h, attached on first use; nullptr
// (errno ENOMEM) if none can be had.
inline sub_heap* sub_of(tenon_heap* h) {
  std::uint32_t id = thread_id();
  if (!id) {
    errno = ENOMEM;
    return nullptr;
  }
  sub_heap*& sub = h->subs[id - 1];
  if (__builtin_expect(sub != nullptr, 1)) return sub;
  sub = h->heaps.attach_unbound();
  if (!sub) errno = ENOMEM;
  return sub;
}

// --- records --------------------------------------------------------------

std::atomic<tenon_heap*> g_records[kMaxRecords];
std::atomic<std::uint32_t> g_record_count{0};
struct record_link {
  std::atomic<std::uint32_t>& operator()(std::uint32_t id) const {
    return g_records[id - 1].load(std::memory_order_acquire)->stack_next;
  }
};
constinit id_stack<record_link> g_free_records;

std::size_t record_bytes() {
  std::size_t page = os::page_size();
  return (sizeof(tenon_heap) + page - 1) & ~(page - 1);
}

tenon_heap* new_record() {
  TENON_INJECT_POINT("heaps.record");
  unsigned retries = 0;
  if (std::uint32_t id = g_free_records.pop(&retries)) return g_records[id - 1].load(std::memory_order_acquire);
  // Memory first, then the index: every index below the count has its record.
  void* mem = os::reserve(record_bytes(), os::page_size());
  if (!mem) return nullptr;
  std::uint32_t n = g_record_count.load(std::memory_order_relaxed);
  do {
    if (n >= kMaxRecords) {
      os::release(mem, record_bytes());
      return nullptr;
    }
  } while (!g_record_count.compare_exchange_weak(n, n + 1, std::memory_order_relaxed));
  auto* h = new (mem) tenon_heap(n);
  memset(h->subs, 0, sizeof h->subs);
  g_records[n].store(h, std::memory_order_release);
  return h;
}

// --- large-block slots ----------------------------------------------------

// A live large or huge block of a heap. The block's span (huge header)
// names the slot as its owner (large_owner); `block` is the user pointer
// while the block is live and nullptr otherwise: whoever takes it out (free
// or destroy) releases the block, exactly once.
struct large_slot : large_owner {
  std::atomic<void*> block{nullptr};
  tenon_heap* home = nullptr;
  std::size_t bytes = 0;  // counted against home's limit
  bool huge = false;
  std::atomic<std::uint32_t> stack_next{0};  // link on home's free_slots
  std::atomic<std::uint32_t> all_next{0};    // link on home's all_slots
  std::uint32_t id = 0;
};

std::atomic<large_slot*> g_slot_segments[kMaxSlots / kSlotsPerSegment];
std::atomic<std::uint32_t> g_slot_count{0};

large_slot* slot_at(std::uint32_t id) {
  std::uint32_t i = id - 1;
  return g_slot_segments[i / kSlotsPerSegment].load(std::memory_order_acquire) + i % kSlotsPerSegment;
}

// The segment that holds slot index i, reserved if it is the first there.
large_slot* slot_segment(std::uint32_t i) {
  std::atomic<large_slot*>& entry = g_slot_segments[i / kSlotsPerSegment];
  large_slot* seg = entry.load(std::memory_order_acquire);
  if (seg) return seg;
  constexpr std::size_t bytes = kSlotsPerSegment * sizeof(large_slot);
  auto* fresh = static_cast<large_slot*>(os::reserve(bytes, os::page_size()));
  if (!fresh) return nullptr;
  if (entry.compare_exchange_strong(seg, fresh, std::memory_order_acq_rel)) return fresh;
  os::release(fresh, bytes);
  return seg;
}

void free_large_block(large_owner* owner, void* p) noexcept;

// Give the block p, just taken out of the slot, back to the arena (a large
// block) or the huge layer, with its bytes to the heap's budget.
void release_block(large_slot* slot, void* p) {
  if (slot->huge) {
    // Clears the header's owner. The slot was the block's, so it is live,
    // and only a plain free of p racing this one (a double free, which
    // holds the block for an instant: engine_front) can hold it now.
    if (!g_default_engine.huge.free(p)) report_misuse("free", p, "double free", 0);
  } else {
    span* s = lookup::span_of(p);
    s->owner.store(nullptr, std::memory_order_relaxed);  // published by the arena's release
    g_default_engine.large.free(s, p, nullptr);
  }
  slot->home->budget.give(slot->bytes);
}

// A slot of h with no block: a freed one of h's, or a new one.
large_slot* take_slot(tenon_heap* h) {
  TENON_INJECT_POINT("heaps.slot");
  unsigned retries = 0;
  if (std::uint32_t id = h->free_slots.pop(&retries)) return slot_at(id);
  std::uint32_t n = g_slot_count.load(std::memory_order_relaxed);
  do {
    if (n >= kMaxSlots || !slot_segment(n)) return nullptr;
  } while (!g_slot_count.compare_exchange_weak(n, n + 1, std::memory_order_relaxed));
  auto* slot = new (slot_at(n + 1)) large_slot();
  slot->free = free_large_block;
  slot->home = h;
  slot->id = n + 1;
  // Push-only while the heap lives; destroy reads it with no one pushing.
  std::uint32_t head = h->all_slots.load(std::memory_order_relaxed);
  do slot->all_next.store(head, std::memory_order_relaxed);
  while (!h->all_slots.compare_exchange_weak(head, slot->id, std::memory_order_release, std::memory_order_relaxed));
  return slot;
}

// free(p) of a heap's large or huge block, from any thread (engine_front
// routes it here through the span's or header's owner).
void free_large_block(large_owner* owner, void* p) noexcept {
  auto* slot = static_cast<large_slot*>(owner);
  void* expect = p;
  // Not live in this slot (freed twice): ignored, as a double free must not
  // release the block a second time.
  if (!slot->block.compare_exchange_strong(expect, nullptr, std::memory_order_acq_rel, std::memory_order_relaxed))
    return;
  release_block(slot, p);
  slot->home->free_slots.push(slot->id);
}

}  // namespace

}  // namespace tenon::first_class

std::atomic<std::uint32_t>& tenon_heap::slot_link::operator()(std::uint32_t id) const {
  return tenon::first_class::slot_at(id)->stack_next;
}

namespace tenon::first_class {

namespace {

// --- allocation -----------------------------------------------------------

bool too_big(std::size_t n) {
  if (n <= PTRDIFF_MAX) return false;
  errno = ENOMEM;
  return true;
}

// The malloc fast path of heap.h, on the calling thread's sub-heap.
inline void* alloc_small(tenon_heap* h, unsigned cls) {
  sub_heap* sub = sub_of(h);
  if (!sub) return nullptr;
  span* s = sub->current[cls];
  block* b = s->free;
  if (__builtin_expect(b != nullptr, 1)) return take_head<config>(s, b);
  return h->heaps.alloc_slow(sub, cls);
}

// `bytes` counted against h's limit. At the limit, the calling thread's
// sub-heap first gives back the spans it keeps with no block in use (its
// empty current spans, spares and cached blocks' spans), as a small
// allocation at the limit does (thread_heaps::make_room).
bool take_budget(tenon_heap* h, std::size_t bytes) {
  if (h->budget.take(bytes)) return true;
  sub_heap* sub = t_thread_id ? h->subs[t_thread_id - 1] : nullptr;
  return sub && h->heaps.make_room(sub) && h->budget.take(bytes);
}

// A large or huge block (kMaxSmall < n, or a big alignment) recorded in a
// slot of the heap.
void* alloc_large(tenon_heap* h, std::size_t n, std::size_t align, bool zero) {
  if (n == 0) n = 1;
  std::size_t slack = align > kSliceSize ? align - kSliceSize : 0;
  bool huge = n > kMaxLarge || n + slack > kMaxLarge || align >= kChunkSize;
  std::size_t bytes;
  if (huge) {
    std::size_t page = os::page_size();
    if (n > (std::size_t{1} << kAddressBits)) {
      errno = ENOMEM;
      return nullptr;
    }
    bytes = (n + page - 1) & ~(page - 1);  // what the huge layer maps for it, less its header
  } else {
    bytes = ((n + slack + kSliceSize - 1) >> kSliceShift) << kSliceShift;
  }
  if (!take_budget(h, bytes)) {
    errno = ENOMEM;
    return nullptr;
  }
  large_slot* slot = take_slot(h);
  if (!slot) {
    h->budget.give(bytes);
    errno = ENOMEM;
    return nullptr;
  }
  bool zeroed = false;
  chunk* hint = nullptr;
  void* p = huge ? g_default_engine.huge.alloc(n, align, &zeroed)
                 : g_default_engine.large.alloc(n, align, &zeroed, &hint, nullptr);
  if (!p) {  // errno is ENOMEM
    h->budget.give(bytes);
    h->free_slots.push(slot->id);
    return nullptr;
  }
  slot->bytes = bytes;
  slot->huge = huge;
  slot->block.store(p, std::memory_order_relaxed);
  if (huge) {
    // A plain field: whoever frees p got it from us after this store.
    huge_lookup(p)->owner = static_cast<large_owner*>(slot);
  } else {
    // Release: the slot's fields before any free that finds it through the
    // span (the freeing thread acquires; see engine_front).
    lookup::span_of(p)->owner.store(static_cast<large_owner*>(slot), std::memory_order_release);
  }
  if (zero && !zeroed) memset(p, 0, n);
  return p;
}

void* heap_alloc_n(tenon_heap* h, std::size_t n) {
  if (n <= kMaxSmall) return alloc_small(h, size_to_class(n));
  if (too_big(n)) return nullptr;
  return alloc_large(h, n, 0, false);
}

void* heap_alloc_aligned(tenon_heap* h, std::size_t align, std::size_t n) {
  if (align <= kMinAlign && (n >= kMinAlign || align <= 8)) return heap_alloc_n(h, n);
  if (n <= kMaxSmall && align <= kMaxSmall) {
    // A class whose block size is a multiple of the alignment gives aligned
    // blocks (spans start on 64 KiB boundaries), as engine_front does.
    for (unsigned c = size_to_class(n < align ? align : n); c < kNumClasses; ++c)
      if (kClasses.size[c] % align == 0) return alloc_small(h, c);
  }
  if (too_big(n)) return nullptr;
  return alloc_large(h, n, align, false);
}

// Every block of h back to the arena; h stays usable.
void drop(tenon_heap* h) {
  h->heaps.drop_all();
  h->free_slots.pop_all();  // rebuilt from the list of every slot
  for (std::uint32_t id = h->all_slots.load(std::memory_order_acquire); id;) {
    large_slot* slot = slot_at(id);
    if (void* p = slot->block.exchange(nullptr, std::memory_order_acq_rel)) release_block(slot, p);
    std::uint32_t next = slot->all_next.load(std::memory_order_relaxed);
    h->free_slots.push(id);
    id = next;
  }
  // Every span and block given back: nothing is left counted.
  TENON_CHECK(h->budget.held.load(std::memory_order_relaxed) == 0);
}

}  // namespace

}  // namespace tenon::first_class

using namespace tenon::first_class;

extern "C" {

TENON_API tenon_heap_t* tenon_heap_new(const tenon_heap_options* options) {
  tenon_heap* h = new_record();
  if (!h) {
    errno = ENOMEM;
    return nullptr;
  }
  std::size_t limit = options ? options->limit : 0;
  h->budget.limit = limit ? limit : ~std::size_t{0};
  // The exit key now, not at a thread's first heap call: a program makes
  // its heaps before its threads, and the key finds its slot above the
  // program's keys only while the process is single-threaded.
  thread_key();
  return h;
}

TENON_API void tenon_heap_destroy(tenon_heap_t* h) {
  if (!h) return;
  drop(h);
  g_free_records.push(h->index + 1);
}

TENON_API void tenon_heap_reset(tenon_heap_t* h) {
  if (h) drop(h);
}

TENON_API void* tenon_heap_malloc(tenon_heap_t* h, size_t n) {
  if (!h) {
    errno = EINVAL;
    return nullptr;
  }
  return heap_alloc_n(h, n);
}

TENON_API void* tenon_heap_calloc(tenon_heap_t* h, size_t count, size_t size) {
  if (!h) {
    errno = EINVAL;
    return nullptr;
  }
  std::size_t n;
  if (__builtin_mul_overflow(count, size, &n)) {
    errno = ENOMEM;
    return nullptr;
  }
  if (n > tenon::kMaxSmall) return too_big(n) ? nullptr : alloc_large(h, n, 0, true);
  void* p = alloc_small(h, tenon::size_to_class(n));
  if (p) memset(p, 0, n);
  return p;
}

TENON_API void* tenon_heap_aligned_alloc(tenon_heap_t* h, size_t align, size_t n) {
  if (!h || align == 0 || (align & (align - 1)) != 0) {
    errno = EINVAL;
    return nullptr;
  }
  return heap_alloc_aligned(h, align, n);
}

TENON_API void tenon_heap_free(tenon_heap_t* h, void* p) {
  if (!p) return;
  // A small block of this thread's own sub-heap: the local free fast path.
  if (h && tenon::lookup::is_regular(p)) {
    tenon::span* s = tenon::lookup::span_of(p);
    std::uint32_t id = t_thread_id;
    if (id && s->kind == tenon::span_kind::small) {
      sub_heap* sub = h->subs[id - 1];
      if (sub && s->owner.load(std::memory_order_relaxed) == sub) {
        tenon::free_to_own_span(h->heaps, sub, s, static_cast<tenon::block*>(p));
        return;
      }
    }
  }
  tenon_free(p);  // any other block: routed by its span's owner
}

TENON_API void* tenon_heap_realloc(tenon_heap_t* h, void* p, size_t n) {
  if (!h) {
    errno = EINVAL;
    return nullptr;
  }
  if (!p) return heap_alloc_n(h, n);
  if (too_big(n)) return nullptr;
  if (n == 0) {
    tenon_heap_free(h, p);
    return heap_alloc_n(h, 0);
  }
  std::size_t old = tenon_malloc_usable_size(p);
  // Outside tenon's chunks a usable size of 0 is no block (no glibc header,
  // or inside a huge block): realloc's answer, before anything is allocated
  // (Heaps.ReallocOfAPointerNoAllocatorMadeIsEinval).
  if (old == 0 && !tenon::lookup::in_chunk(p)) {
    errno = EINVAL;
    return nullptr;
  }
  // Stays in place when p is a small block of this thread's sub-heap that
  // still fits well (as realloc does); anything else moves into h. A thread
  // with no sub-heap of h yet has none to compare: a span no heap owns
  // (owner null: its heap was given up) is not h's.
  if (tenon::lookup::in_chunk(p)) {
    tenon::span* s = tenon::lookup::span_of(p);
    void* owner = s->owner.load(std::memory_order_relaxed);
    sub_heap* sub = t_thread_id ? h->subs[t_thread_id - 1] : nullptr;
    if (s->kind == tenon::span_kind::small && sub && owner == sub) {
      tenon::check_realloc_own(sub, s, p);  // as realloc checks its own blocks
      if (n <= s->block_size && n >= s->block_size / 2) return p;
    }
  }
  void* q = heap_alloc_n(h, n);
  if (!q) return nullptr;  // p untouched
  memcpy(q, p, old < n ? old : n);
  tenon_heap_free(h, p);
  return q;
}

}  // extern "C"
