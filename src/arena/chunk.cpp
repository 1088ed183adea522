#include "arena/chunk.h"

#include <errno.h>
#include <time.h>

#include <bit>
#include <new>

#include "arena/purger.h"
#include "common/inject.h"
#include "common/options.h"
#include "common/stats.h"
#include "common/variant.h"
#include "lookup/chunk_map.h"
#include "platform/os.h"

namespace tenon::arena {

namespace {

// Append-only registry of every chunk, so any thread can reuse free slices
// anywhere. A slot is claimed with a CAS on the count and filled once. The
// slots live in blocks reserved as the count reaches them (a 2 MiB array
// would cost every process 2 MiB of address space): racers each reserve a
// block, one CAS installs it, the others give theirs back. Blocks are never
// unmapped.
using registry_block = std::atomic<chunk*>[kChunkRegistryBlock];
std::atomic<registry_block*> g_registry[kMaxChunks / kChunkRegistryBlock];
std::atomic<std::uint32_t> g_nchunks{0};
std::atomic<std::uint32_t> g_scan_from{0};
// Purge pass: at most one thread at a time, the claim is a CAS on this time.
std::atomic<std::uint32_t> g_next_purge_ms{0};
std::atomic<bool (*)()> g_purge_hook{nullptr};

// The registered chunk in slot idx, or nullptr (a slot being filled, or in a
// block that could not be reserved).
chunk* registered(std::uint32_t idx) {
  registry_block* b = g_registry[idx / kChunkRegistryBlock].load(std::memory_order_acquire);
  return b ? (*b)[idx % kChunkRegistryBlock].load(std::memory_order_acquire) : nullptr;
}

// Records c in slot idx. If the slot's block cannot be reserved (ENOMEM) the
// chunk still works; like one past kMaxChunks, it is just not shared for reuse.
void register_at(std::uint32_t idx, chunk* c) {
  std::atomic<registry_block*>& entry = g_registry[idx / kChunkRegistryBlock];
  registry_block* b = entry.load(std::memory_order_acquire);
  if (!b) {
    int saved = errno;
    auto* fresh = static_cast<registry_block*>(os::reserve(sizeof(registry_block), os::page_size()));
    errno = saved;
    if (!fresh) return;
    if (entry.compare_exchange_strong(b, fresh, std::memory_order_acq_rel, std::memory_order_acquire)) {
      b = fresh;
    } else {
      os::release(fresh, sizeof(registry_block));
    }
  }
  (*b)[idx % kChunkRegistryBlock].store(c, std::memory_order_release);
}

constexpr std::uint64_t run_mask(unsigned first, unsigned n) {
  return (n >= 64 ? ~std::uint64_t{0} : ((std::uint64_t{1} << n) - 1)) << first;
}

// Start positions of the runs of n set bits in `bits`.
std::uint64_t run_starts(std::uint64_t bits, unsigned n) {
  std::uint64_t starts = bits;
  for (unsigned i = 1; i < n && starts; ++i) starts &= bits >> i;
  return starts;
}

// Where to take a run of n free slices, or -1. Runs whose slices are all
// dirty ("warm") come first: their pages are resident already, so reusing
// them keeps the set of touched pages (the RSS) from growing. With
// warm_only, only such a run will do.
int find_run(std::uint64_t used, std::uint64_t dirty, unsigned n, bool warm_only) {
  std::uint64_t starts = run_starts(~used, n);
  std::uint64_t warm = starts & run_starts(dirty & ~used, n);
  if (warm) return std::countr_zero(warm);
  if (warm_only || !starts) return -1;
  return std::countr_zero(starts);
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

span* try_take(chunk* c, unsigned n, bool warm_only, stats* st) {
  std::uint64_t used = c->used.load(std::memory_order_relaxed);
  for (;;) {
    int pos = find_run(used, c->dirty.load(std::memory_order_relaxed), n, warm_only);
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
  if (!lookup::add_chunk(c)) {  // no unit map leaf for it: nobody has seen it yet
    os::release(mem, kChunkSize);
    errno = ENOMEM;
    return nullptr;
  }
  std::uint32_t slot = g_nchunks.load(std::memory_order_relaxed);
  while (slot < kMaxChunks &&
         !g_nchunks.compare_exchange_weak(slot, slot + 1, std::memory_order_relaxed)) {
  }
  // Past kMaxChunks the chunk still works; it is just not shared for reuse.
  if (slot < kMaxChunks) register_at(slot, c);
  if (st) st->add(stat_chunks_mapped);
  return c;
}

// Purge one free slice whose pages are resident: claim it like an allocation
// (CAS its used bit), drop its pages, give it back. False if it was taken.
bool purge_slice(chunk* c, unsigned i, stats* st) {
  std::uint64_t bit = std::uint64_t{1} << i;
  std::uint64_t used = c->used.load(std::memory_order_relaxed);
  if (used & bit) return false;
  if (!c->used.compare_exchange_strong(used, used | bit, std::memory_order_acquire, std::memory_order_relaxed)) {
    if (st) st->add(stat_retry_chunk_bitmap);
    return false;
  }
  TENON_INJECT_POINT("chunk.purge");
  bool done = false;
  if ((c->dirty.load(std::memory_order_relaxed) & bit) &&
      os::purge(reinterpret_cast<char*>(c) + (std::size_t{i} << kSliceShift), kSliceSize)) {
    c->dirty.fetch_and(~bit, std::memory_order_relaxed);
    done = true;
    if (st) st->add(stat_purges);
  }
  c->used.fetch_and(~bit, std::memory_order_release);
  return done;
}

// Keep at most kMaxDirtyPerChunk free-but-resident slices in a chunk: past
// that, the oldest are purged now rather than after the delay, once they have
// been free for kDirtyGraceMs (younger ones wait for a later release in this
// chunk or for the purge pass). Dirty slices
// are reused first, so a program's peak RSS otherwise creeps up to its peak
// address space (mstress: 618 slices in use at peak, all of them resident).
// The run just released (`keep`) is never purged here: a loop that frees and
// reallocates a 2 MiB block would otherwise fault it in every time (15x
// glibc's time on thread-chunks before this exemption).
void trim_chunk(chunk* c, std::uint64_t keep, stats* st) {
  std::uint32_t now = now_ms();
  for (;;) {
    std::uint64_t free_dirty = c->dirty.load(std::memory_order_relaxed) & ~c->used.load(std::memory_order_relaxed);
    if (static_cast<unsigned>(std::popcount(free_dirty)) <= kMaxDirtyPerChunk) return;
    free_dirty &= ~keep;
    if (!free_dirty) return;
    unsigned oldest = 0;
    std::uint32_t oldest_age = 0;
    for (std::uint64_t d = free_dirty; d; d &= d - 1) {
      unsigned i = static_cast<unsigned>(std::countr_zero(d));
      std::uint32_t age = now - c->dirty_ms[i].load(std::memory_order_relaxed);
      if (age >= oldest_age) {
        oldest_age = age;
        oldest = i;
      }
    }
    if (oldest_age < kDirtyGraceMs) return;  // all younger: a bulk free about to be refilled keeps them
    if (!purge_slice(c, oldest, st)) return;  // raced with a taker: it is theirs now
  }
}

}  // namespace

std::uint32_t now_ms() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return static_cast<std::uint32_t>(ts.tv_sec * 1000 + ts.tv_nsec / 1000000);
}

span* take_span(unsigned nslices, chunk** hint, stats* st) {
  TENON_LOCKED_SECTION(chunks);
  // Warm slices anywhere (hint first, then a bounded scan) before clean ones
  // in the hint chunk: a thread must not keep touching fresh pages of its own
  // chunk while freed, still resident slices wait in others.
  for (bool warm_only : {true, false}) {
    if (*hint) {
      if (span* s = try_take(*hint, nslices, warm_only, st)) return s;
    }
    std::uint32_t n = g_nchunks.load(std::memory_order_acquire);
    if (n > kMaxChunks) n = kMaxChunks;
    std::uint32_t from = n ? g_scan_from.load(std::memory_order_relaxed) % n : 0;
    std::uint32_t limit = warm_only && n > kWarmScanChunks ? kWarmScanChunks : n;
    for (std::uint32_t i = 0; i < limit; ++i) {
      std::uint32_t idx = (from + i) % n;
      chunk* c = registered(idx);
      if (!c || c == *hint) continue;
      if (span* s = try_take(c, nslices, warm_only, st)) {
        *hint = c;
        g_scan_from.store(idx, std::memory_order_relaxed);
        return s;
      }
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
  trim_chunk(c, mask, st);
  // Memory now kept resident for reuse: the background purger gives it back
  // on time if the program goes idle. Only for a sizeable run, or a chunk the
  // cap above could not bring down (its free slices are all young).
  if (n >= kPurgerStartSlices ||
      std::popcount(c->dirty.load(std::memory_order_relaxed) & ~c->used.load(std::memory_order_relaxed)) >
          static_cast<int>(kMaxDirtyPerChunk))
    purger::note_retained();
  std::uint32_t next = g_next_purge_ms.load(std::memory_order_relaxed);
  if (static_cast<std::int32_t>(now - next) >= 0) purge(false, st);
}

std::uint32_t ms_until_purge_due() {
  std::int32_t left = static_cast<std::int32_t>(g_next_purge_ms.load(std::memory_order_relaxed) - now_ms());
  return left > 0 ? static_cast<std::uint32_t>(left) : 0;
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
    chunk* c = registered(idx);
    if (!c) continue;
    std::uint64_t dirty = c->dirty.load(std::memory_order_relaxed);
    while (dirty) {
      unsigned i = static_cast<unsigned>(std::countr_zero(dirty));
      dirty &= dirty - 1;
      if (!force && now - c->dirty_ms[i].load(std::memory_order_relaxed) < delay) continue;
      // Claimed as if allocated while its pages drop: nobody takes it meanwhile.
      if (purge_slice(c, i, st)) any = true;
    }
  }
  if (auto hook = g_purge_hook.load(std::memory_order_acquire))
    if (hook()) any = true;
  return any;
}

void set_purge_hook(bool (*hook)()) { g_purge_hook.store(hook, std::memory_order_release); }

}  // namespace tenon::arena
