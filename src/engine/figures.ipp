// engine<C>: the byte figures of the statistics, derived when asked from
// the chunks' spans, the huge counts and the held gauge. Nothing here
// allocates or waits: tenon_stats_get, mallinfo2, malloc_info and
// malloc_stats may be called from anywhere, also from a signal handler's
// point of view as far as tenon is concerned.
#include <bit>

#include "tenon/engine/engine.h"

namespace tenon {

namespace figures_detail {

// A field another thread may be writing (a span's owner-private counts, a
// descriptor being formed): read once, untorn (every field read here is at
// most 8 bytes and naturally aligned), and the race accepted: the figure is
// then that span's state a moment before or after. The readers are excluded
// from ThreadSanitizer (no_sanitize below), which would otherwise report
// these reads, documented as approximate, as data races.
template <class T>
__attribute__((always_inline)) inline T peek(const T& field) {
  return *static_cast<const volatile T*>(&field);
}

// Blocks of a small span in use: counted out of it (`used`, biased while it
// is a heap's current span), less those freed by other threads that wait on
// its remote list. Blocks in a heap's inbox or a thread's outbox (freed, not
// yet back in their span) still count as in use.
__attribute__((no_sanitize("thread"))) inline std::size_t small_blocks_in_use(const span& s) {
  std::uint32_t used = static_cast<std::uint32_t>(peek(s.until_slow)) + peek(s.low_mark);
  if (used >= kCurrentBias) used -= kCurrentBias;
  std::uint32_t pending = remote_word::count(s.remote.load(std::memory_order_relaxed));
  std::uint32_t capacity = peek(s.capacity);
  std::uint32_t n = used > pending ? used - pending : 0;
  return n < capacity ? n : capacity;
}

// Every span of chunk c into f, with the slices in use and free.
template <class C>
__attribute__((no_sanitize("thread"))) void add_chunk(chunk* c, memory_figures& f) {
  std::uint64_t used = c->used.load(std::memory_order_acquire);
  std::uint64_t dirty = c->dirty.load(std::memory_order_relaxed);
  f.free_dirty += static_cast<std::size_t>(std::popcount(dirty & ~used & ~std::uint64_t{1})) * kSliceSize;
  for (unsigned i = 1; i < kSlicesPerChunk;) {
    if (!(used >> i & 1)) {
      ++i;
      continue;
    }
    const span& s = c->spans[i];
    unsigned n = peek(s.nslices);
    // A slice claimed by a purge pass, or a run being formed: its
    // descriptor does not (yet) start here.
    if (peek(s.first_slice) != i || n == 0 || i + n > kSlicesPerChunk ||
        c->index.span_at(i).load(std::memory_order_relaxed) != &s) {
      ++i;
      continue;
    }
    if (peek(s.kind) == span_kind::large) {
      // Its block freed, the run waits in a heap's run cache: retained for
      // reuse, as a free resident run in the arena would be.
      if (static_cast<std::uint32_t>(peek(s.until_slow)) + peek(s.low_mark) == 0) {
        f.free_dirty += std::size_t{n} << kSliceShift;
      } else {
        f.large_in_use += peek(s.large_usable);
        ++f.large_blocks;
      }
    } else if (unsigned cls = peek(s.cls); cls < kNumClasses) {
      class_figures& k = f.cls[cls];
      std::size_t blocks = small_blocks_in_use(s);
      k.blocks_in_use += blocks;
      ++k.spans;
      k.span_bytes += std::size_t{n} << kSliceShift;
      f.small_in_use += blocks * kClasses.size[cls];
    }
    i += n;
  }
  f.chunk_resident += C::platform::resident_bytes(c, kChunkSize);
}

}  // namespace figures_detail

template <class C>
void engine<C>::figures(memory_figures& f, typename C::stats& counts) {
  heaps.sum_stats(counts);
  chunks.for_each_chunk([&f](chunk* c) {
    figures_detail::add_chunk<C>(c, f);
    ++f.chunks;
  });
  f.chunk_bytes = f.chunks * kChunkSize;
  auto net = [&counts](stat_id up, stat_id down) {
    std::uint64_t a = counts.get(up), b = counts.get(down);
    return static_cast<std::size_t>(a > b ? a - b : 0);
  };
  f.huge_in_use = net(stat_huge_bytes_given, stat_huge_bytes_taken);
  f.huge_mapped = net(stat_huge_bytes_mapped, stat_huge_bytes_unmapped);
  std::uint64_t handed = counts.get(stat_huge_allocs) + counts.get(stat_huge_cache_hits);
  std::uint64_t freed = counts.get(stat_huge_frees);
  f.huge_blocks = static_cast<std::size_t>(handed > freed ? handed - freed : 0);
  f.huge_cached = huge.cached_bytes();
  f.peak_held = static_cast<std::size_t>(chunks.shared_stats().peak());
}

}  // namespace tenon
