// io/tf_bundle.h — TensorFlow's TensorBundle checkpoint (tf.train.Saver V2; MLPerf BERT's
// model.ckpt-28252 is one):
//   PREFIX.index                    an SSTable (io/sstable.h): key "" holds the BundleHeaderProto
//                                   (num_shards, endianness, version), every other key is a
//                                   variable name holding its BundleEntryProto (dtype, shape,
//                                   shard_id, offset, size, masked CRC-32C of the bytes)
//   PREFIX.data-SSSSS-of-NNNNN      the tensors' raw little-endian bytes, at `offset` in shard SSSSS
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "kiln/core/tensor.h"

namespace kiln::io {

// TensorFlow's DataType numbers kiln reads.
enum TfDataType : int { kTfFloat = 1, kTfInt64 = 9, kTfBfloat16 = 14, kTfHalf = 19 };

struct TfTensorInfo {
  std::string name;
  int dtype = 0;  // TensorFlow DataType
  Shape shape;
  int shard = 0;
  int64_t offset = 0, size = 0;  // bytes in the shard
  uint32_t masked_crc = 0;
  bool sliced = false;  // a partitioned variable (stored as slices): not read by kiln
};

class TfBundle {
 public:
  // Reads PREFIX.index. Throws kiln::Error naming the file for a malformed table or protobuf,
  // a missing header, a big-endian bundle, an entry whose shard is out of range, or a value past
  // its field's range (dtype, shard_id and num_shards are int32; offset, size and dimensions
  // below 2^63). Sizes are checked against the data file when a tensor is read.
  static TfBundle open(const std::filesystem::path& prefix);

  const std::vector<TfTensorInfo>& tensors() const { return tensors_; }  // in name order
  // The values of a DT_FLOAT, DT_HALF or DT_BFLOAT16 variable as f32, after checking its size
  // and checksum. Throws kiln::Error naming the variable and the data file.
  std::vector<float> read_f32(const TfTensorInfo& tensor) const;
  std::filesystem::path index_file() const;
  std::filesystem::path data_file(int shard) const;

 private:
  std::filesystem::path prefix_;
  int num_shards_ = 0;
  std::vector<TfTensorInfo> tensors_;
};

// "DT_FLOAT", "DT_HALF", ... or "DataType N".
std::string tf_dtype_name(int dtype);

// The prefix of the TensorFlow checkpoint at `path`: PREFIX itself, PREFIX.index, or a directory
// holding a `checkpoint` file (its model_checkpoint_path) or exactly one *.index file. Throws
// kiln::Error naming `path` when none is found.
std::filesystem::path resolve_tf_checkpoint(const std::filesystem::path& path);

}  // namespace kiln::io
