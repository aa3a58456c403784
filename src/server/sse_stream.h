// A server-sent-events response over a Responder: the framing ("event: x\ndata: ...\n\n"),
// keep-alive comments while the stream is silent, and one lock so that events from the engine
// thread and comments from the keep-alive timer never interleave or follow the end.
//
// Thread-safe. Owned by the endpoint's sink (shared), seen weakly by LiveRequests.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "server/http_server.h"

namespace flint::server {

class SseStream {
 public:
  using Clock = std::chrono::steady_clock;

  explicit SseStream(std::shared_ptr<Responder> responder);

  // Sends the 200 head: text/event-stream, no caching, no proxy buffering. Call once, before
  // any event.
  bool start();
  // "data: <data>\n\n", with "event: <name>\n" first when `name` is not empty. `data` must not
  // contain a line break (compact JSON never does). False once the client is gone.
  bool send(std::string_view data, std::string_view name = {});
  // Raw SSE text (several events at once, "data: [DONE]\n\n").
  bool send_raw(std::string text);
  // Ends the response. Later calls do nothing.
  void finish();

  // Writes ": keep-alive\n\n" if nothing was written for `interval`; true if it wrote.
  bool keep_alive_if_idle(Clock::time_point now, Clock::duration interval);

  bool finished() const;
  bool connected() const { return responder_->connected(); }
  const std::shared_ptr<Responder>& responder() const { return responder_; }

 private:
  std::shared_ptr<Responder> responder_;
  mutable std::mutex mutex_;
  bool started_ = false;
  bool finished_ = false;
  Clock::time_point last_write_;
};

}  // namespace flint::server
