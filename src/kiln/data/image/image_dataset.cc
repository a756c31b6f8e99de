// data/image/image_dataset.cc — folder scanning and ILSVRC2012 labels files.
#include "kiln/data/image/image_dataset.h"

#include <algorithm>
#include <charconv>
#include <fstream>
#include <sstream>
#include <unordered_map>

#include "kiln/core/error.h"

namespace kiln::data {
namespace fs = std::filesystem;
namespace {

std::vector<fs::path> sorted_images(const fs::path& dir) {
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (!entry.is_directory() && is_image_file_name(entry.path())) files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

std::unordered_map<std::string, int32_t> class_index(const std::vector<std::string>& classes) {
  std::unordered_map<std::string, int32_t> index;
  for (size_t i = 0; i < classes.size(); ++i) index.emplace(classes[i], int32_t(i));
  return index;
}

bool is_number(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// First word of each non-empty line of a synset map (`n01440764 tench, Tinca tinca`).
std::vector<std::string> read_synset_map(const fs::path& path) {
  std::ifstream in(path);
  KILN_CHECK(in, "synset map {}: cannot open", path.string());
  std::vector<std::string> wnids;
  std::string line, word;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    if (words >> word) wnids.push_back(word);
  }
  return wnids;
}

// A `<file> <wnid>` line's file must lie inside the image folder: no absolute path, no `..`
// (a labels file downloaded with the images must not reach files elsewhere).
bool stays_inside(const fs::path& name) {
  if (name.has_root_path()) return false;
  return std::none_of(name.begin(), name.end(), [](const fs::path& part) { return part == ".."; });
}

}  // namespace

bool is_image_file_name(const fs::path& path) {
  const std::string name = path.filename().string();
  if (name.empty() || name[0] == '.') return false;
  std::string ext = path.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  return ext == ".jpeg" || ext == ".jpg" || ext == ".png";
}

ImageFolderDataset ImageFolderDataset::open(const fs::path& dir, const std::vector<std::string>* classes) {
  KILN_CHECK(fs::is_directory(dir), "image folder {}: not a directory", dir.string());
  std::vector<std::string> folders;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (entry.is_directory() && !name.starts_with(".")) folders.push_back(name);
  }
  std::sort(folders.begin(), folders.end());
  KILN_CHECK(!folders.empty(), "image folder {}: no class sub-folders", dir.string());
  ImageFolderDataset set;
  set.root = dir;
  set.classes = classes ? *classes : folders;
  const auto index = class_index(set.classes);
  for (const std::string& folder : folders) {
    const auto it = index.find(folder);
    KILN_CHECK(it != index.end(), "image folder {}: class {} is not one of the {} training classes",
               (dir / folder).string(), folder, set.classes.size());
    const std::vector<fs::path> files = sorted_images(dir / folder);
    KILN_CHECK(!files.empty(), "class folder {}: no images (*.JPEG, *.jpg, *.png)", (dir / folder).string());
    set.files.insert(set.files.end(), files.begin(), files.end());
    set.labels.insert(set.labels.end(), files.size(), it->second);
  }
  return set;
}

ImageFolderDataset ImageFolderDataset::open_flat(const fs::path& dir, const fs::path& labels_file,
                                                 const std::vector<std::string>& classes,
                                                 const fs::path& synset_map) {
  KILN_CHECK(fs::is_directory(dir), "image folder {}: not a directory", dir.string());
  std::ifstream in(labels_file);
  KILN_CHECK(in, "labels file {}: cannot open", labels_file.string());
  const std::vector<std::string> id_wnids = synset_map.empty() ? classes : read_synset_map(synset_map);
  const auto index = class_index(classes);
  ImageFolderDataset set;
  set.root = dir;
  set.classes = classes;
  std::vector<std::pair<fs::path, int32_t>> listed;
  std::vector<int32_t> in_order;
  std::string line;
  for (int line_no = 1; std::getline(in, line); ++line_no) {
    std::istringstream words(line);
    std::string first, second;
    if (!(words >> first)) continue;
    const bool has_file = bool(words >> second);
    KILN_CHECK(has_file ? in_order.empty() : listed.empty(),
               "labels file {}: line {}: mixes `<file> <wnid>` lines with one-label lines",
               labels_file.string(), line_no);
    std::string wnid = has_file ? second : first;
    if (!has_file && is_number(first)) {
      long id = 0;
      const bool parsed = std::from_chars(first.data(), first.data() + first.size(), id).ec == std::errc();
      KILN_CHECK(parsed && id >= 1 && size_t(id) <= id_wnids.size(), "labels file {}: line {}: class id {} outside 1..{}",
                 labels_file.string(), line_no, first, id_wnids.size());
      wnid = id_wnids[size_t(id - 1)];
    }
    const auto it = index.find(wnid);
    KILN_CHECK(it != index.end(), "labels file {}: line {}: unknown synset {} (not a training class)",
               labels_file.string(), line_no, wnid);
    if (has_file) {
      KILN_CHECK(stays_inside(first), "labels file {}: line {}: image {} is outside {} (absolute or '..')",
                 labels_file.string(), line_no, first, dir.string());
      listed.emplace_back(dir / first, it->second);
    } else {
      in_order.push_back(it->second);
    }
  }
  if (!listed.empty()) {
    std::sort(listed.begin(), listed.end());
    for (auto& [file, label] : listed) {
      std::error_code error;  // e.g. a name too long for the file system: "not found" too
      KILN_CHECK(fs::exists(file, error), "labels file {}: image {} not found", labels_file.string(), file.string());
      set.files.push_back(file);
      set.labels.push_back(label);
    }
  } else {
    set.files = sorted_images(dir);
    KILN_CHECK(set.files.size() == in_order.size(), "labels file {}: {} labels for {} images in {}",
               labels_file.string(), in_order.size(), set.files.size(), dir.string());
    set.labels = std::move(in_order);
  }
  KILN_CHECK(!set.files.empty(), "image folder {}: no images", dir.string());
  return set;
}

}  // namespace kiln::data
