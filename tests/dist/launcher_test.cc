// dist::detect_launcher: the process count and rank each launcher's variables give (mpirun,
// srun --mpi=pmi2, srun --mpi=pmix, plain srun), and the check that MPI sees the same world.
#include <gtest/gtest.h>

#include <string>

#include "kiln/core/error.h"
#include "kiln/dist/world.h"
#include "tests/testing/error_of.h"
#include "tests/testing/fake_communicator.h"
#include "tests/testing/scoped_env.h"

namespace kiln::dist {
namespace {
using testing::ScopedEnv;

// Every launcher variable unset for the test's scope (a test may itself run under mpirun).
struct NoLauncher {
  ScopedEnv vars[8] = {{"OMPI_COMM_WORLD_SIZE", nullptr}, {"OMPI_COMM_WORLD_RANK", nullptr},
                       {"PMI_SIZE", nullptr},             {"PMI_RANK", nullptr},
                       {"PMIX_RANK", nullptr},            {"SLURM_PROCID", nullptr},
                       {"SLURM_STEP_NUM_TASKS", nullptr}, {"SLURM_NTASKS", nullptr}};
};

TEST(Launcher, NoVariablesMeansOneProcessOnItsOwn) {
  NoLauncher none;
  EXPECT_EQ(detect_launcher().size, 0);
  // A batch script's own shell has the allocation's task count but was not started by srun.
  ScopedEnv ntasks("SLURM_NTASKS", "8");
  ScopedEnv procid("SLURM_PROCID", "0");
  EXPECT_EQ(detect_launcher().size, 0);
}

TEST(Launcher, EachLaunchersVariablesGiveSizeAndRank) {
  struct Case {
    const char *size_var, *size, *rank_var, *rank, *name;
  };
  const Case cases[] = {{"OMPI_COMM_WORLD_SIZE", "4", "OMPI_COMM_WORLD_RANK", "3", "mpirun"},
                        {"PMI_SIZE", "2", "PMI_RANK", "1", "PMI (srun --mpi=pmi2 or Hydra)"},
                        {"SLURM_STEP_NUM_TASKS", "16", "PMIX_RANK", "9", "srun --mpi=pmix"},
                        {"SLURM_STEP_NUM_TASKS", "6", "SLURM_PROCID", "5", "srun"}};
  for (const Case& c : cases) {
    NoLauncher none;
    ScopedEnv size(c.size_var, c.size), rank(c.rank_var, c.rank);
    const Launcher l = detect_launcher();
    EXPECT_EQ(l.size, std::stoi(c.size)) << c.name;
    EXPECT_EQ(l.rank, std::stoi(c.rank)) << c.name;
    EXPECT_EQ(std::string(l.name), c.name);
  }
  // srun with PMIx sets SLURM_PROCID too: PMIx's rank is the one MPI will report.
  NoLauncher none;
  ScopedEnv tasks("SLURM_STEP_NUM_TASKS", "4"), pmix("PMIX_RANK", "2"), procid("SLURM_PROCID", "2");
  EXPECT_EQ(std::string(detect_launcher().name), "srun --mpi=pmix");
}

TEST(Launcher, AnMpiThatDoesNotSpeakTheLaunchersProtocolIsRefused) {
  const Launcher srun{"srun --mpi=pmix", 4, 2};
  testing::FakeCommunicator same(4, 2), singleton(1, 0);
  EXPECT_NO_THROW(check_launched_world(srun, same));
  EXPECT_EQ(testing::error_of([&] { check_launched_world(srun, singleton); }),
            "srun --mpi=pmix started 4 processes (this one rank 2), but MPI sees rank 0 of 1: this MPI library does "
            "not speak that launcher's protocol (with srun, try --mpi=pmix or --mpi=pmi2, or use mpirun)");
}

}  // namespace
}  // namespace kiln::dist
