// Layer 2, address space: 4 MiB chunks taken from the platform layer, cut into
// 64 slices of 64 KiB. A run of free slices becomes a span.
//
// Lock-free by construction: a chunk's occupancy is one 64-bit word, and a run
// of slices is taken or returned with a single CAS / fetch_and on it. Chunks
// are registered in a global append-only array (an atomic counter hands out
// slots) so that any thread can find free slices in any chunk. Chunks are
// never unmapped: their headers (descriptors) stay, only slice pages are purged.
//
// Freed slices stay committed ("dirty") for a delay, so that a program that
// frees and reallocates does not pay page faults; a purge pass, claimed by one
// thread at a time with a CAS on the next-purge time (others skip it, nobody
// waits), gives the pages of slices freed longer ago back to the OS.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>

#include "common/config.h"
#include "span/span.h"

namespace tenon {

struct stats;

struct chunk {
  std::atomic<std::uint64_t> used;   // bit i: slice i belongs to a span (bit 0: header)
  std::atomic<std::uint64_t> dirty;  // bit i: slice i is free but has touched pages
  std::atomic<std::uint32_t> dirty_ms[kSlicesPerChunk];  // when each slice got dirty
  std::atomic<span*> span_at[kSlicesPerChunk];           // slice -> descriptor of its span
  span spans[kSlicesPerChunk];       // descriptor of the span starting at slice i
};
static_assert(sizeof(chunk) <= kSliceSize, "chunk header must fit in slice 0");

inline chunk* chunk_of(const void* p) {
  return reinterpret_cast<chunk*>(reinterpret_cast<std::uintptr_t>(p) & ~(kChunkSize - 1));
}
inline unsigned slice_of(const void* p) {
  return static_cast<unsigned>(reinterpret_cast<std::uintptr_t>(p) >> kSliceShift) & (kSlicesPerChunk - 1);
}
// The span containing p (p inside a regular chunk): one load, no arithmetic
// on descriptor sizes, because it sits on the free fast path.
inline span* span_of(const void* p) {
  return chunk_of(p)->span_at[slice_of(p)].load(std::memory_order_relaxed);
}
inline chunk* chunk_of(const span* s) { return chunk_of(static_cast<const void*>(s)); }

// Span ids: 32-bit names for descriptors (unit index << 6 | slice), used by the
// tagged stacks. Id 0 is never a span (unit 0 is never mapped).
inline std::uint32_t span_id(const span* s) {
  chunk* c = chunk_of(s);
  auto slice = static_cast<std::uint32_t>(s - c->spans);
  return static_cast<std::uint32_t>(reinterpret_cast<std::uintptr_t>(c) >> kChunkShift) << 6 | slice;
}
inline span* span_from_id(std::uint32_t id) {
  auto* c = reinterpret_cast<chunk*>(static_cast<std::uintptr_t>(id >> 6) << kChunkShift);
  return &c->spans[id & 63];
}

namespace arena {

// Take a run of `nslices` free slices, preferring `*hint` (updated to the chunk
// used). The descriptor at the run's first slice is returned with start,
// first_slice, nslices and zeroed set; span_at is filled for the whole run.
// nullptr (errno ENOMEM) when the OS refuses memory.
span* take_span(unsigned nslices, chunk** hint, stats* st);

// Give a span's slices back; its pages stay committed until the purge delay.
void release_span(span* s, stats* st);

// Purge pass: drop the pages of slices free for longer than the delay (all
// free slices when `force`). Returns true if any pages were given back.
bool purge(bool force, stats* st);

// Milliseconds on a coarse monotonic clock (cheap; slow paths only).
std::uint32_t now_ms();

// Milliseconds until the next purge pass is due (0 if it is due now).
std::uint32_t ms_until_purge_due();

// A layer above that keeps memory of its own for reuse (the huge cache)
// registers a function the periodic purge pass also calls, so that what it
// keeps is given back after the delay even if it is never used again. The
// hook returns true if it gave memory back (purge's result, and so
// malloc_trim's, counts it).
void set_purge_hook(bool (*hook)());

}  // namespace arena
}  // namespace tenon
