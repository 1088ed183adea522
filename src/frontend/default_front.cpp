// The front end's out-of-line paths, instantiated over the default engine
// (tenon::default_allocator).
#include "engine_front.ipp"

template struct tenon::engine_front<tenon::g_default_engine>;
