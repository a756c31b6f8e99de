// core/notice.h: what any rank notices reaches stderr, saying whose it is when there are several.
#include <gtest/gtest.h>

#include "kiln/core/notice.h"

namespace kiln {
namespace {

TEST(Notice, ALineSaysWhichRankOfSeveralWroteIt) {
  ::testing::internal::CaptureStderr();
  notice("cache {} is unreadable", "a.json");
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "kiln: cache a.json is unreadable\n");
  set_notice_rank(3, 4);
  ::testing::internal::CaptureStderr();
  notice("cache {} is unreadable", "a.json");
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "kiln: rank 3: cache a.json is unreadable\n");
  set_notice_rank(0, 1);
  ::testing::internal::CaptureStderr();
  notice("one process");
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "kiln: one process\n");
}

}  // namespace
}  // namespace kiln
