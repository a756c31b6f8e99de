// fuzz/image_labels_fuzz.cc — data::ImageFolderDataset::open_flat on an arbitrary labels file
// over a tiny flat image folder, without and with the same bytes as the synset map.
#include <string>
#include <vector>

#include "fuzz/fuzz_util.h"
#include "kiln/data/image/image_dataset.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace fs = std::filesystem;
  static const fs::path images = [] {
    const fs::path dir = kiln::fuzz::temp_dir() / "images";
    fs::create_directories(dir);
    for (const char* name : {"a.JPEG", "b.jpg", "c.png"}) kiln::fuzz::write_temp("images/" + std::string(name), nullptr, 0);
    return dir;
  }();
  static const std::vector<std::string> classes{"n01440764", "n01443537", "n01484850"};
  const fs::path labels = kiln::fuzz::write_temp("labels.txt", data, size);
  for (const fs::path& synset_map : {fs::path(), labels}) {
    try {
      const auto set = kiln::data::ImageFolderDataset::open_flat(images, labels, classes, synset_map);
      for (const int32_t label : set.labels)
        if (label < 0 || size_t(label) >= classes.size()) __builtin_trap();
    } catch (const kiln::Error&) {
    }
  }
  return 0;
}
