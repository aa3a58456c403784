#include "server/api_server.h"

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "base/log.h"
#include "server/api_error.h"
#include "server/http_message.h"
#include "server/chat_page.h"
#include "server/router.h"

namespace flint::server {

bool api_key_matches(std::string_view offered, const std::vector<std::string>& keys) {
  bool match = false;
  for (const std::string& key : keys) {
    // Every byte of the longer string is visited whatever differs, so the time tells an
    // attacker the lengths at most, never how much of a key was right.
    const std::size_t n = std::max(offered.size(), key.size());
    unsigned diff = offered.size() == key.size() ? 0u : 1u;
    for (std::size_t i = 0; i < n; ++i) {
      const auto a = static_cast<unsigned char>(i < offered.size() ? offered[i] : 0);
      const auto b = static_cast<unsigned char>(i < key.size() ? key[i] : 0);
      diff |= static_cast<unsigned>(a ^ b);
    }
    match = match || diff == 0;
  }
  return match;
}

namespace {

std::string_view path_of(std::string_view target) { return target.substr(0, target.find('?')); }

}  // namespace

struct ApiServer::Impl {
  explicit Impl(ApiServerOptions o) : options(std::move(o)) {}

  ApiServerOptions options;
  std::unique_ptr<HttpServer> http;
  std::atomic<ApiContext*> ctx{nullptr};
  std::unique_ptr<Router> router;  // set with ctx
  std::mutex mutex;
  std::condition_variable wake;
  bool stopping = false;
  bool shut_down = false;
  std::thread keep_alive;

  void handle(Request request, std::shared_ptr<Responder> responder);
  void keep_alive_loop();
};

void ApiServer::Impl::handle(Request request, std::shared_ptr<Responder> responder) {
  const std::string_view path = path_of(request.target);
  try {
    ApiContext* c = ctx.load();
    if (path == "/health" && request.method == "GET") {
      if (c != nullptr && !c->draining()) {
        responder->respond(200, "", "");
      } else {
        throw ApiError(503, "", c == nullptr ? "the model is loading" : "the server is shutting down");
      }
      return;
    }
    if (request.method == "GET" && (path == "/" || path == "/index.html")) {
      // A static page without data: no key needed (a browser cannot send one on navigation).
      return handle_chat_page(*responder);
    }
    if (!options.api_keys.empty()) {
      std::string_view offered;
      if (auto auth = request.header("Authorization")) {
        if (auth->size() > 7 && iequals(auth->substr(0, 7), "bearer ")) offered = auth->substr(7);
      } else if (auto key = request.header("x-api-key")) {  // Anthropic's clients
        offered = *key;
      }
      if (!api_key_matches(offered, options.api_keys)) {
        throw ApiError(401, "", offered.empty() ? "missing API key (Authorization: Bearer <key>)"
                                                : "invalid API key");
      }
    }
    if (path == "/version" && request.method == "GET") {
      responder->respond(200, "application/json", dump_json(Json{{"version", options.version}}));
      return;
    }
    if (c == nullptr) {
      throw ApiError(503, "", "the model is loading; retry when /health answers 200");
    }
  } catch (const ApiError& e) {
    responder->respond(e.status(), "application/json", error_body_for(path, e));
    return;
  }
  router->handle(request, responder);
}

void ApiServer::Impl::keep_alive_loop() {
  std::unique_lock lock(mutex);
  while (!stopping) {
    ApiContext* c = ctx.load();
    const auto interval =
        c != nullptr ? c->config().keep_alive_interval : std::chrono::milliseconds(1000);
    // Checked at a quarter of the interval: a stream gets its comment at most 25% late.
    wake.wait_for(lock, std::max(std::chrono::milliseconds(50), interval / 4));
    if (stopping || c == nullptr) continue;
    lock.unlock();
    c->live().keep_alive(interval);
    lock.lock();
  }
}

ApiServer::ApiServer(ApiServerOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {
  Impl* impl = impl_.get();
  impl->http = std::make_unique<HttpServer>(
      impl->options.http,
      [impl](Request request, std::shared_ptr<Responder> responder) {
        impl->handle(std::move(request), std::move(responder));
      });
  impl->http->start();
  impl->keep_alive = std::thread([impl] { impl->keep_alive_loop(); });
}

ApiServer::~ApiServer() { shutdown(std::chrono::milliseconds(0)); }

std::uint16_t ApiServer::port() const { return impl_->http->port(); }

std::size_t ApiServer::open_connections() const { return impl_->http->open_connections(); }

void ApiServer::set_ready(ApiContext& ctx) {
  // The router is made before the context is published: the I/O thread uses it only after
  // it sees ctx (sequentially consistent atomic).
  impl_->router = std::make_unique<Router>(ctx);
  impl_->ctx = &ctx;
}

void ApiServer::shutdown(std::chrono::milliseconds grace) {
  {
    std::lock_guard lock(impl_->mutex);
    if (impl_->shut_down) return;
    impl_->shut_down = true;
  }
  if (ApiContext* c = impl_->ctx.load()) {
    c->set_draining();
    const std::size_t running = c->live().size();
    if (running > 0) {
      spdlog::info("shutting down: waiting up to {:.1f} s for {} running requests",
                   static_cast<double>(grace.count()) / 1000.0, running);
    }
    if (!c->live().wait_empty(grace)) {
      const auto left = c->live().ids();
      spdlog::warn("shutting down: aborting {} requests still running after the grace period",
                   left.size());
      for (const auto& id : left) c->engine().abort(id);
      // Their final events close the streams properly; a wedged engine must not block exit.
      c->live().wait_empty(std::chrono::seconds(5));
    }
  }
  {
    std::lock_guard lock(impl_->mutex);
    impl_->stopping = true;
  }
  impl_->wake.notify_all();
  if (impl_->keep_alive.joinable()) impl_->keep_alive.join();
  impl_->http->stop();
}

}  // namespace flint::server
