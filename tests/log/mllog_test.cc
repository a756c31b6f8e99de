#include "kiln/log/mllog.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "kiln/core/error.h"
#include "kiln/log/mllog_keys.h"

namespace kiln::log {
namespace {

namespace fs = std::filesystem;

fs::path temp_log(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("kiln_mllog_test_" + std::to_string(getpid()));
  fs::create_directories(dir);
  const fs::path p = dir / name;
  fs::remove(p);
  return p;
}

std::vector<std::string> read_lines(const fs::path& p) {
  std::ifstream in(p);
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  return lines;
}

TEST(MlLogger, LineHasPythonMllogFormatAndKeyOrder) {
  const fs::path p = temp_log("format.log");
  MlLogger ml(p, false);
  ml.event(key::kOptLambEpsilon, 1e-6, {{"epoch_num", 5}});
  const int line_no = __LINE__ - 1;
  ml.start(key::kRunStart);
  ml.end(key::kRunStop, nullptr, {{"status", "success"}});
  const auto lines = read_lines(p);
  ASSERT_EQ(lines.size(), 3u);
  const std::regex format(
      R"re(:::MLLOG \{"namespace": "", "time_ms": (\d+), "event_type": "POINT_IN_TIME", "key": "opt_lamb_epsilon", )re"
      R"re("value": 1e-06, "metadata": \{"file": "([^"]+)", "lineno": (\d+), "epoch_num": 5\}\})re");
  std::smatch m;
  ASSERT_TRUE(std::regex_match(lines[0], m, format)) << lines[0];
  const int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                             std::chrono::system_clock::now().time_since_epoch()).count();
  EXPECT_LE(std::abs(std::stoll(m[1]) - now_ms), 60000);  // epoch milliseconds, not seconds
  EXPECT_TRUE(std::string(m[2]).ends_with("tests/log/mllog_test.cc")) << m[2];
  EXPECT_EQ(std::stoi(m[3]), line_no);
  EXPECT_NE(lines[1].find(R"("event_type": "INTERVAL_START", "key": "run_start", "value": null, )"), std::string::npos);
  EXPECT_NE(lines[2].find(R"("event_type": "INTERVAL_END", "key": "run_stop", "value": null, )"), std::string::npos);
  EXPECT_TRUE(lines[2].ends_with(R"(, "status": "success"}})")) << lines[2];
}

TEST(MlLogger, ValuesSerializeAsPythonJsonDumps) {
  EXPECT_EQ(mllog_json(0.9), "0.9");
  EXPECT_EQ(mllog_json(1.0), "1.0");
  EXPECT_EQ(mllog_json(0.0001), "0.0001");
  EXPECT_EQ(mllog_json(int64_t(4673536)), "4673536");
  EXPECT_EQ(mllog_json(true), "true");
  EXPECT_EQ(mllog_json(nullptr), "null");
  EXPECT_EQ(mllog_json("a\"b\xc3\xa9"), R"("a\"b\u00e9")");  // escaped, non-ASCII as \u
  EXPECT_EQ(mllog_json(Json{{"a", 1}, {"b", Json::array({1, 2})}}), R"({"a": 1, "b": [1, 2]})");
  EXPECT_THROW(mllog_json(std::nan("")), Error);
  EXPECT_THROW(mllog_json(Json{{"x", INFINITY}}), Error);
}

TEST(MlLogger, SourceFileIsRelativeToSrc) {
  EXPECT_EQ(mllog_source_file("/work/main/src/kiln/train/bert_trainer.cc"), "kiln/train/bert_trainer.cc");
  EXPECT_EQ(mllog_source_file("/a/src/b/src/kiln/x.cc"), "kiln/x.cc");
  EXPECT_EQ(mllog_source_file("src/kiln/x.cc"), "kiln/x.cc");
  EXPECT_EQ(mllog_source_file("other/x.cc"), "other/x.cc");
}

TEST(MlLogger, FlushesEveryLineAndANewLoggerReplacesTheFile) {
  const fs::path p = temp_log("replace.log");
  {
    MlLogger first(p, false);
    first.event(key::kCacheClear, true);
    EXPECT_EQ(read_lines(p).size(), 1u);  // on disk before the logger closes
  }
  MlLogger second(p, false);
  second.start(key::kInitStart);
  const auto lines = read_lines(p);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("\"init_start\""), std::string::npos);
}

// A resumed run: the position recorded with a checkpoint; the killed run wrote more (a partial
// line too); the continued log is the lines up to the position, then the new ones.
TEST(MlLogger, ContinuesAtARecordedPositionDroppingWhatFollowed) {
  const fs::path p = temp_log("continue.log");
  MlLogPosition at;
  {
    MlLogger first(p, false);
    first.event(key::kCacheClear, true);
    first.start(key::kRunStart);
    at = first.position();
    first.start(key::kBlockStart);
  }
  { std::ofstream(p, std::ios::app) << ":::MLLOG {\"namespace\": \"\", \"ti"; }
  EXPECT_EQ(at.bytes, read_lines(p)[0].size() + read_lines(p)[1].size() + 2);
  MlLogger resumed(p, false, at);
  EXPECT_EQ(resumed.position().bytes, at.bytes);
  EXPECT_EQ(resumed.position().crc32c, at.crc32c);
  resumed.end(key::kRunStop);
  const auto lines = read_lines(p);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_NE(lines[1].find("\"run_start\""), std::string::npos);
  EXPECT_NE(lines[2].find("\"run_stop\""), std::string::npos);
  EXPECT_EQ(resumed.position().bytes, fs::file_size(p));
}

TEST(MlLogger, ContinuingALogThatIsMissingShorterOrDifferentIsAnErrorNamingIt) {
  const fs::path p = temp_log("other.log");
  MlLogPosition at;
  {
    MlLogger first(p, false);
    first.event(key::kCacheClear, true);
    at = first.position();
  }
  auto error = [&](MlLogPosition pos) {
    try {
      MlLogger resumed(p, false, pos);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  EXPECT_NE(error({at.bytes + 1, at.crc32c}).find(p.string() + ": has " + std::to_string(at.bytes) + " bytes"),
            std::string::npos);
  EXPECT_NE(error({at.bytes, at.crc32c ^ 1}).find(p.string() + ": its first " + std::to_string(at.bytes) +
                                                  " bytes are not the log to continue"),
            std::string::npos);
  EXPECT_EQ(fs::file_size(p), at.bytes);  // a refused continuation leaves the file as it was
  fs::remove(p);
  EXPECT_NE(error(at).find(p.string() + ": cannot open to continue it"), std::string::npos);
}

TEST(MlLogger, AppendsAtTheEndOfALogAsItIs) {
  const fs::path p = temp_log("append.log");
  {
    MlLogger first(p, false);
    first.end(key::kInitStop);
  }
  const auto before = read_lines(p);
  {
    MlLogger second(p, false, mllog_end(p));
    second.start(key::kRunStart);
  }
  const auto after = read_lines(p);
  ASSERT_EQ(after.size(), 2u);
  EXPECT_EQ(after[0], before[0]);
  EXPECT_NE(after[1].find("\"key\": \"run_start\""), std::string::npos);
  try {
    mllog_end(p.string() + ".missing");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("append.log.missing"), std::string::npos) << e.what();
  }
}

TEST(MlLogger, UnwritablePathThrowsNamingIt) {
  const std::string bad = "/nonexistent_kiln_dir/result_bert_1.log";
  try {
    MlLogger ml(bad, false);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(bad), std::string::npos) << e.what();
  }
}

TEST(MlLogger, NonFiniteValueIsRefusedAndNothingIsWritten) {
  const fs::path p = temp_log("nan.log");
  MlLogger ml(p, false);
  EXPECT_THROW(ml.event(key::kEvalAccuracy, std::nan(""), {{"epoch_num", 1}}), Error);
  EXPECT_TRUE(read_lines(p).empty());
}

}  // namespace
}  // namespace kiln::log
