// The HTTP/1.1 transport of `flint serve`: Boost.Beast's parser over one Boost.Asio thread.
//
// A transport only: it knows nothing of JSON, OpenAI or the engine. Each complete request is
// handed to one handler callback together with a Responder, through which the answer is sent
// at once or later, whole or streamed, from any thread (docs/server.md, "HTTP layer").
//
// Threading: one I/O thread multiplexes every connection (hundreds of idle streams cost a
// socket and a few KiB each, not a thread). The handler runs on that thread and must not
// block; Responder methods may be called from any thread and post their work onto it.
// Ownership: HttpServer owns the I/O thread and the sockets; a Responder holds only weak
// references, so it may outlive its connection and the server (its calls then return false).
// Beast and Asio stay inside http_server.cpp (this header is cheap to include).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace flint::server {

using Headers = std::vector<std::pair<std::string, std::string>>;

struct HttpServerOptions {
  std::string host = "127.0.0.1";
  std::uint16_t port = 0;  // 0: the system picks a free port (see HttpServer::port)
  std::size_t max_body_bytes = std::size_t{32} << 20;    // larger bodies are answered 413
  std::size_t max_header_bytes = std::size_t{64} << 10;  // request line + headers, else 431
  // The request line and headers must arrive within this (counted from the connection's
  // accept or the request's first byte); else 408 and close. Slow-loris protection.
  std::chrono::milliseconds header_timeout{std::chrono::seconds(30)};
  // A keep-alive connection with no request in flight is closed after this; it also bounds
  // the silence between two reads of a request body and the duration of one socket write.
  std::chrono::milliseconds idle_timeout{std::chrono::seconds(120)};
  // Beyond this many open connections, new ones are answered 503 and closed.
  std::size_t max_connections = 1024;
  // Bytes of a stream written by the handler but not yet taken by the client's socket; a
  // client that reads slower than the engine writes is disconnected beyond this.
  std::size_t max_stream_backlog_bytes = std::size_t{4} << 20;
  std::string server_header = "flint";
};

struct Request {
  std::string method;          // as sent: "GET", "POST", ...
  std::string target;          // path and query, as sent: "/v1/models?x=1"
  Headers headers;             // in arrival order, names as sent
  std::string body;            // decoded (a chunked body is reassembled)
  std::string remote_address;  // "ip:port" of the client

  // The first header of that name, compared without case; nullopt if absent.
  std::optional<std::string_view> header(std::string_view name) const;
};

// The answer to one request. Thread-safe: every call may come from any thread; the work is
// posted onto the I/O thread in call order. Once the client has gone away (or the server has
// stopped) calls are no-ops that return false. Using it out of order (a second respond, a
// write before start_stream or after finish) is a bug of the caller: logged, returns false.
// If the last reference is dropped without an answer, the client gets a 500; if it is dropped
// mid-stream, the connection is closed (a truncated stream must not look complete).
// An interface so that endpoint tests can record answers without sockets.
class Responder {
 public:
  virtual ~Responder() = default;

  // A whole response with Content-Length. `extra_headers` must not set the framing headers
  // (Content-Length, Transfer-Encoding, Connection): the transport owns them and drops those.
  virtual bool respond(int status, std::string_view content_type, std::string body,
                       const Headers& extra_headers = {}) = 0;

  // A streamed response: HTTP/1.1 chunked transfer encoding (to an HTTP/1.0 client the raw
  // bytes, then close). Each write goes to the socket as soon as the I/O thread runs (no
  // buffering on our side; TCP_NODELAY is set), as server-sent events need.
  virtual bool start_stream(int status, std::string_view content_type,
                            const Headers& extra_headers = {}) = 0;
  // False (and the connection closed) once more than max_stream_backlog_bytes are queued.
  virtual bool write(std::string chunk) = 0;
  virtual bool finish() = 0;

  // `callback` runs once on the I/O thread if the client goes away (or the server stops)
  // before the response is finished — the moment to abort the request and free its KV. A
  // peer closing its socket is seen even while a stream is idle (a read stays pending). If
  // the client is already gone, it runs at once (on the calling thread if the server has
  // stopped). A later call replaces an earlier callback that has not run yet.
  virtual void on_disconnect(std::function<void()> callback) = 0;

  // False once the client went away or the server stopped; true after a finished response.
  virtual bool connected() const = 0;
};

class HttpServer {
 public:
  // Called on the I/O thread for each complete request; must not block. An exception it
  // throws becomes a 500 carrying the message (if nothing was answered yet).
  using Handler = std::function<void(Request, std::shared_ptr<Responder>)>;

  HttpServer(HttpServerOptions options, Handler handler);
  ~HttpServer();  // stop()
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds, listens and starts the I/O thread. Throws flint::Error naming host:port if the
  // address cannot be resolved or bound (e.g. the port is in use). Call once.
  void start();
  // Closes the listener and every connection (their on_disconnect callbacks run), then joins
  // the I/O thread. Responses already finished but still being written are flushed first
  // (for up to 3 s), so that a stream that ended just before the stop reaches its client
  // whole. Any thread, any number of times; from the I/O thread itself (a handler)
  // it only initiates the shutdown and the destructor joins.
  void stop();

  // The bound port (the chosen one when options.port was 0); valid after start().
  std::uint16_t port() const;
  const HttpServerOptions& options() const;
  // Connections being served (not counting those being turned away with 503).
  std::size_t open_connections() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace flint::server
