#include "server/sse_stream.h"

namespace flint::server {

SseStream::SseStream(std::shared_ptr<Responder> responder) : responder_(std::move(responder)) {}

bool SseStream::start() {
  std::lock_guard lock(mutex_);
  if (started_) return false;
  started_ = true;
  last_write_ = Clock::now();
  // X-Accel-Buffering: nginx in front must pass events through as they come.
  return responder_->start_stream(200, "text/event-stream; charset=utf-8",
                                  {{"Cache-Control", "no-cache"}, {"X-Accel-Buffering", "no"}});
}

bool SseStream::send(std::string_view data, std::string_view name) {
  std::string text;
  text.reserve(data.size() + name.size() + 16);
  if (!name.empty()) {
    text += "event: ";
    text += name;
    text += '\n';
  }
  text += "data: ";
  text += data;
  text += "\n\n";
  return send_raw(std::move(text));
}

bool SseStream::send_raw(std::string text) {
  std::lock_guard lock(mutex_);
  if (!started_ || finished_) return false;
  last_write_ = Clock::now();
  return responder_->write(std::move(text));
}

void SseStream::finish() {
  std::lock_guard lock(mutex_);
  if (!started_ || finished_) return;
  finished_ = true;
  responder_->finish();
}

bool SseStream::keep_alive_if_idle(Clock::time_point now, Clock::duration interval) {
  std::lock_guard lock(mutex_);
  if (!started_ || finished_ || now - last_write_ < interval) return false;
  last_write_ = now;
  return responder_->write(": keep-alive\n\n");
}

bool SseStream::finished() const {
  std::lock_guard lock(mutex_);
  return finished_;
}

}  // namespace flint::server
