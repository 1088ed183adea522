// Secure layers: the stack libtenon-secure.so puts over its engine, as one
// alias over any innermost layer, so that the same checks can sit over
// another engine or a first-class heap (tenon::heap_layer):
//   zero_size   malloc(0) gets a unique address no access may touch
//   canary      a keyed header and a canary after every block, checked on
//               free, sized free, realloc and malloc_usable_size
//   quarantine  delayed reuse: freed small blocks wait for 64 more frees,
//               zeroed, and are checked on the way out (write after free);
//               large blocks (up to 2 MiB) wait for 8 more, inaccessible
//               (one layer, two pools: one lookup per block)
// The encoded free-list links of the secure build are an engine policy
// (secure/links.h, secure_config), not a layer: a stack over another engine
// or a heap of the default engine has the layers' checks, not those links.
#pragma once
#include "tenon/common/config.h"
#include "tenon/layer.hpp"
#include "tenon/secure/canary.hpp"
#include "tenon/secure/quarantine.hpp"
#include "tenon/secure/zero_size.hpp"

namespace tenon::secure {

// The quarantine of the stack (its drain at a thread's exit is named by
// secure_config: src/secure/secure_engine.cpp).
template <layer Bottom>
using quarantine_of = quarantine<Bottom, 64, kMaxSmall, 8, kMaxLarge, 16, 4096, canary_layout>;

template <layer Bottom>
using layers = zero_size<canary<quarantine_of<Bottom>>>;

}  // namespace tenon::secure
