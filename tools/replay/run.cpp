// The timed replay (see run.h).
#include "run.h"

#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <time.h>

#include <atomic>
#include <cstdio>
#include <cstring>

#include "tenon/measure/cycles.hpp"
#include "tenon/measure/trace_format.hpp"

namespace tenon::replay {

namespace tf = measure::trace_format;

namespace {

// A block that could not be allocated in the replay: its free is skipped.
void* const kFailed = reinterpret_cast<void*>(1);

std::uint64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return std::uint64_t(ts.tv_sec) * 1000000000u + std::uint64_t(ts.tv_nsec);
}

// The first byte of every block carries a tag from its event number; a
// different byte at its free means the allocator gave the block out twice
// or wrote into it.
std::uint8_t tag(std::uint32_t index) { return static_cast<std::uint8_t>((index * 2654435761u) >> 24) | 1; }

struct shared {
  const plan* p;
  const options* o;
  std::atomic<void*>* blocks;  // one per event: the block it produced, once it has
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::atomic<bool> stuck{false};
};

struct worker {
  shared* s;
  const thread_plan* t;
  op_counts replayed;
  std::uint64_t failed = 0, corrupt = 0, waits = 0;
  measure::summary* latency;  // [6], mapped
  std::uint32_t rng = 0;
  std::int32_t countdown = 0;
};

void touch(void* p, std::size_t n, std::uint32_t index) {
  if (n == 0) return;
  auto* c = static_cast<volatile std::uint8_t*>(p);
  c[0] = tag(index);
  for (std::size_t off = 4096; off < n; off += 4096) c[off] = 1;
}

bool sample(worker& w) {
  if (--w.countdown > 0) return false;
  std::uint32_t n = w.s->o->sample;
  if (n <= 1) {
    w.countdown = 1;
    return true;
  }
  std::uint32_t x = w.rng ? w.rng : 0x9E3779B9u ^ w.t->number;
  x ^= x << 13;
  x ^= x >> 17;
  x ^= x << 5;
  w.rng = x;
  w.countdown = static_cast<std::int32_t>(1 + x % (2 * n - 1));
  return true;
}

// The block event `dep` produced, waiting for it if another thread makes it.
void* take(worker& w, const event& e) {
  std::atomic<void*>& b = w.s->blocks[e.dep];
  void* p = b.load(std::memory_order_acquire);
  if (!p && (e.flags & kRemoteDep)) {
    ++w.waits;
    std::uint64_t deadline = now_ns() + std::uint64_t(w.s->o->stuck_seconds) * 1000000000u;
    while (!(p = b.load(std::memory_order_acquire))) {
      sched_yield();
      if (w.s->stuck.load(std::memory_order_relaxed) || now_ns() > deadline) {
        w.s->stuck.store(true, std::memory_order_relaxed);
        return kFailed;
      }
    }
  }
  if (p && p != kFailed && w.s->p->events[e.dep].size > 0 && *static_cast<std::uint8_t*>(p) != tag(e.dep))
    ++w.corrupt;
  return p ? p : kFailed;
}

void* allocate(const event& e, void* old) {
  switch (e.op) {
    case tf::op_malloc: return malloc(e.size);
    case tf::op_calloc: return calloc(1, e.size);
    case tf::op_realloc: return realloc(old, e.size);
    case tf::op_aligned: {
      std::size_t align = std::size_t(1) << e.align_log2;
      if (align <= sizeof(void*)) return malloc(e.size);
      void* p = nullptr;
      return posix_memalign(&p, align, e.size) == 0 ? p : nullptr;
    }
  }
  return nullptr;
}

void call(worker& w, std::uint32_t index) {
  const event& e = w.s->p->events[index];
  if (e.flags & kSkip) return;
  void* old = nullptr;
  if (e.dep != kNone) {
    old = take(w, e);
    if (old == kFailed) return;
  }
  bool timed = sample(w);
  std::uint64_t t0 = timed ? measure::ticks_begin() : 0;
  if (e.op == tf::op_free) {
    free(old);  // NULL for free(NULL)
  } else {
    void* p = allocate(e, old);
    if (timed) w.latency[e.op].record(measure::ticks_end() - t0);
    timed = false;
    if (!p) {
      ++w.failed;
      if (e.op == tf::op_realloc && old) free(old);  // keep the books balanced
      p = kFailed;
    } else if (w.s->o->touch) {
      touch(p, e.size, index);
    } else if (e.size) {
      *static_cast<std::uint8_t*>(p) = tag(index);
    }
    w.s->blocks[index].store(p, std::memory_order_release);
  }
  if (timed) w.latency[e.op].record(measure::ticks_end() - t0);
  ++w.replayed.calls[e.op];
  if (tf::allocates(e.op)) w.replayed.bytes += e.size;
  if (e.flags & kNullFree) ++w.replayed.null_frees;
}

void* thread_main(void* arg) {
  auto& w = *static_cast<worker*>(arg);
  w.s->ready.fetch_add(1, std::memory_order_acq_rel);
  while (!w.s->go.load(std::memory_order_acquire)) sched_yield();
  for (std::uint32_t i = w.t->first; i < w.t->first + w.t->count && !w.s->stuck.load(std::memory_order_relaxed); ++i)
    call(w, i);
  return nullptr;
}

}  // namespace

bool run(const plan& p, const options& o, result& out) {
  out = result{};
  shared s;
  s.p = &p;
  s.o = &o;
  std::size_t blocks_bytes = sizeof(std::atomic<void*>) * p.n_events;
  s.blocks = static_cast<std::atomic<void*>*>(map_zeroed(blocks_bytes));
  std::size_t workers_bytes = sizeof(worker) * p.n_threads;
  auto* workers = static_cast<worker*>(map_zeroed(workers_bytes));
  std::size_t lat_bytes = sizeof(measure::summary) * 6 * p.n_threads;
  auto* lat = static_cast<measure::summary*>(map_zeroed(lat_bytes));
  std::size_t tids_bytes = sizeof(pthread_t) * p.n_threads;
  auto* tids = static_cast<pthread_t*>(map_zeroed(tids_bytes));
  if (!s.blocks || !workers || !lat || !tids) {
    std::fprintf(stderr, "tenon-replay: out of memory for %zu events\n", p.n_events);
    return false;
  }
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 256 * 1024);
  std::size_t started = 0;
  bool ok = true;
  for (std::size_t k = 0; k < p.n_threads; ++k) {
    worker* w = new (&workers[k]) worker{};
    w->s = &s;
    w->t = &p.threads[k];
    w->latency = lat + 6 * k;
    if (pthread_create(&tids[k], &attr, thread_main, w) != 0) {
      std::fprintf(stderr, "tenon-replay: cannot start replay thread %zu of %zu\n", k + 1, p.n_threads);
      ok = false;
      s.stuck.store(true);
      break;
    }
    ++started;
  }
  pthread_attr_destroy(&attr);
  while (s.ready.load(std::memory_order_acquire) < static_cast<int>(started)) sched_yield();
  std::uint64_t t0 = now_ns();
  s.go.store(true, std::memory_order_release);
  for (std::size_t k = 0; k < started; ++k) pthread_join(tids[k], nullptr);
  out.wall_ns = now_ns() - t0;
  if (s.stuck.load()) {
    if (ok) std::fprintf(stderr, "tenon-replay: a thread waited %u s for a block (trace inconsistent)\n", o.stuck_seconds);
    ok = false;
  }
  for (std::size_t k = 0; k < started; ++k) {
    worker& w = workers[k];
    for (int i = 0; i < 6; ++i) {
      out.replayed.calls[i] += w.replayed.calls[i];
      out.latency[i].add(w.latency[i]);
    }
    out.replayed.bytes += w.replayed.bytes;
    out.replayed.null_frees += w.replayed.null_frees;
    out.failed += w.failed;
    out.corrupt += w.corrupt;
    out.waits += w.waits;
  }
  // The blocks still live stay allocated, as they were when the traced
  // program ended; the slots that point at them are the replayer's own.
  unmap(s.blocks, blocks_bytes);
  unmap(workers, workers_bytes);
  unmap(lat, lat_bytes);
  unmap(tids, tids_bytes);
  return ok;
}

}  // namespace tenon::replay
