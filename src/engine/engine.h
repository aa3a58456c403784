// The engine on its own thread: the API the CLI, the server and the tests use.
//
// One engine thread owns the EngineCore (model state, KV cache, scheduler) and runs steps
// while there is work; other threads submit and abort through a queue, so a submission
// never waits for a step. Events reach the submitter through its callback, which runs on
// the engine thread and must return quickly (post to your own queue; OutputQueue does).
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <variant>

#include "base/error.h"
#include "engine/engine_core.h"

namespace flint::engine {

// A thread-safe queue of one request's events, for callers that want to block.
class OutputQueue {
 public:
  void push(RequestOutput ev);
  // Waits for the next event; false after the request's final event was taken.
  bool pop(RequestOutput& ev);

 private:
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<RequestOutput> events_;
  bool closed_ = false;
};

// submit() when max_waiting_requests are waiting already.
class QueueFullError : public Error {
 public:
  using Error::Error;
};

class Engine {
 public:
  using Callback = std::function<void(const RequestOutput&)>;

  Engine(const dsv4::Model& model, EngineConfig config);
  ~Engine();  // aborts what is left (each gets its kAbort event) and joins the thread
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Validates on the calling thread (throws flint::Error naming the field; nothing is
  // queued then) and queues the request; throws QueueFullError when the waiting queue is
  // full. A duplicate live id is reported through the callback as a kError event.
  void submit(EngineRequest request, Callback callback);
  std::shared_ptr<OutputQueue> submit(EngineRequest request);
  // What submit() checks first; thread-safe.
  void validate(const EngineRequest& request) const { core_.validate(request); }
  // True when submit() would throw QueueFullError now.
  bool queue_full() const;
  // Aborts a request wherever it is; its KV is freed before the next step. Unknown ids
  // (finished already) are ignored.
  void abort(const std::string& id);

  // A snapshot as of the last step.
  EngineStats stats() const;
  const EngineConfig& config() const { return core_.config(); }
  const kv::KvLayout& kv_layout() const { return core_.kv_layout(); }
  // Blocks until no request is waiting or running.
  void wait_idle();

 private:
  struct Submit {
    EngineRequest request;
    Callback callback;
  };
  struct Abort {
    std::string id;
  };
  void loop();
  void deliver(const std::vector<RequestOutput>& events);

  EngineCore core_;
  mutable std::mutex mutex_;
  std::condition_variable wake_, idle_;
  std::deque<std::variant<Submit, Abort>> inbox_;
  bool stop_ = false;
  bool busy_ = false;
  int64_t inbox_submits_ = 0;  // Submit entries in inbox_
  EngineStats stats_;
  std::unordered_map<std::string, Callback> callbacks_;  // engine thread only
  std::thread thread_;
};

}  // namespace flint::engine
