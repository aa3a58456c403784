#include "engine/tensor_parallel.h"

#include <atomic>
#include <chrono>
#include <csignal>
#include <map>
#include <memory>
#include <thread>
#include <unordered_map>

#include <fmt/format.h>

#include "base/bytes.h"
#include "base/error.h"
#include "base/log.h"
#include "base/strings.h"
#include "engine/engine_core.h"

namespace flint::engine {

namespace {

enum Kind : uint8_t {
  kInit = 1,
  kForward = 2,
  kHeartbeat = 3,
  kStop = 4,
  kProfile = 5,
  kPropose = 6
};
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

namespace {

// Engines rank 0 has started (bench runs a plain and a speculative one side by side): each
// command names its engine, so the other ranks keep one KV cache per engine.
std::atomic<uint32_t> g_next_engine{0};

}  // namespace

StepSender::StepSender(Comm& comm, kv::KvCache& cache, const DebugFault& fault, SpecMethod draft,
                       int64_t draft_tokens)
    : comm_(comm), cache_(cache), fault_(fault), engine_(g_next_engine++) {
  std::vector<uint8_t> msg{kInit};
  ByteWriter w(msg);
  w.put<uint32_t>(engine_);
  const kv::KvCacheOptions& o = cache.options();
  w.put<int64_t>(o.block_size);
  w.put<int32_t>(static_cast<int32_t>(o.dtype));
  w.put<int64_t>(o.num_pages);
  w.put<uint8_t>(o.prefix_caching ? 1 : 0);
  w.put<uint8_t>(static_cast<uint8_t>(draft));
  w.put<int64_t>(draft_tokens);
  comm_.send_command(msg);
  cache_.set_recording(true);
}

StepSender::~StepSender() { comm_.send_command(message(kStop)); }

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

std::vector<uint8_t> StepSender::message(uint8_t kind) {
  flush_journal();
  std::vector<uint8_t> msg{kind};
  ByteWriter w(msg);
  w.put<uint32_t>(engine_);
  w.put<uint64_t>(num_ops_);
  w.put_span(std::span<const uint8_t>(ops_));
  ops_.clear();
  num_ops_ = 0;
  return msg;
}

void StepSender::forward(std::span<const StepItem> items) {
  fault_.trigger(0, step_++);
  std::vector<uint8_t> msg = message(kForward);
  ByteWriter w(msg);
  w.put<uint64_t>(items.size());
  for (const StepItem& it : items) {
    w.put<kv::KvCache::SeqId>(it.seq);
    w.put_span(it.tokens);
    w.put<uint8_t>(static_cast<uint8_t>((it.all_logits ? 1 : 0) | (it.undo ? 2 : 0)));
  }
  comm_.send_command(msg);
}

void StepSender::propose(std::span<const ProposeItem> items,
                         std::span<const kv::KvCache::SeqId> seqs,
                         std::span<const kv::KvCache::SeqId> clone_of) {
  std::vector<uint8_t> msg = message(kPropose);
  ByteWriter w(msg);
  w.put<uint64_t>(items.size());
  for (size_t i = 0; i < items.size(); ++i) {
    const ProposeItem& it = items[i];
    w.put<kv::KvCache::SeqId>(seqs[i]);
    w.put<kv::KvCache::SeqId>(clone_of[i]);
    w.put<int64_t>(*it.state ? (*it.state)->length() : -1);  // checked by the others
    for (int64_t v : {it.from, it.to, it.trace_from, it.trace_row, it.want}) w.put<int64_t>(v);
    // The positions the draft reads: from + 1 .. to (MTP's next tokens, DSpark's anchor).
    const int64_t first = std::min(it.from + 1, it.to);
    const int64_t end = std::min<int64_t>(it.to + 1, static_cast<int64_t>(it.tokens.size()));
    w.put<int64_t>(first);
    w.put_span(it.tokens.subspan(static_cast<size_t>(first), static_cast<size_t>(end - first)));
  }
  comm_.send_command(msg);
}

void StepSender::profile(int64_t max_tokens, kernels::KvDtype dtype) {
  std::vector<uint8_t> msg = message(kProfile);
  ByteWriter w(msg);
  w.put<int64_t>(max_tokens);
  w.put<int32_t>(static_cast<int32_t>(dtype));
  comm_.send_command(msg);
}

void StepSender::heartbeat() { comm_.send_command(message(kHeartbeat)); }

namespace {

// What another rank keeps of one of rank 0's engines.
struct FollowedEngine {
  std::unique_ptr<kv::KvCache> cache;
  int64_t step = 0;
  // The last forward call's sequences and undo records, for rollbacks.
  std::vector<kv::KvCache::SeqId> seqs;
  std::vector<dsv4::KvUndo> undos;
  // A draft model split over the ranks: this rank's part, its state per KV sequence, and
  // the last forward call's trace (the hidden rows the draft reads).
  std::unique_ptr<Proposer> proposer;
  std::unordered_map<kv::KvCache::SeqId, std::unique_ptr<DraftState>> drafts;
  dsv4::ForwardTrace trace;
};

// Runs rank 0's propose() call on this rank's draft (its items follow in `r`).
void run_propose(ByteReader& r, FollowedEngine& e) {
  if (!e.proposer) throw Error("rank 0 sent draft items to an engine without a draft model");
  const auto n = r.get<uint64_t>();
  std::vector<std::vector<int32_t>> tokens(n);
  std::vector<ProposeItem> items(n);
  for (uint64_t i = 0; i < n; ++i) {
    const auto seq = r.get<kv::KvCache::SeqId>();
    const auto clone_of = r.get<kv::KvCache::SeqId>();
    const auto length = r.get<int64_t>();
    std::unique_ptr<DraftState>& state = e.drafts[seq];
    if (clone_of >= 0) {
      auto parent = e.drafts.find(clone_of);
      if (parent == e.drafts.end() || !parent->second)
        throw Error("the draft states of the ranks diverged: sequence {} has none here", clone_of);
      state = parent->second->clone();
    }
    if (const int64_t mine = state ? state->length() : -1; mine != length) {
      throw Error(
          "the draft states of the ranks diverged: sequence {} holds {} positions here "
          "and {} on rank 0",
          seq, mine, length);
    }
    ProposeItem& it = items[i];
    it.state = &state;
    for (int64_t* v : {&it.from, &it.to, &it.trace_from, &it.trace_row, &it.want})
      *v = r.get<int64_t>();
    it.tokens_from = r.get<int64_t>();
    tokens[i] = r.get_vector<int32_t>();
    it.tokens = tokens[i];
  }
  e.proposer->propose(items, &e.trace);
  // States of sequences rank 0 has closed go (rank 0's went with their sequences).
  std::erase_if(e.drafts, [&](const auto& d) { return !e.cache->is_open(d.first); });
}

// Runs one command of rank 0 (after its init) on `e`. Returns false for kStop.
bool run_command(uint8_t kind, ByteReader& r, FollowedEngine& e, const dsv4::Model& model,
                 const EngineConfig& config, Comm& comm, const DebugFault& fault) {
  const QuantSimulation sim = config.quant_simulation;
  const auto num_ops = r.get<uint64_t>();
  const std::vector<uint8_t> ops = r.get_vector<uint8_t>();
  ByteReader op(ops);
  for (uint64_t i = 0; i < num_ops; ++i) {
    if (op.get<uint8_t>() == kJournal) {
      e.cache->replay(op.get_vector<uint8_t>());
      continue;
    }
    const auto item = op.get<uint64_t>();
    const auto keep = op.get<int64_t>();
    if (item >= e.seqs.size() || e.undos[item].layers.empty())
      throw Error("rank 0 rolls back item {} of a step that recorded no undo for it", item);
    model.rollback(e.cache->sequence(e.seqs[item]), e.undos[item], keep, sim);
  }
  switch (kind) {
    case kStop:
      return false;
    case kHeartbeat:
      return true;
    case kPropose:
      run_propose(r, e);
      return true;
    case kProfile: {
      const auto max_tokens = r.get<int64_t>();
      const auto dtype = static_cast<kernels::KvDtype>(r.get<int32_t>());
      profile_forward_times(model, max_tokens, dtype, sim, nullptr);
      return true;
    }
    case kForward:
      break;
    default:
      throw Error("unknown command {} from rank 0", kind);
  }
  fault.trigger(comm.rank(), e.step++);
  const auto n = r.get<uint64_t>();
  std::vector<std::vector<int32_t>> tokens(n);
  std::vector<dsv4::ForwardRequest> batch;
  e.seqs.assign(n, 0);
  e.undos.assign(n, {});
  for (uint64_t i = 0; i < n; ++i) {
    e.seqs[i] = r.get<kv::KvCache::SeqId>();
    tokens[i] = r.get_vector<int32_t>();
    const auto flags = r.get<uint8_t>();
    batch.push_back({&e.cache->sequence(e.seqs[i]), tokens[i], (flags & 1) != 0,
                     (flags & 2) != 0 ? &e.undos[i] : nullptr});
  }
  const bool tracing = e.proposer && e.proposer->wants_trace();
  e.trace = {};
  if (tracing) e.proposer->request_trace(e.trace);
  model.forward(batch, sim, tracing ? &e.trace : nullptr);
  return true;
}

}  // namespace

void follow_rank0(const dsv4::Model& model, const EngineConfig& config, Comm& comm,
                  const DebugFault& fault) {
  // Rank 0 heartbeats every second while idle, and between steps it only samples: silence
  // as long as a collective may wait means it is lost.
  const double silence_limit = comm.timeout_seconds();
  std::map<uint32_t, FollowedEngine> engines;
  std::vector<uint8_t> msg;
  for (;;) {
    comm.receive_command(msg, silence_limit);
    if (msg.empty()) return;  // rank 0 is finishing (normally, or it says why not)
    ByteReader r(msg);
    const uint8_t kind = r.get<uint8_t>();
    const auto id = r.get<uint32_t>();
    try {
      if (kind == kInit) {
        kv::KvCacheOptions o;
        o.block_size = r.get<int64_t>();
        o.dtype = static_cast<kernels::KvDtype>(r.get<int32_t>());
        o.num_pages = r.get<int64_t>();
        o.prefix_caching = r.get<uint8_t>() != 0;
        o.model_identity = model.identity();
        FollowedEngine& e = engines[id];
        e.cache = std::make_unique<kv::KvCache>(model.config(), o);
        const auto draft = static_cast<SpecMethod>(r.get<uint8_t>());
        const auto draft_tokens = r.get<int64_t>();
        if (draft != SpecMethod::kNone) {
          EngineConfig c = config;
          c.kv_dtype = o.dtype;
          c.speculative.method = draft;
          c.speculative.num_tokens = draft_tokens;
          e.proposer = make_proposer(model, c);
        }
        continue;
      }
      auto it = engines.find(id);
      if (it == engines.end()) throw Error("rank 0 names engine {}, which it never started", id);
      if (!run_command(kind, r, it->second, model, config, comm, fault)) engines.erase(it);
    } catch (const std::exception& e) {
      comm.abort_all(fmt::format("error in a step of rank 0's engine {}: {}", id, e.what()));
    }
  }
}

}  // namespace flint::engine
