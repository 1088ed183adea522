// A freshly allocated block must not hand the program a pointer into tenon's
// memory in its first word (a free-list link left there tells whoever reads
// the block where the heap is, and which block comes next). Through the
// tenon_* API of libtenon.a, in process; tenon_owns() says whether a word
// points into memory tenon manages.
//
// The link is cleared when a small block is handed out (heap_alloc, pop);
// before that, every size up to 32 KiB failed here (64 of 64 fresh 8-byte
// blocks held the address of the next free block).
#include <gtest/gtest.h>
#include <tenon/tenon.h>

#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

namespace {

TEST(FreshBlocks, FirstWordHoldsNoPointerIntoTenon) {
  // Small classes, the largest small class, large, and huge.
  const std::size_t sizes[] = {8, 16, 48, 64, 256, 1024, 4096, 32768, 256 * 1024, 4 << 20};
  for (std::size_t n : sizes) {
    // Freed in order and allocated again: every block but the last freed
    // had a successor on its free list.
    std::vector<void*> blocks(n >= (256 << 10) ? 4 : 64);
    for (auto& b : blocks) {
      b = tenon_malloc(n);
      ASSERT_NE(b, nullptr);
      std::memset(b, 0, n);
    }
    for (void* b : blocks) tenon_free(b);
    for (auto& b : blocks) b = tenon_malloc(n);
    // One failure per size, naming the first block and how many leak.
    std::size_t leaking = 0;
    void* first = nullptr;
    std::uintptr_t first_word = 0;
    for (void* b : blocks) {
      std::uintptr_t word;
      std::memcpy(&word, b, sizeof word);
      if (word != 0 && tenon_owns(reinterpret_cast<void*>(word))) {
        if (leaking++ == 0) first = b, first_word = word;
      }
    }
    EXPECT_EQ(leaking, 0u) << leaking << " of " << blocks.size() << " fresh " << n << "-byte blocks hold an address "
                           << "inside tenon's memory in their first word; the first, " << first << ", holds "
                           << reinterpret_cast<void*>(first_word);
    for (void* b : blocks) tenon_free(b);
  }
}

// Fresh blocks of several sizes, small and large: none holds an address
// inside tenon's memory in its first or second word.
void check_first_two_words_after(std::size_t before) {
  const std::size_t sizes[] = {48, 96, 1024, 2048, 4096, 40000, 100000};
  for (std::size_t n : sizes) {
    std::size_t leaking = 0;
    std::vector<void*> blocks(n > 4096 ? 200 : 2000);
    for (auto& b : blocks) {
      b = tenon_malloc(n);
      ASSERT_NE(b, nullptr);
      std::uintptr_t words[2];
      std::memcpy(words, b, sizeof words);
      for (std::uintptr_t w : words)
        if (w != 0 && tenon_owns(reinterpret_cast<void*>(w))) ++leaking;
    }
    EXPECT_EQ(leaking, 0u) << leaking << " first or second words of " << blocks.size() << " fresh " << n
                           << "-byte blocks point into tenon's memory (after blocks of " << before << " bytes)";
    for (void* b : blocks) tenon_free(b);
  }
}

// The promise is the block's first two words (the link and the free key),
// also where the block is carved from memory that blocks of another class
// left behind: 200,000 blocks of 16 bytes, then of 4 KiB, freed (last
// first, so that each span's first block links to the next one), their
// spans given back, then blocks of other sizes (small, large) formed over
// those slices. Words further in may hold what the earlier blocks left,
// links among it, as reused memory under any allocator does
// (docs/security.md). A large block formed over a span's first block held
// that block's link in its first word (after the 4 KiB blocks: 140 of 200
// at 40,000 bytes, 200 of 200 at 100,000) until the large path cleared it.
TEST(FreshBlocks, MemoryOfReleasedSpansLeavesNoLinkInTheFirstTwoWords) {
  for (std::size_t before : {16, 4096}) {
    std::vector<void*> small(before > 16 ? 20000 : 200000);
    for (auto& b : small) b = tenon_malloc(before);
    for (auto b = small.rbegin(); b != small.rend(); ++b) tenon_free(*b);
    check_first_two_words_after(before);
  }
}

// Blocks of the cached classes up to 4 KiB go out unwritten from spans on
// slices no small span wrote since they were fresh or purged (chunk::linked,
// docs/architecture.md, layer 5, "Blocks of 1-4 KiB handed out unwritten").
// A large block in between does not make such a slice clean: small blocks'
// links stay where the large block's user did not write. 200,000 blocks of
// 16 bytes freed (each linked to the next), blocks of 40,000 bytes formed
// over their slices and freed, written at their first byte only, then
// blocks of 1-4 KiB: their first two words hold no link.
TEST(FreshBlocks, SlicesOfALargeBlockAfterSmallOnesStillCleared) {
  std::vector<void*> small(200000);
  for (auto& b : small) b = tenon_malloc(16);
  for (auto b = small.rbegin(); b != small.rend(); ++b) tenon_free(*b);
  std::vector<char*> large(200);
  for (auto& b : large) {
    b = static_cast<char*>(tenon_malloc(40000));
    ASSERT_NE(b, nullptr);
    b[0] = 1;
  }
  for (char* b : large) tenon_free(b);
  check_first_two_words_after(16);
}

// A large block's memory is its program's, and may be a copy of memory that
// held free blocks' keys: realloc copies a block whole, the words its user
// never wrote included. Freed blocks of 2048 bytes (the key in each second
// word) on a slice a thread gave back at its exit, a block of 60,000 bytes
// formed over it and grown by realloc to 1.5 MiB (a run of fresh
// slices, which no small span ever wrote): the copy carries the keys there,
// at the same offsets in a slice. Spans of 2048 bytes formed over the grown
// block's slices once it is freed hand out their blocks unwritten
// (docs/architecture.md, layer 5, "Blocks of 1-4 KiB handed out
// unwritten"), and until the release of a large run marked its slices as
// possibly holding the key (chunk::linked), such a block held the key in
// its second word (29 of 4,000, one per key copied): its first free was
// reported as a double free (freeze_tenon_churn, branch bump, reverted
// from main as a680f11).
TEST(FreshBlocks, ReallocCopyIntoALargeBlockLeavesNoKeyInAFreshBlock) {
  constexpr std::size_t kSmall = 2048;
  std::uint64_t key = 0;
  std::thread([&] {
    std::vector<void*> blocks(32);  // a slice of them
    for (auto& b : blocks) {
      b = tenon_malloc(kSmall);
      if (b) std::memset(b, 0, kSmall);
    }
    for (void* b : blocks) tenon_free(b);
    // Read after its free, on purpose: the key a freed block holds.
    std::memcpy(&key, static_cast<char*>(blocks.back()) + sizeof key, sizeof key);
  }).join();  // its heap's spans go back at its exit
  ASSERT_NE(key, 0u);
  auto* src = static_cast<char*>(tenon_malloc(60000));
  ASSERT_NE(src, nullptr);
  src[0] = 1;
  auto* dst = static_cast<char*>(tenon_realloc(src, 1536 << 10));
  ASSERT_NE(dst, nullptr);
  tenon_free(dst);
  std::size_t holding = 0;
  std::vector<void*> fresh(4000);
  for (auto& b : fresh) {
    b = tenon_malloc(kSmall);
    ASSERT_NE(b, nullptr);
    std::uint64_t second;
    std::memcpy(&second, static_cast<char*>(b) + sizeof second, sizeof second);
    if (second == key) {
      ++holding;
      b = nullptr;  // its free would be reported as a double free: kept
    }
  }
  EXPECT_EQ(holding, 0u) << holding << " of " << fresh.size() << " fresh " << kSmall
                         << "-byte blocks hold the free key in their second word";
  for (void* b : fresh) tenon_free(b);
}

// Blocks freed by another thread travel in batches whose third words name
// a block further down the batch (the owner's sort prefetches it): the
// sort, or the span's remote list where the owner's thread is gone, clears
// it again. Left there, a fresh block held a heap address in its third word
// (17,496 of 80,000 fresh 64-byte blocks), which in libtenon-secure.so is
// the first word the program gets (the block starts 16 bytes into the
// inner one): a raw address where the secure build promises none (helper
// review, 2026-11-27, seventh session).
// Largest first, in a process of its own (CTest runs each test alone): a
// smaller class's span formed over a larger one's memory finds no link
// past the first two words of a block (the promise of the tests above),
// where the other way round a block's third word may be an earlier,
// smaller block's link.
// 20,000 blocks of n bytes, zeroed, then freed by another thread; the
// vector keeps their (freed) addresses for its slots.
std::vector<void*> zeroed_then_freed_by_another_thread(std::size_t n) {
  std::vector<void*> blocks(20000);
  for (auto& b : blocks) {
    b = tenon_malloc(n);
    if (b) std::memset(b, 0, n);
  }
  std::thread([&] {
    for (void* b : blocks) tenon_free(b);
  }).join();
  return blocks;
}

// How many of b's first `words` words point into tenon's memory.
std::size_t pointers_in(const void* b, std::size_t words) {
  std::vector<std::uintptr_t> w(words);
  std::memcpy(w.data(), b, words * sizeof(std::uintptr_t));
  std::size_t n = 0;
  for (std::uintptr_t x : w)
    if (x != 0 && tenon_owns(reinterpret_cast<void*>(x))) ++n;
  return n;
}

TEST(FreshBlocks, BlocksFreedByAnotherThreadHoldNoPointerInTheirFirstThreeWords) {
  for (std::size_t n : {256, 64, 32}) {
    std::vector<void*> blocks = zeroed_then_freed_by_another_thread(n);
    std::size_t leaking = 0, fresh = 0;
    for (int round = 0; round < 4; ++round) {
      for (auto& b : blocks) {
        b = tenon_malloc(n);
        ASSERT_NE(b, nullptr);
        ++fresh;
        leaking += pointers_in(b, 3);
      }
      for (void* b : blocks) tenon_free(b);
    }
    EXPECT_EQ(leaking, 0u) << leaking << " of the first three words of " << fresh << " fresh " << n
                           << "-byte blocks point into tenon's memory after another thread freed their memory";
  }
}

// A batch's head also names the next blocks of the owner's walk, and the
// batch delivered before it, in its words from the fourth on (as many as it
// has: heap.h, outbox); the sort clears them as it clears the third. The
// blocks were zeroed before the other thread freed them, so any pointer in
// them afterwards is one the allocator left. One size, 256 bytes (room for
// all the names), in a process of its own: a span formed where blocks of
// another class lay finds their links inside its blocks (96 and 32 bytes
// after 256: 114 and 159 words, main at d11f1f4 as well). With the names
// left in place, 3,375 of its words failed.
TEST(FreshBlocks, BlocksFreedByAnotherThreadHoldNoPointerInAnyWord) {
  const std::size_t n = 256;
  std::vector<void*> blocks = zeroed_then_freed_by_another_thread(n);
  std::size_t leaking = 0;
  for (auto& b : blocks) {
    b = tenon_malloc(n);
    ASSERT_NE(b, nullptr);
    leaking += pointers_in(b, n / sizeof(std::uintptr_t));
  }
  EXPECT_EQ(leaking, 0u) << leaking << " words of " << blocks.size() << " fresh " << n
                         << "-byte blocks point into tenon's memory after another thread freed their memory";
  for (void* b : blocks) tenon_free(b);
}

}  // namespace
