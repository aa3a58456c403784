// /v1/responses through the real pipeline on the tiny checkpoint: ResponsesApi's handlers are
// called directly with a recording Responder (no router, no sockets), and what the model
// "says" comes from flint_debug_replay. Covers whole and streamed answers, the store (GET,
// DELETE, store false), previous_response_id chains rendered as the explicit conversation
// would be, and the errors raised before anything is sent.
#include "server/openai_responses.h"

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <mutex>

#include "api_harness.h"
#include "base/log.h"
#include "server/api_error.h"
#include "server/chat_prompt.h"

namespace flint::server::testing {
namespace {

using namespace std::chrono_literals;

const bool kQuiet = [] {
  spdlog::set_level(spdlog::level::err);
  return true;
}();

// Records one answer; wait() blocks until it is complete.
class RecordingResponder : public Responder {
 public:
  bool respond(int status, std::string_view /*content_type*/, std::string body,
               const Headers& /*extra_headers*/) override {
    std::lock_guard lock(mutex_);
    status_ = status;
    body_ = std::move(body);
    done_ = true;
    cv_.notify_all();
    return true;
  }
  bool start_stream(int status, std::string_view /*content_type*/,
                    const Headers& /*extra_headers*/) override {
    std::lock_guard lock(mutex_);
    status_ = status;
    return true;
  }
  bool write(std::string chunk) override {
    std::lock_guard lock(mutex_);
    body_ += chunk;
    return true;
  }
  bool finish() override {
    std::lock_guard lock(mutex_);
    done_ = true;
    cv_.notify_all();
    return true;
  }
  void on_disconnect(std::function<void()> /*callback*/) override {}
  bool connected() const override { return true; }

  // The status and body once answered (status 0 after a timeout).
  std::pair<int, std::string> wait() {
    std::unique_lock lock(mutex_);
    if (!cv_.wait_for(lock, 60s, [&] { return done_; })) return {0, body_};
    return {status_, body_};
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  int status_ = 0;
  std::string body_;
  bool done_ = false;
};

std::vector<int32_t> replay_ids(const std::string& text) {
  std::vector<int32_t> ids = v4_tokenizer().encode(text, false);
  ids.push_back(v4_tokenizer().token_id("<｜end▁of▁sentence｜>"));
  return ids;
}

struct Answer {
  int status = 0;
  Json body;                     // whole answers
  std::vector<SseEvent> events;  // streamed answers
  std::string text;
};

Answer create(ResponsesApi& api, ApiHarness& h, const Json& body) {
  auto responder = std::make_shared<RecordingResponder>();
  Request request;
  request.method = "POST";
  request.target = "/v1/responses";
  request.body = body.dump();
  api.handle_create(*h.ctx, request, responder);
  Answer a;
  std::tie(a.status, a.text) = responder->wait();
  if (body.value("stream", false)) {
    a.events = parse_sse(a.text);
  } else {
    a.body = Json::parse(a.text, nullptr, false);
  }
  return a;
}

std::pair<int, std::string> get(ResponsesApi& api, ApiHarness& h, std::string_view id) {
  auto responder = std::make_shared<RecordingResponder>();
  try {
    api.handle_get(*h.ctx, id, responder);
  } catch (const ApiError& e) {
    return {e.status(), e.what()};
  }
  return responder->wait();
}

const std::string kCall =
    "\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"get_weather\">\n<｜DSML｜parameter "
    "name=\"city\" "
    "string=\"true\">Paris</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>";

Json weather_tools() {
  return Json::parse(R"([{"type":"function","name":"get_weather","description":"Weather",
    "parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}])");
}

TEST(ResponsesApi, WholeResponseIsStoredAndCanBeDeleted) {
  ApiHarness h;
  ResponsesApi api(16);
  Json body = {{"model", "tiny"},
               {"input", "Hi"},
               {"max_output_tokens", 64},
               {"flint_debug_replay", replay_ids("Greet back.</think>Hello!")}};
  Answer a = create(api, h, body);
  ASSERT_EQ(a.status, 200) << a.text;
  const Json& r = a.body;
  EXPECT_EQ(r["object"], "response");
  EXPECT_EQ(r["status"], "completed");
  EXPECT_EQ(r["model"], "tiny");
  ASSERT_EQ(r["output"].size(), 2u);
  EXPECT_EQ(r["output"][0]["type"], "reasoning");
  EXPECT_EQ(r["output"][0]["content"][0]["text"], "Greet back.");
  EXPECT_EQ(r["output"][1]["content"][0]["text"], "Hello!");
  EXPECT_GT(r["usage"]["input_tokens"].get<int64_t>(), 0);
  EXPECT_EQ(r["usage"]["output_tokens"], replay_ids("Greet back.</think>Hello!").size());
  EXPECT_GT(r["usage"]["output_tokens_details"]["reasoning_tokens"].get<int64_t>(), 0);

  const std::string id = r["id"];
  EXPECT_EQ(id.rfind("resp_", 0), 0u);
  auto [status, stored] = get(api, h, id);
  EXPECT_EQ(status, 200);
  EXPECT_EQ(Json::parse(stored), r);

  auto responder = std::make_shared<RecordingResponder>();
  api.handle_delete(*h.ctx, id, responder);
  auto [delete_status, deleted] = responder->wait();
  EXPECT_EQ(delete_status, 200);
  EXPECT_EQ(Json::parse(deleted),
            (Json{{"id", id}, {"object", "response.deleted"}, {"deleted", true}}));
  EXPECT_EQ(get(api, h, id).first, 404);
  EXPECT_THROW(api.handle_delete(*h.ctx, id, std::make_shared<RecordingResponder>()), ApiError);

  body["store"] = false;
  Answer unstored = create(api, h, body);
  ASSERT_EQ(unstored.status, 200);
  EXPECT_EQ(get(api, h, unstored.body["id"].get<std::string>()).first, 404);
}

TEST(ResponsesApi, StreamedToolCallEqualsTheWholeResponse) {
  ApiHarness h;
  ResponsesApi api(16);
  Json body = {{"model", "tiny"},
               {"input", "Weather in Paris?"},
               {"tools", weather_tools()},
               {"max_output_tokens", 200},
               {"flint_debug_replay", replay_ids("Use the tool.</think>" + kCall)}};
  Answer whole = create(api, h, body);
  ASSERT_EQ(whole.status, 200) << whole.text;
  ASSERT_EQ(whole.body["output"].size(), 2u);
  const Json& call = whole.body["output"][1];
  EXPECT_EQ(call["type"], "function_call");
  EXPECT_EQ(call["name"], "get_weather");
  EXPECT_EQ(call["arguments"], R"({"city": "Paris"})");
  EXPECT_EQ(call["call_id"].get<std::string>().rfind("call_", 0), 0u);

  body["stream"] = true;
  Answer streamed = create(api, h, body);
  ASSERT_EQ(streamed.status, 200);
  ASSERT_FALSE(streamed.events.empty());
  EXPECT_EQ(streamed.events.front().name, "response.created");
  EXPECT_EQ(streamed.events.back().name, "response.completed");
  std::string arguments;
  for (size_t i = 0; i < streamed.events.size(); ++i) {
    const Json e = Json::parse(streamed.events[i].data);
    EXPECT_EQ(e["type"], streamed.events[i].name);
    EXPECT_EQ(e["sequence_number"], static_cast<int64_t>(i));
    if (e["type"] == "response.function_call_arguments.delta") arguments += e["delta"];
  }
  EXPECT_EQ(arguments, R"({"city": "Paris"})");
  EXPECT_EQ(streamed.text.find("DSML"), std::string::npos);
  const Json final_response = Json::parse(streamed.events.back().data)["response"];
  ASSERT_EQ(final_response["output"].size(), 2u);
  EXPECT_EQ(final_response["output"][0]["content"], whole.body["output"][0]["content"]);
  EXPECT_EQ(final_response["output"][1]["arguments"], call["arguments"]);
  // Stored before the end went out: chaining may start at once.
  EXPECT_EQ(get(api, h, final_response["id"].get<std::string>()).first, 200);
}

TEST(ResponsesApi, PreviousResponseRendersAsTheExplicitConversation) {
  ApiHarness h;
  ResponsesApi api(16);
  const std::string reasoning = "Use the tool.";
  Answer first = create(api, h,
                        {{"model", "tiny"},
                         {"instructions", "Be brief."},
                         {"input", "Weather in Paris?"},
                         {"tools", weather_tools()},
                         {"flint_debug_replay", replay_ids(reasoning + "</think>" + kCall)}});
  ASSERT_EQ(first.status, 200) << first.text;
  const std::string call_id = first.body["output"][1]["call_id"];

  Json second_body = {
      {"model", "tiny"},
      {"previous_response_id", first.body["id"]},
      {"tools", weather_tools()},
      {"max_output_tokens", 4},
      {"input",
       Json::array({{{"type", "function_call_output"}, {"call_id", call_id}, {"output", "18C"}}})}};
  Answer second = create(api, h, second_body);
  ASSERT_EQ(second.status, 200) << second.text;
  EXPECT_EQ(second.body["previous_response_id"], first.body["id"]);
  EXPECT_TRUE(second.body["instructions"].is_null());

  // The same conversation sent whole, without the first request's instructions (they are
  // not carried over), renders the prompt the chained request ran.
  const Json explicit_body = {
      {"tools", weather_tools()},
      {"input", Json::parse(R"([{"role":"user","content":"Weather in Paris?"}])")}};
  ResponsesRequest parsed = parse_responses_request(explicit_body);
  ChatMessage assistant;
  assistant.role = ChatRole::kAssistant;
  assistant.reasoning_content = reasoning;
  assistant.tool_calls.push_back({call_id, "get_weather", R"({"city": "Paris"})"});
  ChatMessage tool;
  tool.role = ChatRole::kTool;
  tool.tool_call_id = call_id;
  tool.content = "18C";
  parsed.input.push_back(assistant);
  parsed.input.push_back(tool);
  const ChatPromptText expected = render_chat_prompt(*h.ctx, build_responses_chat(parsed, {}));
  EXPECT_EQ(second.body["usage"]["input_tokens"], expected.ids.size());
  EXPECT_EQ(expected.text.find("Be brief."), std::string::npos);

  // A third turn chains from the second (which stored the first's turns too). Tools are per
  // request: without them the prompt would lose its tools section.
  Answer third = create(api, h,
                        {{"model", "tiny"},
                         {"previous_response_id", second.body["id"]},
                         {"tools", weather_tools()},
                         {"input", "Thanks"},
                         {"max_output_tokens", 2}});
  ASSERT_EQ(third.status, 200) << third.text;
  EXPECT_GT(third.body["usage"]["input_tokens"].get<int64_t>(),
            second.body["usage"]["input_tokens"].get<int64_t>());
}

TEST(ResponsesApi, MaxOutputTokensEndsIncomplete) {
  ApiHarness h;
  ResponsesApi api(16);
  Answer a = create(api, h,
                    {{"model", "tiny"},
                     {"input", "Hi"},
                     {"reasoning", {{"effort", "none"}}},
                     {"max_output_tokens", 3}});
  ASSERT_EQ(a.status, 200) << a.text;
  EXPECT_EQ(a.body["status"], "incomplete");
  EXPECT_EQ(a.body["incomplete_details"]["reason"], "max_output_tokens");
  EXPECT_EQ(a.body["usage"]["output_tokens"], 3);
  EXPECT_EQ(a.body["output"].back()["status"], "incomplete");
}

TEST(ResponsesApi, ErrorsBeforeAnythingIsSent) {
  ApiHarness h;
  ResponsesApi api(16);
  auto status_of = [&](const Json& body) {
    try {
      create(api, h, body);
    } catch (const ApiError& e) {
      return std::make_pair(e.status(), e.param());
    }
    return std::make_pair(0, std::string());
  };
  EXPECT_EQ(status_of({{"model", "tiny"}, {"input", "x"}, {"previous_response_id", "resp_nope"}}),
            std::make_pair(400, std::string("previous_response_id")));
  EXPECT_EQ(status_of({{"model", "other"}, {"input", "x"}}).first, 404);
  EXPECT_EQ(status_of({{"model", "tiny"}, {"input", 3}}),
            std::make_pair(400, std::string("input")));
  EXPECT_EQ(get(api, h, "resp_nope").first, 404);
}

}  // namespace
}  // namespace flint::server::testing
