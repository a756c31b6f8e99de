// TensorFlow TensorBundle reading (io/tf_bundle.h, io/sstable.h) on bundles written by the
// independent Python writer tools/golden/write_tf_bundle.py: every value comes back, in one shard
// or two, f32 / f16 / bf16, from an index of many small blocks with restart points; a corrupt
// data byte or index block, a non-float dtype and a missing file are errors naming the
// variable and the file.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>

#include "kiln/core/dtype.h"
#include "kiln/io/safetensors.h"
#include "kiln/io/sstable.h"
#include "kiln/io/tf_bundle.h"
#include "tests/testing/error_of.h"
#include "tests/testing/run_command.h"
#include "tests/testing/temp_dir.h"
#include "tests/testing/tf_bundle_writer.h"

namespace kiln::io {
namespace {
namespace fs = std::filesystem;
using testing::error_of;

struct Written {
  fs::path prefix;
  std::map<std::string, std::vector<float>> values;  // what the tensors hold, as f32
  std::string writer_output;
};

// Random tensors named `names` (shape {3, i % 4 + 1}), in `dtype`, written into a bundle.
Written write_bundle(const std::string& test, const std::vector<std::string>& names, const std::string& args,
                     DType dtype = DType::f32) {
  const fs::path dir = testing::unique_temp_dir("tf_bundle_" + test);
  std::mt19937 rng(5);
  std::normal_distribution<float> normal;
  std::vector<std::pair<std::string, Tensor>> tensors;
  Written w{dir / "model.ckpt-7", {}, ""};
  for (size_t i = 0; i < names.size(); ++i) {
    Tensor t = Tensor::empty({3, int64_t(i % 4 + 1)}, dtype);
    std::vector<float>& v = w.values[names[i]];
    for (int64_t e = 0; e < t.numel(); ++e) {
      const float x = normal(rng);
      if (dtype == DType::f32) {
        t.ptr<float>()[e] = x;
        v.push_back(x);
      } else if (dtype == DType::f16) {
        t.ptr<uint16_t>()[e] = f32_to_f16(x);
        v.push_back(f16_to_f32(f32_to_f16(x)));
      } else {
        t.ptr<uint16_t>()[e] = f32_to_bf16(x);
        v.push_back(bf16_to_f32(f32_to_bf16(x)));
      }
    }
    tensors.emplace_back(names[i], t);
  }
  save_safetensors(dir / "tensors.safetensors", tensors);
  w.writer_output = testing::run_golden_script(
      "write_tf_bundle.py", (dir / "tensors.safetensors").string() + " " + w.prefix.string() + " " + args);
  return w;
}

void expect_all_values(const Written& w) {
  const TfBundle bundle = TfBundle::open(w.prefix);
  ASSERT_EQ(bundle.tensors().size(), w.values.size());
  for (const TfTensorInfo& t : bundle.tensors()) {
    ASSERT_TRUE(w.values.count(t.name)) << t.name;
    EXPECT_EQ(bundle.read_f32(t), w.values.at(t.name)) << t.name;
  }
}

const TfTensorInfo& info(const TfBundle& b, const std::string& name) {
  for (const TfTensorInfo& t : b.tensors())
    if (t.name == name) return t;
  throw Error("no {}", name);
}

TEST(TfBundle, SingleShardValuesShapesAndHeader) {
  KILN_REQUIRE_TF_WRITER();
  const Written w = write_bundle("single", {"bert/pooler/dense/kernel", "bert/pooler/dense/bias", "cls/x"}, "");
  expect_all_values(w);
  const TfBundle b = TfBundle::open(w.prefix);
  EXPECT_EQ(info(b, "cls/x").shape, (Shape{3, 3}));
  EXPECT_EQ(info(b, "cls/x").dtype, kTfFloat);
  EXPECT_EQ(b.data_file(0), fs::path(w.prefix.string() + ".data-00000-of-00001"));
  // The table also holds the header under the empty key, first.
  EXPECT_EQ(read_sstable(b.index_file()).front().first, "");
}

TEST(TfBundle, TwoShardsEachHoldingSomeTensors) {
  KILN_REQUIRE_TF_WRITER();
  const Written w = write_bundle("two_shards", {"a/kernel", "b/kernel", "c/bias", "d/gamma", "e/beta"}, "--shards 2");
  expect_all_values(w);
  const TfBundle b = TfBundle::open(w.prefix);
  EXPECT_TRUE(fs::exists(b.data_file(1)));
  EXPECT_EQ(b.data_file(1), fs::path(w.prefix.string() + ".data-00001-of-00002"));
  std::set<int> shards;
  for (const TfTensorInfo& t : b.tensors()) shards.insert(t.shard);
  EXPECT_EQ(shards, (std::set<int>{0, 1}));
}

TEST(TfBundle, ManyEntriesOverSeveralBlocksWithSharedPrefixesAndRestarts) {
  KILN_REQUIRE_TF_WRITER();
  std::vector<std::string> names;
  for (int layer = 0; layer < 12; ++layer)
    for (const char* leaf : {"attention/self/query/kernel", "attention/self/query/bias", "output/dense/kernel",
                             "output/LayerNorm/gamma"})
      names.push_back("bert/encoder/layer_" + std::to_string(layer) + "/" + leaf);
  const Written w = write_bundle("many", names, "--block-size 300 --restart-interval 3");
  const int blocks = std::stoi(w.writer_output.substr(w.writer_output.find(": ") + 2));
  EXPECT_GT(blocks, 4) << w.writer_output;
  expect_all_values(w);
  EXPECT_EQ(read_sstable(w.prefix.string() + ".index").size(), names.size() + 1);
}

TEST(TfBundle, HalfAndBfloat16AreConvertedToFloat) {
  KILN_REQUIRE_TF_WRITER();
  const Written half = write_bundle("half", {"h/kernel", "h/bias"}, "", DType::f16);
  EXPECT_EQ(info(TfBundle::open(half.prefix), "h/bias").dtype, kTfHalf);
  expect_all_values(half);
  const Written bf16 = write_bundle("bf16", {"b/kernel", "b/bias"}, "", DType::bf16);
  EXPECT_EQ(info(TfBundle::open(bf16.prefix), "b/bias").dtype, kTfBfloat16);
  expect_all_values(bf16);
}

TEST(TfBundle, OtherDtypesAreRefusedNamingTheVariable) {
  KILN_REQUIRE_TF_WRITER();
  const fs::path dir = testing::unique_temp_dir("tf_bundle_int");
  Tensor step = Tensor::empty({}, DType::i64);
  step.ptr<int64_t>()[0] = 28252;
  save_safetensors(dir / "t.safetensors", {{"global_step", step}});
  testing::run_golden_script("write_tf_bundle.py", (dir / "t.safetensors").string() + " " + (dir / "ckpt").string());
  const TfBundle b = TfBundle::open(dir / "ckpt");
  EXPECT_EQ(error_of([&] { b.read_f32(info(b, "global_step")); }),
            (dir / "ckpt.data-00000-of-00001").string() +
                ": variable 'global_step' is DT_INT64; kiln reads DT_FLOAT, DT_HALF and DT_BFLOAT16");
}

TEST(TfBundle, ACorruptDataByteIsAChecksumErrorNamingTheVariable) {
  KILN_REQUIRE_TF_WRITER();
  const Written w = write_bundle("corrupt", {"a/kernel", "b/kernel", "c/kernel"}, "");
  const TfBundle b = TfBundle::open(w.prefix);
  const TfTensorInfo& victim = info(b, "b/kernel");
  {
    std::fstream f(b.data_file(0), std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(victim.offset + 5);
    const char c = char(f.get());
    f.seekp(victim.offset + 5);
    f.put(char(c ^ 0x10));
  }
  EXPECT_EQ(error_of([&] { b.read_f32(victim); }),
            b.data_file(0).string() + ": variable 'b/kernel': checksum mismatch (the data is corrupt)");
  EXPECT_EQ(b.read_f32(info(b, "a/kernel")), w.values.at("a/kernel"));  // the others still read
}

TEST(TfBundle, ACorruptIndexBlockIsAnErrorNamingTheIndex) {
  KILN_REQUIRE_TF_WRITER();
  const Written w = write_bundle("corrupt_index", {"a/kernel", "b/kernel"}, "");
  const fs::path index = w.prefix.string() + ".index";
  {
    std::fstream f(index, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(3);
    const char c = char(f.get());
    f.seekp(3);
    f.put(char(c ^ 0x01));
  }
  EXPECT_EQ(error_of([&] { TfBundle::open(w.prefix); }), index.string() + ": data block at offset 0: checksum mismatch");
}

TEST(TfBundle, ATruncatedIndexOrMissingShardIsAnError) {
  KILN_REQUIRE_TF_WRITER();
  const Written w = write_bundle("truncated", {"a/kernel"}, "");
  const fs::path index = w.prefix.string() + ".index";
  fs::remove(w.prefix.string() + ".data-00000-of-00001");
  const TfBundle b = TfBundle::open(w.prefix);
  EXPECT_EQ(error_of([&] { b.read_f32(b.tensors()[0]); }),
            w.prefix.string() + ".data-00000-of-00001: cannot open the data shard of variable 'a/kernel'");
  fs::resize_file(index, fs::file_size(index) - 1);
  EXPECT_EQ(error_of([&] { TfBundle::open(w.prefix); }),
            index.string() + ": bad table magic (not a LevelDB/TensorFlow table)");
  EXPECT_EQ(error_of([&] { TfBundle::open(w.prefix.string() + "-9"); }),
            w.prefix.string() + "-9.index: no such TensorFlow checkpoint index");
}

TEST(TfBundle, ThePrefixIsFoundFromADirectoryItsCheckpointFileOrTheIndex) {
  KILN_REQUIRE_TF_WRITER();
  const Written w = write_bundle("resolve", {"a/kernel"}, "");
  const fs::path dir = w.prefix.parent_path();
  EXPECT_EQ(resolve_tf_checkpoint(w.prefix), w.prefix);
  EXPECT_EQ(resolve_tf_checkpoint(w.prefix.string() + ".index"), w.prefix);
  EXPECT_EQ(resolve_tf_checkpoint(dir), w.prefix);  // the only *.index
  fs::copy_file(w.prefix.string() + ".index", dir / "other.index");
  EXPECT_NE(error_of([&] { resolve_tf_checkpoint(dir); }).find("2 *.index files and no `checkpoint` file"),
            std::string::npos);
  std::ofstream(dir / "checkpoint") << "model_checkpoint_path: \"model.ckpt-7\"\n"
                                    << "all_model_checkpoint_paths: \"model.ckpt-7\"\n";
  EXPECT_EQ(resolve_tf_checkpoint(dir), w.prefix);
  std::ofstream(dir / "checkpoint") << "model_checkpoint_path: \"model.ckpt-8\"\n";
  EXPECT_EQ(error_of([&] { resolve_tf_checkpoint(dir); }),
            (dir / "checkpoint").string() + ": names model.ckpt-8, but " + (dir / "model.ckpt-8").string() +
                ".index does not exist");
  EXPECT_NE(error_of([&] { resolve_tf_checkpoint(dir / "nothing"); }).find("not a TensorFlow checkpoint"),
            std::string::npos);
}

// A bundle whose index holds `items`, a Python list of (key, value) built with the helpers of
// tools/golden/write_tf_bundle.py; `header` (one shard), `raw` (the data shard: 1.5, -2.0 as
// f32) and `crc` (its masked CRC-32C) are defined for it.
fs::path crafted_bundle(const std::string& test, const std::string& items, const std::string& table_args = "") {
  const fs::path dir = testing::unique_temp_dir("tf_bundle_" + test);
  const fs::path prefix = dir / "model.ckpt-1";
  std::ofstream(dir / "craft.py")
      << "import struct, sys\nsys.path.insert(0, '" << (fs::path(KILN_SOURCE_DIR) / "tools" / "golden").string()
      << "')\nfrom write_tf_bundle import *\nfrom write_tf_bundle import _field\n"
      << "raw = struct.pack('<2f', 1.5, -2.0)\ncrc = masked(crc32c(raw))\nheader = header_proto(1)\n"
      << "open('" << prefix.string() << ".data-00000-of-00001', 'wb').write(raw)\n"
      << "write_table('" << prefix.string() << ".index', " << items << table_args << ")\n";
  const auto [status, out] = testing::run_command("/usr/bin/python3 " + (dir / "craft.py").string());
  EXPECT_EQ(status, 0) << out;
  return prefix;
}

// Values past their field's range were narrowed: a dtype of 2^32 + 1 read as DT_FLOAT, a shard of
// 2^32 as shard 0, 2^32 + 1 shards as 1, a field number of 2^32 + 1 as field 1 (the dtype).
TEST(TfBundle, FieldValuesPastTheirRangeAreRefusedNotNarrowed) {
  KILN_REQUIRE_TF_WRITER();
  const std::string ok_entry = "entry_proto(1, [2], 0, 0, 8, crc)";
  const fs::path ok = crafted_bundle("range_ok", "[(b'', header), (b'a', " + ok_entry + ")]");
  const TfBundle bundle = TfBundle::open(ok);
  EXPECT_EQ(bundle.read_f32(info(bundle, "a")), (std::vector<float>{1.5f, -2.0f}));
  const auto refused = [&](const std::string& test, const std::string& items) {
    const fs::path prefix = crafted_bundle(test, items);
    const std::string error = error_of([&] { TfBundle::open(prefix); });
    const std::string index = prefix.string() + ".index";
    EXPECT_EQ(error.rfind(index + ": ", 0), 0u) << error;
    return error.substr(std::min(error.size(), index.size() + 2));
  };
  EXPECT_EQ(refused("dtype", "[(b'', header), (b'a', entry_proto(2**32 + 1, [2], 0, 0, 8, crc))]"),
            "entry 'a': dtype is 4294967297, expected 0 to 2147483647");
  EXPECT_EQ(refused("shard", "[(b'', header), (b'a', entry_proto(1, [2], 2**32, 0, 8, crc))]"),
            "entry 'a': shard_id is 4294967296, expected 0 to 2147483647");
  EXPECT_EQ(refused("num_shards", "[(b'', header_proto(2**32 + 1)), (b'a', " + ok_entry + ")]"),
            "bundle header: num_shards is 4294967297, expected 0 to 2147483647");
  EXPECT_EQ(refused("field", "[(b'', header), (b'a', _field(2**32 + 1, 0) + varint(1) + "
                             "entry_proto(0, [2], 0, 0, 8, crc))]"),
            "entry 'a': malformed protobuf: field number 4294967297 is past 2^29 - 1");
  EXPECT_EQ(refused("offset", "[(b'', header), (b'a', entry_proto(1, [2], 0, 2**63, 8, crc))]"),
            "entry 'a': offset 9223372036854775808 is 2^63 or more");
  EXPECT_EQ(refused("dim", "[(b'', header), (b'a', entry_proto(1, [2**63], 0, 0, 8, crc))]"),
            "entry 'a': shape has a negative dimension -9223372036854775808");
}

// 3000 keys of one more 'a' each, every one sharing all but its last byte with the one before: an
// index of ~18 KB spelling out 4.5 MB of keys (n^2 / 2; a larger n, gigabytes) is refused.
TEST(TfBundle, AnIndexWhoseKeysExpandPast64TimesItsSizeIsRefused) {
  KILN_REQUIRE_TF_WRITER();
  const fs::path prefix = crafted_bundle("expand", "[(b'', header)] + [(b'a' * k, b'') for k in range(1, 3001)]",
                                         ", block_size=1 << 30, restart_interval=1 << 30");
  const std::string error = error_of([&] { TfBundle::open(prefix); });
  EXPECT_EQ(error.rfind(prefix.string() + ".index: data block at offset 0: the keys and values expand to more than 64 "
                        "times the file's size at offset ", 0), 0u) << error;
}

}  // namespace
}  // namespace kiln::io
