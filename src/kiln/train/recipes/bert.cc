// train/recipes/bert.cc — what is specific to BERT: the model and optimizer from the config, the
// data source (MLPerf shards or Megatron .bin/.idx), the MLPerf BERT run info, evaluation
// (masked-LM and NSP/SOP accuracy), the console's loss fields. The loop does the rest.
#include "kiln/train/recipes/bert.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <sstream>

#include "kiln/core/cpu_features.h"
#include "kiln/core/error.h"
#include "kiln/core/file_util.h"
#include "kiln/core/timer.h"
#include "kiln/data/text/vocab.h"
#include "kiln/dist/world.h"
#include "kiln/io/tf_bert_checkpoint.h"
#include "kiln/log/bert_mllog.h"
#include "kiln/log/megatron_log.h"
#include "kiln/models/bert.h"
#include "kiln/optim/adamw.h"
#include "kiln/optim/lamb.h"
#include "kiln/optim/lr_schedule.h"
#include "kiln/train/bert_data.h"
#include "kiln/train/data_parallel.h"
#include "kiln/train/dry_run/dry_run.h"
#include "kiln/train/dry_run/perf_model.h"
#include "kiln/train/loop.h"
#include "kiln/train/phase_log.h"
#include "kiln/train/recipes/bert_pipeline.h"
#include "kiln/train/resume.h"
#include "kiln/train/run_setup.h"
#include "kiln/train/test_hooks.h"

namespace kiln::train {
namespace fs = std::filesystem;

models::BertConfig bert_model_config(const BertTrainConfig& c) {
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
  m.recompute_attention = c.recompute_activations;
  if (c.recompute_method == "uniform") m.recompute = models::BertConfig::Recompute::uniform;
  if (c.recompute_method == "block") m.recompute = models::BertConfig::Recompute::block;
  m.recompute_layers = c.recompute_num_layers;
  m.sequence_parallel = c.sequence_parallel;
  if (c.attention_backend == "local" || c.attention_backend == "unfused") m.attention_core = nn::AttentionCore::unfused;
  if (c.attention_backend == "fused" || c.attention_backend == "flash") m.attention_core = nn::AttentionCore::fused;
  return m;
}

// What a resumed run must share with its checkpoint (train/resume.h).
RunSettings bert_run_settings(const BertTrainConfig& c, int seq_len) {
  using Waiver = RunSetting::Waiver;
  return {{"recipe", "bert"},
          {"model.vocab_size", c.padded_vocab_size()},
          {"model.hidden_size", c.hidden_size},
          {"model.num_layers", c.num_layers},
          {"model.num_attention_heads", c.num_heads},
          {"model.intermediate_size", c.intermediate_size},
          {"model.max_position_embeddings", c.max_position},
          {"model.type_vocab_size", c.type_vocab},
          {"model.pre_ln", c.pre_ln},
          {"model.bert_no_binary_head", c.no_binary_head},
          {"data.seq_length", seq_len, Waiver::finetune},
          {"train.global_batch_size", c.global_batch_size, Waiver::finetune},
          {"train.seed", c.seed, Waiver::no_load_rng},
          {"optim.optimizer", c.optimizer, Waiver::no_load_optim}};
}

namespace {

// The start line's attention: which core --attention-backend gives.
// The attention core the run's layers take on its device (nn/attention_core.h).
nn::AttentionCore run_attention_core(const BertTrainConfig& c) {
  const models::BertConfig m = bert_model_config(c);
  return nn::chosen_core(m.attention_core, c.precision.run_device.kind == DeviceKind::cuda, c.precision.dtype,
                         m.hidden / m.heads);
}

std::string attention_summary(const BertTrainConfig& c) {
  const std::string core = run_attention_core(c) == nn::AttentionCore::fused ? "fused (no S x S in memory)"
                                                                                : "unfused (scores in memory)";
  return c.attention_backend == "auto" ? core + ", auto's choice here" : core;
}

// What backward recomputes, for the start line.
std::string recompute_summary(const BertTrainConfig& c) {
  if (c.recompute_activations) return ", core recomputed in backward";
  if (c.recompute_method == "uniform")
    return fmt::format(", layers recomputed in backward (full, uniform: groups of {})", c.recompute_num_layers);
  if (c.recompute_method == "block")
    return fmt::format(", layers recomputed in backward (full, block: the first {} of each {})",
                       c.recompute_num_layers, c.virtual_stages() > 1 ? "model chunk" : "stage");
  return "";
}

// The tensor-parallel layout's part of the start line.
std::string layout_summary(const BertTrainConfig& c) {
  if (c.tensor_parallel == 1 && c.pipeline_parallel == 1) return "";
  return fmt::format("; TP {} x PP {}{}{}", c.tensor_parallel, c.pipeline_parallel,
                     c.virtual_stages() > 1 ? fmt::format(" interleaved, {} chunks per stage", c.virtual_stages()) : "",
                     c.sequence_parallel ? ", sequence parallel" : "");
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

std::unique_ptr<optim::Optimizer> make_optimizer(const BertTrainConfig& c, ParamStore& store, Context& ctx,
                                                 optim::ShardRange shard) {
  if (c.optimizer == "adamw")
    return std::make_unique<optim::AdamW>(
        store, optim::AdamWConfig{float(c.beta1), float(c.beta2), float(c.epsilon),
                                  float(c.weight_decay)}, ctx, shard);
  return std::make_unique<optim::Lamb>(
      store, optim::LambConfig{float(c.beta1), float(c.beta2), float(c.epsilon),
                               float(c.weight_decay), true}, ctx, shard);
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

// --init-checkpoint: the TF weights replace the initial ones. A checkpoint found in --load wins
// (the loop loads it), so an interrupted run restarts with the same command line.
void load_init_checkpoint(const BertTrainConfig& c, ParamStore& store, const ResumePoint& resume,
                          std::ostream& console) {
  if (c.init_checkpoint.empty()) return;
  if (resume.checkpoint) {
    console << fmt::format("--init-checkpoint {} not read: the weights come from {}\n", c.init_checkpoint,
                           resume.checkpoint->dir().string());
    return;
  }
  const io::TfImportSummary s =
      io::load_tf_bert_checkpoint(c.init_checkpoint, store, c.vocab_size, c.resume.allow_non_finite);
  console << fmt::format("initialised {} parameters from TensorFlow checkpoint {} ({} optimizer variables skipped)\n",
                         s.loaded, s.prefix.string(), s.skipped);
}

// The MLPerf run phase starts from the reference's checkpoint, as the reference and tinygrad do,
// unless a checkpoint of this run resumes it or the user asks for random weights.
void check_run_phase_weights(const BertTrainConfig& c, const ResumePoint& resume) {
  if (c.mlperf.phase != MlperfPhase::run || c.fake_data || resume.checkpoint) return;
  if (!c.init_checkpoint.empty() || c.init_random) return;
  throw Error("the MLPerf run phase starts from the MLPerf checkpoint model.ckpt-28252: set --init-checkpoint DIR "
              "or INIT_CKPT_DIR (scripts/download_bert_data.sh fetches it), or --init-random for random weights");
}

// LAMB's trust ratios use the norms of whole parameters: a sharded optimizer's partial sums add
// over its data-parallel shards; under tensor parallelism a split parameter's partial sums add
// across the group and a replicated one's count once (tp rank 0's: the other ranks zero theirs,
// runs of consecutive replicated parameters at a time, on the norms' device).
std::function<void(Tensor&)> whole_tensor_norms(Context& ctx, const ParamStore& store, dist::Communicator& tp,
                                                DataParallel* shards) {
  std::vector<std::pair<int64_t, int64_t>> replicated;  // rows [begin, end) of the (params, 2) norms
  for (int64_t i = 0; i < int64_t(store.specs().size()); ++i) {
    if (store.specs()[size_t(i)].part_dim >= 0) continue;
    if (!replicated.empty() && replicated.back().second == i) ++replicated.back().second;
    else replicated.emplace_back(i, i + 1);
  }
  return [&ctx, &tp, shards, replicated](Tensor& norms) {
    if (shards) shards->sum_norms(norms);
    if (tp.size() == 1) return;
    Tensor sums = Tensor::view(norms.data, norms.shape, DType::f64, norms.device);
    if (tp.rank() > 0)
      for (const auto& [begin, end] : replicated) {
        Tensor rows = sums.slice_rows(begin, end);
        ops::fill(ctx, rows, 0.0f);
      }
    tp.all_reduce_sum(sums);
  };
}

class BertRecipe : public Recipe {
 public:
  // Either `model` (one process or data parallel) or `pipeline` (this rank's pipeline stage).
  BertRecipe(const BertTrainConfig& c, BertDataSource& data, models::BertForPretraining* model,
             BertPipeline* pipeline, std::vector<EvalResult>& evals, int seq_len, int max_pred,
             int64_t parameters, const dist::ParallelGroups& groups, Context& ctx)
      : c_(c), ctx_(ctx), data_(data), model_(model), pipeline_(pipeline), evals_(evals), seq_len_(seq_len),
        max_pred_(max_pred), parameters_(parameters), comm_(*groups.dp), pp_(*groups.pp),
        second_(c.no_binary_head ? nullptr : (c.megatron_data() ? "sop" : "nsp")) {}

  std::vector<std::string> loss_names() const override {
    std::vector<std::string> names = {"lm loss"};
    if (second_) names.push_back(fmt::format("{} loss", second_));
    return names;
  }

  // The samples of the micro-batch's slot in the global order (train/data_parallel.h): with
  // several ranks each reads only its own slots.
  void load(const Step& step) override {
    data_.seek(step.sample_offset);
    data_.next_train(batch_, int(c_.micro_batch_size));
  }

  void forward_backward(const Step& step, int64_t micro, float grad_scale) override {
    model_->forward_backward(step, batch_, grad_scale);
    model_->keep_losses(micro_batch_slot(loss_slots_, micro, ctx_, models::BertForPretraining::kLossTotals));
  }

  MicroBatchLosses read_losses(int64_t micro) override {
    const models::BertOutputs out = model_->read_losses(loss_slots_.at(size_t(micro)));
    MicroBatchLosses r;
    r.loss = out.loss;
    r.parts = {out.mlm_loss};
    if (second_) r.parts.push_back(out.nsp_loss);
    nsp_loss_ = out.nsp_loss;
    return r;
  }

  PipelineStage* pipeline() override { return pipeline_; }

  // Sharded: rank r evaluates batches r, r + ranks, ...; the sums are then added across ranks
  // (weighted sums, not means of means), so every rank gets the single-process metrics. In a
  // pipeline every stage runs each batch and the last one counts it.
  double evaluate(int64_t step, int64_t, Sinks& sinks) override {
    std::ostream& console = sinks.console();
    Timer timer;
    EvalResult r;
    // correct, weight sum, nsp correct, nsp count, mlm loss, nsp loss, batches, samples
    std::vector<double> sums(8, 0.0);
    Step eval_step;
    eval_step.ctx = &ctx_;
    eval_step.seed = uint64_t(c_.seed);
    eval_step.training = false;
    eval_step.compute_dtype = c_.precision.dtype;
    data_.begin_eval(evals_done_++);
    for (int64_t b = 0; b < c_.eval_iters && data_.next_eval(batch_, int(c_.eval_batch_size)); ++b) {
      if (b % comm_.size() != comm_.rank()) continue;
      const models::BertOutputs out =
          pipeline_ ? pipeline_->evaluate(eval_step, batch_) : model_->forward(eval_step, batch_);
      if (pipeline_ && !pipeline_->last()) continue;
      sums[0] += double(out.mlm_correct);
      sums[1] += out.mlm_weight_sum;
      sums[2] += double(out.nsp_correct);
      sums[3] += double(out.nsp_count);
      sums[4] += out.mlm_loss;
      sums[5] += out.nsp_loss;
      sums[6] += 1;
      sums[7] += double(batch_.batch);
    }
    if (pipeline_) dist::all_reduce_sum(pp_, sums);  // only the last stage counted
    dist::all_reduce_sum(comm_, sums);
    const double correct = sums[0], weight_sum = sums[1], nsp_correct = sums[2], nsp_count = sums[3];
    const double mlm_loss = sums[4], nsp_loss = sums[5];
    const int64_t batches = int64_t(sums[6]);
    r.samples = int64_t(sums[7]);
    r.mlm_accuracy = weight_sum > 0 ? correct / weight_sum : 0;
    r.mlm_loss = batches ? mlm_loss / double(batches) : 0;
    r.nsp_accuracy = nsp_count > 0 ? nsp_correct / nsp_count : 0;
    r.nsp_loss = batches ? nsp_loss / double(batches) : 0;
    log::NamedLosses losses = {{"lm loss", r.mlm_loss}};
    if (second_) losses.emplace_back(fmt::format("{} loss", second_), r.nsp_loss);
    if (c_.log_format == "megatron")
      console << log::megatron_validation_block(fmt::format("iteration {}", step), losses);
    console << fmt::format(
        "eval at step {}: masked-LM accuracy {:.4f}, masked-LM loss {:.4f}, {} accuracy {:.4f}, "
        "{} loss {:.4f} ({} batches, {:.1f} s)\n",
        step, r.mlm_accuracy, r.mlm_loss, second_ ? second_ : "nsp", r.nsp_accuracy,
        second_ ? second_ : "nsp", r.nsp_loss, batches, timer.seconds());
    console.flush();
    if (log::TensorBoardWriter* tb = sinks.tensorboard()) {
      log::write_megatron_validation_scalars(*tb, losses, step, step * c_.global_batch_size, true);
      tb->add_scalar("lm accuracy validation", r.mlm_accuracy, step);
      if (second_) tb->add_scalar(fmt::format("{} accuracy validation", second_), r.nsp_accuracy, step);
    }
    evals_.push_back(r);
    return r.mlm_accuracy;
  }

  std::string loss_text(const IntervalLosses& i) const override {
    if (i.steps == 0) return "loss -";
    const double n = double(i.steps);
    return fmt::format("loss {:.4f} (mlm {:.4f}, {} {:.4f})", i.loss / n, i.parts[0] / n,
                       second_ ? "nsp" : "-", second_ ? i.parts[1] / n : nsp_loss_);
  }
  std::string metric_name() const override { return "masked-LM accuracy"; }
  double flops_per_sample() const override {
    return double(models::bert_flops_per_sample(bert_model_config(c_), seq_len_, max_pred_));
  }

  void resume(const io::CheckpointMeta& meta, int64_t step, Sinks& sinks) override {
    const int64_t consumed = meta.integer("samples_consumed");
    evals_done_ = meta.integer("evaluations");  // Megatron's validation samples follow it
    sinks.console() << fmt::format("resumed from {} at step {} ({} samples consumed)\n", meta.dir().string(), step,
                                   consumed);
  }
  void add_meta(nlohmann::json& meta) const override {
    meta["samples_consumed"] = meta.at("step").get<int64_t>() * c_.global_batch_size;
    meta["evaluations"] = evals_done_;
  }

  std::string start_line(int64_t start_step) const override {
    const models::BertConfig mc = bert_model_config(c_);
    return fmt::format(
        "training BERT: {} layers, hidden {}, {} heads, vocab {}, {:.2f}M parameters; global batch {} "
        "(micro {} x {}{}), sequence {}{}, {} steps from step {}\n",
        c_.num_layers, c_.hidden_size, c_.num_heads, mc.vocab_size,
        double(parameters_) / 1e6, c_.global_batch_size, c_.micro_batch_size, c_.accumulation_steps(),
        c_.data_parallel() > 1 ? fmt::format(" x {} data-parallel", c_.data_parallel()) : "", seq_len_,
        layout_summary(c_), c_.train_steps, start_step) +
           fmt::format("  data {}; {} lr {} ({} decay, {} warmup steps); attention {}{}; logs in {}, checkpoints {}\n",
                       c_.fake_data ? std::string("generated (fake)")
                                    : c_.megatron_data() ? "Megatron " + c_.data_path : c_.data_dir,
                       c_.optimizer, c_.lr, c_.lr_decay_style, c_.warmup_steps, attention_summary(c_),
                       recompute_summary(c_), c_.output_dir,
                       c_.save_dir.empty() ? std::string("not saved") : c_.save_dir);
  }

 private:
  const BertTrainConfig& c_;
  Context& ctx_;
  BertDataSource& data_;
  models::BertForPretraining* model_;
  BertPipeline* pipeline_;
  std::vector<EvalResult>& evals_;
  int seq_len_, max_pred_;
  int64_t parameters_;
  dist::Communicator& comm_;
  dist::Communicator& pp_;
  const char* second_;
  data::BertBatch batch_;
  int64_t evals_done_ = 0;
  double nsp_loss_ = 0;
  std::vector<Tensor> loss_slots_;  // per micro-batch of a step: BertForPretraining::keep_losses
};

// What the performance model (train/dry_run/perf_model.h) needs of the run.
BertPerfRun bert_perf_run(const BertTrainConfig& c) {
  return {.model = bert_model_config(c), .seq_length = c.seq_length, .micro_batch = c.micro_batch_size,
          .global_batch = c.global_batch_size, .max_predictions = c.max_predictions, .tp = int(c.tensor_parallel),
          .pp = int(c.pipeline_parallel), .chunks = int(c.virtual_stages()), .dp = int(c.data_parallel()),
          .compute = c.precision.dtype,
          .lamb = c.optimizer == "lamb", .loss_scaling = optim::LossScaler(c.precision.scaler).enabled(),
          .distributed_optimizer = c.distributed_optimizer};
}

}  // namespace

BertRunResult train_bert(const BertTrainConfig& c, const ResolvedConfig& resolved, std::ostream& console) {
  if (c.dry_run) {
    if (!c.is_rank0) return {};
    if (c.dry_run_json) {
      const DeviceModel& device = device_model(c.device_model);
      console << format_step_json(bert_step_model(bert_perf_run(c), device), device);
      return {};
    }
    models::BertConfig model = bert_model_config(c);
    model.attention_core = run_attention_core(c);  // the memory of the core this device takes
    console << bert_dry_run(model, c.seq_length, c.micro_batch_size, c.global_batch_size,
                            int(c.tensor_parallel), int(c.pipeline_parallel), int(c.data_parallel()),
                            c.precision.dtype, c.max_predictions, c.distributed_optimizer,
                            c.precision.splits_master(), int(c.virtual_stages())).text;
    console << "  " << precision_note(c.precision.dtype, cpu_features()) << "; loss scaling "
            << optim::LossScaler(c.precision.scaler).describe() << "\n";
    if (!c.device_model.empty()) {
      const DeviceModel& device = device_model(c.device_model);
      console << format_step_table(bert_step_model(bert_perf_run(c), device), device);
    }
    return {};
  }
  RunSpec spec = run_spec(c);
  spec.tensorboard_dir = c.tensorboard_dir;
  spec.layout = true;
  spec.tensor_parallel = int(c.tensor_parallel);
  spec.pipeline_parallel = int(c.pipeline_parallel);
  spec.global_batch = c.global_batch_size;
  spec.micro_batch = c.micro_batch_size;
  RunSetup setup(spec, console);
  const dist::ParallelGroups& groups = *setup.groups();
  BertRunResult result;

  // Data first, so a bad data directory fails before anything is logged as started.
  std::unique_ptr<BertDataSource> data = open_bert_data(c);
  check_vocab(c, data->vocab_size());
  const int seq_len = data->seq_len(), max_pred = data->max_pred();
  if (seq_len > c.max_position)
    throw Error("config: sequences of {} tokens exceed model.max_position_embeddings ({})", seq_len,
                c.max_position);

  // Where the weights come from, before anything is written.
  setup.open(bert_run_settings(c, seq_len), resolved,
             [&](const ResumePoint& resume) { check_run_phase_weights(c, resume); });
  if (c.matmul_dtype == "bf16")
    setup.console() << "note: --matmul-dtype bf16 is deprecated; it now means --bf16 (bf16 activations and weights)\n";
  PhaseLog& mllog = setup.open_mllog(fmt::format("result_bert_{}.log", c.seed));
  result.log_file = mllog.path();
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
  info.submission.org = c.submission_org;
  info.submission.platform = c.submission_platform;
  mllog.log_preamble([&](log::MlLogger& ml) { log::log_bert_submission(ml, info); },
                     [&](log::MlLogger& ml) { log::log_bert_hyperparameters(ml, info); });

  ParamStore& store = setup.make_store();
  DataParallel& data_parallel = setup.data_parallel();
  const models::BertConfig model_config = bert_model_config(c);
  std::optional<models::BertForPretraining> model;
  std::optional<BertPipeline> pipeline;
  if (c.pipeline_parallel > 1)
    pipeline.emplace(model_config, groups, *data, c.micro_batch_size, c.accumulation_steps(), int(c.virtual_stages()),
                     !c.no_binary_head, store);
  else
    model.emplace(model_config, store, cpu_context(), nn::TensorParallel::over(*groups.tp));  // moved below
  models::init_bert_weights(store, uint64_t(c.seed), model_config.init_std);
  if (!setup.zero_init_phase_weights()) load_init_checkpoint(c, store, setup.resume(), setup.console());
  setup.to_device([&](Context& ctx) { store.to_device(ctx); });
  Context& ctx = setup.run().ctx;
  if (model && data_parallel.micro_batches_per_rank() == 1) model->lend_gradients();  // nn/grad_loan.h
  auto optimizer = make_optimizer(c, store, ctx, setup.optimizer_shard());
  if (groups.tp->size() > 1 || data_parallel.sharded())
    optimizer->set_norm_reduction(
        whole_tensor_norms(ctx, store, *groups.tp, data_parallel.sharded() ? &data_parallel : nullptr));
  auto schedule = make_schedule(c);

  LoopConfig loop = shared_loop_config(c);
  loop.total_steps = c.train_steps;
  loop.clip_grad = c.clip_grad;
  loop.cadence.kind = Cadence::Kind::blocks;
  loop.cadence.eval_interval = c.eval_interval;
  loop.cadence.save_interval = c.save_interval;
  loop.cadence.eval_at_start = c.eval_at_start;
  loop.megatron_log = c.log_format == "megatron";

  BertRecipe recipe(c, *data, model ? &*model : nullptr, pipeline ? &*pipeline : nullptr, result.evals, seq_len,
                    max_pred, model ? store.size() : models::BertForPretraining::param_count(model_config), groups,
                    ctx);
  const LoopResult r = setup.train(loop, recipe, *optimizer, *schedule);
  write_params_for_test(store, setup.world().rank(), groups.tp->rank(), groups.tp->size());
  result.steps = r.steps;
  result.losses = r.losses;
  result.reached_target = r.reached_target;
  result.checkpoint = r.checkpoint;
  result.skipped_steps = r.skipped_steps;
  result.loss_scale = r.loss_scale;
  return result;
}

}  // namespace kiln::train
