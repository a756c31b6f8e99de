// core/inline_vector.h — a list of at most N values held inline, with the part of std::vector's
// interface kiln uses. A tensor's shape is one, and so are a step's loss parts: making, copying or
// slicing a Tensor and reporting a step allocate nothing on the host, so the steady-state training
// step allocates nothing in kiln's code (tests/train/memory_test.cc counts it).
#pragma once
#include <array>
#include <cstddef>
#include <initializer_list>

namespace kiln {

[[noreturn]] void throw_inline_vector_full(size_t capacity);

template <typename T, size_t N>
class InlineVector {
 public:
  static constexpr size_t kCapacity = N;

  InlineVector() = default;
  InlineVector(std::initializer_list<T> values) : InlineVector(values.begin(), values.end()) {}
  template <typename It> InlineVector(It first, It last) {
    for (; first != last; ++first) push_back(T(*first));
  }

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  T& operator[](size_t i) { return values_[i]; }
  const T& operator[](size_t i) const { return values_[i]; }
  T* begin() { return values_.data(); }
  T* end() { return values_.data() + size_; }
  const T* begin() const { return values_.data(); }
  const T* end() const { return values_.data() + size_; }
  T& front() { return values_[0]; }
  const T& front() const { return values_[0]; }
  T& back() { return values_[size_ - 1]; }
  const T& back() const { return values_[size_ - 1]; }

  void push_back(T v) {
    if (size_ == N) throw_inline_vector_full(N);
    values_[size_++] = v;
  }
  void assign(size_t n, T v) {
    if (n > N) throw_inline_vector_full(N);
    size_ = n;
    for (size_t i = 0; i < n; ++i) values_[i] = v;
  }

  friend bool operator==(const InlineVector& a, const InlineVector& b) {
    if (a.size_ != b.size_) return false;
    for (size_t i = 0; i < a.size_; ++i)
      if (!(a.values_[i] == b.values_[i])) return false;
    return true;
  }

 private:
  std::array<T, N> values_{};
  size_t size_ = 0;
};

}  // namespace kiln
