// <tenon/measure/trace_format.hpp>: the binary trace libtenon-trace.so writes
// (TENON_TRACE=FILE) and tenon-replay reads. Little-endian, as the machine
// that wrote it.
//
//   file   := file_header chunk*
//   chunk  := chunk_header body            (header.bytes bytes of body)
//   kRecords chunk: header.records records of one thread (header.thread), in
//            the order that thread made the calls; the codec state starts at
//            zero in every chunk, so chunks decode on their own.
//   kClock chunk:   one u64, counter ticks per second (written at exit).
//
// A record is an operation byte, then LEB128 varints:
//   dt       start time - previous record's start (ticks since the file's t0)
//   duration end time - start time
//   size     (malloc, calloc, realloc, aligned) bytes asked; calloc: count * size
//   align    (aligned) one byte, log2 of the alignment
//   old      (free, realloc) zigzag of the pointer given - previous pointer
//   result   (malloc, calloc, realloc, aligned) zigzag of the pointer returned -
//            previous pointer (0 result: the call failed)
// where "previous pointer" is the last pointer (old or result) coded in the
// chunk. Typical records take 6 to 10 bytes.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace tenon::measure::trace_format {

inline constexpr char kFileMagic[8] = {'T', 'E', 'N', 'O', 'N', 'T', 'R', 'C'};
inline constexpr std::uint32_t kVersion = 1;
inline constexpr std::uint32_t kRecords = 0x4B434E54;  // "TNCK"
inline constexpr std::uint32_t kClock = 0x4C434E54;    // "TNCL"

struct file_header {
  char magic[8];
  std::uint32_t version;
  std::uint32_t pid;
  std::uint64_t t0_ticks;  // the counter when the file was opened; record times count from here
  std::uint64_t reserved;
};
static_assert(sizeof(file_header) == 32);

struct chunk_header {
  std::uint32_t magic;
  std::uint32_t thread;  // 1, 2, ... in the order threads first called (1: the main thread)
  std::uint32_t bytes;
  std::uint32_t records;
};
static_assert(sizeof(chunk_header) == 16);

enum op : std::uint8_t { op_malloc = 1, op_calloc = 2, op_realloc = 3, op_aligned = 4, op_free = 5 };
inline constexpr const char* kOpNames[6] = {"?", "malloc", "calloc", "realloc", "aligned", "free"};

inline bool allocates(std::uint8_t o) { return o >= op_malloc && o <= op_aligned; }
inline bool releases(std::uint8_t o) { return o == op_free || o == op_realloc; }

struct record {
  std::uint8_t op;
  std::uint8_t align_log2;
  std::uint64_t start;     // ticks since t0
  std::uint64_t duration;  // ticks
  std::uint64_t size;
  std::uint64_t old;
  std::uint64_t result;
};

inline constexpr std::size_t kMaxRecordBytes = 1 + 10 + 10 + 10 + 1 + 10 + 10;

struct codec {
  std::uint64_t prev_time = 0;
  std::uint64_t prev_ptr = 0;
};

inline std::uint8_t* put_varint(std::uint8_t* out, std::uint64_t v) {
  while (v >= 0x80) {
    *out++ = static_cast<std::uint8_t>(v | 0x80);
    v >>= 7;
  }
  *out++ = static_cast<std::uint8_t>(v);
  return out;
}

inline std::uint64_t zigzag(std::uint64_t delta) {
  auto d = static_cast<std::int64_t>(delta);
  return (static_cast<std::uint64_t>(d) << 1) ^ static_cast<std::uint64_t>(d >> 63);
}
inline std::uint64_t unzigzag(std::uint64_t z) { return (z >> 1) ^ (~(z & 1) + 1); }

// Encodes r into out (at least kMaxRecordBytes); returns the bytes written.
// r.start must not be below the previous record's (the writer clamps).
inline std::size_t encode(const record& r, codec& c, std::uint8_t* out) {
  std::uint8_t* p = out;
  *p++ = r.op;
  p = put_varint(p, r.start - c.prev_time);
  c.prev_time = r.start;
  p = put_varint(p, r.duration);
  if (allocates(r.op)) p = put_varint(p, r.size);
  if (r.op == op_aligned) *p++ = r.align_log2;
  if (releases(r.op)) {
    p = put_varint(p, zigzag(r.old - c.prev_ptr));
    c.prev_ptr = r.old;
  }
  if (allocates(r.op)) {
    p = put_varint(p, zigzag(r.result - c.prev_ptr));
    c.prev_ptr = r.result;
  }
  return static_cast<std::size_t>(p - out);
}

inline bool get_varint(const std::uint8_t*& in, const std::uint8_t* end, std::uint64_t& v) {
  v = 0;
  for (unsigned shift = 0; shift < 64; shift += 7) {
    if (in == end) return false;
    std::uint8_t b = *in++;
    v |= std::uint64_t(b & 0x7F) << shift;
    if (!(b & 0x80)) return true;
  }
  return false;
}

// Decodes one record; false on a malformed or truncated one.
inline bool decode(const std::uint8_t*& in, const std::uint8_t* end, codec& c, record& r) {
  if (in == end) return false;
  r = record{};
  r.op = *in++;
  if (r.op < op_malloc || r.op > op_free) return false;
  std::uint64_t v;
  if (!get_varint(in, end, v)) return false;
  r.start = c.prev_time + v;
  c.prev_time = r.start;
  if (!get_varint(in, end, r.duration)) return false;
  if (allocates(r.op) && !get_varint(in, end, r.size)) return false;
  if (r.op == op_aligned) {
    if (in == end) return false;
    r.align_log2 = *in++;
  }
  if (releases(r.op)) {
    if (!get_varint(in, end, v)) return false;
    r.old = c.prev_ptr + unzigzag(v);
    c.prev_ptr = r.old;
  }
  if (allocates(r.op)) {
    if (!get_varint(in, end, v)) return false;
    r.result = c.prev_ptr + unzigzag(v);
    c.prev_ptr = r.result;
  }
  return true;
}

}  // namespace tenon::measure::trace_format
