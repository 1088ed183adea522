#include "arena/chunk.h"

#include <errno.h>
#include <time.h>

#include <bit>
#include <new>

#include "common/inject.h"
#include "common/options.h"
#include "common/stats.h"
#include "common/variant.h"
#include "lookup/chunk_map.h"
#include "platform/os.h"

namespace tenon::arena {

namespace {

// Append-only registry of every chunk, so any thread can reuse free slices
// anywhere. A slot is reserved with fetch_add and filled once.
std::atomic<chunk*> g_chunks[kMaxChunks];
std::atomic<std::uint32_t> g_nchunks{0};
std::atomic<std::uint32_t> g_scan_from{0};
// Purge pass: at most one thread at a time, the claim is a CAS on this time.
std::atomic<std::uint32_t> g_next_purge_ms{0};

constexpr std::uint64_t run_mask(unsigned first, unsigned n) {
  return (n >= 64 ? ~std::uint64_t{0} : ((std::uint64_t{1} << n) - 1)) << first;
}

// Lowest position of a run of n zero bits in `used`, or -1.
int find_run(std::uint64_t used, unsigned n) {
  std::uint64_t free = ~used, starts = free;
  for (unsigned i = 1; i < n && starts; ++i) starts &= free >> i;
  return starts ? std::countr_zero(starts) : -1;
}

span* form(chunk* c, unsigned first, unsigned n) {
  std::uint64_t mask = run_mask(first, n);
  span* s = &c->spans[first];
  // Slices we just took are ours alone: nobody else touches their dirty bits.
  std::uint64_t dirty = c->dirty.load(std::memory_order_relaxed);
  s->zeroed = (dirty & mask) == 0;
  if (dirty & mask) c->dirty.fetch_and(~mask, std::memory_order_relaxed);
  s->first_slice = static_cast<std::uint8_t>(first);
  s->nslices = static_cast<std::uint8_t>(n);
  s->start = reinterpret_cast<char*>(c) + (std::size_t{first} << kSliceShift);
  for (unsigned i = first; i < first + n; ++i) c->span_at[i].store(s, std::memory_order_relaxed);
  return s;
}

span* try_take(chunk* c, unsigned n, stats* st) {
  std::uint64_t used = c->used.load(std::memory_order_relaxed);
  for (;;) {
    int pos = find_run(used, n);
    if (pos < 0) return nullptr;
    TENON_INJECT_POINT("chunk.take");
    if (c->used.compare_exchange_weak(used, used | run_mask(static_cast<unsigned>(pos), n),
                                      std::memory_order_acquire, std::memory_order_relaxed))
      return form(c, static_cast<unsigned>(pos), n);
    if (st) st->add(stat_retry_chunk_bitmap);
  }
}

chunk* new_chunk(unsigned take_n, stats* st) {
  TENON_INJECT_POINT("chunk.new");
  void* mem = os::reserve(kChunkSize, kChunkSize);
  if (!mem) { errno = ENOMEM; return nullptr; }
  // The header slice and the run for the caller are taken before anyone can
  // see the chunk; fresh pages are zero, so only non-zero fields are written.
  auto* c = static_cast<chunk*>(mem);
  c->used.store(1 | run_mask(1, take_n), std::memory_order_relaxed);
  lookup::mark(lookup::map_kind::regular, c);
  std::uint32_t slot = g_nchunks.load(std::memory_order_relaxed);
  while (slot < kMaxChunks &&
         !g_nchunks.compare_exchange_weak(slot, slot + 1, std::memory_order_relaxed)) {
  }
  // Past kMaxChunks the chunk still works; it is just not shared for reuse.
  if (slot < kMaxChunks) g_chunks[slot].store(c, std::memory_order_release);
  if (st) st->add(stat_chunks_mapped);
  return c;
}

}  // namespace

std::uint32_t now_ms() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return static_cast<std::uint32_t>(ts.tv_sec * 1000 + ts.tv_nsec / 1000000);
}

span* take_span(unsigned nslices, chunk** hint, stats* st) {
  TENON_LOCKED_SECTION(chunks);
  if (*hint) {
    if (span* s = try_take(*hint, nslices, st)) return s;
  }
  std::uint32_t n = g_nchunks.load(std::memory_order_acquire);
  if (n > kMaxChunks) n = kMaxChunks;
  std::uint32_t from = n ? g_scan_from.load(std::memory_order_relaxed) % n : 0;
  for (std::uint32_t i = 0; i < n; ++i) {
    std::uint32_t idx = (from + i) % n;
    chunk* c = g_chunks[idx].load(std::memory_order_acquire);
    if (!c || c == *hint) continue;
    if (span* s = try_take(c, nslices, st)) {
      *hint = c;
      g_scan_from.store(idx, std::memory_order_relaxed);
      return s;
    }
  }
  chunk* c = new_chunk(nslices, st);
  if (!c) return nullptr;
  *hint = c;
  return form(c, 1, nslices);
}

void release_span(span* s, stats* st) {
  chunk* c = chunk_of(s);
  unsigned first = s->first_slice, n = s->nslices;
  std::uint64_t mask = run_mask(first, n);
  std::uint32_t now = now_ms();
  {
  TENON_LOCKED_SECTION(chunks);
  for (unsigned i = first; i < first + n; ++i) c->dirty_ms[i].store(now, std::memory_order_relaxed);
  c->dirty.fetch_or(mask, std::memory_order_relaxed);
  TENON_INJECT_POINT("chunk.release");
  // Release: the descriptor and dirty bits are written before the slices are
  // visible as free to the next taker (who acquires).
  c->used.fetch_and(~mask, std::memory_order_release);
  }
  if (st) st->add(stat_spans_released);
  std::uint32_t next = g_next_purge_ms.load(std::memory_order_relaxed);
  if (static_cast<std::int32_t>(now - next) >= 0) purge(false, st);
}

bool purge(bool force, stats* st) {
  std::uint32_t now = now_ms();
  std::uint32_t delay = options().purge_delay_ms;
  std::uint32_t next = g_next_purge_ms.load(std::memory_order_relaxed);
  if (!force) {
    // One purger at a time; whoever loses the CAS just goes on.
    if (static_cast<std::int32_t>(now - next) < 0) return false;
    if (!g_next_purge_ms.compare_exchange_strong(next, now + (delay ? delay / 2 + 1 : 1),
                                                  std::memory_order_relaxed))
      return false;
  }
  bool any = false;
  std::uint32_t n = g_nchunks.load(std::memory_order_acquire);
  if (n > kMaxChunks) n = kMaxChunks;
  for (std::uint32_t idx = 0; idx < n; ++idx) {
    chunk* c = g_chunks[idx].load(std::memory_order_acquire);
    if (!c) continue;
    std::uint64_t dirty = c->dirty.load(std::memory_order_relaxed);
    while (dirty) {
      unsigned i = static_cast<unsigned>(std::countr_zero(dirty));
      dirty &= dirty - 1;
      if (!force && now - c->dirty_ms[i].load(std::memory_order_relaxed) < delay) continue;
      // Claim the slice as if allocating it, so no one can take it while its
      // pages are dropped; if it is in use (or being purged), skip it.
      std::uint64_t bit = std::uint64_t{1} << i;
      std::uint64_t used = c->used.load(std::memory_order_relaxed);
      if (used & bit) continue;
      if (!c->used.compare_exchange_strong(used, used | bit, std::memory_order_acquire,
                                           std::memory_order_relaxed)) {
        if (st) st->add(stat_retry_chunk_bitmap);
        continue;
      }
      TENON_INJECT_POINT("chunk.purge");
      if ((c->dirty.load(std::memory_order_relaxed) & bit) &&
          os::purge(reinterpret_cast<char*>(c) + (std::size_t{i} << kSliceShift), kSliceSize)) {
        c->dirty.fetch_and(~bit, std::memory_order_relaxed);
        any = true;
        if (st) st->add(stat_purges);
      }
      c->used.fetch_and(~bit, std::memory_order_release);
    }
  }
  return any;
}

}  // namespace tenon::arena
