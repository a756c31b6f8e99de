#include "kiln/io/tf_bundle.h"

#include <fmt/format.h>

#include <cstring>
#include <fstream>
#include <sstream>

#include "kiln/core/dtype.h"
#include "kiln/core/error.h"
#include "kiln/core/file_util.h"
#include "kiln/io/proto_wire.h"
#include "kiln/io/sstable.h"
#include "kiln/log/crc32c.h"

namespace kiln::io {
namespace fs = std::filesystem;
namespace {

// TensorShapeProto: repeated Dim dim = 2 (Dim: int64 size = 1); bool unknown_rank = 3.
Shape parse_shape(std::string_view bytes, const std::string& what) {
  Shape shape;
  ProtoReader shape_reader(bytes, what);
  while (shape_reader.next()) {
    if (shape_reader.field() == 3 && shape_reader.varint() != 0) throw Error("{}: shape of unknown rank", what);
    if (shape_reader.field() != 2) {
      if (shape_reader.field() != 3) shape_reader.skip();
      continue;
    }
    ProtoReader dim(shape_reader.bytes(), what);
    int64_t size = 0;
    while (dim.next()) {
      if (dim.field() == 1) size = int64_t(dim.varint());
      else dim.skip();
    }
    if (size < 0) throw Error("{}: shape has a negative dimension {}", what, size);
    shape.push_back(size);
  }
  return shape;
}

TfTensorInfo parse_entry(const std::string& name, std::string_view bytes, const std::string& index) {
  const std::string what = fmt::format("{}: entry '{}'", index, name);
  TfTensorInfo t;
  t.name = name;
  ProtoReader r(bytes, what);
  while (r.next()) {
    switch (r.field()) {
      case 1: t.dtype = r.int32_field("dtype"); break;
      case 2: t.shape = parse_shape(r.bytes(), what); break;
      case 3: t.shard = r.int32_field("shard_id"); break;
      case 4: t.offset = int64_t(r.varint()); break;
      case 5: t.size = int64_t(r.varint()); break;
      case 6: t.masked_crc = r.fixed32(); break;
      case 7: t.sliced = true; r.skip(); break;
      default: r.skip();
    }
  }
  if (t.offset < 0) throw Error("{}: offset {} is 2^63 or more", what, uint64_t(t.offset));
  if (t.size < 0) throw Error("{}: size {} is 2^63 or more", what, uint64_t(t.size));
  return t;
}

size_t element_size(int dtype) {
  switch (dtype) {
    case kTfFloat: return 4;
    case kTfHalf:
    case kTfBfloat16: return 2;
    default: return 0;
  }
}

}  // namespace

std::string tf_dtype_name(int dtype) {
  switch (dtype) {
    case kTfFloat: return "DT_FLOAT";
    case 2: return "DT_DOUBLE";
    case 3: return "DT_INT32";
    case 7: return "DT_STRING";
    case kTfInt64: return "DT_INT64";
    case 10: return "DT_BOOL";
    case kTfBfloat16: return "DT_BFLOAT16";
    case kTfHalf: return "DT_HALF";
    default: return fmt::format("DataType {}", dtype);
  }
}

TfBundle TfBundle::open(const fs::path& prefix) {
  TfBundle b;
  b.prefix_ = prefix;
  const std::string index = b.index_file().string();
  if (!fs::exists(index)) throw Error("{}: no such TensorFlow checkpoint index", index);
  bool header = false;
  for (const auto& [key, value] : read_sstable(index)) {
    if (!key.empty()) {
      b.tensors_.push_back(parse_entry(key, value, index));
      continue;
    }
    // BundleHeaderProto: int32 num_shards = 1; Endianness endianness = 2 (LITTLE 0, BIG 1).
    header = true;
    ProtoReader r(value, index + ": bundle header");
    while (r.next()) {
      if (r.field() == 1) b.num_shards_ = r.int32_field("num_shards");
      else if (r.field() == 2 && r.varint() != 0) throw Error("{}: a big-endian bundle; kiln reads little-endian ones", index);
      else if (r.field() != 2) r.skip();
    }
  }
  if (!header) throw Error("{}: no bundle header (the entry with the empty key)", index);
  if (b.num_shards_ < 1) throw Error("{}: bundle header says {} shards", index, b.num_shards_);
  for (const TfTensorInfo& t : b.tensors_)
    if (t.shard < 0 || t.shard >= b.num_shards_)
      throw Error("{}: variable '{}' is in shard {}, but the bundle has {}", index, t.name, t.shard, b.num_shards_);
  return b;
}

fs::path TfBundle::index_file() const { return fs::path(prefix_.string() + ".index"); }

fs::path TfBundle::data_file(int shard) const {
  return fs::path(fmt::format("{}.data-{:05d}-of-{:05d}", prefix_.string(), shard, num_shards_));
}

std::vector<float> TfBundle::read_f32(const TfTensorInfo& t) const {
  const std::string file = data_file(t.shard).string();
  if (t.sliced) throw Error("{}: variable '{}' is partitioned into slices, which kiln does not read", file, t.name);
  const size_t elem = element_size(t.dtype);
  if (elem == 0)
    throw Error("{}: variable '{}' is {}; kiln reads DT_FLOAT, DT_HALF and DT_BFLOAT16", file, t.name,
                tf_dtype_name(t.dtype));
  std::error_code ec;
  const auto file_size = int64_t(fs::file_size(file, ec));
  if (ec) throw Error("{}: cannot open the data shard of variable '{}'", file, t.name);
  if (t.offset > file_size || t.size > file_size - t.offset)
    throw Error("{}: variable '{}' ends past the end of the file (offset {}, {} bytes)", file, t.name, t.offset, t.size);
  int64_t numel = 1;  // bounded by the byte size, so that a corrupt shape cannot overflow it
  for (const int64_t d : t.shape) numel = d != 0 && numel > t.size / d ? t.size + 1 : numel * d;
  if (t.size != numel * int64_t(elem))
    throw Error("{}: variable '{}' has {} bytes, but {} {} needs {}", file, t.name, t.size, tf_dtype_name(t.dtype),
                shape_str(t.shape), numel > t.size ? std::string("more") : std::to_string(numel * int64_t(elem)));
  std::ifstream in(file, std::ios::binary);
  std::string bytes(size_t(t.size), '\0');
  in.seekg(t.offset);
  in.read(bytes.data(), std::streamsize(bytes.size()));
  if (!in) throw Error("{}: cannot read variable '{}' (offset {}, {} bytes)", file, t.name, t.offset, t.size);
  if (log::masked_crc32c(log::crc32c(bytes)) != t.masked_crc)
    throw Error("{}: variable '{}': checksum mismatch (the data is corrupt)", file, t.name);

  std::vector<float> out(static_cast<size_t>(numel));
  const char* p = bytes.data();
  for (size_t i = 0; i < out.size(); ++i) {
    if (t.dtype == kTfFloat) {
      std::memcpy(&out[i], p + 4 * i, 4);
      continue;
    }
    uint16_t h;
    std::memcpy(&h, p + 2 * i, 2);
    out[i] = t.dtype == kTfHalf ? f16_to_f32(h) : bf16_to_f32(h);
  }
  return out;
}

fs::path resolve_tf_checkpoint(const fs::path& path) {
  if (fs::exists(path.string() + ".index")) return path;
  if (path.extension() == ".index" && fs::is_regular_file(path)) return fs::path(path).replace_extension();
  if (!fs::is_directory(path))
    throw Error("{}: not a TensorFlow checkpoint (no {}.index, and not a directory)", path.string(), path.string());
  // The `checkpoint` text file tf.train.Saver keeps: model_checkpoint_path: "model.ckpt-28252".
  const fs::path state = path / "checkpoint";
  if (fs::exists(state)) {
    std::istringstream text(read_file(state));
    std::string line, name;
    const std::string key = "model_checkpoint_path:";
    while (name.empty() && std::getline(text, line))
      if (line.rfind(key, 0) == 0) {
        const size_t open = line.find('"'), close = line.rfind('"');
        if (open != std::string::npos && close > open) name = line.substr(open + 1, close - open - 1);
      }
    if (name.empty()) throw Error("{}: no model_checkpoint_path line", state.string());
    const fs::path named(name);
    const fs::path prefix = named.is_absolute() ? named : path / named;
    if (!fs::exists(prefix.string() + ".index"))
      throw Error("{}: names {}, but {}.index does not exist", state.string(), name, prefix.string());
    return prefix;
  }
  std::vector<fs::path> found;
  for (const auto& e : fs::directory_iterator(path))
    if (e.path().extension() == ".index") found.push_back(fs::path(e.path()).replace_extension());
  if (found.size() == 1) return found[0];
  throw Error("{}: {} *.index files and no `checkpoint` file; give the checkpoint prefix (e.g. {}/model.ckpt-28252)",
              path.string(), found.size(), path.string());
}

}  // namespace kiln::io
