// Invariant checks (the TENON_DEBUG flavour, -DTENON_DEBUG=ON): every span,
// list and counter transition states what must hold, and a build made with
// TENON_DEBUG aborts with the broken invariant's text the moment one fails.
// In every other build the checks are discarded at compile time (`if
// constexpr`): the code reads the same and costs nothing.
#pragma once

namespace tenon {

#ifdef TENON_DEBUG
inline constexpr bool kChecks = true;
#else
inline constexpr bool kChecks = false;
#endif

// Writes "tenon: invariant broken at FILE:LINE: WHAT" and aborts.
[[noreturn]] void invariant_failed(const char* file, int line, const char* what) noexcept;

}  // namespace tenon

#define TENON_CHECK(cond)                                                         \
  do {                                                                            \
    if constexpr (::tenon::kChecks) {                                             \
      if (!(cond)) ::tenon::invariant_failed(__FILE__, __LINE__, #cond);          \
    }                                                                             \
  } while (0)
