// Folder datasets, labels files, and the threaded loader's determinism, padding and skipping.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "kiln/core/error.h"
#include "kiln/data/image/image_loader.h"
#include "tests/data/image/image_test_util.h"

namespace kiln::data {
namespace {

namespace fs = std::filesystem;
using testing::fresh_temp_dir;
using testing::write_text;

const std::vector<std::string> kClasses = {"n01", "n02", "n03"};

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

ImageLoaderOptions small_options(bool train, int threads, int prefetch) {
  ImageLoaderOptions o;
  o.batch_size = 4;
  o.train = train;
  o.image_size = 24;
  o.resize = 28;
  o.threads = threads;
  o.prefetch = prefetch;
  o.seed = 1234;
  return o;
}

std::vector<ImageBatch> read_batches(const ImageFolderDataset& data, const ImageLoaderOptions& o, int count,
                                     LoaderPosition start = {}) {
  ImageLoader loader(data, o);
  loader.seek(start);
  std::vector<ImageBatch> out(static_cast<size_t>(count));
  for (ImageBatch& b : out) loader.next(b);
  return out;
}

class ImageLoaderTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new fs::path(fresh_temp_dir("loader"));
    testing::write_class_folders(*dir_ / "train", kClasses, 7);  // 21 images
  }
  static void TearDownTestSuite() { delete dir_; }
  static fs::path* dir_;
};
fs::path* ImageLoaderTest::dir_ = nullptr;

TEST_F(ImageLoaderTest, FolderDatasetListsSortedClassesAndFiles) {
  const auto data = ImageFolderDataset::open(*dir_ / "train");
  EXPECT_EQ(data.classes, kClasses);
  ASSERT_EQ(data.size(), 21);
  EXPECT_EQ(data.files[0], *dir_ / "train" / "n01" / "img0.JPEG");
  EXPECT_EQ(data.labels[7], 1);
  EXPECT_EQ(data.labels[20], 2);
}

TEST_F(ImageLoaderTest, BatchesDoNotDependOnThreadsOrPrefetch) {
  const auto data = ImageFolderDataset::open(*dir_ / "train");
  const auto one = read_batches(data, small_options(true, 1, 1), 12);  // two epochs of 6 batches
  const auto three = read_batches(data, small_options(true, 3, 3), 12);
  for (size_t b = 0; b < one.size(); ++b) {
    ASSERT_EQ(one[b].labels, three[b].labels) << "batch " << b;
    ASSERT_EQ(one[b].images, three[b].images) << "batch " << b;
  }
  // Each epoch is a permutation of the dataset, padded at the end, and epochs differ.
  for (int e = 0; e < 2; ++e) {
    std::multiset<int32_t> labels;
    for (int b = 0; b < 6; ++b) {
      for (const int32_t l : one[size_t(e * 6 + b)].labels) {
        if (l >= 0) labels.insert(l);
      }
    }
    EXPECT_EQ(labels, std::multiset<int32_t>(data.labels.begin(), data.labels.end()));
    EXPECT_EQ(one[size_t(e * 6 + 5)].real, 1);
  }
  EXPECT_NE(one[0].images, one[6].images);
  // Augmented pixels are mean-subtracted RGB in range.
  for (const float v : one[0].images) ASSERT_TRUE(v >= -124 && v <= 152);
}

TEST_F(ImageLoaderTest, SeekResumesWithTheSameBatches) {
  const auto data = ImageFolderDataset::open(*dir_ / "train");
  const auto all = read_batches(data, small_options(true, 2, 2), 9);
  const auto resumed = read_batches(data, small_options(true, 2, 2), 3, {1, 0});
  ASSERT_EQ(resumed[0].images, all[6].images);
  ASSERT_EQ(resumed[2].labels, all[8].labels);
  ImageLoader loader(data, small_options(true, 2, 2));
  ImageBatch batch;
  for (int i = 0; i < 7; ++i) loader.next(batch);
  EXPECT_EQ(loader.position().epoch, 1);
  EXPECT_EQ(loader.position().batch, 1);
  loader.seek({0, 2});
  loader.next(batch);
  EXPECT_EQ(batch.images, all[2].images);
}

TEST_F(ImageLoaderTest, EvalIsInFileOrderWithPaddedLastBatch) {
  const auto data = ImageFolderDataset::open(*dir_ / "train");
  auto o = small_options(false, 2, 2);
  o.batch_size = 8;
  const auto batches = read_batches(data, o, 3);
  std::vector<int32_t> labels;
  for (const auto& b : batches) labels.insert(labels.end(), b.labels.begin(), b.labels.end());
  std::vector<int32_t> expected = data.labels;
  expected.insert(expected.end(), 3, -1);
  EXPECT_EQ(labels, expected);
  EXPECT_EQ(batches[2].real, 5);
  const size_t row = size_t(24) * 24 * 3;
  for (size_t i = 5 * row; i < 8 * row; ++i) ASSERT_EQ(batches[2].images[i], 0.0f);
  // Eval has no randomness: another seed gives the same pixels.
  o.seed = 99;
  EXPECT_EQ(read_batches(data, o, 1)[0].images, batches[0].images);
}

TEST_F(ImageLoaderTest, RanksSplitEachGlobalBatch) {
  const auto data = ImageFolderDataset::open(*dir_ / "train");
  auto o = small_options(true, 2, 2);
  o.world_size = 2;
  const auto r0 = read_batches(data, o, 3);
  o.rank = 1;
  const auto r1 = read_batches(data, o, 3);
  const auto single = [&] {
    auto s = small_options(true, 2, 2);
    s.batch_size = 8;
    return read_batches(data, s, 3);
  }();
  const size_t half = size_t(4) * 24 * 24 * 3;
  for (size_t b = 0; b < 3; ++b) {
    ASSERT_TRUE(std::equal(r0[b].images.begin(), r0[b].images.end(), single[b].images.begin()));
    ASSERT_TRUE(std::equal(r1[b].images.begin(), r1[b].images.end(), single[b].images.begin() + long(half)));
  }
}

TEST(ImageLoader, LabelOutsideTheClassesIsCaughtNamingTheFile) {
  ImageFolderDataset data;
  data.root = "/data/imagenet/train";
  data.classes = {"n01", "n02"};
  data.files = {"/data/imagenet/train/n01/a.JPEG", "/data/imagenet/train/n02/b.JPEG"};
  data.labels = {0, 2};
  ImageLoaderOptions options;
  options.threads = 1;
  const std::string msg = error_of([&] { ImageLoader loader(data, options); });
  EXPECT_NE(msg.find("b.JPEG"), std::string::npos) << msg;
  EXPECT_NE(msg.find("label 2"), std::string::npos) << msg;
  data.labels = {0, -1};
  EXPECT_THROW((ImageLoader{data, options}), Error);
  data.labels = {0};
  EXPECT_THROW((ImageLoader{data, options}), Error);
}

TEST(ImageDataset, BadImagesFailOrAreSkippedAndCounted) {
  const auto dir = fresh_temp_dir("skip");
  testing::write_class_folders(dir, {"a", "b"}, 5);
  write_text(dir / "b" / "img2.JPEG", "not a jpeg");
  const auto data = ImageFolderDataset::open(dir);
  auto o = small_options(true, 2, 2);
  const std::string err = error_of([&] { read_batches(data, o, 3); });
  EXPECT_EQ(err, "image " + (dir / "b" / "img2.JPEG").string() + ": not a JPEG or PNG file (unrecognised first bytes)");

  o.skip_bad_images = true;
  ImageLoader loader(data, o);
  ImageBatch batch;
  int real = 0;
  for (int b = 0; b < 6; ++b) {  // two epochs of 3 batches
    loader.next(batch);
    real += batch.real;
  }
  EXPECT_EQ(real, 20);
  EXPECT_EQ(loader.bad_images(), 2);
  o.threads = 1;
  const auto again = read_batches(data, o, 3);
  EXPECT_NE(std::find(again[0].labels.begin(), again[0].labels.end(), 1), again[0].labels.end());
}

TEST(ImageDataset, EmptyClassFolderIsAnError) {
  const auto dir = fresh_temp_dir("emptyclass");
  testing::write_class_folders(dir, {"a"}, 2);
  fs::create_directories(dir / "b");
  write_text(dir / "b" / "notes.txt", "no images here");
  EXPECT_EQ(error_of([&] { ImageFolderDataset::open(dir); }),
            "class folder " + (dir / "b").string() + ": no images (*.JPEG, *.jpg, *.png)");
}

TEST(ImageDataset, FlatValWithLabelsFiles) {
  const auto dir = fresh_temp_dir("flat");
  const auto pixels = testing::smooth_pixels(8, 8, 3);
  for (const char* name : {"v3.JPEG", "v1.JPEG", "v2.JPEG"}) write_jpeg(dir / name, pixels.data(), 8, 8, 3);
  // ILSVRC2012 ground-truth ids (1-based) for the sorted files v1, v2, v3.
  write_text(dir / "ids.txt", "3\n1\n2\n");
  auto data = ImageFolderDataset::open_flat(dir, dir / "ids.txt", kClasses);
  EXPECT_EQ(data.files[0], dir / "v1.JPEG");
  EXPECT_EQ(data.labels, (std::vector<int32_t>{2, 0, 1}));
  // The same ids through a synset map in another order.
  write_text(dir / "map.txt", "n03 third class\nn01 first\nn02 second\n");
  data = ImageFolderDataset::open_flat(dir, dir / "ids.txt", kClasses, dir / "map.txt");
  EXPECT_EQ(data.labels, (std::vector<int32_t>{1, 2, 0}));
  // One wnid per line, and `<file> <wnid>` lines.
  write_text(dir / "wnids.txt", "n02\nn02\nn01\n");
  EXPECT_EQ(ImageFolderDataset::open_flat(dir, dir / "wnids.txt", kClasses).labels, (std::vector<int32_t>{1, 1, 0}));
  write_text(dir / "pairs.txt", "v2.JPEG n03\nv1.JPEG n01\n");
  data = ImageFolderDataset::open_flat(dir, dir / "pairs.txt", kClasses);
  EXPECT_EQ(data.files, (std::vector<fs::path>{dir / "v1.JPEG", dir / "v2.JPEG"}));
  EXPECT_EQ(data.labels, (std::vector<int32_t>{0, 2}));

  write_text(dir / "unknown.txt", "v1.JPEG n01\nv2.JPEG n02\nv3.JPEG n09999\n");
  EXPECT_EQ(error_of([&] { ImageFolderDataset::open_flat(dir, dir / "unknown.txt", kClasses); }),
            "labels file " + (dir / "unknown.txt").string() + ": line 3: unknown synset n09999 (not a training class)");
  // A file name from a downloaded labels file stays inside the folder.
  const std::vector<std::string> outside = {"../v1.JPEG", "sub/../../v1.JPEG", (dir / "v1.JPEG").string()};
  for (const std::string& name : outside) {
    write_text(dir / "escape.txt", "v2.JPEG n02\n" + name + " n01\n");
    EXPECT_EQ(error_of([&] { ImageFolderDataset::open_flat(dir, dir / "escape.txt", kClasses); }),
              "labels file " + (dir / "escape.txt").string() + ": line 2: image " + name + " is outside " +
                  dir.string() + " (absolute or '..')");
  }
  write_text(dir / "short.txt", "1\n2\n");
  EXPECT_EQ(error_of([&] { ImageFolderDataset::open_flat(dir, dir / "short.txt", kClasses); }),
            "labels file " + (dir / "short.txt").string() + ": 2 labels for 3 images in " + dir.string());
  write_text(dir / "range.txt", "1\n4\n2\n");
  EXPECT_NE(error_of([&] { ImageFolderDataset::open_flat(dir, dir / "range.txt", kClasses); }).find("line 2: class id 4 outside 1..3"),
            std::string::npos);
}

// Inputs found by fuzz/image_labels_fuzz.cc: they escaped as std::out_of_range (stol) and
// std::filesystem::filesystem_error (ENAMETOOLONG) instead of kiln::Error.
TEST(ImageDataset, FlatLabelsFuzzRegressions) {
  const auto dir = fresh_temp_dir("flatfuzz");
  const auto pixels = testing::smooth_pixels(8, 8, 3);
  write_jpeg(dir / "v1.JPEG", pixels.data(), 8, 8, 3);
  write_text(dir / "huge.txt", "8888888888888888888888888111\n18\n");
  EXPECT_EQ(error_of([&] { ImageFolderDataset::open_flat(dir, dir / "huge.txt", kClasses); }),
            "labels file " + (dir / "huge.txt").string() +
                ": line 1: class id 8888888888888888888888888111 outside 1..3");
  const std::string long_name(5000, 'x');
  write_text(dir / "long.txt", long_name + " n01\n");
  EXPECT_EQ(error_of([&] { ImageFolderDataset::open_flat(dir, dir / "long.txt", kClasses); }),
            "labels file " + (dir / "long.txt").string() + ": image " + (dir / long_name).string() +
                " not found");
}

TEST(ImageDataset, ValFolderUsesTrainClasses) {
  const auto dir = fresh_temp_dir("valclasses");
  testing::write_class_folders(dir, {"n02", "n03"}, 1);
  const auto data = ImageFolderDataset::open(dir, &kClasses);
  EXPECT_EQ(data.classes, kClasses);
  EXPECT_EQ(data.labels, (std::vector<int32_t>{1, 2}));
  testing::write_class_folders(dir, {"n05"}, 1);
  EXPECT_EQ(error_of([&] { ImageFolderDataset::open(dir, &kClasses); }),
            "image folder " + (dir / "n05").string() + ": class n05 is not one of the 3 training classes");
}

}  // namespace
}  // namespace kiln::data
