// Named injection points. In a build configured with -DTENON_INJECT=ON every
// slow-path step between two operations on shared state calls a hook that the
// progress tests use to park a thread there forever. In every other build the
// macro is empty: it costs nothing.
#pragma once

#ifdef TENON_INJECT
namespace tenon::inject {
void hit(const char* point);
}
// The test hook: called with the point's name at every injection point (the
// progress tests park a thread there). Not in tenon.h: it exists only in
// builds made with -DTENON_INJECT=ON.
extern "C" {
typedef void (*tenon_inject_hook_fn)(const char* point);
__attribute__((visibility("default"))) void tenon_inject_set_hook(tenon_inject_hook_fn fn);
}
#define TENON_INJECT_POINT(name) ::tenon::inject::hit(name)
#else
#define TENON_INJECT_POINT(name) ((void)0)
#endif
