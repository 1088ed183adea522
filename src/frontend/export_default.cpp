// libtenon.so's standard names: the default composition, exported exactly as
// a user exports their own (docs/layers.md).
#include "tenon/layer.hpp"

TENON_EXPORT_MALLOC(tenon::default_allocator)
