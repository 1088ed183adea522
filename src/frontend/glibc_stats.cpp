// glibc's reporting calls (mallinfo2, mallinfo, malloc_stats, malloc_info)
// answered from a layer's statistics, for TENON_EXPORT_MALLOC, or handed to
// the next library's when the layer has none. Text is
// formatted by hand into a buffer on the stack: nothing here allocates.
// malloc_info hands each line to fputs, and glibc's stdio allocates a
// buffered FILE's buffer on its first write, with malloc, as it does for
// any program's first write to that FILE (an unbuffered FILE such as
// stderr needs none); that call reaches tenon's malloc from outside tenon.
#include <errno.h>
#include <limits.h>

#include <cstdint>

#include "tenon/layer.hpp"
#include "tenon/platform/os.h"

namespace tenon::detail {

namespace {

// A line of text in a fixed buffer (longer text is cut).
struct line {
  char buf[256];
  std::size_t len = 0;
  line& str(const char* s) {
    while (*s && len + 1 < sizeof buf) buf[len++] = *s++;
    buf[len] = 0;
    return *this;
  }
  line& num(unsigned long long v, unsigned width = 0) {
    char tmp[24];
    unsigned k = 0;
    do tmp[k++] = static_cast<char>('0' + v % 10); while (v /= 10);
    for (unsigned pad = k; pad < width; ++pad) str(" ");
    while (k && len + 1 < sizeof buf) buf[len++] = tmp[--k];
    buf[len] = 0;
    return *this;
  }
  // ` name="v"`
  line& attr(const char* name, unsigned long long v) { return str(" ").str(name).str("=\"").num(v).str("\""); }
};

int clamp_int(std::size_t v) { return v > INT_MAX ? INT_MAX : static_cast<int>(v); }

std::size_t chunk_bytes(const tenon_stats& s) { return s.chunks * (std::size_t{4} << 20); }

}  // namespace

// glibc's fields, mapped onto tenon's memory: the "arena" is the chunks
// (small and large blocks), the mmapped blocks are the huge ones.
struct mallinfo2 to_mallinfo2(const tenon_stats& s) noexcept {
  struct mallinfo2 mi {};
  mi.arena = chunk_bytes(s);
  mi.hblks = s.huge_blocks;
  mi.hblkhd = s.huge_in_use;
  mi.uordblks = s.small_in_use + s.large_in_use;
  mi.fordblks = mi.arena > mi.uordblks ? mi.arena - mi.uordblks : 0;
  mi.keepcost = s.retained;
  return mi;
}

struct mallinfo to_mallinfo(const tenon_stats& s) noexcept {
  struct mallinfo2 m = to_mallinfo2(s);
  struct mallinfo mi {};
  mi.arena = clamp_int(m.arena);
  mi.hblks = clamp_int(m.hblks);
  mi.hblkhd = clamp_int(m.hblkhd);
  mi.uordblks = clamp_int(m.uordblks);
  mi.fordblks = clamp_int(m.fordblks);
  mi.keepcost = clamp_int(m.keepcost);
  return mi;
}

// glibc's layout (one arena), then tenon's own figures; to stderr.
void print_malloc_stats(const tenon_stats& s) noexcept {
  struct row {
    const char* label;
    std::size_t value;
  };
  const row rows[] = {
      {"Arena 0:", SIZE_MAX},
      {"system bytes     = ", chunk_bytes(s)},
      {"in use bytes     = ", s.small_in_use + s.large_in_use},
      {"Total (incl. mmap):", SIZE_MAX},
      {"system bytes     = ", s.mapped},
      {"in use bytes     = ", s.in_use},
      {"max mmap regions = ", s.huge_blocks},
      {"max mmap bytes   = ", s.huge_in_use},
      {"tenon:", SIZE_MAX},
      {"peak in use bytes = ", s.peak_in_use},
      {"resident bytes    = ", s.resident},
      {"retained bytes    = ", s.retained},
  };
  for (const row& r : rows) {
    line l;
    l.str(r.label);
    if (r.value != SIZE_MAX) l.num(r.value, 10);
    l.str("\n");
    os::write_error(l.buf, l.len);
  }
}

// glibc's XML (one heap: the chunks; mmap: the huge blocks), then tenon's
// figures and its size classes in elements of their own.
int write_malloc_info(const tenon_stats& s, int options, FILE* fp) noexcept {
  if (options != 0 || !fp) {  // glibc defines no option
    errno = EINVAL;
    return -1;
  }
  std::size_t arena = chunk_bytes(s);
  auto put = [fp](const line& l) { return os::write_stream(fp, l.buf); };
  bool ok = put(line().str("<malloc version=\"1\" allocator=\"tenon\">\n<heap nr=\"0\">\n<sizes>\n</sizes>\n"));
  ok &= put(line().str("<total type=\"fast\" count=\"0\" size=\"0\"/>\n"));
  ok &= put(line().str("<total type=\"rest\"").attr("count", 0).attr("size", s.retained).str("/>\n"));
  for (const char* k : {"<system type=\"current\"", "<system type=\"max\"", "<aspace type=\"total\"",
                        "<aspace type=\"mprotect\""})
    ok &= put(line().str(k).attr("size", arena).str("/>\n"));
  ok &= put(line().str("</heap>\n<total type=\"fast\" count=\"0\" size=\"0\"/>\n"));
  ok &= put(line().str("<total type=\"rest\"").attr("count", 0).attr("size", s.retained).str("/>\n"));
  ok &= put(line().str("<total type=\"mmap\"").attr("count", s.huge_blocks).attr("size", s.huge_in_use).str("/>\n"));
  for (const char* k : {"<system type=\"current\"", "<system type=\"max\"", "<aspace type=\"total\"",
                        "<aspace type=\"mprotect\""})
    ok &= put(line().str(k).attr("size", s.mapped).str("/>\n"));
  ok &= put(line()
                .str("<tenon")
                .attr("in_use", s.in_use)
                .attr("small_in_use", s.small_in_use)
                .attr("large_in_use", s.large_in_use)
                .attr("huge_in_use", s.huge_in_use)
                .attr("peak_in_use", s.peak_in_use)
                .attr("mapped", s.mapped)
                .attr("resident", s.resident)
                .attr("retained", s.retained)
                .str("/>\n"));
  for (unsigned c = 0; c < s.classes && c < TENON_STATS_CLASSES; ++c) {
    const tenon_class_stats& k = s.class_stats[c];
    if (!k.spans) continue;
    ok &= put(line()
                  .str("<class")
                  .attr("size", k.block_size)
                  .attr("blocks_in_use", k.blocks_in_use)
                  .attr("bytes_in_use", k.bytes_in_use)
                  .attr("spans", k.spans)
                  .attr("span_bytes", k.span_bytes)
                  .str("/>\n"));
  }
  ok &= put(line().str("</malloc>\n"));
  // Into a buffered FILE, fputs only fills the buffer: the write that can
  // fail (a full disk, a closed pipe) comes at the flush, here, so that -1
  // says so (docs/api.md; until 2026-11-29 a refused write answered 0).
  ok &= os::flush_stream(fp);
  return ok ? 0 : -1;
}

// The next library's definition of `name` (looked up once per call: these
// are rare calls, and dlsym may wait for the dynamic linker's lock, as
// glibc's own reporting calls wait for its arena locks).
template <class F>
F next(const char* name) {
  return reinterpret_cast<F>(os::next_symbol(name));
}

struct mallinfo2 next_mallinfo2() noexcept {
  struct mallinfo2 none {};
  auto f = next<struct mallinfo2 (*)()>("mallinfo2");
  return f ? f() : none;
}

struct mallinfo next_mallinfo() noexcept {
  struct mallinfo none {};
  auto f = next<struct mallinfo (*)()>("mallinfo");
  return f ? f() : none;
}

void next_malloc_stats() noexcept {
  if (auto f = next<void (*)()>("malloc_stats")) f();
}

int next_malloc_info(int options, FILE* fp) noexcept {
  if (auto f = next<int (*)(int, FILE*)>("malloc_info")) return f(options, fp);
  errno = ENOSYS;
  return -1;
}

}  // namespace tenon::detail
