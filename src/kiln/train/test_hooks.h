// train/test_hooks.h — environment variables with which tests reach paths a healthy run never
// takes, or see exactly what it computed:
//   KILN_TEST_NAN_STEP=k     after the backward of step k (1-based) one gradient element becomes
//                            NaN; "k+": at every step from k on (tests/train/nonfinite_test.cc)
//   KILN_TEST_LOSS_LOG=FILE  every step appends "STEP LOSS\n" to FILE, the loss in hexadecimal
//                            floating point (exact), so the kill drills compare the losses of
//                            killed and resumed runs bit for bit (tests/train/kill_drill_test.cc)
//   KILN_TEST_RANK_FAILS=RANK:STEP:kill|hang|save  rank RANK, at the start of step STEP
//                            (1-based), SIGKILLs itself or sleeps forever outside any collective
//                            (tests/dist/mpi_failure_test.cc: --dist-timeout); save: SIGKILLs itself
//                            as the save of checkpoint STEP begins, while the writing rank saves
//                            (tests/dist/mpi_kill_resume_test.cc)
//   KILN_TEST_PARAMS_DIR=DIR  at the end of a BERT run every rank writes its parameters (its
//                            tensor-parallel parts, its pipeline stage's) to
//                            DIR/rank<world rank>.safetensors, with metadata tp_rank and tp_size
//                            (tests/dist/mpi_tensor_parallel_test.cc, mpi_pipeline_test.cc)
//   KILN_TEST_SAVE_SECONDS=S  the rank that writes checkpoints sleeps S seconds before each one,
//                            as a slow filesystem would (tests/dist/mpi_failure_test.cc:
//                            --save-timeout)
// io/checkpoint.h has KILN_TEST_KILL_IN_SAVE.
#pragma once
#include <cstdint>
#include <cstdio>

#include "kiln/nn/params.h"

namespace kiln::train {

struct NanInjection {
  int64_t step = 0;        // 0: none
  bool onwards = false;
  bool at(int64_t done) const { return step > 0 && (done == step || (onwards && done > step)); }
};
// KILN_TEST_NAN_STEP; throws kiln::Error naming the variable when its value is malformed.
NanInjection test_nan_injection();

struct RankFailure {
  enum class How { kill, hang, save };
  int rank = -1;  // -1: none
  int64_t step = 0;
  How how = How::kill;
  // kill or hang: fails as configured when this is that rank at that step; returns otherwise.
  void at(int this_rank, int64_t step_starting) const;
  // save: the same as the save of checkpoint `step_saved` begins.
  void at_save(int this_rank, int64_t step_saved) const;
};
// KILN_TEST_RANK_FAILS; throws kiln::Error naming the variable when its value is malformed.
RankFailure test_rank_failure();

// KILN_TEST_SAVE_SECONDS: sleeps that long (nothing when unset); throws kiln::Error naming the
// variable when its value is malformed.
void test_slow_save();

// KILN_TEST_LOSS_LOG; does nothing when it is not set.
class LossLog {
 public:
  LossLog();  // throws kiln::Error naming the file when it cannot be opened
  ~LossLog();
  LossLog(const LossLog&) = delete;
  LossLog& operator=(const LossLog&) = delete;
  void add(int64_t step, double loss);

 private:
  std::FILE* file_ = nullptr;
};

// KILN_TEST_PARAMS_DIR; does nothing when it is not set.
void write_params_for_test(const ParamStore& store, int world_rank, int tp_rank, int tp_size);

}  // namespace kiln::train
