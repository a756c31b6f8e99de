// log/submission.h — the events every MLPerf result log shares, whatever the benchmark:
//   log_submission_preamble: cache_clear true; init_start; submission_benchmark, submission_org,
//     submission_division, submission_status, submission_platform (division before init_stop:
//     it sets the checker's 30-min init limit); seed (int)
//   log_run_start: init_stop; run_start (the clock starts; no data touched before)
//   log_run_stop: run_stop {status: success | aborted}
// A two-process run (tinygrad's INITMLPERF / RUNMLPERF) splits them: the init process logs the
// preamble and init_stop; the run process appends run_start and the rest to the same file.
#pragma once
#include <cstdint>
#include <filesystem>
#include <source_location>
#include <string>
#include <string_view>

#include "kiln/log/mllog.h"

namespace kiln::log {

struct SubmissionInfo {
  std::string org;
  std::string platform;
  std::string division = "closed";  // closed | open
  std::string status = "onprem";    // cloud | onprem | preview | research
};

// Throws kiln::Error naming the first field the checker would reject.
void validate(const SubmissionInfo& submission);

// Validates `submission`, then logs the events above. The seed line carries `seed_site`, the
// caller's line, so each benchmark logs its seed from one fixed file and line as the seed
// checker wants.
void log_submission_preamble(MlLogger& ml, std::string_view benchmark, const SubmissionInfo& submission,
                             int64_t seed, std::source_location seed_site = std::source_location::current());

void log_run_start(MlLogger& ml);
void log_run_stop(MlLogger& ml, bool success);

// Throws kiln::Error naming `log` unless it is what an init phase leaves for the run phase to
// append to: a log that holds init_stop and no run_start.
void check_init_phase_log(const std::filesystem::path& log);

}  // namespace kiln::log
