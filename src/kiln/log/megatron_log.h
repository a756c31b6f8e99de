// log/megatron_log.h — Megatron-LM's console lines and TensorBoard scalar names, so that users'
// log parsers and dashboards keep working (specs/megatron-bert.md section 6).
//
// Training line (one line; [..] only when the field is set):
//  [2024-05-01 12:00:00.123456] iteration      100/    1000 | consumed samples:         3200 |
//  [skipped samples: {:12d} |] elapsed time per iteration (ms): 301.2 |
//  [throughput per GPU (TFLOP/s/GPU): 41.5 |] learning rate: 1.000000E-04 |
//  global batch size:    32 | lm loss: 7.123456E+00 | sop loss: 6.931472E-01 | loss scale: 1.0 |
//  [grad norm: 1.234 |] [num zeros: 0 |] [params norm: 123.456 |]
//  number of skipped iterations:   0 | number of nan iterations:   0 |
// Validation block: a dash line one longer than the text, the text, the dash line again:
//  " validation loss at iteration 1000 | lm loss value: 6.000000E+00 | lm loss PPL: 4.034288E+02 | "
#pragma once
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kiln::log {

class TensorBoardWriter;

// Megatron's TensorBoard scalar names. Training scalars are logged against the iteration and,
// as "<name> vs samples", against consumed samples; validation ones as "<loss> validation".
namespace tb {
inline constexpr std::string_view kLearningRate = "learning-rate";
inline constexpr std::string_view kBatchSize = "batch-size";
inline constexpr std::string_view kLmLoss = "lm loss";
inline constexpr std::string_view kSopLoss = "sop loss";
inline constexpr std::string_view kLossScale = "loss-scale";
inline constexpr std::string_view kGradNorm = "grad-norm";
inline constexpr std::string_view kNumZeros = "num-zeros";
inline constexpr std::string_view kParamsNorm = "params-norm";
inline constexpr std::string_view kSkippedTrainSamples = "skipped-train-samples";
inline constexpr std::string_view kWorldSize = "world-size";
inline constexpr std::string_view kIterationTime = "iteration-time";  // seconds
inline constexpr std::string_view kThroughput = "throughput";         // TFLOP/s per device
inline constexpr std::string_view kMemReservedBytes = "mem-reserved-bytes";
inline constexpr std::string_view kMemAllocatedBytes = "mem-allocated-bytes";
inline constexpr std::string_view kMemMaxAllocatedBytes = "mem-max-allocated-bytes";
inline constexpr std::string_view kMemAllocatedCount = "mem-allocated-count";
inline constexpr std::string_view kLmLossValidation = "lm loss validation";
inline constexpr std::string_view kSopLossValidation = "sop loss validation";

inline std::string vs_samples(std::string_view name) { return std::string(name) + " vs samples"; }
inline std::string validation(std::string_view loss) { return std::string(loss) + " validation"; }
inline std::string validation_ppl(std::string_view loss) {
  return std::string(loss) + " validation ppl";
}
}  // namespace tb

// Named losses in the order they print, e.g. {{"lm loss", 7.1}, {"sop loss", 0.69}}.
using NamedLosses = std::vector<std::pair<std::string, double>>;

struct MegatronTrainLog {
  int64_t iteration = 0, train_iters = 0, consumed_samples = 0;
  int64_t skipped_samples = 0;                // printed when > 0
  double elapsed_ms_per_iteration = 0;
  std::optional<double> tflops_per_device;    // --log-throughput
  double learning_rate = 0;
  int64_t global_batch_size = 0;
  NamedLosses losses;                         // window averages; a negative one is not printed
  double loss_scale = 1.0;                    // 1.0 for fp32 and bf16
  std::optional<double> grad_norm;            // unset when the last step was skipped
  std::optional<int64_t> num_zeros;           // --log-num-zeros-in-grad
  std::optional<double> params_norm;          // --log-params-norm
  int64_t skipped_iterations = 0, nan_iterations = 0;
};

// " [YYYY-MM-DD HH:MM:SS.ffffff]" in local time, as Python's datetime.now() prints it.
std::string megatron_timestamp(std::chrono::system_clock::time_point when);

// The training line, without a newline.
std::string megatron_train_line(const MegatronTrainLog& log,
                                std::chrono::system_clock::time_point when =
                                    std::chrono::system_clock::now());

// The validation block, three lines each ending in '\n'. `prefix` is "iteration N" for the
// periodic evaluation and "iteration N on validation set" / "... on test set" at the end.
// PPL = exp(min(20, loss)).
std::string megatron_validation_block(std::string_view prefix, const NamedLosses& losses);

// Megatron's training scalars for one iteration: learning-rate, [skipped-train-samples],
// batch-size, each loss, loss-scale, [grad-norm], [num-zeros], [params-norm], each also
// "vs samples". Pass the iteration's own losses (Megatron logs them unaveraged).
void write_megatron_train_scalars(TensorBoardWriter& writer, const MegatronTrainLog& log);
// "<loss> validation" (+ " vs samples"), and "<loss> validation ppl" when `log_ppl`.
void write_megatron_validation_scalars(TensorBoardWriter& writer, const NamedLosses& losses,
                                       int64_t iteration, int64_t consumed_samples, bool log_ppl);

}  // namespace kiln::log
