#include "kiln/dist/placement.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <omp.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>

#include "kiln/core/error.h"

namespace kiln::dist {
namespace {

std::vector<int> allowed_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  KILN_CHECK(sched_getaffinity(0, sizeof set, &set) == 0, "sched_getaffinity failed");
  std::vector<int> cores;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) cores.push_back(c);
  return cores;
}

void pin(const std::vector<int>& cores) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : cores) CPU_SET(c, &set);
  KILN_CHECK(sched_setaffinity(0, sizeof set, &set) == 0, "sched_setaffinity to cores {} failed",
             fmt::join(cores, ","));
}

bool env_set(const char* name) {
  const char* v = std::getenv(name);
  return v && *v;
}

}  // namespace

std::vector<int> rank_cores(const std::vector<int>& cores, int local_rank, int local_size) {
  KILN_CHECK(!cores.empty() && local_size >= 1 && local_rank >= 0 && local_rank < local_size,
             "rank_cores: rank {} of {} over {} cores", local_rank, local_size, cores.size());
  const int n = int(cores.size());
  if (n < local_size) return {cores[size_t(local_rank % n)]};
  const int base = n / local_size, extra = n % local_size;
  const int first = local_rank * base + std::min(local_rank, extra);
  const int count = base + (local_rank < extra ? 1 : 0);
  return {cores.begin() + first, cores.begin() + first + count};
}

Placement place_rank(const Communicator& comm, int64_t requested_threads) {
  Placement p;
  p.cores = allowed_cores();
  const long online = ::sysconf(_SC_NPROCESSORS_ONLN);
  const bool unbound = long(p.cores.size()) == online;
  if (comm.local_size() > 1 && unbound && !env_set("KILN_NO_PIN")) {
    p.cores = rank_cores(p.cores, comm.local_rank(), comm.local_size());
    pin(p.cores);
    p.pinned_by_kiln = true;
  }
  if (requested_threads > 0)
    p.threads = int(requested_threads);
  else if (!env_set("OMP_NUM_THREADS"))
    p.threads = int(p.cores.size());
  if (p.threads > 0) omp_set_num_threads(p.threads);
  p.threads = omp_get_max_threads();
  return p;
}

std::string Placement::describe(const Communicator& comm) const {
  return fmt::format("ranks: {} ({} on this machine); rank {}: {} {} core{} ({}), {} thread{}\n", comm.size(),
                     comm.local_size(), comm.rank(), pinned_by_kiln ? "pinned by kiln to" : "runs on",
                     cores.size(), cores.size() == 1 ? "" : "s", fmt::join(cores, ","), threads,
                     threads == 1 ? "" : "s");
}

}  // namespace kiln::dist
