// Layer 4, address space: the engine part that hands out runs of slices.
//
// Lock-free by construction: a chunk's occupancy is one 64-bit word, and a run
// of slices is taken or returned with a single CAS / fetch_and on it. Chunks
// are registered in an append-only registry (an atomic counter hands out
// slots) so that any thread can find free slices in any chunk. Chunks are
// never unmapped: their headers (descriptors) stay, only slice pages are purged.
//
// Freed slices stay committed ("dirty") for a delay, so that a program that
// frees and reallocates does not pay page faults; a purge pass, claimed by one
// thread at a time with a CAS on the next-purge time (others skip it, nobody
// waits), gives the pages of slices freed longer ago back to the OS. The
// background purger (a thread, see below) runs the pass on time while the
// program is idle.
//
// Config supplies the policies: platform (where memory comes from), sync
// (lock_free, or the benchmark's locked twin) and stats (counters or none).
#pragma once
#include <atomic>
#include <cstdint>

#include "tenon/arena/chunk.h"
#include "tenon/arena/run_cache.h"
#include "tenon/common/config.h"
#include "tenon/common/stats.h"
#include "tenon/platform/options.h"

namespace tenon {

// TENON_POPULATE's rule for memory just mapped or taken fresh: fault in
// [p, p + bytes) when the option is on and `size` reaches its threshold.
// The huge blocks' mappings and small spans (whatever their slices' state:
// heap/refill.ipp, form_small_span) use it directly; large runs go through
// arena::prefault, which first checks the run is not warm.
template <class Platform>
void prefault_fresh(void* p, std::size_t bytes, std::size_t size) {
  std::uint32_t threshold = options().populate;
  if (threshold != 0 && size >= threshold) Platform::populate(p, bytes);
}

namespace arena_detail {
// purger_state_: kRunning stays set in a fork child, which has no purger: it
// is never restarted there (a child of a multithreaded process cannot tell
// that it is alone; its memory is purged on allocator activity, as without
// the thread).
enum : int { kNotStarted, kStarting, kRunning, kFailed };
}  // namespace arena_detail

template <class C>
class arena {
 public:
  using stats_t = typename C::stats;
  // Called by each purge pass after the slices: another part that keeps
  // memory for reuse (the huge cache) gives back what is past the delay, so
  // it goes back on time even if it is never used again. True if it gave
  // any memory back.
  using purge_hook = bool (*)(void* context);

  constexpr arena(purge_hook hook, void* context) : hook_(hook), hook_context_(context) {}

  // Take a run of `nslices` free slices, preferring `*hint` (updated to the
  // chunk used). The descriptor at the run's first slice is returned with
  // start, first_slice, nslices and zeroed set; the slice index is filled for
  // the whole run. nullptr (errno ENOMEM) when the OS refuses memory.
  // `dense_first`: the caller writes the whole run (a small span carves it),
  // so it takes slices a span left carved first; other callers (a large
  // block, whose user may write two bytes of it) leave those to spans.
  span* take_span(unsigned nslices, chunk** hint, stats_t* st, bool dense_first = false);

  // TENON_POPULATE: fault in [p, p + bytes) of the run s just taken, if the
  // run had a fresh or purged slice (a warm run is left alone) and `size`
  // (the request, or a small span's bytes) reaches the option's threshold.
  void prefault(const span* s, void* p, std::size_t bytes, std::size_t size);

  // Give a span's slices back; its pages stay committed until the purge
  // delay, counted from `idle_ms` before now (a run that waited unused in a
  // run cache has been idle that long already).
  void release_span(span* s, stats_t* st, std::uint32_t idle_ms = 0);

  // A thread heap's run cache (run_cache.h, src/arena/run_cache.ipp). By its
  // owner: a run of `nslices` slices out of rc, or nullptr; and s, a large
  // block's run just freed, into rc if rc then holds at most `budget`
  // slices, else false (the caller releases it).
  span* take_cached(run_cache& rc, unsigned nslices);
  bool keep_cached(run_cache& rc, span* s, unsigned budget);
  // By any thread: every run of rc back to the arena (`all`: malloc_trim,
  // the heap's release at its thread's exit), or (the purge pass's expiry)
  // those aged by an earlier pass, setting the aged bit of the others.
  void flush_cached(run_cache& rc, bool all, stats_t* st);

  // Purge pass: drop the pages of slices free for longer than the delay (all
  // free slices when `force`) and of those the dirty cap marked (release.ipp),
  // then the hook's. True if any pages went back (the marks' do not count).
  bool purge(bool force, stats_t* st);

  // Start the background purger now, whatever the process; true if it runs.
  bool start_purger();

  // Memory was just kept resident for reuse (here, or by a part above such
  // as the huge cache): start the background purger if the options ask for
  // it to start lazily and it can be started now without waiting for
  // another thread. One relaxed load once started or ruled out.
  void note_retained();

  // Whether c's bit in the warm map is set (tests): it is while c has a free
  // slice whose pages are resident, and may stay set a moment after.
  bool listed_warm(chunk* c);

  // The counts made without a thread heap, and the held-bytes gauge.
  stats_t& shared_stats() { return shared_stats_; }

  // f(c) for every registered chunk, in registry order, for the statistics:
  // a chunk registered meanwhile may be missed; the few past kMaxChunks
  // (or whose registry block could not be reserved) are never seen.
  template <class F>
  void for_each_chunk(F&& f) {
    std::uint32_t n = nchunks_.load(std::memory_order_acquire);
    if (n > kMaxChunks) n = kMaxChunks;
    for (std::uint32_t idx = 0; idx < n; ++idx)
      if (chunk* c = registered(idx)) f(c);
  }

 private:
  // What a pass of find_run takes: slices a span left carved, any free
  // resident ones, or any free ones.
  enum class want : std::uint8_t { dense, warm, any };
  // A block of registry slots, and their chunks' bits in the warm map: bit
  // i of warm[w] is set while the chunk in slot 64 w + i has a free slice
  // whose pages are resident (its `dirty` word is not 0).
  struct registry_block {
    std::atomic<chunk*> slots[kChunkRegistryBlock];
    std::atomic<std::uint64_t> warm[kChunkRegistryBlock / 64];
  };
  chunk* registered(std::uint32_t idx);
  void register_at(std::uint32_t idx, chunk* c);
  std::atomic<std::uint64_t>* warm_word(std::uint32_t word);
  // c's bit in the warm map set where its `dirty` word went from 0 to not 0,
  // and cleared where it went back to 0 (see take.ipp).
  void mark_warm(chunk* c);
  void unmark_warm(chunk* c);
  span* take_warm(unsigned nslices, chunk** hint, want w, bool dense_first, stats_t* st);
  span* find_run(unsigned nslices, chunk** hint, stats_t* st, bool dense_first);
  span* try_take(chunk* c, unsigned n, want w, bool dense_first, stats_t* st);
  // chunk::dense's bits set and cleared, with dense_chunks_ kept.
  void mark_dense(chunk* c, std::uint64_t bits);
  void clear_dense(chunk* c, std::uint64_t mask);
  chunk* new_chunk(unsigned take_n, stats_t* st);
  bool advise_chunk(chunk* c);  // TENON_HUGE_PAGES=2 or 4: true if advised
  bool full_for_huge_pages();
  void before_purge(chunk* c);
  void count_untouched_as_dirty(chunk* c);
  bool purge_slice(chunk* c, unsigned i, stats_t* st);
  unsigned purge_run(chunk* c, unsigned first, unsigned n, stats_t* st);
  void mark_over_cap(chunk* c, std::uint64_t keep, std::uint32_t now);
  void count_kept(std::int64_t slices);
  // Whether count_kept may still count: one relaxed load, so that a caller
  // need not work out a count that would be thrown away.
  bool may_count_kept() const {
    return purger_state_.load(std::memory_order_relaxed) == arena_detail::kNotStarted;
  }
  void start_purger_before_release(unsigned n);
  void trim_marked(chunk* c, std::uint32_t now, stats_t* st);
  void purge_due_by(std::uint32_t when);
  std::uint64_t oldest_past_grace(chunk* c, std::uint64_t candidates, unsigned want, std::uint32_t now);
  std::uint32_t ms_until_purge_due();
  static void* purger_main(void* self);

  // Append-only registry of every chunk, in blocks reserved as the count
  // reaches them (see register_at).
  std::atomic<registry_block*> registry_[kMaxChunks / kChunkRegistryBlock]{};
  std::atomic<std::uint32_t> nchunks_{0};
  std::atomic<std::uint32_t> scan_from_{0};  // where the next warm-slice scan starts
  // Chunks whose `dense` word is not 0 (a hint, moved when a word goes from 0
  // to not 0 and back): find_run skips its dense pass while it reads 0.
  std::atomic<std::int32_t> dense_chunks_{0};
  // Purge pass: at most one thread at a time; the claim is a CAS on this time.
  std::atomic<std::uint32_t> next_purge_ms_{0};
  // Slices marked over a chunk's cap since the last pass (release.ipp): a hint
  // that brings the pass forward when it reaches kMaxMarkedSlices.
  std::atomic<std::uint32_t> marked_{0};
  // The background purger: not started, starting, running, failed (see purger.ipp).
  std::atomic<int> purger_state_{0};
  // Free resident slices of all chunks, counted only while the purger may
  // still start lazily (count_kept, purger.ipp).
  std::atomic<std::int64_t> kept_slices_{0};
  purge_hook hook_;
  void* hook_context_;
  stats_t shared_stats_{};
};

}  // namespace tenon
