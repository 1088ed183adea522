// libtenon-passthrough3.so: the default allocator under three pass_through
// layers. Composition is free only if this library's malloc/free cost
// exactly what libtenon.so's do (tests/layers/zero_cost.sh, the report of
// make bench).
#include <tenon/layer.hpp>

using three_layers = tenon::pass_through<tenon::pass_through<tenon::pass_through<tenon::default_allocator>>>;
TENON_EXPORT_MALLOC(three_layers)
