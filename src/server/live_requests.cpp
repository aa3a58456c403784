#include "server/live_requests.h"

namespace flint::server {

void LiveRequests::add(const std::string& engine_id, std::weak_ptr<SseStream> stream) {
  std::lock_guard lock(mutex_);
  live_[engine_id] = std::move(stream);
}

void LiveRequests::remove(const std::string& engine_id) {
  bool empty = false;
  {
    std::lock_guard lock(mutex_);
    live_.erase(engine_id);
    empty = live_.empty();
  }
  if (empty) empty_.notify_all();
}

std::size_t LiveRequests::size() const {
  std::lock_guard lock(mutex_);
  return live_.size();
}

std::vector<std::string> LiveRequests::ids() const {
  std::lock_guard lock(mutex_);
  std::vector<std::string> out;
  out.reserve(live_.size());
  for (const auto& [id, stream] : live_) out.push_back(id);
  return out;
}

std::size_t LiveRequests::keep_alive(std::chrono::steady_clock::duration interval) {
  // Collect under the lock, write outside it: a write takes the stream's own lock.
  std::vector<std::shared_ptr<SseStream>> streams;
  {
    std::lock_guard lock(mutex_);
    for (const auto& [id, weak] : live_) {
      if (auto s = weak.lock()) streams.push_back(std::move(s));
    }
  }
  const auto now = std::chrono::steady_clock::now();
  std::size_t sent = 0;
  for (const auto& s : streams) sent += s->keep_alive_if_idle(now, interval) ? 1 : 0;
  return sent;
}

bool LiveRequests::wait_empty(std::chrono::steady_clock::duration timeout) {
  std::unique_lock lock(mutex_);
  return empty_.wait_for(lock, timeout, [this] { return live_.empty(); });
}

}  // namespace flint::server
