#include "kiln/train/test_hooks.h"

#include <fmt/format.h>

#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "kiln/core/error.h"
#include "kiln/io/safetensors.h"

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

RankFailure test_rank_failure() {
  const char* v = std::getenv("KILN_TEST_RANK_FAILS");
  if (!v || !*v) return {};
  int rank = -1, consumed = 0;
  long long step = 0;
  char how[8] = {};
  if (std::sscanf(v, "%d:%lld:%7[a-z]%n", &rank, &step, how, &consumed) != 3 || v[consumed] != '\0' ||
      rank < 0 || step < 1 ||
      (std::strcmp(how, "kill") != 0 && std::strcmp(how, "hang") != 0 && std::strcmp(how, "save") != 0))
    throw Error("environment variable KILN_TEST_RANK_FAILS: expected RANK:STEP:kill, RANK:STEP:hang or RANK:STEP:save, "
                "got '{}'", v);
  const RankFailure::How kind = std::strcmp(how, "kill") == 0   ? RankFailure::How::kill
                                : std::strcmp(how, "hang") == 0 ? RankFailure::How::hang
                                                                : RankFailure::How::save;
  return {rank, step, kind};
}

void RankFailure::at(int this_rank, int64_t step_starting) const {
  if (how == How::save || this_rank != rank || step_starting != step) return;
  std::fprintf(stderr, "KILN_TEST_RANK_FAILS: rank %d %s at step %lld\n", rank,
               how == How::hang ? "hangs" : "is killed",
               static_cast<long long>(step));
  std::fflush(stderr);
  if (how == How::kill) std::raise(SIGKILL);
  for (;;) ::pause();
}

void RankFailure::at_save(int this_rank, int64_t step_saved) const {
  if (how != How::save || this_rank != rank || step_saved != step) return;
  std::fprintf(stderr, "KILN_TEST_RANK_FAILS: rank %d is killed in the save of step %lld\n", rank,
               static_cast<long long>(step));
  std::fflush(stderr);
  std::raise(SIGKILL);
}

void test_slow_save() {
  const char* v = std::getenv("KILN_TEST_SAVE_SECONDS");
  if (!v || !*v) return;
  char* end = nullptr;
  const double seconds = std::strtod(v, &end);
  if (*end != '\0' || !(seconds >= 0))
    throw Error("environment variable KILN_TEST_SAVE_SECONDS: expected seconds >= 0, got '{}'", v);
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
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

void write_params_for_test(const ParamStore& store, int world_rank, int tp_rank, int tp_size) {
  const char* dir = std::getenv("KILN_TEST_PARAMS_DIR");
  if (!dir || !*dir) return;
  std::vector<float> values = store.values_vector();  // read back from the device where the run has one
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const ParamSpec& s : store.specs()) tensors.emplace_back(s.name, Tensor::view(values.data() + s.offset, s.shape));
  io::save_safetensors(std::filesystem::path(dir) / ("rank" + std::to_string(world_rank) + ".safetensors"),
                       tensors, {{"tp_rank", std::to_string(tp_rank)}, {"tp_size", std::to_string(tp_size)}});
}

}  // namespace kiln::train
