#include "kiln/train/bert_trainer.h"

#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>
#include <ostream>

#include "kiln/backend/backend.h"
#include "kiln/core/error.h"
#include "kiln/core/file_util.h"
#include "kiln/core/timer.h"
#include "kiln/data/text/vocab.h"
#include "kiln/io/checkpoint.h"
#include "kiln/log/bert_mllog.h"
#include "kiln/log/megatron_log.h"
#include "kiln/log/mllog.h"
#include "kiln/log/mllog_keys.h"
#include "kiln/log/tensorboard.h"
#include "kiln/models/bert.h"
#include "kiln/optim/adamw.h"
#include "kiln/optim/grad_norm.h"
#include "kiln/optim/lamb.h"
#include "kiln/optim/lr_schedule.h"
#include "kiln/train/bert_data.h"
#include "kiln/train/dry_run.h"
#include "kiln/train/run_report.h"

namespace kiln::train {
namespace fs = std::filesystem;

namespace {

models::BertConfig model_config(const BertTrainConfig& c) {
  models::BertConfig m;
  m.vocab_size = c.padded_vocab_size();
  m.hidden = c.hidden_size;
  m.layers = c.num_layers;
  m.heads = c.num_heads;
  m.intermediate = c.intermediate_size;
  m.max_position = c.max_position;
  m.type_vocab = c.type_vocab;
  m.hidden_dropout = float(c.hidden_dropout);
  m.attention_dropout = float(c.attention_dropout);
  m.layer_norm_eps = float(c.layer_norm_eps);
  m.pre_ln = c.pre_ln;
  m.binary_head = !c.no_binary_head;
  return m;
}

std::unique_ptr<optim::LrSchedule> make_schedule(const BertTrainConfig& c) {
  if (c.lr_decay_style == "poly")
    return std::make_unique<optim::PolyWarmupSchedule>(c.lr, c.warmup_steps, c.lr_decay_iters,
                                                       c.poly_power, c.min_lr);
  const auto style = c.lr_decay_style == "cosine" ? optim::DecayStyle::kCosine
                                                  : optim::DecayStyle::kLinear;
  return std::make_unique<optim::WarmupDecaySchedule>(style, c.lr, c.min_lr, c.warmup_steps,
                                                      c.lr_decay_iters);
}

std::unique_ptr<optim::Optimizer> make_optimizer(const BertTrainConfig& c, ParamStore& store) {
  if (c.optimizer == "adamw")
    return std::make_unique<optim::AdamW>(
        store, optim::AdamWConfig{float(c.beta1), float(c.beta2), float(c.epsilon),
                                  float(c.weight_decay)});
  return std::make_unique<optim::Lamb>(
      store, optim::LambConfig{float(c.beta1), float(c.beta2), float(c.epsilon),
                               float(c.weight_decay), true});
}

// The model's embedding must cover every id the vocab file and the data can hold.
void check_vocab(const BertTrainConfig& c, int64_t data_vocab) {
  auto check = [&](int64_t ids, const std::string& what) {
    if (ids > c.padded_vocab_size())
      throw Error("config: model.vocab_size ({}) is smaller than {} ({} tokens)",
                  c.padded_vocab_size(), what, ids);
  };
  if (!c.vocab_file.empty()) check(data::Vocab::load(c.vocab_file).size(), c.vocab_file);
  if (data_vocab > 0) check(data_vocab, "the vocab of the data in " + c.data_dir + c.data_path);
}

}  // namespace

BertRunResult train_bert(const BertTrainConfig& c,
                         const std::vector<std::pair<std::string, std::string>>& resolved,
                         std::ostream& console) {
  if (c.dry_run) {
    console << bert_dry_run(model_config(c), c.seq_length, c.micro_batch_size, c.global_batch_size,
                            1, 1, 1, c.matmul_dtype == "bf16").text;
    return {};
  }
  if (c.threads > 0) omp_set_num_threads(int(c.threads));
  const DType compute_dtype = dtype_from_name(c.matmul_dtype);
  ensure_writable_dir(c.output_dir);
  for (auto& [key, value] : resolved) console << fmt::format("HParam: \"{}\": {}\n", key, value);

  // Data first, so a bad data directory fails before anything is logged as started.
  std::unique_ptr<BertDataSource> data = open_bert_data(c);
  check_vocab(c, data->vocab_size());
  const int seq_len = data->seq_len(), max_pred = data->max_pred();
  if (seq_len > c.max_position)
    throw Error("config: sequences of {} tokens exceed model.max_position_embeddings ({})", seq_len,
                c.max_position);
  const bool megatron_log = c.log_format == "megatron";
  std::optional<log::TensorBoardWriter> tensorboard;
  if (!c.tensorboard_dir.empty()) tensorboard.emplace(c.tensorboard_dir);

  BertRunResult result;
  result.log_file = fs::path(c.output_dir) / fmt::format("result_bert_{}.log", c.seed);
  log::MlLogger mllog(result.log_file, false);
  log::BertRunInfo info;
  info.seed = c.seed;
  info.global_batch_size = c.global_batch_size;
  info.max_sequence_length = seq_len;
  info.max_predictions_per_seq = max_pred;
  info.opt_name = c.optimizer;
  info.opt_base_learning_rate = c.lr;
  info.opt_lamb_weight_decay_rate = c.weight_decay;
  info.opt_lamb_beta_1 = c.beta1;
  info.opt_lamb_beta_2 = c.beta2;
  info.opt_lamb_learning_rate_decay_poly_power = c.poly_power;
  info.opt_lamb_epsilon = c.epsilon;
  info.opt_learning_rate_warmup_steps = c.warmup_steps;
  info.opt_learning_rate_training_steps = c.train_steps;
  info.gradient_accumulation_steps = c.accumulation_steps();
  info.eval_samples = std::max<int64_t>(1, data->eval_samples());
  info.train_samples = c.global_batch_size * c.train_steps;
  info.submission.org = "kiln";
  info.submission.platform = c.submission_platform;
  log::log_bert_init_start(mllog, info);

  ParamStore store;
  const models::BertConfig mc = model_config(c);
  models::BertForPretraining model(mc, store);
  model.init_mlperf(uint64_t(c.seed));
  auto optimizer = make_optimizer(c, store);
  auto schedule = make_schedule(c);
  std::vector<io::FlatState> opt_state;
  for (auto& s : optimizer->state()) opt_state.emplace_back(s.name, s.data);

  int64_t start_step = 0;
  // As Megatron: a --load directory without a checkpoint means "start from scratch".
  std::optional<fs::path> latest;
  if (!c.load_dir.empty()) {
    latest = io::latest_checkpoint(c.load_dir);
    if (!latest)
      console << fmt::format("no checkpoint in {} (no latest_checkpointed_iteration.txt): starting from scratch\n",
                             c.load_dir);
  }
  if (latest) {
    const nlohmann::json meta = io::load_checkpoint(*latest, store, opt_state);
    start_step = meta.at("step").get<int64_t>();
    optimizer->set_steps_taken(meta.at("optimizer_steps").get<int64_t>());
    data->seek(meta.at("samples_consumed").get<uint64_t>());
    console << fmt::format("resumed from {} at step {} ({} samples consumed)\n", latest->string(),
                           start_step, data->position());
  }
  std::optional<io::CheckpointManager> checkpoints;
  if (!c.save_dir.empty()) checkpoints.emplace(c.save_dir, c.keep_checkpoints);

  log::log_run_start(mllog);

  const double flops_per_sample = double(model.flops_per_sample(seq_len, max_pred));
  console << fmt::format(
      "training BERT: {} layers, hidden {}, {} heads, vocab {}, {:.2f}M parameters; global batch {} "
      "(micro {} x {}), sequence {}, {} steps from step {}\n",
      c.num_layers, c.hidden_size, c.num_heads, mc.vocab_size, double(store.size()) / 1e6,
      c.global_batch_size, c.micro_batch_size, c.accumulation_steps(), seq_len, c.train_steps,
      start_step);
  console.flush();

  data::BertBatch batch;
  store.set_compute_dtype(compute_dtype);
  store.refresh_compute();
  int64_t evals_done = 0;
  auto evaluate = [&](int64_t step) {
    Timer timer;
    EvalResult r;
    int64_t correct = 0, nsp_correct = 0, nsp_count = 0, batches = 0;
    double weight_sum = 0, mlm_loss = 0, nsp_loss = 0;
    Step eval_step{uint64_t(c.seed), 0, false};
    eval_step.compute_dtype = compute_dtype;
    data->begin_eval(evals_done++);
    while (batches < c.eval_iters && data->next_eval(batch, int(c.eval_batch_size))) {
      const models::BertOutputs out = model.forward(eval_step, batch);
      correct += out.mlm_correct;
      weight_sum += out.mlm_weight_sum;
      nsp_correct += out.nsp_correct;
      nsp_count += out.nsp_count;
      mlm_loss += out.mlm_loss;
      nsp_loss += out.nsp_loss;
      ++batches;
      r.samples += batch.batch;
    }
    r.mlm_accuracy = weight_sum > 0 ? double(correct) / weight_sum : 0;
    r.mlm_loss = batches ? mlm_loss / double(batches) : 0;
    r.nsp_accuracy = nsp_count ? double(nsp_correct) / double(nsp_count) : 0;
    r.nsp_loss = batches ? nsp_loss / double(batches) : 0;
    const char* second = c.no_binary_head ? nullptr : (c.megatron_data() ? "sop" : "nsp");
    log::NamedLosses losses = {{"lm loss", r.mlm_loss}};
    if (second) losses.emplace_back(fmt::format("{} loss", second), r.nsp_loss);
    if (megatron_log) console << log::megatron_validation_block(fmt::format("iteration {}", step), losses);
    console << fmt::format(
        "eval at step {}: masked-LM accuracy {:.4f}, masked-LM loss {:.4f}, {} accuracy {:.4f}, "
        "{} loss {:.4f} ({} batches, {:.1f} s)\n",
        step, r.mlm_accuracy, r.mlm_loss, second ? second : "nsp", r.nsp_accuracy,
        second ? second : "nsp", r.nsp_loss, batches, timer.seconds());
    console.flush();
    if (tensorboard) {
      log::write_megatron_validation_scalars(*tensorboard, losses, step, data->position(), true);
      tensorboard->add_scalar("lm accuracy validation", r.mlm_accuracy, step);
      if (second) tensorboard->add_scalar(fmt::format("{} accuracy validation", second), r.nsp_accuracy, step);
    }
    return r;
  };

  auto save = [&](int64_t step) {
    nlohmann::json meta;
    meta["step"] = step;
    meta["samples_consumed"] = data->position();
    meta["optimizer_steps"] = optimizer->steps_taken();
    meta["seed"] = c.seed;
    meta["kiln_version"] = KILN_VERSION;
    for (auto& [key, value] : resolved) meta["config"][key] = value;
    mllog.start(log::key::kCheckpointStart, nullptr, {{"step_num", step}});
    result.checkpoint = checkpoints->save(step, store, opt_state, meta);
    mllog.end(log::key::kCheckpointStop, nullptr, {{"step_num", step}});
    console << fmt::format("saved checkpoint {}\n", result.checkpoint.string());
  };

  int64_t last_step = c.benchmark > 0 ? std::min(c.train_steps, start_step + c.benchmark) : c.train_steps;
  if (c.exit_interval > 0) last_step = std::min(last_step, c.exit_interval);
  if (c.eval_at_start && c.benchmark == 0) result.evals.push_back(evaluate(start_step));

  const int64_t accumulation = c.accumulation_steps();
  const double megatron_flops_per_step = megatron_bert_flops(mc, seq_len, c.global_batch_size);
  std::vector<double> step_seconds;
  int64_t block_first_samples = start_step * c.global_batch_size;
  Timer interval_timer;
  double interval_data = 0, interval_compute = 0, interval_loss = 0, interval_mlm = 0, interval_nsp = 0;
  int64_t interval_steps = 0, nan_iterations = 0;
  log::log_bert_block_start(mllog, block_first_samples, c.eval_interval * c.global_batch_size);
  for (int64_t step = start_step; step < last_step; ++step) {
    Timer step_timer;
    double data_seconds = 0;
    store.zero_grad();
    double loss = 0, mlm_loss = 0, nsp_loss = 0;
    for (int64_t micro = 0; micro < accumulation; ++micro) {
      Timer data_timer;
      data->next_train(batch, int(c.micro_batch_size));
      data_seconds += data_timer.seconds();
      Step s{uint64_t(c.seed), uint64_t(step * accumulation + micro), true};
      // Dropout masks are keyed by the global sample index.
      s.sample_offset = uint64_t(step * c.global_batch_size + micro * c.micro_batch_size);
      s.compute_dtype = compute_dtype;
      const models::BertOutputs out = model.forward(s, batch);
      model.backward(s, 1.0f / float(accumulation));
      loss += out.loss / double(accumulation);
      mlm_loss += out.mlm_loss / double(accumulation);
      nsp_loss += out.nsp_loss / double(accumulation);
    }
    if (!std::isfinite(loss))
      throw Error("step {}: loss is {} (diverged); lower optim.lr or check the data", step + 1, loss);
    const double grad_norm = c.clip_grad > 0 ? optim::clip_grad_norm(store, c.clip_grad)
                                             : optim::global_grad_norm(store);
    if (!std::isfinite(grad_norm)) ++nan_iterations;
    const double lr = schedule->lr(step);
    optimizer->step(float(lr));
    store.refresh_compute();
    const double seconds = step_timer.seconds();
    step_seconds.push_back(seconds);
    result.losses.push_back(loss);
    result.steps = step + 1;
    interval_data += data_seconds;
    interval_compute += seconds - data_seconds;
    interval_loss += loss;
    interval_mlm += mlm_loss;
    interval_nsp += nsp_loss;
    ++interval_steps;

    const int64_t done = step + 1;
    log::MegatronTrainLog mlog;
    mlog.iteration = done;
    mlog.train_iters = c.train_steps;
    mlog.consumed_samples = done * c.global_batch_size;
    mlog.learning_rate = lr;
    mlog.global_batch_size = c.global_batch_size;
    mlog.grad_norm = grad_norm;
    mlog.nan_iterations = nan_iterations;
    const char* second = c.no_binary_head ? nullptr : (c.megatron_data() ? "sop loss" : "nsp loss");
    auto losses = [&](double lm, double other) {
      log::NamedLosses l = {{"lm loss", lm}};
      if (second) l.emplace_back(second, other);
      return l;
    };
    if (tensorboard) {
      mlog.losses = losses(mlm_loss, nsp_loss);
      log::write_megatron_train_scalars(*tensorboard, mlog);
    }
    if (done % c.log_interval == 0 || done == last_step) {
      const double elapsed = interval_timer.seconds();
      const double n = double(interval_steps);
      const double samples = n * double(c.global_batch_size);
      if (megatron_log) {
        mlog.losses = losses(interval_mlm / n, interval_nsp / n);
        mlog.elapsed_ms_per_iteration = 1e3 * elapsed / n;
        mlog.tflops_per_device = megatron_flops_per_step * n / elapsed / 1e12;
        console << log::megatron_train_line(mlog) << "\n";
      } else {
        console << fmt::format(
            "step {:>6}/{} | loss {:.4f} (mlm {:.4f}, {} {:.4f}) | lr {:.3e} | grad norm {:.3f} | "
            "data {:.1f} ms, compute {:.1f} ms | {:.1f} samples/s | {:.1f} GFLOP/s | {:.2f} GiB\n",
            done, c.train_steps, interval_loss / n, interval_mlm / n, second ? "nsp" : "-",
            interval_nsp / n, lr, grad_norm, 1e3 * interval_data / n, 1e3 * interval_compute / n,
            samples / elapsed, flops_per_sample * samples / interval_compute / 1e9, resident_gib());
      }
      console.flush();
      interval_timer.reset();
      interval_data = interval_compute = interval_loss = interval_mlm = interval_nsp = 0;
      interval_steps = 0;
    }

    const bool eval_now =
        c.benchmark == 0 && (done % c.eval_interval == 0 || done == c.train_steps);
    if (eval_now) {
      const int64_t samples_seen = done * c.global_batch_size;
      log::log_bert_eval_start(mllog, samples_seen);
      const EvalResult r = evaluate(done);
      result.evals.push_back(r);
      log::log_bert_eval_stop(mllog, samples_seen, r.mlm_accuracy);
      log::log_bert_block_stop(mllog, block_first_samples);
      if (r.mlm_accuracy >= c.target) {
        result.reached_target = true;
        console << fmt::format("target masked-LM accuracy {} reached at step {} ({} samples)\n",
                               c.target, done, samples_seen);
        log::log_run_stop(mllog, true);
        if (checkpoints) save(done);
        break;
      }
      if (done < last_step) {
        block_first_samples = samples_seen;
        log::log_bert_block_start(mllog, samples_seen, c.eval_interval * c.global_batch_size);
      }
    }
    if (checkpoints && (done % c.save_interval == 0 || done == last_step)) save(done);
  }

  if (c.benchmark > 0 && !step_seconds.empty()) {
    console << estimated_training_time(step_seconds, c.train_steps);
    result.evals.push_back(evaluate(result.steps));
  }
  if (!result.reached_target && c.benchmark == 0 && result.steps == c.train_steps)
    log::log_run_stop(mllog, false);
  if (tensorboard) tensorboard->flush();
  return result;
}

}  // namespace kiln::train
