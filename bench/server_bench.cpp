// The cost of the HTTP API around the engine, on the tiny preset over loopback:
//   BM_Version          a keep-alive GET /version: the transport and router alone
//   BM_EngineOneToken   one greedy token straight through Engine::submit (the baseline)
//   BM_HttpOneToken     the same generation as POST /v1/completions on a keep-alive socket
//                       (JSON, tokenizing, the generation pipeline, the transport)
//   BM_IdleStreamMemory RSS per open SSE stream waiting in the queue, 800 of them (counter
//                       bytes_per_stream)
// The added latency of the API is BM_HttpOneToken - BM_EngineOneToken (docs/performance.md).
//
//   build/bench/flint_server_bench [--benchmark_filter=...]
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <benchmark/benchmark.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "base/log.h"
#include "engine/engine.h"
#include "model/deepseek_v4/model.h"
#include "model/deepseek_v4/tiny_checkpoint.h"
#include "server/api_context.h"
#include "server/api_server.h"
#include "server/metrics.h"
#include "text/tokenizer.h"
#include "text/tokenizer_files.h"

namespace flint::server {
namespace {

struct World {
  World() {
    init_logging("warning");
    dir = std::filesystem::temp_directory_path() / "flint-server-bench-tiny";
    if (!std::filesystem::exists(dir / "tokenizer.json")) {
      dsv4::write_tiny_checkpoint(dir, dsv4::tiny_preset("tiny"), {});
      text::write_deepseek_v4_tokenizer_files(
          std::filesystem::path(FLINT_NPM_DIR) / "@lenml" / "tokenizer-deepseek_v3" / "models",
          dir);
    }
    LoadOptions o;
    o.log = false;
    model = dsv4::load_model(dir, o);
    tokenizer = std::make_unique<text::Tokenizer>(text::Tokenizer::load(dir));
  }
  std::filesystem::path dir;
  std::unique_ptr<dsv4::Model> model;
  std::unique_ptr<text::Tokenizer> tokenizer;
};

World& world() {
  static World w;
  return w;
}

struct Server {
  explicit Server(int64_t max_num_seqs = 8) {
    engine::EngineConfig ec;
    ec.max_model_len = 1024;
    ec.block_size = 128;
    ec.kv_cache_pages = 1024;
    ec.max_num_seqs = max_num_seqs;
    engine = std::make_unique<engine::Engine>(*world().model, ec);
    ServerConfig config;
    config.served_model_names = {"tiny"};
    config.max_model_len = 1024;
    config.default_sampling.temperature = 0;
    metrics = std::make_unique<Metrics>("tiny");
    ctx = std::make_unique<ApiContext>(config, *engine, *world().tokenizer, *metrics);
    ApiServerOptions o;
    o.http.host = "127.0.0.1";
    api = std::make_unique<ApiServer>(o);
    api->set_ready(*ctx);
  }
  ~Server() {
    api->shutdown(std::chrono::milliseconds(0));
    engine.reset();  // its thread's callbacks use the context
  }
  std::unique_ptr<Metrics> metrics;
  std::unique_ptr<ApiContext> ctx;
  std::unique_ptr<engine::Engine> engine;
  std::unique_ptr<ApiServer> api;
};

// A keep-alive connection that reads Content-Length responses.
class Connection {
 public:
  explicit Connection(uint16_t port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0)
      throw std::runtime_error("connect failed");
  }
  ~Connection() { ::close(fd_); }
  void send(const std::string& data) {
    for (size_t done = 0; done < data.size();) {
      ssize_t n = ::send(fd_, data.data() + done, data.size() - done, MSG_NOSIGNAL);
      if (n <= 0) throw std::runtime_error("send failed");
      done += static_cast<size_t>(n);
    }
  }
  std::string read_head() {
    size_t end;
    while ((end = buf_.find("\r\n\r\n")) == std::string::npos) fill();
    std::string head = buf_.substr(0, end + 4);
    buf_.erase(0, end + 4);
    return head;
  }
  // One whole response with Content-Length; returns the body.
  std::string exchange(const std::string& request) {
    send(request);
    std::string head = read_head();
    const size_t at = head.find("Content-Length: ");
    const size_t length = std::stoul(head.substr(at + 16));
    while (buf_.size() < length) fill();
    std::string body = buf_.substr(0, length);
    buf_.erase(0, length);
    return body;
  }

 private:
  void fill() {
    char tmp[65536];
    ssize_t n = ::recv(fd_, tmp, sizeof tmp, 0);
    if (n <= 0) throw std::runtime_error("connection closed");
    buf_.append(tmp, static_cast<size_t>(n));
  }
  int fd_ = -1;
  std::string buf_;
};

std::string post(const std::string& path, const std::string& body) {
  return "POST " + path + " HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n" +
         "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

void BM_Version(benchmark::State& state) {
  Server server;
  Connection c(server.api->port());
  const std::string request = "GET /version HTTP/1.1\r\nHost: x\r\n\r\n";
  for (auto _ : state) benchmark::DoNotOptimize(c.exchange(request));
  state.SetItemsProcessed(state.iterations());
}

const char* kPrompt = "The capital of France is";

void BM_EngineOneToken(benchmark::State& state) {
  Server server;
  std::vector<int32_t> prompt = world().tokenizer->encode(kPrompt, false);
  int64_t i = 0;
  for (auto _ : state) {
    engine::EngineRequest r;
    r.id = std::to_string(i++);
    r.prompt = prompt;
    r.sampling.temperature = 0;
    r.sampling.max_tokens = 1;
    r.cache_salt = r.id;  // no prefix-cache hits: the HTTP benchmark has none either
    auto queue = server.engine->submit(std::move(r));
    engine::RequestOutput ev;
    while (queue->pop(ev)) {
    }
  }
  state.SetItemsProcessed(state.iterations());
}

void BM_HttpOneToken(benchmark::State& state) {
  Server server;
  Connection c(server.api->port());
  int64_t i = 0;
  for (auto _ : state) {
    const std::string body = std::string(R"({"prompt": ")") + kPrompt +
                             R"(", "max_tokens": 1, "cache_salt": ")" + std::to_string(i++) +
                             R"("})";
    benchmark::DoNotOptimize(c.exchange(post("/v1/completions", body)));
  }
  state.SetItemsProcessed(state.iterations());
}

int64_t rss_bytes() {
  std::ifstream in("/proc/self/statm");
  int64_t pages = 0, resident = 0;
  in >> pages >> resident;
  return resident * ::sysconf(_SC_PAGESIZE);
}

// Streams waiting in the queue behind one long request: the HTTP side of an idle stream
// (socket, parser, SSE state, the queued request), without KV.
void BM_IdleStreamMemory(benchmark::State& state) {
  constexpr int kStreams = 800;
  for (auto _ : state) {
    Server server(/*max_num_seqs=*/1);
    Connection busy(server.api->port());
    busy.send(post("/v1/completions",
                   R"({"prompt": "x", "max_tokens": 1000, "ignore_eos": true, "stream": true})"));
    busy.read_head();
    const int64_t before = rss_bytes();
    std::vector<std::unique_ptr<Connection>> streams;
    for (int k = 0; k < kStreams; ++k) {
      streams.push_back(std::make_unique<Connection>(server.api->port()));
      streams.back()->send(post("/v1/completions", R"({"prompt": "Hello there", "max_tokens": 4, "stream": true})"));
      streams.back()->read_head();
    }
    const int64_t after = rss_bytes();
    state.counters["bytes_per_stream"] =
        static_cast<double>(after - before) / static_cast<double>(kStreams);
  }
}

// Real time: the work happens on the server's threads, not the benchmark's.
BENCHMARK(BM_Version)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_EngineOneToken)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_HttpOneToken)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_IdleStreamMemory)->Unit(benchmark::kMillisecond)->Iterations(1);

}  // namespace
}  // namespace flint::server
