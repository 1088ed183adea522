// Build variants that swap a piece of the composition at compile time.
//
// TENON_LOCKED_VARIANT (bench/locked/, benchmark use only): every global
// shared structure (partial-span and heap stacks, chunk slice bitmaps, the
// huge cache) is entered through a mutex, so the benchmark can show what
// lock-freedom buys under contention and oversubscription. The mutex code
// lives in bench/locked/ so that src/ contains no lock at all. In every other
// build TENON_LOCKED_SECTION is empty.
#pragma once

#ifdef TENON_LOCKED_VARIANT
#include "locked_section.h"
#else
#define TENON_LOCKED_SECTION(name) ((void)0)
#endif
