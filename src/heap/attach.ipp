// thread_heaps<C>: heap storage, the thread-exit hook, and attaching and
// releasing a thread's heap.
#include <errno.h>

#include <new>

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
  long k = os::thread_key_create(on_thread_exit);
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
template <class C>
void thread_heaps<C>::on_thread_exit(void* arg) {
  auto* h = static_cast<heap_t*>(arg);
  t_thread<C> = {&g_empty_heap<C>, true};
  h->home->release(h);
}

// A heap from the free-heap stack, or a new one; nullptr if none can be had.
template <class C>
thread_heap<C>* thread_heaps<C>::claim_heap() {
  unsigned retries = 0;
  heap_t* h;
  if (std::uint32_t id = free_heaps_.pop(&retries)) {
    h = heap_at(id - 1);
    // Closed when its last thread exited; nothing can be on it.
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
  return claim_heap();
}

template <class C>
thread_heap<C>* thread_heaps<C>::attach() {
  TENON_INJECT_POINT("heap.attach");
  heap_t* h = claim_heap();
  if (!h) return nullptr;
  // Installed before the key's value, whose setting may itself call calloc
  // (keys past the first 32 need a second-level array): that nested call
  // finds the heap.
  t_thread<C>.current = h;
  long key = thread_key();
  if (key != -1) os::thread_key_set(key, h);
  return h;
}

template <class C>
void thread_heaps<C>::release(heap_t* h) {
  TENON_INJECT_POINT("heap.release");
  // Close the inbox first: whatever arrives later goes to the spans directly.
  TENON_INJECT_POINT("inbox.close");
  auto chain = h->inbox.exchange(kInboxClosed, std::memory_order_acquire);
  sort_inbox_chain(h, reinterpret_cast<block*>(chain));
  flush_remote(h);
  flush_caches(h);  // before the spans are given up: their blocks go back first
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
  h->st.add(stat_heaps_released);
  unsigned retries = free_heaps_.push(h->index + 1);
  if (retries) chunks_->shared_stats().add_shared(stat_retry_heap_stack, retries);
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
