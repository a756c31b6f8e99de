// optim/step_scalars.h — the step's scalars (backend.h, StepScalar) as the host sees them: the
// inputs it writes before an optimizer phase, the decisions it reads back after it, and the small
// device block in between, written and read through host staging (page-locked on a GPU).
#pragma once
#include "kiln/backend/backend.h"

namespace kiln::optim {

// What the host knows before the step's optimizer phase.
struct StepInputs {
  double lr = 0;
  double unscale = 1;   // 1 / loss scale
  double max_norm = 0;  // gradient clipping threshold; 0: none
  double loss = 0;      // not finite: the step is skipped
  double bc1 = 1, bc2 = 1;  // Adam's bias corrections (Optimizer::set_inputs)
};

// What the phase decided on the device.
struct StepDecision {
  double norm_squares = 0, norm = 0;
  double grad_factor = 1;  // the clip factor the update applied
  bool skipped = false;
};

class StepScalars {
 public:
  explicit StepScalars(Context& ctx);
  // (kStepScalars) f64 in i64 on ctx.device: what the ops take.
  Tensor& device() { return device_; }
  // The inputs, with the outputs reset (no skip; gradient factor `grad_factor`, which
  // ops::step_decide overwrites), copied to the device.
  void write(const StepInputs& in, double grad_factor = 1.0);
  // The block copied back; waits for the ops that write it.
  StepDecision read();

 private:
  Context& ctx_;
  Tensor device_, host_;
};

}  // namespace kiln::optim
