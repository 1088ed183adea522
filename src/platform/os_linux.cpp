// Layer 1 for Linux: mmap, munmap, madvise, mremap, and the C library calls
// the layers above need (clock, environment, stderr, thread key, dlsym).
#include "tenon/platform/os.h"

#include "tenon/common/inject.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <stdio.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/sysinfo.h>
#include <sys/uio.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include <atomic>

// glibc 2.32+: set false when the process first creates a thread (never set
// back). Weak, so that a C library without it reads as "not known single".
extern "C" char __libc_single_threaded __attribute__((weak));

namespace tenon::os {

namespace {
std::atomic<std::size_t> g_page_size{0};

// The memory source, if one was installed, and whether any memory was
// reserved yet (after which no source may be installed). Written once:
// installs race by CAS on g_source_state.
enum : int { kNoSourceYet, kInstalling, kSourceSet, kReserved };
std::atomic<int> g_source_state{kNoSourceYet};
memory_source g_source;

bool has_source() { return g_source_state.load(std::memory_order_acquire) == kSourceSet; }

void note_reserved() {
  int state = g_source_state.load(std::memory_order_relaxed);
  if (state == kNoSourceYet) g_source_state.compare_exchange_strong(state, kReserved, std::memory_order_relaxed);
}

void* map_anon(std::size_t size) {
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  return p == MAP_FAILED ? nullptr : p;
}
}  // namespace

std::size_t page_size() {
  std::size_t ps = g_page_size.load(std::memory_order_relaxed);
  if (ps == 0) {
    // getauxval neither allocates nor locks; every racer computes the same value.
    ps = static_cast<std::size_t>(getauxval(AT_PAGESZ));
    if (ps == 0) ps = 4096;
    g_page_size.store(ps, std::memory_order_relaxed);
  }
  return ps;
}

namespace {
bool is_aligned(const void* p, std::size_t align) { return (reinterpret_cast<std::uintptr_t>(p) & (align - 1)) == 0; }

// Over-reserve by `align`, then trim both ends to the alignment.
void* reserve_trimmed(std::size_t size, std::size_t align) {
  std::size_t span = size + align;
  if (span < size) { errno = ENOMEM; return nullptr; }
  auto* raw = static_cast<char*>(map_anon(span));
  if (!raw) return nullptr;
  auto start = (reinterpret_cast<std::uintptr_t>(raw) + align - 1) & ~(std::uintptr_t)(align - 1);
  auto* aligned = reinterpret_cast<char*>(start);
  std::size_t head = static_cast<std::size_t>(aligned - raw);
  std::size_t tail = span - head - size;
  if (head) munmap(raw, head);
  if (tail) munmap(aligned + size, tail);
  return aligned;
}

// Exactly `size` at an aligned address next to where the kernel would put
// it: for when an over-reservation does not fit (an address-space limit).
void* reserve_at_aligned_hint(std::size_t size, std::size_t align) {
#ifndef MAP_FIXED_NOREPLACE
  constexpr int MAP_FIXED_NOREPLACE = 0x100000;  // Linux 4.17; older kernels take it as a hint
#endif
  auto* probe = static_cast<char*>(map_anon(size));
  if (!probe || is_aligned(probe, align)) return probe;
  munmap(probe, size);
  auto down = reinterpret_cast<std::uintptr_t>(probe) & ~(std::uintptr_t)(align - 1);
  for (std::uintptr_t hint : {down + align, down}) {
    void* p = mmap(reinterpret_cast<void*>(hint), size, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
    if (p == MAP_FAILED) continue;
    if (is_aligned(p, align)) return p;
    munmap(p, size);
  }
  errno = ENOMEM;
  return nullptr;
}

// reserve's aligned attempts, the cheapest in address space first.
void* reserve_aligned_attempts(std::size_t size, std::size_t align) {
  // A whole number of alignment units (a chunk) is tried at its exact size
  // first: the kernel hands out ranges top-down, right below the last one,
  // so a run of chunks comes out aligned without the extra `align` of
  // address space an over-reservation needs (which under an address-space
  // limit may not fit when the chunk does).
  if (size % align == 0) {
    void* p = map_anon(size);
    if (p && is_aligned(p, align)) return p;
    if (p) munmap(p, size);
  }
  if (void* p = reserve_trimmed(size, align)) return p;
  return reserve_at_aligned_hint(size, align);
}

// The aligned cases of reserve. Attempts that fail before one succeeds leave
// their errno (ENOMEM of an over-reservation under an address-space limit,
// EEXIST of a refused MAP_FIXED_NOREPLACE hint): a successful call leaves
// the caller's errno as it was, as glibc's malloc does.
void* reserve_aligned(std::size_t size, std::size_t align) {
  int saved = errno;
  void* p = reserve_aligned_attempts(size, align);
  if (p) errno = saved;
  return p;
}

}  // namespace

bool set_memory_source(const memory_source& source) {
  int state = kNoSourceYet;
  if (!source.reserve || !g_source_state.compare_exchange_strong(state, kInstalling, std::memory_order_relaxed))
    return false;
  g_source = source;
  g_source_state.store(kSourceSet, std::memory_order_release);
  return true;
}

namespace {

// os::owe_reopening's count (bytes; relaxed: a bound checked on slow paths).
std::atomic<std::ptrdiff_t> g_owed{0};

// Whether a mapping just made leaves room, under RLIMIT_DATA, for the closed
// bytes that will be opened again: a second mapping of that many bytes is
// tried and given back at once (the kernel applies the limit to it as to
// the pages' opening). Always when nothing is owed or the limit is infinite
// (getrlimit: a system call, made only while something is owed).
bool room_for_owed() {
  std::ptrdiff_t owed = g_owed.load(std::memory_order_relaxed);
  if (owed <= 0) return true;
  int saved = errno;
  struct rlimit lim;
  bool limited = getrlimit(RLIMIT_DATA, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY;
  void* probe = limited ? map_anon(static_cast<std::size_t>(owed)) : nullptr;
  if (probe) munmap(probe, static_cast<std::size_t>(owed));
  errno = saved;
  return !limited || probe;
}

// A mapping from the kernel (no memory source), given back and refused
// (ENOMEM) if it took the share of the limit that closed pages lent.
void* checked(void* p, std::size_t size) {
  if (!p || room_for_owed()) return p;
  munmap(p, size);
  errno = ENOMEM;
  return nullptr;
}

}  // namespace

void owe_reopening(std::ptrdiff_t bytes) { g_owed.fetch_add(bytes, std::memory_order_relaxed); }

void* reserve(std::size_t size, std::size_t align) {
  TENON_INJECT_POINT("os.reserve");
  if (has_source()) {
    void* p = g_source.reserve(size, align < page_size() ? page_size() : align, g_source.context);
    if (!p) errno = ENOMEM;
    return p;
  }
  note_reserved();
  if (align <= page_size()) return checked(map_anon(size), size);
  return checked(reserve_aligned(size, align), size);
}


// An unmap the kernel refuses (ENOMEM: the range is part of a mapping merged
// with its neighbours, and splitting it would pass vm.max_map_count) drops
// the pages instead, which splits nothing: the range's address space stays
// taken and unused, its memory goes back. Until 2026-11-30 the refusal was
// ignored and the pages stayed resident for good (freed huge blocks: +1.5 GB
// after 40 rounds of 8 x 20 MB; preload.map_count_full).
void release(void* p, std::size_t size) {
  int saved = errno;
  if (has_source()) {
    if (g_source.release) g_source.release(p, size, g_source.context);
  } else if (munmap(p, size) != 0) {
    madvise(p, size, MADV_DONTNEED);
  }
  errno = saved;
}

bool purge(void* p, std::size_t size) {
  int saved = errno;
  bool ok = madvise(p, size, MADV_DONTNEED) == 0;
  errno = saved;
  return ok;
}

bool resize_in_place(void* p, std::size_t old_size, std::size_t new_size) {
#if defined(__SANITIZE_THREAD__)
  // ThreadSanitizer does not intercept mremap: moved pages would keep stale
  // shadow state and produce false race reports. Callers fall back to copying.
  (void)p; (void)old_size; (void)new_size;
  return false;
#endif
  if (has_source()) return false;
  int saved = errno;
  void* r = mremap(p, old_size, new_size, 0);
  errno = saved;
  return r != MAP_FAILED;
}

bool move_to(void* p, std::size_t old_size, std::size_t new_size, void* dest) {
#if defined(__SANITIZE_THREAD__)
  (void)p; (void)old_size; (void)new_size; (void)dest;  // see resize_in_place
  return false;
#endif
  if (has_source()) return false;
  int saved = errno;
  void* r = mremap(p, old_size, new_size, MREMAP_MAYMOVE | MREMAP_FIXED, dest);
  errno = saved;
  return r != MAP_FAILED;
}

namespace {
// Ranges up to this size are pre-faulted without asking how much memory is
// free: a small span or large run costs no more than its first touch would,
// and the question would be a second system call per span.
constexpr std::size_t kPopulateUncheckedMax = std::size_t{2} << 20;
}  // namespace

// Whether `size` bytes fit in half of the memory free now: on the machine
// (sysinfo: free RAM and buffers) and in the process's memory cgroup (a
// container's limit, which sysinfo does not see: cgroup_memory.cpp).
// MADV_POPULATE_WRITE of more than the machine or the cgroup can give does
// not fail with ENOMEM: the kernel calls the OOM killer on the way, which
// killed the process inside malloc(1 TiB) under TENON_POPULATE=1 (SIGKILL;
// or another process first) until 2026-11-29 (preload.populate_beyond_ram,
// preload.populate_beyond_cgroup). Half is a margin for the program's other
// needs and for other processes, not a measurement; threads that populate
// at once may each take it (a bound, not a reservation). A refused sysinfo
// answers no. The huge cache asks the same before it keeps a block over its
// size limit (src/huge/cache.ipp), inside free, which must leave errno as it
// was (POSIX.1-2024): a refused sysinfo's errno is undone here, and
// cgroup_memory_left keeps its own.
bool fits_free_memory(std::size_t size) {
  if (size <= kPopulateUncheckedMax) return true;
  struct sysinfo si;
  int saved = errno;
  bool known = sysinfo(&si) == 0;
  errno = saved;
  if (!known) return false;
  unsigned long long free_bytes = (static_cast<unsigned long long>(si.freeram) + si.bufferram) * si.mem_unit;
  if (size > free_bytes / 2) return false;
  return size <= cgroup_memory_left() / 2;
}

bool populate(void* p, std::size_t size) {
#ifndef MADV_POPULATE_WRITE
  constexpr int MADV_POPULATE_WRITE = 23;  // Linux 5.14; older headers lack it
#endif
  // A kernel before 5.14 answers EINVAL for the unknown advice (our ranges
  // are page aligned): stop asking, every later call would fail the same way
  // at the price of a system call. A memory source's mapping that cannot be
  // populated (VM_IO, VM_PFNMAP) answers the same and turns it off too.
  static std::atomic<bool> unsupported{false};
  if (unsupported.load(std::memory_order_relaxed)) return false;
  int saved = errno;
  if (!fits_free_memory(size)) {
    errno = saved;
    return false;
  }
  bool ok = madvise(p, size, MADV_POPULATE_WRITE) == 0;
  if (!ok && errno == EINVAL) unsupported.store(true, std::memory_order_relaxed);
  errno = saved;
  return ok;
}

namespace {
// The membarrier commands for restartable sequences (linux/membarrier.h of
// Linux 5.10; older headers lack them).
constexpr int kMembarrierRestartRseq = 1 << 7;          // MEMBARRIER_CMD_PRIVATE_EXPEDITED_RSEQ
constexpr int kMembarrierRegisterRestartRseq = 1 << 8;  // MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_RSEQ
long membarrier(int cmd) {
#ifdef SYS_membarrier
  return syscall(SYS_membarrier, cmd, 0, 0);
#else
  (void)cmd;
  errno = ENOSYS;
  return -1;
#endif
}
}  // namespace

bool register_sequence_restarts() {
  int saved = errno;
  // Registered, and one real call works (seccomp or an emulator may allow
  // the first and refuse the second).
  bool ok = membarrier(kMembarrierRegisterRestartRseq) == 0 && membarrier(kMembarrierRestartRseq) == 0;
  errno = saved;
  return ok;
}

int restart_sequences() {
  int saved = errno;
  int r = membarrier(kMembarrierRestartRseq) == 0 ? 0 : errno;
  errno = saved;
  return r;
}

std::size_t resident_bytes(void* p, std::size_t size) {
  // A small vector on the stack, the range in steps of its length counted
  // in 4 KiB pages, whatever the page size: the vector gets one entry per
  // page of the kernel that serves the call, and under qemu-user a 64 KiB
  // guest's mincore is a 4 KiB host's (a step of 1,024 guest pages had the
  // host write 16,384 entries here: calloc's probe of a 32 MiB block crashed
  // api.Calloc.HugeIsZeroed in the aarch64 stage at 64 KiB pages).
  unsigned char vec[1024];
  const std::size_t page = page_size();
  const std::size_t step = sizeof vec * 4096;
  std::size_t resident = 0;
  int saved = errno;
  for (std::size_t off = 0; off < size; off += step) {
    std::size_t len = size - off < step ? size - off : step;
    if (mincore(static_cast<char*>(p) + off, len, vec) != 0) break;
    for (std::size_t i = 0, n = (len + page - 1) / page; i < n; ++i) resident += vec[i] & 1;
  }
  errno = saved;
  return resident * page;
}

namespace {
void advise(void* p, std::size_t size, int advice) {
  int saved = errno;
  madvise(p, size, advice);
  errno = saved;
}
}  // namespace

void advise_huge(void* p, std::size_t size) {
#ifdef MADV_HUGEPAGE
  advise(p, size, MADV_HUGEPAGE);
#else
  (void)p; (void)size;
#endif
}

void unadvise_huge(void* p, std::size_t size) {
#ifdef MADV_NOHUGEPAGE
  advise(p, size, MADV_NOHUGEPAGE);
#else
  (void)p; (void)size;
#endif
}

namespace {
using clock_fn = int (*)(clockid_t, timespec*);

int libc_clock_gettime(clockid_t id, timespec* ts) { return clock_gettime(id, ts); }

// The kernel's vDSO names its clock_gettime __vdso_clock_gettime (x86-64) or
// __kernel_clock_gettime (aarch64); DT_HASH's second word is its symbol count.
bool is_vdso_clock(const char* name) {
  return strcmp(name, "__vdso_clock_gettime") == 0 || strcmp(name, "__kernel_clock_gettime") == 0;
}

// The vDSO's own clock_gettime, found in its symbol table, or nullptr (no vDSO:
// valgrind, some sandboxes; no DT_HASH). Reads the vDSO image only.
clock_fn find_vdso_clock() {
  auto base = static_cast<ElfW(Addr)>(getauxval(AT_SYSINFO_EHDR));
  if (base == 0) return nullptr;
  auto* eh = reinterpret_cast<const ElfW(Ehdr)*>(base);
  auto* ph = reinterpret_cast<const ElfW(Phdr)*>(base + eh->e_phoff);
  ElfW(Addr) load = 0;
  const ElfW(Dyn)* dyn = nullptr;
  bool loaded = false;
  for (unsigned i = 0; i < eh->e_phnum; ++i) {
    if (ph[i].p_type == PT_LOAD && !loaded) { load = base + ph[i].p_offset - ph[i].p_vaddr; loaded = true; }
    if (ph[i].p_type == PT_DYNAMIC) dyn = reinterpret_cast<const ElfW(Dyn)*>(base + ph[i].p_offset);
  }
  if (!loaded || dyn == nullptr) return nullptr;
  const ElfW(Sym)* sym = nullptr;
  const char* str = nullptr;
  const ElfW(Word)* hash = nullptr;
  for (; dyn->d_tag != DT_NULL; ++dyn) {
    if (dyn->d_tag == DT_SYMTAB) sym = reinterpret_cast<const ElfW(Sym)*>(load + dyn->d_un.d_ptr);
    if (dyn->d_tag == DT_STRTAB) str = reinterpret_cast<const char*>(load + dyn->d_un.d_ptr);
    if (dyn->d_tag == DT_HASH) hash = reinterpret_cast<const ElfW(Word)*>(load + dyn->d_un.d_ptr);
  }
  if (sym == nullptr || str == nullptr || hash == nullptr) return nullptr;
  for (ElfW(Word) i = 0; i < hash[1]; ++i)
    if (ELF64_ST_TYPE(sym[i].st_info) == STT_FUNC && sym[i].st_shndx != SHN_UNDEF && is_vdso_clock(str + sym[i].st_name))
      return reinterpret_cast<clock_fn>(load + sym[i].st_value);
  return nullptr;
}

// now_ms calls the vDSO itself, not libc's clock_gettime: that small wrapper lies
// alone in a 64 KiB window of libc's text which a small program never reaches
// otherwise, and the kernel's fault-around maps the whole window for one call
// (64 KiB of peak RSS; docs/architecture.md, "tenon's resident memory at start").
// Every racer finds the same function, so a relaxed store is enough.
std::atomic<clock_fn> g_clock{nullptr};

// errno kept: getauxval sets ENOENT where the process has no vDSO (qemu-user's
// aarch64 guests), and now_ms runs inside calls that must leave errno as it
// was (a large block's free: api.EdgeCases.FreePreservesErrno failed there,
// errno 2, in the aarch64 stage).
clock_fn coarse_clock() {
  clock_fn fn = g_clock.load(std::memory_order_relaxed);
  if (fn == nullptr) {
    int saved = errno;
    fn = find_vdso_clock();
    if (fn == nullptr) fn = libc_clock_gettime;
    g_clock.store(fn, std::memory_order_relaxed);
    errno = saved;
  }
  return fn;
}
}  // namespace

std::uint32_t now_ms() {
  timespec ts;
  if (coarse_clock()(CLOCK_MONOTONIC_COARSE, &ts) != 0) clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return static_cast<std::uint32_t>(ts.tv_sec * 1000 + ts.tv_nsec / 1000000);
}

std::uint64_t monotonic_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1000000000u + static_cast<std::uint64_t>(ts.tv_nsec);
}

// In secure-execution mode (setuid, setgid, file capabilities: AT_SECURE)
// the environment belongs to whoever started the program, not to its owner:
// no TENON_* variable is read there, as glibc ignores MALLOC_* (secure_getenv
// answers nullptr; until 2026-11-30 TENON_STATS, TENON_VERBOSE and
// TENON_TRACE acted on the invoker's word: preload.secure_exec).
const char* env(const char* name) { return secure_getenv(name); }

const char* const* environment() {
  static const char* const kNone[] = {nullptr};
  return getauxval(AT_SECURE) ? kNone : environ;
}

bool at_fork_child(void (*fn)()) { return pthread_atfork(nullptr, nullptr, fn) == 0; }

// The file calls below, and getrandom, go straight to the kernel with
// syscall(): glibc's open, write, close and getrandom are cancellation
// points, and a thread with a cancel pending would be unwound from inside
// the allocator (a half-made span, a misuse line never followed by abort)
// where malloc and free must return (preload.cancel_pending).
int open_for_append(const char* path, bool truncate) {
  int flags = O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | (truncate ? O_TRUNC : 0);
  return static_cast<int>(syscall(SYS_openat, AT_FDCWD, path, flags, 0644));
}

bool write_all(int fd, const void* data, std::size_t size) {
  auto* p = static_cast<const char*>(data);
  while (size > 0) {
    ssize_t n = syscall(SYS_write, fd, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    size -= static_cast<std::size_t>(n);
  }
  return true;
}

void close_file(int fd) { syscall(SYS_close, fd); }

int process_id() { return getpid(); }

// errno kept: its caller has a way on without the range (the secure
// build's zero-size region serves one real byte instead), and the call that
// asked still succeeds (until 2026-11-30 a malloc(0) under an address-space
// or locked-memory limit answered with ENOMEM or EAGAIN left in errno:
// preload.secure.address_space_limit).
void* reserve_inaccessible(std::size_t size) {
  int saved = errno;
  void* p = mmap(nullptr, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  errno = saved;
  return p == MAP_FAILED ? nullptr : p;
}

// errno kept: a refusal is tenon's to handle (a guard page not closed), and
// the call that made it may still succeed (a large block handed out
// unguarded said ENOMEM until 2026-11-27: preload.protect_refused).
bool protect(void* p, std::size_t size, bool accessible) {
  int saved = errno;
  bool done = mprotect(p, size, accessible ? PROT_READ | PROT_WRITE : PROT_NONE) == 0;
  errno = saved;
  return done;
}

namespace {
// This process's id for process_vm_readv, asked of the kernel once (glibc's
// getpid is a system call every time since 2.25; until 2026-11-29, branch
// usw, every copy_quietly made it): 0 until then. A fork child forgets its
// parent's (at_fork_child, registered at load: process_vm_readv with the
// parent's id would read the parent's memory, or fail). A child made by a
// raw clone() runs no fork handler and keeps it: such a child that calls
// into tenon is already outside what glibc supports.
constinit std::atomic<int> g_pid{0};
int own_pid() {
  int pid = g_pid.load(std::memory_order_relaxed);
  if (pid == 0) {
    pid = getpid();
    g_pid.store(pid, std::memory_order_relaxed);
  }
  return pid;
}
void forget_pid() { g_pid.store(0, std::memory_order_relaxed); }
__attribute__((constructor)) void forget_pid_in_fork_children() { at_fork_child(forget_pid); }

// Probes of whether a page is mapped: 1 yes, 0 no, -1 the kernel would not
// say (a seccomp filter refusing the call answers EPERM or ENOSYS; until
// 2026-11-29 such an answer read as "mapped" and free() of a pointer with
// nothing before it faulted: preload.mincore_refused). None faults, none is
// a cancellation point (raw syscall() where glibc's wrapper is one).
int mapped_by_mincore(void* page) {
  unsigned char vec = 0;
  if (mincore(page, 1, &vec) == 0) return 1;
  return errno == ENOMEM ? 0 : -1;
}

// msync with nothing to write (MS_ASYNC) only checks the range is mapped.
int mapped_by_msync(void* page) {
  if (syscall(SYS_msync, page, 1, MS_ASYNC) == 0) return 1;
  return errno == ENOMEM ? 0 : -1;
}

// One byte read through the kernel from this process (no ptrace check
// within a process): EFAULT where nothing readable is mapped.
int mapped_by_reading(void* page) {
  char byte;
  iovec local{&byte, 1};
  iovec remote{page, 1};
  if (syscall(SYS_process_vm_readv, own_pid(), &local, 1, &remote, 1, 0) == 1) return 1;
  return errno == EFAULT ? 0 : -1;
}
}  // namespace

// The first probe that answers decides. If none does, the page is taken for
// mapped: the caller then reads it, as glibc's own free would (the limit is
// in architecture.md, "Known limits").
bool is_mapped(const void* p) {
  void* page = reinterpret_cast<void*>(reinterpret_cast<std::uintptr_t>(p) & ~(page_size() - 1));
  int saved = errno;
  int mapped = -1;
  for (auto probe : {mapped_by_mincore, mapped_by_msync, mapped_by_reading})
    if ((mapped = probe(page)) >= 0) break;
  errno = saved;
  return mapped != 0;
}

int copy_quietly(const void* from, void* to, std::size_t n) {
  int saved = errno;
  iovec local{to, n};
  iovec remote{const_cast<void*>(from), n};
  long copied = syscall(SYS_process_vm_readv, own_pid(), &local, 1, &remote, 1, 0);
  int answer = copied == static_cast<long>(n) ? 1 : copied >= 0 || errno == EFAULT ? 0 : -1;
  errno = saved;
  return answer;
}

namespace {
// splitmix64's finalizer: a bijection in which every output bit depends on
// every input bit.
std::uint64_t mix64(std::uint64_t x) {
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Words drawn without getrandom so far in this process: no two such words
// get the same input, even at the same clock reading and stack address.
constinit std::atomic<std::uint64_t> g_words_without_getrandom{0};

// Where getrandom gives nothing: the 16 bytes the kernel put in the
// auxiliary vector at exec (AT_RANDOM; getauxval neither allocates nor
// locks) are a 128-bit key, and what changes from draw to draw (the
// monotonic clock, a stack address, the count above) the input, each word
// mix64(mix64(x ^ k0) + k1): both halves of the key in every word, so that
// one half leaked (glibc's stack protector canary is the first 8 bytes, 7
// of them) leaves 64 unknown bits. Until 2026-11-29 each word was the clock
// xor a stack address: two words drawn together differed in a few bits of
// the clock's nanoseconds (SecureKeys.WithoutGetrandomTheSecretIsNoFunctionOfTheClock).
void words_without_getrandom(std::uint64_t* words, std::size_t n) {
  std::uint64_t key[2] = {0, 0};
  if (unsigned long at = getauxval(AT_RANDOM)) memcpy(key, reinterpret_cast<const void*>(at), sizeof key);
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  auto ns = static_cast<std::uint64_t>(ts.tv_sec) * 1000000000u + static_cast<std::uint64_t>(ts.tv_nsec);
  std::uint64_t x = mix64(ns) ^ reinterpret_cast<std::uintptr_t>(&ts);
  std::uint64_t first = g_words_without_getrandom.fetch_add(n, std::memory_order_relaxed);
  for (std::size_t i = 0; i < n; ++i) {
    std::uint64_t in = x + (first + i) * 0x9e3779b97f4a7c15ull;  // a different input for every word
    words[i] = mix64(mix64(in ^ key[0]) + key[1]);
  }
}
}  // namespace

void random_words(std::uint64_t* words, std::size_t n) {
  int saved = errno;
  auto bytes = static_cast<long>(n * sizeof *words);
  if (syscall(SYS_getrandom, words, n * sizeof *words, GRND_NONBLOCK) != bytes)  // see write_all
    words_without_getrandom(words, n);
  errno = saved;
}

std::uint64_t random_u64() {
  std::uint64_t v = 0;
  random_words(&v, 1);
  return v;
}

// SIGPIPE is held back around the write: a report or the statistics written
// to a pipe whose reader is gone (`prog 2>&1 | head`) must not end the
// program with SIGPIPE in place of its own exit (or a misuse's SIGABRT);
// preload.stats_to_closed_pipe. The signal our write raised is taken off the
// thread's pending set unless one was pending already. Three system calls
// more a message; messages are rare.
void write_error(const char* text, std::size_t length) {
  int saved = errno;
  sigset_t pipe_only, before, pending;
  sigemptyset(&pipe_only);
  sigaddset(&pipe_only, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_only, &before);
  bool was_pending = sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE);
  if (!write_all(2, text, length) && errno == EPIPE && !was_pending) {
    struct timespec now = {0, 0};
    sigtimedwait(&pipe_only, nullptr, &now);
  }
  pthread_sigmask(SIG_SETMASK, &before, nullptr);
  errno = saved;
}

void write_error(const char* text) { write_error(text, strlen(text)); }

bool write_stream(std::FILE* stream, const char* text) { return fputs(text, stream) >= 0; }

bool flush_stream(std::FILE* stream) { return fflush(stream) == 0; }

void abort_process() { abort(); }

long thread_key_create(void (*destructor)(void*)) {
  pthread_key_t key;
  if (pthread_key_create(&key, destructor) != 0) return -1;
  return static_cast<long>(key);
}

long thread_key_create_above(void (*destructor)(void*), unsigned min_slot) {
  if (!single_threaded() || min_slot > PTHREAD_KEYS_MAX) return thread_key_create(destructor);
  // The free slots below min_slot filled with keys of no destructor (glibc
  // hands out the lowest free slot: each create scans from slot 0, so the
  // cost grows with the square of min_slot, not of PTHREAD_KEYS_MAX: taking
  // all 1,024 slots to find the last cost 4.8 M instructions at every
  // process's start), ours made, the fillers given back.
  pthread_key_t taken[PTHREAD_KEYS_MAX];
  unsigned n = 0;
  pthread_key_t k;
  while (n < min_slot && pthread_key_create(&k, nullptr) == 0) {
    if (k >= min_slot) {
      pthread_key_delete(k);  // free, and every slot below it is taken: ours next
      break;
    }
    taken[n++] = k;
  }
  long key = thread_key_create(destructor);
  for (unsigned i = 0; i < n; ++i) pthread_key_delete(taken[i]);
  // Refused while the fillers held the last free slots: any slot will do.
  return key != -1 ? key : thread_key_create(destructor);
}

void thread_key_delete(long key) { pthread_key_delete(static_cast<pthread_key_t>(key)); }

bool thread_key_set(long key, void* value) { return pthread_setspecific(static_cast<pthread_key_t>(key), value) == 0; }

void* next_symbol(const char* name) { return dlsym(RTLD_NEXT, name); }

// dlopen and dlclose found by name, not referenced: a static program that
// links libtenon-override.a would otherwise take libc.a's dlopen and get the
// linker's warning for it ("Using 'dlopen' in statically linked
// applications ..."). There, nothing is found and the answer is nullptr.
void* loaded_library_symbol(const char* soname, const char* name) {
  using open_fn = void* (*)(const char*, int);
  using close_fn = int (*)(void*);
  int saved = errno;
  auto open_library = reinterpret_cast<open_fn>(dlsym(RTLD_DEFAULT, "dlopen"));
  auto close_library = reinterpret_cast<close_fn>(dlsym(RTLD_DEFAULT, "dlclose"));
  void* symbol = nullptr;
  if (void* lib = open_library && close_library ? open_library(soname, RTLD_LAZY | RTLD_NOLOAD) : nullptr) {
    symbol = dlsym(lib, name);
    close_library(lib);  // the reference RTLD_NOLOAD took
  }
  errno = saved;
  return symbol;
}

const char* library_of(const void* address) {
  Dl_info info;
  if (address && dladdr(address, &info) && info.dli_fname) return info.dli_fname;
  return nullptr;
}

long shared_thread_key(std::atomic<long>& cell, void (*destructor)(void*)) {
  long key = cell.load(std::memory_order_acquire);
  if (key != -1) return key;
  long k = thread_key_create(destructor);
  if (k == -1) return -1;
  if (cell.compare_exchange_strong(key, k, std::memory_order_acq_rel)) return k;
  thread_key_delete(k);
  return key;
}

bool single_threaded() { return &__libc_single_threaded != nullptr && __libc_single_threaded != 0; }

bool start_thread(void* (*fn)(void*), void* arg) {
  int saved = errno;
  pthread_attr_t attr;
  if (pthread_attr_init(&attr) != 0) return false;
  // An explicit stack size: pthread_create then reads no process-wide
  // default (whose lock a caller of ours might hold). 256 KiB is ample for a
  // purge pass and for the sanitizers' interceptors.
  pthread_attr_setstacksize(&attr, std::size_t{256} << 10);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  // The new thread inherits the creator's mask: block everything around the
  // create (glibc keeps its own cancellation and setxid signals deliverable).
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  pthread_t tid;
  bool ok = pthread_create(&tid, &attr, fn, arg) == 0;
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  pthread_attr_destroy(&attr);
  errno = saved;
  return ok;
}

void name_this_thread(const char* name) {
  int saved = errno;
  prctl(PR_SET_NAME, name, 0, 0, 0);
  errno = saved;
}

void sleep_ms(std::uint32_t ms) {
  int saved = errno;
  timespec ts{static_cast<time_t>(ms / 1000), static_cast<long>(ms % 1000) * 1000000L};
  nanosleep(&ts, nullptr);
  errno = saved;
}

}  // namespace tenon::os
