// backend/checks.h — the argument checks of the listed ops (backend/ops.def), made once, in the
// dispatch (backend/dispatch.cc), before either backend runs: the backends receive views that fit
// the op's contract (backend/ops.def). check_args(check::<op>{}, args...) is an op's check, with the
// op's own parameters, defined in its family's backend/<family>_check.cc (cast, elementwise and
// relu: elementwise_check.cc; losses and vocab_xent: xent_check.cc); an op of the list without one
// does not link. The dispatch checks every op's devices first (check_devices, route.h).
#pragma once
#include "kiln/backend/backend.h"

namespace kiln::ops {

namespace check {
// A tag per op of the list.
#define KILN_OP(name, params, args) struct name {};
#include "kiln/backend/ops.def"
}  // namespace check

#define KILN_OP(name, params, args) void check_args(check::name, KILN_OP_PARAMS params);
#include "kiln/backend/ops.def"

}  // namespace kiln::ops
