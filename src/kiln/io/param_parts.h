// io/param_parts.h — copying a tensor-parallel part of a parameter (ParamSpec::part_dim) between
// the whole tensor, as checkpoints hold it, and the rank's own slice.
#pragma once
#include "kiln/nn/params.h"

namespace kiln::io {

// A part's elements (ParamSpec::shape) from / into the whole parameter (ParamSpec::full_shape);
// a plain copy for a whole parameter.
void extract_part(const ParamSpec& spec, const float* whole, float* part);
void insert_part(const ParamSpec& spec, const float* part, float* whole);

}  // namespace kiln::io
