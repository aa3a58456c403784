#include "cli/ranks.h"

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <vector>

#include <fmt/format.h>

#include "base/cpu_topology.h"
#include "base/error.h"
#include "base/log.h"
#include "base/strings.h"
#include "dist/mpi_comm.h"

namespace flint::cli {

namespace {

std::vector<std::string>& command_line() {
  static std::vector<std::string> args;
  return args;
}

[[noreturn]] void relaunch_under_mpirun(int64_t ranks) {
  const std::vector<std::string>& args = command_line();
  if (args.empty()) throw Error("--tensor-parallel-size {}: the command line is unknown", ranks);
  std::vector<std::string> argv = {"mpirun", "-np", std::to_string(ranks)};
  // A rank's threads need their cores: no binding of each rank to one core, and more ranks
  // than cores are allowed (slow, but what the user asked for).
  argv.insert(argv.end(), {"--bind-to", "none", "--oversubscribe"});
  if (geteuid() == 0) argv.push_back("--allow-run-as-root");
  // This executable by its real path (/proc/self/exe would name mpirun's own once it runs).
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec)
    throw Error("--tensor-parallel-size {}: cannot find this executable: {}", ranks, ec.message());
  argv.push_back(self.string());
  argv.insert(argv.end(), args.begin() + 1, args.end());
  spdlog::info("starting {} ranks: {}", ranks, fmt::join(argv, " "));
  std::vector<char*> c;
  for (auto& a : argv) c.push_back(a.data());
  c.push_back(nullptr);
  std::fflush(stdout);
  std::fflush(stderr);
  execvp("mpirun", c.data());
  throw Error(
      "--tensor-parallel-size {} starts its ranks with mpirun, which could not be run ({}): "
      "install Open MPI (Debian's openmpi-bin; scripts/setup.sh does) or start flint under "
      "mpirun yourself",
      ranks, std::strerror(errno));
}

// Resident bytes of this process's mappings of the checkpoint's .safetensors files (from
// /proc/self/smaps): the weights this rank has actually read, whatever it declared.
uint64_t checkpoint_resident_bytes() {
  std::FILE* f = std::fopen("/proc/self/smaps", "r");
  if (f == nullptr) return 0;
  uint64_t total = 0;
  bool in_checkpoint = false;
  char line[4096];
  while (std::fgets(line, sizeof line, f) != nullptr) {
    std::string_view l(line);
    unsigned long long kb = 0;
    if (std::sscanf(line, "Rss: %llu kB", &kb) == 1) {
      if (in_checkpoint) total += kb * 1024;
    } else if (l.find(':') != 4 && l.find('-') < 17) {  // a mapping's header line
      in_checkpoint = l.find(".safetensors") != std::string_view::npos;
    }
  }
  std::fclose(f);
  return total;
}

}  // namespace

void ParallelFlags::add_to(FlagParser& parser) {
  parser.add_int(
      "--tensor-parallel-size",
      "split every layer over N ranks: under mpirun -np N, or flint starts mpirun itself",
      &tensor_parallel_size);
  parser.add_bool("--enable-expert-parallel",
                  "with several ranks, give each rank whole routed experts (else a slice of each)",
                  &expert_parallel);
  parser.add_int("--collective-timeout",
                 "seconds a collective across ranks may wait before every rank is stopped with "
                 "a report of who waits where",
                 &collective_timeout);
  parser.add_string("--debug-fault",
                    "failure tests only: RANK:fail|stall|die:STEP (STEP a number or start-up)",
                    &debug_fault);
}

void remember_command_line(int argc, char** argv) { command_line().assign(argv, argv + argc); }

size_t threads_for_this_rank(int64_t requested) {
  if (requested > 0) return static_cast<size_t>(requested);
  const char* local = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  if (local == nullptr) return 0;  // one process: set_thread_count's one per physical core
  const int cores = default_thread_count();
  return static_cast<size_t>(std::max(1, cores / std::max(1, std::atoi(local))));
}

Ranks::Ranks(Ranks&&) noexcept = default;
Ranks::~Ranks() = default;

Comm* Ranks::comm() const { return comm_.get(); }

Ranks Ranks::start(int64_t tensor_parallel_size, double collective_timeout) {
  if (tensor_parallel_size < 1) throw UsageError("--tensor-parallel-size must be at least 1");
  Ranks r;
  if (!dist::launched_by_mpi()) {
    if (tensor_parallel_size > 1) relaunch_under_mpirun(tensor_parallel_size);
    return r;
  }
  r.comm_ = std::make_unique<dist::MpiComm>(collective_timeout);
  if (r.comm_->size() != tensor_parallel_size) {
    throw UsageError("mpirun started {} ranks but --tensor-parallel-size is {}: give both the same",
                     r.comm_->size(), tensor_parallel_size);
  }
  if (r.comm_->rank() != 0) {
    // Rank 0 speaks for the job; the others log warnings and errors only, prefixed.
    spdlog::set_pattern(fmt::format("[rank {}] %l: %v", r.comm_->rank()));
    spdlog::set_level(std::max(spdlog::get_level(), spdlog::level::warn));
  }
  return r;
}

std::unique_ptr<dsv4::Model> Ranks::load_model(const std::filesystem::path& dir,
                                               bool expert_parallel,
                                               const engine::DebugFault& fault) {
  std::unique_ptr<dsv4::Model> model;
  std::string error;
  try {
    fault.trigger(rank(), -1);
    model = dsv4::load_model(dir, {}, dsv4::ModelParallel{comm(), expert_parallel});
  } catch (const std::bad_alloc&) {
    error = "out of memory while loading";
  } catch (const std::exception& e) {
    error = e.what();
  }
  if (comm() == nullptr && !error.empty()) throw Error("{}", error);
  if (comm() != nullptr) {
    const std::vector<std::string> all = comm()->all_gather_strings(error, "start-up");
    std::string failed;
    for (size_t r = 0; r < all.size(); ++r) {
      if (all[r].empty()) continue;
      failed += fmt::format("{}{}", failed.empty() ? "" : ", ", r);
      if (leader())
        fmt::print(stderr, "flint: rank {} of {} failed at start-up: {}\n", r, size(), all[r]);
    }
    if (!failed.empty()) {
      // Everyone exits only after rank 0 has printed: an exiting rank makes mpirun stop the job.
      std::fflush(stderr);
      comm()->all_gather_strings("", "start-up failure reported");
      throw Error("start-up failed on rank(s) {} (reported above by rank 0)", failed);
    }
  }
  // Each rank's share, logged by rank 0: what it keeps, what sharding copied, and what of
  // the checkpoint is resident in it (the test of "each rank reads only its part").
  const std::string mine =
      fmt::format("rank {} of {}: weights {} ({} copied by sharding), checkpoint resident {}{}",
                  rank(), size(), format_bytes(static_cast<double>(model->local_weight_bytes())),
                  format_bytes(static_cast<double>(model->shard_copy_bytes())),
                  format_bytes(static_cast<double>(checkpoint_resident_bytes())),
                  expert_parallel ? ", experts partitioned" : "");
  if (comm() == nullptr) {
    spdlog::info("{}", mine);
    return model;
  }
  for (const std::string& line : comm()->all_gather_strings(mine, "start-up report")) {
    if (leader()) spdlog::info("{}", line);
  }
  return model;
}

}  // namespace flint::cli
