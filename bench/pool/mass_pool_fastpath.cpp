// mass_pool_fastpath: N emplaces of a 16-byte element on one thread. Run
// under callgrind for N and 2N; the difference in instructions divided by N
// is the cost of one emplace (block refills included, start-up cancelled):
//   valgrind --tool=callgrind --callgrind-out-file=/dev/null mass_pool_fastpath N [mode]
// mode: (none) whatever this process gets: under valgrind, which does not
//       implement rseq, the shared lane's CAS;
//       owned: the owner's restartable-sequence path, which valgrind cannot
//       restart (the test hook that allows it is safe here: one thread);
//       dense: a tenon::dense_indices pool.
// A third argument `batch` fills with emplace_n (the same sum of indices).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "tenon/mass_pool.hpp"

namespace {
struct Elem {
  std::uint64_t a, b;
};
}  // namespace

int main(int argc, char** argv) {
  const long n = argc > 1 ? std::atol(argv[1]) : 1000000;
  const char* mode = argc > 2 ? argv[2] : "";
  const bool dense = std::strcmp(mode, "dense") == 0;
  if (std::strcmp(mode, "owned") == 0) tenon::detail::pool_own_without_rseq_for_testing.store(true);
  auto* pool = dense ? new tenon::mass_pool<Elem>(tenon::dense_indices) : new tenon::mass_pool<Elem>();
  const bool batch = argc > 3 && std::strcmp(argv[3], "batch") == 0;
  std::uint64_t sum = 0;  // uses every index, so the loop is not optimised away
  if (batch)
    pool->emplace_n(std::size_t(n), [&sum](std::uint32_t index) noexcept {
      sum += index;
      return Elem{index, 1};
    });
  else
    for (long i = 0; i < n; ++i) sum += pool->emplace(Elem{std::uint64_t(i), 1}).index;
  std::printf("OK mass_pool_fastpath n=%ld%s%s%s size=%zu sum=%llu\n", n, *mode ? " " : "", mode,
              batch ? " batch" : "", pool->size(),
              static_cast<unsigned long long>(sum));
  delete pool;
  return 0;
}
