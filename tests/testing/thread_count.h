// tests/testing/thread_count.h — runs a computation at 1 and at 2 OpenMP threads and requires
// bitwise-identical results: the check behind every "does not depend on the thread count" claim.
#pragma once
#include <gtest/gtest.h>
#include <omp.h>

#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

namespace kiln::testing {

template <class T>
bool bitwise_equal(const std::vector<T>& a, const std::vector<T>& b) {
  static_assert(std::is_trivially_copyable_v<T>);
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}

template <class T>
  requires std::is_arithmetic_v<T>
bool bitwise_equal(T a, T b) {
  return std::memcmp(&a, &b, sizeof(T)) == 0;
}

// `op` computes from fresh inputs and returns its outputs (a vector of trivially copyable values
// or one number); the thread count is restored afterwards.
template <class Op>
void expect_thread_count_independent(const std::string& name, Op&& op) {
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  const auto one = op();
  omp_set_num_threads(2);
  const auto two = op();
  omp_set_num_threads(saved);
  if constexpr (requires { one.empty(); }) {
    EXPECT_FALSE(one.empty()) << name << ": no results";
  }
  EXPECT_TRUE(bitwise_equal(one, two)) << name << ": results differ between 1 and 2 threads";
}

}  // namespace kiln::testing
