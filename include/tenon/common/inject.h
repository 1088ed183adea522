// Named injection points. In a build configured with -DTENON_INJECT=ON every
// slow-path step between two operations on shared state calls a hook that the
// progress tests use to park a thread there forever. In every other build the
// macro is empty: it costs nothing.
#pragma once

#ifdef TENON_INJECT
namespace tenon::inject {
void hit(const char* point);
}
#define TENON_INJECT_POINT(name) ::tenon::inject::hit(name)
#else
#define TENON_INJECT_POINT(name) ((void)0)
#endif
