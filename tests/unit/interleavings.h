// A tiny exhaustive interleaving explorer for models of tenon's lock-free
// protocols. A model is a small copyable State with a fixed number of
// threads, each a state machine whose every step is one atomic action:
//   bool done(int t) const;  void step(int t);  const char* violation() const;
// explore() runs every schedule to completion (depth-first, copying the state
// at each branch) and returns the number of distinct states visited, or stops
// at the first state whose violation() is non-null. States already explored
// are remembered by their bytes (models are plain structs, zero-initialised),
// so every reachable state is checked once.
#pragma once
#include <cstddef>
#include <cstring>
#include <string>
#include <type_traits>
#include <unordered_set>

namespace tenon::model {

template <class State>
struct result {
  std::size_t states = 0;
  const char* violation = nullptr;
  std::unordered_set<std::string> seen;
};

template <class State>
void explore_from(const State& s, result<State>& r) {
  static_assert(std::is_trivially_copyable_v<State>);
  if (r.violation) return;
  if (!r.seen.emplace(reinterpret_cast<const char*>(&s), sizeof s).second) return;
  ++r.states;
  if (const char* v = s.violation()) {
    r.violation = v;
    return;
  }
  for (int t = 0; t < State::kThreads; ++t) {
    if (s.done(t)) continue;
    State next = s;
    next.step(t);
    explore_from(next, r);
  }
}

template <class State>
result<State> explore(const State& initial) {
  result<State> r;
  explore_from(initial, r);
  return r;
}

}  // namespace tenon::model
