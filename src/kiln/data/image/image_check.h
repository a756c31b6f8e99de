// data/image/image_check.h — decode every image of a dataset folder and report the bad ones.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "kiln/data/image/image_dataset.h"

namespace kiln::data {

struct ImageCheckReport {
  struct Split {
    std::string name;          // "train", "val", or the folder name
    ImageFolderDataset data;   // labels -1 and no classes for a flat, unlabelled folder
  };
  struct Unreadable {
    std::filesystem::path path;
    std::string error;
  };
  std::vector<Split> splits;
  std::vector<Unreadable> unreadable;  // in dataset order
  int64_t images = 0;
};

// Scans dir/train and dir/val when present (val may be flat), else dir as a class-folder
// tree, and fully decodes every image on `threads` threads.
ImageCheckReport check_images(const std::filesystem::path& dir, int threads);

// The report as printed by `kiln images check`: per split its class counts, then the
// unreadable files with their errors.
std::string format_check_report(const ImageCheckReport& report);

}  // namespace kiln::data
