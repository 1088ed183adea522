// The trace layer's writer (see <tenon/measure/trace.hpp>).
//
// Per-thread buffers live in a fixed array of slots; a thread claims one with
// a CAS at its first traced call and hands it back (after writing it out) in
// a pthread key destructor at exit. A buffer starts with its chunk header, so
// writing it out is one write(2) of header and records together, which
// O_APPEND keeps in one piece in the file. A thread that holds no slot (none
// free, in the middle of claiming one, after its exit hook, or after the
// process's trace was closed at exit) writes each record as a chunk of its
// own at once. Nothing here allocates or waits for another thread.
#include <errno.h>
#include <string.h>

#include "text.h"
#include "tenon/measure/calibration.hpp"
#include "tenon/measure/trace.hpp"
#include "tenon/platform/options.h"
#include "tenon/platform/os.h"

namespace tenon::measure {

std::atomic<bool> g_tracing{false};

namespace {

namespace tf = trace_format;

constexpr unsigned kSlots = 256;
constexpr std::size_t kBufferBytes = 32 * 1024;

struct alignas(64) slot {
  std::atomic<std::uint32_t> owned{0};
  std::uint32_t used = sizeof(tf::chunk_header);  // bytes in buf, header included
  std::uint32_t records = 0;
  tf::codec state;
  alignas(16) std::uint8_t buf[kBufferBytes];
};

slot g_slots[kSlots];
std::atomic<unsigned> g_hint{0};
std::atomic<std::uint32_t> g_thread_count{0};
std::atomic<int> g_fd{-1};
std::atomic<bool> g_closed{false};  // after trace_close: every record is written at once
std::uint64_t g_t0 = 0;
int g_pid = 0;
bool g_per_process = false;   // the path has %p
char g_template[1024];        // the path as given
char g_path[1100];            // the path of this process's file

enum : std::uint8_t { kNoSlot, kClaiming, kOwner, kDirect };
__thread slot* t_slot __attribute__((tls_model("initial-exec")));
__thread std::uint8_t t_state __attribute__((tls_model("initial-exec")));
__thread std::uint32_t t_thread __attribute__((tls_model("initial-exec")));
// Set while this thread appends to its buffer: a signal handler that
// allocates in between writes its record on its own instead.
__thread bool t_appending __attribute__((tls_model("initial-exec")));

constexpr long kNoKey = -1;  // os::shared_thread_key's "no key"
std::atomic<long> g_key{kNoKey};

std::uint32_t thread_number() {
  if (t_thread == 0) t_thread = g_thread_count.fetch_add(1, std::memory_order_relaxed) + 1;
  return t_thread;
}

void stop(const char* why) {
  g_tracing.store(false, std::memory_order_relaxed);
  text::line l;
  l.str("tenon trace: stopped writing ").str(g_path).str(": ").str(why);
  l.write_to(2);
}

// One chunk out. A process that is not the one that opened the file (a
// child made without fork's handlers, e.g. by clone) writes nothing: its
// buffers hold its parent's records.
void emit(const void* chunk, std::size_t n) {
  int fd = g_fd.load(std::memory_order_relaxed);
  if (fd < 0) return;
  if (os::process_id() != g_pid) {
    g_tracing.store(false, std::memory_order_relaxed);
    return;
  }
  if (!os::write_all(fd, chunk, n)) stop("write failed");
}

void flush(slot& s) {
  if (s.records) {
    tf::chunk_header h{tf::kRecords, thread_number(), s.used - std::uint32_t(sizeof h), s.records};
    memcpy(s.buf, &h, sizeof h);
    emit(s.buf, s.used);
  }
  s.used = sizeof(tf::chunk_header);
  s.records = 0;
  s.state = tf::codec{};
}

void on_thread_exit(void* v) {
  auto* s = static_cast<slot*>(v);
  flush(*s);
  t_slot = nullptr;
  t_state = kDirect;  // this thread's calls in later destructor rounds
  s->owned.store(0, std::memory_order_release);
}

long thread_key() { return os::shared_thread_key(g_key, on_thread_exit); }

slot* claim() {
  t_state = kClaiming;  // setting the key's value may call calloc: that record is written at once
  long key = thread_key();
  if (key == kNoKey) {  // no way to write the buffer at thread exit
    t_state = kDirect;
    return nullptr;
  }
  unsigned start = g_hint.load(std::memory_order_relaxed);
  for (unsigned i = 0; i < kSlots; ++i) {
    slot& s = g_slots[(start + i) % kSlots];
    std::uint32_t free_mark = 0;
    if (s.owned.load(std::memory_order_relaxed) != 0 ||
        !s.owned.compare_exchange_strong(free_mark, 1, std::memory_order_acquire, std::memory_order_relaxed))
      continue;
    g_hint.store((start + i + 1) % kSlots, std::memory_order_relaxed);
    if (!os::thread_key_set(key, &s)) {
      s.owned.store(0, std::memory_order_release);
      break;
    }
    t_slot = &s;
    t_state = kOwner;
    return &s;
  }
  t_state = kDirect;
  return nullptr;
}

void write_header(int fd) {
  tf::file_header h{};
  memcpy(h.magic, tf::kFileMagic, sizeof h.magic);
  h.version = tf::kVersion;
  h.pid = static_cast<std::uint32_t>(g_pid);
  h.t0_ticks = g_t0;
  if (!os::write_all(fd, &h, sizeof h)) stop("write failed");
}

// g_template with every %p replaced by the process id.
void expand_path() {
  text::line pid;
  pid.u64(static_cast<std::uint64_t>(g_pid));
  std::size_t o = 0;
  for (const char* s = g_template; *s && o + 24 < sizeof g_path; ++s) {
    if (s[0] == '%' && s[1] == 'p') {
      for (std::size_t k = 0; k < pid.len; ++k) g_path[o++] = pid.buf[k];
      ++s;
    } else {
      g_path[o++] = *s;
    }
  }
  g_path[o] = 0;
}

bool open_file() {
  g_pid = os::process_id();
  expand_path();
  int fd = os::open_for_append(g_path, true);
  if (fd < 0) {
    text::line l;
    l.str("tenon trace: cannot open ").str(g_path).str(" (errno ").u64(static_cast<std::uint64_t>(errno)).str(")");
    l.write_to(2);
    return false;
  }
  g_t0 = ticks_now();
  g_fd.store(fd, std::memory_order_relaxed);
  write_header(fd);
  return true;
}

// In a forked child the other threads are gone, and every buffer (the
// forking thread's too) holds records the parent will write: all are
// dropped. With %p the child goes on in a file of its own; without, it stops.
void after_fork_child() {
  for (auto& s : g_slots) {
    if (&s != t_slot) s.owned.store(0, std::memory_order_relaxed);
    s.used = sizeof(tf::chunk_header);
    s.records = 0;
    s.state = tf::codec{};
  }
  int fd = g_fd.load(std::memory_order_relaxed);
  if (fd < 0) return;
  os::close_file(fd);
  g_fd.store(-1, std::memory_order_relaxed);
  if (!g_tracing.load(std::memory_order_relaxed) || !g_per_process || !open_file())
    g_tracing.store(false, std::memory_order_relaxed);
}

void write_direct(const tf::record& r) {
  alignas(16) std::uint8_t buf[sizeof(tf::chunk_header) + tf::kMaxRecordBytes];
  tf::codec c;
  std::size_t n = tf::encode(r, c, buf + sizeof(tf::chunk_header));
  tf::chunk_header h{tf::kRecords, thread_number(), std::uint32_t(n), 1};
  memcpy(buf, &h, sizeof h);
  emit(buf, sizeof h + n);
}

__attribute__((constructor)) void at_load() {
  os::at_fork_child(after_fork_child);
  if (const char* path = read_options().trace) trace_open(path);
}

__attribute__((destructor)) void at_unload() { trace_finish_at_exit(); }

}  // namespace

bool trace_open(const char* path_template) noexcept {
  if (g_tracing.load(std::memory_order_relaxed)) return false;
  if (g_fd.load(std::memory_order_relaxed) >= 0 || strlen(path_template) >= sizeof g_template) return false;
  strcpy(g_template, path_template);
  g_per_process = strstr(g_template, "%p") != nullptr;
  if (!open_file()) return false;
  // Programs this one starts inherit the environment; without %p they would
  // all truncate and write the same file.
  if (!g_per_process) unsetenv("TENON_TRACE");
  thread_key();
  g_closed.store(false, std::memory_order_relaxed);
  g_tracing.store(true, std::memory_order_release);
  return true;
}

void trace_call(trace_format::op o, std::uint64_t start, std::size_t size, std::size_t align, const void* old,
                const void* result) noexcept {
  std::uint64_t end = ticks_now();
  tf::record r{};
  r.op = o;
  r.start = start > g_t0 ? start - g_t0 : 0;
  r.duration = end > start ? end - start : 0;
  r.size = size;
  r.align_log2 = align ? static_cast<std::uint8_t>(__builtin_ctzll(align)) : 0;
  r.old = reinterpret_cast<std::uintptr_t>(old);
  r.result = reinterpret_cast<std::uintptr_t>(result);
  slot* s = t_slot;
  if (!s && t_state == kNoSlot) {
    thread_number();  // numbered in the order of their first traced call
    s = claim();
  }
  if (!s || t_appending || g_closed.load(std::memory_order_relaxed)) {
    write_direct(r);
    return;
  }
  t_appending = true;
  // Counters of different cores may disagree by a little: a thread's times
  // never go backwards in its own records.
  if (r.start < s->state.prev_time) r.start = s->state.prev_time;
  if (s->used + tf::kMaxRecordBytes > kBufferBytes) flush(*s);
  s->used += static_cast<std::uint32_t>(tf::encode(r, s->state, s->buf + s->used));
  ++s->records;
  t_appending = false;
}

void trace_flush() noexcept {
  if (t_slot) flush(*t_slot);
}

namespace {
// The clock chunk, and from then on every record written at once.
void finish() {
  trace_flush();
  g_closed.store(true, std::memory_order_relaxed);
  calibration cal = calibrate();
  struct {
    tf::chunk_header h;
    std::uint64_t ticks_per_second;
  } clock{{tf::kClock, 0, 8, 0}, static_cast<std::uint64_t>(cal.ticks_per_ns * 1e9)};
  emit(&clock, sizeof clock);
}
}  // namespace

// At exit: calls made by destructors that run after this one (other
// libraries', the C library's) are still written, one by one.
void trace_finish_at_exit() noexcept {
  if (g_fd.load(std::memory_order_relaxed) >= 0) finish();
}

void trace_close() noexcept {
  int fd = g_fd.load(std::memory_order_relaxed);
  if (fd < 0) return;
  finish();
  g_tracing.store(false, std::memory_order_relaxed);
  g_fd.store(-1, std::memory_order_relaxed);
  os::close_file(fd);
}

}  // namespace tenon::measure
