// scripts/package_submission.sh: two runs' logs into the MLPerf training submission layout, the
// system description of this machine, the code reference, and the list of what is missing.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "kiln/core/file_util.h"
#include "tests/testing/mlperf_checker.h"
#include "tests/testing/run_command.h"
#include "tests/testing/temp_dir.h"

namespace kiln {
namespace {
namespace fs = std::filesystem;

const std::string kScript = std::string(KILN_SOURCE_DIR) + "/scripts/package_submission.sh";

// The fields mlperf_logging's system_desc_checker requires.
const char* const kSystemFields[] = {
    "submitter", "division", "status", "system_name", "number_of_nodes", "host_processors_per_node",
    "host_processor_model_name", "host_processor_core_count", "host_processor_vcpu_count",
    "host_processor_frequency", "host_processor_caches", "host_processor_interconnect", "host_memory_capacity",
    "host_storage_type", "host_storage_capacity", "host_networking", "host_networking_topology",
    "host_memory_configuration", "accelerators_per_node", "accelerator_model_name",
    "accelerator_host_interconnect", "accelerator_frequency", "accelerator_on-chip_memories",
    "accelerator_memory_configuration", "accelerator_memory_capacity", "accelerator_interconnect",
    "accelerator_interconnect_topology", "cooling", "hw_notes", "framework", "other_software_stack",
    "operating_system", "sw_notes"};

fs::path write_log(const fs::path& path, const std::string& status) {
  std::ofstream(path) << ":::MLLOG {\"namespace\": \"\", \"time_ms\": 1, \"event_type\": \"INTERVAL_END\", "
                         "\"key\": \"run_stop\", \"value\": null, \"metadata\": {\"status\": \""
                      << status << "\"}}\n";
  return path;
}

TEST(PackageSubmission, TwoRunsGoIntoTheSubmissionLayoutWithASystemDescription) {
  const fs::path dir = testing::unique_temp_dir("package_submission");
  const fs::path a = write_log(dir / "result_bert_1.log", "success");
  const fs::path b = write_log(dir / "result_bert_2.log", "aborted");
  const fs::path out = dir / "submission";
  const auto checker = testing::mlperf_logging_path();  // handed to the script where the test found it
  const std::string env = checker && !checker->empty() ? "KILN_MLPERF_LOGGING='" + *checker + "' " : "";
  const auto [rc, output] = testing::run_command(env + kScript + " --out '" + out.string() +
                                                 "' --benchmark bert --system box --submitter acme '" +
                                                 a.string() + "' '" + b.string() + "'");
  ASSERT_EQ(rc, 0) << output;
  EXPECT_EQ(read_file(out / "results/box/bert/result_0.txt"), read_file(a));
  EXPECT_EQ(read_file(out / "results/box/bert/result_1.txt"), read_file(b));

  const nlohmann::json system = nlohmann::json::parse(read_file(out / "systems/box.json"));
  for (const char* field : kSystemFields) EXPECT_TRUE(system.contains(field)) << field;
  EXPECT_EQ(system["submitter"], "acme");
  EXPECT_EQ(system["system_name"], "box");
  EXPECT_EQ(system["division"], "closed");
  EXPECT_EQ(system["framework"], std::string("kiln ") + KILN_VERSION);
  EXPECT_EQ(system["host_processor_vcpu_count"], std::to_string(::sysconf(_SC_NPROCESSORS_CONF)));
  EXPECT_FALSE(system["host_processor_model_name"].get<std::string>().empty());
  EXPECT_FALSE(system["host_memory_capacity"].get<std::string>().empty());

  const std::string code = read_file(out / "benchmarks/bert/implementations/kiln/CODE.md");
  const auto [git_rc, head] = testing::run_command("git -C '" + std::string(KILN_SOURCE_DIR) + "' rev-parse HEAD");
  if (git_rc == 0) {
    EXPECT_NE(code.find(head.substr(0, 40)), std::string::npos) << code;
  }

  // What a real submission still needs is said, not hidden.
  EXPECT_NE(output.find("bert needs 10 result logs; 2 given"), std::string::npos) << output;
  EXPECT_NE(output.find("result_bert_2.log did not reach the target"), std::string::npos) << output;
  EXPECT_EQ(output.find("result_bert_1.log did not reach"), std::string::npos) << output;
  EXPECT_NE(output.find("cooling is not detected"), std::string::npos) << output;
  if (!checker) return testing::skip_or_fail_without_checker("the packaged system description");
  // The package checker, or the system checker without scipy.
  EXPECT_TRUE(output.find("system description checker: passed") != std::string::npos ||
              output.find("package checker:") != std::string::npos)
      << output;
}

TEST(PackageSubmission, BadUsageNamesWhatIsWrong) {
  const fs::path dir = testing::unique_temp_dir("package_submission_bad");
  const auto [rc, out] = testing::run_command(kScript + " --out '" + dir.string() + "/o' --benchmark bert '" +
                                              dir.string() + "/nope.log'");
  EXPECT_EQ(rc, 2);
  EXPECT_NE(out.find("result log " + dir.string() + "/nope.log: not found"), std::string::npos) << out;
  const auto [rc2, out2] = testing::run_command(kScript + " --out x --benchmark gpt3 a.log");
  EXPECT_EQ(rc2, 2);
  EXPECT_NE(out2.find("--benchmark must be bert or resnet"), std::string::npos) << out2;
  const auto [rc3, out3] = testing::run_command(kScript + " --out x --benchmark bert --system ../up a.log");
  EXPECT_EQ(rc3, 2);
  EXPECT_NE(out3.find("--system '../up': letters, digits, '.', '_', '-' only"), std::string::npos) << out3;
}

// `--out` as the last word used to loop forever (shift 2 with one word left shifts nothing).
TEST(PackageSubmission, ALastOptionWithoutAValueIsAnError) {
  for (const char* option : {"--out", "--benchmark", "--system", "--submitter", "--division", "--status", "--ruleset"}) {
    const auto [rc, out] = testing::run_command("timeout 20 " + kScript + " --out x a.log " + option);
    EXPECT_EQ(rc, 2) << option << ": " << out;  // 124 when it loops
    EXPECT_NE(out.find(std::string("package_submission: ") + option + " needs a value (--help)"), std::string::npos)
        << out;
  }
}

// Quotes, backslashes, newlines and other control characters in a field stay inside its JSON string.
TEST(PackageSubmission, SystemDescriptionIsJsonWhateverItsFieldsHold) {
  const fs::path dir = testing::unique_temp_dir("package_submission_json");
  const fs::path log = write_log(dir / "result_bert_1.log", "success");
  const fs::path out = dir / "submission";
  const std::string submitter = "acme\n\"quoted\" back\\slash\ttab\001bell\037end";  // in '' for the shell
  const auto [rc, output] = testing::run_command(kScript + " --out '" + out.string() +
                                                 "' --benchmark bert --system box --submitter '" + submitter + "' '" +
                                                 log.string() + "'");
  ASSERT_EQ(rc, 0) << output;
  const fs::path json = out / "systems/box.json";
  const auto [py_rc, py_out] = testing::run_command(
      "python3 -c 'import json, sys; print(repr(json.load(open(sys.argv[1]))[\"submitter\"]))' '" + json.string() + "'");
  EXPECT_EQ(py_rc, 0) << py_out << read_file(json);
  EXPECT_EQ(py_out, "'acme\\n\"quoted\" back\\\\slash\\ttab\\x01bell\\x1fend'\n") << read_file(json);
  EXPECT_EQ(nlohmann::json::parse(read_file(json))["submitter"], submitter);
}

}  // namespace
}  // namespace kiln
