// Platform: how much memory this process's memory cgroup still allows, for
// TENON_POPULATE's bound (os_linux.cpp, populate). In a container with a
// memory limit, sysinfo() reports the host: a pre-fault that fits the host
// but not the cgroup is charged page by page to the cgroup, and when the
// charge fails the kernel calls the cgroup's OOM killer from inside
// madvise (found by review, 2026-11-29: the same SIGKILL inside malloc that
// the sysinfo bound stopped on a whole machine).
//
// The files are read with raw system calls, as the platform's other file
// calls (os_linux.cpp: glibc's open and read are cancellation points), into
// stack buffers (no allocation: this runs inside malloc).
#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

#include "tenon/platform/os.h"

namespace tenon::os {
namespace {

constexpr std::uint64_t kNoLimit = ~std::uint64_t{0};
constexpr std::size_t kPathMax = 512;

// Reads at most size-1 bytes of the file into buf, NUL-terminated; the
// length, or -1.
long read_small_file(const char* path, char* buf, std::size_t size) {
  int fd = static_cast<int>(syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC, 0));
  if (fd < 0) return -1;
  long got = 0;
  while (static_cast<std::size_t>(got) < size - 1) {
    long n = syscall(SYS_read, fd, buf + got, size - 1 - static_cast<std::size_t>(got));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += n;
  }
  syscall(SYS_close, fd);
  buf[got] = '\0';
  return got;
}

// A file holding one decimal number; kNoLimit for "max" (v2's no limit), a
// file that is not there or not a number.
std::uint64_t read_number(const char* dir, const char* name) {
  char path[kPathMax + 64];
  std::size_t d = strlen(dir), n = strlen(name);
  if (d + n + 2 > sizeof path) return kNoLimit;
  memcpy(path, dir, d);
  path[d] = '/';
  memcpy(path + d + 1, name, n + 1);
  char text[32];
  if (read_small_file(path, text, sizeof text) <= 0 || text[0] < '0' || text[0] > '9') return kNoLimit;
  std::uint64_t v = 0;
  for (const char* c = text; *c >= '0' && *c <= '9'; ++c) v = v * 10 + static_cast<std::uint64_t>(*c - '0');
  return v;
}

// limit - usage in one cgroup folder (kNoLimit where it has no limit).
std::uint64_t left_in(const char* dir, const char* limit_file, const char* usage_file) {
  std::uint64_t limit = read_number(dir, limit_file);
  if (limit == kNoLimit) return kNoLimit;
  std::uint64_t usage = read_number(dir, usage_file);
  if (usage == kNoLimit) return kNoLimit;
  return usage < limit ? limit - usage : 0;
}

// The least left over the cgroup's folder and every folder above it up to
// the mount (a limit may be set on an ancestor): mount + path, then path cut
// at each '/'.
std::uint64_t least_left(const char* mount, const char* path, std::size_t path_len, const char* limit_file,
                         const char* usage_file) {
  char dir[kPathMax + 64];
  std::size_t m = strlen(mount);
  if (m + path_len + 1 > sizeof dir) return kNoLimit;
  memcpy(dir, mount, m);
  memcpy(dir + m, path, path_len);
  std::size_t len = m + path_len;
  while (len > m && dir[len - 1] == '/') --len;
  dir[len] = '\0';
  std::uint64_t least = kNoLimit;
  for (;;) {
    std::uint64_t left = left_in(dir, limit_file, usage_file);
    if (left < least) least = left;
    if (len <= m) break;
    while (len > m && dir[len - 1] != '/') --len;  // up one folder
    while (len > m && dir[len - 1] == '/') --len;
    dir[len] = '\0';
  }
  return least;
}

// In /proc/self/cgroup, the path of the hierarchy whose controllers (the
// second field) are `controllers` exactly ("" for v2's unified line) or
// include `controller` (v1: "memory" alone or in a comma list).
bool cgroup_path(const char* text, const char* controller, const char** path, std::size_t* len) {
  std::size_t want = strlen(controller);
  for (const char* line = text; *line;) {
    const char* end = strchr(line, '\n');
    if (!end) end = line + strlen(line);
    const char* c1 = static_cast<const char*>(memchr(line, ':', static_cast<std::size_t>(end - line)));
    const char* c2 = c1 ? static_cast<const char*>(memchr(c1 + 1, ':', static_cast<std::size_t>(end - c1 - 1)))
                        : nullptr;
    if (c2) {
      bool match = false;
      if (want == 0) {
        match = c2 == c1 + 1;
      } else {
        for (const char* f = c1 + 1; f < c2;) {
          const char* comma = static_cast<const char*>(memchr(f, ',', static_cast<std::size_t>(c2 - f)));
          const char* fe = comma ? comma : c2;
          if (static_cast<std::size_t>(fe - f) == want && memcmp(f, controller, want) == 0) match = true;
          f = fe + 1;
        }
      }
      if (match) {
        *path = c2 + 1;
        *len = static_cast<std::size_t>(end - c2 - 1);
        return true;
      }
    }
    line = *end ? end + 1 : end;
  }
  return false;
}

}  // namespace

std::uint64_t cgroup_memory_left() {
  int saved = errno;
  char text[4096];
  std::uint64_t least = kNoLimit;
  const char* path;
  std::size_t len;
  if (read_small_file("/proc/self/cgroup", text, sizeof text) > 0) {
    if (cgroup_path(text, "", &path, &len)) {  // v2: the unified hierarchy, where it is mounted
      std::uint64_t left = least_left("/sys/fs/cgroup", path, len, "memory.max", "memory.current");
      if (left == kNoLimit) left = least_left("/sys/fs/cgroup/unified", path, len, "memory.max", "memory.current");
      if (left < least) least = left;
    }
    if (cgroup_path(text, "memory", &path, &len)) {  // v1: the memory controller's hierarchy
      std::uint64_t left =
          least_left("/sys/fs/cgroup/memory", path, len, "memory.limit_in_bytes", "memory.usage_in_bytes");
      if (left < least) least = left;
    }
  }
  errno = saved;
  return least;
}

}  // namespace tenon::os
