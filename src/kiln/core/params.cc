#include "kiln/core/params.h"

#include <algorithm>

#include "kiln/core/error.h"

namespace kiln {

Param ParamStore::add(std::string name, Shape shape, bool decay) {
  KILN_CHECK(!allocated(), "parameter '{}' registered after the store was allocated", name);
  KILN_CHECK(!find(name), "parameter '{}' registered twice", name);
  ParamSpec spec{std::move(name), std::move(shape), size_, 0, decay};
  spec.numel = shape_numel(spec.shape);
  size_ += (spec.numel + 15) / 16 * 16;
  specs_.push_back(std::move(spec));
  return Param{this, int(specs_.size()) - 1};
}

void ParamStore::allocate() {
  values.assign(size_t(size_), 0.0f);
  grads.assign(size_t(size_), 0.0f);
}

const ParamSpec* ParamStore::find(const std::string& name) const {
  auto it = std::find_if(specs_.begin(), specs_.end(), [&](auto& s) { return s.name == name; });
  return it == specs_.end() ? nullptr : &*it;
}

void ParamStore::zero_grad() { std::fill(grads.begin(), grads.end(), 0.0f); }

}  // namespace kiln
