// Freeing many small blocks and allocating as many again at once (a rebuilt
// index, a parser's next document) must reuse the freed pages, not purge
// them and fault them back in: free slices stay resident for kDirtyGraceMs
// before the per-chunk dirty cap may purge them. Counted in minor page
// faults (deterministic), not in time.
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <cstdlib>
#include <vector>

#include "tenon/tenon.h"
#include "test_support.h"

namespace {

long minor_faults() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_minflt;
}

// One round: n blocks of 64 bytes, each written, then all freed. Returns the
// minor faults of the allocation half.
long round_faults(std::vector<void*>& blocks) {
  long before = minor_faults();
  for (auto& p : blocks) {
    p = tenon_malloc(64);
    static_cast<char*>(p)[0] = 1;
  }
  long faults = minor_faults() - before;
  for (void* p : blocks) tenon_free(p);
  return faults;
}

TEST(BulkFree, RefillReusesResidentPages) {
  if (tenon_test::kSanitized || std::getenv("TENON_TEST_EMULATED"))
    GTEST_SKIP() << "the rounds must each take well under the 50 ms grace; sanitizers and qemu are too slow";
  std::vector<void*> blocks(std::size_t{1} << 19);  // 32 MiB of 64-byte blocks, 8 chunks
  round_faults(blocks);                               // first touch
  long first = round_faults(blocks);                  // now every page was touched before
  long second = round_faults(blocks);
  std::printf("minor faults refilling 32 MiB just freed: %ld, then %ld\n", first, second);
  // With the cap purging 7/8 of every emptied chunk at once, each refill
  // faulted about 7/8 of the pages back in (about 7,000 with 4 KiB pages).
  EXPECT_LT(first, 1000);
  EXPECT_LT(second, 1000);
}

}  // namespace
