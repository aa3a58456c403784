// Multi-rank runs of the commands that run the model (serve, generate, bench, logits): how
// the ranks start, load their part of the model and agree that they did (docs/parallel.md).
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

#include "base/comm.h"
#include "cli/flags.h"
#include "engine/engine_config.h"
#include "model/deepseek_v4/model.h"

namespace flint::dist {
class MpiComm;
}

namespace flint::cli {

// --tensor-parallel-size, --enable-expert-parallel, --collective-timeout, --debug-fault for
// the commands with their own flag parser (serve has them in its vLLM flag table).
struct ParallelFlags {
  int64_t tensor_parallel_size = 1;
  bool expert_parallel = false;
  int64_t collective_timeout = 300;
  std::string debug_fault;
  void add_to(FlagParser& parser);
};

// main() keeps the command line, for re-executing it under mpirun.
void remember_command_line(int argc, char** argv);

// Threads for this process (for set_thread_count): `requested`; or, under MPI, the physical
// cores shared among the ranks on this host; or 0 (one per physical core).
size_t threads_for_this_rank(int64_t requested);

class Ranks {
 public:
  // tensor_parallel_size 1 outside mpirun: one process, no MPI. N > 1 outside mpirun:
  // re-executes this command line as `mpirun -np N ...` and does not return (flint starts
  // its own local ranks). Under mpirun: starts MPI and checks that the launcher started N
  // ranks. Throws flint::Error (UsageError for a mismatch).
  static Ranks start(int64_t tensor_parallel_size, double collective_timeout);
  Ranks(Ranks&&) noexcept;
  ~Ranks();

  Comm* comm() const;  // null for one process
  int rank() const { return comm_rank(comm()); }
  int size() const { return comm_size(comm()); }
  bool leader() const { return rank() == 0; }

  // Every rank loads its part of the model (the fault, if any, fires here at start-up).
  // Then the ranks agree: if any failed, rank 0 prints every failing rank's error and every
  // rank throws flint::Error; a rank that never arrives is named by the collective timeout.
  std::unique_ptr<dsv4::Model> load_model(const std::filesystem::path& dir, bool expert_parallel,
                                          const engine::DebugFault& fault);

 private:
  Ranks() = default;
  std::unique_ptr<dist::MpiComm> comm_;
};

}  // namespace flint::cli
