// train/config/shared_flags.h — the configuration keys that BERT's and ResNet's recipes share (the
// same key, variable and flags; the help too unless a parameter says it), each group registered by
// one function. A group is registered where each recipe's other keys put it: the registration order
// is the order of --help and of the saved configuration.
#pragma once
#include <string>
#include <utility>

#include "kiln/train/config/config_registry.h"
#include "kiln/train/config/ddp_config.h"
#include "kiln/train/config/mlperf_phase.h"
#include "kiln/train/config/resume_flags.h"

namespace kiln::train {

// train.benchmark, train.exit_interval, train.seed and train.threads.
template <typename Config>
void register_run_length_flags(ConfigRegistry& r, Config& c, std::string seed_help, std::string threads_help) {
  r.add_int("train.benchmark", &c.benchmark, "BENCHMARK", {"--benchmark"},
            "run N steps and print the estimated time to train");
  r.add_int("train.exit_interval", &c.exit_interval, "", {"--exit-interval"},
            "stop after this step, e.g. to resume later");
  r.add_int("train.seed", &c.seed, "SEED", {"--seed"}, std::move(seed_help));
  r.add_int("train.threads", &c.threads, "", {"--threads"}, std::move(threads_help));
}

// parallel.use_distributed_optimizer, the DDP keys, parallel.save_timeout and parallel.dist_timeout.
template <typename Config>
void register_data_parallel_flags(ConfigRegistry& r, Config& c) {
  r.add_bool("parallel.use_distributed_optimizer", &c.distributed_optimizer, "", {"--use-distributed-optimizer"},
             "shard the optimizer state over the data-parallel ranks (ZeRO-1)");
  register_ddp_config(r, c.ddp);
  r.add_float("parallel.save_timeout", &c.save_timeout, "", {"--save-timeout"},
              "seconds the ranks wait for each other across a checkpoint save or an evaluation, instead of "
              "--dist-timeout (0: forever)");
  r.add_float("parallel.dist_timeout", &c.dist_timeout, "", {"--dist-timeout"},
              "seconds a collective waits for the other ranks before every rank ends (0: forever)");
}

// run.log_interval, run.output_dir, the checkpoints' keys (run.save_dir, run.save_interval,
// run.keep_checkpoints, run.load_dir) and the resume flags. save_interval_env: the variable of
// run.save_interval, or "".
template <typename Config>
void register_output_flags(ConfigRegistry& r, Config& c, std::string output_dir_help, std::string save_interval_env,
                           std::string save_interval_help) {
  r.add_int("run.log_interval", &c.log_interval, "", {"--log-interval"}, "steps per console line");
  r.add_string("run.output_dir", &c.output_dir, "", {"--output-dir"}, std::move(output_dir_help));
  r.add_string("run.save_dir", &c.save_dir, "SAVE_CKPT_DIR", {"--save"}, "checkpoint directory");
  r.add_int("run.save_interval", &c.save_interval, std::move(save_interval_env), {"--save-interval"},
            std::move(save_interval_help));
  r.add_int("run.keep_checkpoints", &c.keep_checkpoints, "KEEP_CKPT_AMOUNT", {"--keep-checkpoints"},
            "newest checkpoints kept");
  r.add_string("run.load_dir", &c.load_dir, "RESUME", {"--load", "--resume"},
               "resume from the newest checkpoint in this directory");
  register_resume_flags(r, c.resume);
}

// run.dry_run and run.device_model.
template <typename Config>
void register_dry_run_flags(ConfigRegistry& r, Config& c) {
  r.add_bool("run.dry_run", &c.dry_run, "", {"--dry-run"},
             "print parameters, memory per rank and FLOPs per step, then exit");
  r.add_string("run.device_model", &c.device_model, "", {"--device-model"},
               "with --dry-run: the expected step on this device, by op class (h200, h100, a100)");
  r.add_bool("run.dry_run_json", &c.dry_run_json, "", {"--json"},
             "with --dry-run --device-model: only the expected step, as one JSON object (tools/gpu_check.sh)");
}

// run.submission_org, run.submission_platform and the MLPerf phase's keys.
template <typename Config>
void register_submission_flags(ConfigRegistry& r, Config& c) {
  r.add_string("run.submission_org", &c.submission_org, "SUBMISSION_ORG", {}, "MLPerf submission_org");
  r.add_string("run.submission_platform", &c.submission_platform, "SUBMISSION_PLATFORM", {},
               "MLPerf submission_platform");
  register_mlperf_phase(r, c.mlperf);
}

}  // namespace kiln::train
