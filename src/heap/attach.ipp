// thread_heaps<C>: heap storage, the thread-exit hook, and attaching and
// releasing a thread's heap.
#include <errno.h>

#include <new>

#include "tenon/common/checks.h"
#include "tenon/common/inject.h"
#include "tenon/heap/thread_heaps.h"
#include "tenon/platform/os.h"

namespace tenon {

template <class C>
std::atomic<std::uint32_t>& thread_heaps<C>::heap_link::operator()(std::uint32_t id) const {
  return self->heap_at(id - 1)->stack_next;
}

// Index below the heap count: its segment exists.
template <class C>
thread_heap<C>* thread_heaps<C>::heap_at(std::uint32_t index) {
  return segments_[index / kHeapsPerSegment].load(std::memory_order_acquire) + index % kHeapsPerSegment;
}

// The segment that holds heap `index`, reserved if it is the first there.
// nullptr if the OS refuses (nothing is claimed then: the next call retries).
template <class C>
thread_heap<C>* thread_heaps<C>::heap_segment(std::uint32_t index) {
  using platform = typename C::platform;
  constexpr std::size_t kSegmentBytes = kHeapsPerSegment * sizeof(heap_t);
  std::atomic<heap_t*>& entry = segments_[index / kHeapsPerSegment];
  heap_t* seg = entry.load(std::memory_order_acquire);
  if (seg) return seg;
  auto* fresh = static_cast<heap_t*>(platform::reserve(kSegmentBytes, platform::page_size()));
  if (!fresh) return nullptr;
  // Racing threads each reserve; one wins the CAS, the others give theirs back.
  if (entry.compare_exchange_strong(seg, fresh, std::memory_order_acq_rel)) return fresh;
  platform::release(fresh, kSegmentBytes);
  return seg;
}

// A pthread key whose destructor releases the heap. Created lazily with no
// once-primitive: racers each create a key, one CAS wins, losers delete theirs.
template <class C>
long thread_heaps<C>::thread_key() {
  long key = key_.load(std::memory_order_acquire);
  if (key != -1) return key;
  // Above the program's first keys: a heap attached by their destructors,
  // in any round, the last one (glibc's 4th) included, is released in that
  // round (preload.late_free_threads_last_round).
  long k = os::thread_key_create_above(on_thread_exit, kThreadKeyMinSlot);
  if (k == -1) return -1;
  TENON_INJECT_POINT("heap.key");
  if (key_.compare_exchange_strong(key, k, std::memory_order_acq_rel)) return k;
  os::thread_key_delete(k);
  return key;
}

// The hook: release the heap, and remember that it was released. Calls the
// thread makes after that (glibc frees its dlerror and strerror buffers in
// __libc_thread_freeres, after every key destructor; a later key's
// destructor may allocate) must not attach a heap: nothing would release it
// (one heap leaked per such thread, and malloc failed after 65,535 of them).
// They are served without a heap instead (exit.ipp).
//
// A config whose layers above keep this thread's freed blocks for later
// (`static void before_thread_exit() noexcept;`: the secure build's
// quarantine ring) has them given back first, while the heap is still the
// thread's: their spans, emptied, go back with the others at the release.
// Given back after it (by a later key's destructor), they reached spans of a
// parked heap, held empty until a new thread took it over (until 2026-11-27:
// 50 threads that had freed 64 blocks of 32,000 bytes each kept 101 MB after
// they exited, preload.secure.idle_threads_exited).
template <class C>
void thread_heaps<C>::on_thread_exit(void* arg) {
  if constexpr (requires { C::before_thread_exit(); }) C::before_thread_exit();
  auto* h = static_cast<heap_t*>(arg);
  t_thread<C> = {&g_empty_heap<C>, true};
  h->home->release(h);
}

// What a heap on the free-heap stack must be (TENON_DEBUG checks it on the
// way on and off): no span, current or listed, and no cached block. A heap
// traded with spans of its own kept them owned by a heap that no thread
// used (stress.Park.HeapParkedBeforeItsFirstAllocationIsNotTradedAgain).
template <class C>
bool holds_nothing(const thread_heap<C>* h) {
  for (unsigned cls = 0; cls < kNumClasses; ++cls) {
    const class_lists& l = h->lists[cls];
    if (h->current[cls] != &g_empty_span || l.avail || l.full || l.empty) return false;
  }
  for (const block_cache& c : h->cache)
    if (cached_blocks(c) != 0) return false;
  return h->runs.empty();
}

// A parked heap from the stack, now ours; nullptr if none is parked. An
// entry whose heap was taken over by name meanwhile is dropped.
template <class C>
thread_heap<C>* thread_heaps<C>::claim_parked() {
  unsigned retries = 0;
  while (std::uint32_t id = parked_heaps_.pop(&retries)) {
    heap_t* h = heap_at(id - 1);
    // Off the stack now; parked or not, decided by this one exchange (a
    // thread parking it again meanwhile saw the entry and did not push).
    std::uint32_t w = h->park.exchange(0, std::memory_order_acq_rel);
    if (w & kParked) {
      if (retries) h->st.add(stat_retry_heap_stack, retries);
      return h;
    }
  }
  if (retries) chunks_->shared_stats().add_shared(stat_retry_heap_stack, retries);
  return nullptr;
}

// Take over h, a heap of this part, if it is parked. Its stack entry (if
// any) stays, for a popper to drop or, if h is parked again by then, claim.
template <class C>
bool thread_heaps<C>::take_over(heap_t* h) {
  std::uint32_t w = h->park.load(std::memory_order_relaxed);
  while (w & kParked) {
    TENON_INJECT_POINT("heap.take_over");
    if (h->park.compare_exchange_weak(w, w & ~kParked, std::memory_order_acquire, std::memory_order_relaxed))
      return true;
  }
  return false;
}

// A parked heap, whole (its spans, current ones included, become the new
// thread's: no span changes hands one by one), else a heap from the
// free-heap stack, or a new one; nullptr if none can be had.
template <class C>
thread_heap<C>* thread_heaps<C>::claim_heap(bool parked) {
  unsigned retries = 0;
  heap_t* h;
  if (parked && (h = claim_parked())) {
    collect_parked(h);
    h->st.add(stat_heaps_taken_over);
  } else if (std::uint32_t id = free_heaps_.pop(&retries)) {
    h = heap_at(id - 1);
    TENON_CHECK(holds_nothing(h));
    // Closed when it was dissolved; nothing can be on it.
    h->inbox.store(0, std::memory_order_relaxed);
  } else {
    // The index's segment exists before the index is claimed, so every
    // index below the count has its storage.
    std::uint32_t index = heap_count_.load(std::memory_order_relaxed);
    do {
      if (index >= kMaxHeaps || !heap_segment(index)) return nullptr;
    } while (!heap_count_.compare_exchange_weak(index, index + 1, std::memory_order_release,
                                                std::memory_order_relaxed));
    h = new (heap_at(index)) heap_t();
    h->index = index;
    h->home = this;
    constructed_[index / 64].fetch_or(std::uint64_t{1} << (index % 64), std::memory_order_release);
  }
  if (retries) h->st.add(stat_retry_heap_stack, retries);
  h->st.add(stat_heaps_attached);
  return h;
}

template <class C>
thread_heap<C>* thread_heaps<C>::attach_unbound() {
  heap_t* h = claim_heap();
  if (h) live_heaps_.fetch_add(1, std::memory_order_relaxed);
  return h;
}

// `wanted`: the owner of the block that a thread with no heap yet frees
// first (`freeing`). If that heap is parked, the thread takes it over: a
// thread handed the blocks of one that exited (larson's rounds, a worker
// pool's next task) then frees them into its own spans and allocates from
// the free blocks its predecessor left there. Else a thread whose first
// call is a free takes no other parked heap yet: it may never allocate (a
// consumer), and the free blocks of a heap it took would wait unused
// (xmalloc T16: peak RSS 50 MB against 44); it trades its empty heap for a
// parked one at its first allocation (trade_for_parked).
template <class C>
thread_heap<C>* thread_heaps<C>::attach(void* wanted, bool freeing) {
  TENON_INJECT_POINT("heap.attach");
  heap_t* h;
  if (wanted && take_over(static_cast<heap_t*>(wanted))) {
    h = static_cast<heap_t*>(wanted);
    collect_parked(h);
    h->st.add(stat_heaps_taken_over);
    h->st.add(stat_heaps_attached);
    h->traded = true;
  } else if ((h = claim_heap(!freeing))) {
    h->traded = !freeing;  // see trade_for_parked
  } else {
    return nullptr;
  }
  h->attached_seq = park_seq_.load(std::memory_order_relaxed);
  live_heaps_.fetch_add(1, std::memory_order_relaxed);
  // The key's value first, while the thread is still heapless: setting it
  // may call calloc (glibc's second-level array for a key past the first
  // 32: tenon's is the 32nd, kThreadKeyMinSlot, unless the program had taken
  // that many before it was made). That nested call is served as after the
  // exit hook, from a borrowed span (exit.ipp): on h, it traded h away when
  // h was attached on a free (trade_for_parked), and the key then kept the
  // heap traded away, which the exit hook released again (a crash in
  // sort_inbox_chain at a Python thread's exit, preload.python_threads,
  // with the key at slot 1,023). If that calloc fails, the key holds
  // nothing and the heap is never released (architecture.md, known limits).
  long key = thread_key();
  if (key != -1) {
    t_thread<C>.released = true;
    os::thread_key_set(key, h);
    t_thread<C>.released = false;
  }
  t_thread<C>.current = h;
  return h;
}

// The first allocation of a thread that attached h on a free: h holds no
// span (nothing was allocated from it, and no span of another heap is ever
// made its own but by an allocation), so the thread may as well continue
// with a parked heap, if there is one; h, its outboxes delivered, goes on
// the free-heap stack. The thread's key names the new heap before anything
// else can happen on this thread (setting it may call calloc: that nested
// call finds the new heap).
template <class C>
thread_heap<C>* thread_heaps<C>::trade_for_parked(heap_t* h) {
  h->traded = true;
  heap_t* p = claim_parked();
  if (!p) return h;
  collect_parked(p);
  p->st.add(stat_heaps_taken_over);
  p->st.add(stat_heaps_attached);
  p->attached_seq = h->attached_seq;
  // p is this thread's heap now, and this thread allocates: never to be
  // traded again. p may carry the mark of its previous thread, which
  // attached it on a free and exited before allocating; left on, the next
  // allocation slow path traded p away with the spans and cached blocks it
  // had by then (they went onto the free-heap stack with it: the cached
  // blocks counted in use for good).
  p->traded = true;
  t_thread<C>.current = p;
  if (long key = key_.load(std::memory_order_acquire); key != -1) os::thread_key_set(key, p);
  flush_remote(h);
  // h owns no span, but a heap from the free-heap stack had its inbox
  // reopened at the attach: a batch gathered for it while it still owned
  // spans (before it was given up) may have arrived since. Its blocks go to
  // their spans (the sort forwards what h does not own), as at release;
  // a store of kInboxClosed over them lost them for good.
  auto chain = h->inbox.exchange(kInboxClosed, std::memory_order_acquire);
  sort_inbox_chain(h, reinterpret_cast<block*>(chain));
  // A heap attached on a free keeps the large runs its thread freed since
  // (the run cache): back to the chunk layer, as at release, before h goes
  // on the free-heap stack (the debug build's check below found them there:
  // stress.LateCalls, HeapHandover, preload_churn, the churn freeze probes).
  chunks_->flush_cached(h->runs, true, &h->st);
  TENON_CHECK(holds_nothing(h));
  h->st.add(stat_heaps_released);
  unsigned retries = free_heaps_.push(h->index + 1);
  if (retries) chunks_->shared_stats().add_shared(stat_retry_heap_stack, retries);
  return p;
}

// Thread exit: park the heap whole for the next thread that attaches. What
// it holds for others goes out first (outboxes, cached blocks), blocks freed
// into it so far go back to their spans, and the kept empty spans go back to
// the chunk layer; its spans stay its own. Handing spans out one by one
// instead (each abandoned here, then adopted by whichever thread first
// asked for its class) gave one new thread all the free blocks its
// predecessors left and the others none: larson formed spans of every
// class for every thread of every round (docs/architecture.md, layer 5).
template <class C>
void thread_heaps<C>::release(heap_t* h) {
  TENON_INJECT_POINT("heap.release");
  live_heaps_.fetch_sub(1, std::memory_order_relaxed);
  flush_remote(h);
  // Close the inbox: whatever arrives while the heap has no thread goes to
  // the spans' remote lists, where the heap's next thread (or an adopter of
  // the spans) collects it, instead of waiting in the inbox of a heap that
  // nobody may take over for a long time.
  TENON_INJECT_POINT("inbox.close");
  auto chain = h->inbox.exchange(kInboxClosed, std::memory_order_acquire);
  sort_inbox_chain(h, reinterpret_cast<block*>(chain));
  flush_caches(h);  // the sort may have put blocks in them: back to their spans first
  flush_remote(h);  // the flush's blocks of other heaps' spans (cache.ipp, free_cached_remote) went to outboxes
  chunks_->flush_cached(h->runs, true, &h->st);  // its runs: no thread of its own to reuse them now
  // Empty spans go back (a current one too: a thread that freed all it
  // allocated leaves nothing worth handing over, and its successor may
  // use other classes: threadtest T16 kept 0.3 MB more).
  release_unused_spans(h);
  h->st.add(stat_heaps_released);
  // Holding nothing now (a thread that only freed, or freed all it had), it
  // has nothing to hand over: onto the free-heap stack, as a dissolved heap,
  // for the next thread to attach. Parked, a free-only thread's heap stayed
  // until a span formation dissolved it: a thread a round that only freed
  // (stress.RemoteGrowth.SpanEmptiedRemotelyWhileCurrentIsReleased) left a
  // heap a round, 1,201 after 1,200 rounds, 12 KiB each since the 64
  // outboxes (architecture.md, layer 5, "Outbox slots"). No one can take it
  // over by name: no span names it, and its park word says it is not parked
  // (an old entry of it on the parked stack is dropped by its popper).
  if (holds_nothing(h)) {
    unsigned retries = free_heaps_.push(h->index + 1);
    if (retries) chunks_->shared_stats().add_shared(stat_retry_heap_stack, retries);
    return;
  }
  // Release: whoever takes the heap over (by the stack, or by name) sees
  // everything above. An entry it still has on the stack stands for it.
  h->parked_ms.store(C::platform::now_ms(), std::memory_order_relaxed);
  h->parked_seq.store(park_seq_.fetch_add(1, std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  if (h->park.exchange(kParked | kOnParkedStack, std::memory_order_release) & kOnParkedStack) return;
  TENON_INJECT_POINT("heap.park");  // parked, not on the stack yet: only a taker by name can find it
  unsigned retries = parked_heaps_.push(h->index + 1);
  if (retries) chunks_->shared_stats().add_shared(stat_retry_heap_stack, retries);
}

// Give up a parked heap that we popped (it is ours alone now; its inbox,
// closed when it was parked, stays closed): abandon every span for
// adoption; the empty heap goes on the free-heap stack.
template <class C>
void thread_heaps<C>::dissolve(heap_t* h) {
  for (unsigned cls = 0; cls < kNumClasses; ++cls) {
    if (span* s = h->current[cls]; s != &g_empty_span) {
      s->remove_used(kCurrentBias);
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
  TENON_CHECK(holds_nothing(h));
  h->st.add(stat_heaps_dissolved);
  unsigned retries = free_heaps_.push(h->index + 1);
  if (retries) chunks_->shared_stats().add_shared(stat_retry_heap_stack, retries);
}

// Dissolve one parked heap, for a heap about to take fresh memory (see
// absorb_before_growing). True if one was.
template <class C>
bool thread_heaps<C>::dissolve_parked(heap_t* grower) {
  // The heap parked last (a stale id reads a heap that is type-stable). If
  // its thread exited after the grower's started, it was no predecessor of
  // a thread yet to come: give it up (a round's producers that finish
  // early, xmalloc). Else wait kParkedGraceMs for a new thread to take it
  // over (the heaps of larson's last round, whose successors are starting);
  // if it is still young, so may the others be.
  std::uint32_t top = parked_heaps_.top();
  if (!top) return false;
  heap_t* t = heap_at(top - 1);
  bool contemporary = static_cast<std::int32_t>(t->parked_seq.load(std::memory_order_relaxed) - grower->attached_seq) > 0;
  if (!contemporary && C::platform::now_ms() - t->parked_ms.load(std::memory_order_relaxed) < kParkedGraceMs)
    return false;
  heap_t* h = claim_parked();
  if (!h) return false;
  dissolve(h);
  return true;
}

// Heaps past the count, or not yet constructed, have cached nothing.
template <class C>
void thread_heaps<C>::flush_run_caches(bool all) {
  std::uint32_t n = heap_count_.load(std::memory_order_acquire);
  for (std::uint32_t i = 0; i < n; ++i)
    if (constructed_[i / 64].load(std::memory_order_acquire) >> (i % 64) & 1)
      chunks_->flush_cached(heap_at(i)->runs, all, nullptr);
}

template <class C>
void thread_heaps<C>::sum_stats(stats_t& out) {
  std::uint32_t n = heap_count_.load(std::memory_order_acquire);
  for (std::uint32_t i = 0; i < n; ++i) {
    // A heap still under construction has counted nothing yet: skip it.
    if (!(constructed_[i / 64].load(std::memory_order_acquire) >> (i % 64) & 1)) continue;
    for (unsigned k = 0; k < stat_count; ++k) out.add(static_cast<stat_id>(k), heap_at(i)->st.get(static_cast<stat_id>(k)));
  }
  for (unsigned k = 0; k < stat_count; ++k)
    out.add(static_cast<stat_id>(k), chunks_->shared_stats().get(static_cast<stat_id>(k)));
}

}  // namespace tenon
