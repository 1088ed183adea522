// libtenon-valgrind.so: libtenon.so with every block announced to valgrind's
// memcheck (<tenon/valgrind.hpp>), for checking a program on tenon's own heap:
//   LD_PRELOAD=/abs/libtenon-valgrind.so valgrind --soname-synonyms=somalloc=nouserintercepts program
// Built only where valgrind's headers are installed (src/CMakeLists.txt).
#include "tenon/layer.hpp"
#include "tenon/valgrind.hpp"

TENON_EXPORT_MALLOC(tenon::valgrind_annotations<tenon::default_allocator>)
