// A shared object that emplaced into a mass_pool is unloaded, then the
// thread is preempted and signalled: the kernel reads the thread's rseq
// area on the way back to user space, and a descriptor pointer left there
// would point into the unmapped object (the kernel kills the thread with
// SIGSEGV). Passes when the thread lives on.
#include <dlfcn.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <unistd.h>
#if __has_include(<sys/rseq.h>)
#include <sys/rseq.h>
#include <cstddef>
#include <cstdint>
#define HAVE_RSEQ 1
#endif

static volatile sig_atomic_t g_signals = 0;
static void on_signal(int) { g_signals = g_signals + 1; }

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  void* lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!lib) { fprintf(stderr, "dlopen: %s\n", dlerror()); return 2; }
  auto fill = reinterpret_cast<long (*)(int)>(dlsym(lib, "pool_plugin_fill"));
  if (!fill) return 2;
  const int n = 100000;
  long sum = fill(n);
  if (sum != long(n) * (n - 1) / 2) { fprintf(stderr, "wrong sum %ld\n", sum); return 1; }
#if HAVE_RSEQ
  // Right after the claims, before the kernel had a reason to look: the
  // thread's rseq area must not point at the object's descriptor any more.
  if (__rseq_size != 0) {
    auto* area = reinterpret_cast<struct rseq*>(static_cast<char*>(__builtin_thread_pointer()) + __rseq_offset);
    std::uint64_t cs = *reinterpret_cast<volatile std::uint64_t*>(&area->rseq_cs);
    if (cs != 0) { fprintf(stderr, "rseq_cs still set after the claims: 0x%llx\n", (unsigned long long)cs); return 1; }
  }
#endif
  if (dlclose(lib) != 0) return 2;
  signal(SIGUSR1, on_signal);
  for (int i = 0; i < 50; ++i) {
    raise(SIGUSR1);  // signal delivery: the kernel checks the rseq area
    usleep(200);     // a context switch: and again on the way back
    sched_yield();
  }
  printf("alive after dlclose (%d signals)\n", int(g_signals));
  return 0;
}
