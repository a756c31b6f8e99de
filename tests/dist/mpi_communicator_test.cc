// The MPI communicator on 2 ranks: this test runs itself under `mpirun -np 2` (the outer run
// launches, each rank checks). Skipped, saying why, without mpirun or MPI. Label `mpi`.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "kiln/dist/parallel_groups.h"
#include "kiln/dist/world.h"
#include "kiln/io/checkpoint.h"
#include "kiln/io/param_parts.h"
#include "kiln/train/whole_model.h"
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

  // bf16 and f16 (tensor-parallel activations): each rank's values widened, summed in rank order,
  // rounded once.
  auto small = [](int r, int i) { return float(r + 1) * 0.37f * float(i % 11 - 5) + 0.01f * float(i); };
  std::vector<uint16_t> bf(100), hf(100);
  for (int i = 0; i < 100; ++i) {
    bf[size_t(i)] = f32_to_bf16(small(rank, i));
    hf[size_t(i)] = f32_to_f16(small(rank, i));
  }
  Tensor tbf = Tensor::view(bf.data(), {100}, DType::bf16), thf = Tensor::view(hf.data(), {100}, DType::f16);
  comm.all_reduce_sum(tbf);
  comm.all_reduce_sum(thf);
  for (int i = 0; i < 100; ++i) {
    const float b0 = bf16_to_f32(f32_to_bf16(small(0, i))), b1 = bf16_to_f32(f32_to_bf16(small(1, i)));
    const float h0 = f16_to_f32(f32_to_f16(small(0, i))), h1 = f16_to_f32(f32_to_f16(small(1, i)));
    ASSERT_EQ(bf[size_t(i)], f32_to_bf16(float(double(b0) + double(b1)))) << "bf16 element " << i;
    ASSERT_EQ(hf[size_t(i)], f32_to_f16(float(double(h0) + double(h1)))) << "f16 element " << i;
  }

  std::vector<float> b = {float(rank), 2.5f * float(rank)};
  Tensor tb = Tensor::view(b.data(), {2});
  comm.broadcast(tb, 1);
  EXPECT_EQ(b, (std::vector<float>{1.0f, 2.5f}));

  // Non-blocking sums run on the communication thread while this one sums on another
  // communicator: the same bits as the blocking sum, in the order they were started.
  EXPECT_TRUE(comm.can_overlap()) << "Debian's OpenMPI provides MPI_THREAD_MULTIPLE";
  const int64_t m = 300000;
  Tensor buckets = Tensor::empty({3 * m});
  for (int64_t i = 0; i < 3 * m; ++i) buckets.ptr<float>()[i] = value(rank, i);
  std::vector<std::unique_ptr<dist::Request>> pending;
  for (int64_t k = 3; k-- > 0;) {
    Tensor part = buckets.slice_rows(k * m, (k + 1) * m);
    pending.push_back(comm.iall_reduce_sum(part));
  }
  const std::unique_ptr<dist::Communicator> other = comm.split(0, rank);
  std::vector<double> meanwhile = {double(rank) + 0.5};
  dist::all_reduce_sum(*other, meanwhile);
  EXPECT_EQ(meanwhile[0], 2.0);
  for (auto& request : pending) request->wait();
  for (int64_t i = 0; i < 3 * m; ++i)
    ASSERT_EQ(buckets.ptr<float>()[i], float(double(value(0, i)) + double(value(1, i)))) << "element " << i;
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

// Element i of the whole parameter `name`, and of its optimizer state "m" (twice as large).
float whole_value(const std::string& name, int64_t i) { return float(name.size()) + 0.25f * float(i); }

// Rank r's layout: half the rows of "split.rows" (4, 3), half the columns of "split.cols" (2, 6),
// a replicated "replica" (5), and on rank 1 only "last.stage" (2), as a later pipeline stage.
void add_rank_params(ParamStore& store, int rank) {
  store.add_part("split.rows", {4, 3}, true, 0, 2 * rank, 2);
  store.add_part("split.cols", {2, 6}, true, 1, 3 * rank, 3);
  store.add("replica", {5}, false);
  if (rank == 1) store.add("last.stage", {2}, true);
  store.allocate();
}

void fill_parts(ParamStore& store, Tensor& m) {
  for (const ParamSpec& s : store.specs()) {
    std::vector<float> whole(size_t(shape_numel(s.full_shape)));
    for (size_t i = 0; i < whole.size(); ++i) whole[i] = whole_value(s.name, int64_t(i));
    io::extract_part(s, whole.data(), store.values.ptr<float>() + s.offset);
    for (int64_t i = 0; i < s.numel; ++i) m.ptr<float>()[s.offset + i] = 2 * store.values.ptr<float>()[s.offset + i];
  }
}

void check_whole_model_on_this_rank() {
  int argc = 0;
  char** argv = nullptr;
  dist::init(argc, argv);
  dist::Communicator& world = dist::world();
  ASSERT_EQ(world.size(), 2);
  const int rank = world.rank();
  ParamStore store;
  add_rank_params(store, rank);
  Tensor m = Tensor::zeros({store.size()});
  fill_parts(store, m);

  const train::WholeModel whole = train::gather_whole_model(store, {{"m", &m}}, world);
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("kiln_whole_model_" + std::to_string(::getppid()));
  if (rank == 0) {
    const std::vector<std::string> names = {"split.rows", "split.cols", "replica", "last.stage"};
    ASSERT_EQ(whole.model.size(), names.size());
    ASSERT_EQ(whole.optimizer.size(), names.size());
    for (size_t k = 0; k < names.size(); ++k) {
      EXPECT_EQ(whole.model[k].first, names[k]);
      EXPECT_EQ(whole.optimizer[k].first, "m." + names[k]);
      const Tensor& w = whole.model[k].second;
      for (int64_t i = 0; i < w.numel(); ++i) {
        ASSERT_EQ(w.ptr<float>()[i], whole_value(names[k], i)) << names[k] << "[" << i << "]";
        ASSERT_EQ(whole.optimizer[k].second.ptr<float>()[i], 2 * whole_value(names[k], i)) << names[k];
      }
    }
    EXPECT_EQ(whole.model[0].second.shape, (Shape{4, 3}));
    EXPECT_EQ(whole.model[1].second.shape, (Shape{2, 6}));
    std::filesystem::remove_all(dir);
    io::CheckpointManager(dir, 1).save(7, whole.model, whole.optimizer, nlohmann::json{{"step", 7}});
  } else {
    EXPECT_TRUE(whole.model.empty());
  }
  world.barrier();

  // Each rank loads its own parts back out of the whole tensors.
  ParamStore loaded;
  add_rank_params(loaded, rank);
  Tensor loaded_m = Tensor::zeros({loaded.size()});
  io::load_checkpoint(dir / "iter_0000007", loaded, {{"m", &loaded_m}});
  EXPECT_EQ(loaded.values_vector(), store.values_vector());
  for (int64_t i = 0; i < store.size(); ++i) ASSERT_EQ(loaded_m.ptr<float>()[i], m.ptr<float>()[i]) << i;
  world.barrier();
  if (rank == 0) std::filesystem::remove_all(dir);
  dist::finalize();
}

TEST(MpiCommunicator, GathersModelPartsIntoWholeCheckpointTensorsThatLoadBackIntoPartsOnTwoRanks) {
  if (dist::launcher_world_size() > 0) return check_whole_model_on_this_rank();
  run_under_mpirun("GathersModelPartsIntoWholeCheckpointTensorsThatLoadBackIntoPartsOnTwoRanks", 2);
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
