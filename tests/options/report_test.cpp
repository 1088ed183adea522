// tenon's own messages (include/tenon/platform/report.h): one line, "tenon: "
// first, written with one write(2) and nothing allocated.
#include <gtest/gtest.h>

#include <string>

#include "tenon/common/checks.h"
#include "tenon/platform/report.h"

namespace {

std::string reported(const char* what, const void* pointer) {
  testing::internal::CaptureStderr();
  tenon::report_error(what, pointer);
  return testing::internal::GetCapturedStderr();
}

TEST(Report, LineStartsWithTenon) {
  EXPECT_EQ(reported("free of a pointer tenon never gave out", nullptr),
            "tenon: free of a pointer tenon never gave out\n");
}

TEST(Report, PointerInHex) {
  EXPECT_EQ(reported("double free", reinterpret_cast<void*>(0x7f12ab00c0ull)), "tenon: double free: 0x7f12ab00c0\n");
  EXPECT_EQ(reported("x", reinterpret_cast<void*>(0x1)), "tenon: x: 0x1\n");
}

TEST(Report, LongTextIsCutAndTheLineStillEnds) {
  std::string what(2000, 'a');
  std::string out = reported(what.c_str(), nullptr);
  ASSERT_EQ(out.size(), tenon::message_line::kCapacity);
  EXPECT_EQ(out.rfind("tenon: aaa", 0), 0u);
  EXPECT_EQ(out.back(), '\n');
}

TEST(Report, LineBuildsNumbersAndCountedText) {
  testing::internal::CaptureStderr();
  tenon::message_line line;
  line.text("n=").number(0).text(" ").number(18446744073709551615ull).text(" ").text("TENON_X=1", 7);
  line.write();
  line.text("again");  // a written line starts over
  line.write();
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "tenon: n=0 18446744073709551615 TENON_X\ntenon: again\n");
}

using ReportDeathTest = testing::Test;

TEST_F(ReportDeathTest, FatalErrorAbortsAfterItsLine) {
  EXPECT_DEATH(tenon::fatal_error("invalid free", reinterpret_cast<void*>(0xdead0)), "^tenon: invalid free: 0xdead0\n");
}

TEST_F(ReportDeathTest, BrokenInvariantSaysTenon) {
  EXPECT_DEATH(tenon::invariant_failed("span.ipp", 42, "free count within the span"),
               "^tenon: invariant broken at span.ipp:42: free count within the span\n");
}

}  // namespace
