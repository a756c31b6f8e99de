// core/params.h — all parameters of a model in one flat fp32 buffer, gradients in a second
// buffer with the same layout. A parameter is a named slice (offset, shape, decay flag).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "kiln/core/tensor.h"

namespace kiln {

struct ParamSpec {
  std::string name;  // Hugging Face BertForPreTraining names where they exist
  Shape shape;
  int64_t offset = 0;  // in elements, into ParamStore::values / grads
  int64_t numel = 0;
  bool decay = true;  // weight decay applies (false for biases and LayerNorm)
};

class ParamStore;

// A handle to one parameter; valid once the store is allocated.
struct Param {
  ParamStore* store = nullptr;
  int id = -1;
  float* w() const;
  float* g() const;
  const ParamSpec& spec() const;
  int64_t numel() const { return spec().numel; }
};

class ParamStore {
 public:
  // Registers a parameter; call before allocate(). Offsets are 16-element aligned.
  Param add(std::string name, Shape shape, bool decay);
  // Allocates values and grads (zeroed). After this no parameter can be added.
  void allocate();
  bool allocated() const { return !values.empty(); }

  const std::vector<ParamSpec>& specs() const { return specs_; }
  const ParamSpec* find(const std::string& name) const;
  int64_t size() const { return size_; }
  void zero_grad();

  std::vector<float> values;  // (size)
  std::vector<float> grads;   // (size)

 private:
  std::vector<ParamSpec> specs_;
  int64_t size_ = 0;
};

inline float* Param::w() const { return store->values.data() + spec().offset; }
inline float* Param::g() const { return store->grads.data() + spec().offset; }
inline const ParamSpec& Param::spec() const { return store->specs()[id]; }

}  // namespace kiln
