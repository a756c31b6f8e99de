#include "kiln/nn/grad_loan.h"

#include <utility>

#include "kiln/core/arena.h"
#include "kiln/core/error.h"

namespace kiln::nn {
namespace {

struct OpenLoan {
  GradLoan* loan = nullptr;
  int64_t layer = 0;
};
thread_local OpenLoan open_loan;

}  // namespace

GradLoan::GradLoan(const ParamStore& store, std::vector<int64_t> layer_begins)
    : store_(store), layer_begins_(std::move(layer_begins)) {
  if (!layer_begins_.empty()) start_ = end_ = layer_begins_[0] * int64_t(sizeof(float));
}

Tensor GradLoan::take(int64_t layer, size_t bytes, const Device& device) {
  if (layer < 1 || layer >= int64_t(layer_begins_.size()) || device != store_.grads.device) return {};
  const int64_t limit = layer_begins_[size_t(layer)] * int64_t(sizeof(float));
  auto* base = static_cast<std::byte*>(store_.grads.data);
  const int64_t at = int64_t(align_up(size_t(end_)));  // the gradients start 64-byte aligned
  if (at + int64_t(bytes) > limit) return {};
  if (start_ == end_) start_ = at;
  end_ = at + int64_t(bytes);
  Tensor t = Tensor::view(base + at, {int64_t((bytes + 3) / 4)}, DType::f32, device);
  t.storage = store_.grads.storage;
  return t;
}

void GradLoan::check_unwritten() const {
  if (start_ == end_) return;
  const int64_t first = start_ / int64_t(sizeof(float)), last = end_ / int64_t(sizeof(float));
  const std::vector<bool>& written = store_.grads_written();
  for (size_t id = 0; id < store_.specs().size(); ++id) {
    const ParamSpec& s = store_.specs()[id];
    KILN_CHECK(!written[id] || s.offset >= last || s.offset + s.numel <= first,
               "gradient of '{}' holds a contribution where activations are lent its memory: lend "
               "gradients only to steps of one micro-batch that start with clear_grads()", s.name);
  }
}

LoanScope::LoanScope(GradLoan* loan, int64_t layer) {
  KILN_CHECK(!open_loan.loan, "gradient loan: a loan scope is open already");
  open_loan = {loan, layer};
}

LoanScope::~LoanScope() { open_loan = {}; }

Tensor LoanScope::take(size_t bytes, const Device& device) {
  return open_loan.loan ? open_loan.loan->take(open_loan.layer, bytes, device) : Tensor{};
}

}  // namespace kiln::nn
