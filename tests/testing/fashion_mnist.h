// tests/testing/fashion_mnist.h — small ImageNet-layout folders of real images: Fashion-MNIST
// (Debian's dataset-fashion-mnist, installed by scripts/setup.sh) written as JPEG class folders
// by `kiln images from-idx`.
#pragma once
#include <cstdlib>
#include <filesystem>
#include <string>
#include <tuple>

#include "kiln/core/error.h"
#include "tests/testing/temp_dir.h"

namespace kiln::testing {

inline const std::filesystem::path kFashionMnist = "/usr/share/datasets/fashion-mnist";

// DIR/train (first `train` images of the training set) and DIR/val (first `val` test images).
inline std::filesystem::path fashion_mnist_folders(const std::string& name, int train, int val) {
  const std::filesystem::path dir = unique_temp_dir("resnet_" + name);
  for (auto [split, source, limit] : {std::tuple{"train", "train", train}, {"val", "t10k", val}}) {
    const std::string command =
        std::string(KILN_BINARY) + " images from-idx --images " +
        (kFashionMnist / (std::string(source) + "-images-idx3-ubyte.gz")).string() + " --labels " +
        (kFashionMnist / (std::string(source) + "-labels-idx1-ubyte.gz")).string() + " --output " +
        (dir / split).string() + " --limit " + std::to_string(limit) + " > /dev/null";
    if (std::system(command.c_str()) != 0) throw Error("{} failed", command);
  }
  return dir;
}

}  // namespace kiln::testing
