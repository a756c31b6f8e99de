// tests/backend/cuda_bodies.h — helpers of the CUDA body tests (cuda_bodies*_test.cc): host
// storage in each element type, its values as double, FloatPtr views, per-type tolerances and
// a body's run over its launch's grid.
#pragma once
#include <cstring>
#include <type_traits>
#include <vector>

#include "kiln/backend/cuda/grid.h"
#include "kiln/backend/cuda/hd_types.h"
#include "kiln/backend/cuda/vec_access.h"

namespace kiln::testing::cuda_bodies {

using ops::cuda::bf16_t;
using ops::cuda::f16_t;
using ops::cuda::FloatPtr;
using ops::cuda::load;
using ops::cuda::store;

// Host storage of n values in T, and their values as double.
template <typename T>
std::vector<T> stored(const std::vector<float>& v) {
  std::vector<T> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = store<T>(v[i]);
  return out;
}
template <typename T>
std::vector<double> values(const std::vector<T>& v) {
  std::vector<double> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = load(v[i]);
  return out;
}

template <typename T> double tolerance();
template <> inline double tolerance<float>() { return 2e-5; }
template <> inline double tolerance<bf16_t>() { return 1.6e-2; }
template <> inline double tolerance<f16_t>() { return 2e-3; }

// Runs fn(T{}) for every storage type.
template <typename Fn>
void for_each_type(Fn fn) {
  fn(float{});
  fn(bf16_t{});
  fn(f16_t{});
}

// The grid a launch of n items uses on an H100 or H200.
inline ops::cuda::Grid grid_of(int64_t n) { return ops::cuda::grid_for(n, ops::cuda::kH200Multiprocessors); }

// A body over items 0 .. n-1, run on the host over the grid its launch uses.
template <typename Body>
void run_all(int64_t n, const Body& body) {
  ops::cuda::run_on_host(grid_of(n), n, body);
}

// A span body (backend/cuda/vec_access.h) over its spans, on the grid its launch uses.
template <typename Body>
void run_spans(const Body& body) {
  run_all(ops::cuda::span_count(body.n, Body::W), body);
}

// The second grid of the grid-independence tests: 3 blocks of 32 threads, so that each thread
// takes many items, in another order than on the launch's grid.
template <typename Body>
void run_narrow(int64_t n, const Body& body) {
  ops::cuda::run_on_host(ops::cuda::Grid{3, 32}, n, body);
}

// Whether two host buffers hold the same bits (the vectorised bodies against the scalar ones).
template <typename T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

template <typename T>
DType dtype_of() {
  return std::is_same_v<T, float> ? DType::f32 : std::is_same_v<T, bf16_t> ? DType::bf16 : DType::f16;
}
template <typename T>
FloatPtr ptr(std::vector<T>& v) {
  return {v.data(), dtype_of<T>()};
}
template <typename T>
FloatPtr ptr(const std::vector<T>& v) {
  return {const_cast<T*>(v.data()), dtype_of<T>()};
}

}  // namespace kiln::testing::cuda_bodies
