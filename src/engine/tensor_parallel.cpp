#include "engine/tensor_parallel.h"

#include <chrono>
#include <csignal>
#include <thread>

#include <fmt/format.h>

#include "base/bytes.h"
#include "base/error.h"
#include "base/log.h"
#include "base/strings.h"
#include "engine/engine_core.h"

namespace flint::engine {

namespace {

enum Kind : uint8_t { kInit = 1, kForward = 2, kHeartbeat = 3, kStop = 4, kProfile = 5 };
enum Op : uint8_t { kJournal = 1, kRollback = 2 };

}  // namespace

DebugFault DebugFault::parse(const std::string& spec) {
  const std::vector<std::string> parts = split(spec, ':');
  auto bad = [&](const std::string& why) {
    return Error(
        "--debug-fault '{}': {} (expected RANK:fail|stall|die:STEP or RANK:ACTION:start-up)", spec,
        why);
  };
  if (parts.size() != 3) throw bad("three fields separated by ':'");
  DebugFault f;
  try {
    f.rank = std::stoi(parts[0]);
    f.step = parts[2] == "start-up" ? -1 : std::stoll(parts[2]);
  } catch (const std::exception&) {
    throw bad("RANK and STEP must be numbers");
  }
  if (parts[1] == "fail") {
    f.action = Action::kFail;
  } else if (parts[1] == "stall") {
    f.action = Action::kStall;
  } else if (parts[1] == "die") {
    f.action = Action::kDie;
  } else {
    throw bad(fmt::format("unknown action '{}'", parts[1]));
  }
  if (f.rank < 0 || f.step < -1) throw bad("RANK and STEP must not be negative");
  return f;
}

void DebugFault::trigger(int rank_now, int64_t step_now) const {
  if (action == Action::kNone || rank_now != rank || step_now != step) return;
  const std::string when = step < 0 ? std::string("at start-up") : fmt::format("at step {}", step);
  switch (action) {
    case Action::kFail:
      throw Error("rank {}: injected failure {} (--debug-fault)", rank, when);
    case Action::kStall:
      spdlog::warn("rank {}: stalling {} (--debug-fault)", rank, when);
      for (;;) std::this_thread::sleep_for(std::chrono::seconds(3600));
    case Action::kDie:
      spdlog::warn("rank {}: dying {} (--debug-fault)", rank, when);
      std::raise(SIGKILL);
      break;
    case Action::kNone:
      break;
  }
}

StepSender::StepSender(Comm& comm, kv::KvCache& cache, const DebugFault& fault)
    : comm_(comm), cache_(cache), fault_(fault) {
  std::vector<uint8_t> msg{kInit};
  ByteWriter w(msg);
  const kv::KvCacheOptions& o = cache.options();
  w.put<int64_t>(o.block_size);
  w.put<int32_t>(static_cast<int32_t>(o.dtype));
  w.put<int64_t>(o.num_pages);
  w.put<uint8_t>(o.prefix_caching ? 1 : 0);
  comm_.send_command(msg);
  cache_.set_recording(true);
}

StepSender::~StepSender() { send(kStop, {}); }

void StepSender::flush_journal() {
  std::vector<uint8_t> journal = cache_.take_journal();
  if (journal.empty()) return;
  ByteWriter w(ops_);
  w.put<uint8_t>(kJournal);
  w.put_span(std::span<const uint8_t>(journal));
  ++num_ops_;
}

void StepSender::rollback(size_t item, int64_t keep) {
  flush_journal();
  ByteWriter w(ops_);
  w.put<uint8_t>(kRollback);
  w.put<uint64_t>(item);
  w.put<int64_t>(keep);
  ++num_ops_;
}

void StepSender::send(uint8_t kind, std::span<const StepItem> items) {
  flush_journal();
  std::vector<uint8_t> msg{kind};
  ByteWriter w(msg);
  w.put<uint64_t>(num_ops_);
  w.put_span(std::span<const uint8_t>(ops_));
  ops_.clear();
  num_ops_ = 0;
  w.put<uint64_t>(items.size());
  for (const StepItem& it : items) {
    w.put<kv::KvCache::SeqId>(it.seq);
    w.put_span(it.tokens);
    w.put<uint8_t>(static_cast<uint8_t>((it.all_logits ? 1 : 0) | (it.undo ? 2 : 0)));
  }
  comm_.send_command(msg);
}

void StepSender::forward(std::span<const StepItem> items) {
  fault_.trigger(0, step_++);
  send(kForward, items);
}

void StepSender::profile(int64_t max_tokens, kernels::KvDtype dtype) {
  send(kProfile, {});
  std::vector<uint8_t> msg;
  ByteWriter w(msg);
  w.put<int64_t>(max_tokens);
  w.put<int32_t>(static_cast<int32_t>(dtype));
  comm_.send_command(msg);
}

void StepSender::heartbeat() { send(kHeartbeat, {}); }

void follow_rank0(const dsv4::Model& model, const EngineConfig& config, Comm& comm,
                  const DebugFault& fault) {
  // Rank 0 heartbeats every second while idle, and between steps it only samples: silence
  // as long as a collective may wait means it is lost.
  const double silence_limit = comm.timeout_seconds();
  std::vector<uint8_t> msg;
  comm.receive_command(msg, silence_limit);
  ByteReader init(msg);
  if (init.get<uint8_t>() != kInit) comm.abort_all("rank 0's first command is not the start");
  kv::KvCacheOptions o;
  o.block_size = init.get<int64_t>();
  o.dtype = static_cast<kernels::KvDtype>(init.get<int32_t>());
  o.num_pages = init.get<int64_t>();
  o.prefix_caching = init.get<uint8_t>() != 0;
  o.model_identity = model.identity();
  kv::KvCache cache(model.config(), o);
  int64_t step = 0;
  // The last forward call's sequences and undo records, for rollbacks.
  std::vector<kv::KvCache::SeqId> seqs;
  std::vector<dsv4::KvUndo> undos;
  for (;;) {
    comm.receive_command(msg, silence_limit);
    ByteReader r(msg);
    const uint8_t kind = r.get<uint8_t>();
    try {
      const auto num_ops = r.get<uint64_t>();
      const std::vector<uint8_t> ops = r.get_vector<uint8_t>();
      ByteReader op(ops);
      for (uint64_t i = 0; i < num_ops; ++i) {
        if (op.get<uint8_t>() == kJournal) {
          cache.replay(op.get_vector<uint8_t>());
          continue;
        }
        const auto item = op.get<uint64_t>();
        const auto keep = op.get<int64_t>();
        if (item >= seqs.size() || undos[item].layers.empty())
          throw Error("rank 0 rolls back item {} of a step that recorded no undo for it", item);
        model.rollback(cache.sequence(seqs[item]), undos[item], keep, config.quant_simulation);
      }
      if (kind == kStop) return;
      if (kind == kHeartbeat) continue;
      if (kind == kProfile) {
        comm.receive_command(msg, silence_limit);
        ByteReader p(msg);
        const auto max_tokens = p.get<int64_t>();
        const auto dtype = static_cast<kernels::KvDtype>(p.get<int32_t>());
        profile_forward_times(model, max_tokens, dtype, config.quant_simulation, nullptr);
        continue;
      }
      if (kind != kForward) throw Error("unknown command {} from rank 0", kind);
      fault.trigger(comm.rank(), step++);
      const auto n = r.get<uint64_t>();
      std::vector<std::vector<int32_t>> tokens(n);
      std::vector<dsv4::ForwardRequest> batch;
      seqs.assign(n, 0);
      undos.assign(n, {});
      for (uint64_t i = 0; i < n; ++i) {
        seqs[i] = r.get<kv::KvCache::SeqId>();
        tokens[i] = r.get_vector<int32_t>();
        const auto flags = r.get<uint8_t>();
        batch.push_back({&cache.sequence(seqs[i]), tokens[i], (flags & 1) != 0,
                         (flags & 2) != 0 ? &undos[i] : nullptr});
      }
      model.forward(batch, config.quant_simulation);
    } catch (const std::exception& e) {
      comm.abort_all(fmt::format("error in step {}: {}", step - 1, e.what()));
    }
  }
}

}  // namespace flint::engine
