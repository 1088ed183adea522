// libtenon-latency.so: the default allocator under the latency layer.
//   TENON_LATENCY=1 LD_PRELOAD=libtenon-latency.so program   # percentiles at exit
#include "tenon/measure/latency.hpp"

TENON_EXPORT_MALLOC(tenon::latency<tenon::default_allocator>)
