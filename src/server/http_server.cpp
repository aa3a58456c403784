// HttpServer: the listener, the I/O thread, one Connection per socket and the Responder that
// hands answers from any thread back to the I/O thread. The only file that includes Beast.
//
// A connection is a small state machine driven by completions on the I/O thread:
//   idle --first byte--> header --headers parsed--> body --complete--> responding
//   responding --response written--> idle (keep-alive) or linger (close) --> closed
// One read stays pending in every state but linger's drain, so a peer that goes away is seen
// at once even while a stream is silent. Requests on a connection are answered in order: the
// next one is parsed only once the previous response has been written.
#include "server/http_server.h"

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>

#include <array>
#include <atomic>
#include <cstring>
#include <deque>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>

#include "base/check.h"
#include "base/error.h"
#include "base/log.h"
#include "server/http_message.h"

namespace flint::server {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = boost::beast::http;
using tcp = asio::ip::tcp;
using boost::system::error_code;
using Clock = std::chrono::steady_clock;

class Connection;

namespace {

constexpr std::size_t kReadChunk = 8192;
// While a response is in flight, at most this much of a pipelined next request is buffered;
// beyond it reading pauses (and with it the detection of a disconnect, a documented limit).
constexpr std::size_t kPipelineBytes = std::size_t{64} << 10;
// After a response with Connection: close, what the client still sends is read and dropped
// for this long (or this many bytes) before closing, so that the kernel does not answer
// unread bytes with a reset that could destroy the response before the client reads it.
constexpr auto kLingerTime = std::chrono::seconds(2);
// How long stop() lets finished responses reach their clients before closing them anyway.
constexpr auto kDrainTime = std::chrono::seconds(3);
constexpr std::size_t kLingerBytes = std::size_t{1} << 20;
// Connections beyond max_connections being answered 503 at once; beyond this they are
// closed without an answer (a flood must not grow memory).
constexpr std::size_t kMaxRejecting = 64;

// What the caller of a Responder has done so far (any thread, under Exchange::mutex).
enum class Claim { kNone, kWhole, kStream, kFinished };

// A Responder call's work, run on the I/O thread for the connection that serves the exchange.
using ConnectionOp = std::function<void(Connection&)>;

// One request and its response, shared by the Connection (I/O thread) and its Responder.
struct Exchange {
  // Fixed when the request has been parsed.
  bool keep_alive = false;
  bool http11 = true;
  bool head = false;  // a HEAD request: headers only
  std::string server_header;

  std::mutex mutex;
  Claim claim = Claim::kNone;
  std::atomic<bool> gone{false};        // the client went away / server stopped
  std::atomic<std::size_t> backlog{0};  // stream bytes posted, not yet written

  // The Responder's calls not yet run, in call order, and whether a run of them is posted.
  // Asio defers what the I/O thread posts from inside a handler until the handler returns, so
  // one post per call would let another thread's later call overtake a handler's earlier one
  // (a chunk before the head); one queue drained in order keeps the order of the calls.
  std::mutex ops_mutex;
  std::vector<ConnectionOp> ops;
  bool ops_posted = false;

  // I/O thread only.
  std::function<void()> on_disconnect;
  bool ended = false;         // finished or disconnected: no callback will run after
  bool disconnected = false;  // ended because the client went away

  bool advance(Claim from, Claim to) {
    std::lock_guard lock(mutex);
    if (claim != from) return false;
    claim = to;
    return true;
  }
  Claim current() {
    std::lock_guard lock(mutex);
    return claim;
  }
};

// What the server and every Responder share. Responders hold it weakly: once the server is
// destroyed their posts fail (return false) instead of touching a dead io_context.
struct Shared {
  asio::io_context ioc{1};
  std::mutex mutex;
  bool stopped = false;  // set on the I/O thread once every connection has been closed
  std::size_t max_backlog = 0;

  template <typename F>
  bool post(F&& fn) {
    std::lock_guard lock(mutex);
    if (stopped) return false;
    asio::post(ioc, std::forward<F>(fn));
    return true;
  }
};

void run_disconnect_callback(std::function<void()>& callback) {
  if (!callback) return;
  auto fn = std::move(callback);
  callback = nullptr;
  try {
    fn();
  } catch (const std::exception& e) {
    spdlog::warn("HTTP on_disconnect callback threw: {}", e.what());
  }
}

}  // namespace

// The server state the connections see (HttpServer::Impl itself is private).
struct ServerCore {
  ServerCore(HttpServerOptions o, HttpServer::Handler h)
      : options(std::move(o)), handler(std::move(h)) {
    shared->max_backlog = options.max_stream_backlog_bytes;
  }

  void accept();
  void on_accept(error_code ec, tcp::socket socket);
  void shutdown();  // I/O thread
  void remove(Connection* c, bool rejecting);

  HttpServerOptions options;
  HttpServer::Handler handler;
  // Declared first: destroyed last, after the sockets and timers that use its io_context.
  std::shared_ptr<Shared> shared = std::make_shared<Shared>();
  std::optional<tcp::acceptor> acceptor;
  std::optional<asio::steady_timer> retry_timer;
  std::optional<asio::steady_timer> drain_timer;  // bounds the flush of finished responses
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work;
  std::unordered_map<Connection*, std::shared_ptr<Connection>> connections;  // I/O thread
  std::size_t rejecting = 0;                                                 // I/O thread
  bool stopping = false;                                                     // I/O thread
  std::atomic<std::size_t> open{0};
  std::uint16_t bound_port = 0;

  std::mutex stop_mutex;  // serialises start/stop callers
  std::thread thread;
  std::thread::id thread_id;
  bool started = false;
  bool shutdown_posted = false;
};

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(ServerCore& server, tcp::socket socket, bool rejecting)
      : server_(server),
        options_(server.options),
        socket_(std::move(socket)),
        read_timer_(socket_.get_executor()),
        write_timer_(socket_.get_executor()),
        rejecting_(rejecting) {
    error_code ec;
    socket_.set_option(tcp::no_delay(true), ec);  // a streamed token must not wait for an ACK
    auto endpoint = socket_.remote_endpoint(ec);
    remote_ =
        ec ? "unknown" : fmt::format("{}:{}", endpoint.address().to_string(), endpoint.port());
  }

  void start();
  void close(std::string_view why);
  bool serves(const std::shared_ptr<Exchange>& ex) const {
    return exchange_ == ex && phase_ == Phase::kResponding;
  }
  // The whole response is queued and only has to reach the socket.
  bool flushing() const { return phase_ == Phase::kResponding && response_done_; }

  // The work a Responder posts, for the exchange in flight (checked with serves()).
  void send_whole(int status, std::string head, std::string body, std::size_t body_bytes);
  void send_stream_head(int status, std::string head);
  void send_stream_bytes(std::string bytes, std::size_t payload, std::size_t backlog);
  void send_stream_end(std::string_view trailer);

 private:
  enum class Phase { kIdle, kHeader, kBody, kResponding, kLinger, kClosed };
  struct Out {
    std::string bytes;
    std::size_t backlog = 0;  // bytes of Exchange::backlog this item accounts for
  };

  void begin_request();
  void read();
  void on_read(error_code ec, std::size_t n);
  void parse();
  void dispatch();
  void reject_request(int status, std::string message);
  void queue(std::string bytes, std::size_t backlog = 0);
  void flush();
  void on_written(error_code ec);
  void end_exchange();
  void linger();
  void arm_read_timer(Clock::duration d);
  void on_read_timeout();
  void log_exchange(std::string_view outcome);

  ServerCore& server_;
  const HttpServerOptions& options_;
  tcp::socket socket_;
  asio::steady_timer read_timer_, write_timer_;
  unsigned read_timer_gen_ = 0, write_timer_gen_ = 0;
  std::string remote_;
  bool rejecting_;
  Phase phase_ = Phase::kHeader;

  std::optional<http::request_parser<http::string_body>> parser_;
  beast::flat_buffer buffer_;              // received, not yet parsed
  std::array<char, kReadChunk> read_buf_;  // target of the one pending read
  bool reading_ = false;
  bool continue_sent_ = false;
  std::size_t linger_bytes_ = 0;

  std::deque<Out> out_;
  std::vector<Out> sending_;  // owned until the write completes
  std::vector<asio::const_buffer> buffers_;
  bool writing_ = false;
  bool response_done_ = false;  // the last byte of the response is queued
  bool close_after_ = false;

  std::shared_ptr<Exchange> exchange_;
  std::string method_, target_;
  int status_ = 0;
  std::size_t body_bytes_ = 0;
  Clock::time_point started_;
};

// ---------------------------------------------------------------------------------------
// The Responder over a socket.

namespace {

class SocketResponder final : public Responder {
 public:
  SocketResponder(std::weak_ptr<Shared> shared, std::weak_ptr<Connection> connection,
                  std::shared_ptr<Exchange> exchange)
      : shared_(std::move(shared)), connection_(std::move(connection)), ex_(std::move(exchange)) {}

  ~SocketResponder() override {
    if (ex_->gone) return;
    if (ex_->advance(Claim::kNone, Claim::kWhole)) {
      spdlog::warn("HTTP handler dropped a request without answering it; sending 500");
      std::string body = error_body(500, "the server dropped the request without an answer");
      send_whole(500, "application/json", std::move(body), {});
    } else if (ex_->current() == Claim::kStream) {
      spdlog::warn("HTTP handler dropped a stream before finishing it; closing the connection");
      post([](Connection& c) { c.close("stream abandoned by the server"); });
    }
  }

  bool respond(int status, std::string_view content_type, std::string body,
               const Headers& extra_headers) override {
    if (!ex_->advance(Claim::kNone, Claim::kWhole)) return misuse("respond");
    return send_whole(status, content_type, std::move(body), extra_headers);
  }

  bool start_stream(int status, std::string_view content_type,
                    const Headers& extra_headers) override {
    if (!ex_->advance(Claim::kNone, Claim::kStream)) return misuse("start_stream");
    if (ex_->gone) return false;
    Framing framing{.chunked = ex_->http11, .close = !ex_->keep_alive};
    std::string head =
        response_head(status, content_type, extra_headers, ex_->server_header, framing);
    return post([status, head = std::move(head)](Connection& c) mutable {
      c.send_stream_head(status, std::move(head));
    });
  }

  bool write(std::string chunk) override {
    if (ex_->current() != Claim::kStream) return misuse("write");
    if (ex_->gone) return false;
    if (chunk.empty() || ex_->head) return true;  // an empty chunk would end the body
    std::size_t payload = chunk.size();
    std::string bytes = ex_->http11 ? chunk_frame(chunk) : std::move(chunk);
    std::size_t backlog = ex_->backlog.fetch_add(bytes.size()) + bytes.size();
    auto shared = shared_.lock();
    if (shared && backlog > shared->max_backlog) {
      ex_->gone = true;
      spdlog::warn("HTTP client reads too slowly ({} bytes queued); closing", backlog);
      post([](Connection& c) { c.close("client reads too slowly"); }, /*even_if_gone=*/true);
      return false;
    }
    std::size_t n = bytes.size();
    return post([bytes = std::move(bytes), payload, n](Connection& c) mutable {
      c.send_stream_bytes(std::move(bytes), payload, n);
    });
  }

  bool finish() override {
    if (!ex_->advance(Claim::kStream, Claim::kFinished)) return misuse("finish");
    if (ex_->gone) return false;
    bool chunked = ex_->http11 && !ex_->head;
    return post([chunked](Connection& c) { c.send_stream_end(chunked ? kLastChunk : ""); });
  }

  void on_disconnect(std::function<void()> callback) override {
    // The callback may own this responder: it is only ever stored in the Exchange, which the
    // connection clears when the exchange ends, so no cycle outlives the exchange.
    auto cb = std::make_shared<std::function<void()>>(std::move(callback));
    auto shared = shared_.lock();
    if (shared && shared->post([ex = ex_, cb] {
          if (ex->disconnected) {
            run_disconnect_callback(*cb);
          } else if (!ex->ended) {
            ex->on_disconnect = std::move(*cb);
          }
        })) {
      return;
    }
    // The server has stopped (it ended every exchange it had): run it here.
    if (ex_->gone) run_disconnect_callback(*cb);
  }

  bool connected() const override { return !ex_->gone && !shared_.expired(); }

 private:
  bool send_whole(int status, std::string_view content_type, std::string body,
                  const Headers& extra_headers) {
    if (ex_->gone) return false;
    Framing framing{.content_length = body.size(), .close = !ex_->keep_alive};
    std::string head =
        response_head(status, content_type, extra_headers, ex_->server_header, framing);
    std::size_t body_bytes = body.size();
    if (ex_->head) body.clear();
    return post([status, head = std::move(head), body = std::move(body),
                 body_bytes](Connection& c) mutable {
      c.send_whole(status, std::move(head), std::move(body), body_bytes);
    });
  }

  // Queues fn(connection) for the I/O thread, after every earlier call of this responder; it
  // runs only if the connection still serves this exchange. False if the client is gone or
  // the server stopped.
  bool post(ConnectionOp fn, bool even_if_gone = false) {
    if (ex_->gone && !even_if_gone) return false;
    auto shared = shared_.lock();
    if (!shared) return false;
    bool posted = true;
    {
      std::lock_guard lock(ex_->ops_mutex);
      ex_->ops.push_back(std::move(fn));
      if (!ex_->ops_posted) {
        posted = shared->post([connection = connection_, ex = ex_] { run_ops(connection, ex); });
        ex_->ops_posted = posted;
        if (!posted) ex_->ops.clear();
      }
    }
    return posted && (even_if_gone || !ex_->gone);
  }

  // I/O thread: runs the queued calls of `ex` in order, each while the connection serves it.
  static void run_ops(const std::weak_ptr<Connection>& connection,
                      const std::shared_ptr<Exchange>& ex) {
    std::vector<ConnectionOp> ops;
    {
      std::lock_guard lock(ex->ops_mutex);
      ops.swap(ex->ops);
      ex->ops_posted = false;
    }
    auto c = connection.lock();
    for (auto& op : ops) {
      if (c && c->serves(ex)) op(*c);
    }
  }

  bool misuse(std::string_view call) {
    spdlog::error("HTTP Responder::{} called out of order (a bug of the endpoint); ignored", call);
    return false;
  }

  std::weak_ptr<Shared> shared_;
  std::weak_ptr<Connection> connection_;
  std::shared_ptr<Exchange> ex_;
};

}  // namespace

// ---------------------------------------------------------------------------------------
// Connection: reading and parsing.

void Connection::start() {
  if (rejecting_) {
    spdlog::warn("HTTP {}: {} connections open (--max-connections); answering 503", remote_,
                 server_.open.load());
    phase_ = Phase::kResponding;
    reject_request(503, "the server has too many open connections; retry later");
    return;
  }
  // The first request's headers are due header_timeout after the accept.
  parser_.emplace();
  parser_->body_limit(options_.max_body_bytes);
  parser_->header_limit(static_cast<std::uint32_t>(options_.max_header_bytes));
  parser_->eager(true);
  phase_ = Phase::kHeader;
  arm_read_timer(options_.header_timeout);
  read();
}

void Connection::begin_request() {
  parser_.emplace();
  parser_->body_limit(options_.max_body_bytes);
  parser_->header_limit(static_cast<std::uint32_t>(options_.max_header_bytes));
  parser_->eager(true);
  continue_sent_ = false;
  method_.clear();
  target_.clear();
  if (buffer_.size() > 0) {  // a pipelined request arrived during the last response
    phase_ = Phase::kHeader;
    arm_read_timer(options_.header_timeout);
    parse();
  } else {
    phase_ = Phase::kIdle;
    arm_read_timer(options_.idle_timeout);
    read();
  }
}

void Connection::read() {
  if (reading_ || phase_ == Phase::kClosed) return;
  if (phase_ == Phase::kResponding && buffer_.size() >= kPipelineBytes) return;
  reading_ = true;
  socket_.async_read_some(
      asio::buffer(read_buf_),
      [self = shared_from_this()](error_code ec, std::size_t n) { self->on_read(ec, n); });
}

void Connection::on_read(error_code ec, std::size_t n) {
  reading_ = false;
  if (phase_ == Phase::kClosed) return;
  if (ec) {
    if (phase_ == Phase::kResponding && !exchange_) return;  // our error answer goes on
    bool mid_request = (phase_ == Phase::kHeader || phase_ == Phase::kBody) &&
                       (buffer_.size() > 0 || parser_->got_some());
    if (ec == asio::error::eof && !mid_request && phase_ != Phase::kResponding) {
      close("");
    } else {
      close(ec == asio::error::eof ? "the client closed the connection" : ec.message());
    }
    return;
  }
  if (phase_ == Phase::kLinger) {
    linger_bytes_ += n;
    if (linger_bytes_ > kLingerBytes) {
      close("");
    } else {
      read();
    }
    return;
  }
  auto space = buffer_.prepare(n);
  std::memcpy(space.data(), read_buf_.data(), n);
  buffer_.commit(n);
  if (phase_ == Phase::kIdle) {
    phase_ = Phase::kHeader;
    arm_read_timer(options_.header_timeout);
  }
  if (phase_ == Phase::kHeader || phase_ == Phase::kBody) {
    if (phase_ == Phase::kBody) arm_read_timer(options_.idle_timeout);  // progress: re-arm
    parse();
  } else {
    read();
  }
}

void Connection::parse() {
  error_code ec;
  while (buffer_.size() > 0 && !parser_->is_done()) {
    std::size_t used = parser_->put(buffer_.data(), ec);
    buffer_.consume(used);
    if (ec == http::error::need_more) {
      ec = {};
      break;
    }
    if (ec || used == 0) break;
  }
  if (ec) {
    if (ec == http::error::body_limit) {
      reject_request(413, fmt::format("the request body exceeds the limit of {} bytes",
                                      options_.max_body_bytes));
    } else if (ec == http::error::header_limit) {
      reject_request(431, fmt::format("the request headers exceed the limit of {} bytes",
                                      options_.max_header_bytes));
    } else {
      reject_request(400, fmt::format("malformed HTTP request: {}", ec.message()));
    }
    return;
  }
  if (phase_ == Phase::kHeader && parser_->is_header_done()) {
    phase_ = Phase::kBody;
    arm_read_timer(options_.idle_timeout);
    auto expect = parser_->get()[http::field::expect];
    if (!parser_->is_done() && !continue_sent_ &&
        iequals(std::string_view(expect.data(), expect.size()), "100-continue")) {
      continue_sent_ = true;
      queue("HTTP/1.1 100 Continue\r\n\r\n");
    }
  }
  if (parser_->is_done()) {
    dispatch();
  } else {
    read();
  }
}

void Connection::dispatch() {
  ++read_timer_gen_;  // no read deadline while the handler works
  read_timer_.cancel();
  phase_ = Phase::kResponding;
  auto& msg = parser_->get();

  Request request;
  request.method = std::string(msg.method_string());
  request.target = std::string(msg.target());
  for (const auto& field : msg) {
    request.headers.emplace_back(std::string(field.name_string()), std::string(field.value()));
  }
  request.body = std::move(msg.body());
  request.remote_address = remote_;

  auto ex = std::make_shared<Exchange>();
  ex->http11 = msg.version() >= 11;
  ex->keep_alive = ex->http11 && msg.keep_alive();  // HTTP/1.0 closes after the response
  ex->head = msg.method() == http::verb::head;
  ex->server_header = options_.server_header;
  exchange_ = ex;
  close_after_ = !ex->keep_alive;
  response_done_ = false;
  method_ = request.method;
  target_ = request.target.substr(0, 200);
  status_ = 0;
  body_bytes_ = 0;
  started_ = Clock::now();

  // Our own reference keeps the responder alive through a throwing handler, so that the 500
  // below carries the exception's message.
  auto responder = std::make_shared<SocketResponder>(server_.shared, weak_from_this(), ex);
  std::optional<std::string> failure;
  try {
    server_.handler(std::move(request), responder);
  } catch (const std::exception& e) {
    failure = e.what();
  } catch (...) {
    failure = "the handler threw a non-standard exception";
  }
  if (failure) {
    spdlog::warn("HTTP {} {}: the handler threw: {}", method_, target_, *failure);
    if (ex->advance(Claim::kNone, Claim::kWhole)) {
      std::string body = error_body(500, *failure);
      std::size_t n = body.size();
      Framing framing{.content_length = n, .close = !ex->keep_alive};
      send_whole(500, response_head(500, "application/json", {}, ex->server_header, framing),
                 ex->head ? std::string() : std::move(body), n);
    }
  }
  responder.reset();
  read();  // keep a read pending: a client that goes away is seen at once
}

void Connection::reject_request(int status, std::string message) {
  if (status != 503) spdlog::warn("HTTP {} from {}: {}", status, remote_, message);
  ++read_timer_gen_;
  read_timer_.cancel();
  phase_ = Phase::kResponding;
  exchange_.reset();
  method_.clear();
  std::string body = error_body(status, message);
  Framing framing{.content_length = body.size(), .close = true};
  close_after_ = true;
  response_done_ = true;
  queue(response_head(status, "application/json", {}, options_.server_header, framing));
  queue(std::move(body));
}

void Connection::arm_read_timer(Clock::duration d) {
  read_timer_.expires_after(d);
  read_timer_.async_wait([self = shared_from_this(), gen = ++read_timer_gen_](error_code ec) {
    if (!ec && gen == self->read_timer_gen_) self->on_read_timeout();
  });
}

void Connection::on_read_timeout() {
  switch (phase_) {
    case Phase::kHeader:
      reject_request(408, fmt::format("the request headers did not arrive within {} ms",
                                      options_.header_timeout.count()));
      break;
    case Phase::kBody:
      reject_request(
          408, fmt::format("the request body stalled for {} ms", options_.idle_timeout.count()));
      break;
    case Phase::kIdle:
      close("idle timeout");
      break;
    default:
      close("");  // linger over
  }
}

// ---------------------------------------------------------------------------------------
// Connection: writing and closing.

void Connection::send_whole(int status, std::string head, std::string body,
                            std::size_t body_bytes) {
  status_ = status;
  body_bytes_ = body_bytes;
  response_done_ = true;
  queue(std::move(head));
  if (!body.empty()) queue(std::move(body));
}

void Connection::send_stream_head(int status, std::string head) {
  status_ = status;
  queue(std::move(head));
}

void Connection::send_stream_bytes(std::string bytes, std::size_t payload, std::size_t backlog) {
  body_bytes_ += payload;
  queue(std::move(bytes), backlog);
}

void Connection::send_stream_end(std::string_view trailer) {
  response_done_ = true;
  if (trailer.empty()) {
    flush();
  } else {
    queue(std::string(trailer));
  }
}

void Connection::queue(std::string bytes, std::size_t backlog) {
  if (phase_ == Phase::kClosed) return;
  out_.push_back({std::move(bytes), backlog});
  flush();
}

void Connection::flush() {
  if (writing_ || phase_ == Phase::kClosed) return;
  if (out_.empty()) {
    if (response_done_ && phase_ == Phase::kResponding) end_exchange();
    return;
  }
  sending_.clear();
  buffers_.clear();
  while (!out_.empty()) {
    sending_.push_back(std::move(out_.front()));
    out_.pop_front();
  }
  for (const auto& o : sending_) buffers_.push_back(asio::buffer(o.bytes));
  writing_ = true;
  write_timer_.expires_after(options_.idle_timeout);
  write_timer_.async_wait([self = shared_from_this(), gen = ++write_timer_gen_](error_code ec) {
    if (!ec && gen == self->write_timer_gen_) self->close("write timed out");
  });
  asio::async_write(socket_, buffers_, [self = shared_from_this()](error_code ec, std::size_t) {
    self->on_written(ec);
  });
}

void Connection::on_written(error_code ec) {
  writing_ = false;
  ++write_timer_gen_;
  write_timer_.cancel();
  std::size_t backlog = 0;
  for (const auto& o : sending_) backlog += o.backlog;
  if (exchange_ && backlog > 0) exchange_->backlog -= backlog;
  sending_.clear();
  if (phase_ == Phase::kClosed) return;
  if (ec) {
    close(fmt::format("write failed: {}", ec.message()));
    return;
  }
  flush();
}

void Connection::end_exchange() {
  if (exchange_) {
    exchange_->ended = true;
    exchange_->on_disconnect = nullptr;  // may own the responder: drop it now
    log_exchange("");
    exchange_.reset();
  }
  response_done_ = false;
  if (close_after_ || server_.stopping) {
    linger();
  } else {
    begin_request();
  }
}

void Connection::linger() {
  phase_ = Phase::kLinger;
  error_code ec;
  socket_.shutdown(tcp::socket::shutdown_send, ec);
  buffer_.clear();
  linger_bytes_ = 0;
  arm_read_timer(std::min<Clock::duration>(kLingerTime, options_.header_timeout));
  read();
}

void Connection::log_exchange(std::string_view outcome) {
  if (method_.empty()) return;
  auto ms = std::chrono::duration<double, std::milli>(Clock::now() - started_).count();
  spdlog::debug("HTTP {} {} {} {}B {:.1f}ms{}{}", method_, target_, status_, body_bytes_, ms,
                outcome.empty() ? "" : " ", outcome);
}

void Connection::close(std::string_view why) {
  if (phase_ == Phase::kClosed) return;
  phase_ = Phase::kClosed;
  if (!why.empty()) spdlog::debug("HTTP {}: closing: {}", remote_, why);
  ++read_timer_gen_;
  ++write_timer_gen_;
  read_timer_.cancel();
  write_timer_.cancel();
  error_code ec;
  socket_.close(ec);
  out_.clear();
  if (auto ex = std::move(exchange_); ex && !ex->ended) {
    ex->ended = true;
    ex->disconnected = true;
    ex->gone = true;
    log_exchange(fmt::format("(client gone: {})", why.empty() ? "closed" : why));
    run_disconnect_callback(ex->on_disconnect);
  }
  server_.remove(this, rejecting_);
}

// ---------------------------------------------------------------------------------------
// The server.

struct HttpServer::Impl : ServerCore {
  using ServerCore::ServerCore;
};

void ServerCore::accept() {
  acceptor->async_accept(
      [this](error_code ec, tcp::socket socket) { on_accept(ec, std::move(socket)); });
}

void ServerCore::on_accept(error_code ec, tcp::socket socket) {
  if (stopping) return;
  if (ec) {
    if (ec == asio::error::operation_aborted) return;
    // E.g. out of file descriptors: back off instead of spinning on the error.
    spdlog::warn("HTTP server {}:{}: accept failed: {}", options.host, bound_port, ec.message());
    retry_timer->expires_after(std::chrono::milliseconds(100));
    retry_timer->async_wait([this](error_code wait_ec) {
      if (!wait_ec && !stopping) accept();
    });
    return;
  }
  bool reject = open.load() >= options.max_connections;
  if (reject && rejecting >= kMaxRejecting) {
    error_code ignored;
    socket.close(ignored);
  } else {
    auto c = std::make_shared<Connection>(*this, std::move(socket), reject);
    connections.emplace(c.get(), c);
    if (reject) {
      ++rejecting;
    } else {
      ++open;
    }
    c->start();
  }
  accept();
}

void ServerCore::remove(Connection* c, bool was_rejecting) {
  if (connections.erase(c) == 0) return;
  if (was_rejecting) {
    --rejecting;
  } else {
    --open;
  }
  if (stopping && connections.empty() && drain_timer) drain_timer->cancel();  // all flushed
}

void ServerCore::shutdown() {
  stopping = true;
  error_code ec;
  if (acceptor) acceptor->close(ec);
  if (retry_timer) retry_timer->cancel();
  // A finished response still being written (the last events of a stream that ended just
  // before the stop) is flushed first: its connection closes after it, as a response with
  // Connection: close would. Everything else closes now; stragglers after kDrainTime.
  auto all = connections;  // close() erases from the map
  bool draining = false;
  for (auto& [ptr, c] : all) {
    if (c->flushing()) {
      draining = true;
    } else {
      c->close("server stopping");
    }
  }
  if (draining) {
    drain_timer->expires_after(kDrainTime);
    drain_timer->async_wait([this](error_code timer_ec) {
      if (timer_ec) return;
      auto left = connections;
      for (auto& [ptr, c] : left) c->close("server stopping (drain time over)");
    });
  }
  {
    std::lock_guard lock(shared->mutex);
    shared->stopped = true;
  }
  work.reset();  // run() returns once the cancelled operations have completed
}

HttpServer::HttpServer(HttpServerOptions options, Handler handler)
    : impl_(std::make_unique<Impl>(std::move(options), std::move(handler))) {
  FLINT_CHECK(impl_->handler, "HttpServer needs a handler");
}

HttpServer::~HttpServer() {
  FLINT_CHECK(std::this_thread::get_id() != impl_->thread_id,
              "HttpServer destroyed on its own I/O thread");
  stop();
}

void HttpServer::start() {
  Impl& s = *impl_;
  std::lock_guard lock(s.stop_mutex);
  FLINT_CHECK(!s.started, "HttpServer::start called twice");
  auto& ioc = s.shared->ioc;
  error_code ec;
  tcp::resolver resolver(ioc);
  auto results = resolver.resolve(s.options.host, std::to_string(s.options.port),
                                  tcp::resolver::passive | tcp::resolver::numeric_service, ec);
  if (ec || results.empty()) {
    throw Error("cannot listen on {}:{}: cannot resolve the host: {}", s.options.host,
                s.options.port, ec ? ec.message() : "no address");
  }
  tcp::endpoint endpoint = results.begin()->endpoint();
  tcp::acceptor acceptor(ioc);
  auto check = [&](const char* what) {
    if (!ec) return;
    throw Error("cannot listen on {}:{}: {} failed: {}", s.options.host, s.options.port, what,
                ec.message());
  };
  acceptor.open(endpoint.protocol(), ec);
  check("open");
  acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
  check("SO_REUSEADDR");
  acceptor.bind(endpoint, ec);
  check("bind");
  acceptor.listen(asio::socket_base::max_listen_connections, ec);
  check("listen");
  s.bound_port = acceptor.local_endpoint(ec).port();
  s.acceptor.emplace(std::move(acceptor));
  s.retry_timer.emplace(ioc);
  s.drain_timer.emplace(ioc);
  s.work.emplace(ioc.get_executor());
  s.accept();
  s.started = true;
  s.thread = std::thread([&s] {
    try {
      s.shared->ioc.run();
    } catch (const std::exception& e) {
      // Handlers catch what they call; reaching here is a bug, but the process lives on.
      spdlog::error("HTTP I/O thread stopped by an exception: {}", e.what());
    }
  });
  s.thread_id = s.thread.get_id();
  spdlog::info("HTTP server listening on {}:{}", s.options.host, s.bound_port);
}

void HttpServer::stop() {
  Impl& s = *impl_;
  std::lock_guard lock(s.stop_mutex);
  if (!s.started) return;
  if (!s.shutdown_posted) {
    s.shutdown_posted = true;
    asio::post(s.shared->ioc, [&s] { s.shutdown(); });
  }
  if (std::this_thread::get_id() == s.thread_id) return;  // the destructor joins
  if (s.thread.joinable()) s.thread.join();
}

std::uint16_t HttpServer::port() const { return impl_->bound_port; }
const HttpServerOptions& HttpServer::options() const { return impl_->options; }
std::size_t HttpServer::open_connections() const { return impl_->open.load(); }

}  // namespace flint::server
