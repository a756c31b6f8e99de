// train/run_setup.h — the assembly of a run, one for every recipe (train/recipes/). A recipe calls
// its steps in order and does what is its own between them:
//
//   RunSetup(spec)   the world: the run's communicator on its device (dist/run_world.h) with
//                    --dist-timeout, Megatron's tensor / pipeline / data-parallel groups where the
//                    recipe lays its ranks out in them, this rank's cores (dist/placement.h), data
//                    parallelism over the global batch (train/data_parallel.h: the micro-batches and
//                    their checks, the optimizer's shards; made once, the loop runs it), the output
//                    folder, the placement line;
//     [recipe: its data, so that a bad data folder fails before anything is written]
//   open()           where the weights come from (train/resume.h; nothing in the init phase), seen
//                    by the recipe's check before anything is written; the sinks (train/sinks.h);
//                    the resolved configuration beside the logs;
//   open_mllog()     the MLPerf log in its phase (train/phase_log.h);
//     [recipe: the MLPerf preamble]
//   make_store()     the run's context on its device (train/loop.h) and the parameter store,
//                    padded for the optimizer's shards;
//     [recipe: the model, built and initialised on the host: zero_init_phase_weights()]
//   to_device()      the compute dtype (for the store, hence every step and evaluation), then the
//                    state onto the run's device;
//     [recipe: the optimizer over optimizer_shard()]
//   train()          the training loop (train/loop.h) over it all; the init phase's log closed.
#pragma once
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kiln/core/device.h"
#include "kiln/core/dtype.h"
#include "kiln/dist/parallel_groups.h"
#include "kiln/dist/placement.h"
#include "kiln/dist/run_world.h"
#include "kiln/nn/params.h"
#include "kiln/train/config/mlperf_phase.h"
#include "kiln/train/config/resolved_config.h"
#include "kiln/train/config/resume_flags.h"
#include "kiln/train/data_parallel.h"
#include "kiln/train/loop.h"
#include "kiln/train/phase_log.h"
#include "kiln/train/resume.h"
#include "kiln/train/sinks.h"

namespace kiln::train {

// What the assembly needs of a recipe's config. run_spec(c) reads the keys every recipe's config
// spells the same way; the recipe adds its batches, its layout and TensorBoard.
struct RunSpec {
  Device device;                  // --device
  DType compute_dtype = DType::f32;
  int64_t threads = 0;            // --threads; 0: dist/placement.h decides
  double dist_timeout = 0;
  bool is_rank0 = true;
  std::string output_dir, save_dir, load_dir, tensorboard_dir;
  int64_t keep_checkpoints = 1;
  ResumeFlags resume;
  MlperfPhase phase = MlperfPhase::both;
  // Megatron's rank layout (BERT): tensor x pipeline x data-parallel groups, data parallelism over
  // groups->dp. Without it (ResNet) data parallelism is over the world and there are no groups.
  bool layout = false;
  int tensor_parallel = 1, pipeline_parallel = 1;
  int64_t global_batch = 1;
  int64_t micro_batch = 0;        // 0: the global batch over the data-parallel ranks, one micro-batch each
  bool distributed_optimizer = false;
};

template <typename RecipeConfig>
RunSpec run_spec(const RecipeConfig& c) {
  RunSpec s;
  s.device = c.precision.run_device;
  s.compute_dtype = c.precision.dtype;
  s.threads = c.threads;
  s.dist_timeout = c.dist_timeout;
  s.is_rank0 = c.is_rank0;
  s.output_dir = c.output_dir;
  s.save_dir = c.save_dir;
  s.load_dir = c.load_dir;
  s.keep_checkpoints = c.keep_checkpoints;
  s.resume = c.resume;
  s.phase = c.mlperf.phase;
  s.distributed_optimizer = c.distributed_optimizer;
  return s;
}

class RunSetup {
 public:
  RunSetup(const RunSpec& spec, std::ostream& console);
  RunSetup(const RunSetup&) = delete;
  RunSetup& operator=(const RunSetup&) = delete;
  ~RunSetup();

  dist::Communicator& world() { return world_; }
  // Megatron's groups (RunSpec::layout), else null.
  const dist::ParallelGroups* groups() const { return groups_ ? &*groups_ : nullptr; }
  const dist::Placement& placement() const { return placement_; }
  DataParallel& data_parallel() { return data_parallel_; }
  // The init phase of a two-process MLPerf run: no checkpoints, no resume, zero weights.
  bool init_phase() const { return spec_.phase == MlperfPhase::init; }

  // `check` sees the resume point before the sinks touch anything.
  void open(const RunSettings& settings, const ResolvedConfig& resolved,
            const std::function<void(const ResumePoint&)>& check = {});
  const ResumePoint& resume() const { return resume_; }
  Sinks& sinks() { return *sinks_; }
  std::ostream& console() { return sinks_->console(); }
  PhaseLog& open_mllog(const std::string& name);

  ParamStore& make_store();
  RunContext& run() { return *run_; }
  ParamStore& store() { return store_; }
  // The init phase's zero weights (as tinygrad's); false (nothing done) outside it.
  bool zero_init_phase_weights();
  // `move` moves the model's state to the context's device (ParamStore::to_device, or the model's
  // own, which moves its buffers too), after the compute dtype is set.
  void to_device(const std::function<void(Context&)>& move);
  // The optimizer's part of the store: this rank's shard under the distributed optimizer, else all.
  optim::ShardRange optimizer_shard() const;

  // `loop` holds what is the recipe's (steps, cadence, clipping, ...); the rest comes from here.
  LoopResult train(LoopConfig loop, Recipe& recipe, optim::Optimizer& optimizer, const optim::LrSchedule& schedule,
                   std::vector<io::FlatState> buffers = {});

 private:
  RunSpec spec_;
  std::ostream& console_;
  dist::RunWorld run_world_;
  dist::Communicator& world_;
  std::optional<dist::ParallelGroups> groups_;
  dist::Placement placement_;
  DataParallel data_parallel_;
  RunSettings settings_;
  ResolvedConfig resolved_;
  ResumePoint resume_;
  std::optional<Sinks> sinks_;
  std::optional<PhaseLog> mllog_;
  std::unique_ptr<RunContext> run_;
  ParamStore store_;
};

}  // namespace kiln::train
