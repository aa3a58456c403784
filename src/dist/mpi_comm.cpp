#include "dist/mpi_comm.h"

// The C API only: the deprecated C++ bindings would need their own library.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#include <sched.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <thread>

#include <fmt/format.h>

#include "base/check.h"
#include "base/error.h"
#include "base/log.h"

namespace flint::dist {

namespace {

constexpr int kTagUp = 11;       // a rank's part of a collective, to rank 0
constexpr int kTagDown = 12;     // rank 0's result, to a rank
constexpr int kTagCommand = 13;  // rank 0's step commands and heartbeats

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// Backs off from spinning to short sleeps: a decode step's collectives complete within
// microseconds, while a rank waiting for a slow one must leave the cores to it (2 ranks on
// 2 cores share them).
class Backoff {
 public:
  void pause() {
    ++n_;
    if (n_ < 64) return;
    if (n_ < 256) {
      sched_yield();
      return;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(n_ < 4096 ? 50 : 1000));
  }

 private:
  int64_t n_ = 0;
};

// Adds a collective's duration to the rank's total.
struct Timed {
  explicit Timed(double& total) : total_(total), start_(Clock::now()) {}
  ~Timed() { total_ += seconds_since(start_); }
  double& total_;
  Clock::time_point start_;
};

// Receives the next message from `source` with `tag` into `out` if one has arrived.
bool try_receive(int source, int tag, std::vector<uint8_t>& out) {
  int flag = 0;
  MPI_Status st;
  MPI_Iprobe(source, tag, MPI_COMM_WORLD, &flag, &st);
  if (!flag) return false;
  int bytes = 0;
  MPI_Get_count(&st, MPI_BYTE, &bytes);
  out.resize(static_cast<size_t>(bytes));
  MPI_Recv(out.data(), bytes, MPI_BYTE, source, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  return true;
}

// Header of a part sent up: which collective it belongs to.
struct Header {
  uint64_t seq = 0;
  uint32_t what_len = 0;
};

std::vector<uint8_t> with_header(uint64_t seq, const char* what, const void* data, size_t n) {
  Header h{seq, static_cast<uint32_t>(std::strlen(what))};
  std::vector<uint8_t> out(sizeof(Header) + h.what_len + n);
  std::memcpy(out.data(), &h, sizeof h);
  std::memcpy(out.data() + sizeof h, what, h.what_len);
  if (n > 0) std::memcpy(out.data() + sizeof h + h.what_len, data, n);
  return out;
}

int g_rank_for_signal = -1;

// mpirun ends the other ranks with SIGTERM when one exits abnormally (and names that rank
// itself), or passes on the user's interrupt: say why this one stops. Only
// async-signal-safe calls.
void on_sigterm(int sig) {
  char msg[160];
  const int len = std::snprintf(msg, sizeof msg,
                                "flint rank %d: stopped by the MPI launcher (interrupted, or "
                                "another rank exited or failed: the launcher names it)\n",
                                g_rank_for_signal);
  if (len > 0) {
    ssize_t ignored = write(2, msg, static_cast<size_t>(len));
    (void)ignored;
  }
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

}  // namespace

bool launched_by_mpi() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK"}) {
    if (std::getenv(v) != nullptr) return true;
  }
  return false;
}

MpiComm::MpiComm(double timeout_seconds) : timeout_(timeout_seconds) {
  int provided = 0;
  MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
  if (provided < MPI_THREAD_SERIALIZED) {
    throw Error("MPI provides thread level {} below MPI_THREAD_SERIALIZED", provided);
  }
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
  // Errors abort the job with MPI's message rather than returning codes nobody checks.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
  last_seq_.assign(static_cast<size_t>(size_), 0);
  last_what_.assign(static_cast<size_t>(size_), "start-up");
  g_rank_for_signal = rank_;
  std::signal(SIGTERM, on_sigterm);
}

MpiComm::~MpiComm() {
  if (rank_ == 0 && seq_ > 0) {
    spdlog::info(
        "rank 0: {} collectives, {:.1f} MB through rank 0, {:.2f} s in them ({:.0f} us each)", seq_,
        static_cast<double>(bytes_) / 1e6, seconds_, seconds_ / static_cast<double>(seq_) * 1e6);
  }
  // An empty command: whatever rank 0 was doing is over (the engine's stop, or an error
  // before the engine started): the others leave their wait for commands.
  if (rank_ == 0 && size_ > 1) send_command({});
  MPI_Finalize();
}

void MpiComm::abort_all(const std::string& why) {
  std::fflush(stdout);
  fmt::print(stderr, "flint rank {}/{}: {}\n", rank_, size_, why);
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::_Exit(1);  // MPI_Abort does not return; this documents it to the compiler
}

void MpiComm::timed_out(const std::string& detail) {
  abort_all(fmt::format("{}; gave up after --collective-timeout {:.0f} s, stopping every rank",
                        detail, timeout_));
}

bool MpiComm::gather(std::vector<uint8_t> mine, const char* what,
                     std::vector<std::vector<uint8_t>>& parts) {
  const uint64_t seq = ++seq_;
  if (rank_ != 0) {
    std::vector<uint8_t> msg = with_header(seq, what, mine.data(), mine.size());
    MPI_Request req;
    MPI_Isend(msg.data(), static_cast<int>(msg.size()), MPI_BYTE, 0, kTagUp, MPI_COMM_WORLD, &req);
    const auto start = Clock::now();
    Backoff backoff;
    for (int done = 0;;) {
      MPI_Test(&req, &done, MPI_STATUS_IGNORE);
      if (done) break;
      if (seconds_since(start) > timeout_ + 2) {
        timed_out(
            fmt::format("rank 0 has not taken this rank's part of collective #{} '{}'", seq, what));
      }
      backoff.pause();
    }
    return false;
  }
  parts.assign(static_cast<size_t>(size_), {});
  parts[0] = std::move(mine);
  std::vector<bool> arrived(static_cast<size_t>(size_), false);
  arrived[0] = true;
  int missing = size_ - 1;
  const auto start = Clock::now();
  Backoff backoff;
  while (missing > 0) {
    for (int r = 1; r < size_; ++r) {
      if (arrived[static_cast<size_t>(r)]) continue;
      std::vector<uint8_t> msg;
      if (!try_receive(r, kTagUp, msg)) continue;
      Header h;
      FLINT_CHECK(msg.size() >= sizeof h);
      std::memcpy(&h, msg.data(), sizeof h);
      std::string their(reinterpret_cast<const char*>(msg.data() + sizeof h), h.what_len);
      last_seq_[static_cast<size_t>(r)] = h.seq;
      last_what_[static_cast<size_t>(r)] = their;
      if (h.seq != seq || their != what) {
        abort_all(fmt::format(
            "the ranks diverged: rank 0 is in collective #{} '{}' but rank {} sent collective "
            "#{} '{}' (a bug: every rank must run the same collectives in the same order)",
            seq, what, r, h.seq, their));
      }
      parts[static_cast<size_t>(r)].assign(
          msg.begin() + static_cast<ptrdiff_t>(sizeof h + h.what_len), msg.end());
      arrived[static_cast<size_t>(r)] = true;
      --missing;
    }
    if (missing == 0) break;
    if (seconds_since(start) > timeout_) {
      std::string have = "0", lack;
      for (int r = 1; r < size_; ++r) {
        if (arrived[static_cast<size_t>(r)]) {
          have += fmt::format(", {}", r);
        } else {
          lack +=
              fmt::format("{}rank {} (its last collective: #{} '{}')", lack.empty() ? "" : "; ", r,
                          last_seq_[static_cast<size_t>(r)], last_what_[static_cast<size_t>(r)]);
        }
      }
      timed_out(
          fmt::format("collective #{} '{}' waited {:.0f} s: ranks {} arrived and wait "
                      "there; not arrived: {}",
                      seq, what, seconds_since(start), have, lack));
    }
    backoff.pause();
  }
  return true;
}

void MpiComm::send_to_others(const std::vector<uint8_t>& bytes, int tag,
                             const std::function<std::string(const std::string&)>& on_timeout) {
  std::vector<MPI_Request> reqs(static_cast<size_t>(size_ - 1));
  for (int r = 1; r < size_; ++r) {
    MPI_Isend(bytes.data(), static_cast<int>(bytes.size()), MPI_BYTE, r, tag, MPI_COMM_WORLD,
              &reqs[static_cast<size_t>(r - 1)]);
  }
  const auto start = Clock::now();
  Backoff backoff;
  for (int done = 0;;) {
    MPI_Testall(static_cast<int>(reqs.size()), reqs.data(), &done, MPI_STATUSES_IGNORE);
    if (done) return;
    if (seconds_since(start) > timeout_) {
      std::string lacking;
      for (int r = 1; r < size_; ++r) {
        int d = 0;
        MPI_Test(&reqs[static_cast<size_t>(r - 1)], &d, MPI_STATUS_IGNORE);
        if (!d) lacking += fmt::format("{}{}", lacking.empty() ? "" : ", ", r);
      }
      timed_out(on_timeout(lacking));
    }
    backoff.pause();
  }
}

void MpiComm::scatter_result(std::vector<uint8_t>& result, const char* what) {
  if (rank_ == 0) {
    send_to_others(result, kTagDown, [&](const std::string& lacking) {
      return fmt::format("rank(s) {} did not take the result of collective #{} '{}'", lacking, seq_,
                         what);
    });
    return;
  }
  const auto start = Clock::now();
  Backoff backoff;
  for (;;) {
    if (try_receive(0, kTagDown, result)) return;
    // Rank 0 reports a missing rank first (it knows which); this is for rank 0 itself.
    if (seconds_since(start) > timeout_ + 2) {
      timed_out(fmt::format(
          "waited {:.0f} s in collective #{} '{}' for rank 0, which has not completed it (rank 0 "
          "stalled or waits for another rank)",
          seconds_since(start), seq_, what));
    }
    backoff.pause();
  }
}

void MpiComm::all_reduce_sum(float* data, size_t n, const char* what) {
  Timed timed(seconds_);
  bytes_ += n * sizeof(float) * static_cast<size_t>(rank_ == 0 ? size_ - 1 : 1);
  std::vector<uint8_t> mine(n * sizeof(float));
  std::memcpy(mine.data(), data, mine.size());
  std::vector<std::vector<uint8_t>> parts;
  std::vector<uint8_t> result;
  if (gather(std::move(mine), what, parts)) {
    for (int r = 1; r < size_; ++r) {
      const auto& p = parts[static_cast<size_t>(r)];
      FLINT_CHECK(p.size() == n * sizeof(float), "collective '{}': rank {} sent {} bytes, not {}",
                  what, r, p.size(), n * sizeof(float));
      const float* v = reinterpret_cast<const float*>(p.data());
      for (size_t i = 0; i < n; ++i) data[i] += v[i];
    }
    result.resize(n * sizeof(float));
    std::memcpy(result.data(), data, result.size());
  }
  scatter_result(result, what);
  if (rank_ != 0) {
    FLINT_CHECK(result.size() == n * sizeof(float));
    std::memcpy(data, result.data(), result.size());
  }
}

void MpiComm::all_gather(const float* mine, size_t n, float* all, const char* what) {
  Timed timed(seconds_);
  bytes_ += n * sizeof(float) * static_cast<size_t>(rank_ == 0 ? size_ * (size_ - 1) : 1);
  std::vector<uint8_t> part(n * sizeof(float));
  std::memcpy(part.data(), mine, part.size());
  std::vector<std::vector<uint8_t>> parts;
  std::vector<uint8_t> result;
  if (gather(std::move(part), what, parts)) {
    for (const auto& p : parts) {
      FLINT_CHECK(p.size() == n * sizeof(float), "collective '{}': a rank sent {} bytes, not {}",
                  what, p.size(), n * sizeof(float));
      result.insert(result.end(), p.begin(), p.end());
    }
  }
  scatter_result(result, what);
  FLINT_CHECK(result.size() == n * sizeof(float) * static_cast<size_t>(size_));
  std::memcpy(all, result.data(), result.size());
}

void MpiComm::broadcast(std::vector<int32_t>& data, const char* what) {
  Timed timed(seconds_);
  // Through the same star as the other collectives (the others check in empty-handed), so
  // the watchdog names a rank that never arrives.
  std::vector<std::vector<uint8_t>> parts;
  std::vector<uint8_t> result;
  if (gather({}, what, parts)) {
    const auto* p = reinterpret_cast<const uint8_t*>(data.data());
    result.assign(p, p + data.size() * sizeof(int32_t));
    bytes_ += result.size() * static_cast<size_t>(size_ - 1);
  }
  scatter_result(result, what);
  if (rank_ == 0) return;
  bytes_ += result.size();
  FLINT_CHECK(result.size() % sizeof(int32_t) == 0);
  data.resize(result.size() / sizeof(int32_t));
  std::memcpy(data.data(), result.data(), result.size());
}

std::vector<std::string> MpiComm::all_gather_strings(const std::string& mine, const char* what) {
  std::vector<std::vector<uint8_t>> parts;
  std::vector<uint8_t> result;
  if (gather(std::vector<uint8_t>(mine.begin(), mine.end()), what, parts)) {
    for (const auto& p : parts) {
      const uint64_t len = p.size();
      const auto* l = reinterpret_cast<const uint8_t*>(&len);
      result.insert(result.end(), l, l + sizeof len);
      result.insert(result.end(), p.begin(), p.end());
    }
  }
  scatter_result(result, what);
  std::vector<std::string> out;
  size_t at = 0;
  while (at + sizeof(uint64_t) <= result.size()) {
    uint64_t len = 0;
    std::memcpy(&len, result.data() + at, sizeof len);
    at += sizeof len;
    FLINT_CHECK(at + len <= result.size());
    out.emplace_back(reinterpret_cast<const char*>(result.data() + at), len);
    at += len;
  }
  FLINT_CHECK(out.size() == static_cast<size_t>(size_));
  return out;
}

void MpiComm::send_command(const std::vector<uint8_t>& bytes) {
  FLINT_CHECK(rank_ == 0);
  send_to_others(bytes, kTagCommand, [](const std::string& lacking) {
    return fmt::format(
        "the next step's command was not taken by rank(s) {} (stalled in their "
        "previous step)",
        lacking);
  });
}

void MpiComm::receive_command(std::vector<uint8_t>& bytes, double silence_limit_seconds) {
  const auto start = Clock::now();
  Backoff backoff;
  for (;;) {
    if (try_receive(0, kTagCommand, bytes)) return;
    if (seconds_since(start) > silence_limit_seconds) {
      abort_all(fmt::format(
          "rank 0 sent no step and no heartbeat for {:.0f} s (it heartbeats every second while "
          "idle): rank 0 stalled or is lost; stopping every rank",
          seconds_since(start)));
    }
    backoff.pause();
  }
}

}  // namespace flint::dist
