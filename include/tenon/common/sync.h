// The synchronisation policy of the engines: what happens around each
// operation on a shared structure. tenon's own policy, lock_free, does
// nothing there (every structure is lock-free by its own CAS protocol); the
// contention benchmark's twin (bench/locked/) puts a mutex around each
// structure instead, to show what lock-freedom buys. No lock lives in src/.
#pragma once

namespace tenon {

// The shared structures a section names (one mutex each in the locked twin).
enum class shared_structure { stacks, chunks, huge_cache };

struct lock_free {
  template <shared_structure>
  struct section {
    constexpr section() noexcept = default;
  };
};

// `section<C::sync, S> guard;` at the start of a scope that operates on S.
template <class Sync, shared_structure S>
using section = typename Sync::template section<S>;

}  // namespace tenon
