// Fresh memory under TENON_POPULATE and TENON_HUGE_PAGES (docs/options.md):
// with populate on, a block handed out from fresh memory is resident before
// the program touches it, and only blocks at least the threshold's size are;
// with huge pages on, allocations work and trimming still gives memory back.
// Each case runs in its own process with its own environment (see
// CMakeLists.txt): the options are read once, at the allocator's first use.
// Residency and RSS are not checked under qemu-user (TENON_TEST_EMULATED:
// its madvise does not pass these advices to the kernel) or sanitizers.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "stress_support.h"

using namespace tenon_stress;

namespace {

constexpr std::size_t MiB = std::size_t{1} << 20;

bool rss_is_meaningful() { return !tenon_test::kSanitized && !std::getenv("TENON_TEST_EMULATED"); }

std::size_t page() { return static_cast<std::size_t>(sysconf(_SC_PAGESIZE)); }

// Whether this kernel has MADV_POPULATE_WRITE (Linux 5.14); tenon's populate
// is best effort and does nothing without it.
bool kernel_populates() {
#ifndef MADV_POPULATE_WRITE
  constexpr int MADV_POPULATE_WRITE = 23;
#endif
  void* p = mmap(nullptr, page(), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return false;
  bool ok = madvise(p, page(), MADV_POPULATE_WRITE) == 0;
  munmap(p, page());
  return ok;
}

// The kernel's THP mode ("always", "madvise", "never"), or "" without THP.
std::string thp_mode() {
  std::ifstream f("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string line;
  if (!std::getline(f, line)) return "";
  auto open = line.find('['), close = line.find(']');
  return open == std::string::npos || close == std::string::npos ? "" : line.substr(open + 1, close - open - 1);
}

// Under THP "always" the first touch near a fresh block (the chunk's or the
// mapping's header) may fault in a 2 MiB page around it: the block is then
// resident without any pre-fault, and "not populated" cannot be seen.
bool untouched_is_visible() { return thp_mode() != "always"; }

// The VmFlags of the mapping holding p (/proc/self/smaps), or "".
std::string vm_flags_of(const void* p) {
  std::ifstream smaps("/proc/self/smaps");
  auto a = reinterpret_cast<std::uintptr_t>(p);
  bool inside = false;
  for (std::string line; std::getline(smaps, line);) {
    std::uintptr_t lo = 0, hi = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx ", &lo, &hi) == 2 && line.find('-') < 17) {
      inside = lo <= a && a < hi;
    } else if (inside && line.rfind("VmFlags:", 0) == 0) {
      return line.substr(8);
    }
  }
  return "";
}

// Why pre-faulting cannot be seen here, or nullptr if it can (a skip must be
// in the test's own body: GTEST_SKIP only returns from the function it is in).
const char* populate_unseen() {
  if (!rss_is_meaningful()) return "residency is not meaningful here (emulated or sanitized)";
  if (!kernel_populates()) return "this kernel has no MADV_POPULATE_WRITE (before 5.14)";
  return nullptr;
}

// A fresh large block (1 MiB, the process's first: a new chunk), a fresh huge
// block (8 MiB, a new mapping) and a small block (its span's fresh slice):
// every byte is resident right after malloc.
TEST(FreshMemory, PopulatedBlocksAreResident) {
  if (const char* why = populate_unseen()) GTEST_SKIP() << why;
  void* large = tenon_malloc(MiB);
  void* huge = tenon_malloc(8 * MiB);
  void* small = tenon_malloc(1000);
  ASSERT_NE(large, nullptr);
  ASSERT_NE(huge, nullptr);
  ASSERT_NE(small, nullptr);
  EXPECT_EQ(resident_in(large, MiB), MiB);
  EXPECT_EQ(resident_in(huge, 8 * MiB), 8 * MiB);
  auto slice = reinterpret_cast<std::uintptr_t>(small) & ~(std::uintptr_t{64 << 10} - 1);
  EXPECT_EQ(resident_in(reinterpret_cast<void*>(slice), 64 << 10), std::size_t{64} << 10);
  // The memory reads as zeros, as fresh memory does, and calloc agrees.
  EXPECT_EQ(static_cast<unsigned char*>(huge)[8 * MiB - 1], 0);
  std::memset(large, 7, MiB);
  tenon_free(large);
  tenon_free(huge);
  tenon_free(small);
  auto* z = static_cast<unsigned char*>(tenon_calloc(1, 3 * MiB));
  ASSERT_NE(z, nullptr);
  for (std::size_t i = 0; i < 3 * MiB; i += 4096) ASSERT_EQ(z[i], 0);
  tenon_free(z);
}

// The default: fresh blocks are left to fault in on first touch.
TEST(FreshMemory, OffLeavesFreshBlocksToTheFirstTouch) {
  if (!rss_is_meaningful() || !untouched_is_visible()) GTEST_SKIP() << "residency is not visible here";
  void* large = tenon_malloc(MiB);
  void* huge = tenon_malloc(8 * MiB);
  ASSERT_NE(large, nullptr);
  ASSERT_NE(huge, nullptr);
  EXPECT_LT(resident_in(large, MiB), MiB / 2);
  EXPECT_LT(resident_in(huge, 8 * MiB), MiB);
  tenon_free(large);
  tenon_free(huge);
}

constexpr std::size_t kSlice = 64 << 10;

// 16 blocks of 40 KiB (a slice's run each) written at their first byte only
// and freed (and with `trim`, their pages given back by malloc_trim), then
// one block of each of a few classes of 1-4 KiB (a span of one slice each,
// into `small`): the slices of the spans that formed on a freed run's slice
// (the run cache may keep some runs, the arena choose other slices).
std::vector<char*> spans_on_freed_runs(std::vector<void*>& small, bool trim = false) {
  constexpr std::size_t kRun = 40 << 10;
  std::vector<char*> runs;
  for (int i = 0; i < 16; ++i) runs.push_back(static_cast<char*>(tenon_malloc(kRun)));
  for (char* r : runs) {
    EXPECT_NE(r, nullptr);
    if (r) r[0] = 1;  // the first page only: the rest of the run stays untouched
  }
  if (untouched_is_visible()) EXPECT_LT(resident_in(runs.back(), kRun), kRun / 2);
  for (char* r : runs) tenon_free(r);
  if (trim) tenon_malloc_trim(0);
  for (std::size_t size : {1000, 1500, 2000, 3000, 4000}) small.push_back(tenon_malloc(size));
  std::vector<char*> slices;
  for (void* b : small) {
    EXPECT_NE(b, nullptr);
    auto* slice = reinterpret_cast<char*>(reinterpret_cast<std::uintptr_t>(b) & ~(std::uintptr_t{kSlice} - 1));
    for (char* r : runs)
      if (r == slice) slices.push_back(slice);
  }
  return slices;
}

// TENON_POPULATE=65536 (spans of 64 KiB pre-faulted, blocks of 40 KiB not):
// a small span formed on a slice that a large block left dirty, whose pages
// that block never touched, is resident whole too. Those pages fault like
// fresh ones; until 2026-11-29 only spans with a fresh or purged slice were
// pre-faulted, and the latency row's spans, two thirds of them formed on
// such slices, took their faults inside malloc (docs/architecture.md, "The
// first fill's faults"). Of the 16 runs freed, the run cache keeps 8 and the
// other 8 go back to the chunk layer dirty (no more than a chunk keeps
// resident, so none is purged), where small spans are formed first.
TEST(FreshMemory, PopulateCoversSpansOnDirtySlices) {
  if (const char* why = populate_unseen()) GTEST_SKIP() << why;
  if (!untouched_is_visible()) GTEST_SKIP() << "residency is not visible here";
  std::vector<void*> small;
  std::vector<char*> slices = spans_on_freed_runs(small);
  for (char* slice : slices) EXPECT_EQ(resident_in(slice, kSlice), kSlice) << "span at " << static_cast<void*>(slice);
  for (void* b : small) tenon_free(b);
  if (slices.empty()) GTEST_SKIP() << "no span formed on a freed run's slice";
}

// Option off: a block of a cached class of 1-4 KiB from a span formed on
// slices purged since large blocks used them goes out unwritten, its link
// and the clear of its first words skipped (they hold no allocator word):
// its page faults at the program's first write, not in malloc
// (docs/architecture.md, layer 5, "Blocks of 1-4 KiB handed out
// unwritten"). Before, the cache's refill carved and linked blocks beyond
// the one asked for: 8-16 KiB of such a slice resident after one malloc.
// Not on the slices of a large block freed and not purged since: its words
// may be a copy of free blocks' keys (arena::linked_slices), and its
// blocks are carved as any (until 2026-11-29 they went out unwritten, this
// case's promise then, and held the key: a false double free).
TEST(FreshMemory, CachedBlocksOnPurgedSlicesGoOutUnwritten) {
  if (!rss_is_meaningful() || !untouched_is_visible()) GTEST_SKIP() << "residency is not visible here";
  std::vector<void*> small;
  std::vector<char*> slices = spans_on_freed_runs(small, /*trim=*/true);
  // Nothing (the runs' pages were given back), or at most one page: not the cache's refill.
  for (char* slice : slices) EXPECT_LE(resident_in(slice, kSlice), page()) << "span at " << static_cast<void*>(slice);
  for (void* b : small) tenon_free(b);
  if (slices.empty()) GTEST_SKIP() << "no span formed on a freed run's slice";
}

// TENON_POPULATE=4194304: the 8 MiB block is pre-faulted, the 1 MiB one not.
TEST(FreshMemory, ThresholdPicksTheBigBlocks) {
  if (const char* why = populate_unseen()) GTEST_SKIP() << why;
  void* large = tenon_malloc(MiB);
  void* huge = tenon_malloc(8 * MiB);
  ASSERT_NE(large, nullptr);
  ASSERT_NE(huge, nullptr);
  EXPECT_EQ(resident_in(huge, 8 * MiB), 8 * MiB);
  if (untouched_is_visible()) EXPECT_LT(resident_in(large, MiB), MiB / 2);
  tenon_free(large);
  tenon_free(huge);
}

// TENON_HUGE_PAGES=2 (chunks and huge blocks advised), with the background
// purger off: 200 MiB of 1 MiB blocks and small blocks, written, freed and
// trimmed go back to the OS as without the advice; the mappings carry the
// advice (VmFlags "hg") where the kernel has THP.
TEST(FreshMemory, HugePagesStillGiveMemoryBack) {
  const std::size_t start = resident_bytes();
  std::vector<void*> blocks;
  for (int i = 0; i < 200; ++i) {
    void* p = tenon_malloc(MiB);
    ASSERT_NE(p, nullptr);
    std::memset(p, i, MiB);
    blocks.push_back(p);
    void* s = tenon_malloc(48 + 16 * static_cast<std::size_t>(i));
    ASSERT_NE(s, nullptr);
    std::memset(s, i, 48);
    blocks.push_back(s);
  }
  void* huge = tenon_malloc(12 * MiB);
  ASSERT_NE(huge, nullptr);
  std::memset(huge, 3, 12 * MiB);
  if (rss_is_meaningful() && !thp_mode().empty() && thp_mode() != "never") {
    EXPECT_NE(vm_flags_of(blocks[0]).find(" hg"), std::string::npos) << vm_flags_of(blocks[0]);
    EXPECT_NE(vm_flags_of(huge).find(" hg"), std::string::npos) << vm_flags_of(huge);
  }
  for (std::size_t i = 0; i < blocks.size(); ++i)
    ASSERT_EQ(static_cast<unsigned char*>(blocks[i])[0], static_cast<unsigned char>(i / 2));
  const std::size_t peak = resident_bytes();
  for (void* p : blocks) tenon_free(p);
  tenon_free(huge);
  tenon_malloc_trim(0);
  const std::size_t after = resident_bytes();
  if (!rss_is_meaningful()) return;
  EXPECT_GE(peak, start + 200 * MiB);
  // What stays is the chunk headers and the small blocks' spans: a few MiB.
  EXPECT_LT(after, start + 16 * MiB) << "start " << start << " peak " << peak << " after trim " << after;
}

bool thp_advice_visible() { return rss_is_meaningful() && thp_mode() == "madvise"; }

// n blocks of `size` bytes from tenon_malloc, each written whole or not at all.
std::vector<void*> fill(std::size_t n, std::size_t size, bool write) {
  std::vector<void*> blocks;
  for (std::size_t i = 0; i < n; ++i) {
    void* p = tenon_malloc(size);
    if (!p) break;
    if (write) std::memset(p, static_cast<int>(i), size);
    blocks.push_back(p);
  }
  return blocks;
}

// TENON_HUGE_PAGES=4, the background purger off: an arena that fills its
// chunks densely (48 MiB of 1000-byte blocks, all written) gets its later
// chunks advised (VmFlags "hg": 2 MiB at a fault) but not its first few;
// after the blocks are freed and trimmed the advice is taken back ("nh":
// khugepaged must not fill purged slices in again) and the memory is given
// back as without it.
TEST(FreshMemory, GrownDenseArenaGetsHugePagesAndGivesThemBack) {
  if (!thp_advice_visible()) GTEST_SKIP() << "THP is not in madvise mode here";
  const std::size_t start = resident_bytes();
  std::vector<void*> blocks = fill(48 * MiB / 1000, 1000, true);
  ASSERT_EQ(blocks.size(), 48 * MiB / 1000);
  EXPECT_EQ(vm_flags_of(blocks.front()).find(" hg"), std::string::npos) << vm_flags_of(blocks.front());
  EXPECT_NE(vm_flags_of(blocks.back()).find(" hg"), std::string::npos) << vm_flags_of(blocks.back());
  const std::size_t peak = resident_bytes();
  void* last = blocks.back();
  for (void* p : blocks) tenon_free(p);
  tenon_malloc_trim(0);
  EXPECT_NE(vm_flags_of(last).find(" nh"), std::string::npos) << vm_flags_of(last);
  const std::size_t after = resident_bytes();
  EXPECT_GE(peak, start + 40 * MiB);
  EXPECT_LT(after, start + 16 * MiB) << "start " << start << " peak " << peak << " after trim " << after;
}

// TENON_HUGE_PAGES=4: the same arena of spans taken but never written
// (48 MiB of 16 KiB blocks; glibc-thread's program writes none of its
// blocks) gets no advice: huge pages would make all of it resident.
TEST(FreshMemory, GrownArenaOfUnwrittenBlocksGetsNoHugePages) {
  if (!thp_advice_visible()) GTEST_SKIP() << "THP is not in madvise mode here";
  const std::size_t start = resident_bytes();
  std::vector<void*> blocks = fill(48 * MiB / (16 << 10), 16 << 10, false);
  ASSERT_EQ(blocks.size(), 48 * MiB / (16 << 10));
  EXPECT_EQ(vm_flags_of(blocks.back()).find(" hg"), std::string::npos) << vm_flags_of(blocks.back());
  EXPECT_LT(resident_bytes(), start + 24 * MiB);
  for (void* p : blocks) tenon_free(p);
}

// TENON_HUGE_PAGES=3 on huge blocks: a fresh one is advised while the last
// unadvised one (a probe) was written (nearly) whole at its free, and so is
// a cached one grown in place for a bigger request; the first block, and
// the one after a probe written at one page, are not.
TEST(FreshMemory, HugeBlocksAdvisedAfterADenseOne) {
  if (!thp_advice_visible()) GTEST_SKIP() << "THP is not in madvise mode here";
  auto fresh = [](std::size_t size, std::size_t written) {
    tenon_malloc_trim(0);  // no cached block to reuse: the next one is mapped fresh
    auto* p = static_cast<unsigned char*>(tenon_malloc(size));
    if (p) std::memset(p, 1, written);
    return p;
  };
  unsigned char* first = fresh(8 * MiB, 4096);  // a probe, written at one page
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(vm_flags_of(first).find(" hg"), std::string::npos) << vm_flags_of(first);
  tenon_free(first);
  unsigned char* second = fresh(8 * MiB, 8 * MiB);  // after a sparse probe: a probe again, written whole
  ASSERT_NE(second, nullptr);
  EXPECT_EQ(vm_flags_of(second).find(" hg"), std::string::npos) << vm_flags_of(second);
  tenon_free(second);
  unsigned char* third = fresh(8 * MiB, 0);  // after a dense probe: advised
  ASSERT_NE(third, nullptr);
  EXPECT_NE(vm_flags_of(third).find(" hg"), std::string::npos) << vm_flags_of(third);
  tenon_free(third);  // cached, and grown in place for the next request
  auto* grown = static_cast<unsigned char*>(tenon_malloc(12 * MiB));
  ASSERT_NE(grown, nullptr);
  EXPECT_NE(vm_flags_of(grown + 11 * MiB).find(" hg"), std::string::npos) << vm_flags_of(grown + 11 * MiB);
  tenon_free(grown);
}

// Both options together: huge blocks come advised and pre-faulted, and a
// realloc that grows one keeps its bytes.
TEST(FreshMemory, PopulateWithHugePages) {
  auto* p = static_cast<unsigned char*>(tenon_malloc(6 * MiB));
  ASSERT_NE(p, nullptr);
  if (rss_is_meaningful() && kernel_populates()) EXPECT_EQ(resident_in(p, 6 * MiB), 6 * MiB);
  std::memset(p, 5, 6 * MiB);
  p = static_cast<unsigned char*>(tenon_realloc(p, 20 * MiB));
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p[6 * MiB - 1], 5);
  std::memset(p, 6, 20 * MiB);
  tenon_free(p);
  EXPECT_GE(tenon_malloc_trim(0), 0);
}

}  // namespace

// calloc of a reused huge block from 32 MiB (kCallocDropMin): a block whose
// pages the last user wrote (nearly) all is cleared in place and stays
// resident, so a caller that writes it all takes no page fault per page (the
// size-sweep and op-size rows); a sparsely written one still has its pages
// dropped, so a caller that touches one byte does not pay for the rest.
TEST(FreshMemory, CallocClearsADenseReusedHugeBlockAndDropsASparseOne) {
  if (!rss_is_meaningful() || !untouched_is_visible()) GTEST_SKIP() << "residency is not visible here";
  const std::size_t size = 40 * MiB;
  void* p = nullptr;
  unsigned char* q = calloc_after_written_free(size, &p);
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q, p) << "the cached block was not reused";
  EXPECT_GE(resident_in(q, size), size - size / 8) << "a dense reused block was dropped";
  for (std::size_t i = 0; i < size; i += 512) ASSERT_EQ(q[i], 0) << i;
  EXPECT_EQ(q[size - 1], 0);
  // Now sparse: the block's pages dropped by its user, then one in 64 written.
  ASSERT_EQ(madvise(q, size, MADV_DONTNEED), 0);
  for (std::size_t i = 0; i < size; i += 64 * page()) q[i] = 0x5a;
  tenon_free(q);
  auto* r = static_cast<unsigned char*>(tenon_calloc(1, size));
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r, p) << "the cached block was not reused";
  EXPECT_LT(resident_in(r, size), size / 8) << "a sparse reused block was cleared in place";
  for (std::size_t i = 0; i < size; i += 4096) ASSERT_EQ(r[i], 0) << i;
  tenon_free(r);
}
