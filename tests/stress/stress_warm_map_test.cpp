// The arena's warm map (arena::mark_warm): a bit per registered chunk, set
// while the chunk has a free slice whose pages are resident, which the
// warm and dense passes of find_run read instead of the chunks themselves.
// White-box on the default engine's arena, which nothing else in this
// process uses (the test's own allocations are glibc's): each case its own
// process, without the background purger (TENON_BACKGROUND_PURGE=0).
#include <gtest/gtest.h>

#include <random>
#include <thread>
#include <vector>

#include "tenon/engine/engine.h"

namespace {

using tenon::g_default_engine;

tenon::span* take(unsigned n, tenon::chunk** hint, bool dense_first = false) {
  return g_default_engine.chunks.take_span(n, hint, nullptr, dense_first);
}

void give_back(tenon::span* s) {
  s->kind = tenon::span_kind::large;
  g_default_engine.chunks.release_span(s, nullptr);
}

// 80 chunks, each with one clean free slice; then one chunk far from the
// first 16 (where the scan used to stop) gives back its run: a slice taken
// with another chunk as the hint comes from that run, not from the hint
// chunk's clean slice.
TEST(WarmMap, AWarmRunBeyondTheFirstSixteenChunksIsFound) {
  std::vector<tenon::span*> full;
  for (int i = 0; i < 80; ++i) {
    tenon::chunk* hint = nullptr;
    tenon::span* s = take(tenon::kMaxSpanSlices - 1, &hint);
    ASSERT_NE(s, nullptr);
    full.push_back(s);
  }
  for (int i = 1; i < 80; ++i) ASSERT_NE(tenon::chunk_of(full[i]), tenon::chunk_of(full[i - 1]));
  tenon::chunk* far = tenon::chunk_of(full[70]);
  give_back(full[70]);
  tenon::chunk* hint = tenon::chunk_of(full[5]);
  tenon::span* s = take(1, &hint);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(tenon::chunk_of(s), far);
  EXPECT_EQ(hint, far);
}

// One thread: the bit follows the chunk's `dirty` word exactly.
TEST(WarmMap, TheBitFollowsTheFreeResidentSlices) {
  auto& arena = g_default_engine.chunks;
  tenon::chunk* hint = nullptr;
  tenon::span* a = take(2, &hint);
  tenon::span* b = take(3, &hint);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  tenon::chunk* c = tenon::chunk_of(a);
  ASSERT_EQ(tenon::chunk_of(b), c);
  EXPECT_FALSE(arena.listed_warm(c));
  give_back(a);
  EXPECT_TRUE(arena.listed_warm(c));
  tenon::span* one = take(1, &hint);  // a warm slice of a's run
  ASSERT_NE(one, nullptr);
  EXPECT_TRUE(arena.listed_warm(c));   // the other is still free and resident
  tenon::span* two = take(1, &hint);
  ASSERT_NE(two, nullptr);
  EXPECT_EQ(c->dirty.load(), 0u);
  EXPECT_FALSE(arena.listed_warm(c));
  give_back(b);
  EXPECT_TRUE(arena.listed_warm(c));
  arena.purge(true, nullptr);  // malloc_trim's pass
  EXPECT_EQ(c->dirty.load(), 0u);
  EXPECT_FALSE(arena.listed_warm(c));
}

// Four threads take and give back runs of 1-6 slices across chunks while
// one forces purge passes: afterwards every chunk with a free resident slice
// is in the map (a bit may stay set over a clean chunk; find_run clears it).
TEST(WarmMap, NoChunkWithResidentFreeSlicesIsLeftOutUnderRaces) {
  auto& arena = g_default_engine.chunks;
  constexpr int kThreads = 4, kRounds = 50000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([t] {
      std::mt19937 rng(static_cast<unsigned>(t) * 7919u + 1u);
      tenon::chunk* hint = nullptr;
      std::vector<tenon::span*> held;
      for (int i = 0; i < kRounds; ++i) {
        if (i % 64 == 0) hint = nullptr;
        if (held.size() < 16 && (held.empty() || rng() % 2)) {
          tenon::span* s = take(1 + rng() % 6, &hint, rng() % 2);
          ASSERT_NE(s, nullptr);
          held.push_back(s);
        } else {
          std::size_t k = rng() % held.size();
          give_back(held[k]);
          held[k] = held.back();
          held.pop_back();
        }
        if (t == 0 && i % 500 == 0) g_default_engine.chunks.purge(true, nullptr);
      }
      for (tenon::span* s : held) give_back(s);
    });
  }
  for (auto& th : threads) th.join();
  int chunks = 0, warm = 0;
  arena.for_each_chunk([&](tenon::chunk* c) {
    ++chunks;
    if (c->dirty.load() == 0) return;
    ++warm;
    EXPECT_TRUE(arena.listed_warm(c)) << "chunk " << c->slot << " dirty " << std::hex << c->dirty.load();
  });
  EXPECT_GT(chunks, 1);
  EXPECT_GT(warm, 0);
}

}  // namespace
