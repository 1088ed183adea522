// Exhaustive check of the tagged stack's protocol (src/common/id_stack.h):
// every interleaving of three threads popping and pushing back the same few
// nodes, each step one atomic action exactly as in the code (read head, read
// the top's link, CAS head; or read head, write link, CAS head). Invariants in
// every state: nothing is both on the stack and held by a thread, no thread
// holds what another holds, no node is lost, the stack has no cycle.
// The same model without version tags must find the ABA corruption, which
// shows the checker can see the bug the tags prevent.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>

#include "interleavings.h"

namespace {

constexpr int kNodes = 3;  // ids 1..3

struct stack_model {
  static constexpr int kThreads = 3;
  static constexpr int kOps = 4;
  enum op : std::uint8_t { pop, push };
  // Shared memory.
  std::uint32_t head_tag = 0, head_id = 1;
  std::uint32_t link[kNodes + 1] = {0, 2, 3, 0};  // initial stack 1 -> 2 -> 3
  bool use_tags = true;
  // Per thread: script, program counter within an op, registers, held nodes.
  struct thread {
    op script[kOps];
    int nops = 0, op_index = 0, pc = 0;
    std::uint32_t seen_tag = 0, seen_id = 0, next = 0;
    std::uint32_t held[kNodes] = {};
    int nheld = 0;
  } th[kThreads];

  bool done(int t) const { return th[t].op_index == th[t].nops; }

  void finish_op(thread& x) {
    x.pc = 0;
    ++x.op_index;
  }

  void step(int t) {
    thread& x = th[t];
    if (x.script[x.op_index] == pop) {
      switch (x.pc) {
        case 0:  // head_.load
          x.seen_tag = head_tag;
          x.seen_id = head_id;
          if (x.seen_id == 0) finish_op(x); else x.pc = 1;
          break;
        case 1:  // Link(id).load: may be stale, that is the point
          x.next = link[x.seen_id];
          x.pc = 2;
          break;
        case 2:  // CAS
          if (head_tag == x.seen_tag && head_id == x.seen_id) {
            head_tag = use_tags ? head_tag + 1 : 0;
            head_id = x.next;
            x.held[x.nheld++] = x.seen_id;
            finish_op(x);
          } else {
            x.pc = 0;
          }
          break;
      }
    } else {  // push the most recently popped node
      if (x.nheld == 0) { finish_op(x); return; }
      std::uint32_t id = x.held[x.nheld - 1];
      switch (x.pc) {
        case 0:
          x.seen_tag = head_tag;
          x.seen_id = head_id;
          x.pc = 1;
          break;
        case 1:
          link[id] = x.seen_id;
          x.pc = 2;
          break;
        case 2:
          if (head_tag == x.seen_tag && head_id == x.seen_id) {
            head_tag = use_tags ? head_tag + 1 : 0;
            head_id = id;
            --x.nheld;
            finish_op(x);
          } else {
            x.pc = 0;
          }
          break;
      }
    }
  }

  const char* violation() const {
    int where[kNodes + 1] = {};  // times each node is seen
    std::uint32_t id = head_id;
    for (int n = 0; id != 0; ++n) {
      if (n > kNodes) return "cycle in the stack";
      ++where[id];
      id = link[id];
    }
    for (const thread& x : th)
      for (int i = 0; i < x.nheld; ++i) ++where[x.held[i]];
    for (int i = 1; i <= kNodes; ++i) {
      if (where[i] > 1) return "a node is in two places (stack and/or threads)";
      if (where[i] == 0) return "a node was lost";
    }
    return nullptr;
  }
};

stack_model make_model(bool tags) {
  stack_model m;
  std::memset(static_cast<void*>(&m), 0, sizeof m);  // padding too: states are compared by bytes
  m = stack_model{};
  m.use_tags = tags;
  // The classic ABA: one thread pops and is delayed between reading the link
  // and its CAS while others pop, pop, push back.
  m.th[0] = {{stack_model::pop, stack_model::push}, 2};
  m.th[1] = {{stack_model::pop, stack_model::pop, stack_model::push, stack_model::push}, 4};
  m.th[2] = {{stack_model::pop, stack_model::push, stack_model::pop, stack_model::push}, 4};
  return m;
}

TEST(IdStackModel, EveryInterleavingKeepsTheStackIntact) {
  auto r = tenon::model::explore(make_model(true));
  EXPECT_EQ(r.violation, nullptr) << r.violation;
  EXPECT_GT(r.states, 1000u);
  std::printf("tagged stack: %zu states explored, no violation\n", r.states);
}

TEST(IdStackModel, WithoutTagsTheCheckerFindsABA) {
  auto r = tenon::model::explore(make_model(false));
  ASSERT_NE(r.violation, nullptr);
  std::printf("untagged stack: violation found as expected: %s\n", r.violation);
}

}  // namespace
