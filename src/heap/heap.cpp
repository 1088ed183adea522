// Slow paths of the thread heaps. Each function says why it never waits.
#include "heap/heap.h"

#include <errno.h>
#include <pthread.h>

#include <bit>
#include <new>

#include "common/id_stack.h"
#include "common/inject.h"
#include "large/large.h"
#include "platform/os.h"

namespace tenon {

constinit span g_empty_span{};
constinit heap g_empty_heap{&g_empty_span};
constinit thread_local heap* t_heap = &g_empty_heap;

namespace {

// ---------------------------------------------------------------- partial spans
// Spans without an owner that have free blocks, per class: published by
// exiting threads and by the first remote free into a floating span; popped
// ("adopted") by any heap that needs a span of that class.
struct span_link {
  std::atomic<std::uint32_t>& operator()(std::uint32_t id) const { return span_from_id(id)->stack_next; }
};
id_stack<span_link> g_partial[kNumClasses];

void partial_push(span* s, stats* st) {
  unsigned retries = g_partial[s->cls].push(span_id(s));
  if (retries && st) st->add(stat_retry_partial_stack, retries);
}


// ---------------------------------------------------------------- heap storage
// Heaps live in segments of kHeapsPerSegment, each reserved when the heap
// count first reaches it, and are never unmapped (type-stable: a freer may
// bump a notify counter of a heap that has since been recycled; that only
// causes one needless scan). Released heaps are recycled through a tagged
// stack of heap indices (+1, so 0 means none).
constexpr std::size_t kSegmentBytes = kHeapsPerSegment * sizeof(heap);
std::atomic<heap*> g_heap_segments[kMaxHeaps / kHeapsPerSegment];
std::atomic<std::uint32_t> g_heap_count{0};

// Index below the heap count: its segment exists.
heap* heap_at(std::uint32_t index) {
  return g_heap_segments[index / kHeapsPerSegment].load(std::memory_order_acquire) + index % kHeapsPerSegment;
}

struct heap_link {
  std::atomic<std::uint32_t>& operator()(std::uint32_t id) const { return heap_at(id - 1)->stack_next; }
};
id_stack<heap_link> g_free_heaps;

// The segment that holds heap `index`, reserved if it is the first there.
// nullptr if the OS refuses (nothing is claimed then: the next call retries).
heap* heap_segment(std::uint32_t index) {
  std::atomic<heap*>& entry = g_heap_segments[index / kHeapsPerSegment];
  heap* seg = entry.load(std::memory_order_acquire);
  if (seg) return seg;
  auto* fresh = static_cast<heap*>(os::reserve(kSegmentBytes, os::page_size()));
  if (!fresh) return nullptr;
  // Racing threads each reserve; one wins the CAS, the others give theirs back.
  if (entry.compare_exchange_strong(seg, fresh, std::memory_order_acq_rel)) return fresh;
  os::release(fresh, kSegmentBytes);
  return seg;
}

// ---------------------------------------------------------------- thread exit hook
// A pthread key whose destructor releases the heap. Created lazily with no
// once-primitive: racers each create a key, one CAS wins, losers delete theirs.
constexpr long kNoKey = -1;
std::atomic<long> g_key{kNoKey};

void heap_release(heap* h);

// Set once this thread's heap has been released by the hook. Calls the
// thread makes after that (glibc frees its dlerror and strerror buffers in
// __libc_thread_freeres, after every key destructor; a later key's
// destructor may allocate) must not attach a heap: nothing would release it
// (one heap leaked per such thread, and malloc failed after 65,535 of them).
// They are served without a heap instead. Read only on slow paths.
constinit thread_local bool t_heap_released = false;

void on_thread_exit(void* arg) {
  auto* h = static_cast<heap*>(arg);
  t_heap = &g_empty_heap;
  t_heap_released = true;
  heap_release(h);
}

long thread_key() {
  long key = g_key.load(std::memory_order_acquire);
  if (key != kNoKey) return key;
  pthread_key_t k;
  if (pthread_key_create(&k, on_thread_exit) != 0) return kNoKey;
  TENON_INJECT_POINT("heap.key");
  if (g_key.compare_exchange_strong(key, static_cast<long>(k), std::memory_order_acq_rel))
    return static_cast<long>(k);
  pthread_key_delete(k);
  return key;
}

heap* heap_attach() {
  TENON_INJECT_POINT("heap.attach");
  unsigned retries = 0;
  heap* h;
  if (std::uint32_t id = g_free_heaps.pop(&retries)) {
    h = heap_at(id - 1);
    // Closed when its last thread exited; nothing can be on it.
    h->inbox.store(0, std::memory_order_relaxed);
  } else {
    // The index's segment exists before the index is claimed, so every
    // index below the count has its storage.
    std::uint32_t index = g_heap_count.load(std::memory_order_relaxed);
    do {
      if (index >= kMaxHeaps || !heap_segment(index)) return nullptr;
    } while (!g_heap_count.compare_exchange_weak(index, index + 1, std::memory_order_release,
                                                 std::memory_order_relaxed));
    h = new (heap_at(index)) heap(&g_empty_span);
    h->index = index;
  }
  if (retries) h->st.add(stat_retry_heap_stack, retries);
  h->st.add(stat_heaps_attached);
  // Installed before pthread_setspecific, which may itself call calloc (keys
  // past the first 32 need a second-level array): that nested call finds the heap.
  t_heap = h;
  long key = thread_key();
  if (key != kNoKey) pthread_setspecific(static_cast<pthread_key_t>(key), h);
  return h;
}

// ---------------------------------------------------------------- span helpers
void list_push(span** head, span* s) {
  s->prev = nullptr;
  s->next = *head;
  if (*head) (*head)->prev = s;
  *head = s;
}

void list_unlink(span** head, span* s) {
  if (s->prev) s->prev->next = s->next; else *head = s->next;
  if (s->next) s->next->prev = s->prev;
  s->next = s->prev = nullptr;
}

// Carve the next blocks of a span into its local free list, which must be
// empty (the carved chain replaces it): about a page at a time, so memory is
// touched only as it is used.
void carve(span* s) {
  std::uint32_t size = s->block_size;
  std::uint32_t n = static_cast<std::uint32_t>(4096 / size);
  if (n == 0) n = 1;
  if (n > s->capacity - s->carved) n = s->capacity - s->carved;
  char* first = s->start + std::size_t{s->carved} * size;
  char* p = first;
  for (std::uint32_t i = 1; i < n; ++i, p += size) reinterpret_cast<block*>(p)->next = reinterpret_cast<block*>(p + size);
  reinterpret_cast<block*>(p)->next = nullptr;
  s->free = reinterpret_cast<block*>(first);
  s->carved += n;
}

// Append a chain taken from the remote list to the local free list.
void merge_free(span* s, block* chain, std::uint32_t count) {
  if (!chain) return;
  s->used -= count;
  if (!s->free) { s->free = chain; return; }
  block* tail = chain;
  while (tail->next) tail = tail->next;
  tail->next = s->free;
  s->free = chain;
}

// The owner takes every remotely freed block in one exchange. Also clears a
// stale kFull flag, which is right for a span that is not on the full list.
void take_remote(span* s) {
  TENON_INJECT_POINT("remote.collect");
  std::uint64_t w = s->remote.exchange(0, std::memory_order_acquire);
  merge_free(s, remote_word::head(w), remote_word::count(w));
}

bool collect(span* s) {
  if (!remote_word::head(s->remote.load(std::memory_order_relaxed))) return false;
  take_remote(s);
  return s->free != nullptr;
}

bool refill(span* s) {
  if (s->carved < s->capacity) {
    carve(s);
    return true;
  }
  return collect(s);
}

void release_empty(heap* h, span* s) {
  s->owner.store(nullptr, std::memory_order_relaxed);
  s->state = span_state::detached;
  arena::release_span(s, &h->st);
}

// A span that just became empty (not on any list): keep it as the class's
// spare if the class is one whose spans empty often and no spare is kept,
// else give its slices back.
void retire_empty(heap* h, class_lists& l, span* s) {
  if (s->capacity <= kKeepEmptyMaxBlocks && !l.empty) {
    s->state = span_state::avail;
    s->low_mark = 1;
    l.empty = s;
    return;
  }
  release_empty(h, s);
}

void make_current(heap* h, unsigned cls, span* s) {
  s->state = span_state::current;
  s->used += kCurrentBias;
  s->low_mark = 1;
  h->current[cls] = s;
}

// A span with no free block goes on the full list, its remote word flagged
// so that the first remote free into it notifies us. Returns false instead if
// remote frees had arrived (merged now: the span has blocks again).
bool park_full(class_lists& l, span* s) {
  TENON_INJECT_POINT("span.retire");
  std::uint64_t old = s->remote.exchange(remote_word::kFull, std::memory_order_acq_rel);
  if (remote_word::head(old)) {
    merge_free(s, remote_word::head(old), remote_word::count(old));
    // Drop the flag again; if a free raced in, the flag is consumed by it and
    // costs one spurious notification, nothing more.
    std::uint64_t expect = remote_word::kFull;
    s->remote.compare_exchange_strong(expect, 0, std::memory_order_relaxed);
    return false;
  }
  s->state = span_state::full;
  s->low_mark = s->used;  // the next local free (used - 1) reaches the slow path
  list_push(&l.full, s);
  ++l.nfull;
  return true;
}

// The current span has nothing left: park it as full. Returns true instead
// if remote frees arrived meanwhile (the span then stays current).
bool retire_full(heap* h, unsigned cls, span* s) {
  s->used -= kCurrentBias;
  if (park_full(h->lists[cls], s)) {
    h->current[cls] = &g_empty_span;
    return false;
  }
  s->used += kCurrentBias;
  return true;
}

// Remote frees un-fulled some of our full spans: move those back to avail.
// Called only once enough notifications have gathered (1 per 16 full spans),
// so the walk is paid for by the spans it recovers.
void scan_full(heap* h, unsigned cls) {
  class_lists& l = h->lists[cls];
  l.notify.exchange(0, std::memory_order_acquire);
  h->st.add(stat_full_scans);
  for (span* s = l.full; s;) {
    span* next = s->next;
    if (remote_word::head(s->remote.load(std::memory_order_acquire))) {
      list_unlink(&l.full, s);
      --l.nfull;
      collect(s);
      s->low_mark = 1;
      if (s->used == 0) {
        retire_empty(h, l, s);
      } else {
        s->state = span_state::avail;
        list_push(&l.avail, s);
      }
    }
    s = next;
  }
}

// A fresh span of a class owned by `owner`, or by nobody (nullptr) when a
// thread without a heap forms it (see alloc_heapless).
span* form_small_span(heap* owner, unsigned cls, chunk** hint, stats* st) {
  span* s = arena::take_span(kClasses.slices[cls], hint, st);
  if (!s) return nullptr;
  s->kind = span_kind::small;
  s->cls = static_cast<std::uint8_t>(cls);
  s->block_size = kClasses.size[cls];
  s->capacity = static_cast<std::uint32_t>((std::size_t{s->nslices} << kSliceShift) / s->block_size);
  s->carved = 0;
  s->free = nullptr;
  s->used = 0;
  s->low_mark = 1;
  s->next = s->prev = nullptr;
  s->remote.store(0, std::memory_order_relaxed);
  s->owner.store(owner, std::memory_order_release);  // see heap_free_other
  if (st) st->add(stat_spans_formed); else stat_add_shared(orphan_stats(), stat_spans_formed);
  return s;
}

span* new_small_span(heap* h, unsigned cls) { return form_small_span(h, cls, &h->chunk_hint, &h->st); }

// Take every unowned span of a class (one exchange) and make it ours: empty
// ones go back, the others join our lists. Unowned spans only receive remote
// frees onto their own lists; adopted one at a time from a LIFO stack, the
// older ones were never reached again and never emptied (mstress, where each
// round's threads exit, grew round after round). Owned again, their frees
// reach us through the inbox and they empty and are released like any other.
void absorb_partials(heap* h, unsigned cls) {
  class_lists& l = h->lists[cls];
  for (std::uint32_t id = g_partial[cls].pop_all(); id;) {
    span* s = span_from_id(id);
    id = s->stack_next.load(std::memory_order_relaxed);
    TENON_INJECT_POINT("span.adopt");
    s->owner.store(h, std::memory_order_release);  // see heap_free_other
    h->st.add(stat_spans_adopted);
    take_remote(s);
    s->low_mark = 1;
    if (s->used == 0) {
      retire_empty(h, l, s);
    } else if (s->free || s->carved < s->capacity || !park_full(l, s)) {
      s->state = span_state::avail;
      list_push(&l.avail, s);
    }
  }
}

// Before this heap takes fresh memory: the unowned spans of the class it
// needs, and once every kSweepEvery times those of every class (so that a
// class nobody allocates any more is still reclaimed). Sweeping every class
// every time made each starting thread take all spans (mstress: 66,157
// absorptions in 320 thread lifetimes, 1.5x glibc's time at 16 threads).
void absorb_before_growing(heap* h, unsigned cls) {
  if (!g_partial[cls].empty()) absorb_partials(h, cls);
  if (++h->forms_since_sweep < kSweepEvery) return;
  h->forms_since_sweep = 0;
  for (unsigned c = 0; c < kNumClasses; ++c)
    if (!g_partial[c].empty()) absorb_partials(h, c);
}

// A span this heap already owns for the class: partly used ones first, then
// the kept empty one.
span* take_owned(class_lists& l) {
  if (span* s = l.avail) {
    list_unlink(&l.avail, s);
    return s;
  }
  span* s = l.empty;
  l.empty = nullptr;
  return s;
}

span* find_span(heap* h, unsigned cls) {
  class_lists& l = h->lists[cls];
  std::uint32_t notes = l.notify.load(std::memory_order_relaxed);
  if (notes && notes >= 1 + l.nfull / 16) scan_full(h, cls);
  if (span* s = take_owned(l)) return s;
  // Before taking fresh memory: unowned spans, and whatever remote frees
  // gave back to our full spans.
  absorb_before_growing(h, cls);
  if (notes) scan_full(h, cls);
  if (span* s = take_owned(l)) return s;
  return new_small_span(h, cls);
}

block* pop(span* s) {
  block* b = s->free;
  s->free = b->next;
  ++s->used;
  return b;
}

// Hand a chain of blocks to a span we do not own, in one CAS.
void push_remote(span* s, block* head, block* tail, std::uint32_t n, stats* st) {
  std::uint64_t old = s->remote.load(std::memory_order_relaxed);
  for (;;) {
    tail->next = remote_word::head(old);
    std::uint64_t desired = remote_word::make(head, remote_word::count(old) + n, 0);
    TENON_INJECT_POINT("remote.push");
    if (s->remote.compare_exchange_weak(old, desired, std::memory_order_acq_rel, std::memory_order_relaxed)) break;
    if (st) st->add(stat_retry_remote_push); else stat_add_shared(orphan_stats(), stat_retry_remote_push);
  }
  // Whoever clears a flag does what the flag asks (exactly one pusher can).
  if (old & remote_word::kFull) {
    if (heap* o = s->owner.load(std::memory_order_acquire)) o->lists[s->cls].notify.fetch_add(1, std::memory_order_release);
  } else if (old & remote_word::kFloating) {
    partial_push(s, st);
  }
}

// Sort a chain taken from our inbox into our spans. A block whose span we no
// longer own (we gave it up, or it was freed to us after our thread's exit
// and a new thread now uses this heap) goes to that span's own remote list.
void sort_inbox_chain(heap* h, block* b) {
  while (b) {
    block* next = b->next;
    span* s = span_of(b);
    if (s->owner.load(std::memory_order_relaxed) == h) {
      free_to_own_span(h, s, b);
    } else {
      b->next = nullptr;
      push_remote(s, b, b, 1, &h->st);
    }
    b = next;
  }
}

void drain_inbox(heap* h) {
  if (h->inbox.load(std::memory_order_relaxed) == 0) return;
  TENON_INJECT_POINT("inbox.drain");
  auto chain = h->inbox.exchange(0, std::memory_order_acquire);
  sort_inbox_chain(h, reinterpret_cast<block*>(chain));
}

// Hand a chain to its destination heap's inbox in one CAS. If that heap's
// thread has exited (inbox closed), each block goes to its span instead.
void deliver(heap* dest, block* head, block* tail, stats* st) {
  std::uintptr_t old = dest->inbox.load(std::memory_order_relaxed);
  for (;;) {
    if (old == kInboxClosed) {
      tail->next = nullptr;  // a failed CAS may have linked the tail to a stale chain
      for (block* b = head; b;) {
        block* next = b->next;
        b->next = nullptr;
        push_remote(span_of(b), b, b, 1, st);
        b = next;
      }
      return;
    }
    tail->next = reinterpret_cast<block*>(old);
    TENON_INJECT_POINT("inbox.push");
    if (dest->inbox.compare_exchange_weak(old, reinterpret_cast<std::uintptr_t>(head), std::memory_order_release,
                                          std::memory_order_relaxed))
      return;
    if (st) st->add(stat_retry_inbox); else stat_add_shared(orphan_stats(), stat_retry_inbox);
  }
}

void flush_outbox(heap* h, outbox& ob) {
  h->st.add(stat_remote_batches);
  heap* dest = ob.dest;
  block *head = ob.head, *tail = ob.tail;
  ob.count = 0;
  ob.head = ob.tail = nullptr;
  h->out_pending &= ~(1u << (&ob - h->out));
  deliver(dest, head, tail, &h->st);
}

// Make an unowned span with blocks in use findable by the next heap that
// needs its class: on the partial stack if it has a free or uncarved block,
// else floating until the first free into it publishes it. Never waits.
void publish_unowned(span* s, stats* st) {
  if (s->free || s->carved < s->capacity) {
    partial_push(s, st);
    return;
  }
  std::uint64_t expect = 0;
  TENON_INJECT_POINT("span.float");
  if (s->remote.compare_exchange_strong(expect, remote_word::kFloating, std::memory_order_acq_rel,
                                        std::memory_order_relaxed))
    return;
  // A free arrived between the exchange and the CAS: the span has blocks now.
  std::uint64_t w = s->remote.exchange(0, std::memory_order_acquire);
  merge_free(s, remote_word::head(w), remote_word::count(w));
  partial_push(s, st);
}

// Give up a span at thread exit: publish it for adoption, or let it float
// until a free into it publishes it. Never waits for anyone.
void abandon(heap* h, span* s) {
  TENON_INJECT_POINT("span.abandon");
  std::uint64_t w = s->remote.exchange(0, std::memory_order_acquire);
  merge_free(s, remote_word::head(w), remote_word::count(w));
  s->next = s->prev = nullptr;
  s->low_mark = 1;
  if (s->used == 0) {
    release_empty(h, s);
    return;
  }
  s->state = span_state::detached;
  s->owner.store(nullptr, std::memory_order_release);
  h->st.add(stat_spans_abandoned);
  publish_unowned(s, &h->st);
}

// An allocation on a thread whose heap was released at its exit: borrow an
// unowned span of the class (or form one), take one block, and publish the
// span again at once, exactly as an exiting thread does. No heap is attached,
// so nothing is left behind. The cost, a pop and a push on the partial stack
// (about what a thread exit costs per span), is paid only by calls made
// after the thread-exit hook; the malloc fast path is unchanged.
void* alloc_heapless(unsigned cls) {
  unsigned retries = 0;
  span* s;
  if (std::uint32_t id = g_partial[cls].pop(&retries)) {
    s = span_from_id(id);
    // Off every list and owned by nobody: its owner-only fields are ours
    // until we publish it again; frees into it meanwhile go to its remote list.
    take_remote(s);
  } else {
    chunk* hint = nullptr;
    s = form_small_span(nullptr, cls, &hint, nullptr);
    if (!s) {
      errno = ENOMEM;
      return nullptr;
    }
  }
  if (retries) stat_add_shared(orphan_stats(), stat_retry_partial_stack, retries);
  TENON_INJECT_POINT("span.borrow");
  // A span on the partial stack has a free or an uncarved block (it is
  // published only then, or with the remote frees just taken).
  if (!s->free) carve(s);
  block* b = pop(s);
  publish_unowned(s, nullptr);
  return b;
}

// A small block freed on a thread with no heap (released at its exit, or
// none to be had): to its owner's inbox, or to its span's remote list when
// the span has no owner. One CAS, unbatched: such frees are rare.
void free_heapless(span* s, block* b) {
  b->next = nullptr;
  // Acquire: see heap_free_other.
  if (heap* dest = s->owner.load(std::memory_order_acquire))
    deliver(dest, b, b, nullptr);
  else
    push_remote(s, b, b, 1, nullptr);
}

void heap_release(heap* h) {
  TENON_INJECT_POINT("heap.release");
  // Close the inbox first: whatever arrives later goes to the spans directly.
  TENON_INJECT_POINT("inbox.close");
  auto chain = h->inbox.exchange(kInboxClosed, std::memory_order_acquire);
  sort_inbox_chain(h, reinterpret_cast<block*>(chain));
  heap_flush_remote(h);
  for (unsigned cls = 0; cls < kNumClasses; ++cls) {
    if (span* s = h->current[cls]; s != &g_empty_span) {
      s->used -= kCurrentBias;
      h->current[cls] = &g_empty_span;
      abandon(h, s);
    }
    class_lists& l = h->lists[cls];
    for (span* lists[2] = {l.avail, l.full}; span* first : lists)
      for (span* s = first; s;) {
        span* next = s->next;
        abandon(h, s);
        s = next;
      }
    if (l.empty) release_empty(h, l.empty);
    l.avail = l.full = l.empty = nullptr;
    l.nfull = 0;
    l.notify.store(0, std::memory_order_relaxed);
  }
  h->st.add(stat_heaps_released);
  unsigned retries = g_free_heaps.push(h->index + 1);
  if (retries) stat_add_shared(orphan_stats(), stat_retry_heap_stack, retries);
}

}  // namespace

void heap_flush_remote(heap* h) {
  while (h->out_pending) flush_outbox(h, h->out[std::countr_zero(h->out_pending)]);
}

void* heap_alloc_slow(heap* h, unsigned cls) {
  if (h == &g_empty_heap) {
    if (t_heap_released) return alloc_heapless(cls);
    h = heap_attach();
    if (!h) {
      errno = ENOMEM;
      return nullptr;
    }
  }
  heap_flush_remote(h);
  drain_inbox(h);
  span* s = h->current[cls];
  if (s != &g_empty_span) {
    // The drain may have put blocks back on this very span: hand those out
    // first. Carving over them dropped them from the free list, and retiring
    // the span with them parked it as full with nothing left to free into it
    // (a producer whose consumers follow closely leaked span after span).
    if (s->free || refill(s)) return pop(s);
    if (retire_full(h, cls, s)) return pop(s);
  }
  for (;;) {
    s = find_span(h, cls);
    if (!s) {
      errno = ENOMEM;
      return nullptr;
    }
    make_current(h, cls, s);
    if (s->free || refill(s)) return pop(s);
    if (retire_full(h, cls, s)) return pop(s);
  }
}

void heap_local_free_slow(heap* h, span* s) {
  class_lists& l = h->lists[s->cls];
  if (s->state == span_state::full) {
    // First block back in a full span: it can serve allocations again.
    list_unlink(&l.full, s);
    --l.nfull;
    s->low_mark = 1;
    if (s->used != 0) {
      s->state = span_state::avail;
      list_push(&l.avail, s);
      return;
    }
  } else {
    list_unlink(&l.avail, s);  // an avail span that just became empty
  }
  retire_empty(h, l, s);
}

void heap_free_other(heap* h, span* s, void* p) {
  if (s->kind == span_kind::large) {
    large_free(s, h == &g_empty_heap ? nullptr : &h->st);
    return;
  }
  auto* b = static_cast<block*>(p);
  // A thread that only frees (the consumer of a producer/consumer pair) gets
  // a heap too, so that its remote frees are batched like everyone else's;
  // not once its heap was released at exit, nor when no heap is to be had.
  if (h == &g_empty_heap && (t_heap_released || !(h = heap_attach()))) {
    free_heapless(s, b);
    return;
  }
  // Acquire pairs with the release that published the owner: the heap's
  // construction (its inbox word) happens before our delivery to it.
  heap* dest = s->owner.load(std::memory_order_acquire);
  if (dest == h) {  // the heap attached just now already owns it
    free_to_own_span(h, s, b);
    return;
  }
  if (!dest) {  // an unowned span (its thread exited): straight to its list
    b->next = nullptr;
    push_remote(s, b, b, 1, &h->st);
    return;
  }
  // Slot from the heap's address, not a field of it: reading the destination
  // heap's memory here would need ordering we do not have (owner is relaxed).
  // Heaps are contiguous, so consecutive heaps take consecutive slots.
  outbox& ob = h->out[(reinterpret_cast<std::uintptr_t>(dest) / sizeof(heap)) % kOutboxes];
  if (ob.dest != dest || ob.count == 0) {
    if (ob.count) flush_outbox(h, ob);
    ob.dest = dest;
    b->next = nullptr;
    ob.head = ob.tail = b;
    ob.count = 1;
    h->out_pending |= 1u << (&ob - h->out);
    return;
  }
  b->next = ob.head;
  ob.head = b;
  if (++ob.count >= kRemoteBatchMax) flush_outbox(h, ob);
}

void heap_sum_stats(stats& out) {
  std::uint32_t n = g_heap_count.load(std::memory_order_acquire);
  for (std::uint32_t i = 0; i < n; ++i)
    for (unsigned k = 0; k < stat_count; ++k)
      out.v[k].store(out.v[k].load(std::memory_order_relaxed) + heap_at(i)->st.v[k].load(std::memory_order_relaxed),
                     std::memory_order_relaxed);
}

}  // namespace tenon
