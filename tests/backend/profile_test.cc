// KILN_PROFILE's tables: every op type that ran while recording, with its calls; an op inside
// another counts only for the outer one; nothing is added while recording is off; per (op, shape)
// rows with the achieved rates of the ops whose FLOPs or bytes the dispatch noted.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "kiln/backend/backend.h"
#include "kiln/backend/op_shape.h"
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

// The per-(op, shape) row of `op` whose shape is `shape`: its fields after the shape, or {} when absent.
std::vector<std::string> shape_row(const std::string& report, const std::string& op, const std::string& shape) {
  const size_t at = report.find("  " + op + " | " + shape + " | ");
  if (at == std::string::npos) return {};
  std::vector<std::string> fields;
  std::istringstream line(report.substr(at, report.find('\n', at) - at));
  for (std::string field; std::getline(line, field, '|');) fields.push_back(field.substr(1, field.find_last_not_of(' ')));
  return {fields.begin() + 2, fields.end()};
}

TEST(OpProfile, RowsPerOpAndShapeWithWhatTheyAchieved) {
  Context& ctx = cpu_context();
  Tensor a = Tensor::empty({64, 16}, DType::f32, ctx.device), b = Tensor::empty({16, 32}, DType::f32, ctx.device);
  Tensor c = Tensor::empty({64, 32}, DType::f32, ctx.device), d = Tensor::empty({8}, DType::f32, ctx.device);
  Tensor e = Tensor::empty({32, 16}, DType::f32, ctx.device);
  fill(ctx, a, 1.0f);
  fill(ctx, b, 1.0f);
  fill(ctx, c, 1.0f);
  reset_profile();
  set_profile_recording(true);
  for (int i = 0; i < 3; ++i) matmul(ctx, mat(a), mat(b), mat(c), {});
  matmul(ctx, mat(c, true), mat(a), mat(e), {});  // (32, 64) x (64, 16)
  fill(ctx, d, 2.0f);
  { const OpScope unnoted("outer_op"); }
  set_profile_recording(false);
  fill(ctx, c, 1.0f);  // not recording: no row
  const std::string report = profile_report(1.0, 1);
  EXPECT_NE(row_of(report, "matmul"), "") << report;  // the op-type summary stays
  const auto mm = shape_row(report, "matmul", "64x32x16 f32->f32");
  ASSERT_EQ(mm.size(), 4u) << report;
  EXPECT_EQ(mm[0], "3.0") << report;
  EXPECT_NE(mm[2], "-") << report;  // 2 x 64 x 32 x 16 FLOPs a call: a rate
  EXPECT_EQ(shape_row(report, "matmul", "32x16x64 f32->f32").size(), 4u) << report;
  const auto fill_row = shape_row(report, "fill", "f32[8]");
  ASSERT_EQ(fill_row.size(), 4u) << report;
  EXPECT_EQ(fill_row[2], "-") << report;  // no FLOPs noted
  EXPECT_NE(fill_row[3], "-") << report;  // 32 bytes
  EXPECT_EQ(shape_row(report, "fill", "f32[64,32]"), std::vector<std::string>{}) << report;
  EXPECT_EQ(shape_row(report, "outer_op", "-").size(), 4u) << report;
  reset_profile();
}

TEST(OpProfile, NotesShapesOnlyWhileAnOpWouldBeRecorded) {
  set_profile_recording(false);
  EXPECT_FALSE(profile_noting());
  set_profile_recording(true);
  EXPECT_TRUE(profile_noting());
  {
    const OpScope outer("outer_op");
    EXPECT_FALSE(profile_noting());  // an op inside another is not recorded
  }
  set_profile_recording(false);
  int described = 0;
  const ShapeNote note([&] { return ++described, OpShape{}; });
  EXPECT_EQ(described, 0);
  reset_profile();
}

// Fused attention's rows: the products' FLOPs (forward 4 d Z, backward 14 d Z with its
// recomputation; Z = B heads S^2), each head view's bytes once, the mask, the lse and the keep bits.
TEST(OpProfile, FusedAttentionShapesCountItsProductsAndHeadViews) {
  const int64_t B = 2, heads = 3, S = 40, d = 16;
  const Tensor x = Tensor::empty({B * S, heads * d}, DType::bf16), mask = Tensor::empty({B, S}, DType::i32);
  const Tensor lse = Tensor::empty({B, heads, S}, DType::f32), bits = Tensor::empty({B, heads, S, 2}, DType::i32);
  const MatView h = heads_view(x, B, S, heads);
  DropoutMask drop;
  drop.p = 0.1f;
  const OpShape fwd = describe(check::flash_attention_forward{}, h, h, h, mask, drop, 0.25f, h, lse, bits);
  const OpShape bwd =
      describe(check::flash_attention_backward{}, h, h, h, h, h, mask, drop, 0.25f, lse, bits, h, h, h);
  const double Z = double(B * heads * S * S), view = double(B * S * heads * d * 2),
               small = double(B * S * 4 * (1 + heads)) + double(B * heads * S * 2 * 4);
  EXPECT_EQ(fwd.text, "[2x3] S40 d16 bf16 p0.1");
  EXPECT_DOUBLE_EQ(fwd.flops, 4 * Z * d);
  EXPECT_DOUBLE_EQ(bwd.flops, 14 * Z * d);
  EXPECT_DOUBLE_EQ(fwd.bytes, 4 * view + small);
  EXPECT_DOUBLE_EQ(bwd.bytes, 8 * view + small);
}

}  // namespace
}  // namespace kiln::ops
