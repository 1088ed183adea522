// arena<C>: finding and taking runs of free slices, and mapping new chunks.
#include <errno.h>

#include "slice_bits.h"
#include "tenon/arena/arena.h"
#include "tenon/arena/guard_pages.h"
#include "tenon/common/checks.h"
#include "tenon/common/inject.h"
#include "tenon/common/sync.h"
#include "tenon/lookup/chunk_map.h"

namespace tenon {

namespace arena_detail {

// The descriptor of the run [first, first + n) of c, just taken by the caller.
inline span* form(chunk* c, unsigned first, unsigned n) {
  std::uint64_t mask = slice_bits::run_mask(first, n);
  TENON_CHECK((c->used.load(std::memory_order_relaxed) & mask) == mask);
  span* s = &c->spans[first];
  // Slices we just took are ours alone: nobody else touches their dirty bits.
  std::uint64_t dirty = c->dirty.load(std::memory_order_relaxed);
  s->zeroed = (dirty & mask) == 0;
  s->some_clean = (dirty & mask) != mask;
  if (dirty & mask) c->dirty.fetch_and(~mask, std::memory_order_relaxed);
  s->no_links = (c->linked.load(std::memory_order_relaxed) & mask) == 0;
  s->first_slice = static_cast<std::uint8_t>(first);
  s->nslices = static_cast<std::uint8_t>(n);
  s->start = reinterpret_cast<char*>(c) + (std::size_t{first} << kSliceShift);
  for (unsigned i = first; i < first + n; ++i) c->index.span_at(i).store(s, std::memory_order_relaxed);
  return s;
}

}  // namespace arena_detail

// The registered chunk in slot idx, or nullptr (a slot being filled, or in a
// block that could not be reserved).
template <class C>
chunk* arena<C>::registered(std::uint32_t idx) {
  registry_block* b = registry_[idx / kChunkRegistryBlock].load(std::memory_order_acquire);
  return b ? b->slots[idx % kChunkRegistryBlock].load(std::memory_order_acquire) : nullptr;
}

// Records c in slot idx. The slots live in blocks reserved as the count
// reaches them (a flat array would cost every process 2 MiB of address
// space): racers each reserve a block, one CAS installs it, the others give
// theirs back. Blocks are never unmapped. If the block cannot be reserved
// (ENOMEM) the chunk still works; like one past kMaxChunks, it is just not
// shared for reuse.
template <class C>
void arena<C>::register_at(std::uint32_t idx, chunk* c) {
  using platform = typename C::platform;
  std::atomic<registry_block*>& entry = registry_[idx / kChunkRegistryBlock];
  registry_block* b = entry.load(std::memory_order_acquire);
  if (!b) {
    int saved = errno;
    // Whole pages: the slots' 64 KiB and the warm map's 1 KiB after them.
    std::size_t bytes = (sizeof(registry_block) + platform::page_size() - 1) & ~(platform::page_size() - 1);
    auto* fresh = static_cast<registry_block*>(platform::reserve(bytes, platform::page_size()));
    errno = saved;
    if (!fresh) return;
    if (entry.compare_exchange_strong(b, fresh, std::memory_order_acq_rel, std::memory_order_acquire)) {
      b = fresh;
    } else {
      platform::release(fresh, bytes);
    }
  }
  b->slots[idx % kChunkRegistryBlock].store(c, std::memory_order_release);
}

// A run of c for pass `w` of find_run, or nullptr. A caller that does not
// take dense slices first takes, of the warm runs, one without them if the
// chunk has one.
template <class C>
span* arena<C>::try_take(chunk* c, unsigned n, want w, bool dense_first, stats_t* st) {
  std::uint64_t used = c->used.load(std::memory_order_relaxed);
  for (;;) {
    std::uint64_t dense = c->dense.load(std::memory_order_relaxed);
    int pos = w == want::dense
                  ? slice_bits::find_run(used, dense, n, true)
                  : slice_bits::find_run(used, c->dirty.load(std::memory_order_relaxed), n, w == want::warm,
                                         dense_first ? 0 : dense);
    if (pos < 0) return nullptr;
    TENON_INJECT_POINT("chunk.take");
    std::uint64_t mask = slice_bits::run_mask(static_cast<unsigned>(pos), n);
    if (c->used.compare_exchange_weak(used, used | mask, std::memory_order_acquire, std::memory_order_relaxed)) {
      // The run's resident slices are in use again (form clears their bits).
      std::uint64_t dirty = c->dirty.load(std::memory_order_relaxed);
      if (may_count_kept()) count_kept(-static_cast<std::int64_t>(slice_bits::count(dirty & mask)));
      clear_dense(c, mask);
      span* s = arena_detail::form(c, static_cast<unsigned>(pos), n);
      if ((dirty & mask) && !(dirty & ~mask)) unmark_warm(c);  // its last resident free slices
      return s;
    }
    count(st, shared_stats_, stat_retry_chunk_bitmap);
  }
}

template <class C>
chunk* arena<C>::new_chunk(unsigned take_n, stats_t* st) {
  using platform = typename C::platform;
  TENON_INJECT_POINT("chunk.new");
  void* mem = platform::reserve(kChunkSize, kChunkSize);
  if (!mem) {
    errno = ENOMEM;
    return nullptr;
  }
  // The header slice and the run for the caller are taken before anyone can
  // see the chunk; fresh pages are zero, so only non-zero fields are written.
  auto* c = static_cast<chunk*>(mem);
  bool huge_paged = advise_chunk(c);  // before the header's first write faults in its page
  // Slices no span has used yet name the sentinel descriptor, never null, so
  // that a free of an address there reaches a check (see g_no_span).
  for (unsigned i = 0; i < kSlicesPerChunk; ++i) c->index.span_at(i).store(&g_no_span, std::memory_order_relaxed);
  c->used.store(1 | slice_bits::run_mask(1, take_n) | guard_slices<C>(), std::memory_order_relaxed);
  if (huge_paged) count_untouched_as_dirty(c);
  guard_chunk<C>(c);
  if (!lookup::add_chunk(c)) {  // no unit map leaf for it: nobody has seen it yet
    platform::release(mem, kChunkSize);
    errno = ENOMEM;
    return nullptr;
  }
  std::uint32_t slot = nchunks_.load(std::memory_order_relaxed);
  while (slot < kMaxChunks && !nchunks_.compare_exchange_weak(slot, slot + 1, std::memory_order_relaxed)) {
  }
  // Past kMaxChunks the chunk still works; it is just not shared for reuse.
  c->slot = slot < kMaxChunks ? slot : kNoSlot;
  if (slot < kMaxChunks) register_at(slot, c);
  if (c->dirty.load(std::memory_order_relaxed)) mark_warm(c);  // count_untouched_as_dirty's
  count(st, shared_stats_, stat_chunks_mapped);
  return c;
}

// The count moves only where a chunk's word goes from 0 to not 0 or back,
// which the old value of each fetch_or / fetch_and tells, so it stays exact
// over time; relaxed, a decrement may come before its increment and the count
// read -1 a moment (the pass then runs, as for any count but 0).
template <class C>
void arena<C>::mark_dense(chunk* c, std::uint64_t bits) {
  if (c->dense.fetch_or(bits, std::memory_order_relaxed) == 0) dense_chunks_.fetch_add(1, std::memory_order_relaxed);
}

template <class C>
void arena<C>::clear_dense(chunk* c, std::uint64_t mask) {
  if (!(c->dense.load(std::memory_order_relaxed) & mask)) return;
  std::uint64_t old = c->dense.fetch_and(~mask, std::memory_order_relaxed);
  if (old && !(old & ~mask)) dense_chunks_.fetch_sub(1, std::memory_order_relaxed);
}

// Word `word` of the warm map, or nullptr (its registry block is not there).
template <class C>
std::atomic<std::uint64_t>* arena<C>::warm_word(std::uint32_t word) {
  constexpr std::uint32_t per_block = kChunkRegistryBlock / 64;
  registry_block* b = registry_[word / per_block].load(std::memory_order_acquire);
  return b ? &b->warm[word % per_block] : nullptr;
}

// The warm map is a hint for find_run; the take is still the `used` CAS. Its
// bits are set and cleared with acq_rel so that a clear that lands after a
// set sees the setter's `dirty` write when unmark_warm reads the word again:
// a 0 -> not 0 -> 0 race then leaves the bit as the word is (a bit left set
// over a clean chunk costs one try_take, which clears it).
template <class C>
void arena<C>::mark_warm(chunk* c) {
  if (c->slot == kNoSlot) return;
  std::atomic<std::uint64_t>* w = warm_word(c->slot / 64);
  std::uint64_t bit = std::uint64_t{1} << (c->slot % 64);
  // Always the RMW, never a load that finds the bit set and skips it: the
  // clear that such a load read before would not see our `dirty` write.
  if (w) w->fetch_or(bit, std::memory_order_acq_rel);
}

template <class C>
void arena<C>::unmark_warm(chunk* c) {
  if (c->slot == kNoSlot) return;
  std::atomic<std::uint64_t>* w = warm_word(c->slot / 64);
  std::uint64_t bit = std::uint64_t{1} << (c->slot % 64);
  if (!w || !(w->load(std::memory_order_relaxed) & bit)) return;
  w->fetch_and(~bit, std::memory_order_acq_rel);
  if (c->dirty.load(std::memory_order_relaxed)) w->fetch_or(bit, std::memory_order_acq_rel);  // released meanwhile
}

template <class C>
bool arena<C>::listed_warm(chunk* c) {
  std::atomic<std::uint64_t>* w = c->slot == kNoSlot ? nullptr : warm_word(c->slot / 64);
  return w && (w->load(std::memory_order_relaxed) >> (c->slot % 64) & 1);
}

// A pass of find_run that only resident slices will do (dense or warm):
// the chunks the warm map names, from where the last scan succeeded, at
// most kWarmScanChunks of them in kWarmScanWords words of the map: a chunk
// with nothing resident costs a bit, not a read of its header, so the scan
// can reach far where there is something to find (architecture.md, layer 4,
// "The warm map").
template <class C>
span* arena<C>::take_warm(unsigned nslices, chunk** hint, want w, bool dense_first, stats_t* st) {
  std::uint32_t n = nchunks_.load(std::memory_order_acquire);
  if (n > kMaxChunks) n = kMaxChunks;
  if (!n) return nullptr;
  std::uint32_t from = scan_from_.load(std::memory_order_relaxed) % n;
  std::uint32_t words = (n + 63) / 64, first = from / 64;
  std::uint64_t high = ~std::uint64_t{0} << (from % 64);  // the first word's bits from `from` on; the rest last
  unsigned tries = 0;
  for (std::uint32_t k = 0; k <= words && k <= kWarmScanWords; ++k) {
    std::uint32_t word = (first + k) % words;
    std::atomic<std::uint64_t>* map = warm_word(word);
    if (!map) continue;
    std::uint64_t bits = map->load(std::memory_order_relaxed) & (k == 0 ? high : k == words ? ~high : ~std::uint64_t{0});
    for (; bits; bits &= bits - 1) {
      std::uint32_t idx = word * 64 + static_cast<std::uint32_t>(std::countr_zero(bits));
      chunk* c = registered(idx);
      if (!c || c == *hint) continue;
      if (span* s = try_take(c, nslices, w, dense_first, st)) {
        *hint = c;
        scan_from_.store(idx, std::memory_order_relaxed);
        return s;
      }
      if (!c->dirty.load(std::memory_order_relaxed)) unmark_warm(c);
      if (++tries == kWarmScanChunks) return nullptr;
    }
  }
  return nullptr;
}

// The held-bytes gauge moves with every run taken and given back.
template <class C>
span* arena<C>::take_span(unsigned nslices, chunk** hint, stats_t* st, bool dense_first) {
  span* s = find_run(nslices, hint, st, dense_first);
  if (s) shared_stats_.hold(static_cast<std::int64_t>(std::size_t{nslices} << kSliceShift));
  return s;
}

template <class C>
span* arena<C>::find_run(unsigned nslices, chunk** hint, stats_t* st, bool dense_first) {
  TENON_CHECK(nslices >= 1 && nslices <= kMaxSpanSlices);
  [[maybe_unused]] section<typename C::sync, shared_structure::chunks> guard;
  // Warm slices anywhere (hint first, then a bounded scan) before clean ones
  // in the hint chunk: a thread must not keep touching fresh pages of its own
  // chunk while freed, still resident slices wait in others. A span looks
  // for slices a span left carved before that: a warm slice is often mostly
  // out (mstress T2: 6.5 of 16 pages resident in a one-slice warm run, the
  // pool fed mostly by large blocks written at both ends), and a span formed
  // there faults in the rest as it carves (architecture.md, layer 4).
  // No chunk with a dense bit (glibc-thread T2): no dense pass to scan 17 chunks for nothing.
  bool dense_pass = dense_first && dense_chunks_.load(std::memory_order_relaxed) != 0;
  for (want w : {want::dense, want::warm, want::any}) {
    if (w == want::dense && !dense_pass) continue;
    if (*hint) {
      if (span* s = try_take(*hint, nslices, w, dense_first, st)) return s;
    }
    if (w != want::any) {
      if (span* s = take_warm(nslices, hint, w, dense_first, st)) return s;
      continue;
    }
    std::uint32_t n = nchunks_.load(std::memory_order_acquire);
    if (n > kMaxChunks) n = kMaxChunks;
    std::uint32_t from = n ? scan_from_.load(std::memory_order_relaxed) % n : 0;
    for (std::uint32_t i = 0; i < n; ++i) {
      std::uint32_t idx = (from + i) % n;
      chunk* c = registered(idx);
      if (!c || c == *hint) continue;
      if (span* s = try_take(c, nslices, w, dense_first, st)) {
        *hint = c;
        scan_from_.store(idx, std::memory_order_relaxed);
        return s;
      }
    }
  }
  chunk* c = new_chunk(nslices, st);
  if (!c) return nullptr;
  *hint = c;
  return arena_detail::form(c, 1, nslices);
}

}  // namespace tenon
