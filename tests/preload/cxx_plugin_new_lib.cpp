// A C++ library that a C program loads with dlopen (RTLD_LOCAL), so that
// libstdc++ arrives after libtenon.so and only in this library's scope
// (cxx_plugin_new.c). Its failing operator new must answer as C++ says:
// std::bad_alloc it can catch, its own new_handler called, nullptr from the
// nothrow forms after the handler.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <new>

namespace {
int g_handler_calls;
void give_up_after_three() {
  if (++g_handler_calls >= 3) std::set_new_handler(nullptr);
}
void throw_at_once() {
  ++g_handler_calls;
  throw std::bad_alloc();
}
// Too big for any 64-bit process: every form fails.
volatile std::size_t g_impossible = SIZE_MAX / 2;
// Where each result goes, so that no compiler drops the allocation.
char* volatile g_result;
}  // namespace

// Bit set per case that went wrong; 0 when all answered as C++ says.
extern "C" int plugin_new_cases() {
  int wrong = 0;
  std::size_t n = g_impossible;
  try {
    g_result = new char[n];
    wrong |= 1;  // no exception
  } catch (const std::bad_alloc&) {
  }
  try {
    g_result = new (std::align_val_t{64}) char[n];
    wrong |= 2;
  } catch (const std::bad_alloc&) {
  }
  g_handler_calls = 0;
  std::set_new_handler(give_up_after_three);
  try {
    g_result = new char[n];
    wrong |= 4;
  } catch (const std::bad_alloc&) {
  }
  if (g_handler_calls != 3) wrong |= 8;  // the handler loop ran 3 times
  g_handler_calls = 0;
  std::set_new_handler(throw_at_once);
  char* q = new (std::nothrow) char[n];
  if (q || g_handler_calls != 1) wrong |= 16;  // nothrow: handler, then nullptr
  g_handler_calls = 0;
  q = new (std::align_val_t{64}, std::nothrow) char[n];
  if (q || g_handler_calls != 1) wrong |= 32;
  std::set_new_handler(nullptr);
  q = new (std::nothrow) char[n];
  if (q) wrong |= 64;
  std::printf("plugin: cases wrong mask %d\n", wrong);
  return wrong;
}
