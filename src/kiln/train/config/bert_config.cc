#include "kiln/train/config/bert_config.h"

#include <cmath>

#include "kiln/core/error.h"
#include "kiln/core/notice.h"
#include "kiln/train/config/devices_config.h"
#include "kiln/train/config/shared_flags.h"
#include "kiln/train/dry_run/device_model.h"

namespace kiln::train {

namespace {

void positive(int64_t v, const char* key) {
  if (v <= 0) throw Error("config: {} must be positive, got {}", key, v);
}

// tinygrad's defaults (examples/mlperf/model_train.py), GPUS being the data-parallel devices:
// BS = 11 x GPUS in bf16 / f16, else 8 x GPUS; each rank runs BS / GPUS; TRAIN_STEPS =
// 3,600,000 // BS.
void derive_batches(BertTrainConfig& c) {
  c.devices = resolve_devices(c.devices, c.dry_run);
  const int64_t dp = data_parallel_devices(c.devices, c.tensor_parallel, c.pipeline_parallel);
  if (c.global_batch_size == 0) c.global_batch_size = (c.precision.dtype == DType::f32 ? 8 : 11) * dp;
  positive(c.global_batch_size, "train.global_batch_size");
  if (c.micro_batch_size == 0 && c.global_batch_size % dp != 0)
    throw Error("config: train.global_batch_size ({}) does not split over {} data-parallel devices",
                c.global_batch_size, dp);
  if (c.micro_batch_size == 0) c.micro_batch_size = c.global_batch_size / dp;
  positive(c.micro_batch_size, "train.micro_batch_size");
  if (c.global_batch_size % (c.micro_batch_size * dp) != 0)
    throw Error("config: train.global_batch_size ({}) is not a multiple of train.micro_batch_size ({}) x {} "
                "data-parallel device{}", c.global_batch_size, c.micro_batch_size, dp, dp == 1 ? "" : "s");
  if (c.train_steps == 0) c.train_steps = std::max<int64_t>(1, 3600000 / c.global_batch_size);
  positive(c.train_steps, "train.train_steps");
}

// tinygrad's: EVAL_BS = 1 x GPUS; EVAL_STEP_FREQ = int(floor(0.05 x (230.23 x BS + 3e6) / 25000)
// x 25000 / BS), rounded down; MAX_EVAL_STEPS = ceil(10000 / EVAL_BS) (eval.samples 10,000).
// Megatron's data (--data-path) evaluates --eval-iters batches of the global batch, as Megatron does.
void derive_eval_schedule(BertTrainConfig& c) {
  if (c.eval_batch_size == 0) c.eval_batch_size = c.megatron_data() ? c.global_batch_size : c.data_parallel();
  positive(c.eval_batch_size, "eval.batch_size");
  positive(c.eval_samples, "eval.samples");
  if (c.eval_interval == 0) {
    const double samples =
        std::floor(0.05 * (230.23 * double(c.global_batch_size) + 3e6) / 25000.0) * 25000.0;
    c.eval_interval = std::max<int64_t>(1, int64_t(samples / double(c.global_batch_size)));
  }
  positive(c.eval_interval, "eval.interval");
  if (c.eval_iters == 0) c.eval_iters = (c.eval_samples + c.eval_batch_size - 1) / c.eval_batch_size;
}

// Megatron's recomputation flags: selective is --recompute-activations; full needs a method and a
// layer count within a pipeline stage.
void check_recompute(BertTrainConfig& c) {
  const std::string& g = c.recompute_granularity;
  if (g == "selective") c.recompute_activations = true;
  if (!g.empty() && g != "selective" && g != "full")
    throw Error("config: --recompute-granularity must be selective or full, got '{}'", g);
  if (g != "full") {
    if (!c.recompute_method.empty())
      throw Error("config: --recompute-method {} needs --recompute-granularity full", c.recompute_method);
    return;
  }
  if (c.recompute_activations)
    throw Error("config: --recompute-activations is selective recomputation; --recompute-granularity full "
                "recomputes whole layers: choose one");
  if (c.recompute_method != "uniform" && c.recompute_method != "block")
    throw Error("config: --recompute-granularity full needs --recompute-method uniform or block, got '{}'",
                c.recompute_method);
  const int64_t stage_layers = c.num_layers / (c.pipeline_parallel * c.virtual_stages());
  if (c.recompute_num_layers < 1 || c.recompute_num_layers > stage_layers)
    throw Error("config: --recompute-num-layers must be between 1 and the {} layers of a {}, got {}", stage_layers,
                c.virtual_stages() > 1 ? "model chunk" : "pipeline stage", c.recompute_num_layers);
}

// Megatron's interleaved schedule: V = layers of a stage / layers per virtual stage model chunks.
void check_model_chunks(const BertTrainConfig& c) {
  const int64_t n = c.layers_per_virtual_stage, p = c.pipeline_parallel;
  if (n == 0) return;
  if (n < 0) throw Error("config: --num-layers-per-virtual-pipeline-stage must be positive, got {}", n);
  if (p == 1) throw Error("config: --num-layers-per-virtual-pipeline-stage needs --pipeline-model-parallel-size > 1");
  if (c.num_layers % p != 0 || (c.num_layers / p) % n != 0)
    throw Error("config: --num-layers-per-virtual-pipeline-stage {}: the {} layers over {} pipeline stages do not "
                "split into model chunks of that many", n, c.num_layers, p);
}

// ... whose micro-batches come in groups of the pipeline's size.
void check_interleaved_micro_batches(const BertTrainConfig& c) {
  if (c.virtual_stages() > 1 && c.accumulation_steps() % c.pipeline_parallel != 0)
    throw Error("config: the interleaved pipeline schedule needs the micro-batches of a step per pipeline ({}) to "
                "be a multiple of --pipeline-model-parallel-size ({})", c.accumulation_steps(), c.pipeline_parallel);
}

// Tensor parallelism (Megatron's layout): what it needs of the model.
void check_tensor_parallel(const BertTrainConfig& c) {
  const int64_t tp = c.tensor_parallel;
  const auto refuse = [&](const char* key, int64_t v) {
    if (v % tp != 0) throw Error("--tensor-model-parallel-size {}: {} {} is not divisible by it", tp, key, v);
  };
  refuse("model.num_attention_heads", c.num_heads);
  refuse("model.intermediate_size", c.intermediate_size);
}

}  // namespace

void register_bert_config(ConfigRegistry& r, BertTrainConfig& c) {
  r.add_int("model.vocab_size", &c.vocab_size, "", {"--vocab-size"}, "vocabulary size");
  r.add_int("model.hidden_size", &c.hidden_size, "", {"--hidden-size"}, "hidden size");
  r.add_int("model.num_layers", &c.num_layers, "BERT_LAYERS", {"--num-layers"}, "encoder layers");
  r.add_int("model.num_attention_heads", &c.num_heads, "", {"--num-attention-heads"},
            "attention heads");
  r.add_int("model.intermediate_size", &c.intermediate_size, "", {"--ffn-hidden-size"},
            "MLP inner size");
  r.add_int("model.max_position_embeddings", &c.max_position, "", {"--max-position-embeddings"},
            "position table size");
  r.add_int("model.type_vocab_size", &c.type_vocab, "", {}, "segment types");
  r.add_float("model.hidden_dropout", &c.hidden_dropout, "", {"--hidden-dropout"},
              "dropout after embeddings and sublayers");
  r.add_float("model.attention_dropout", &c.attention_dropout, "", {"--attention-dropout"},
              "dropout on attention probabilities");
  r.add_bool("model.pre_ln", &c.pre_ln, "", {"--pre-ln"}, "pre-LayerNorm layers (Megatron)");
  r.add_bool("model.disable_dropout", &c.disable_dropout, "DISABLE_DROPOUT", {"--disable-dropout"},
             "set both dropouts to 0");

  r.add_bool("model.bert_no_binary_head", &c.no_binary_head, "", {"--bert-no-binary-head"},
             "no pooler and NSP/SOP head");
  r.add_int("model.make_vocab_size_divisible_by", &c.make_vocab_size_divisible_by, "",
            {"--make-vocab-size-divisible-by"}, "pad the vocab to a multiple of this");
  r.add_float("model.layer_norm_eps", &c.layer_norm_eps, "", {"--norm-epsilon"}, "LayerNorm epsilon");
  r.add_bool("model.recompute_activations", &c.recompute_activations, "", {"--recompute-activations"},
             "recompute the attention core (scores, softmax, dropout) in backward instead of keeping it "
             "per layer (Megatron's selective recomputation)");
  r.add_string("model.recompute_granularity", &c.recompute_granularity, "", {"--recompute-granularity"},
               "selective (the attention core, as --recompute-activations) or full (whole layers, "
               "--recompute-method)");
  r.add_string("model.recompute_method", &c.recompute_method, "", {"--recompute-method"},
               "full recomputation: uniform (every group of --recompute-num-layers layers) or block (the "
               "first --recompute-num-layers layers of each pipeline stage)");
  r.add_int("model.recompute_num_layers", &c.recompute_num_layers, "", {"--recompute-num-layers"},
            "full recomputation: layers per group (uniform) or recomputed layers per stage (block)");
  r.add_string("model.attention_backend", &c.attention_backend, "", {"--attention-backend"},
               "auto, local, unfused, fused or flash");

  r.add_string("data.dir", &c.data_dir, "BASEDIR", {"--data", "--data-dir"},
               "prepared data (kiln prepare bert)");
  r.add_string("data.data_path", &c.data_path, "", {}, "Megatron .bin/.idx prefixes (--data-path)");
  r.add_string("data.split", &c.split, "", {"--split"}, "train,valid,test document split (Megatron)");
  r.add_float("data.masked_lm_prob", &c.masked_lm_prob, "", {"--mask-prob"},
              "fraction of tokens masked (Megatron path)");
  r.add_float("data.short_seq_prob", &c.short_seq_prob, "", {"--short-seq-prob"},
              "probability of a shorter target length (Megatron path)");
  r.add_string("data.vocab_file", &c.vocab_file, "", {"--vocab", "--vocab-file"},
               "vocab.txt (checked against the model; needed with --data-path)");
  r.add_bool("data.fake", &c.fake_data, "", {"--fake-data"}, "generated batches");
  r.add_int("data.seq_length", &c.seq_length, "", {"--seq-length"}, "sequence length");
  r.add_int("data.max_predictions", &c.max_predictions, "", {"--max-predictions"},
            "masked positions per sample (fake data)");

  r.add_int("train.global_batch_size", &c.global_batch_size, "BS", {"--global-batch-size"},
            "samples per optimizer step");
  r.add_int("train.micro_batch_size", &c.micro_batch_size, "", {"--micro-batch-size"},
            "samples per forward/backward");
  register_devices_config(r, c.devices);
  r.add_int("parallel.tensor_model_parallel_size", &c.tensor_parallel, "", {"--tensor-model-parallel-size"},
            "tensor-parallel ranks (Megatron layout: ranks = TP x DP x PP)");
  r.add_int("parallel.pipeline_model_parallel_size", &c.pipeline_parallel, "", {"--pipeline-model-parallel-size"},
            "pipeline stages (1F1B schedule)");
  r.add_int("parallel.num_layers_per_virtual_pipeline_stage", &c.layers_per_virtual_stage, "",
            {"--num-layers-per-virtual-pipeline-stage"},
            "layers of each model chunk of the interleaved 1F1B schedule (each stage holds its layers / this "
            "many chunks)");
  r.add_bool("parallel.sequence_parallel", &c.sequence_parallel, "", {"--sequence-parallel"},
             "split the LayerNorm and dropout regions along the sequence over the tensor-parallel group "
             "(all-gather and reduce-scatter in place of all-reduce)");
  register_data_parallel_flags(r, c);
  r.add_int("train.train_steps", &c.train_steps, "TRAIN_STEPS", {"--train-iters"},
            "optimizer steps (schedule length)");
  register_run_length_flags(r, c, "seed for init, dropout and data order", "CPU threads (0: all cores)");
  r.add_string("train.matmul_dtype", &c.matmul_dtype, "", {"--matmul-dtype"},
               "deprecated: bf16 = --bf16");
  register_precision_config(r, c.precision);

  r.add_string("optim.optimizer", &c.optimizer, "", {"--optimizer"}, "lamb or adamw");
  r.add_float("optim.lr", &c.lr, "OPT_BASE_LEARNING_RATE", {"--lr"}, "peak learning rate");
  r.add_float("optim.beta1", &c.beta1, "OPT_LAMB_BETA_1", {"--adam-beta1"}, "first moment decay");
  r.add_float("optim.beta2", &c.beta2, "OPT_LAMB_BETA_2", {"--adam-beta2"}, "second moment decay");
  r.add_float("optim.epsilon", &c.epsilon, "EPSILON", {"--adam-eps"}, "denominator epsilon");
  r.add_float("optim.weight_decay", &c.weight_decay, "DECAY", {"--weight-decay"},
              "decoupled weight decay (not on biases and LayerNorm)");
  r.add_float("optim.clip_grad", &c.clip_grad, "", {"--clip-grad"},
              "global gradient-norm clip (0: off)");
  r.add_string("optim.lr_decay_style", &c.lr_decay_style, "", {"--lr-decay-style"},
               "poly, linear or cosine");
  r.add_int("optim.warmup_steps", &c.warmup_steps, "NUM_WARMUP_STEPS", {"--lr-warmup-iters"},
            "linear warmup steps");
  r.add_float("optim.warmup_fraction", &c.warmup_fraction, "", {"--lr-warmup-fraction"},
              "warmup as a fraction of the steps");
  r.add_int("optim.lr_decay_iters", &c.lr_decay_iters, "", {"--lr-decay-iters"},
            "steps of LR decay (0: train.train_steps)");
  r.add_float("optim.poly_power", &c.poly_power, "POLY_POWER", {}, "polynomial decay power");
  r.add_float("optim.min_lr", &c.min_lr, "", {"--min-lr"}, "learning rate at the end");

  r.add_int("eval.batch_size", &c.eval_batch_size, "EVAL_BS", {"--eval-batch-size"},
            "samples per eval batch");
  r.add_int("eval.interval", &c.eval_interval, "EVAL_STEP_FREQ", {"--eval-interval"},
            "steps between evaluations");
  r.add_int("eval.iters", &c.eval_iters, "MAX_EVAL_STEPS", {"--eval-iters"},
            "batches per evaluation");
  r.add_int("eval.samples", &c.eval_samples, "", {"--eval-samples"}, "eval samples per evaluation");
  r.add_float("eval.target", &c.target, "TARGET", {"--target"},
              "masked-LM accuracy that ends the run");

  r.add_bool("eval.at_start", &c.eval_at_start, "", {"--eval-at-start"},
             "evaluate before the first step too");
  register_output_flags(r, c, "directory for result_bert_<seed>.log", "SAVE_CKPT_FREQ", "steps between checkpoints");
  r.add_string("run.init_checkpoint", &c.init_checkpoint, "INIT_CKPT_DIR", {"--init-checkpoint"},
               "start from the weights of this TensorFlow BERT checkpoint (MLPerf's model.ckpt-28252: its "
               "directory or prefix); a checkpoint found in --load takes precedence");
  r.add_string("run.tensorboard_dir", &c.tensorboard_dir, "", {"--tensorboard-dir"},
               "write TensorBoard event files here");
  r.add_string("run.log_format", &c.log_format, "", {"--log-format"},
               "console lines: kiln, megatron or auto");
  register_dry_run_flags(r, c);
  r.add_bool("run.init_random", &c.init_random, "", {"--init-random"},
             "MLPerf run phase: start from random weights instead of run.init_checkpoint");
  register_submission_flags(r, c);
}

void finalize_bert_config(BertTrainConfig& c, const ConfigRegistry& r) {
  positive(c.vocab_size, "model.vocab_size");
  positive(c.hidden_size, "model.hidden_size");
  positive(c.num_layers, "model.num_layers");
  positive(c.num_heads, "model.num_attention_heads");
  positive(c.intermediate_size, "model.intermediate_size");
  if (c.hidden_size % c.num_heads != 0)
    throw Error("config: model.hidden_size ({}) is not a multiple of model.num_attention_heads ({})",
                c.hidden_size, c.num_heads);
  if (c.disable_dropout) c.hidden_dropout = c.attention_dropout = 0;
  for (double p : {c.hidden_dropout, c.attention_dropout})
    if (p < 0 || p >= 1) throw Error("config: dropout must be in [0, 1), got {}", p);

  // local and unfused: Megatron's unfused core; fused and flash: fused attention (nn/attention_core.h).
  if (c.attention_backend != "auto" && c.attention_backend != "local" && c.attention_backend != "unfused" &&
      c.attention_backend != "fused" && c.attention_backend != "flash")
    throw Error("config: --attention-backend must be auto, local, unfused, fused or flash, got '{}'",
                c.attention_backend);
  finalize_mlperf_phase(c.mlperf);
  check_ddp_config(c.ddp);
  if (c.mlperf.phase == MlperfPhase::init && c.benchmark == 0) c.benchmark = 10;
  check_device_model_setting(c.device_model, c.dry_run, c.dry_run_json);
  if (c.benchmark > 0 || c.dry_run) c.fake_data = true;
  if ((c.dry_run || c.mlperf.phase == MlperfPhase::init) && c.seq_length == 0) c.seq_length = 512;
  if (c.megatron_data()) {
    if (c.vocab_file.empty()) throw Error("config: --data-path needs --vocab-file");
    if (!r.was_set("model.make_vocab_size_divisible_by")) c.make_vocab_size_divisible_by = 128;
    if (c.seq_length == 0) c.seq_length = 512;
    if (c.log_format == "auto") c.log_format = "megatron";
  }
  positive(c.make_vocab_size_divisible_by, "model.make_vocab_size_divisible_by");
  if (!c.init_checkpoint.empty() && c.pre_ln)
    throw Error("config: run.init_checkpoint holds a post-LN BERT (TensorFlow names); a model.pre_ln model cannot "
                "start from it");
  if (c.log_format == "auto") c.log_format = "kiln";
  if (c.log_format != "kiln" && c.log_format != "megatron")
    throw Error("config: run.log_format must be kiln, megatron or auto, got '{}'", c.log_format);
  if (!c.fake_data && c.data_dir.empty() && !c.megatron_data())
    throw Error("config: no data (use --data DIR, --data-path PREFIX, or --fake-data / BENCHMARK=N)");

  positive(c.tensor_parallel, "parallel.tensor_model_parallel_size");
  positive(c.pipeline_parallel, "parallel.pipeline_model_parallel_size");
  check_tensor_parallel(c);
  if (c.sequence_parallel && c.tensor_parallel == 1) {
    notice("--sequence-parallel: off, as Megatron turns it off, because the tensor-model-parallel size is 1");
    c.sequence_parallel = false;
  }
  if (c.sequence_parallel && c.seq_length % c.tensor_parallel != 0)
    throw Error("config: --sequence-parallel: --seq-length {} is not divisible by --tensor-model-parallel-size {}",
                c.seq_length, c.tensor_parallel);
  check_model_chunks(c);
  check_recompute(c);
  if (!(c.dist_timeout >= 0)) throw Error("config: parallel.dist_timeout must be >= 0, got {}", c.dist_timeout);
  if (!(c.save_timeout >= 0)) throw Error("config: parallel.save_timeout must be >= 0, got {}", c.save_timeout);

  if (c.matmul_dtype != "f32" && c.matmul_dtype != "bf16")
    throw Error("config: train.matmul_dtype must be f32 or bf16, got '{}'", c.matmul_dtype);
  // --matmul-dtype bf16 was bf16 matrix products; it now means bf16 compute (--bf16).
  if (c.matmul_dtype == "bf16" && !c.precision.fp16 && !r.was_set("train.precision")) c.precision.bf16 = true;
  finalize_precision_config(c.precision, r, 2048.0);  // tinygrad BERT: LOSS_SCALER 2^11 with HALF
  derive_batches(c);
  derive_eval_schedule(c);
  check_interleaved_micro_batches(c);

  if (c.lr == 0 && !r.was_set("optim.lr"))
    c.lr = 0.000175 * std::sqrt(double(c.global_batch_size) / 96.0);
  if (c.lr <= 0) throw Error("config: optim.lr must be positive, got {}", c.lr);
  if (c.optimizer == "adam") c.optimizer = "adamw";  // Megatron's name for its AdamW
  if (c.optimizer != "lamb" && c.optimizer != "adamw")
    throw Error("config: optim.optimizer must be lamb, adamw or adam, got '{}'", c.optimizer);
  if (c.lr_decay_style != "poly" && c.lr_decay_style != "linear" && c.lr_decay_style != "cosine")
    throw Error("config: optim.lr_decay_style must be poly, linear or cosine, got '{}'",
                c.lr_decay_style);
  if (c.lr_decay_iters == 0) c.lr_decay_iters = c.train_steps;
  if (c.warmup_fraction > 0) c.warmup_steps = int64_t(c.warmup_fraction * double(c.lr_decay_iters));
  if (c.warmup_steps < 0) throw Error("config: optim.warmup_steps must be >= 0");
  positive(c.log_interval, "run.log_interval");
  positive(c.save_interval, "run.save_interval");
  positive(c.keep_checkpoints, "run.keep_checkpoints");
}

}  // namespace kiln::train
