// data/image/image_dataset.h — labelled image file lists in the ImageNet layouts.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace kiln::data {

// *.JPEG, *.jpg, *.jpeg, *.png (any case), not hidden.
bool is_image_file_name(const std::filesystem::path& path);

struct ImageFolderDataset {
  std::filesystem::path root;
  std::vector<std::string> classes;         // class names (wnids); label = index
  std::vector<std::filesystem::path> files;  // sorted by (class, file name)
  std::vector<int32_t> labels;               // (files.size())

  int64_t size() const { return int64_t(files.size()); }

  // dir/<class>/<images>. Classes are the sub-folders in sorted order, or, when `classes` is
  // given (the train classes, for a val split), that list: a sub-folder not in it is an error.
  // An empty class folder is an error naming it.
  static ImageFolderDataset open(const std::filesystem::path& dir,
                                 const std::vector<std::string>* classes = nullptr);

  // A flat dir/<images> with an ILSVRC2012-style labels file, one of:
  //  - one label per line for the sorted image files: a 1-based class id (ILSVRC2012
  //    ground truth; id k names line k of `synset_map`, or classes[k-1] without one) or a wnid;
  //  - `<file name> <wnid>` lines (the listed files only).
  // `classes`: the train wnids in sorted order. A wnid not among them is an error naming the
  // wnid and the labels-file line.
  static ImageFolderDataset open_flat(const std::filesystem::path& dir,
                                      const std::filesystem::path& labels_file,
                                      const std::vector<std::string>& classes,
                                      const std::filesystem::path& synset_map = {});
};

}  // namespace kiln::data
