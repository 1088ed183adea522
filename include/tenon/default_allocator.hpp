// tenon::default_allocator: the composition libtenon.so exports, usable as
// the innermost layer of any other: the front end over the default engine.
// Included by <tenon/layer.hpp>.
#pragma once
#include "tenon/engine/engine.h"
#include "tenon/frontend/engine_front.h"

namespace tenon {

using default_allocator = engine_front<g_default_engine>;

}  // namespace tenon
