// Comm over MPI (Open MPI from Debian): the ranks of `mpirun -np N flint ...`, on one
// machine or across hosts.
//
// Every collective is a star through rank 0: the others send their part with a header
// (collective number and name), rank 0 combines in rank order and sends the result back.
// For the 2 to 16 ranks of tensor parallelism and the kilobytes of a decode step this costs
// about what MPI's own small-message algorithms do, and it buys what they cannot: rank 0
// knows which ranks arrived at which collective, so a timeout names the rank that did not
// arrive and where every other rank waits, and a rank that diverged (entered another
// collective) is reported instead of deadlocking. All waits poll with a deadline
// (--collective-timeout); when it passes, the rank prints what it knows and aborts the job
// (MPI_Abort: every rank exits non-zero). Sums are in rank order: every rank gets the same
// bits.
//
// Thread-safety: one thread at a time (MPI_THREAD_SERIALIZED); the engine thread of rank 0
// and the main thread of the others.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/comm.h"

namespace flint::dist {

// True when this process was started by an MPI launcher (mpirun / mpiexec / srun with PMIx).
bool launched_by_mpi();

class MpiComm final : public Comm {
 public:
  // Calls MPI_Init_thread. `timeout_seconds` bounds every collective.
  explicit MpiComm(double timeout_seconds);
  // Rank 0 logs the collectives' cost and sends the others an empty command (rank 0 is done:
  // see Comm::receive_command); then MPI_Finalize.
  ~MpiComm() override;
  MpiComm(const MpiComm&) = delete;
  MpiComm& operator=(const MpiComm&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  double timeout_seconds() const override { return timeout_; }
  void all_reduce_sum(float* data, size_t n, const char* what) override;
  void all_gather(const float* mine, size_t n, float* all, const char* what) override;
  void broadcast(std::vector<int32_t>& data, const char* what) override;
  std::vector<std::string> all_gather_strings(const std::string& mine, const char* what) override;
  void send_command(const std::vector<uint8_t>& bytes) override;
  void receive_command(std::vector<uint8_t>& bytes, double silence_limit_seconds) override;
  [[noreturn]] void abort_all(const std::string& why) override;

 private:
  // Gathers every rank's bytes at rank 0 (parts[r]); returns false elsewhere.
  bool gather(std::vector<uint8_t> mine, const char* what,
              std::vector<std::vector<uint8_t>>& parts);
  // Rank 0 sends `result` to every other rank; the others receive it into `result`.
  void scatter_result(std::vector<uint8_t>& result, const char* what);
  // Rank 0: `bytes` to every other rank, waiting until each took it; past the timeout,
  // on_timeout(the ranks that did not) says what is stuck.
  void send_to_others(const std::vector<uint8_t>& bytes, int tag,
                      const std::function<std::string(const std::string&)>& on_timeout);
  [[noreturn]] void timed_out(const std::string& detail);

  int rank_ = 0, size_ = 1;
  double timeout_ = 300;
  uint64_t seq_ = 0;    // collectives entered by this rank
  uint64_t bytes_ = 0;  // sent up by this rank or down by rank 0
  double seconds_ = 0;  // inside the collectives (waiting included)
  // At rank 0: per rank, the last collective it arrived at (number and name).
  std::vector<uint64_t> last_seq_;
  std::vector<std::string> last_what_;
};

}  // namespace flint::dist
