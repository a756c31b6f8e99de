#include "kiln/log/megatron_log.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <ctime>

#include "kiln/log/tensorboard.h"

namespace kiln::log {
namespace {

double perplexity(double loss) { return std::exp(std::min(20.0, loss)); }

void add_both(TensorBoardWriter& w, std::string_view name, double value, int64_t iteration,
              int64_t samples) {
  w.add_scalar(name, value, iteration);
  w.add_scalar(tb::vs_samples(name), value, samples);
}

}  // namespace

std::string megatron_timestamp(std::chrono::system_clock::time_point when) {
  using namespace std::chrono;
  const auto since_epoch = when.time_since_epoch();
  const auto whole = duration_cast<seconds>(since_epoch);
  int64_t micros = duration_cast<microseconds>(since_epoch - whole).count();
  std::time_t t = whole.count();
  if (micros < 0) {  // before 1970: keep the fraction positive
    micros += 1000000;
    --t;
  }
  std::tm local{};
  localtime_r(&t, &local);
  char date[32];
  std::strftime(date, sizeof(date), "%Y-%m-%d %H:%M:%S", &local);
  return fmt::format(" [{}.{:06d}]", date, micros);
}

std::string megatron_train_line(const MegatronTrainLog& g, std::chrono::system_clock::time_point when) {
  std::string s = megatron_timestamp(when);
  s += fmt::format(" iteration {:8d}/{:8d} |", g.iteration, g.train_iters);
  s += fmt::format(" consumed samples: {:12d} |", g.consumed_samples);
  if (g.skipped_samples > 0) s += fmt::format(" skipped samples: {:12d} |", g.skipped_samples);
  s += fmt::format(" elapsed time per iteration (ms): {:.1f} |", g.elapsed_ms_per_iteration);
  if (g.tflops_per_device)
    s += fmt::format(" throughput per GPU (TFLOP/s/GPU): {:.1f} |", *g.tflops_per_device);
  s += fmt::format(" learning rate: {:.6E} |", g.learning_rate);
  s += fmt::format(" global batch size: {:5d} |", g.global_batch_size);
  for (const auto& [name, value] : g.losses)
    if (value >= 0.0) s += fmt::format(" {}: {:.6E} |", name, value);
  s += fmt::format(" loss scale: {:.1f} |", g.loss_scale);
  if (g.grad_norm) s += fmt::format(" grad norm: {:.3f} |", *g.grad_norm);
  if (g.num_zeros) s += fmt::format(" num zeros: {} |", *g.num_zeros);
  if (g.params_norm) s += fmt::format(" params norm: {:.3f} |", *g.params_norm);
  s += fmt::format(" number of skipped iterations: {:3d} |", g.skipped_iterations);
  s += fmt::format(" number of nan iterations: {:3d} |", g.nan_iterations);
  return s;
}

std::string megatron_validation_block(std::string_view prefix, const NamedLosses& losses) {
  std::string text = fmt::format(" validation loss at {} | ", prefix);
  for (const auto& [name, value] : losses) {
    text += fmt::format("{} value: {:.6E} | ", name, value);
    text += fmt::format("{} PPL: {:.6E} | ", name, perplexity(value));
  }
  const std::string dashes(text.size() + 1, '-');
  return dashes + "\n" + text + "\n" + dashes + "\n";
}

void write_megatron_train_scalars(TensorBoardWriter& w, const MegatronTrainLog& g) {
  const int64_t it = g.iteration, samples = g.consumed_samples;
  add_both(w, tb::kLearningRate, g.learning_rate, it, samples);
  if (g.skipped_samples > 0) w.add_scalar(tb::kSkippedTrainSamples, double(g.skipped_samples), it);
  add_both(w, tb::kBatchSize, double(g.global_batch_size), it, samples);
  for (const auto& [name, value] : g.losses) add_both(w, name, value, it, samples);
  add_both(w, tb::kLossScale, g.loss_scale, it, samples);
  if (g.grad_norm) add_both(w, tb::kGradNorm, *g.grad_norm, it, samples);
  if (g.num_zeros) add_both(w, tb::kNumZeros, double(*g.num_zeros), it, samples);
  if (g.params_norm) add_both(w, tb::kParamsNorm, *g.params_norm, it, samples);
}

void write_megatron_validation_scalars(TensorBoardWriter& w, const NamedLosses& losses,
                                       int64_t iteration, int64_t consumed_samples, bool log_ppl) {
  for (const auto& [name, value] : losses) {
    add_both(w, tb::validation(name), value, iteration, consumed_samples);
    if (log_ppl) add_both(w, tb::validation_ppl(name), perplexity(value), iteration, consumed_samples);
  }
}

}  // namespace kiln::log
