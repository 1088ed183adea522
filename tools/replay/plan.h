// tenon-replay's plan: a trace file turned into one list of calls per traced
// thread, with every free and realloc pointing at the call that produced its
// block. Built before the timed replay, in memory mapped straight from the
// OS, so that the allocator under test sees only the replayed calls.
#pragma once
#include <cstddef>
#include <cstdint>

namespace tenon::replay {

inline constexpr std::uint32_t kNone = 0xFFFFFFFFu;

// One call to make. Events are numbered thread by thread; an allocating
// event's number is also the slot its block is kept in while it lives.
struct event {
  std::uint64_t size;
  std::uint32_t dep;   // free, realloc: the event whose block this one gives back; kNone: none
  std::uint8_t op;     // trace_format::op
  std::uint8_t align_log2;
  std::uint8_t flags;  // below
  std::uint8_t pad;
};
static_assert(sizeof(event) == 16);

enum : std::uint8_t {
  kSkip = 1,        // not replayed: failed in the trace, or frees a block the trace never saw allocated
  kRemoteDep = 2,   // dep was made by another thread: wait until it has been
  kNullFree = 4,    // free(NULL)
  kUnknownOld = 8,  // realloc of a block the trace never saw allocated: replayed as malloc
};

struct op_counts {
  std::uint64_t calls[6] = {};  // by trace_format::op
  std::uint64_t bytes = 0;      // sizes asked by the allocating calls
  std::uint64_t null_frees = 0; // free(NULL) (counted in calls[op_free] too)
  std::uint64_t total() const { return calls[1] + calls[2] + calls[3] + calls[4] + calls[5]; }
};

struct thread_plan {
  std::uint32_t number;  // the traced thread's number
  std::uint32_t first;   // index of its first event
  std::uint32_t count;
  op_counts traced;
};

struct plan {
  event* events = nullptr;
  std::size_t n_events = 0;
  thread_plan* threads = nullptr;
  std::size_t n_threads = 0;
  std::uint32_t pid = 0;
  std::uint64_t ticks_per_second = 0;  // 0: the trace has no clock chunk
  op_counts traced;                    // every record in the file
  std::uint64_t skipped = 0;           // events not replayed (flag kSkip)
  std::uint64_t unknown_frees = 0;     // frees/reallocs of blocks the trace never saw allocated
  std::uint64_t lost_frees = 0;        // addresses handed out again with no free recorded in between
  std::uint64_t failed_in_trace = 0;   // allocations that returned NULL in the trace
};

// Reads and plans FILE; on failure prints why to stderr and returns false.
bool load(const char* path, plan& out);
void release(plan& p);

// Memory from mmap, zeroed; nullptr on failure.
void* map_zeroed(std::size_t bytes);
void unmap(void* p, std::size_t bytes);

}  // namespace tenon::replay
