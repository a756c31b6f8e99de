// `kiln images check` and `kiln images from-idx` end to end.
#include <gtest/gtest.h>
#include <zlib.h>

#include "kiln/core/error.h"
#include "kiln/data/image/decode.h"
#include "kiln/data/image/idx_to_jpeg.h"
#include "kiln/data/image/jpeg_encode.h"
#include "tests/data/image/image_test_util.h"
#include "tests/testing/run_command.h"

namespace kiln::data {
namespace {

using kiln::testing::run_command;

TEST(ImagesCommand, CheckReportsCountsAndUnreadableFiles) {
  const auto dir = testing::fresh_temp_dir("check");
  testing::write_class_folders(dir / "train", {"cat", "dog"}, 3);
  testing::write_class_folders(dir / "val", {"dog"}, 2);
  auto [rc, out] = run_command(std::string(KILN_BINARY) + " images check " + dir.string());
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(out, "train: 2 classes, 6 images\n  cat 3\n  dog 3\nval: 2 classes, 2 images\n  cat 0\n  dog 2\n"
                 "all 8 images readable\n");

  testing::write_text(dir / "train" / "dog" / "zz.JPEG", "");
  std::tie(rc, out) = run_command(std::string(KILN_BINARY) + " images check --threads 2 " + dir.string());
  EXPECT_EQ(rc, 1);
  EXPECT_NE(out.find("train: 2 classes, 7 images\n  cat 3\n  dog 4\n"), std::string::npos) << out;
  EXPECT_NE(out.find("unreadable: 1 of 9 images\n  image " + (dir / "train" / "dog" / "zz.JPEG").string() +
                     ": file is empty\n"),
            std::string::npos)
      << out;
}

// A header claiming 65000 x 65000 pixels, checked under a 6 GB address-space limit: reported
// as unreadable (named), never a crash of a decode thread.
TEST(ImagesCommand, CheckReportsAnOversizedImageUnderAMemoryLimit) {
  const auto dir = testing::fresh_temp_dir("check_bomb");
  testing::write_class_folders(dir / "train", {"cat"}, 2);
  const auto pixels = testing::smooth_pixels(16, 16, 3);
  auto bytes = encode_jpeg(pixels.data(), 16, 16, 3, 90);
  for (size_t i = 0; i + 8 < bytes.size(); ++i)
    if (bytes[i] == 0xff && bytes[i + 1] == 0xc0) {
      bytes[i + 5] = bytes[i + 7] = 0xfd;  // 0xfde8 = 65000
      bytes[i + 6] = bytes[i + 8] = 0xe8;
      break;
    }
  testing::write_bytes(dir / "train" / "cat" / "bomb.JPEG", bytes);
  auto [rc, out] = run_command("ulimit -v 6000000; " + std::string(KILN_BINARY) +
                               " images check --threads 2 " + dir.string());
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find("bomb.JPEG: 65000 x 65000 pixels exceeds the limit"), std::string::npos) << out;
}

TEST(ImagesCommand, FromIdxWritesFashionMnistAsGrayJpegFolders) {
  const std::string fm = "/usr/share/datasets/fashion-mnist/";
  if (!std::filesystem::exists(fm + "t10k-images-idx3-ubyte.gz")) GTEST_SKIP() << "dataset-fashion-mnist not installed";
  const auto dir = testing::fresh_temp_dir("fromidx");
  auto [rc, out] = run_command(std::string(KILN_BINARY) + " images from-idx --images " + fm + "t10k-images-idx3-ubyte.gz --labels " +
                               fm + "t10k-labels-idx1-ubyte.gz --output " + (dir / "val").string() + " --limit 30");
  ASSERT_EQ(rc, 0) << out;
  EXPECT_EQ(out, "wrote 30 images in 10 class folders under " + (dir / "val").string() + "\n");
  const IdxImages idx = read_idx_images(fm + "t10k-images-idx3-ubyte.gz", 1);
  ASSERT_EQ(read_idx_labels(fm + "t10k-labels-idx1-ubyte.gz", 1)[0], 9);  // Ankle boot
  std::vector<uint8_t> buffer;
  Image image;
  decode_image_file(dir / "val" / "Ankle_boot" / "00000.JPEG", buffer, image);
  ASSERT_EQ(image.height, 28);
  ASSERT_EQ(image.width, 28);
  double err = 0;
  for (int i = 0; i < 28 * 28; ++i) {
    ASSERT_EQ(image.pixels[i * 3], image.pixels[i * 3 + 2]);  // written as gray
    err += std::abs(int(image.pixels[i * 3]) - int(idx.pixels[size_t(i)]));
  }
  EXPECT_LT(err / (28 * 28), 3.0);
  std::tie(rc, out) = run_command(std::string(KILN_BINARY) + " images check " + (dir / "val").string());
  EXPECT_EQ(rc, 0);
  EXPECT_NE(out.find("val: 10 classes, 30 images\n  Ankle_boot "), std::string::npos) << out;

  std::tie(rc, out) = run_command(std::string(KILN_BINARY) + " images from-idx --images " + fm + "t10k-images-idx3-ubyte.gz --labels " +
                                  fm + "t10k-labels-idx1-ubyte.gz --output " + (dir / "x").string() + " --limit 30 --class-names a,b");
  EXPECT_EQ(rc, 2);
  EXPECT_NE(out.find("t10k-labels-idx1-ubyte.gz: label 9 of image 0 has no class name (2 given)"), std::string::npos) << out;
}

// An IDX header, big-endian u32 fields, followed by `payload` bytes of data.
std::vector<uint8_t> idx_bytes(std::vector<uint32_t> fields, size_t payload) {
  std::vector<uint8_t> bytes;
  for (const uint32_t f : fields)
    for (int shift = 24; shift >= 0; shift -= 8) bytes.push_back(uint8_t(f >> shift));
  for (size_t i = 0; i < payload; ++i) bytes.push_back(uint8_t(i * 37 + 11));
  return bytes;
}

void write_gzip(const std::filesystem::path& path, const std::vector<uint8_t>& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  ASSERT_TRUE(f);
  ASSERT_EQ(gzwrite(f, bytes.data(), unsigned(bytes.size())), int(bytes.size()));
  ASSERT_EQ(gzclose(f), Z_OK);
}

// 300 images of 4096 x 4096 (5 GB) claimed by a header of a file of a few bytes, plain or gzipped,
// run under a 4 GB address-space limit: one line naming the file and the field, exit 2, before
// anything is allocated or written.
TEST(ImagesCommand, FromIdxRefusesAHeaderClaimingMoreThanTheFileHolds) {
  const auto dir = testing::fresh_temp_dir("fromidx_bomb");
  const auto labels = dir / "labels-idx1-ubyte";
  testing::write_bytes(labels, idx_bytes({0x801, 300}, 300));
  const auto plain = dir / "images-idx3-ubyte", gz = dir / "images-idx3-ubyte.gz";
  testing::write_bytes(plain, idx_bytes({0x803, 300, 4096, 4096}, 100));
  write_gzip(gz, idx_bytes({0x803, 300, 4096, 4096}, 100));
  const auto from_idx = [&](const std::filesystem::path& images) {
    return run_command("ulimit -v 4000000; " + std::string(KILN_BINARY) + " images from-idx --images " +
                       images.string() + " --labels " + labels.string() + " --output " + (dir / "out").string());
  };
  auto [rc, out] = from_idx(plain);
  EXPECT_EQ(rc, 2) << out;
  EXPECT_EQ(out, "kiln: error: IDX file " + plain.string() + ": header field count (300 images of 4096x4096) needs "
                 "5033164800 bytes of data, but the file holds 100 after its 16-byte header\n");
  std::tie(rc, out) = from_idx(gz);
  EXPECT_EQ(rc, 2) << out;
  EXPECT_EQ(out, fmt::format("kiln: error: IDX file {}: header field count (300 images of 4096x4096) needs 5033164800 "
                             "bytes of data, more than a gzip file of {} bytes can hold\n",
                             gz.string(), std::filesystem::file_size(gz)));
  EXPECT_FALSE(std::filesystem::exists(dir / "out"));
}

// Counts past 2^31 - 1 (kiln holds them as int) and labels past the end of the file.
TEST(ImagesCommand, IdxCountsAreCheckedAgainstTheFileAndTheIntRange) {
  const auto dir = testing::fresh_temp_dir("idx_counts");
  const auto file = dir / "x-idx1-ubyte";
  const auto error = [&](auto read) -> std::string {
    try {
      read();
    } catch (const Error& e) {
      return e.what();
    }
    return "no error";
  };
  testing::write_bytes(file, idx_bytes({0x801, 0xffffffffu}, 10));
  EXPECT_EQ(error([&] { read_idx_labels(file); }),
            "IDX file " + file.string() + ": header field count: 4294967295 labels is more than 2147483647");
  testing::write_bytes(file, idx_bytes({0x803, 0x80000000u, 1, 1}, 10));
  EXPECT_EQ(error([&] { read_idx_images(file); }),
            "IDX file " + file.string() + ": header field count: 2147483648 images is more than 2147483647");
  testing::write_bytes(file, idx_bytes({0x801, 11}, 10));
  EXPECT_EQ(error([&] { read_idx_labels(file, 5); }),
            "IDX file " + file.string() + ": header field count (11 labels) needs 11 bytes of data, but the file "
            "holds 10 after its 8-byte header");
  testing::write_bytes(file, idx_bytes({0x801, 10}, 10));
  EXPECT_EQ(read_idx_labels(file, 4), (std::vector<uint8_t>{11, 48, 85, 122}));
}

}  // namespace
}  // namespace kiln::data
