// The HTTP transport against real sockets: a small blocking POSIX client talks to an
// HttpServer on a free port of 127.0.0.1. Every read has a timeout, so a server that stalls
// fails the test instead of hanging it; the server's timeouts are set far below the defaults.
#include "server/http_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <future>
#include <mutex>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "base/error.h"
#include "base/log.h"
#include "server/http_message.h"
#include "http_test_client.h"

namespace flint::server {
namespace {

using namespace std::chrono_literals;
using testing::Client;
using testing::Response;

// The server warns about every bad request the tests send on purpose.
const bool kQuiet = [] {
  spdlog::set_level(spdlog::level::critical);
  return true;
}();

HttpServerOptions test_options() {
  HttpServerOptions o;
  o.port = 0;
  o.header_timeout = 2s;
  o.idle_timeout = 5s;
  return o;
}

std::string get(std::string_view target, std::string_view extra = "") {
  return std::string("GET ") + std::string(target) + " HTTP/1.1\r\nHost: test\r\n" +
         std::string(extra) + "\r\n";
}

// Echoes the method, target and body.
void echo(Request request, std::shared_ptr<Responder> responder) {
  responder->respond(200, "text/plain", request.method + " " + request.target + " " + request.body);
}

// Collects the responders of the requests it receives, for a test to answer later.
class Parked {
 public:
  void operator()(Request, std::shared_ptr<Responder> responder) {
    std::lock_guard lock(mutex_);
    responders_.push_back(std::move(responder));
    arrived_.notify_all();
  }
  // The first `n` responders, waiting up to 10 s for them.
  std::vector<std::shared_ptr<Responder>> wait(std::size_t n) {
    std::unique_lock lock(mutex_);
    arrived_.wait_for(lock, 10s, [&] { return responders_.size() >= n; });
    if (responders_.size() < n) throw std::runtime_error("requests did not arrive");
    return {responders_.begin(), responders_.begin() + static_cast<std::ptrdiff_t>(n)};
  }
  HttpServer::Handler handler() {
    return [this](Request r, std::shared_ptr<Responder> s) { (*this)(std::move(r), std::move(s)); };
  }

 private:
  std::mutex mutex_;
  std::condition_variable arrived_;
  std::vector<std::shared_ptr<Responder>> responders_;
};

TEST(HttpServer, GetAnsweredWithContentLength) {
  std::promise<Request> seen;
  HttpServer server(test_options(), [&](Request request, std::shared_ptr<Responder> responder) {
    responder->respond(200, "text/plain", "hello", {{"X-Test", "1"}});
    seen.set_value(std::move(request));
  });
  server.start();
  ASSERT_NE(server.port(), 0);
  Client client(server.port());
  client.send(get("/v1/models?x=1", "X-Custom-Header: Value\r\n"));
  Response r = client.read_response();
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "hello");
  EXPECT_EQ(r.header("Content-Length"), "5");
  EXPECT_EQ(r.header("Content-Type"), "text/plain");
  EXPECT_EQ(r.header("X-Test"), "1");
  EXPECT_EQ(r.header("Server"), "flint");
  Request request = seen.get_future().get();
  EXPECT_EQ(request.method, "GET");
  EXPECT_EQ(request.target, "/v1/models?x=1");
  EXPECT_EQ(request.header("x-custom-header").value_or(""), "Value");
  EXPECT_FALSE(request.header("absent"));
  EXPECT_EQ(request.remote_address.rfind("127.0.0.1:", 0), 0u) << request.remote_address;
}

TEST(HttpServer, StartNamesTheAddressWhenThePortIsTaken) {
  HttpServer first(test_options(), echo);
  first.start();
  HttpServerOptions o = test_options();
  o.port = first.port();
  HttpServer second(o, echo);
  try {
    second.start();
    FAIL() << "start() on a used port did not throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("127.0.0.1:" + std::to_string(o.port)), std::string::npos)
        << e.what();
  }
}

TEST(HttpServer, KeepAliveServesRequestsInOrder) {
  HttpServer server(test_options(), echo);
  server.start();
  Client client(server.port());
  client.send(get("/one"));
  EXPECT_EQ(client.read_response().body, "GET /one ");
  client.send(get("/two"));
  EXPECT_EQ(client.read_response().body, "GET /two ");
  client.send(get("/three") + get("/four"));  // pipelined
  EXPECT_EQ(client.read_response().body, "GET /three ");
  EXPECT_EQ(client.read_response().body, "GET /four ");
  EXPECT_EQ(server.open_connections(), 1u);
}

TEST(HttpServer, ConnectionCloseAndHttp10CloseAfterTheResponse) {
  HttpServer server(test_options(), echo);
  server.start();
  {
    Client client(server.port());
    client.send(get("/a", "Connection: close\r\n"));
    Response r = client.read_response();
    EXPECT_EQ(r.header("Connection"), "close");
    EXPECT_TRUE(client.closed_by_server());
  }
  {
    Client client(server.port());
    client.send("GET /b HTTP/1.0\r\n\r\n");
    EXPECT_EQ(client.read_response().body, "GET /b ");
    EXPECT_TRUE(client.closed_by_server());
  }
}

TEST(HttpServer, PostBodiesWithContentLengthAndChunked) {
  HttpServer server(test_options(), echo);
  server.start();
  Client client(server.port());
  client.send("POST /p HTTP/1.1\r\nHost: t\r\nContent-Length: 11\r\n\r\nhello world");
  EXPECT_EQ(client.read_response().body, "POST /p hello world");
  client.send(
      "POST /c HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
      "5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n");
  EXPECT_EQ(client.read_response().body, "POST /c hello world");
}

TEST(HttpServer, ExpectContinueIsAnswered) {
  HttpServer server(test_options(), echo);
  server.start();
  Client client(server.port());
  client.send("POST /e HTTP/1.1\r\nHost: t\r\nContent-Length: 4\r\nExpect: 100-continue\r\n\r\n");
  EXPECT_EQ(client.read_until("\r\n\r\n"), "HTTP/1.1 100 Continue\r\n\r\n");
  client.send("body");
  EXPECT_EQ(client.read_response().body, "POST /e body");
}

TEST(HttpServer, StreamedChunksArriveBeforeFinish) {
  Parked parked;
  HttpServer server(test_options(), parked.handler());
  server.start();
  Client client(server.port());
  client.send(get("/stream"));
  auto responder = parked.wait(1)[0];  // answered from this (non-I/O) thread
  ASSERT_TRUE(responder->start_stream(200, "text/event-stream", {{"Cache-Control", "no-cache"}}));
  ASSERT_TRUE(responder->write("data: 1\n\n"));
  Response head = client.read_head();
  EXPECT_EQ(head.status, 200);
  EXPECT_EQ(head.header("Transfer-Encoding"), "chunked");
  EXPECT_EQ(head.header("Cache-Control"), "no-cache");
  EXPECT_EQ(client.read_chunk(), "data: 1\n\n");  // flushed before the next write
  ASSERT_TRUE(responder->write("data: 2\n\n"));
  EXPECT_EQ(client.read_chunk(), "data: 2\n\n");
  ASSERT_TRUE(responder->write(""));  // ignored: an empty chunk would end the body
  ASSERT_TRUE(responder->finish());
  EXPECT_EQ(client.read_chunk(), "");
  EXPECT_TRUE(responder->connected());
  EXPECT_FALSE(responder->write("late"));  // after finish: misuse, refused
  client.send(get("/after"));              // the connection is reusable after a stream
  auto next = parked.wait(2)[1];
  next->respond(204, "", "");
  EXPECT_EQ(client.read_response().status, 204);
}

TEST(HttpServer, ResponderWorksFromAnotherThread) {
  std::mutex mutex;
  std::vector<std::thread> workers;
  HttpServer server(test_options(), [&](Request request, std::shared_ptr<Responder> responder) {
    std::lock_guard lock(mutex);
    workers.emplace_back([request = std::move(request), responder] {
      std::this_thread::sleep_for(10ms);
      responder->start_stream(200, "text/plain");
      for (int i = 0; i < 50; ++i) responder->write(std::to_string(i) + ",");
      responder->finish();
    });
  });
  server.start();
  Client client(server.port());
  for (int round = 0; round < 3; ++round) {
    client.send(get("/t"));
    Response r = client.read_response();
    std::string expected;
    for (int i = 0; i < 50; ++i) expected += std::to_string(i) + ",";
    EXPECT_EQ(r.body, expected);
  }
  server.stop();
  for (auto& t : workers) t.join();
}

// The endpoints start a stream in the handler (on the I/O thread) while the engine thread
// already writes its first events. Asio runs what the I/O thread posts from inside a handler
// only after that handler returns, later than what other threads posted meanwhile; the bytes
// must still leave in the order the calls were made (a chunk once went out before the head).
TEST(HttpServer, CallsFromTheHandlerAndAnotherThreadKeepTheirOrder) {
  HttpServer server(test_options(), [&](Request, std::shared_ptr<Responder> responder) {
    responder->start_stream(200, "text/plain");
    responder->write("handler,");
    std::thread([responder] {
      responder->write("engine,");
      responder->finish();
    }).join();  // the other thread's calls are made before this handler returns
  });
  server.start();
  Client client(server.port());
  for (int round = 0; round < 3; ++round) {
    client.send(get("/t"));
    Response r = client.read_response();
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(r.body, "handler,engine,");
  }
}

TEST(HttpServer, ClientDisconnectDuringStreamFiresOnDisconnectOnce) {
  Parked parked;
  HttpServer server(test_options(), parked.handler());
  server.start();
  auto client = std::make_unique<Client>(server.port());
  client->send(get("/stream"));
  auto responder = parked.wait(1)[0];
  std::atomic<int> calls{0};
  std::promise<void> fired;
  responder->on_disconnect([&] {
    if (calls++ == 0) fired.set_value();
  });
  ASSERT_TRUE(responder->start_stream(200, "text/event-stream"));
  ASSERT_TRUE(responder->write("data: x\n\n"));
  client->read_head();
  EXPECT_EQ(client->read_chunk(), "data: x\n\n");
  client.reset();  // the client goes away while the stream is idle
  ASSERT_EQ(fired.get_future().wait_for(2s), std::future_status::ready);
  EXPECT_FALSE(responder->connected());
  EXPECT_FALSE(responder->write("data: y\n\n"));
  EXPECT_FALSE(responder->finish());
  // A callback registered after the fact runs at once.
  std::promise<void> late;
  responder->on_disconnect([&] { late.set_value(); });
  EXPECT_EQ(late.get_future().wait_for(2s), std::future_status::ready);
  EXPECT_EQ(calls.load(), 1);
}

TEST(HttpServer, AClientThatDoesNotReadIsDisconnected) {
  HttpServerOptions o = test_options();
  o.max_stream_backlog_bytes = 256 << 10;
  Parked parked;
  HttpServer server(o, parked.handler());
  server.start();
  Client client(server.port());
  client.send(get("/stream"));  // and never reads the answer
  auto responder = parked.wait(1)[0];
  std::promise<void> fired;
  responder->on_disconnect([&] { fired.set_value(); });
  ASSERT_TRUE(responder->start_stream(200, "text/event-stream"));
  const std::string chunk(64 << 10, 'x');
  int writes = 0;
  while (writes < 4096 && responder->write(chunk)) ++writes;  // at most 256 MiB
  EXPECT_LT(writes, 4096) << "the backlog never filled";
  EXPECT_FALSE(responder->connected());
  EXPECT_EQ(fired.get_future().wait_for(2s), std::future_status::ready);
}

TEST(HttpServer, BodyAboveTheLimitIs413) {
  HttpServerOptions o = test_options();
  o.max_body_bytes = 1000;
  HttpServer server(o, echo);
  server.start();
  {
    Client client(server.port());
    client.send("POST /big HTTP/1.1\r\nHost: t\r\nContent-Length: 5000\r\n\r\n");
    Response r = client.read_response();
    EXPECT_EQ(r.status, 413);
    EXPECT_EQ(r.header("Content-Type"), "application/json");
    EXPECT_NE(r.body.find("\"type\":\"invalid_request_error\",\"code\":413}"), std::string::npos)
        << r.body;
    EXPECT_TRUE(client.closed_by_server());
  }
  {
    Client client(server.port());
    client.send("POST /big HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n");
    client.send("3e8\r\n" + std::string(1000, 'a') + "\r\n1\r\nb\r\n0\r\n\r\n");
    EXPECT_EQ(client.read_response().status, 413);
  }
}

TEST(HttpServer, GarbageRequestLineIs400AndClose) {
  HttpServer server(test_options(), echo);
  server.start();
  Client client(server.port());
  client.send("GARBAGE\x01 / NOPE\r\n\r\n");
  Response r = client.read_response();
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.header("Connection"), "close");
  EXPECT_TRUE(client.closed_by_server());
}

TEST(HttpServer, HeaderTimeoutClosesASilentOrSlowConnection) {
  HttpServerOptions o = test_options();
  o.header_timeout = 200ms;
  HttpServer server(o, echo);
  server.start();
  for (std::string_view sent : {"", "GET / HTTP/1.1\r\nHost:"}) {
    auto start = std::chrono::steady_clock::now();
    Client client(server.port(), 3000ms);
    client.send(sent);
    Response r = client.read_response();
    EXPECT_EQ(r.status, 408);
    EXPECT_TRUE(client.closed_by_server());
    EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);
  }
}

TEST(HttpServer, IdleTimeoutClosesAnIdleKeepAliveConnection) {
  HttpServerOptions o = test_options();
  o.idle_timeout = 200ms;
  HttpServer server(o, echo);
  server.start();
  Client client(server.port(), 3000ms);
  client.send(get("/x"));
  EXPECT_EQ(client.read_response().status, 200);
  auto start = std::chrono::steady_clock::now();
  std::string rest;
  EXPECT_TRUE(client.closed_by_server(&rest));
  EXPECT_EQ(rest, "");  // closed silently, no 408
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);
}

TEST(HttpServer, ConnectionsBeyondTheLimitGet503) {
  HttpServerOptions o = test_options();
  o.max_connections = 2;
  HttpServer server(o, echo);
  server.start();
  Client a(server.port()), b(server.port());
  a.send(get("/a"));
  b.send(get("/b"));
  EXPECT_EQ(a.read_response().status, 200);
  EXPECT_EQ(b.read_response().status, 200);
  {
    Client c(server.port());
    Response r = c.read_response();
    EXPECT_EQ(r.status, 503);
    EXPECT_TRUE(c.closed_by_server());
  }
  a.send(get("/a2"));
  EXPECT_EQ(a.read_response().status, 200);
  a.close();
  // A slot is free again once the server has seen the close.
  for (int i = 0; i < 100 && server.open_connections() > 1; ++i) std::this_thread::sleep_for(5ms);
  Client d(server.port());
  d.send(get("/d"));
  EXPECT_EQ(d.read_response().status, 200);
}

TEST(HttpServer, ThrowingHandlerGives500AndTheServerGoesOn) {
  HttpServer server(test_options(), [](Request request, std::shared_ptr<Responder> responder) {
    if (request.target == "/throw") throw std::runtime_error("boom \"quoted\"");
    if (request.target == "/drop") return;  // never answered: the responder's end sends 500
    responder->respond(200, "text/plain", "fine");
  });
  server.start();
  Client client(server.port());
  client.send(get("/throw"));
  Response r = client.read_response();
  EXPECT_EQ(r.status, 500);
  EXPECT_EQ(
      r.body,
      "{\"error\":{\"message\":\"boom \\\"quoted\\\"\",\"type\":\"server_error\",\"code\":500}}");
  client.send(get("/drop"));
  EXPECT_EQ(client.read_response().status, 500);
  client.send(get("/ok"));
  EXPECT_EQ(client.read_response().body, "fine");
}

std::size_t thread_count() {
  std::size_t n = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/task")) ++n;
  return n;
}

TEST(HttpServer, HoldsTwoHundredStreamsOnOneThread) {
  constexpr std::size_t kStreams = 200;
  Parked parked;
  HttpServer server(test_options(), parked.handler());
  std::size_t threads_before = thread_count();
  server.start();
  std::vector<std::unique_ptr<Client>> clients;
  for (std::size_t i = 0; i < kStreams; ++i) {
    clients.push_back(std::make_unique<Client>(server.port()));
    clients.back()->send(get("/s/" + std::to_string(i)));
  }
  auto responders = parked.wait(kStreams);
  EXPECT_EQ(server.open_connections(), kStreams);
  // The I/O thread, plus slack for threads a sanitizer runtime starts on its own (TSan's
  // background thread appears lazily): a thread per connection would add 200.
  EXPECT_LE(thread_count(), threads_before + 4) << "a thread per connection?";
  for (std::size_t i = 0; i < kStreams; ++i) {
    ASSERT_TRUE(responders[i]->start_stream(200, "text/event-stream"));
    ASSERT_TRUE(responders[i]->write("first,"));
  }
  for (std::size_t i = 0; i < kStreams; ++i) {
    ASSERT_TRUE(responders[i]->write("second"));
    ASSERT_TRUE(responders[i]->finish());
  }
  for (auto& client : clients) {
    Response r = client->read_response();
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(r.body, "first,second");
  }
}

TEST(HttpServer, StopWithOpenStreamsReturnsPromptly) {
  Parked parked;
  auto server = std::make_unique<HttpServer>(test_options(), parked.handler());
  server->start();
  std::vector<std::unique_ptr<Client>> clients;
  for (int i = 0; i < 5; ++i) {
    clients.push_back(std::make_unique<Client>(server->port()));
    clients.back()->send(get("/s"));
  }
  auto responders = parked.wait(5);
  std::atomic<int> disconnects{0};
  for (auto& r : responders) {
    r->on_disconnect([&] { ++disconnects; });
    r->start_stream(200, "text/event-stream");
    r->write("data: x\n\n");
  }
  for (auto& c : clients) c->read_head();
  auto start = std::chrono::steady_clock::now();
  server->stop();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 1s);
  EXPECT_EQ(disconnects.load(), 5);
  for (auto& r : responders) {
    EXPECT_FALSE(r->connected());
    EXPECT_FALSE(r->write("late"));
  }
  server.reset();
  EXPECT_FALSE(responders[0]->finish());  // the server is gone: still only false
  for (auto& c : clients) EXPECT_TRUE(c->closed_by_server());
}

// Thousands of random and damaged requests, each on its own connection; afterwards the
// server must still answer a valid request at once.
TEST(HttpServer, SurvivesRandomAndTruncatedInput) {
  HttpServerOptions o = test_options();
  o.header_timeout = 300ms;
  o.max_body_bytes = 4096;
  HttpServer server(o, echo);
  server.start();
  const std::vector<std::string> seeds = {
      get("/v1/chat/completions"),
      "POST /p HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n\r\nhello",
      "POST /c HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
      "POST /e HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\nabc",
  };
  std::mt19937 rng(1234);
  auto pick = [&](std::size_t n) { return std::uniform_int_distribution<std::size_t>(0, n)(rng); };
  for (int i = 0; i < 2000; ++i) {
    std::string input = seeds[pick(seeds.size() - 1)];
    switch (i % 4) {
      case 0:  // random bytes
        input.resize(pick(200));
        for (char& c : input) c = static_cast<char>(pick(255));
        break;
      case 1:  // truncated
        input.resize(pick(input.size()));
        break;
      case 2:  // a few bytes flipped
        for (int k = 0; k < 3; ++k) input[pick(input.size() - 1)] = static_cast<char>(pick(255));
        break;
      default:  // a slice inserted twice
        input.insert(pick(input.size()), input.substr(pick(input.size() - 1), pick(20)));
    }
    Client client(server.port(), 2000ms);
    client.send(input);
    client.shutdown_write();
    EXPECT_TRUE(client.closed_by_server()) << "case " << i << " stalled";
  }
  Client client(server.port());
  client.send(get("/alive"));
  EXPECT_EQ(client.read_response().body, "GET /alive ");
}

}  // namespace
}  // namespace flint::server
