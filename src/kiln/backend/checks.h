// backend/checks.h — the argument checks of the listed ops (backend/ops.def), made once, in the
// dispatch (backend/dispatch.cc), before either backend runs: the backends receive views that fit
// the op's contract (backend.h). check_args(check::<op>{}, args...) is an op's check, defined in
// its family's backend/<family>_check.cc. An op without an overload of its own takes the template,
// which checks nothing: the families below that are not listed still check their arguments in
// their backends (TODO(house issue, part 2): move them here).
// The dispatch checks every op's devices first (check_devices, route.h).
#pragma once
#include "kiln/backend/backend.h"

namespace kiln::ops {

namespace check {
// A tag per op of the list.
#define KILN_OP(name, params, args) struct name {};
#include "kiln/backend/ops.def"
}  // namespace check

template <typename Op, typename... Args>
void check_args(Op, const Args&...) {}

// ---- cast, elementwise, relu (elementwise_check.cc) ----
void check_args(check::fill, const Tensor& t, float value);
void check_args(check::cast, const Tensor& src, const Tensor& dst);
void check_args(check::add, const Tensor& a, const Tensor& b, const Tensor& out);
void check_args(check::scale, const Tensor& x, float s, const Tensor& y);
void check_args(check::bias_add, const Tensor& y, const Tensor& bias);
void check_args(check::bias_grad, const Tensor& dy, const Tensor& db);
void check_args(check::gelu_forward, GeluKind kind, const Tensor& x, const Tensor& y);
void check_args(check::gelu_backward, GeluKind kind, const Tensor& x, const Tensor& dy, const Tensor& dx);
void check_args(check::tanh_forward, const Tensor& x, const Tensor& y);
void check_args(check::tanh_backward, const Tensor& y, const Tensor& dy, const Tensor& dx);
void check_args(check::dropout_forward, const Tensor& x, const DropoutMask& mask, const Tensor& y);
void check_args(check::dropout_backward, const Tensor& dy, const DropoutMask& mask, const Tensor& dx);
void check_args(check::relu_forward, const Tensor& x, const Tensor& y);
void check_args(check::relu_backward, const Tensor& y, const Tensor& dy, const Tensor& dx, const Tensor& dy2);
void check_args(check::residual_add, const Tensor& x, const Tensor& y);

// ---- layernorm (layernorm_check.cc) ----
void check_args(check::layernorm_forward, const Tensor& x, const Tensor& w, const Tensor& b, float eps,
                const Tensor& y, const Tensor& mean, const Tensor& rstd);
void check_args(check::add_layernorm_forward, const Tensor& a, const Tensor& b, const Tensor& w,
                const Tensor& bias, float eps, const Tensor& sum, const Tensor& y, const Tensor& mean,
                const Tensor& rstd);
void check_args(check::layernorm_backward, const Tensor& dy, const Tensor& x, const Tensor& w,
                const Tensor& mean, const Tensor& rstd, const Tensor& dx, const Tensor& dw, const Tensor& db,
                bool accumulate_dx);

// ---- rows (rows_check.cc) ----
void check_args(check::gather_rows, const Tensor& table, const Tensor& ids, const Tensor& out, int64_t first);
void check_args(check::scatter_add_rows, const Tensor& dy, const Tensor& ids, const Tensor& dtable, int64_t first);

}  // namespace kiln::ops
