// libtenon-percpu.so: the default allocator behind per-CPU caches
// (<tenon/percpu/percpu_cache.hpp>; docs/architecture.md, "Per-CPU caches"):
// the per-CPU front end chosen instead of going straight to the thread
// heaps, which stay underneath for misses, for blocks above 1 KiB, and for
// every call where rseq is missing.
#include "tenon/layer.hpp"
#include "tenon/percpu/percpu_cache.hpp"

TENON_EXPORT_MALLOC(tenon::percpu_cache<tenon::default_allocator>)
