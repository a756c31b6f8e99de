#include "kiln/log/submission.h"

#include <fmt/format.h>

#include "kiln/core/error.h"
#include "kiln/core/file_util.h"
#include "kiln/log/mllog_keys.h"

namespace kiln::log {

void validate(const SubmissionInfo& submission) {
  KILN_CHECK(!submission.org.empty(), "mllog run: submission_org is empty");
  KILN_CHECK(!submission.platform.empty(), "mllog run: submission_platform is empty");
  KILN_CHECK(submission.division == "closed" || submission.division == "open",
             "mllog run: submission_division '{}' is not closed or open", submission.division);
  const std::string& s = submission.status;
  KILN_CHECK(s == "cloud" || s == "onprem" || s == "preview" || s == "research",
             "mllog run: submission_status '{}' is not cloud, onprem, preview or research", s);
}

void log_submission_preamble(MlLogger& ml, std::string_view benchmark, const SubmissionInfo& submission,
                             int64_t seed, std::source_location seed_site) {
  validate(submission);
  ml.event(key::kCacheClear, true);
  ml.start(key::kInitStart);
  ml.event(key::kSubmissionBenchmark, benchmark);
  ml.event(key::kSubmissionOrg, submission.org);
  ml.event(key::kSubmissionDivision, submission.division);
  ml.event(key::kSubmissionStatus, submission.status);
  ml.event(key::kSubmissionPlatform, submission.platform);
  ml.event(key::kSeed, seed, nullptr, seed_site);
}

void log_run_start(MlLogger& ml) {
  ml.end(key::kInitStop);
  ml.start(key::kRunStart);
}

void log_run_stop(MlLogger& ml, bool success) {
  ml.end(key::kRunStop, nullptr, {{"status", success ? "success" : "aborted"}});
}

void check_init_phase_log(const std::filesystem::path& log) {
  const std::string again = "run the init phase first (--mlperf-phase init or INITMLPERF=1, same seed and output dir)";
  if (!std::filesystem::exists(log)) throw Error("mllog file {}: missing; {}", log.string(), again);
  const std::string text = read_file(log);
  const auto holds = [&](std::string_view k) { return text.find(fmt::format("\"key\": \"{}\"", k)) != std::string::npos; };
  if (holds(key::kRunStart))
    throw Error("mllog file {}: already holds a run (run_start); {}", log.string(), again);
  if (!holds(key::kInitStop))
    throw Error("mllog file {}: has no init_stop (the init phase did not finish); {}", log.string(), again);
}

}  // namespace kiln::log
