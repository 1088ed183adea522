// Reading a trace and planning its replay (see plan.h).
//
// Which free gives back which block is found by address: every allocating
// call "happens" when it returned (start + duration) and every free when it
// started, so that sorting the address events of all threads by (address,
// time) puts each block's allocation right before the free that gives it
// back, even across threads (the freeing thread got the pointer after the
// allocation returned) and across reuse (an allocator hands an address out
// again only after a free of it began). Calls on one address in the same
// tick alternate, in each thread's own order, a free first while the address
// is handed out.
#include "plan.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

#include "tenon/measure/trace_format.hpp"

namespace tenon::replay {

namespace tf = measure::trace_format;

void* map_zeroed(std::size_t bytes) {
  if (bytes == 0) bytes = 1;
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  return p == MAP_FAILED ? nullptr : p;
}
void unmap(void* p, std::size_t bytes) {
  if (p) munmap(p, bytes ? bytes : 1);
}

namespace {

struct addr_event {
  std::uint64_t addr;
  std::uint64_t time;
  std::uint32_t index;
  std::uint32_t kind;  // 0: gives the block back, 1: hands it out (frees first on a tie)
};

struct mapped_file {
  const std::uint8_t* data = nullptr;
  std::size_t size = 0;
  ~mapped_file() {
    if (data) munmap(const_cast<std::uint8_t*>(data), size);
  }
};

bool fail(const char* path, const char* why) {
  std::fprintf(stderr, "tenon-replay: %s: %s\n", path, why);
  return false;
}

// Calls fn(header, body) for every chunk; false if the file is cut short.
template <class Fn>
bool for_each_chunk(const mapped_file& f, Fn fn) {
  std::size_t at = sizeof(tf::file_header);
  while (at + sizeof(tf::chunk_header) <= f.size) {
    tf::chunk_header h;
    std::memcpy(&h, f.data + at, sizeof h);
    at += sizeof h;
    if (at + h.bytes > f.size) return false;
    fn(h, f.data + at);
    at += h.bytes;
  }
  return at == f.size;
}

void count(op_counts& c, const tf::record& r) {
  ++c.calls[r.op];
  if (tf::allocates(r.op)) c.bytes += r.size;
  if (r.op == tf::op_free && r.old == 0) ++c.null_frees;
}

}  // namespace

bool load(const char* path, plan& out) {
  out = plan{};
  mapped_file f;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return fail(path, std::strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0 || st.st_size < static_cast<off_t>(sizeof(tf::file_header))) {
    close(fd);
    return fail(path, "not a trace (too short)");
  }
  f.size = static_cast<std::size_t>(st.st_size);
  void* m = mmap(nullptr, f.size, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (m == MAP_FAILED) return fail(path, "cannot map it");
  f.data = static_cast<const std::uint8_t*>(m);
  tf::file_header fh;
  std::memcpy(&fh, f.data, sizeof fh);
  if (std::memcmp(fh.magic, tf::kFileMagic, sizeof fh.magic) != 0) return fail(path, "not a tenon trace");
  if (fh.version != tf::kVersion) return fail(path, "trace format version not supported");
  out.pid = fh.pid;

  // Pass 1: records per thread (a few small vectors: before any timing).
  std::vector<std::uint32_t> numbers;
  std::vector<std::uint64_t> counts;
  bool whole = for_each_chunk(f, [&](const tf::chunk_header& h, const std::uint8_t* body) {
    if (h.magic == tf::kClock && h.bytes >= 8) std::memcpy(&out.ticks_per_second, body, 8);
    if (h.magic != tf::kRecords) return;
    auto it = std::find(numbers.begin(), numbers.end(), h.thread);
    if (it == numbers.end()) {
      numbers.push_back(h.thread);
      counts.push_back(h.records);
    } else {
      counts[std::size_t(it - numbers.begin())] += h.records;
    }
  });
  if (!whole) std::fprintf(stderr, "tenon-replay: %s: the last chunk is cut short (ignored)\n", path);
  std::vector<std::size_t> order(numbers.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return numbers[a] < numbers[b]; });
  std::uint64_t total = 0;
  for (auto c : counts) total += c;
  if (total >= kNone) return fail(path, "more than 4 billion calls");

  out.n_threads = numbers.size();
  out.n_events = total;
  out.threads = static_cast<thread_plan*>(map_zeroed(sizeof(thread_plan) * out.n_threads));
  out.events = static_cast<event*>(map_zeroed(sizeof(event) * out.n_events));
  std::size_t n_addr = 2 * out.n_events;
  auto* addrs = static_cast<addr_event*>(map_zeroed(sizeof(addr_event) * n_addr));
  if (!out.threads || !out.events || !addrs) {
    unmap(addrs, sizeof(addr_event) * n_addr);
    release(out);
    return fail(path, "out of memory for the plan");
  }
  std::vector<std::uint32_t> slot_of(numbers.size()), next(numbers.size());
  std::uint32_t first = 0;
  for (std::size_t k = 0; k < order.size(); ++k) {
    std::size_t i = order[k];
    slot_of[i] = static_cast<std::uint32_t>(k);
    out.threads[k].number = numbers[i];
    out.threads[k].first = first;
    out.threads[k].count = static_cast<std::uint32_t>(counts[i]);
    next[k] = first;
    first += static_cast<std::uint32_t>(counts[i]);
  }

  // Pass 2: decode into the events, and note every address handed out or given back.
  std::size_t n_used = 0;
  bool bad = false;
  for_each_chunk(f, [&](const tf::chunk_header& h, const std::uint8_t* body) {
    if (h.magic != tf::kRecords || bad) return;
    std::size_t k = slot_of[std::size_t(std::find(numbers.begin(), numbers.end(), h.thread) - numbers.begin())];
    thread_plan& t = out.threads[k];
    tf::codec c;
    const std::uint8_t* in = body;
    for (std::uint32_t r_i = 0; r_i < h.records; ++r_i) {
      tf::record r;
      if (!tf::decode(in, body + h.bytes, c, r)) {
        bad = true;
        return;
      }
      std::uint32_t idx = next[k]++;
      event& e = out.events[idx];
      e.op = r.op;
      e.size = r.size;
      e.align_log2 = r.align_log2;
      e.dep = kNone;
      count(t.traced, r);
      count(out.traced, r);
      if (tf::allocates(r.op) && r.result == 0) {  // failed: nothing handed out, nothing given back
        e.flags |= kSkip;
        ++out.failed_in_trace;
        continue;
      }
      if (tf::releases(r.op)) {
        if (r.old == 0) e.flags |= r.op == tf::op_free ? kNullFree : 0;
        else addrs[n_used++] = {r.old, r.start, idx, 0};
      }
      if (tf::allocates(r.op)) addrs[n_used++] = {r.result, r.start + r.duration, idx, 1};
    }
  });
  if (bad) {
    unmap(addrs, sizeof(addr_event) * n_addr);
    release(out);
    return fail(path, "a record does not decode (corrupt trace)");
  }

  // Within one (address, time), frees then allocations, each in event
  // order (a thread's own calls are numbered in the order it made them).
  std::sort(addrs, addrs + n_used, [](const addr_event& a, const addr_event& b) {
    if (a.addr != b.addr) return a.addr < b.addr;
    if (a.time != b.time) return a.time < b.time;
    if (a.kind != b.kind) return a.kind < b.kind;
    return a.index < b.index;
  });
  std::uint32_t live = kNone;
  auto hand_out = [&](const addr_event& a) {
    if (live != kNone) ++out.lost_frees;
    live = a.index;
  };
  auto give_back = [&](const addr_event& a) {
    if (live != kNone) {
      out.events[a.index].dep = live;
      live = kNone;
      return;
    }
    ++out.unknown_frees;
    event& e = out.events[a.index];
    if (e.op == tf::op_realloc) e.flags |= kUnknownOld;
    else e.flags |= kSkip;
  };
  for (std::size_t i = 0; i < n_used;) {
    if (i == 0 || addrs[i].addr != addrs[i - 1].addr) live = kNone;
    // Calls on one address in the same tick (a coarse counter, such as
    // aarch64's, makes them common): their order is not in the times, so
    // they alternate, a free first while the address is handed out.
    std::size_t end = i;
    while (end < n_used && addrs[end].addr == addrs[i].addr && addrs[end].time == addrs[i].time) ++end;
    std::size_t f = i, a = i;
    while (a < end && addrs[a].kind == 0) ++a;
    const std::size_t frees_end = a;
    while (f < frees_end || a < end) {
      if (live != kNone && f < frees_end) give_back(addrs[f++]);
      else if (live == kNone && a < end) hand_out(addrs[a++]);
      else if (f < frees_end) give_back(addrs[f++]);
      else hand_out(addrs[a++]);
    }
    i = end;
  }
  unmap(addrs, sizeof(addr_event) * n_addr);

  // Which dependencies cross threads (the replay waits for those).
  for (std::size_t k = 0; k < out.n_threads; ++k) {
    const thread_plan& t = out.threads[k];
    for (std::uint32_t i = t.first; i < t.first + t.count; ++i) {
      event& e = out.events[i];
      if (e.dep != kNone && (e.dep < t.first || e.dep >= t.first + t.count)) e.flags |= kRemoteDep;
      if (e.flags & kSkip) ++out.skipped;
    }
  }
  return true;
}

void release(plan& p) {
  unmap(p.events, sizeof(event) * p.n_events);
  unmap(p.threads, sizeof(thread_plan) * p.n_threads);
  p.events = nullptr;
  p.threads = nullptr;
}

}  // namespace tenon::replay
