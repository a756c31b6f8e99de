// KILN_PROFILE's table: every op type that ran while recording, with its calls; an op inside
// another counts only for the outer one; nothing is added while recording is off.
#include <gtest/gtest.h>

#include <string>

#include "kiln/backend/backend.h"
#include "kiln/backend/profile.h"

namespace kiln::ops {
namespace {

// The table row of `op`, or "" when the op is not in it.
std::string row_of(const std::string& report, const std::string& op) {
  const size_t at = report.find("  " + op + " ");
  return at == std::string::npos ? std::string() : report.substr(at, report.find('\n', at) - at);
}

TEST(OpProfile, CountsOutermostOpsWhileRecording) {
  Context& ctx = cpu_context();
  Tensor a = Tensor::empty({64}, DType::f32, ctx.device), b = Tensor::empty({64}, DType::f32, ctx.device);
  reset_profile();
  fill(ctx, a, 1.0f);  // not recording: not counted
  set_profile_recording(true);
  for (int i = 0; i < 4; ++i) fill(ctx, a, 2.0f);
  add(ctx, a, a, b);
  {
    const OpScope outer("outer_op");
    copy(ctx, a, b);  // inside outer_op: counted there, not as "copy"
  }
  set_profile_recording(false);
  fill(ctx, a, 3.0f);
  const std::string report = profile_report(1.0, 2);
  EXPECT_NE(row_of(report, "fill").find(" 2.0 "), std::string::npos) << report;  // 4 calls over 2 steps
  EXPECT_NE(row_of(report, "add").find(" 0.5 "), std::string::npos) << report;
  EXPECT_NE(row_of(report, "outer_op"), "") << report;
  EXPECT_EQ(row_of(report, "copy"), "") << report;
  EXPECT_NE(report.find("(outside ops)"), std::string::npos) << report;
  reset_profile();
  EXPECT_EQ(row_of(profile_report(1.0, 1), "fill"), "");
}

}  // namespace
}  // namespace kiln::ops
