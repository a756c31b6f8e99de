// fuzz/tf_bundle_fuzz.cc — io::TfBundle::open (the LevelDB table and the bundle protobufs) on an
// arbitrary `.index` file, then a read of every tensor (the data shard is absent or short).
#include "fuzz/fuzz_util.h"
#include "kiln/io/tf_bundle.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto index = kiln::fuzz::write_temp("model.ckpt-1.index", data, size);
  try {
    const auto bundle = kiln::io::TfBundle::open(index.parent_path() / "model.ckpt-1");
    for (const auto& t : bundle.tensors()) {
      try {
        const auto values = bundle.read_f32(t);
        kiln::fuzz::touch(values.data(), values.size() * sizeof(float));
      } catch (const kiln::Error&) {
      }
    }
  } catch (const kiln::Error&) {
  }
  return 0;
}
