// Death-test harness for heap misuse: runs one case of the misuse programs
// (bench/security/misuse.c, misuse_cxx.cpp; their protocol is in misuse.h)
// in a child process with a chosen library preloaded, and tells how it
// ended. A forked child alone could not change its allocator: the child
// execs the misuse program with LD_PRELOAD set, so what is tested is the
// library's standard names exactly as a program meets them.
#pragma once
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

namespace tenon_test {

struct misuse_run {
  bool exited = false;    // ended by exit(); exit_code is set
  int exit_code = -1;
  bool signaled = false;  // ended by a signal; signal is set
  int signal = 0;
  bool timed_out = false;  // killed by the harness (hung)
  std::string out;         // the program's protocol lines
  std::string err;         // the allocator's words (the program writes none)
  std::string error;       // the harness could not run it (fork, exec, pipe)

  // True when the program printed a line starting with `marker` ("DONE", "END", "CORRUPT").
  bool printed(const std::string& marker) const;
  // The pointer named on the CALL or ACCESS line (the misuse's pointer), or 0.
  std::uintptr_t misuse_pointer() const;
  // One paragraph for failure messages: how it ended, stdout, stderr.
  std::string describe() const;
};

// Runs `program case_name` with LD_PRELOAD=preload ("" for none; any
// LD_PRELOAD of the test itself is dropped), killing it after timeout_s.
misuse_run run_misuse(const std::string& program, const std::string& case_name, const std::string& preload,
                      int timeout_s = 30);

// The misuse was stopped at the bad call or access itself (after its CALL or
// ACCESS line, before DONE) by signal `sig`, with stderr matching `pattern`
// (ECMAScript regex, searched) and, when names_pointer, naming the misuse's
// pointer as a hex number (leading zeros allowed).
::testing::AssertionResult stopped_at_misuse(const misuse_run& r, int sig, const std::string& pattern,
                                             bool names_pointer = true);

// Why the tests that exec a program cannot run here (qemu-user,
// TENON_TEST_EMULATED=1: a guest's exec of another guest program is not
// emulated), or "" when they can.
std::string exec_unavailable();

// The same for the tests that also preload libtenon.so: not in a sanitizer
// build either (libtenon.so is instrumented there, and a sanitizer runtime
// must be the first library of the process).
std::string preload_unavailable();

// Runs `misuse_case` of `program` with `library` preloaded and expects it
// stopped at the misuse itself by SIGABRT, with a stderr line matching
// `tenon:.*free` that names the misuse's pointer (TenonDetects.*,
// PercpuDetects.*). Skips where preloading cannot run, or where the program
// says the case does not apply here (exit 77).
void expect_tenon_stops(const char* library, const char* program, const char* misuse_case);

// Runs `misuse_case` of the C misuse program with `library` preloaded and
// expects it to end normally having printed DEFENDED (the fresh-block probes).
void expect_tenon_defends(const char* library, const char* misuse_case);

// Skips the calling test where preload_unavailable() says why.
#define SKIP_UNLESS_PRELOAD()                                 \
  do {                                                        \
    std::string why = ::tenon_test::preload_unavailable();    \
    if (!why.empty()) GTEST_SKIP() << why;                    \
  } while (0)

}  // namespace tenon_test
