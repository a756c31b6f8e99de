// data/image/image_check.cc — `kiln images check`.
#include "kiln/data/image/image_check.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <thread>

#include "kiln/core/error.h"
#include "kiln/data/image/decode.h"

namespace kiln::data {
namespace fs = std::filesystem;
namespace {

bool has_subfolders(const fs::path& dir) {
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.is_directory() && !entry.path().filename().string().starts_with(".")) return true;
  }
  return false;
}

ImageFolderDataset flat_unlabelled(const fs::path& dir) {
  ImageFolderDataset set;
  set.root = dir;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (!entry.is_directory() && is_image_file_name(entry.path())) set.files.push_back(entry.path());
  }
  std::sort(set.files.begin(), set.files.end());
  KILN_CHECK(!set.files.empty(), "image folder {}: no images", dir.string());
  set.labels.assign(set.files.size(), -1);
  return set;
}

}  // namespace

ImageCheckReport check_images(const fs::path& dir, int threads) {
  KILN_CHECK(fs::is_directory(dir), "image folder {}: not a directory", dir.string());
  ImageCheckReport report;
  report.splits.reserve(2);  // train_classes points into it
  const bool split_layout = fs::is_directory(dir / "train") || fs::is_directory(dir / "val");
  if (!split_layout) {
    report.splits.push_back({dir.filename().string(), ImageFolderDataset::open(dir)});
  } else {
    const std::vector<std::string>* train_classes = nullptr;
    if (fs::is_directory(dir / "train")) {
      report.splits.push_back({"train", ImageFolderDataset::open(dir / "train")});
      train_classes = &report.splits.back().data.classes;
    }
    if (fs::is_directory(dir / "val")) {
      const fs::path val = dir / "val";
      ImageFolderDataset data = has_subfolders(val) ? ImageFolderDataset::open(val, train_classes) : flat_unlabelled(val);
      report.splits.push_back({"val", std::move(data)});
    }
  }
  std::vector<const fs::path*> files;
  for (const auto& split : report.splits) {
    for (const auto& file : split.data.files) files.push_back(&file);
  }
  report.images = int64_t(files.size());
  std::vector<std::string> errors(files.size());
  std::atomic<size_t> next{0};
  const auto work = [&] {
    std::vector<uint8_t> buffer;
    Image image;
    for (size_t i; (i = next++) < files.size();) {
      try {
        decode_image_file(*files[i], buffer, image);
      } catch (const std::exception& e) {  // decode throws kiln::Error; nothing may escape a thread
        errors[i] = e.what();
      }
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < std::max(1, threads); ++t) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  for (size_t i = 0; i < files.size(); ++i) {
    if (!errors[i].empty()) report.unreadable.push_back({*files[i], errors[i]});
  }
  return report;
}

std::string format_check_report(const ImageCheckReport& report) {
  std::string out;
  for (const auto& split : report.splits) {
    const auto& data = split.data;
    if (data.classes.empty()) {
      out += fmt::format("{}: {} images (flat folder, no labels)\n", split.name, data.size());
      continue;
    }
    std::vector<int64_t> counts(data.classes.size(), 0);
    for (const int32_t label : data.labels) ++counts[size_t(label)];
    out += fmt::format("{}: {} classes, {} images\n", split.name, data.classes.size(), data.size());
    for (size_t c = 0; c < counts.size(); ++c) out += fmt::format("  {} {}\n", data.classes[c], counts[c]);
  }
  if (report.unreadable.empty()) {
    out += fmt::format("all {} images readable\n", report.images);
  } else {
    out += fmt::format("unreadable: {} of {} images\n", report.unreadable.size(), report.images);
    for (const auto& bad : report.unreadable) out += fmt::format("  {}\n", bad.error);
  }
  return out;
}

}  // namespace kiln::data
