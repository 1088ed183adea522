// Layer 4: how long a chunk's free slices stay resident past its dirty cap
// (kMaxDirtyPerChunk) before the cap purges them, adapted per chunk.
//
// The cap's purge is a bet that the slice will not be wanted soon. It is
// lost when the slice is taken again shortly after (its pages fault back in
// one by one: the purge-then-refault of producer-consumer and mstress), and
// won when the purged slice stays unused. So each chunk keeps a grace of
// kDirtyGraceMs << shift: a run taken with a slice the cap purged less than
// kRefaultWindowMs ago doubles it (up to kMaxGraceShift), and it halves when
// waiting did not help (the cap purges a slice that outlived a raised grace)
// or when the purge pass finds slices unused for the whole purge delay.
//
// A raised grace keeps more memory resident, which is only free while the
// program holds well below its peak (it is reused before the program gets
// back there): the cap uses it only while the held-bytes gauge is at most
// 3/4 of its peak, and the base grace nearer the peak, so that the peak RSS
// does not grow with it. Both bounds (16 ms, 3/4) are measured choices:
// docs/architecture.md, layer 4.
//
// The grace only moves the cap; the purge pass still returns every slice
// free for TENON_PURGE_DELAY_MS, so idle memory goes back on the same bound.
//
// The record of a purge is the slice's dirty_ms word while it is clean and
// free: the cap stamps when it purged it, the pass and malloc_trim stamp 0
// (a refault after the delay is not the cap's doing), and a chunk's fresh
// slices read 0 (new mappings are zero). Only the holder of a slice (per
// the used CAS) writes it. The shift is a hint: relaxed load and store, and
// a lost update between racing threads costs one step.
#pragma once
#include <atomic>
#include <bit>
#include <cstdint>

#include "tenon/arena/chunk.h"
#include "tenon/common/config.h"

namespace tenon::adaptive_grace {

// Raised grace: at most kDirtyGraceMs << 2 (16 ms at the default).
constexpr std::uint32_t kMaxGraceShift = 2;
// A slice taken again within this long after the cap purged it was purged
// too soon: the longest grace would have kept it.
constexpr std::uint32_t kRefaultWindowMs = kDirtyGraceMs << kMaxGraceShift;

inline std::uint32_t grace_ms(const chunk& c) {
  return kDirtyGraceMs << c.grace_shift.load(std::memory_order_relaxed);
}

// The grace the cap applies now: the chunk's, while the program holds at
// most 3/4 of its peak (`held` and `peak`: the arena's held-bytes gauge; a
// config without statistics reads 0 and 0 and keeps the base grace).
inline std::uint32_t grace_now_ms(const chunk& c, std::uint64_t held, std::uint64_t peak) {
  return peak != 0 && held <= peak - peak / 4 ? grace_ms(c) : kDirtyGraceMs;
}

inline void raise(chunk& c) {
  std::uint32_t s = c.grace_shift.load(std::memory_order_relaxed);
  if (s < kMaxGraceShift) c.grace_shift.store(s + 1, std::memory_order_relaxed);
}

inline void lower(chunk& c) {
  std::uint32_t s = c.grace_shift.load(std::memory_order_relaxed);
  if (s > 0) c.grace_shift.store(s - 1, std::memory_order_relaxed);
}

// The cap purged slice i at `now` (the caller holds it).
inline void note_cap_purge(chunk& c, unsigned i, std::uint32_t now) {
  c.dirty_ms[i].store(now, std::memory_order_relaxed);
}

// The purge pass or malloc_trim purged slice i (the caller holds it).
inline void note_pass_purge(chunk& c, unsigned i) { c.dirty_ms[i].store(0, std::memory_order_relaxed); }

// The caller just took the slices `clean` (held, not resident: fresh or
// purged) at `now`: raise the grace if the cap purged one of them recently.
inline void note_taken_clean(chunk& c, std::uint64_t clean, std::uint32_t now) {
  for (std::uint64_t d = clean; d; d &= d - 1) {
    std::uint32_t purged_at = c.dirty_ms[std::countr_zero(d)].load(std::memory_order_relaxed);
    if (purged_at != 0 && now - purged_at < kRefaultWindowMs) {
      raise(c);
      return;
    }
  }
}

}  // namespace tenon::adaptive_grace
