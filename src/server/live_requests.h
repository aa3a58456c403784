// The requests in flight, for what needs to see all of them: keep-alive comments on silent
// streams, the bounded shutdown (wait for them, then abort the rest) and the load tests.
// Thread-safe; every method takes one lock briefly.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "server/sse_stream.h"

namespace flint::server {

class LiveRequests {
 public:
  // `stream` is null for a non-streaming response.
  void add(const std::string& engine_id, std::weak_ptr<SseStream> stream);
  void remove(const std::string& engine_id);

  std::size_t size() const;
  std::vector<std::string> ids() const;
  // Sends a keep-alive comment on every stream silent for `interval`; returns how many.
  std::size_t keep_alive(std::chrono::steady_clock::duration interval);
  // Blocks until no request is in flight or `timeout` passed; true if none is left.
  bool wait_empty(std::chrono::steady_clock::duration timeout);

 private:
  mutable std::mutex mutex_;
  std::condition_variable empty_;
  std::unordered_map<std::string, std::weak_ptr<SseStream>> live_;
};

}  // namespace flint::server
