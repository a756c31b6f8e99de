#include "kiln/train/dry_run/perf_ops.h"

#include <fmt/format.h>

#include "kiln/backend/backend.h"
#include "kiln/backend/bn_sums.h"

namespace kiln::train::perf {

std::string dims(std::initializer_list<int64_t> d) {
  std::string s = "(";
  for (int64_t v : d) s += (s.size() > 1 ? ", " : "") + std::to_string(v);
  return s + ")";
}

std::string dims(std::initializer_list<int64_t> d, DType t) { return dims(d) + " " + std::string(dtype_name(t)); }

namespace {

const char* bytes_name(double e) { return e == 4 ? "f32" : "16-bit"; }

std::string gemm_shape(const Gemm& g) {
  return fmt::format("{}({}, {}) x ({}, {}) -> ({}, {}) {}{}", g.batch > 1 ? fmt::format("{} x ", g.batch) : "",
                     g.M, g.K, g.K, g.N, g.M, g.N, bytes_name(g.ec),
                     g.accumulate > 0 ? " (accumulating)" : "");
}

}  // namespace

OpCost gemm(std::string name, OpClass cls, double calls, const Gemm& g) {
  OpCost op;
  op.name = std::move(name);
  op.shape = gemm_shape(g);
  op.cls = cls;
  op.math = g.math;
  op.calls = calls;
  op.model_flops = true;
  const double batch = double(g.batch), M = double(g.M), N = double(g.N), K = double(g.K);
  op.flops = 2 * batch * M * N * K;
  op.bytes = batch * M * K * g.ea + batch * K * N * g.eb +
             batch * M * N * g.ec * (1 + g.accumulate) + double(g.bias) * g.ebias;
  return op;
}

OpCost rows(std::string name, OpClass cls, double calls, std::string shape, double flops, double bytes) {
  OpCost op;
  op.name = std::move(name);
  op.shape = std::move(shape);
  op.cls = cls;
  op.calls = calls;
  op.flops = flops;
  op.bytes = bytes;
  return op;
}

OpCost collective(std::string name, OpClass cls, double calls, std::string shape, double bytes, int ranks,
                  Passes passes, bool network) {
  OpCost op = rows(std::move(name), cls, calls, std::move(shape), 0, 2 * bytes);
  op.link_bytes = double(passes) * double(ranks - 1) / double(ranks) * bytes;
  op.network = network;
  return op;
}

OpCost send(std::string name, double calls, std::string shape, double bytes) {
  OpCost op = rows(std::move(name), OpClass::exchange, calls, std::move(shape), 0, bytes);
  op.link_bytes = bytes;
  return op;
}

void data_parallel(std::vector<OpCost>& ops, double params, int dp, bool distributed_optimizer, bool network) {
  if (dp < 2) return;
  const std::string g = dims({int64_t(params)}, DType::f32);
  if (!distributed_optimizer) {
    ops.push_back(collective("dp.grad_all_reduce", OpClass::all_reduce, 1, g, 4 * params, dp, kAllReduce, network));
    return;
  }
  ops.push_back(collective("dp.grad_reduce_scatter", OpClass::all_reduce, 1, g, 4 * params, dp, kHalf, network));
  ops.push_back(collective("dp.weight_all_gather", OpClass::all_reduce, 1, g, 4 * params, dp, kHalf, network));
}

OpCost bias_grad_epilogue(std::string name, double calls, std::string shape, int64_t rows, int64_t columns) {
  return perf::rows(std::move(name), OpClass::elementwise, calls, std::move(shape) + " -> f32 column sums",
                    double(rows * columns), 4.0 * double(columns) * 4);
}

double layernorm_grad_partials(int64_t rows, int64_t columns) {
  const int64_t chunks = (rows + ops::kLayerNormGradRows - 1) / ops::kLayerNormGradRows;
  return 2.0 * double(chunks * columns * 2) * 4;  // (Σ dy x̂, Σ dy) in f32, written then read
}

double bn_sum_partials(int64_t rows, int64_t channels) {
  const int64_t chunk = ops::bn_chunk_rows(rows), chunks = (rows + chunk - 1) / chunk;
  const int64_t runs = chunks * ((chunk + ops::kBnFloatRun - 1) / ops::kBnFloatRun);
  return 2.0 * 2.0 * double(channels) * (double(runs) * 4 + double(chunks) * 8);
}

double scatter_sort_bytes(int64_t ids) {
  const int64_t slices = (ids + kScatterRankSlice - 1) / kScatterRankSlice;
  return 2.0 * double(slices * ids) * 4 + 4.0 * double(ids) * 4;
}

}  // namespace kiln::train::perf
