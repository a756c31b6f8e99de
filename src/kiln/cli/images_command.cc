// cli/images_command.cc — `kiln images check` and `kiln images from-idx`.
#include <cstdio>
#include <memory>
#include <sstream>
#include <string>
#include <thread>

#include "kiln/cli/commands.h"
#include "kiln/data/image/idx_to_jpeg.h"
#include "kiln/data/image/image_check.h"

namespace kiln::cli {
namespace {

void add_check(CLI::App& images) {
  struct Args {
    std::string dir;
    int threads = int(std::max(1u, std::thread::hardware_concurrency()));
  };
  auto args = std::make_shared<Args>();
  CLI::App* cmd = images.add_subcommand(
      "check", "Decode every image of DIR (train/ and val/, or one class-folder tree); report counts per "
               "class and unreadable files (exit 1 if any)");
  cmd->add_option("DIR", args->dir, "dataset folder")->required();
  cmd->add_option("--threads", args->threads, "decode threads");
  cmd->callback([args] {
    const data::ImageCheckReport report = data::check_images(args->dir, args->threads);
    const std::string text = data::format_check_report(report);
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
    if (!report.unreadable.empty()) throw CLI::RuntimeError(1);
  });
}

void add_from_idx(CLI::App& images) {
  struct Args {
    std::string images, labels, output, class_names;
    int limit = -1;
    int quality = 95;
  };
  auto args = std::make_shared<Args>();
  CLI::App* cmd = images.add_subcommand(
      "from-idx", "Write IDX images (MNIST / Fashion-MNIST, .gz or plain) as OUTPUT/<class>/<index>.JPEG");
  cmd->add_option("--images", args->images, "X-images-idx3-ubyte[.gz]")->required();
  cmd->add_option("--labels", args->labels, "X-labels-idx1-ubyte[.gz]")->required();
  cmd->add_option("--output", args->output, "output folder, e.g. DIR/train")->required();
  cmd->add_option("--limit", args->limit, "only the first N images");
  cmd->add_option("--class-names", args->class_names,
                  "comma-separated folder names by label (default: the Fashion-MNIST classes)");
  cmd->add_option("--quality", args->quality, "JPEG quality")->check(CLI::Range(1, 100));
  cmd->callback([args] {
    std::vector<std::string> names = data::fashion_mnist_class_names();
    if (!args->class_names.empty()) {
      names.clear();
      std::stringstream list(args->class_names);
      for (std::string name; std::getline(list, name, ',');) names.push_back(name);
    }
    const int64_t written =
        data::write_idx_as_jpeg_folders(args->images, args->labels, args->output, args->limit, names, args->quality);
    std::printf("wrote %lld images in %zu class folders under %s\n", static_cast<long long>(written), names.size(),
                args->output.c_str());
  });
}

}  // namespace

void add_images_command(CLI::App& app) {
  CLI::App* images = app.add_subcommand("images", "Image dataset tools");
  images->require_subcommand(1);
  add_check(*images);
  add_from_idx(*images);
}

}  // namespace kiln::cli
