// tenon_version(): the version of the library in use, from project(VERSION)
// in the top-level CMakeLists.txt (passed in as TENON_VERSION_STRING, so the
// number is written in one place only).
#include "tenon/tenon.h"

#ifndef TENON_VERSION_STRING
#error "TENON_VERSION_STRING is set by the build from project(VERSION) in CMakeLists.txt"
#endif

extern "C" TENON_API const char* tenon_version(void) { return TENON_VERSION_STRING; }
