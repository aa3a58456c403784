#include "engine/engine.h"

#include "base/error.h"
#include "base/log.h"

namespace flint::engine {

void OutputQueue::push(RequestOutput ev) {
  {
    std::lock_guard lock(mutex_);
    events_.push_back(std::move(ev));
  }
  ready_.notify_one();
}

bool OutputQueue::pop(RequestOutput& ev) {
  std::unique_lock lock(mutex_);
  if (closed_ && events_.empty()) return false;
  ready_.wait(lock, [this] { return !events_.empty(); });
  ev = std::move(events_.front());
  events_.pop_front();
  if (ev.request_finished || ev.finish == FinishReason::kError) closed_ = true;
  return true;
}

Engine::Engine(const dsv4::Model& model, EngineConfig config)
    : core_(model, std::move(config)), thread_([this] { loop(); }) {}

Engine::~Engine() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void Engine::submit(EngineRequest request, Callback callback) {
  core_.validate(request);
  {
    std::lock_guard lock(mutex_);
    const int64_t limit = core_.config().max_waiting_requests;
    if (limit > 0 && stats_.waiting + inbox_submits_ >= limit) {
      throw QueueFullError(
          "the server has {} requests waiting already (--max-waiting-requests {}); retry later",
          stats_.waiting + inbox_submits_, limit);
    }
    ++inbox_submits_;
    inbox_.push_back(Submit{std::move(request), std::move(callback)});
    busy_ = true;
  }
  wake_.notify_all();
}

bool Engine::queue_full() const {
  std::lock_guard lock(mutex_);
  const int64_t limit = core_.config().max_waiting_requests;
  return limit > 0 && stats_.waiting + inbox_submits_ >= limit;
}

std::shared_ptr<OutputQueue> Engine::submit(EngineRequest request) {
  auto queue = std::make_shared<OutputQueue>();
  submit(std::move(request), [queue](const RequestOutput& ev) { queue->push(ev); });
  return queue;
}

void Engine::abort(const std::string& id) {
  {
    std::lock_guard lock(mutex_);
    inbox_.push_back(Abort{id});
  }
  wake_.notify_all();
}

EngineStats Engine::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

void Engine::wait_idle() {
  std::unique_lock lock(mutex_);
  idle_.wait(lock, [this] { return !busy_; });
}

void Engine::deliver(const std::vector<RequestOutput>& events) {
  for (const RequestOutput& ev : events) {
    auto it = callbacks_.find(ev.request_id);
    if (it == callbacks_.end()) continue;
    it->second(ev);
    if (ev.request_finished) callbacks_.erase(it);
  }
}

void Engine::loop() {
  for (;;) {
    std::deque<std::variant<Submit, Abort>> inbox;
    bool stopping = false;
    {
      std::unique_lock lock(mutex_);
      // Wakes at least once a second: rank 0 of a multi-rank model heartbeats while idle.
      if (!wake_.wait_for(lock, std::chrono::seconds(1),
                          [this] { return stop_ || !inbox_.empty() || core_.has_work(); })) {
        lock.unlock();
        core_.idle();
        continue;
      }
      inbox.swap(inbox_);
      inbox_submits_ = 0;
      stopping = stop_;
    }
    std::vector<RequestOutput> events;
    for (auto& item : inbox) {
      if (auto* s = std::get_if<Submit>(&item)) {
        const std::string id = s->request.id;
        try {
          core_.add(std::move(s->request));
          callbacks_[id] = std::move(s->callback);
        } catch (const Error& e) {  // a duplicate id; validation ran on submit
          RequestOutput ev;
          ev.request_id = id;
          ev.finish = FinishReason::kError;
          ev.error = e.what();
          s->callback(ev);
        }
      } else {
        if (auto ev = core_.abort(std::get<Abort>(item).id)) events.push_back(std::move(*ev));
      }
    }
    if (stopping) {
      std::vector<std::string> live;
      for (const auto& [id, cb] : callbacks_) live.push_back(id);
      for (const auto& id : live) {
        if (auto ev = core_.abort(id)) events.push_back(std::move(*ev));
      }
      deliver(events);
      std::lock_guard lock(mutex_);
      stats_ = core_.stats();
      busy_ = false;
      idle_.notify_all();
      return;
    }
    if (!inbox.empty()) {
      // The queue bound in submit() counts these as waiting from now on.
      std::lock_guard lock(mutex_);
      stats_ = core_.stats();
    }
    if (core_.has_work()) {
      try {
        std::vector<RequestOutput> stepped = core_.step();
        events.insert(events.end(), std::make_move_iterator(stepped.begin()),
                      std::make_move_iterator(stepped.end()));
      } catch (const std::exception& e) {
        // Requests are validated before they are queued, so this is flint's fault or the
        // machine's (out of memory); fail what is running, loudly, and keep serving.
        spdlog::error("engine step failed: {}; failing every live request", e.what());
        std::vector<std::string> live;
        for (const auto& [id, cb] : callbacks_) live.push_back(id);
        for (const auto& id : live) {
          if (auto ev = core_.abort(id)) {
            ev->finish = FinishReason::kError;
            ev->error = e.what();
            events.push_back(std::move(*ev));
          }
        }
      }
    }
    {
      // Before the events go out: a client that saw its request run must not find it still
      // counted as waiting (the --max-waiting-requests bound reads these).
      std::lock_guard lock(mutex_);
      stats_ = core_.stats();
    }
    deliver(events);
    std::lock_guard lock(mutex_);
    if (!core_.has_work() && inbox_.empty()) {
      busy_ = false;
      idle_.notify_all();
    }
  }
}

}  // namespace flint::engine
