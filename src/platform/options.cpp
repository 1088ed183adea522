// Layer 1, platform: the TENON_* options (options.h, docs/options.md).
#include "tenon/platform/options.h"

#include "tenon/common/inject.h"
#include "tenon/platform/os.h"
#include "tenon/platform/report.h"

#include <atomic>

namespace tenon {

namespace {

// Every option, in the order TENON_VERBOSE lists them. A TENON_* name not
// here and not a test knob (below) is reported as unknown.
constexpr const char* kKnown[] = {"TENON_PURGE_DELAY_MS", "TENON_BACKGROUND_PURGE", "TENON_POPULATE",
                                  "TENON_HUGE_PAGES",     "TENON_STATS",            "TENON_VERBOSE",
                                  "TENON_LATENCY",        "TENON_LATENCY_SAMPLE",   "TENON_TRACE"};
// The test suite's and the benchmark's own variables: not options of the
// allocator, never reported.
constexpr const char* kKnobPrefixes[] = {"TENON_TEST_", "TENON_BENCH_"};

bool equal(const char* a, const char* b) {
  while (*a && *a == *b) ++a, ++b;
  return *a == *b;
}

bool starts_with(const char* s, const char* prefix) {
  while (*prefix && *s == *prefix) ++s, ++prefix;
  return *prefix == 0;
}

// One pass over the environment. Quiet, except the check at load, which
// warns about bad values and, with TENON_VERBOSE, lists every setting.
struct parser {
  bool warn = false;
  bool verbose = false;

  static const char* value(const char* name) {
    const char* v = os::env(name);
    return v && *v ? v : nullptr;  // empty means unset
  }

  // TENON_VERBOSE's line for one setting: "  NAME=value (default)".
  void show(const char* name, const char* shown_value, bool from_environment) {
    if (!verbose) return;
    message_line line;
    line.text("  ").text(name).text("=").text(shown_value).text(from_environment ? " (environment)" : " (default)");
    line.write();
  }
  void show(const char* name, std::uint32_t shown_value, bool from_environment) {
    if (!verbose) return;
    message_line line;
    line.text("  ").text(name).text("=").number(shown_value).text(from_environment ? " (environment)" : " (default)");
    line.write();
  }

  // A decimal number from min to max (no sign, no spaces, no suffix).
  std::uint32_t number(const char* name, std::uint32_t fallback, std::uint32_t min, std::uint32_t max,
                       const char* what) {
    const char* v = value(name);
    std::uint64_t n = 0;
    bool good = v != nullptr;
    for (const char* s = v; good && *s; ++s) {
      good = *s >= '0' && *s <= '9' && (n = n * 10 + std::uint64_t(*s - '0')) <= max;
    }
    good = good && n >= min;
    if (v && !good && warn) {
      message_line line;
      line.text(name).text("=").text(v).text(" is not ").text(what).text(" from ").number(min).text(" to ")
          .number(max).text("; using ").number(fallback);
      line.write();
    }
    std::uint32_t result = good ? static_cast<std::uint32_t>(n) : fallback;
    show(name, result, good);
    return result;
  }

  // On or off: 1, on, yes, true or 0, off, no, false.
  bool flag(const char* name, bool fallback) {
    const char* v = value(name);
    int said = -1;
    if (v) {
      for (const char* on : {"1", "on", "yes", "true"})
        if (equal(v, on)) said = 1;
      for (const char* off : {"0", "off", "no", "false"})
        if (equal(v, off)) said = 0;
      if (said < 0 && warn) {
        message_line line;
        line.text(name).text("=").text(v).text(" is not 1 or 0 (on/off, yes/no, true/false); using ")
            .text(fallback ? "1" : "0");
        line.write();
      }
    }
    bool result = said < 0 ? fallback : said == 1;
    show(name, result ? "1" : "0", said >= 0);
    return result;
  }

  // Any text (a file name); unset or empty means none.
  const char* text(const char* name) {
    const char* v = value(name);
    show(name, v ? v : "", v != nullptr);
    return v;
  }

  options_t parse() {
    options_t o;
    o.purge_delay_ms = number("TENON_PURGE_DELAY_MS", o.purge_delay_ms, 0, kMaxPurgeDelayMs, "a number of milliseconds");
    o.background_purge = static_cast<purge_thread>(number("TENON_BACKGROUND_PURGE", std::uint32_t(o.background_purge),
                                                          0, std::uint32_t(purge_thread::at_load), "a purger mode"));
    o.populate = number("TENON_POPULATE", o.populate, 0, kMaxPopulate, "a block size in bytes");
    o.thp = static_cast<huge_pages>(
        number("TENON_HUGE_PAGES", std::uint32_t(o.thp), 0, std::uint32_t(huge_pages::grown), "a huge-page mode"));
    o.stats = flag("TENON_STATS", o.stats);
    o.verbose = flag("TENON_VERBOSE", o.verbose);
    o.latency = flag("TENON_LATENCY", o.latency);
    o.latency_sample = number("TENON_LATENCY_SAMPLE", o.latency_sample, 1, kMaxLatencySample, "a sampling interval");
    o.trace = text("TENON_TRACE");
    return o;
  }
};

bool is_known(const char* entry, std::size_t name_length) {
  for (const char* known : kKnown) {
    std::size_t k = 0;
    while (k < name_length && known[k] == entry[k]) ++k;
    if (k == name_length && known[k] == 0) return true;
  }
  return false;
}

// One line for each TENON_* variable that is neither an option nor a test knob.
void report_unknown_names() {
  const char* const* env = os::environment();
  for (; env && *env; ++env) {
    const char* entry = *env;
    if (!starts_with(entry, "TENON_")) continue;
    bool knob = false;
    for (const char* prefix : kKnobPrefixes) knob = knob || starts_with(entry, prefix);
    std::size_t n = 0;
    while (entry[n] && entry[n] != '=') ++n;
    if (knob || is_known(entry, n)) continue;
    message_line line;
    line.text("unknown option ");
    line.text(entry, n);
    line.text(" (known: ");
    for (const char* known : kKnown) line.text(known == kKnown[0] ? "" : ", ").text(known);
    line.text(")");
    line.write();
  }
}

// The check at load: every warning once per process (per tenon library
// loaded), and with TENON_VERBOSE the effective settings. Nothing is
// published: options() parses again at first use.
__attribute__((constructor)) void check_options_at_load() {
  parser report;
  report.warn = true;
  report.verbose = parser{}.parse().verbose;
  if (report.verbose) {
    message_line header;
    const char* library = os::library_of(reinterpret_cast<const void*>(&check_options_at_load));
    header.text("settings of ").text(library ? library : "tenon").text(" (default or environment):");
    header.write();
  }
  report.parse();
  report_unknown_names();
}

enum : int { kUnread, kParsing, kReady };
options_t g_options;
std::atomic<int> g_state{kUnread};

}  // namespace

options_t read_options() { return parser{}.parse(); }

options_t options() {
  int state = g_state.load(std::memory_order_acquire);
  if (state == kReady) return g_options;
  options_t o = read_options();
  if (state == kUnread && g_state.compare_exchange_strong(state, kParsing, std::memory_order_relaxed)) {
    TENON_INJECT_POINT("options.publish");
    g_options = o;
    g_state.store(kReady, std::memory_order_release);
  }
  return o;
}

}  // namespace tenon
