// dist/parallel_layout.h — Megatron's rank layout (parallel_state.initialize_model_parallel, order
// tp-dp-pp): world = TP x DP x PP with TP varying fastest and PP slowest,
//   rank = tp_rank + TP x (dp_rank + DP x pp_rank),
// and the groups each rank belongs to: the ranks that share every other coordinate. A pure
// function of the sizes and the rank, so every rank derives the same groups without talking.
#pragma once
#include <vector>

namespace kiln::dist {

struct ParallelLayout {
  int world = 1, tp = 1, pp = 1, dp = 1;  // sizes
  int rank = 0, tp_rank = 0, pp_rank = 0, dp_rank = 0;

  // Throws kiln::Error when `world` is not a multiple of tp x pp (naming Megatron's flags).
  static ParallelLayout make(int world, int rank, int tp, int pp);

  int rank_of(int tp_rank, int dp_rank, int pp_rank) const { return tp_rank + tp * (dp_rank + dp * pp_rank); }
  // Members (global ranks, ascending) of this rank's groups.
  std::vector<int> tp_group() const;      // same dp, pp
  std::vector<int> dp_group() const;      // same tp, pp
  std::vector<int> pp_group() const;      // same tp, dp: the stages, first to last
  std::vector<int> model_group() const;   // same dp: TP x PP ranks holding one model replica
  // The first and last stage of this rank's pipeline (tied word embeddings); one rank when PP = 1.
  std::vector<int> embedding_group() const;
  bool first_stage() const { return pp_rank == 0; }
  bool last_stage() const { return pp_rank == pp - 1; }
};

}  // namespace kiln::dist
