// fuzz/checkpoint_meta_fuzz.cc — a --load folder whose newest checkpoint's meta.json holds
// arbitrary bytes: train::find_resume_point (format check, the run settings compared with a
// bert-tiny run's) and the keys a resume reads. Anything wrong must be a kiln::Error.
#include <sstream>

#include "fuzz/fuzz_util.h"
#include "kiln/train/resume.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace fs = std::filesystem;
  const fs::path load = kiln::fuzz::temp_dir() / "load";
  fs::create_directories(load / "iter_0000004");
  std::ofstream(load / "latest_checkpointed_iteration.txt", std::ios::trunc) << "4\n";
  std::ofstream(load / "iter_0000004" / "meta.json", std::ios::binary | std::ios::trunc)
      .write(reinterpret_cast<const char*>(data), std::streamsize(size));
  using Waiver = kiln::train::RunSetting::Waiver;
  const kiln::train::RunSettings settings = {{"model.hidden_size", 128, Waiver::none},
                                             {"data.seq_length", 64, Waiver::finetune},
                                             {"train.seed", 1234, Waiver::no_load_rng},
                                             {"optim.optimizer", "lamb", Waiver::no_load_optim}};
  std::ostringstream console;
  try {
    const kiln::train::ResumePoint p = kiln::train::find_resume_point(load.string(), {}, settings, console);
    if (p.checkpoint) {
      (void)p.checkpoint->integer("step");
      (void)p.checkpoint->integer("optimizer_steps");
      (void)p.checkpoint->integer("mllog.bytes");
      if (p.checkpoint->contains("loss_scaler")) (void)p.checkpoint->at("loss_scaler");
    }
  } catch (const kiln::Error&) {
  }
  return 0;
}
