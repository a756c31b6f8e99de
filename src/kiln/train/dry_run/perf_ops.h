// train/dry_run/perf_ops.h — the performance model's op costs (train/dry_run/perf_model.h), one function per kind:
// a matrix product, a bandwidth-bound row / elementwise op, a collective. The BERT and ResNet
// op lists (perf_model_bert.cc, perf_model_resnet.cc) are built from these.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "kiln/train/dry_run/perf_model.h"

namespace kiln::train::perf {

// c (M, N) = a (M, K) x b (K, N), `batch` times (attention's per-head products).
// FLOPs 2 batch M N K; bytes: a, b and c once each (c read too when accumulating: beta = 1),
// and a bias of `bias` elements added in the epilogue (read once).
struct Gemm {
  int64_t batch = 1, M = 0, N = 0, K = 0;
  double ea = 2, eb = 2, ec = 2;  // bytes per element of a, b, c
  double accumulate = 0;          // the fraction of calls that read c too
  int64_t bias = 0;
  double ebias = 2;
  Math math = Math::tensor16;
};
OpCost gemm(std::string name, OpClass cls, double calls, const Gemm& g);

// A bandwidth-bound op: `flops` f32 operations and `bytes` moved per call.
OpCost rows(std::string name, OpClass cls, double calls, std::string shape, double flops, double bytes);

// A ring collective over `ranks` of a buffer of `bytes`: `passes` (ranks - 1) / ranks x bytes sent
// per GPU, 2 passes for an all-reduce, 1 for a reduce-scatter or an all-gather. In HBM each GPU
// reads its buffer and writes the result (the reduction's reads of arriving data are not counted).
enum Passes { kAllReduce = 2, kHalf = 1 };
OpCost collective(std::string name, OpClass cls, double calls, std::string shape, double bytes, int ranks,
                  Passes passes, bool network = false);
// The data-parallel reduction of `params` f32 gradients over `dp` ranks: a ring all-reduce, or with
// the distributed optimizer (ZeRO-1) a reduce-scatter and the weights' all-gather. Nothing for dp 1.
void data_parallel(std::vector<OpCost>& ops, double params, int dp, bool distributed_optimizer, bool network);
// A point-to-point send of `bytes` (pipeline activations and their gradients).
OpCost send(std::string name, double calls, std::string shape, double bytes);

// "(8192, 1024)"; with a dtype: "(8192, 1024) bf16".
std::string dims(std::initializer_list<int64_t> d);
std::string dims(std::initializer_list<int64_t> d, DType t);

// The math a product of `t` operands runs at on kiln's CUDA backend.
inline Math matmul_math(DType t) { return t == DType::f32 ? Math::fp32 : Math::tensor16; }

// A weight gradient's bias gradient db (columns, f32) += the column sums of dy (rows, columns),
// taken by the weight-gradient product (MatmulOpts::bias_grad: cuBLASLt's BGRADB epilogue sums the
// columns as the product reads dy, one addition per element and no bytes of its own), then the
// sums (f32, scratch) written and added into db (both read, db written).
OpCost bias_grad_epilogue(std::string name, double calls, std::string shape, int64_t rows, int64_t columns);
// The fixed-order reductions' partial sums (backend.h): layernorm_backward sums a column over
// chunks of kLayerNormGradRows rows in f32 ... the partials of `columns` sums per chunk are written
// and read back once.
double layernorm_grad_partials(int64_t rows, int64_t columns);
// A batch-norm channel pass of two sums per channel (the forward's Σ d, Σ d²; the backward's Σ g,
// Σ g (x - mean)): f32 sums per run of kBnFloatRun rows, then f64 sums per chunk, each written and
// read back once (backend/cuda/batchnorm_bodies.h).
double bn_sum_partials(int64_t rows, int64_t channels);
// scatter_add_rows's stable sort of its `ids` on the device (backend/cuda/rows_bodies.h): the rank
// parts written and read, the order and sorted rows written and read. The ids are ranked in
// slices of kScatterRankSlice (rows_bodies.h's kRankSlice; a test keeps the two equal).
inline constexpr int64_t kScatterRankSlice = 512;
double scatter_sort_bytes(int64_t ids);

}  // namespace kiln::train::perf
