// The death-test harness itself, on controls whose outcome is known: a stop
// with a message, a normal exit, a crash after the call, a preload that
// reaches the child, and a real allocator's check (glibc's tcache
// double-free check). These run in every build; the tests that wait for
// tenon's detections are in tenon_detections_test.cpp.
#include <gnu/libc-version.h>
#include <signal.h>

#include <cstdio>

#include "misuse_runner.h"

namespace tenon_test {
namespace {

#define SKIP_UNLESS_EXEC()                                   \
  do {                                                       \
    std::string why = exec_unavailable();                    \
    if (!why.empty()) GTEST_SKIP() << why;                   \
  } while (0)

TEST(Harness, StopWithMessageNamingThePointerPasses) {
  SKIP_UNLESS_EXEC();
  misuse_run r = run_misuse(TENON_MISUSE_PROGRAM, "control_abort", "");
  EXPECT_TRUE(stopped_at_misuse(r, SIGABRT, "^control: stopped free\\("));
  EXPECT_NE(r.misuse_pointer(), 0u) << r.describe();
}

TEST(Harness, WrongPatternOrSignalFails) {
  SKIP_UNLESS_EXEC();
  misuse_run r = run_misuse(TENON_MISUSE_PROGRAM, "control_abort", "");
  EXPECT_FALSE(stopped_at_misuse(r, SIGABRT, "tenon:"));
  EXPECT_FALSE(stopped_at_misuse(r, SIGSEGV, "control:"));
}

TEST(Harness, NormalExitIsNoStop) {
  SKIP_UNLESS_EXEC();
  misuse_run r = run_misuse(TENON_MISUSE_PROGRAM, "control_exit", "");
  ASSERT_TRUE(r.exited) << r.describe();
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_TRUE(r.printed("DONE")) << r.describe();
  EXPECT_TRUE(r.printed("END")) << r.describe();
  EXPECT_FALSE(stopped_at_misuse(r, SIGABRT, ".*", false));
}

TEST(Harness, CrashAfterTheCallIsNoStopAtTheMisuse) {
  SKIP_UNLESS_EXEC();
  misuse_run r = run_misuse(TENON_MISUSE_PROGRAM, "control_segv", "");
  ASSERT_TRUE(r.signaled) << r.describe();
  EXPECT_EQ(r.signal, SIGSEGV) << r.describe();
  EXPECT_FALSE(stopped_at_misuse(r, SIGSEGV, ".*", false));
}

// ld.so reports a preload it cannot load on stderr, so its message shows the
// variable reached the child (and that the test's own LD_PRELOAD did not).
TEST(Harness, PreloadReachesTheChild) {
  SKIP_UNLESS_EXEC();
  misuse_run r = run_misuse(TENON_MISUSE_PROGRAM, "control_exit", "/nonexistent/libnothing.so");
  EXPECT_NE(r.err.find("libnothing.so"), std::string::npos) << r.describe();
  EXPECT_TRUE(r.printed("END")) << r.describe();
}

TEST(Harness, UnknownCaseIsAnErrorExit) {
  SKIP_UNLESS_EXEC();
  misuse_run r = run_misuse(TENON_MISUSE_PROGRAM, "no_such_case", "");
  EXPECT_TRUE(r.exited && r.exit_code == 2) << r.describe();
}

// A real allocator's detection through the same path: glibc (2.29 and later)
// stops free(p); free(p) of a small block in its tcache check. glibc's message
// does not name the pointer.
TEST(Harness, GlibcStopsASmallDoubleFree) {
  SKIP_UNLESS_EXEC();
  int major = 0, minor = 0;
  if (std::sscanf(gnu_get_libc_version(), "%d.%d", &major, &minor) != 2 || major * 100 + minor < 229)
    GTEST_SKIP() << "glibc " << gnu_get_libc_version() << " has no tcache double-free check";
  misuse_run r = run_misuse(TENON_MISUSE_PROGRAM, "double_free_8", "");
  EXPECT_TRUE(stopped_at_misuse(r, SIGABRT, "double free", false));
}

}  // namespace
}  // namespace tenon_test
