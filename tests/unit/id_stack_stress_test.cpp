// The real tagged stack under real threads (run under ThreadSanitizer in CI):
// threads pop and push back a fixed set of nodes; at the end every node is on
// the stack exactly once.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

#include "tenon/common/id_stack.h"

namespace {

constexpr std::uint32_t kNodes = 64;
std::atomic<std::uint32_t> g_links[kNodes + 1];

struct link {
  std::atomic<std::uint32_t>& operator()(std::uint32_t id) const { return g_links[id]; }
};

using stack_t = tenon::id_stack<link>;

void fill(stack_t& stack) {
  for (std::uint32_t id = 1; id <= kNodes; ++id) stack.push(id);
}

// Drains the stack and checks every node was on it exactly once.
void expect_every_node_once(stack_t& stack) {
  std::vector<int> seen(kNodes + 1, 0);
  unsigned retries = 0;
  while (std::uint32_t id = stack.pop(&retries)) ++seen[id];
  for (std::uint32_t id = 1; id <= kNodes; ++id) EXPECT_EQ(seen[id], 1) << id;
}

#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
constexpr int kRounds = 20000;
#else
constexpr int kRounds = 200000;
#endif

TEST(IdStack, ConcurrentPopPushKeepsEveryNode) {
  stack_t stack;
  fill(stack);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      std::uint32_t held[3];
      for (int r = 0; r < kRounds; ++r) {
        unsigned retries = 0;
        int n = 0;
        for (; n < 3; ++n)
          if (!(held[n] = stack.pop(&retries))) break;
        while (n > 0) stack.push(held[--n]);
      }
    });
  for (auto& t : threads) t.join();
  expect_every_node_once(stack);
}

// pop_all takes the whole stack while others pop and push: every node is
// still accounted for exactly once at the end.
TEST(IdStack, PopAllAgainstPopsAndPushes) {
  stack_t stack;
  fill(stack);
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t)
    threads.emplace_back([&, t] {
      for (int r = 0; r < kRounds / 4; ++r) {
        if (t == 0) {
          std::uint32_t ids[kNodes];
          int n = 0;
          for (std::uint32_t id = stack.pop_all(); id; id = g_links[id].load(std::memory_order_relaxed)) ids[n++] = id;
          while (n > 0) stack.push(ids[--n]);
        } else {
          unsigned retries = 0;
          if (std::uint32_t id = stack.pop(&retries)) stack.push(id);
        }
      }
    });
  for (auto& t : threads) t.join();
  expect_every_node_once(stack);
}

}  // namespace
