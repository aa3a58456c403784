// The OpenAI-compatible endpoints end to end: the real ApiServer on the tiny checkpoint, driven
// over sockets. The random-weight model writes gibberish, so what the model "says" comes from
// flint_debug_replay (token ids replayed as its output) where a test needs given text; the rest
// checks properties that hold for any output (stream == whole, stop strings cut, usage adds up).
#include <gtest/gtest.h>

#include <algorithm>
#include <future>
#include <map>
#include <thread>

#include "api_harness.h"
#include "base/log.h"
#include "text/chat_markers.h"

namespace flint::server::testing {
namespace {

using namespace std::chrono_literals;

const bool kQuiet = [] {
  spdlog::set_level(spdlog::level::err);
  return true;
}();

std::vector<int32_t> ids_of(const std::string& text) { return v4_tokenizer().encode(text, false); }

Json replay(const std::string& text) {
  std::vector<int32_t> ids = ids_of(text);
  ids.push_back(v4_tokenizer().token_id("<｜end▁of▁sentence｜>"));
  return Json(ids);
}

Json user_chat(const std::string& text, bool thinking = false) {
  return Json{{"model", "tiny"},
              {"messages", Json::array({{{"role", "user"}, {"content", text}}})},
              {"chat_template_kwargs", {{"thinking", thinking}}},
              {"max_tokens", 8}};
}

const std::string kCall =
    "\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"get_weather\">\n<｜DSML｜parameter "
    "name=\"city\" string=\"true\">Paris</｜DSML｜parameter>\n<｜DSML｜parameter name=\"days\" "
    "string=\"false\">3</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>";

Json weather_tools() {
  return Json::parse(R"([{"type": "function", "function": {"name": "get_weather",
    "description": "Weather of a city", "parameters": {"type": "object", "properties":
    {"city": {"type": "string"}, "days": {"type": "integer"}}, "required": ["city"]}}}])");
}

// Everything a stream said, put together.
struct Streamed {
  std::string reasoning, content;
  std::map<int, std::pair<std::string, std::string>> calls;  // index -> name, arguments
  std::string finish_reason;
  Json usage;
  bool done = false;
  int chunks = 0;
};

Streamed collect(const std::string& body) {
  Streamed s;
  for (const SseEvent& e : parse_sse(body)) {
    if (e.data == "[DONE]") {
      s.done = true;
      continue;
    }
    Json chunk = Json::parse(e.data);
    ++s.chunks;
    if (chunk.contains("usage") && !chunk["usage"].is_null()) s.usage = chunk["usage"];
    for (const auto& choice : chunk["choices"]) {
      const Json& d = choice.contains("delta") ? choice["delta"] : choice;  // chat or text
      if (d.contains("text")) s.content += d["text"].get<std::string>();
      if (d.contains("reasoning_content")) s.reasoning += d["reasoning_content"].get<std::string>();
      if (d.contains("content")) s.content += d["content"].get<std::string>();
      if (d.contains("tool_calls")) {
        for (const auto& c : d["tool_calls"]) {
          auto& call = s.calls[c["index"].get<int>()];
          if (c["function"].contains("name")) call.first += c["function"]["name"].get<std::string>();
          call.second += c["function"]["arguments"].get<std::string>();
        }
      }
      if (!choice["finish_reason"].is_null()) s.finish_reason = choice["finish_reason"];
    }
  }
  return s;
}

bool has_markup(const std::string& text) {
  return text.find("DSML") != std::string::npos || text.find("<think>") != std::string::npos ||
         text.find("</think>") != std::string::npos;
}

TEST(ApiServer, HealthVersionAndModels) {
  ApiHarness h;
  EXPECT_EQ(request(h.port(), "GET", "/health").status, 200);
  Response v = request(h.port(), "GET", "/version");
  EXPECT_EQ(Json::parse(v.body)["version"], "test");
  Response m = request(h.port(), "GET", "/v1/models");
  ASSERT_EQ(m.status, 200);
  Json models = Json::parse(m.body);
  EXPECT_EQ(models["object"], "list");
  EXPECT_EQ(models["data"][0]["id"], "tiny");
  EXPECT_EQ(models["data"][0]["max_model_len"], 1024);
  EXPECT_EQ(request(h.port(), "GET", "/v1/models/tiny").status, 200);
  EXPECT_EQ(request(h.port(), "GET", "/v1/models/other").status, 404);
}

TEST(ApiServer, HealthIs503UntilTheModelIsReady) {
  ApiServerOptions o;
  o.http.host = "127.0.0.1";
  ApiServer api(o);
  EXPECT_EQ(request(api.port(), "GET", "/health").status, 503);
  EXPECT_EQ(request(api.port(), "POST", "/v1/chat/completions", "{}").status, 503);
  Metrics metrics("tiny");
  auto engine = std::make_unique<engine::Engine>(tiny_model(), test_engine_config());
  ApiContext ctx(test_server_config(), *engine, v4_tokenizer(), metrics);
  api.set_ready(ctx);
  EXPECT_EQ(request(api.port(), "GET", "/health").status, 200);
  api.shutdown(0ms);
  engine.reset();  // before the context its callbacks use
}

// Greedy output is the same whether streamed or not, and the usage adds up.
TEST(ApiServer, ChatStreamedEqualsWhole) {
  ApiHarness h;
  Json body = user_chat("Tell me about Paris.");
  JsonResponse whole = post_json(h.port(), "/v1/chat/completions", body);
  ASSERT_EQ(whole.status, 200) << whole.text;
  const Json& choice = whole.body["choices"][0];
  EXPECT_EQ(whole.body["object"], "chat.completion");
  EXPECT_EQ(choice["message"]["role"], "assistant");
  EXPECT_EQ(choice["finish_reason"], "length");
  const Json& usage = whole.body["usage"];
  EXPECT_EQ(usage["completion_tokens"], 8);
  EXPECT_EQ(usage["total_tokens"].get<int>(),
            usage["prompt_tokens"].get<int>() + usage["completion_tokens"].get<int>());
  EXPECT_TRUE(usage["prompt_tokens_details"].contains("cached_tokens"));

  body["stream"] = true;
  body["stream_options"] = {{"include_usage", true}};
  Response r = request(h.port(), "POST", "/v1/chat/completions", body.dump());
  ASSERT_EQ(r.status, 200);
  EXPECT_NE(r.header("Content-Type").find("text/event-stream"), std::string::npos);
  Streamed s = collect(r.body);
  EXPECT_TRUE(s.done);
  EXPECT_EQ(s.content, choice["message"]["content"].get<std::string>());
  EXPECT_EQ(s.finish_reason, "length");
  EXPECT_EQ(s.usage["completion_tokens"], 8);
  // The second time the prompt comes from the prefix cache (whole blocks of 128 tokens only,
  // and this prompt is shorter: nothing cached, but the field is there).
  EXPECT_GE(s.usage["prompt_tokens_details"]["cached_tokens"].get<int>(), 0);
}

// The same prompt through /v1/completions (as ids from /tokenize) gives the same tokens.
TEST(ApiServer, ChatTokensEqualCompletionsOnTheRenderedPrompt) {
  ApiHarness h;
  Json chat = user_chat("Count to five.");
  chat["logprobs"] = true;
  JsonResponse c = post_json(h.port(), "/v1/chat/completions", chat);
  ASSERT_EQ(c.status, 200) << c.text;
  JsonResponse t = post_json(h.port(), "/tokenize", Json{{"messages", chat["messages"]},
                                                          {"chat_template_kwargs", chat["chat_template_kwargs"]}});
  ASSERT_EQ(t.status, 200) << t.text;
  EXPECT_EQ(t.body["count"], c.body["usage"]["prompt_tokens"]);
  JsonResponse p = post_json(h.port(), "/v1/completions",
                             Json{{"prompt", t.body["tokens"]}, {"max_tokens", 8}, {"logprobs", 0}});
  ASSERT_EQ(p.status, 200) << p.text;
  std::vector<std::string> chat_tokens, completion_tokens;
  for (const auto& e : c.body["choices"][0]["logprobs"]["content"]) chat_tokens.push_back(e["token"]);
  for (const auto& e : p.body["choices"][0]["logprobs"]["tokens"]) completion_tokens.push_back(e);
  EXPECT_EQ(chat_tokens, completion_tokens);
  EXPECT_EQ(chat_tokens.size(), 8u);
}

TEST(ApiServer, ReasoningAndToolCallFromTheModelsOutput) {
  ApiHarness h;
  Json body = user_chat("Weather in Paris?", /*thinking=*/true);
  body["tools"] = weather_tools();
  body["max_tokens"] = 200;
  body["flint_debug_replay"] = replay("The user wants the weather.</think>" + kCall);
  JsonResponse r = post_json(h.port(), "/v1/chat/completions", body);
  ASSERT_EQ(r.status, 200) << r.text;
  const Json& choice = r.body["choices"][0];
  const Json& message = choice["message"];
  EXPECT_EQ(message["reasoning_content"], "The user wants the weather.");
  EXPECT_TRUE(message["content"].is_null());
  ASSERT_EQ(message["tool_calls"].size(), 1u);
  EXPECT_EQ(message["tool_calls"][0]["function"]["name"], "get_weather");
  EXPECT_EQ(message["tool_calls"][0]["function"]["arguments"], R"({"city": "Paris", "days": 3})");
  EXPECT_EQ(choice["finish_reason"], "tool_calls");

  body["stream"] = true;
  Response s = request(h.port(), "POST", "/v1/chat/completions", body.dump());
  Streamed st = collect(s.body);
  EXPECT_EQ(st.reasoning, "The user wants the weather.");
  EXPECT_EQ(st.content, "");
  ASSERT_EQ(st.calls.size(), 1u);
  EXPECT_EQ(st.calls[0].first, "get_weather");
  EXPECT_EQ(st.calls[0].second, R"({"city": "Paris", "days": 3})");
  EXPECT_EQ(st.finish_reason, "tool_calls");
  EXPECT_FALSE(has_markup(s.body));
}

// A call the model opens before </think> is still a call, streamed or not.
TEST(ApiServer, ToolCallOpenedInsideReasoningIsDelivered) {
  ApiHarness h;
  Json body = user_chat("Weather?", /*thinking=*/true);
  body["tools"] = weather_tools();
  body["max_tokens"] = 200;
  body["flint_debug_replay"] = replay("I should call the tool." + kCall);
  JsonResponse r = post_json(h.port(), "/v1/chat/completions", body);
  ASSERT_EQ(r.status, 200) << r.text;
  EXPECT_EQ(r.body["choices"][0]["message"]["reasoning_content"], "I should call the tool.");
  EXPECT_EQ(r.body["choices"][0]["message"]["tool_calls"].size(), 1u);
  EXPECT_FALSE(has_markup(r.text));
}

TEST(ApiServer, ToolChoiceNoneDropsCallsAndLeaksNoMarkup) {
  ApiHarness h;
  Json body = user_chat("Weather?");
  body["tools"] = weather_tools();
  body["tool_choice"] = "none";
  body["max_tokens"] = 200;
  body["flint_debug_replay"] = replay("Sunny." + kCall);
  JsonResponse r = post_json(h.port(), "/v1/chat/completions", body);
  ASSERT_EQ(r.status, 200) << r.text;
  EXPECT_EQ(r.body["choices"][0]["message"]["content"], "Sunny.");
  EXPECT_TRUE(r.body["choices"][0]["message"]["tool_calls"].empty());
  EXPECT_EQ(r.body["choices"][0]["finish_reason"], "stop");
  EXPECT_FALSE(has_markup(r.text));
}

// A named tool_choice makes a call of that function: in chat mode the prompt ends with the
// call's opening; in thinking mode the engine forces it right after </think> (here pushed
// by a logit bias, since the random model would not close its reasoning on its own).
TEST(ApiServer, NamedToolChoiceForcesTheCallWithThinkingOnAndOff) {
  ApiHarness h;
  for (bool thinking : {false, true}) {
    SCOPED_TRACE(thinking ? "thinking" : "chat");
    Json body = user_chat("Weather?", thinking);
    body["tools"] = weather_tools();
    body["tool_choice"] = {{"type", "function"}, {"function", {{"name", "get_weather"}}}};
    body["max_tokens"] = 24;
    if (thinking) {
      body["logit_bias"] = {{std::to_string(v4_tokenizer().token_id("</think>")), 100}};
    }
    body["stream"] = true;
    Response r = request(h.port(), "POST", "/v1/chat/completions", body.dump());
    ASSERT_EQ(r.status, 200);
    Streamed s = collect(r.body);
    ASSERT_GE(s.calls.size(), 1u) << r.body;
    EXPECT_EQ(s.calls[0].first, "get_weather");
    EXPECT_FALSE(has_markup(s.content));
  }
  Json bad = user_chat("x");
  bad["tools"] = weather_tools();
  bad["tool_choice"] = {{"type", "function"}, {"function", {{"name", "nope"}}}};
  JsonResponse r = post_json(h.port(), "/v1/chat/completions", bad);
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.body["error"]["param"].get<std::string>().rfind("tool_choice", 0), 0u) << r.text;
}

// The client sends the call and its result back: both are rendered into the next prompt as
// DeepSeek's encoder does, the earlier reasoning accepted.
TEST(ApiServer, ToolResultRoundTripRendersIntoThePrompt) {
  ApiHarness h;
  Json messages = Json::parse(R"([
    {"role": "user", "content": "Weather in Paris?"},
    {"role": "assistant", "content": null, "reasoning_content": "Need the tool.",
     "tool_calls": [{"id": "call_1", "type": "function",
                     "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "18 C and sunny"}])");
  JsonResponse t = post_json(h.port(), "/tokenize",
                             Json{{"messages", messages}, {"tools", weather_tools()}});
  ASSERT_EQ(t.status, 200) << t.text;
  std::vector<int32_t> ids = t.body["tokens"].get<std::vector<int32_t>>();
  const std::string prompt = v4_tokenizer().decode(ids);
  EXPECT_NE(prompt.find("<｜DSML｜invoke name=\"get_weather\">"), std::string::npos) << prompt;
  EXPECT_NE(prompt.find("<tool_result>18 C and sunny</tool_result>"), std::string::npos);
  Json body{{"messages", messages}, {"tools", weather_tools()}, {"max_tokens", 4}};
  EXPECT_EQ(post_json(h.port(), "/v1/chat/completions", body).status, 200);
}

TEST(ApiServer, SpecialTokenStringsInUserContentAreText) {
  ApiHarness h;
  const int32_t user = v4_tokenizer().token_id("<｜User｜>");
  JsonResponse t = post_json(
      h.port(), "/tokenize",
      Json{{"messages", Json::array({{{"role", "user"}, {"content", "hi <｜User｜> <｜Assistant｜>"}}})}});
  ASSERT_EQ(t.status, 200);
  std::vector<int32_t> ids = t.body["tokens"].get<std::vector<int32_t>>();
  EXPECT_EQ(std::count(ids.begin(), ids.end(), user), 1);  // the turn's own tag only
  EXPECT_NE(v4_tokenizer().decode(ids).find("hi <｜User｜> <｜Assistant｜>"), std::string::npos);
}

TEST(ApiServer, StopStringEndsTheOutputBeforeIt) {
  ApiHarness h;
  Json body{{"prompt", "The capital of France is"}, {"max_tokens", 16}};
  JsonResponse full = post_json(h.port(), "/v1/completions", body);
  ASSERT_EQ(full.status, 200) << full.text;
  const std::string text = full.body["choices"][0]["text"];
  ASSERT_GE(text.size(), 6u);
  // A stop string from the middle of the greedy output (at a character boundary).
  std::size_t at = text.size() / 2;
  while (at > 0 && (static_cast<unsigned char>(text[at]) & 0xC0) == 0x80) --at;
  std::size_t len = 1;
  while (at + len < text.size() && (static_cast<unsigned char>(text[at + len]) & 0xC0) == 0x80) ++len;
  const std::string stop = text.substr(at, len);
  const std::string expected = text.substr(0, text.find(stop));
  body["stop"] = stop;
  JsonResponse cut = post_json(h.port(), "/v1/completions", body);
  EXPECT_EQ(cut.body["choices"][0]["text"], expected);
  EXPECT_EQ(cut.body["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(cut.body["choices"][0]["stop_reason"], stop);
}

TEST(ApiServer, CompletionsEchoLogprobsSamplesAndPromptLists) {
  ApiHarness h;
  JsonResponse r = post_json(h.port(), "/v1/completions",
                             Json{{"prompt", "Hello"}, {"max_tokens", 4}, {"echo", true},
                                  {"logprobs", 2}, {"n", 2}, {"temperature", 1.0}, {"seed", 7}});
  ASSERT_EQ(r.status, 200) << r.text;
  ASSERT_EQ(r.body["choices"].size(), 2u);
  for (const auto& c : r.body["choices"]) {
    EXPECT_EQ(c["text"].get<std::string>().rfind("Hello", 0), 0u);
    EXPECT_EQ(c["logprobs"]["tokens"].size(), 4u);
    EXPECT_EQ(c["logprobs"]["top_logprobs"][0].size(), 2u);
  }
  EXPECT_EQ(r.body["usage"]["completion_tokens"], 8);
  JsonResponse list = post_json(h.port(), "/v1/completions",
                                Json{{"prompt", Json::array({"One", "Two", "Three"})},
                                     {"max_tokens", 3}});
  ASSERT_EQ(list.status, 200) << list.text;
  ASSERT_EQ(list.body["choices"].size(), 3u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(list.body["choices"][i]["index"], i);
}

TEST(ApiServer, ErrorsHaveOpenAisShapeAndStatus) {
  ApiHarness h;
  Response bad_json = request(h.port(), "POST", "/v1/chat/completions", "{not json");
  EXPECT_EQ(bad_json.status, 400);
  Json e = Json::parse(bad_json.body);
  EXPECT_EQ(e["error"]["type"], "invalid_request_error");
  EXPECT_EQ(e["error"]["code"], 400);

  Json wrong = user_chat("x");
  wrong["temperature"] = "hot";
  JsonResponse r = post_json(h.port(), "/v1/chat/completions", wrong);
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.body["error"]["param"], "temperature");

  wrong = user_chat("x");
  wrong["temperature"] = -1;
  r = post_json(h.port(), "/v1/chat/completions", wrong);
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.body["error"]["param"], "temperature");

  Json other = user_chat("x");
  other["model"] = "gpt-4";
  EXPECT_EQ(post_json(h.port(), "/v1/chat/completions", other).status, 404);

  std::string long_text;
  for (int i = 0; i < 1100; ++i) long_text += " word";
  r = post_json(h.port(), "/v1/completions", Json{{"prompt", long_text}});
  EXPECT_EQ(r.status, 400);
  const std::string message = r.body["error"]["message"];
  EXPECT_NE(message.find("1024"), std::string::npos) << message;
  EXPECT_NE(message.find("tokens"), std::string::npos) << message;

  EXPECT_EQ(request(h.port(), "GET", "/v1/chat/completions").status, 405);
  EXPECT_EQ(request(h.port(), "GET", "/v2/nothing").status, 404);
  Json messages_bad = Json{{"messages", Json::array({{{"role", "wizard"}, {"content", "x"}}})}};
  r = post_json(h.port(), "/v1/chat/completions", messages_bad);
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body["error"]["param"].get<std::string>().find("messages[0]"), std::string::npos)
      << r.text;
}

TEST(ApiServer, AutoToolChoiceNeedsTheServerFlags) {
  ServerConfig config = test_server_config();
  config.enable_auto_tool_choice = false;
  ApiHarness h(config);
  Json body = user_chat("x");
  body["tools"] = weather_tools();
  JsonResponse r = post_json(h.port(), "/v1/chat/completions", body);
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.text.find("--enable-auto-tool-choice"), std::string::npos);
  body["tool_choice"] = "none";
  EXPECT_EQ(post_json(h.port(), "/v1/chat/completions", body).status, 200);
}

TEST(ApiServer, ApiKeyIsRequiredEverywhereButHealth) {
  ApiHarness h(test_server_config(), test_engine_config(), {"secret-key"});
  EXPECT_EQ(request(h.port(), "GET", "/health").status, 200);
  EXPECT_EQ(request(h.port(), "GET", "/v1/models").status, 401);
  EXPECT_EQ(request(h.port(), "GET", "/metrics").status, 401);
  EXPECT_EQ(request(h.port(), "GET", "/v1/models", "", "Authorization: Bearer wrong\r\n").status, 401);
  EXPECT_EQ(request(h.port(), "GET", "/v1/models", "", "Authorization: Bearer secret-key\r\n").status,
            200);
  EXPECT_EQ(request(h.port(), "GET", "/v1/models", "", "x-api-key: secret-key\r\n").status, 200);
  EXPECT_TRUE(api_key_matches("abc", {"x", "abc"}));
  EXPECT_FALSE(api_key_matches("ab", {"abc"}));
  EXPECT_FALSE(api_key_matches("", {"abc"}));
}

// Waits until the engine and the server hold nothing of any request.
void expect_all_freed(ApiHarness& h) {
  engine::EngineStats s;
  for (int i = 0; i < 600; ++i) {
    s = h.engine->stats();
    if (h.ctx->live().size() == 0 && s.running == 0 && s.waiting == 0 && s.kv_pages_used == 0) break;
    std::this_thread::sleep_for(50ms);
  }
  EXPECT_EQ(h.ctx->live().size(), 0u);
  EXPECT_EQ(s.running, 0);
  EXPECT_EQ(s.waiting, 0);
  EXPECT_EQ(s.kv_pages_used, 0) << "KV pages still held";
}

TEST(ApiServer, ClientDisconnectAbortsTheRequestAndFreesItsKv) {
  ApiHarness h;
  Json body{{"prompt", "Once upon a time"}, {"max_tokens", 900}, {"stream", true},
            {"ignore_eos", true}};
  {
    Client client(h.port(), 30s);
    const std::string text = body.dump();
    client.send("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: " +
                std::to_string(text.size()) + "\r\n\r\n" + text);
    Response head = client.read_head();
    ASSERT_EQ(head.status, 200);
    client.read_chunk();  // the first event: the request runs
    EXPECT_EQ(h.ctx->live().size(), 1u);
  }  // closed mid-stream
  expect_all_freed(h);
  EXPECT_EQ(request(h.port(), "GET", "/health").status, 200);
}

TEST(ApiServer, FullQueueIs429) {
  engine::EngineConfig ec = test_engine_config();
  ec.max_num_seqs = 1;
  ec.max_waiting_requests = 1;
  ApiHarness h(test_server_config(), ec);
  Json slow{{"prompt", "A"}, {"max_tokens", 600}, {"ignore_eos", true}, {"stream", true}};
  Client first(h.port(), 60s);
  const std::string text = slow.dump();
  first.send("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: " +
             std::to_string(text.size()) + "\r\n\r\n" + text);
  ASSERT_EQ(first.read_head().status, 200);
  first.read_chunk();  // running: it holds the only seat
  Client second(h.port(), 60s);
  second.send("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: " +
              std::to_string(text.size()) + "\r\n\r\n" + text);
  ASSERT_EQ(second.read_head().status, 200);  // accepted: it waits
  for (int i = 0; i < 200 && h.engine->stats().waiting == 0; ++i) std::this_thread::sleep_for(10ms);
  JsonResponse third = post_json(h.port(), "/v1/completions", Json{{"prompt", "B"}, {"max_tokens", 2}});
  EXPECT_EQ(third.status, 429) << third.text;
  EXPECT_EQ(third.body["error"]["type"], "rate_limit_error");
  first.close();
  second.close();
  expect_all_freed(h);
}

// A long prefill sends SSE comments so that clients with idle timeouts keep the stream.
TEST(ApiServer, KeepAliveCommentsDuringALongPrefill) {
  ServerConfig config = test_server_config();
  config.keep_alive_interval = 5ms;
  engine::EngineConfig ec = test_engine_config();
  ec.max_num_batched_tokens = 16;  // 900 prompt tokens: many steps before the first token
  ApiHarness h(config, ec);
  std::vector<int32_t> prompt(900);
  for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = 1000 + static_cast<int32_t>(i % 500);
  Response r = request(h.port(), "POST", "/v1/completions",
                       Json{{"prompt", prompt}, {"max_tokens", 2}, {"stream", true}}.dump());
  int comments = 0;
  std::vector<SseEvent> events = parse_sse(r.body, &comments);
  EXPECT_GT(comments, 0);
  EXPECT_EQ(events.back().data, "[DONE]");
}

TEST(ApiServer, MetricsCountRequestsAndTokens) {
  ApiHarness h;
  ASSERT_EQ(post_json(h.port(), "/v1/completions", Json{{"prompt", "Hi"}, {"max_tokens", 3}}).status,
            200);
  Response m = request(h.port(), "GET", "/metrics");
  ASSERT_EQ(m.status, 200);
  EXPECT_NE(m.body.find("flint:generation_tokens_total{model_name=\"tiny\"} 3"), std::string::npos)
      << m.body;
  EXPECT_NE(m.body.find("flint:request_success_total{"), std::string::npos);
  EXPECT_NE(m.body.find("flint:time_to_first_token_seconds_count{model_name=\"tiny\"} 1"),
            std::string::npos);
}

// SIGTERM's path: new requests are refused, the running one finishes within the grace period.
TEST(ApiServer, ShutdownLetsRunningRequestsFinish) {
  auto h = std::make_unique<ApiHarness>();
  Client client(h->port(), 60s);
  const std::string text =
      Json{{"prompt", "Go"}, {"max_tokens", 40}, {"ignore_eos", true}, {"stream", true}}.dump();
  client.send("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: " +
              std::to_string(text.size()) + "\r\n\r\n" + text);
  ASSERT_EQ(client.read_head().status, 200);
  // A future: its destructor waits for the shutdown even if a read below throws.
  auto stopper = std::async(std::launch::async, [&] { h->api->shutdown(60s); });
  for (int i = 0; i < 200 && !h->ctx->draining(); ++i) std::this_thread::sleep_for(5ms);
  EXPECT_EQ(request(h->port(), "POST", "/v1/completions", R"({"prompt": "x"})").status, 503);
  std::string body;
  for (std::string c; !(c = client.read_chunk()).empty();) body += c;
  stopper.get();
  Streamed s = collect(body);
  EXPECT_TRUE(s.done);
  EXPECT_EQ(s.finish_reason, "length");
}

}  // namespace
}  // namespace flint::server::testing
