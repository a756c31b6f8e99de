#include "kiln/train/run_setup.h"

#include <algorithm>
#include <ostream>
#include <sstream>

#include "kiln/core/file_util.h"

namespace kiln::train {

RunSetup::RunSetup(const RunSpec& spec, std::ostream& console)
    : spec_(spec),
      console_(console),
      run_world_(spec.device),
      world_(run_world_.get()),
      groups_([&]() -> std::optional<dist::ParallelGroups> {
        world_.set_timeout(spec.dist_timeout);
        if (!spec.layout) return std::nullopt;
        return dist::ParallelGroups::make(world_, spec.tensor_parallel, spec.pipeline_parallel);
      }()),
      placement_(dist::place_rank(world_, spec.threads)),
      data_parallel_(groups_ ? *groups_->dp : world_, spec.global_batch,
                     spec.micro_batch > 0 ? spec.micro_batch
                                          : spec.global_batch / (groups_ ? groups_->dp->size() : world_.size()),
                     spec.distributed_optimizer) {
  if (spec.is_rank0) ensure_writable_dir(spec.output_dir);
  if (spec.is_rank0 && world_.size() > 1) console << placement_.describe(world_);
}

RunSetup::~RunSetup() = default;

void RunSetup::open(const RunSettings& settings, const ResolvedConfig& resolved,
                    const std::function<void(const ResumePoint&)>& check) {
  settings_ = settings;
  resolved_ = resolved;
  std::ostringstream other_ranks;  // rank 0 says the resume warnings
  if (!init_phase())
    resume_ = find_resume_point(spec_.load_dir, spec_.resume, settings, spec_.is_rank0 ? console_ : other_ranks);
  if (check) check(resume_);
  sinks_.emplace(spec_.is_rank0, console_, spec_.tensorboard_dir, init_phase() ? "" : spec_.save_dir,
                 spec_.keep_checkpoints);
  report_resolved_config(spec_.output_dir, spec_.is_rank0, resolved, sinks_->console());
}

PhaseLog& RunSetup::open_mllog(const std::string& name) {
  return mllog_.emplace(spec_.phase, *sinks_, spec_.output_dir, name, resume_);
}

ParamStore& RunSetup::make_store() {
  run_ = std::make_unique<RunContext>(spec_.device);  // the store, optimizer and every step run on it
  if (data_parallel_.sharded()) store_.set_padding(data_parallel_.shard_padding());
  return store_;
}

bool RunSetup::zero_init_phase_weights() {
  if (!init_phase()) return false;
  std::ranges::fill(store_.host_values(), 0.0f);
  return true;
}

void RunSetup::to_device(const std::function<void(Context&)>& move) {
  store_.set_compute_dtype(spec_.compute_dtype);
  move(run_->ctx);
}

optim::ShardRange RunSetup::optimizer_shard() const {
  return data_parallel_.sharded() ? data_parallel_.shard(store_) : optim::ShardRange{};
}

LoopResult RunSetup::train(LoopConfig loop, Recipe& recipe, optim::Optimizer& optimizer,
                           const optim::LrSchedule& schedule, std::vector<io::FlatState> buffers) {
  loop.resolved = resolved_;
  loop.settings = settings_;
  const LoopResult r = run_training(loop, recipe, {store_, optimizer, schedule, std::move(buffers), *run_,
                                                   data_parallel_, groups()},
                                    *sinks_, resume_);
  if (init_phase()) mllog_->finish_init_phase();
  return r;
}

}  // namespace kiln::train
