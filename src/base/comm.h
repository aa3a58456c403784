// The collectives tensor and expert parallelism need, as the model and the engine see them.
// One implementation talks MPI (src/dist); a single process needs none (every caller treats
// a null Comm as one rank).
//
// Contract, which the MPI implementation keeps and its tests check:
// - every rank calls the same collectives in the same order (each names itself with `what`,
//   e.g. "attention output, layer 3", so that a rank that diverged is named, not waited for);
// - all_reduce_sum adds the ranks' values in rank order, so every rank gets the same bits
//   and a run is reproducible;
// - a collective that does not complete within the configured timeout prints which ranks
//   arrived, which did not and where each one waits, and ends every process with a non-zero
//   status: it never returns an error and never hangs silently.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace flint {

class Comm {
 public:
  virtual ~Comm() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // How long a collective may wait (--collective-timeout); also how long a rank waits for
  // rank 0's next command or heartbeat.
  virtual double timeout_seconds() const = 0;

  // data[0, n) := the sum over ranks of every rank's data[0, n).
  virtual void all_reduce_sum(float* data, size_t n, const char* what) = 0;
  // all[r * n, (r + 1) * n) := rank r's mine[0, n), on every rank.
  virtual void all_gather(const float* mine, size_t n, float* all, const char* what) = 0;
  // data := rank 0's data, on every rank (whatever size the others passed): rank 0's
  // decisions (the draft tokens it picked) for the others' next forward call.
  virtual void broadcast(std::vector<int32_t>& data, const char* what) = 0;
  // Every rank's string, on every rank (index = rank).
  virtual std::vector<std::string> all_gather_strings(const std::string& mine,
                                                      const char* what) = 0;

  // The command channel from rank 0 (the scheduler) to the others, outside the collectives:
  // rank 0 sends each step's command (or an idle heartbeat); the others wait for it. Waiting
  // has no limit for rank 0 being busy or idle, only for silence: `silence_limit_seconds`
  // without any message from rank 0 counts as rank 0 being lost (stop with a message).
  // An empty command means rank 0 is finishing (normally or not): the others stop following.
  virtual void send_command(const std::vector<uint8_t>& bytes) = 0;
  virtual void receive_command(std::vector<uint8_t>& bytes, double silence_limit_seconds) = 0;

  // Prints `why` (prefixed with this rank) and ends every rank with a non-zero status: for an
  // error on one rank that the others, waiting in a collective, could not learn otherwise.
  [[noreturn]] virtual void abort_all(const std::string& why) = 0;
};

inline int comm_size(const Comm* comm) { return comm != nullptr ? comm->size() : 1; }
inline int comm_rank(const Comm* comm) { return comm != nullptr ? comm->rank() : 0; }

}  // namespace flint
