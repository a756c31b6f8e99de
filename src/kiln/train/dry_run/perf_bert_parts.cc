// The performance model's costs of BERT's building blocks (train/dry_run/perf_bert.h): Linear, LayerNorm,
// GELU and plain elementwise passes, as nn/ runs them.
#include <fmt/format.h>

#include "kiln/train/dry_run/perf_bert.h"

namespace kiln::train::perf {

void linear_forward(const BertShapes& s, Ops& ops, const std::string& name, double calls, int64_t rows, int64_t in,
                    int64_t out, bool row_parallel) {
  const bool reduce = row_parallel && s.tp > 1;
  // y (rows, out) = x (rows, in) W^T (in, out) + b: the bias in the epilogue unless reduced first.
  ops.push_back(gemm(name + ".forward", OpClass::gemm, calls,
                     {.M = rows, .N = out, .K = in, .ea = s.e, .eb = s.e, .ec = s.e, .bias = reduce ? 0 : out,
                      .ebias = s.e, .math = s.math()}));
  if (!reduce) return;
  const double n = double(rows * out);
  ops.push_back(collective(name + ".all_reduce", OpClass::exchange, calls, dims({rows, out}, s.dtype), n * s.e, s.tp,
                           kAllReduce));
  OpCost bias = elementwise(s, name + ".bias_add", calls, dims({rows, out}, s.dtype), n, 2);
  bias.bytes += double(out) * s.e;
  ops.push_back(bias);
}

void linear_backward(const BertShapes& s, Ops& ops, const std::string& name, double calls, int64_t rows, int64_t in,
                     int64_t out, bool dx_accumulate, bool reduce) {
  // dW (out, in) f32 (+)= dy^T (out, rows) x (rows, in).
  ops.push_back(gemm(name + ".backward_weights", OpClass::gemm, calls,
                     {.M = out, .N = in, .K = rows, .ea = s.e, .eb = s.e, .ec = 4, .accumulate = s.dw_accumulate,
                      .math = s.math()}));
  // db (out) f32 += column sums of dy (rows, out), in the product above.
  ops.push_back(bias_grad_epilogue(name + ".bias_grad", calls, dims({rows, out}, s.dtype), rows, out));
  // dX (rows, in) (+)= dy (rows, out) x W (out, in).
  const bool partial = reduce && s.tp > 1;
  ops.push_back(gemm(name + ".backward_data", OpClass::gemm, calls,
                     {.M = rows, .N = in, .K = out, .ea = s.e, .eb = s.e, .ec = s.e,
                      .accumulate = dx_accumulate && !partial ? 1.0 : 0.0, .math = s.math()}));
  if (!partial) return;
  const double n = double(rows * in);
  ops.push_back(collective(name + ".dx_all_reduce", OpClass::exchange, calls, dims({rows, in}, s.dtype), n * s.e,
                           s.tp, kAllReduce));
  ops.push_back(elementwise(s, name + (dx_accumulate ? ".dx_add" : ".dx_copy"), calls, dims({rows, in}, s.dtype), n,
                            dx_accumulate ? 3 : 2));
}

OpCost elementwise(const BertShapes& s, std::string name, double calls, std::string shape, double n, int tensors,
                   double flops_per_element) {
  return rows(std::move(name), OpClass::elementwise, calls, std::move(shape), n * flops_per_element,
              n * s.e * tensors);
}

// x (and the join's second input) read, y (and the join) written, mean / rstd (f32) written,
// weight and bias read.
OpCost layernorm_forward(const BertShapes& s, std::string name, double calls, int64_t rows, bool join) {
  const double n = double(rows * s.H);
  return perf::rows(std::move(name), OpClass::norm, calls, dims({rows, s.H}, s.dtype) + (join ? " + residual" : ""),
                    n * (kLnForwardFlops + (join ? 1 : 0)),
                    n * s.e * (join ? 4 : 2) + double(rows) * 8 + 2.0 * double(s.H) * s.e);
}

// dy, x, mean / rstd and the weight read; dx written (read too when accumulating); the dW / db
// chunk partials written and read, dW and db (f32) read and written.
OpCost layernorm_backward(const BertShapes& s, std::string name, double calls, int64_t rows, bool accumulate) {
  const double n = double(rows * s.H);
  return perf::rows(std::move(name), OpClass::norm, calls,
                    dims({rows, s.H}, s.dtype) + (accumulate ? " (dx accumulating)" : ""), n * kLnBackwardFlops,
                    n * s.e * (accumulate ? 4 : 3) + double(rows) * 8 + double(s.H) * s.e +
                        layernorm_grad_partials(rows, s.H) + 4.0 * double(s.H) * 4);
}

OpCost gelu_forward(const BertShapes& s, std::string name, double calls, int64_t rows, int64_t cols) {
  return elementwise(s, std::move(name), calls, dims({rows, cols}, s.dtype), double(rows * cols), 2, kGeluFlops);
}

// x and dy read, dx written.
OpCost gelu_backward(const BertShapes& s, std::string name, double calls, int64_t rows, int64_t cols) {
  return elementwise(s, std::move(name), calls, dims({rows, cols}, s.dtype), double(rows * cols), 3, kGeluFlops);
}

}  // namespace kiln::train::perf
