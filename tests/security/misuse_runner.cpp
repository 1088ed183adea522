#include "misuse_runner.h"

#include "test_support.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <regex>
#include <sstream>
#include <vector>

extern char** environ;

namespace tenon_test {

namespace {

double now_s() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

// Reads what is there; false at end of file.
bool drain(int fd, std::string& into) {
  char buf[4096];
  ssize_t n = read(fd, buf, sizeof buf);
  if (n > 0) {
    into.append(buf, static_cast<size_t>(n));
    return true;
  }
  return n < 0 && (errno == EINTR || errno == EAGAIN);
}

// Every "0x..." number in text.
std::vector<std::uintptr_t> hex_numbers(const std::string& text) {
  std::vector<std::uintptr_t> found;
  static const std::regex hex("0x([0-9a-fA-F]+)");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), hex); it != std::sregex_iterator(); ++it)
    found.push_back(static_cast<std::uintptr_t>(std::strtoull((*it)[1].str().c_str(), nullptr, 16)));
  return found;
}

bool line_starts_with(const std::string& text, const std::string& word) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (line.compare(0, word.size(), word) == 0 && (line.size() == word.size() || line[word.size()] == ' '))
      return true;
  return false;
}

}  // namespace

bool misuse_run::printed(const std::string& marker) const { return line_starts_with(out, marker); }

std::uintptr_t misuse_run::misuse_pointer() const {
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("CALL ", 0) != 0 && line.rfind("ACCESS ", 0) != 0) continue;
    auto nums = hex_numbers(line);
    if (!nums.empty()) return nums.back();
  }
  return 0;
}

std::string misuse_run::describe() const {
  std::ostringstream s;
  if (!error.empty())
    s << "harness error: " << error;
  else if (timed_out)
    s << "hung: killed by the harness";
  else if (signaled)
    s << "ended by signal " << signal << " (" << strsignal(signal) << ")";
  else
    s << "exited with status " << exit_code;
  s << "\n--- stdout ---\n" << out << "--- stderr ---\n" << err << "--------------";
  return s.str();
}

misuse_run run_misuse(const std::string& program, const std::string& case_name, const std::string& preload,
                      int timeout_s) {
  misuse_run r;
  // Everything the child needs is built here: between fork and exec only
  // async-signal-safe calls are allowed.
  std::vector<std::string> env_store;
  for (char** e = environ; *e; ++e)
    if (std::strncmp(*e, "LD_PRELOAD=", 11) != 0) env_store.emplace_back(*e);
  if (!preload.empty()) env_store.push_back("LD_PRELOAD=" + preload);
  std::vector<char*> envp;
  for (auto& e : env_store) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::string prog = program, name = case_name;
  char* argv[] = {prog.data(), name.data(), nullptr};

  int out_pipe[2], err_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0) {
    r.error = std::string("pipe: ") + strerror(errno);
    return r;
  }
  if (pipe2(err_pipe, O_CLOEXEC) != 0) {
    r.error = std::string("pipe: ") + strerror(errno);
    close(out_pipe[0]);
    close(out_pipe[1]);
    return r;
  }
  pid_t pid = fork();
  if (pid < 0) {
    r.error = std::string("fork: ") + strerror(errno);
    for (int fd : {out_pipe[0], out_pipe[1], err_pipe[0], err_pipe[1]}) close(fd);
    return r;
  }
  if (pid == 0) {
    dup2(out_pipe[1], 1);
    dup2(err_pipe[1], 2);
    execve(argv[0], argv, envp.data());
    static const char msg[] = "harness: execve failed\n";
    (void)!write(2, msg, sizeof msg - 1);
    _exit(127);
  }
  close(out_pipe[1]);
  close(err_pipe[1]);

  const double deadline = now_s() + timeout_s;
  bool out_open = true, err_open = true;
  while (out_open || err_open) {
    pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
    double left = deadline - now_s();
    if (left <= 0 && !r.timed_out) {
      kill(pid, SIGKILL);  // the pipes close when it is gone
      r.timed_out = true;
    }
    int ready = poll(fds, 2, r.timed_out ? 1000 : static_cast<int>(left * 1000) + 1);
    if (ready < 0 && errno != EINTR) break;
    if (out_open && (fds[0].revents & (POLLIN | POLLHUP | POLLERR))) out_open = drain(out_pipe[0], r.out);
    if (err_open && (fds[1].revents & (POLLIN | POLLHUP | POLLERR))) err_open = drain(err_pipe[0], r.err);
  }
  close(out_pipe[0]);
  close(err_pipe[0]);

  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status)) {
    r.exited = true;
    r.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    r.signaled = true;
    r.signal = WTERMSIG(status);
  }
  return r;
}

::testing::AssertionResult stopped_at_misuse(const misuse_run& r, int sig, const std::string& pattern,
                                             bool names_pointer) {
  auto fail = [&](const std::string& why) {
    return ::testing::AssertionFailure() << why << "\n" << r.describe();
  };
  if (!r.error.empty()) return fail("the harness could not run the program");
  if (r.timed_out) return fail("the program hung");
  std::uintptr_t ptr = r.misuse_pointer();
  if (!ptr) return fail("the program never reached its misuse (no CALL or ACCESS line)");
  if (!r.signaled || r.signal != sig)
    return fail(std::string("expected the program to end by signal ") + std::to_string(sig) + " (" +
                strsignal(sig) + ")");
  if (r.printed("DONE")) return fail("the misuse returned (DONE): the stop came later, not at the misuse");
  std::smatch m;
  if (!std::regex_search(r.err, m, std::regex(pattern)))
    return fail("no stderr line matches /" + pattern + "/");
  if (names_pointer) {
    bool named = false;
    for (auto n : hex_numbers(r.err)) named = named || n == ptr;
    if (!named) {
      std::ostringstream s;
      s << "stderr does not name the misuse's pointer 0x" << std::hex << ptr;
      return fail(s.str());
    }
  }
  return ::testing::AssertionSuccess();
}

std::string exec_unavailable() {
  const char* emulated = std::getenv("TENON_TEST_EMULATED");
  if (emulated && *emulated && std::strcmp(emulated, "0") != 0)
    return "under qemu-user (TENON_TEST_EMULATED): a guest cannot exec another guest program";
  return "";
}

std::string preload_unavailable() {
  if (kSanitized) return "sanitizer build: libtenon.so is instrumented and cannot be preloaded into a plain program";
  return exec_unavailable();
}

void expect_tenon_stops(const char* library, const char* program, const char* misuse_case) {
  std::string why = preload_unavailable();
  if (!why.empty()) GTEST_SKIP() << why;
  misuse_run r = run_misuse(program, misuse_case, library);
  if (r.exited && r.exit_code == 77) GTEST_SKIP() << "not applicable here: " << r.out;
  EXPECT_TRUE(stopped_at_misuse(r, SIGABRT, "tenon:.*free")) << "case " << misuse_case;
}

void expect_tenon_defends(const char* library, const char* misuse_case) {
  std::string why = preload_unavailable();
  if (!why.empty()) GTEST_SKIP() << why;
  misuse_run r = run_misuse(TENON_MISUSE_PROGRAM, misuse_case, library);
  EXPECT_TRUE(r.exited && r.exit_code == 0) << r.describe();
  EXPECT_TRUE(r.printed("DEFENDED")) << r.describe();
}

}  // namespace tenon_test
