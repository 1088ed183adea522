// Printing from inside an allocator: no stdio buffers (they allocate), one
// write(2) of a line formatted on the stack.
#pragma once
#include <unistd.h>

#include <cstdarg>
#include <cstdio>

namespace example {

inline void report(const char* format, ...) {
  char line[256];
  va_list args;
  va_start(args, format);
  int n = std::vsnprintf(line, sizeof line, format, args);
  va_end(args);
  if (n > 0) (void)!write(2, line, static_cast<std::size_t>(n) < sizeof line ? n : sizeof line - 1);
}

}  // namespace example
