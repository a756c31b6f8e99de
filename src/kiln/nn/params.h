// nn/params.h — all parameters of a model in one flat fp32 buffer (the master weights), the
// gradients in a second fp32 buffer with the same layout, and, under mixed precision, a third
// buffer with the same layout holding the weights in the compute dtype (bf16 / f16), which the
// optimizer step refreshes. With bf16 on the CPU the training loop then splits the master weights
// (split_master()): the bf16 copy is their high half and a fourth buffer their low half, so that
// the f32 buffer goes. A parameter is a named slice (offset, shape, decay flag).
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "kiln/backend/backend.h"
#include "kiln/core/context.h"
#include "kiln/core/tensor.h"

namespace kiln {

struct ParamSpec {
  std::string name;  // Hugging Face BertForPreTraining names where they exist
  Shape shape;
  int64_t offset = 0;  // in elements, into ParamStore::values / grads / compute
  int64_t numel = 0;
  bool decay = true;  // weight decay applies (false for biases and LayerNorm)
  // Counted in global gradient norms on this rank. False where another rank of the model-parallel
  // group counts the same values (a replica of a parameter that tensor- or pipeline-parallel
  // ranks share), so that optim::global_grad_norm does not count it twice.
  bool norm_owner = true;
  // Tensor parallel: this rank holds `shape[part_dim]` entries of dimension `part_dim` of a
  // parameter whose whole shape is `full_shape`, from entry `part_start` on. part_dim -1: the
  // whole parameter (full_shape == shape). Checkpoints store whole parameters.
  int part_dim = -1;
  int64_t part_start = 0;
  Shape full_shape;
};

class ParamStore;

// A handle to one parameter; valid once the store is allocated.
struct Param {
  ParamStore* store = nullptr;
  int id = -1;
  // Host pointers into the master weights and gradients (host stores only: init, I/O, tests;
  // an error on a device store).
  float* w() const;
  float* g() const;
  // Views with the parameter's shape: master weights and gradients (f32), and the weights in
  // the compute dtype (the master view itself when that is f32). grad() zero-fills the gradient
  // first when nothing wrote it since ParamStore::clear_grads(): ops that only add go through it.
  // Split master weights: value() joins them into a buffer of the parameter's own, at each call
  // (small parameters that ops read in f32: biases, norms' scales).
  Tensor value() const;
  Tensor grad() const;
  Tensor compute() const;
  // The gradient a contribution goes into, and whether to add to it: false for the first
  // contribution since ParamStore::clear_grads(), which is written over the stale buffer.
  struct GradTarget {
    Tensor grad;
    bool accumulate = true;
  };
  GradTarget grad_for_write() const;
  const ParamSpec& spec() const;
  int64_t numel() const { return spec().numel; }
};

class ParamStore {
 public:
  // Registers a parameter; call before allocate(). Offsets are 16-element aligned. While
  // share_existing(true), a name registered before (same shape and decay) returns that parameter:
  // several instances of a layer then share weights and gradients (pipeline slots, train/
  // pipeline_schedule.h); otherwise a second registration is an error.
  Param add(std::string name, Shape shape, bool decay);
  void share_existing(bool on) { share_existing_ = on; }
  // Registers entries [start, start + count) of dimension `dim` of a parameter of shape `full`
  // (a tensor-parallel part; ParamSpec::part_dim).
  Param add_part(std::string name, const Shape& full, bool decay, int dim, int64_t start, int64_t count);
  // Allocates values and grads (zeroed) on ctx.device; later ops on the store run on `ctx`.
  // After this no parameter can be added.
  void allocate(Context& ctx = cpu_context());
  // With a bf16 compute copy on a device the CPU backend runs (the host, sim): keeps the master
  // weights as that copy (their high halves, rounded to nearest with ties away from zero) and
  // `low`, and frees `values`, whose views then raise an error: 16 bytes a parameter with the
  // gradients and two f32 moments, not 18. Otherwise nothing. The training loop calls it once the
  // weights are initialised or restored (init and I/O write f32 values before).
  void split_master();
  // Whether split_master() splits a store of this compute dtype on this device (dry runs ask too).
  static bool splits_master(DType compute, const Device& device) {
    return compute == DType::bf16 && device.cpu_kernels();
  }
  bool split() const { return low.defined(); }
  // The master weights that optimizers update: `values`, or `low` when split (backend.h).
  const Tensor& master() const { return split() ? low : values; }
  // out (padded_size f32) = the master weights.
  void join_master(Tensor& out) const;
  // Moves an allocated store onto ctx.device (values copied, gradients zeroed, the compute copy
  // refreshed there); later ops on it run on `ctx`. Models are built and initialised on the host,
  // then moved: a run on a GPU or the simulated device.
  void to_device(Context& ctx);
  // Before allocate(): the flat buffers get zero padding up to a multiple of `multiple` elements,
  // so that they split into equal shards (a sharded optimizer over data-parallel ranks).
  void set_padding(int64_t multiple);
  // Elements of values / grads / compute: size() and the padding.
  int64_t padded_size() const { return (size_ + padding_ - 1) / padding_ * padding_; }
  bool allocated() const { return values.defined() || low.defined(); }

  // Weights used by forward/backward: f32 (the master weights themselves), bf16 or f16 (a
  // separate copy, filled by refresh_compute()).
  void set_compute_dtype(DType dtype);
  DType compute_dtype() const { return compute_dtype_; }
  // compute = cast(values); a no-op for f32 and for split master weights.
  void refresh_compute();

  const std::vector<ParamSpec>& specs() const { return specs_; }
  void set_norm_owner(int id, bool owner) { specs_.at(size_t(id)).norm_owner = owner; }
  const ParamSpec* find(const std::string& name) const;
  int64_t size() const { return size_; }
  // One segment per parameter, in registration order (fused optimizer and norm ops take them).
  const std::vector<ops::TensorSegment>& segments() const { return segments_; }
  void zero_grad();
  // Zero gradients without a pass over memory (the training loop's step): each parameter's
  // gradient counts as zero until its first contribution, which overwrites the buffer
  // (Param::grad_for_write; the matrix products' weight gradients, almost all of a model) or
  // zero-fills it first (Param::grad). Before the flat buffer is read as a whole, settle_grads()
  // zero-fills the parameters that got no contribution.
  void clear_grads();
  // Zero-fills the unwritten gradients (above) of the parameters that overlap elements
  // [begin, end) of the flat buffer (end -1: to its end).
  void settle_grads(int64_t begin = 0, int64_t end = -1);
  // Per parameter id: whether its gradient holds a contribution (above). A replayed graph writes
  // gradients without the host's calls, so it sets what its capture left (nn::GraphedRegion).
  const std::vector<bool>& grads_written() const { return grad_written_; }
  void set_grads_written(const std::vector<bool>& written) { grad_written_ = written; }

  // Host access to the flat buffers of a host store (an error on a device store, and for values
  // once split).
  std::span<float> host_values() const { return {host_data(values), size_t(size_)}; }
  std::span<float> host_grads() const { return {host_data(grads), size_t(size_)}; }
  // Copies of the first size() elements, read back from the device where the store is there.
  std::vector<float> values_vector() const;
  std::vector<float> grads_vector() const;

  Tensor values;   // (padded_size) f32 master weights; undefined once split
  Tensor grads;    // (padded_size) f32
  Tensor compute;  // (padded_size) in compute_dtype(); undefined when that is f32
  Tensor low;      // (padded_size) u16: the split master weights' low halves, else undefined

 private:
  static float* host_data(const Tensor& flat);
  std::vector<float> read_back(const Tensor& flat) const;

  std::vector<ParamSpec> specs_;
  std::vector<ops::TensorSegment> segments_;
  int64_t size_ = 0;
  int64_t padding_ = 1;
  bool share_existing_ = false;
  DType compute_dtype_ = DType::f32;
  Context* ctx_ = &cpu_context();
  std::vector<bool> grad_written_;  // per parameter id; all true except after clear_grads()
  std::vector<Tensor> joined_;      // per parameter id: Param::value() of split master weights
  friend struct Param;
};

inline float* Param::w() const { return store->host_values().data() + spec().offset; }
inline float* Param::g() const { return store->host_grads().data() + spec().offset; }
inline const ParamSpec& Param::spec() const { return store->specs()[id]; }

}  // namespace kiln
