// The MPI communicator on 2 ranks: this test runs itself under `mpirun -np 2` (the outer run
// launches, each rank checks). Skipped, saying why, without mpirun or MPI. Label `mpi`.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "kiln/dist/parallel_groups.h"
#include "kiln/dist/world.h"
#include "tests/testing/run_command.h"

namespace kiln {
namespace {

// Rank r's value of element i: different on each rank, with f32 sums that must round.
float value(int rank, int64_t i) {
  return float((rank + 1) * ((i % 7) - 3)) * (rank == 0 ? 3e7f : 1.1f) + 0.37f * float(i % 5);
}

void check_on_this_rank() {
  int argc = 0;
  char** argv = nullptr;
  dist::init(argc, argv);
  dist::Communicator& comm = dist::world();
  ASSERT_EQ(comm.size(), 2);
  const int rank = comm.rank();

  // f32 over more than one 2^20-element chunk: the rank-order sum in f64, rounded, bit for bit.
  const int64_t n = (int64_t(1) << 20) + 3;
  Tensor t = Tensor::empty({n});
  for (int64_t i = 0; i < n; ++i) t.ptr<float>()[i] = value(rank, i);
  comm.all_reduce_sum(t);
  for (int64_t i = 0; i < n; ++i)
    ASSERT_EQ(t.ptr<float>()[i], float(double(value(0, i)) + double(value(1, i)))) << "rank " << rank << " element " << i;

  std::vector<double> d = {0.1 * (rank + 1), 1e300 * rank};
  dist::all_reduce_sum(comm, d);
  EXPECT_EQ(d, (std::vector<double>{0.1 + 0.2, 1e300}));

  std::vector<int64_t> counts = {int64_t(rank) + 5, -7}, gathered(4, 0);
  Tensor tc = Tensor::view(counts.data(), {2}, DType::i64), tg = Tensor::view(gathered.data(), {4}, DType::i64);
  comm.all_gather(tc, tg);
  EXPECT_EQ(gathered, (std::vector<int64_t>{5, -7, 6, -7}));
  comm.all_reduce_sum(tc);
  EXPECT_EQ(counts, (std::vector<int64_t>{11, -14}));

  std::vector<float> b = {float(rank), 2.5f * float(rank)};
  Tensor tb = Tensor::view(b.data(), {2});
  comm.broadcast(tb, 1);
  EXPECT_EQ(b, (std::vector<float>{1.0f, 2.5f}));
  comm.barrier();
  dist::finalize();
}

// Runs test `name` of this binary under `mpirun -np ranks`; every rank must pass it.
void run_under_mpirun(const std::string& name, int ranks) {
  if (std::system("command -v mpirun >/dev/null 2>&1") != 0) GTEST_SKIP() << "mpirun not found: install openmpi-bin";
#ifndef KILN_TEST_MPI
  GTEST_SKIP() << "kiln was built without MPI: install libopenmpi-dev and reconfigure";
#endif
  char self[4096];
  const ssize_t length = ::readlink("/proc/self/exe", self, sizeof self - 1);
  ASSERT_GT(length, 0);
  self[length] = '\0';
  const std::string command = "OMP_NUM_THREADS=1 mpirun -np " + std::to_string(ranks) + " --oversubscribe --bind-to none" +
                              (::geteuid() == 0 ? " --allow-run-as-root" : "") + " " + self +
                              " --gtest_color=no --gtest_filter=MpiCommunicator." + name;
  const auto [status, output] = testing::run_command(command);
  EXPECT_EQ(status, 0) << output;
  int passed = 0;
  for (size_t at = output.find("[  PASSED  ] 1 test"); at != std::string::npos;
       at = output.find("[  PASSED  ] 1 test", at + 1))
    ++passed;
  EXPECT_EQ(passed, ranks) << output;
}

// Four ranks as TP 2 x PP 2: groups from dist::ParallelLayout, a sum within each tensor-parallel
// pair, a reduce-scatter over the world, activations passed from the first stage to the last.
void check_groups_on_this_rank() {
  int argc = 0;
  char** argv = nullptr;
  dist::init(argc, argv);
  dist::Communicator& world = dist::world();
  ASSERT_EQ(world.size(), 4);
  const int rank = world.rank();
  const dist::ParallelGroups groups = dist::ParallelGroups::make(world, 2, 2);
  const dist::ParallelLayout& layout = groups.layout;
  const auto& tp = groups.tp;
  const auto& pp = groups.pp;
  EXPECT_EQ(groups.dp->size(), 1);
  EXPECT_EQ(groups.model->size(), 4);
  EXPECT_EQ(groups.embedding->size(), 2) << "first and last stage";
  EXPECT_EQ(tp->size(), 2);
  EXPECT_EQ(tp->rank(), layout.tp_rank);
  EXPECT_EQ(pp->rank(), layout.pp_rank);

  std::vector<double> v = {double(rank)};
  dist::all_reduce_sum(*tp, v);
  EXPECT_EQ(v[0], rank < 2 ? 0 + 1 : 2 + 3) << "only the tensor-parallel pair is summed";
  std::vector<double> e = {double(rank)};
  dist::all_reduce_sum(*groups.embedding, e);
  EXPECT_EQ(e[0], layout.tp_rank == 0 ? 0 + 2 : 1 + 3) << "the two stages of one tensor-parallel rank";

  // in[i] = 10 x rank + i over 8 elements; rank r receives the sum of elements [2r, 2r + 2).
  std::vector<float> in(8), out(2);
  for (int i = 0; i < 8; ++i) in[size_t(i)] = float(10 * rank + i);
  Tensor tin = Tensor::view(in.data(), {8}), tout = Tensor::view(out.data(), {2});
  world.reduce_scatter_sum(tin, tout);
  EXPECT_EQ(out, (std::vector<float>{float(60 + 4 * 2 * rank), float(60 + 4 * (2 * rank + 1))}));

  std::vector<uint16_t> activation(3, uint16_t(100 + rank));  // bf16-sized payload
  Tensor ta = Tensor::view(activation.data(), {3}, DType::u16);
  if (layout.first_stage()) {
    auto sent = pp->isend(ta, 1);
    sent->wait();
  } else {
    pp->recv(ta, 0);
    EXPECT_EQ(activation, std::vector<uint16_t>(3, uint16_t(100 + rank - 2))) << "from the first stage";
  }
  world.barrier();
  dist::finalize();
}

TEST(MpiCommunicator, SumsInRankOrderAndGathersAndBroadcastsOnTwoRanks) {
  if (dist::launcher_world_size() > 0) return check_on_this_rank();  // a rank started by the outer run
  run_under_mpirun("SumsInRankOrderAndGathersAndBroadcastsOnTwoRanks", 2);
}

TEST(MpiCommunicator, GroupsOfTheTp2Pp2LayoutReduceScatterAndPassTensorsOnFourRanks) {
  if (dist::launcher_world_size() > 0) return check_groups_on_this_rank();
  run_under_mpirun("GroupsOfTheTp2Pp2LayoutReduceScatterAndPassTensorsOnFourRanks", 4);
}

}  // namespace
}  // namespace kiln
