#include "kiln/io/safetensors.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "kiln/core/error.h"
#include "kiln/core/file_util.h"

namespace kiln::io {
namespace {
namespace fs = std::filesystem;

// Element i of the file's tensor `name` (a view of the file's memory, named while it is read).
template <typename T>
T element(const SafetensorsFile& file, const std::string& name, int64_t i) {
  const Tensor t = file.get(name);
  return t.ptr<T>()[i];
}

fs::path temp_dir() {
  return fs::temp_directory_path() / ("kiln_safetensors_" + std::to_string(getpid()));
}

fs::path temp_path(const std::string& name) {
  fs::create_directories(temp_dir());
  return temp_dir() / name;
}

class Safetensors : public ::testing::Test {
 protected:
  void TearDown() override { fs::remove_all(temp_dir()); }
};

// A file made of a literal JSON header (padded to 8) and `data_bytes` zero bytes of data.
fs::path write_raw(const std::string& name, std::string header, size_t data_bytes,
                   int64_t claimed_len = -1) {
  header.append((8 - header.size() % 8) % 8, ' ');
  const uint64_t len = claimed_len < 0 ? header.size() : uint64_t(claimed_len);
  const fs::path path = temp_path(name);
  std::ofstream out(path, std::ios::binary);
  for (int b = 0; b < 8; ++b) out.put(char(len >> (8 * b)));
  out << header << std::string(data_bytes, '\0');
  return path;
}

// Expects open() to throw a kiln::Error whose message contains every one of `parts`.
void expect_open_error(const fs::path& path, std::initializer_list<std::string> parts) {
  try {
    SafetensorsFile::open(path);
    FAIL() << "no error for " << path;
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(path.string()), std::string::npos) << msg;
    for (const auto& p : parts) EXPECT_NE(msg.find(p), std::string::npos) << msg;
  }
}

TEST_F(Safetensors, RoundTripsEveryDtypeShapeAndMetadata) {
  Tensor f = Tensor::empty({2, 3});
  for (int i = 0; i < 6; ++i) f.ptr<float>()[i] = 0.25f * i - 1.0f;
  Tensor h = Tensor::empty({3}, DType::bf16);
  for (int i = 0; i < 3; ++i) h.ptr<uint16_t>()[i] = f32_to_bf16(1.5f * i);
  Tensor q = Tensor::empty({1}, DType::u8);
  q.ptr<uint8_t>()[0] = 200;
  Tensor l = Tensor::empty({2, 1, 1}, DType::i64);
  l.ptr<int64_t>()[0] = -(int64_t(1) << 40);
  l.ptr<int64_t>()[1] = 7;
  Tensor scalar = Tensor::empty({});
  scalar.ptr<float>()[0] = 3.5f;
  Tensor none = Tensor::empty({0, 5});

  const fs::path path = temp_path("round_trip.safetensors");
  save_safetensors(path, {{"u8", q}, {"w", f}, {"h", h}, {"l", l}, {"s", scalar}, {"z", none}},
                   {{"step", "12"}, {"kind", "test"}});
  const auto file = SafetensorsFile::open(path);
  EXPECT_EQ(file.metadata().at("step"), "12");
  EXPECT_EQ(file.metadata().at("kind"), "test");
  EXPECT_EQ(file.names().size(), 6u);
  EXPECT_EQ(file.names().front(), "l");  // 8-byte elements first keeps every tensor aligned
  EXPECT_TRUE(file.contains("w"));
  EXPECT_FALSE(file.contains("missing"));

  const Tensor w = file.get("w");
  ASSERT_EQ(w.shape, (Shape{2, 3}));
  ASSERT_EQ(w.dtype, DType::f32);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(w.ptr<float>()[i], f.ptr<float>()[i]);
  const Tensor hb = file.get("h");
  EXPECT_EQ(hb.dtype, DType::bf16);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(bf16_to_f32(hb.ptr<uint16_t>()[i]), 1.5f * i);
  EXPECT_EQ(element<uint8_t>(file, "u8", 0), 200);
  EXPECT_EQ(file.get("l").shape, (Shape{2, 1, 1}));
  EXPECT_EQ(element<int64_t>(file, "l", 0), -(int64_t(1) << 40));
  EXPECT_EQ(file.get("s").shape, Shape{});
  EXPECT_EQ(element<float>(file, "s", 0), 3.5f);
  EXPECT_EQ(file.get("z").numel(), 0);
  EXPECT_THROW(file.get("missing"), Error);
}

TEST_F(Safetensors, TensorsOutliveTheFileObjectAndWritesStayPrivate) {
  Tensor f = Tensor::zeros({4});
  f.ptr<float>()[2] = 9.0f;
  const fs::path path = temp_path("private.safetensors");
  save_safetensors(path, {{"x", f}});
  Tensor t;
  {
    const auto file = SafetensorsFile::open(path);
    t = file.get("x");
  }
  EXPECT_EQ(t.ptr<float>()[2], 9.0f);
  t.ptr<float>()[2] = -1.0f;  // copy-on-write: the file keeps its value
  EXPECT_EQ(element<float>(SafetensorsFile::open(path), "x", 2), 9.0f);
}

TEST_F(Safetensors, SaveRejectsDuplicateAndReservedNames) {
  const Tensor t = Tensor::zeros({2});
  EXPECT_THROW(save_safetensors(temp_path("dup.safetensors"), {{"a", t}, {"a", t}}), Error);
  EXPECT_THROW(save_safetensors(temp_path("meta.safetensors"), {{"__metadata__", t}}), Error);
  EXPECT_FALSE(fs::exists(temp_path("dup.safetensors")));
}

TEST_F(Safetensors, ReadsFileWrittenByPython) {
  const auto file =
      SafetensorsFile::open(fs::path(KILN_SOURCE_DIR) / "tests/golden/python_sample.safetensors");
  EXPECT_EQ(file.metadata().at("format"), "pt");
  const Tensor f = file.get("f32");
  ASSERT_EQ(f.shape, (Shape{2, 3}));
  for (int i = 0; i < 6; ++i) EXPECT_EQ(f.ptr<float>()[i], 0.5f * i - 1.0f);
  const Tensor b = file.get("bf16");
  EXPECT_EQ(bf16_to_f32(b.ptr<uint16_t>()[1]), -2.5f);
  EXPECT_EQ(bf16_to_f32(b.ptr<uint16_t>()[2]), 3.140625f);
  const Tensor h = file.get("f16");
  EXPECT_EQ(h.dtype, DType::f16);
  EXPECT_EQ(f16_to_f32(h.ptr<uint16_t>()[1]), -1.25f);
  EXPECT_EQ(f16_to_f32(h.ptr<uint16_t>()[2]), 65504.0f);
  EXPECT_EQ(element<int32_t>(file, "i32", 0), -7);
  EXPECT_EQ(element<int32_t>(file, "i32", 2), 2147483647);
  EXPECT_EQ(file.get("i64").shape, (Shape{2, 1}));
  EXPECT_EQ(element<int64_t>(file, "i64", 0), -(int64_t(1) << 40));
  EXPECT_EQ(element<uint16_t>(file, "u16", 1), 65535);
  EXPECT_EQ(element<uint8_t>(file, "u8", 3), 255);
  EXPECT_EQ(file.get("scalar").shape, Shape{});
  EXPECT_EQ(element<float>(file, "scalar", 0), 42.0f);
  EXPECT_EQ(file.get("empty").shape, (Shape{0, 4}));
}

TEST_F(Safetensors, RejectsCorruptFilesWithTheFileAndTensorName) {
  const std::string ok_entry = R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  EXPECT_NO_THROW(SafetensorsFile::open(write_raw("ok.safetensors", ok_entry, 8)));

  const fs::path tiny = temp_path("tiny.safetensors");
  std::ofstream(tiny, std::ios::binary) << "abc";
  expect_open_error(tiny, {"shorter than"});
  expect_open_error(write_raw("len.safetensors", ok_entry, 8, 1 << 20), {"header length"});
  expect_open_error(write_raw("json.safetensors", R"({"t":{"dtype":)", 8), {"JSON"});
  expect_open_error(write_raw("array.safetensors", "[1,2]", 0), {"JSON object"});
  expect_open_error(write_raw("dtype.safetensors",
                              R"({"t":{"dtype":"F8_E5M2","shape":[1],"data_offsets":[0,1]}})", 8),
                    {"'t'", "F8_E5M2"});
  expect_open_error(write_raw("range.safetensors", ok_entry, 4), {"'t'", "outside"});
  expect_open_error(write_raw("size.safetensors",
                              R"({"t":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 16),
                    {"'t'", "expected 12"});
  expect_open_error(write_raw("neg.safetensors",
                              R"({"t":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", 8),
                    {"'t'", "negative"});
  expect_open_error(write_raw("missing.safetensors", R"({"t":{"dtype":"F32","shape":[2]}})", 8),
                    {"'t'", "data_offsets"});
  expect_open_error(
      write_raw("overlap.safetensors",
                R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                12),
      {"'a'", "'b'", "overlap"});
  expect_open_error(write_raw("meta.safetensors", R"({"__metadata__":{"k":1}})", 0),
                    {"__metadata__", "'k'"});
  expect_open_error(temp_path("does_not_exist.safetensors"), {"cannot open"});
}

// save_safetensors wrote F64 tensors that open() refused: every dtype written is read back.
TEST_F(Safetensors, F64TensorsAreReadBackAsWritten) {
  Tensor d = Tensor::empty({3}, DType::f64);
  for (int i = 0; i < 3; ++i) d.ptr<double>()[i] = 1.0 / (i + 3) + 1e-12 * i;
  Tensor f = Tensor::empty({2});
  f.ptr<float>()[0] = 0.5f;
  f.ptr<float>()[1] = -2.25f;
  const fs::path path = temp_path("f64.safetensors");
  save_safetensors(path, {{"f", f}, {"d", d}});
  const auto file = SafetensorsFile::open(path);
  const Tensor back = file.get("d");
  ASSERT_EQ(back.dtype, DType::f64);
  ASSERT_EQ(back.shape, Shape{3});
  for (int i = 0; i < 3; ++i) EXPECT_EQ(back.ptr<double>()[i], d.ptr<double>()[i]);
  EXPECT_EQ(element<float>(file, "f", 1), -2.25f);
}

// A dimension of 2^63 or more was stored as a negative int64 (an empty tensor of shape
// (-2^63, 0) opened); non-zero dimensions whose product overflows are refused though a zero
// makes the element count 0.
TEST_F(Safetensors, DimensionsPast2To63AndOverflowingProductsAreRefused) {
  expect_open_error(write_raw("dim63.safetensors",
                              R"({"t":{"dtype":"F32","shape":[9223372036854775808,0],"data_offsets":[0,0]}})", 0),
                    {"'t'", "[9223372036854775808,0]", "a dimension of 2^63 or more"});
  expect_open_error(write_raw("dim64.safetensors",
                              R"({"t":{"dtype":"U8","shape":[0,18446744073709551615],"data_offsets":[0,0]}})", 0),
                    {"'t'", "a dimension of 2^63 or more"});
  expect_open_error(write_raw("product.safetensors",
                              R"({"t":{"dtype":"U8","shape":[4611686018427387904,4,0],"data_offsets":[0,0]}})", 0),
                    {"'t'", "[4611686018427387904,4,0]", "overflows 64 bits"});
  const auto file = SafetensorsFile::open(write_raw(
      "wide_empty.safetensors", R"({"t":{"dtype":"U8","shape":[4611686018427387904,0],"data_offsets":[0,0]}})", 0));
  EXPECT_EQ(file.get("t").shape, (Shape{int64_t(1) << 62, 0}));
  EXPECT_EQ(file.get("t").numel(), 0);
}

}  // namespace
}  // namespace kiln::io
