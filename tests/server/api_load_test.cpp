// The load test of the issue: 200 streaming clients at once on one server, a random third of
// them hanging up mid-stream. Every completed stream must be well formed, every cancelled
// request freed (the engine back to zero), and the server healthy afterwards. Bounded: loopback
// only, short generations; the sanitizer builds run it too (leaks fail there).
#include <gtest/gtest.h>

#include <random>
#include <thread>

#include "api_harness.h"
#include "base/log.h"
#include "tiny_fixture.h"

namespace flint::server::testing {
namespace {

using namespace std::chrono_literals;

TEST(ApiLoad, TwoHundredStreamsWithRandomCancellations) {
  spdlog::set_level(spdlog::level::err);
  engine::EngineConfig ec = test_engine_config();
  ec.max_num_seqs = 64;
  ec.kv_cache_pages = 2048;
  ApiHarness h(test_server_config(), ec);
  constexpr int kClients = 200;
  const int max_tokens = flint::testing::kSanitized ? 3 : 8;
  std::mt19937 rng(42);
  std::vector<std::unique_ptr<Client>> clients;
  std::vector<bool> cancel(kClients);
  for (int i = 0; i < kClients; ++i) {
    cancel[static_cast<size_t>(i)] = rng() % 3 == 0;
    Json body = i % 2 == 0
                    ? Json{{"prompt", "Story number " + std::to_string(i)},
                           {"max_tokens", max_tokens},
                           {"stream", true},
                           {"stream_options", {{"include_usage", true}}}}
                    : Json{{"messages", Json::array({{{"role", "user"},
                                                      {"content", "Hi " + std::to_string(i)}}})},
                           {"max_tokens", max_tokens},
                           {"stream", true}};
    const char* path = i % 2 == 0 ? "/v1/completions" : "/v1/chat/completions";
    auto c = std::make_unique<Client>(h.port(), 300s);
    const std::string text = body.dump();
    ASSERT_TRUE(c->send(std::string("POST ") + path + " HTTP/1.1\r\nHost: x\r\nContent-Length: " +
                        std::to_string(text.size()) + "\r\n\r\n" + text));
    clients.push_back(std::move(c));
  }
  int completed = 0, cancelled = 0;
  for (int i = 0; i < kClients; ++i) {
    Client& c = *clients[static_cast<size_t>(i)];
    Response head = c.read_head();
    ASSERT_EQ(head.status, 200) << "client " << i;
    if (cancel[static_cast<size_t>(i)]) {
      c.close();  // hangs up after the head, maybe before any token
      ++cancelled;
      continue;
    }
    std::string body;
    for (std::string chunk; !(chunk = c.read_chunk()).empty();) body += chunk;
    std::vector<SseEvent> events = parse_sse(body);
    ASSERT_FALSE(events.empty()) << "client " << i;
    EXPECT_EQ(events.back().data, "[DONE]") << "client " << i;
    std::string finish;
    for (size_t k = 0; k + 1 < events.size(); ++k) {
      Json chunk = Json::parse(events[k].data, nullptr, false);
      ASSERT_FALSE(chunk.is_discarded()) << events[k].data;
      for (const auto& choice : chunk["choices"]) {
        if (!choice["finish_reason"].is_null()) finish = choice["finish_reason"];
      }
    }
    EXPECT_FALSE(finish.empty()) << "client " << i << ": no finish_reason in " << body;
    ++completed;
  }
  EXPECT_EQ(completed + cancelled, kClients);
  engine::EngineStats s;
  for (int i = 0; i < 1200; ++i) {
    s = h.engine->stats();
    if (h.ctx->live().size() == 0 && s.running == 0 && s.waiting == 0 && s.kv_pages_used == 0) break;
    std::this_thread::sleep_for(50ms);
  }
  EXPECT_EQ(h.ctx->live().size(), 0u);
  EXPECT_EQ(s.running + s.waiting, 0);
  EXPECT_EQ(s.kv_pages_used, 0);
  EXPECT_EQ(request(h.port(), "GET", "/health").status, 200);
  JsonResponse after = post_json(h.port(), "/v1/completions", Json{{"prompt", "x"}, {"max_tokens", 2}});
  EXPECT_EQ(after.status, 200);
}

}  // namespace
}  // namespace flint::server::testing
