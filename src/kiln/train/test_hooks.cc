#include "kiln/train/test_hooks.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "kiln/core/error.h"

namespace kiln::train {

NanInjection test_nan_injection() {
  const char* v = std::getenv("KILN_TEST_NAN_STEP");
  if (!v || !*v) return {};
  char* end = nullptr;
  const long long k = std::strtoll(v, &end, 10);
  const bool onwards = *end == '+';
  if (onwards) ++end;
  if (*end != '\0' || k < 1)
    throw Error("environment variable KILN_TEST_NAN_STEP: expected a step >= 1 (or 'k+'), got '{}'", v);
  return {k, onwards};
}

LossLog::LossLog() {
  const char* path = std::getenv("KILN_TEST_LOSS_LOG");
  if (!path || !*path) return;
  file_ = std::fopen(path, "a");
  if (!file_) throw Error("KILN_TEST_LOSS_LOG file {}: cannot open: {}", path, std::strerror(errno));
}

LossLog::~LossLog() {
  if (file_) std::fclose(file_);
}

void LossLog::add(int64_t step, double loss) {
  if (!file_) return;
  fmt::print(file_, "{} {:a}\n", step, loss);
  std::fflush(file_);
}

}  // namespace kiln::train
