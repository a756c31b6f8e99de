// fuzz/safetensors_fuzz.cc — io::SafetensorsFile::open + get of every tensor on arbitrary bytes.
#include "fuzz/fuzz_util.h"
#include "kiln/io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto path = kiln::fuzz::write_temp("input.safetensors", data, size);
  try {
    const auto file = kiln::io::SafetensorsFile::open(path);
    for (const auto& name : file.names()) {
      const kiln::Tensor t = file.get(name);
      kiln::fuzz::touch(t.data, t.nbytes());
    }
  } catch (const kiln::Error&) {
  }
  return 0;
}
