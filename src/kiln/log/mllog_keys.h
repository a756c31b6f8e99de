// log/mllog_keys.h — the mlperf_logging key names kiln emits: the common keys, BERT (training ruleset
// 5.0.0) and ResNet-50 (ruleset 4.0.0).
#pragma once
#include <string_view>

namespace kiln::log::key {

// Common to every benchmark.
inline constexpr std::string_view kSubmissionBenchmark = "submission_benchmark";
inline constexpr std::string_view kSubmissionOrg = "submission_org";
inline constexpr std::string_view kSubmissionDivision = "submission_division";
inline constexpr std::string_view kSubmissionStatus = "submission_status";
inline constexpr std::string_view kSubmissionPlatform = "submission_platform";
inline constexpr std::string_view kCacheClear = "cache_clear";
inline constexpr std::string_view kInitStart = "init_start";
inline constexpr std::string_view kInitStop = "init_stop";
inline constexpr std::string_view kRunStart = "run_start";
inline constexpr std::string_view kRunStop = "run_stop";
inline constexpr std::string_view kBlockStart = "block_start";
inline constexpr std::string_view kBlockStop = "block_stop";
inline constexpr std::string_view kEpochStart = "epoch_start";
inline constexpr std::string_view kEpochStop = "epoch_stop";
inline constexpr std::string_view kEvalStart = "eval_start";
inline constexpr std::string_view kEvalStop = "eval_stop";
inline constexpr std::string_view kEvalAccuracy = "eval_accuracy";
inline constexpr std::string_view kTrainSamples = "train_samples";
inline constexpr std::string_view kEvalSamples = "eval_samples";
inline constexpr std::string_view kSeed = "seed";
inline constexpr std::string_view kGlobalBatchSize = "global_batch_size";
inline constexpr std::string_view kGradientAccumulationSteps = "gradient_accumulation_steps";
inline constexpr std::string_view kOptName = "opt_name";
inline constexpr std::string_view kCheckpointStart = "checkpoint_start";
inline constexpr std::string_view kCheckpointStop = "checkpoint_stop";
inline constexpr std::string_view kTrackedStats = "tracked_stats";

// BERT.
inline constexpr std::string_view kMaxSequenceLength = "max_sequence_length";
inline constexpr std::string_view kMaxPredictionsPerSeq = "max_predictions_per_seq";
inline constexpr std::string_view kOptBaseLearningRate = "opt_base_learning_rate";
inline constexpr std::string_view kOptLambEpsilon = "opt_lamb_epsilon";
inline constexpr std::string_view kOptLambBeta1 = "opt_lamb_beta_1";
inline constexpr std::string_view kOptLambBeta2 = "opt_lamb_beta_2";
inline constexpr std::string_view kOptLambWeightDecayRate = "opt_lamb_weight_decay_rate";
inline constexpr std::string_view kOptLambLearningRateDecayPolyPower = "opt_lamb_learning_rate_decay_poly_power";
inline constexpr std::string_view kOptLearningRateTrainingSteps = "opt_learning_rate_training_steps";
inline constexpr std::string_view kOptLearningRateWarmupSteps = "opt_learning_rate_warmup_steps";
inline constexpr std::string_view kNumWarmupSteps = "num_warmup_steps";
inline constexpr std::string_view kStartWarmupStep = "start_warmup_step";

// ResNet-50, LARS.
inline constexpr std::string_view kLarsOptBaseLearningRate = "lars_opt_base_learning_rate";
inline constexpr std::string_view kLarsOptEndLearningRate = "lars_opt_end_learning_rate";
inline constexpr std::string_view kLarsOptLearningRateDecayPolyPower = "lars_opt_learning_rate_decay_poly_power";
inline constexpr std::string_view kLarsOptLearningRateDecaySteps = "lars_opt_learning_rate_decay_steps";
inline constexpr std::string_view kLarsEpsilon = "lars_epsilon";
inline constexpr std::string_view kLarsOptLearningRateWarmupEpochs = "lars_opt_learning_rate_warmup_epochs";
inline constexpr std::string_view kLarsOptMomentum = "lars_opt_momentum";
inline constexpr std::string_view kLarsOptWeightDecay = "lars_opt_weight_decay";
// ResNet-50, SGD.
inline constexpr std::string_view kSgdOptBaseLearningRate = "sgd_opt_base_learning_rate";
inline constexpr std::string_view kSgdOptEndLearningRate = "sgd_opt_end_learning_rate";
inline constexpr std::string_view kSgdOptLearningRateDecayPolyPower = "sgd_opt_learning_rate_decay_poly_power";
inline constexpr std::string_view kSgdOptLearningRateDecaySteps = "sgd_opt_learning_rate_decay_steps";
inline constexpr std::string_view kSgdOptWeightDecay = "sgd_opt_weight_decay";
inline constexpr std::string_view kSgdOptMomentum = "sgd_opt_momentum";
inline constexpr std::string_view kModelBnSpan = "model_bn_span";
inline constexpr std::string_view kOptLearningRateWarmupEpochs = "opt_learning_rate_warmup_epochs";

}  // namespace kiln::log::key
