// tenon-replay: replays a trace written by libtenon-trace.so against whatever
// allocator is preloaded, one thread per traced thread, and prints the time,
// the peak RSS and the latency percentiles (docs/measure.md).
//
//   tenon-replay [--summary] [--sample N] [--no-touch] FILE
//
// Output lines are "TAG key=value ..." (what bench/run.py parses):
//   TRACE   what the file holds (calls and bytes by operation, threads)
//   THREAD  the same per traced thread (--summary only)
//   REPLAY  what was replayed, wall time, peak RSS
//   LAT     latency percentiles per operation (ns)
//   OK      the replay finished with every block intact
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "plan.h"
#include "run.h"
#include "tenon/measure/calibration.hpp"
#include "tenon/measure/trace_format.hpp"

namespace {

namespace tf = tenon::measure::trace_format;
using namespace tenon::replay;

void print_counts(const char* tag, const op_counts& c) {
  std::printf("%s calls=%llu", tag, (unsigned long long)c.total());
  for (int o = tf::op_malloc; o <= tf::op_free; ++o) std::printf(" %s=%llu", tf::kOpNames[o], (unsigned long long)c.calls[o]);
  std::printf(" bytes=%llu null_frees=%llu", (unsigned long long)c.bytes, (unsigned long long)c.null_frees);
}

long status_kib(const char* key) {
  int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  char buf[4096];
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return -1;
  buf[n] = 0;
  const char* at = std::strstr(buf, key);
  return at ? std::strtol(at + std::strlen(key) + 1, nullptr, 10) : -1;
}

// VmHWM back to the current RSS (Linux 4.0+), so the peak is the replay's.
bool reset_peak() {
  int fd = open("/proc/self/clear_refs", O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  bool ok = write(fd, "5", 1) == 1;
  close(fd);
  return ok;
}

int usage() {
  std::fprintf(stderr, "usage: tenon-replay [--summary] [--sample N] [--no-touch] FILE\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  bool summary_only = false;
  options o;
  const char* path = nullptr;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--summary")) summary_only = true;
    else if (!std::strcmp(argv[i], "--no-touch")) o.touch = false;
    else if (!std::strcmp(argv[i], "--sample") && i + 1 < argc) o.sample = std::uint32_t(std::strtoul(argv[++i], nullptr, 10));
    else if (argv[i][0] == '-' || path) return usage();
    else path = argv[i];
  }
  if (!path || o.sample == 0) return usage();

  plan p;
  if (!load(path, p)) return 1;
  print_counts("TRACE", p.traced);
  std::printf(" threads=%zu pid=%u skipped=%llu unknown_frees=%llu lost_frees=%llu failed_in_trace=%llu ticks_per_second=%llu\n",
              p.n_threads, p.pid, (unsigned long long)p.skipped, (unsigned long long)p.unknown_frees,
              (unsigned long long)p.lost_frees, (unsigned long long)p.failed_in_trace,
              (unsigned long long)p.ticks_per_second);
  if (summary_only) {
    for (std::size_t k = 0; k < p.n_threads; ++k) {
      char tag[32];
      std::snprintf(tag, sizeof tag, "THREAD n=%u", p.threads[k].number);
      print_counts(tag, p.threads[k].traced);
      std::printf("\n");
    }
    release(p);
    return 0;
  }
  std::fflush(stdout);

  bool peak_reset = reset_peak();
  long rss_before = status_kib("VmRSS");
  result r;
  bool ok = run(p, o, r);
  long peak = status_kib("VmHWM");
  tenon::measure::calibration cal = tenon::measure::calibrate();

  print_counts("REPLAY", r.replayed);
  std::printf(" threads=%zu failed=%llu corrupt=%llu waits=%llu wall_s=%.6f peak_rss_kib=%ld replay_rss_kib=%ld peak_reset=%d\n",
              p.n_threads, (unsigned long long)r.failed, (unsigned long long)r.corrupt, (unsigned long long)r.waits,
              double(r.wall_ns) / 1e9, peak, peak - rss_before, peak_reset ? 1 : 0);
  for (int op = tf::op_malloc; op <= tf::op_free; ++op) {
    const auto& s = r.latency[op];
    if (s.n == 0) continue;
    std::printf("LAT op=%s unit=ns n=%llu", tf::kOpNames[op], (unsigned long long)s.n);
    for (std::size_t k = 0; k < tenon::measure::kReportCount; ++k)
      std::printf(" %s=%.0f", tenon::measure::kReportNames[k], double(s.percentile_ppm(tenon::measure::kReportPpm[k])) / cal.ticks_per_ns);
    std::printf(" max=%.0f\n", double(s.max) / cal.ticks_per_ns);
  }
  bool intact = ok && r.corrupt == 0 && r.failed == 0;
  if (r.corrupt) std::printf("ERROR %llu blocks changed between allocation and free\n", (unsigned long long)r.corrupt);
  if (r.failed) std::printf("ERROR %llu allocations failed in the replay\n", (unsigned long long)r.failed);
  // The checksum is what was replayed: the same under every allocator.
  if (intact) std::printf("OK replay checksum=%llu\n", (unsigned long long)(r.replayed.total() ^ (r.replayed.bytes << 1)));
  std::fflush(stdout);
  release(p);
  return intact ? 0 : 1;
}
