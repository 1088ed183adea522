// A chunk whose slot in the free fast path's table is held by another chunk
// (two chunks 256 GiB apart) is found through the unit map: every call on its
// blocks must work as on any other block. Such chunks are rare, so the test
// makes them: it fills every free slot of the table with a tag no pointer has
// (a unit-0 tag in a slot other than 0), and the chunks mapped after that get
// no slot.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include "tenon/lookup/chunk_map.h"
#include "tenon/tenon.h"

namespace {

using tenon::kChunkSize;
using tenon::kChunkTableBits;
namespace lookup = tenon::lookup;

constexpr std::size_t kSlots = std::size_t{1} << kChunkTableBits;

// Takes every empty slot but 0 (whose units a unit-0 tag would name); gives
// them back on destruction.
class TableFilled {
 public:
  TableFilled() {
    for (std::size_t s = 1; s < kSlots; ++s) {
      std::uintptr_t empty = 0;
      if (lookup::g_chunk_table.slot[s].compare_exchange_strong(empty, kChunkSize - 1)) taken_.push_back(s);
    }
  }
  ~TableFilled() {
    for (std::size_t s : taken_) {
      std::uintptr_t bogus = kChunkSize - 1;
      lookup::g_chunk_table.slot[s].compare_exchange_strong(bogus, 0);
    }
  }

 private:
  std::vector<std::size_t> taken_;
};

bool overflowed(const void* p) { return !lookup::is_regular(p) && lookup::in_chunk(p); }

struct block {
  unsigned char* p;
  std::size_t n;
};

TEST(ChunkMap, ChunksWithoutATableSlotWorkThroughTheUnitMap) {
  TableFilled filled;
  std::vector<block> blocks;
  std::size_t outside = 0;
  // A fresh thread (its own heap) takes new chunks for small and large
  // blocks: 24 MiB of small ones, 24 of 1 MiB.
  std::thread([&] {
    for (std::size_t i = 0; i < 24 * 1024; ++i) blocks.push_back({static_cast<unsigned char*>(tenon_malloc(1000)), 1000});
    for (std::size_t i = 0; i < 24; ++i)
      blocks.push_back({static_cast<unsigned char*>(tenon_malloc(std::size_t{1} << 20)), std::size_t{1} << 20});
  }).join();
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    auto [p, n] = blocks[i];
    ASSERT_NE(p, nullptr) << "allocation " << i;
    std::memset(p, static_cast<int>(i & 0xff), n);
    if (!overflowed(p)) continue;
    ++outside;
    EXPECT_NE(tenon_owns(p), 0) << "tenon_owns of a block in a chunk without a table slot";
    EXPECT_GE(tenon_malloc_usable_size(p), n) << "usable size of a block in a chunk without a table slot";
  }
  ASSERT_GT(outside, 0u) << "no block landed in a chunk without a table slot: the test has nothing to check";
  // realloc in place and across size ranges, then free half here (the
  // blocks' heap is gone with its thread) and half from another thread.
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    auto& [p, n] = blocks[i];
    if (!overflowed(p) || i % 7) continue;
    auto* q = static_cast<unsigned char*>(tenon_realloc(p, n * 3));
    ASSERT_NE(q, nullptr);
    for (std::size_t k = 0; k < n; k += 97) ASSERT_EQ(q[k], static_cast<unsigned char>(i & 0xff)) << "realloc lost byte " << k;
    p = q;
    n *= 3;
  }
  std::size_t half = blocks.size() / 2;
  for (std::size_t i = 0; i < half; ++i) tenon_free(blocks[i].p);
  std::thread([&] {
    for (std::size_t i = half; i < blocks.size(); ++i) tenon_free(blocks[i].p);
  }).join();
  // The freed blocks went back to their spans (not to glibc's free, which
  // would have aborted): the memory serves new blocks.
  std::vector<void*> again;
  for (std::size_t i = 0; i < 24 * 1024; ++i) {
    void* p = tenon_malloc(1000);
    ASSERT_NE(p, nullptr);
    again.push_back(p);
  }
  for (void* p : again) tenon_free(p);
  std::printf("%zu of %zu blocks were in chunks without a table slot\n", outside, blocks.size());
}

}  // namespace
