#include "kiln/optim/step_scalars.h"

namespace kiln::optim {

StepScalars::StepScalars(Context& ctx)
    : ctx_(ctx),
      device_(Tensor::empty({ops::kStepScalars}, DType::i64, ctx.device)),
      host_(ops::host_staging_tensor(ctx, {ops::kStepScalars}, DType::i64)) {}

void StepScalars::write(const StepInputs& in, double grad_factor) {
  double* s = reinterpret_cast<double*>(host_.ptr<int64_t>());
  s[ops::kStepLr] = in.lr;
  s[ops::kStepBc1] = in.bc1;
  s[ops::kStepBc2] = in.bc2;
  s[ops::kStepUnscale] = in.unscale;
  s[ops::kStepMaxNorm] = in.max_norm;
  s[ops::kStepLoss] = in.loss;
  s[ops::kStepNormSquares] = 0;
  s[ops::kStepNorm] = 0;
  s[ops::kStepGradFactor] = grad_factor;
  s[ops::kStepSkip] = 0;
  ops::copy(ctx_, host_, device_);
}

StepDecision StepScalars::read() {
  ops::copy(ctx_, device_, host_);
  const double* s = reinterpret_cast<const double*>(host_.ptr<int64_t>());
  return {s[ops::kStepNormSquares], s[ops::kStepNorm], s[ops::kStepGradFactor], s[ops::kStepSkip] != 0};
}

}  // namespace kiln::optim
