// /v1/responses without the engine: request parsing (every input item type, tools, options,
// errors naming the field), the chat request it becomes (instructions, previous_response_id
// chaining through the store), whole responses and the streamed events (order, sequence
// numbers, indices, tool-call argument streaming, incomplete and failed endings).
#include "server/openai_responses.h"

#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "server/api_error.h"
#include "server/response_store.h"
#include "server/responses_output.h"
#include "server/responses_request.h"

namespace flint::server {
namespace {

Json parse(std::string_view text) { return Json::parse(text); }

// The param of the 400 that `f` throws ("" and a test failure if it throws none).
std::string error_param(const std::function<void()>& f) {
  try {
    f();
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400) << e.what();
    // The message starts with the field it names.
    if (!e.param().empty()) {
      EXPECT_EQ(std::string(e.what()).rfind(e.param(), 0), 0u) << e.what();
    }
    return e.param();
  }
  ADD_FAILURE() << "expected an ApiError";
  return "";
}

std::string request_error(std::string_view body) {
  return error_param([&] { parse_responses_request(parse(body)); });
}

ItemIdGenerator counting_ids() {
  auto counter = std::make_shared<int>(0);
  return [counter](std::string_view prefix) {
    return std::string(prefix) + std::to_string((*counter)++);
  };
}

ResponseSettings test_settings() {
  ResponseSettings s;
  s.id = "resp_1";
  s.created_at = 1700000000;
  s.model = "deepseek-v4";
  return s;
}

// ---------------------------------------------------------------------------------------------
// Requests

TEST(ResponsesRequest, StringInputAndDefaults) {
  const ResponsesRequest r = parse_responses_request(parse(R"({"model":"m","input":"Hello"})"));
  ASSERT_EQ(r.input.size(), 1u);
  EXPECT_EQ(r.input[0].role, ChatRole::kUser);
  EXPECT_EQ(r.input[0].content, "Hello");
  EXPECT_EQ(r.model, "m");
  EXPECT_FALSE(r.stream);
  EXPECT_TRUE(r.store);
  EXPECT_TRUE(r.parallel_tool_calls);
  EXPECT_FALSE(r.previous_response_id);
  EXPECT_EQ(r.settings.tool_choice, "auto");
  EXPECT_EQ(r.settings.tools, Json::array());
  EXPECT_EQ(r.settings.text, parse(R"({"format":{"type":"text"}})"));
  EXPECT_EQ(r.settings.truncation, "disabled");
  EXPECT_TRUE(r.settings.instructions.is_null());
}

TEST(ResponsesRequest, EveryInputItemType) {
  const ResponsesRequest r = parse_responses_request(parse(R"({"input":[
    {"role":"developer","content":"Be brief."},
    {"type":"message","role":"user","content":[{"type":"input_text","text":"Weather?"},
                                                {"type":"input_text","text":"In Paris."}]},
    {"type":"reasoning","id":"rs_1","summary":[],
     "content":[{"type":"reasoning_text","text":"Need the tool."}]},
    {"type":"function_call","id":"fc_1","call_id":"call_1","name":"weather",
     "arguments":"{\"city\":\"Paris\"}","status":"completed"},
    {"type":"function_call_output","call_id":"call_1","output":"18C"},
    {"type":"message","id":"msg_1","role":"assistant","status":"completed",
     "content":[{"type":"output_text","text":"It is 18C.","annotations":[]}]},
    {"role":"system","content":"Late system note."}
  ]})"));
  ASSERT_EQ(r.input.size(), 6u);
  EXPECT_EQ(r.input[0].role, ChatRole::kSystem);  // OpenAI's developer is its system role
  EXPECT_EQ(r.input[0].content, "Be brief.");
  EXPECT_EQ(r.input[1].role, ChatRole::kUser);
  EXPECT_EQ(r.input[1].content, "Weather?\n\nIn Paris.");
  // The reasoning and the call are one assistant turn.
  EXPECT_EQ(r.input[2].role, ChatRole::kAssistant);
  EXPECT_EQ(r.input[2].reasoning_content, "Need the tool.");
  EXPECT_FALSE(r.input[2].content);
  ASSERT_EQ(r.input[2].tool_calls.size(), 1u);
  EXPECT_EQ(r.input[2].tool_calls[0].id, "call_1");
  EXPECT_EQ(r.input[2].tool_calls[0].name, "weather");
  EXPECT_EQ(r.input[2].tool_calls[0].arguments, R"({"city":"Paris"})");
  EXPECT_EQ(r.input[3].role, ChatRole::kTool);
  EXPECT_EQ(r.input[3].tool_call_id, "call_1");
  EXPECT_EQ(r.input[3].content, "18C");
  EXPECT_EQ(r.input[4].role, ChatRole::kAssistant);
  EXPECT_EQ(r.input[4].content, "It is 18C.");
  EXPECT_EQ(r.input[5].role, ChatRole::kSystem);
}

TEST(ResponsesRequest, AssistantTurnsSplitWhereTheModelStartedANewStep) {
  const ResponsesRequest r = parse_responses_request(parse(R"({"input":[
    {"role":"user","content":"go"},
    {"type":"reasoning","summary":[{"type":"summary_text","text":"s1"}]},
    {"type":"function_call","call_id":"a","name":"f","arguments":"{}"},
    {"type":"function_call","call_id":"b","name":"g","arguments":"{}"},
    {"type":"reasoning","content":[{"type":"reasoning_text","text":"r2"}]},
    {"type":"message","role":"assistant","content":"done"},
    {"type":"reasoning","encrypted_content":"opaque","summary":[]}
  ]})"));
  ASSERT_EQ(r.input.size(), 3u);
  EXPECT_EQ(r.input[1].reasoning_content, "s1");  // the summary when there is no content
  EXPECT_EQ(r.input[1].tool_calls.size(), 2u);    // parallel calls: one turn
  EXPECT_EQ(r.input[2].reasoning_content, "r2");
  EXPECT_EQ(r.input[2].content, "done");
}

TEST(ResponsesRequest, ToolOutputPartsAndRefusedContent) {
  const ResponsesRequest r = parse_responses_request(parse(R"({"input":[
    {"type":"function_call_output","call_id":"c","output":[
      {"type":"input_text","text":"see image"},{"type":"input_image","image_url":"data:x"}]}
  ]})"));
  EXPECT_EQ(r.input[0].content, "see image\n\n[Unsupported input_image]");

  EXPECT_EQ(request_error(R"({"input":[{"role":"user","content":[
      {"type":"input_text","text":"a"},{"type":"input_image","image_url":"x"}]}]})"),
            "input[0].content[1].type");
  EXPECT_EQ(request_error(R"({"input":[{"role":"user","content":[{"type":"input_file"}]}]})"),
            "input[0].content[0].type");
}

TEST(ResponsesRequest, MalformedInputNamesTheField) {
  EXPECT_EQ(request_error(R"({"input":5})"), "input");
  EXPECT_EQ(request_error(R"({"input":[7]})"), "input[0]");
  EXPECT_EQ(request_error(R"({"input":[{"content":"x"}]})"), "input[0].role");
  EXPECT_EQ(request_error(R"({"input":[{"role":"tool","content":"x"}]})"), "input[0].role");
  EXPECT_EQ(request_error(R"({"input":[{"role":"user"}]})"), "input[0].content");
  EXPECT_EQ(request_error(R"({"input":[{"role":"user","content":{"a":1}}]})"), "input[0].content");
  EXPECT_EQ(request_error(R"({"input":[{"role":"user","content":[{"text":"x"}]}]})"),
            "input[0].content[0].type");
  EXPECT_EQ(request_error(R"({"input":[{"role":"user","content":"x"},
      {"type":"function_call","name":"f","arguments":"{}"}]})"),
            "input[1].call_id");
  EXPECT_EQ(request_error(R"({"input":[{"type":"function_call","call_id":"c","name":"f",
      "arguments":{"a":1}}]})"),
            "input[0].arguments");
  EXPECT_EQ(request_error(R"({"input":[{"type":"function_call_output","call_id":"c"}]})"),
            "input[0].output");
  EXPECT_EQ(request_error(R"({"input":[{"type":"item_reference","id":"msg_1"}]})"),
            "input[0].type");
  EXPECT_EQ(request_error(R"({"input":[{"type":"computer_call_output","call_id":"c"}]})"),
            "input[0].type");
  EXPECT_EQ(request_error(R"({"input":[{"type":"reasoning","content":[5]}]})"),
            "input[0].content[0]");
  EXPECT_EQ(request_error(R"({"input":"x","instructions":["a"]})"), "instructions");
  EXPECT_EQ(request_error(R"({"input":"x","stream":"yes"})"), "stream");
}

TEST(ResponsesRequest, FunctionToolsAndToolChoice) {
  const ResponsesRequest r = parse_responses_request(parse(R"({"input":"x","tools":[
    {"type":"function","name":"get_weather","description":"Weather","strict":true,
     "parameters":{"type":"object","properties":{"city":{"type":"string"}}}},
    {"type":"web_search"},
    {"type":"function","name":"noop","parameters":null,"strict":null}
  ],"tool_choice":{"type":"function","name":"get_weather"},"parallel_tool_calls":false})"));
  ASSERT_EQ(r.tools.size(), 2u);  // the hosted web_search tool is left out
  EXPECT_EQ(r.tools[0].name, "get_weather");
  EXPECT_EQ(r.tools[0].description, "Weather");
  EXPECT_EQ(r.tools[0].parameters["properties"]["city"]["type"], "string");
  // The function object the prompt shows: the tool without "type", keys in the order sent.
  EXPECT_EQ(r.tools[0].function.dump(),
            R"({"name":"get_weather","description":"Weather","strict":true,)"
            R"("parameters":{"type":"object","properties":{"city":{"type":"string"}}}})");
  EXPECT_EQ(r.tools[1].function.dump(), R"({"name":"noop"})");
  EXPECT_TRUE(r.tools[1].parameters.is_null());
  EXPECT_EQ(r.tool_choice.mode, ToolChoiceMode::kNamed);
  EXPECT_EQ(r.tool_choice.name, "get_weather");
  EXPECT_FALSE(r.parallel_tool_calls);
  EXPECT_EQ(r.settings.tools.size(), 3u);  // echoed as sent
  EXPECT_EQ(r.settings.tool_choice["name"], "get_weather");

  const char* tools = R"("tools":[{"type":"function","name":"f"}])";
  auto body = [&](std::string_view rest) {
    return fmt::format(R"({{"input":"x",{},{}}})", tools, rest);
  };
  EXPECT_EQ(parse_responses_request(parse(body(R"("tool_choice":"required")"))).tool_choice.mode,
            ToolChoiceMode::kRequired);
  EXPECT_EQ(parse_responses_request(parse(body(R"("tool_choice":"none")"))).tool_choice.mode,
            ToolChoiceMode::kNone);
  EXPECT_EQ(request_error(body(R"("tool_choice":"sometimes")")), "tool_choice");
  EXPECT_EQ(request_error(body(R"("tool_choice":{"type":"function","name":"g"})")),
            "tool_choice.name");
  EXPECT_EQ(request_error(body(R"("tool_choice":{"type":"file_search"})")), "tool_choice.type");
  EXPECT_EQ(request_error(R"({"input":"x","tool_choice":"required"})"), "tool_choice");
  EXPECT_EQ(request_error(R"({"input":"x","tools":[{"type":"file_search"}]})"), "tools[0].type");
  EXPECT_EQ(request_error(R"({"input":"x","tools":[{"type":"custom","name":"apply_patch"}]})"),
            "tools[0].type");
  EXPECT_EQ(request_error(R"({"input":"x","tools":[{"type":"function"}]})"), "tools[0].name");
  EXPECT_EQ(request_error(R"({"input":"x","tools":[{"type":"function","name":"f",
      "parameters":"{}"}]})"),
            "tools[0].parameters");
  EXPECT_EQ(request_error(R"({"input":"x","tools":{"type":"function"}})"), "tools");
}

TEST(ResponsesRequest, ReasoningTextAndSamplingOptions) {
  const ResponsesRequest r = parse_responses_request(parse(R"({"input":"x",
    "reasoning":{"effort":"xhigh","summary":"auto"},
    "text":{"format":{"type":"json_schema","name":"answer","strict":true,
                      "schema":{"type":"object"}},"verbosity":"low"},
    "temperature":0.5,"top_p":0.9,"max_output_tokens":100,"store":false,"stream":true,
    "metadata":{"k":"v"},"user":"u1","truncation":"disabled","top_logprobs":0,
    "include":["reasoning.encrypted_content"],"service_tier":"auto","prompt_cache_key":"abc"})"));
  EXPECT_EQ(r.reasoning_effort, "xhigh");
  EXPECT_EQ(r.settings.reasoning, parse(R"({"effort":"xhigh","summary":"auto"})"));
  ASSERT_TRUE(r.response_format);
  EXPECT_EQ((*r.response_format)["name"], "answer");
  EXPECT_EQ(r.settings.text["verbosity"], "low");
  EXPECT_EQ(r.temperature, 0.5);
  EXPECT_EQ(r.top_p, 0.9);
  EXPECT_EQ(r.max_output_tokens, 100);
  EXPECT_EQ(r.settings.max_output_tokens, 100);
  EXPECT_FALSE(r.store);
  EXPECT_FALSE(r.settings.store);
  EXPECT_TRUE(r.stream);
  EXPECT_EQ(r.settings.metadata, parse(R"({"k":"v"})"));
  EXPECT_EQ(r.settings.user, "u1");

  SamplingParams defaults;
  defaults.temperature = 0.7;
  defaults.top_k = 20;
  const SamplingParams s = responses_sampling(defaults, r);
  EXPECT_EQ(s.temperature, 0.5);
  EXPECT_EQ(s.top_p, 0.9);
  EXPECT_EQ(s.top_k, 20);  // the server's default stays
  EXPECT_EQ(s.max_tokens, 100);
  EXPECT_EQ(s.n, 1);

  const ResponsesRequest none =
      parse_responses_request(parse(R"({"input":"x","reasoning":{"effort":"none"}})"));
  EXPECT_EQ(none.reasoning_effort, "none");  // chat mode (chat_encoding.h)
  EXPECT_FALSE(parse_responses_request(parse(R"({"input":"x","text":{"format":{"type":"text"}}})"))
                   .response_format);
}

TEST(ResponsesRequest, RefusedOptionsNameTheField) {
  EXPECT_EQ(request_error(R"({"input":"x","reasoning":{"effort":"extreme"}})"), "reasoning.effort");
  EXPECT_EQ(request_error(R"({"input":"x","reasoning":"high"})"), "reasoning");
  EXPECT_EQ(request_error(R"({"input":"x","text":{"format":{"type":"xml"}}})"), "text.format.type");
  EXPECT_EQ(request_error(R"({"input":"x","text":{"format":{"type":"json_schema","name":"a"}}})"),
            "text.format.schema");
  EXPECT_EQ(request_error(R"({"input":"x","temperature":3})"), "temperature");
  EXPECT_EQ(request_error(R"({"input":"x","top_p":0})"), "top_p");
  EXPECT_EQ(request_error(R"({"input":"x","max_output_tokens":0})"), "max_output_tokens");
  EXPECT_EQ(request_error(R"({"input":"x","max_output_tokens":1.5})"), "max_output_tokens");
  EXPECT_EQ(request_error(R"({"input":"x","truncation":"auto"})"), "truncation");
  EXPECT_EQ(request_error(R"({"input":"x","background":true})"), "background");
  EXPECT_EQ(request_error(R"({"input":"x","conversation":"conv_1"})"), "conversation");
  EXPECT_EQ(request_error(R"({"input":"x","prompt":{"id":"p"}})"), "prompt");
  EXPECT_EQ(request_error(R"({"input":"x","top_logprobs":3})"), "top_logprobs");
  EXPECT_EQ(request_error(R"({"input":"x","top_logprobs":30})"), "top_logprobs");
  EXPECT_EQ(request_error(R"({"input":"x","include":["message.output_text.logprobs"]})"),
            "include[0]");
  EXPECT_EQ(request_error(R"({"input":"x","include":[1]})"), "include[0]");
  EXPECT_EQ(request_error(R"({"input":"x","metadata":{"k":1}})"), "metadata.k");
  EXPECT_EQ(request_error(R"({"input":"x","previous_response_id":5})"), "previous_response_id");
}

// ---------------------------------------------------------------------------------------------
// The chat request

TEST(ResponsesChat, InstructionsLeadAndMergeWithLeadingSystemMessages) {
  const ResponsesRequest r = parse_responses_request(parse(R"({"instructions":"You are terse.",
    "input":[{"role":"developer","content":"Use metric units."},{"role":"user","content":"Hi"},
             {"role":"system","content":"later"}],
    "reasoning":{"effort":"high"},"tools":[{"type":"function","name":"f"}],
    "tool_choice":"required"})"));
  const ChatRequest chat = build_responses_chat(r, {});
  ASSERT_EQ(chat.messages.size(), 3u);
  EXPECT_EQ(chat.messages[0].role, ChatRole::kSystem);
  EXPECT_EQ(chat.messages[0].content, "You are terse.\n\nUse metric units.");
  EXPECT_EQ(chat.messages[1].content, "Hi");
  EXPECT_EQ(chat.messages[2].role, ChatRole::kSystem);
  EXPECT_EQ(chat.reasoning_effort, "high");
  EXPECT_EQ(chat.tool_choice.mode, ToolChoiceMode::kRequired);
  ASSERT_EQ(chat.tools.size(), 1u);
}

TEST(ResponsesChat, ResponseFormatGoesOnTheLeadingSystemMessage) {
  const ResponsesRequest r = parse_responses_request(parse(R"({"input":"Hi",
    "text":{"format":{"type":"json_object"}}})"));
  const ChatRequest chat = build_responses_chat(r, {});
  ASSERT_EQ(chat.messages.size(), 2u);
  EXPECT_EQ(chat.messages[0].role, ChatRole::kSystem);
  EXPECT_EQ(chat.messages[0].content, "");
  ASSERT_TRUE(chat.messages[0].response_format);
  EXPECT_EQ((*chat.messages[0].response_format)["type"], "json_object");
}

TEST(ResponsesChat, NothingToAnswerIsRefused) {
  EXPECT_EQ(error_param([] {
              build_responses_chat(parse_responses_request(parse(R"({"input":[]})")), {});
            }),
            "input");
  EXPECT_EQ(error_param([] {
              build_responses_chat(parse_responses_request(parse(R"({"instructions":"x"})")), {});
            }),
            "input");
  EXPECT_EQ(error_param([] {
              build_responses_chat(
                  parse_responses_request(parse(R"({"input":[{"role":"system","content":"x"}]})")),
                  {});
            }),
            "input");
}

// previous_response_id: each turn stores its input and output; the next request sees the
// whole conversation, but only its own instructions.
TEST(ResponsesChat, PreviousResponseChainsThroughTheStoreWithoutInstructions) {
  ResponseStore store(10);
  auto ids = counting_ids();

  // Turn 1: a question; the model reasons and calls a tool.
  const ResponsesRequest first = parse_responses_request(parse(R"({"instructions":"Be A.",
    "input":"Weather in Paris?","tools":[{"type":"function","name":"weather"}]})"));
  ParsedCompletion out1;
  out1.reasoning_content = "Call the tool.";
  out1.tool_calls.push_back({"call_x", "weather", R"({"city": "Paris"})"});
  ResponseSettings s1 = first.settings;
  s1.id = "resp_a";
  const Json response1 =
      response_json(s1, ResponseStatus::kCompleted,
                    response_output_items(out1, ResponseStatus::kCompleted, true, ids), nullptr);
  store.put("resp_a",
            {dump_json(response1),
             store.make_turn(nullptr, response_turn_messages(first.input, response1["output"]))});

  // Turn 2: the tool's result, other instructions.
  const ResponsesRequest second = parse_responses_request(parse(R"({"instructions":"Be B.",
    "previous_response_id":"resp_a",
    "input":[{"type":"function_call_output","call_id":"call_x","output":"18C"}]})"));
  auto stored = store.get("resp_a");
  ASSERT_TRUE(stored);
  const ChatRequest chat2 =
      build_responses_chat(second, flatten_conversation(stored->conversation));
  ASSERT_EQ(chat2.messages.size(), 4u);
  EXPECT_EQ(chat2.messages[0].content, "Be B.");
  EXPECT_EQ(chat2.messages[1].role, ChatRole::kUser);
  EXPECT_EQ(chat2.messages[2].role, ChatRole::kAssistant);
  EXPECT_EQ(chat2.messages[2].reasoning_content, "Call the tool.");
  ASSERT_EQ(chat2.messages[2].tool_calls.size(), 1u);
  EXPECT_EQ(chat2.messages[2].tool_calls[0].id, "call_x");
  EXPECT_EQ(chat2.messages[2].tool_calls[0].arguments, R"({"city": "Paris"})");
  EXPECT_EQ(chat2.messages[3].role, ChatRole::kTool);
  EXPECT_EQ(chat2.messages[3].tool_call_id, "call_x");
  for (const ChatMessage& m : chat2.messages) EXPECT_NE(m.content, "Be A.");

  // Turn 2 answers and is stored on top of turn 1; turn 3 without instructions.
  ParsedCompletion out2;
  out2.content = "It is 18C.";
  ResponseSettings s2 = second.settings;
  s2.id = "resp_b";
  const Json response2 =
      response_json(s2, ResponseStatus::kCompleted,
                    response_output_items(out2, ResponseStatus::kCompleted, true, ids), nullptr);
  store.put("resp_b", {dump_json(response2),
                       store.make_turn(stored->conversation,
                                       response_turn_messages(second.input, response2["output"]))});
  const ResponsesRequest third = parse_responses_request(
      parse(R"({"previous_response_id":"resp_b","input":"And tomorrow?"})"));
  const ChatRequest chat3 =
      build_responses_chat(third, flatten_conversation(store.get("resp_b")->conversation));
  ASSERT_EQ(chat3.messages.size(), 5u);
  EXPECT_EQ(chat3.messages[0].role, ChatRole::kUser);  // no instructions at all
  EXPECT_EQ(chat3.messages[3].content, "It is 18C.");
  EXPECT_EQ(chat3.messages[4].content, "And tomorrow?");
  EXPECT_EQ(parse(store.get("resp_b")->response_json)["previous_response_id"], "resp_a");
}

// ---------------------------------------------------------------------------------------------
// Whole responses

TEST(ResponsesOutput, ItemsInTheOrderTheModelWrites) {
  ParsedCompletion parsed;
  parsed.reasoning_content = "think";
  parsed.content = "Calling.";
  parsed.tool_calls.push_back({"call_1", "f", R"({"a": 1})"});
  parsed.tool_calls.push_back({"call_2", "g", "{}"});
  const auto items =
      response_output_items(parsed, ResponseStatus::kCompleted, true, counting_ids());
  ASSERT_EQ(items.size(), 4u);
  const Json output = [&] {
    Json a = Json::array();
    for (const auto& item : items) a.push_back(response_item_json(item));
    return a;
  }();
  EXPECT_EQ(output[0], parse(R"({"id":"rs_0","type":"reasoning","summary":[],
      "content":[{"type":"reasoning_text","text":"think"}],"status":"completed"})"));
  EXPECT_EQ(output[1], parse(R"({"id":"msg_1","type":"message","status":"completed",
      "content":[{"type":"output_text","text":"Calling.","annotations":[]}],"role":"assistant"})"));
  EXPECT_EQ(output[2], parse(R"({"id":"fc_2","type":"function_call","status":"completed",
      "arguments":"{\"a\": 1}","call_id":"call_1","name":"f"})"));
  EXPECT_EQ(output[3]["call_id"], "call_2");

  const auto one = response_output_items(parsed, ResponseStatus::kCompleted, false, counting_ids());
  EXPECT_EQ(one.size(), 3u);  // parallel_tool_calls false: the first call only

  const auto empty =
      response_output_items(ParsedCompletion{}, ResponseStatus::kCompleted, true, counting_ids());
  ASSERT_EQ(empty.size(), 1u);
  EXPECT_EQ(response_item_json(empty[0])["content"][0]["text"], "");
}

TEST(ResponsesOutput, ResponseObjectStatusesAndUsage) {
  ResponseSettings s = test_settings();
  s.max_output_tokens = 5;
  ParsedCompletion parsed;
  parsed.reasoning_content = "long thou";
  engine::Usage usage;
  usage.prompt_tokens = 10;
  usage.cached_prompt_tokens = 4;
  usage.completion_tokens = 5;
  const Json incomplete = response_json(
      s, ResponseStatus::kIncomplete,
      response_output_items(parsed, ResponseStatus::kIncomplete, true, counting_ids()),
      responses_usage_json(usage, 5));
  EXPECT_EQ(incomplete["object"], "response");
  EXPECT_EQ(incomplete["status"], "incomplete");
  EXPECT_EQ(incomplete["incomplete_details"], parse(R"({"reason":"max_output_tokens"})"));
  EXPECT_EQ(incomplete["output"][0]["status"], "incomplete");
  EXPECT_TRUE(incomplete["error"].is_null());
  EXPECT_EQ(incomplete["usage"], parse(R"({"input_tokens":10,
      "input_tokens_details":{"cached_tokens":4},"output_tokens":5,
      "output_tokens_details":{"reasoning_tokens":5},"total_tokens":15})"));
  EXPECT_EQ(incomplete["max_output_tokens"], 5);
  for (const char* key : {"id", "created_at", "model", "instructions", "tools", "tool_choice",
                          "temperature", "top_p", "previous_response_id", "reasoning",
                          "parallel_tool_calls", "text", "truncation", "metadata", "store"}) {
    EXPECT_TRUE(incomplete.contains(key)) << key;
  }

  const Json failed = response_json(s, ResponseStatus::kFailed, {}, nullptr, "boom");
  EXPECT_EQ(failed["status"], "failed");
  EXPECT_EQ(failed["error"], parse(R"({"code":"server_error","message":"boom"})"));

  GenerationResult result;
  result.samples.resize(1);
  result.samples[0].finish.reason = "length";
  EXPECT_EQ(response_final_status(result), ResponseStatus::kIncomplete);
  result.samples[0].finish.reason = "tool_calls";
  EXPECT_EQ(response_final_status(result), ResponseStatus::kCompleted);
  result.samples[0].finish.reason = "stop";
  EXPECT_EQ(response_final_status(result), ResponseStatus::kCompleted);
  result.error = "engine failure";
  EXPECT_EQ(response_final_status(result), ResponseStatus::kFailed);
}

// ---------------------------------------------------------------------------------------------
// Streaming

SampleDelta delta(std::string reasoning, std::string content, std::vector<ToolCallDelta> calls = {},
                  int tokens = 1) {
  SampleDelta d;
  d.tokens.assign(static_cast<size_t>(tokens), 7);
  d.parsed.reasoning = std::move(reasoning);
  d.parsed.content = std::move(content);
  d.parsed.tool_calls = std::move(calls);
  return d;
}

GenerationResult finished(std::string reason, std::string error = {}) {
  GenerationResult r;
  r.samples.resize(1);
  r.samples[0].finish.reason = std::move(reason);
  r.usage.prompt_tokens = 3;
  r.usage.completion_tokens = 9;
  r.error = std::move(error);
  return r;
}

// Rebuilds the output from the events by the rules of the official SDK's stream accumulator
// (openai-node's response-accumulator.ts): items and parts are appended at exactly the next
// index, deltas land on the addressed part, item_id must match the addressed item's id.
class Accumulator {
 public:
  void apply(const Json& e) {
    const std::string type = e["type"];
    if (type == "response.created") {
      output_ = e["response"]["output"];
      ASSERT_TRUE(output_.empty());
      return;
    }
    if (!e.contains("output_index")) return;
    const auto index = e["output_index"].get<size_t>();
    if (type == "response.output_item.added") {
      ASSERT_EQ(index, output_.size()) << e.dump();
      output_.push_back(e["item"]);
      return;
    }
    ASSERT_LT(index, output_.size()) << e.dump();
    Json& item = output_[index];
    if (e.contains("item_id")) {
      ASSERT_EQ(e["item_id"], item["id"]) << e.dump();
    }
    if (type == "response.output_item.done") {
      ASSERT_EQ(e["item"]["id"], item["id"]);
      ASSERT_EQ(e["item"]["type"], item["type"]);
      item = e["item"];
    } else if (type == "response.content_part.added") {
      ASSERT_EQ(e["content_index"].get<size_t>(), item["content"].size()) << e.dump();
      ASSERT_EQ(e["part"]["type"], item["type"] == "reasoning" ? "reasoning_text" : "output_text");
      item["content"].push_back(e["part"]);
    } else if (type == "response.output_text.delta" || type == "response.reasoning_text.delta") {
      ASSERT_EQ(item["type"], type == "response.output_text.delta" ? "message" : "reasoning");
      Json& part = item["content"].at(e["content_index"].get<size_t>());
      part["text"] = part["text"].get<std::string>() + e["delta"].get<std::string>();
    } else if (type == "response.output_text.done" || type == "response.reasoning_text.done") {
      EXPECT_EQ(item["content"].at(e["content_index"].get<size_t>())["text"], e["text"]);
    } else if (type == "response.function_call_arguments.delta") {
      ASSERT_EQ(item["type"], "function_call");
      item["arguments"] = item["arguments"].get<std::string>() + e["delta"].get<std::string>();
    } else if (type == "response.function_call_arguments.done") {
      EXPECT_EQ(item["arguments"], e["arguments"]);
    }
  }
  const Json& output() const { return output_; }

 private:
  Json output_ = Json::array();
};

struct Stream {
  std::vector<std::string> types;
  std::vector<Json> events;
  Accumulator accumulated;
  void add(const std::vector<SseEvent>& batch) {
    for (const SseEvent& e : batch) {
      Json body = Json::parse(e.data);
      EXPECT_EQ(body["type"], e.name);
      EXPECT_EQ(body["sequence_number"], static_cast<int64_t>(events.size()));
      accumulated.apply(body);
      types.push_back(e.name);
      events.push_back(std::move(body));
    }
  }
  // The terminal event's response, checked against what the events built.
  const Json& final_response() const {
    const Json& response = events.back()["response"];
    EXPECT_EQ(accumulated.output(), response["output"]);
    return response;
  }
};

TEST(ResponsesStream, ReasoningTextAndToolCallsInOrder) {
  ResponseEventWriter writer(test_settings(), counting_ids());
  Stream s;
  s.add(writer.start());
  s.add(writer.delta(delta("Let me", "")));
  s.add(writer.delta(delta(" think.", "")));
  s.add(writer.delta(delta("", "", {}, 2)));  // held-back text: no event
  s.add(writer.delta(delta("", "Checking.")));
  s.add(writer.delta(delta("", "", {{0, "call_a", "weather", "{\"city\": \""}})));
  s.add(writer.delta(delta("", "", {{0, "", "", "Par"}, {0, "", "", "is\"}"}})));
  s.add(writer.delta(delta("", "", {{1, "call_b", "time", "{}"}})));
  s.add(writer.finish(finished("tool_calls")));

  const std::vector<std::string> expected = {
      "response.created", "response.in_progress",
      // reasoning
      "response.output_item.added", "response.content_part.added", "response.reasoning_text.delta",
      "response.reasoning_text.delta", "response.reasoning_text.done", "response.content_part.done",
      "response.output_item.done",
      // message
      "response.output_item.added", "response.content_part.added", "response.output_text.delta",
      "response.output_text.done", "response.content_part.done", "response.output_item.done",
      // first call
      "response.output_item.added", "response.function_call_arguments.delta",
      "response.function_call_arguments.delta", "response.function_call_arguments.delta",
      "response.function_call_arguments.done", "response.output_item.done",
      // second call
      "response.output_item.added", "response.function_call_arguments.delta",
      "response.function_call_arguments.done", "response.output_item.done", "response.completed"};
  EXPECT_EQ(s.types, expected);
  for (size_t i = 0; i < s.events.size(); ++i) {
    EXPECT_EQ(s.events[i]["sequence_number"], static_cast<int64_t>(i));
  }

  // Indices and ids agree between the events and the final output.
  const Json& final_response = s.final_response();
  EXPECT_EQ(final_response["status"], "completed");
  const Json& output = final_response["output"];
  ASSERT_EQ(output.size(), 4u);
  std::map<int64_t, std::string> item_ids;
  std::map<std::string, std::string> streamed;  // item id -> concatenated deltas
  for (const Json& e : s.events) {
    if (e.contains("item")) item_ids[e["output_index"].get<int64_t>()] = e["item"]["id"];
    if (e.contains("item_id")) {
      EXPECT_EQ(e["item_id"], output[e["output_index"].get<size_t>()]["id"]) << e.dump();
    }
    if (e["type"].get<std::string>().ends_with(".delta")) {
      streamed[e["item_id"]] += e["delta"].get<std::string>();
    }
    if (e["type"] == "response.output_text.delta" || e["type"] == "response.reasoning_text.delta") {
      EXPECT_EQ(e["content_index"], 0);
    }
  }
  for (size_t i = 0; i < output.size(); ++i)
    EXPECT_EQ(item_ids[static_cast<int64_t>(i)], output[i]["id"]);

  EXPECT_EQ(output[0]["type"], "reasoning");
  EXPECT_EQ(output[0]["content"][0]["text"], "Let me think.");
  EXPECT_EQ(streamed[output[0]["id"]], "Let me think.");
  EXPECT_EQ(output[1]["content"][0]["text"], "Checking.");
  EXPECT_EQ(output[2]["call_id"], "call_a");
  EXPECT_EQ(output[2]["name"], "weather");
  EXPECT_EQ(output[2]["arguments"], R"({"city": "Paris"})");
  EXPECT_EQ(streamed[output[2]["id"]], R"({"city": "Paris"})");
  EXPECT_EQ(output[3]["call_id"], "call_b");
  EXPECT_EQ(final_response["usage"]["output_tokens_details"]["reasoning_tokens"], 4);
  EXPECT_EQ(final_response["usage"]["total_tokens"], 12);

  // The added events carry in-progress items; the done events the finished ones.
  EXPECT_EQ(s.events[2]["item"], parse(R"({"id":"rs_0","type":"reasoning","summary":[],
      "content":[],"status":"in_progress"})"));
  EXPECT_EQ(s.events[15]["item"], parse(R"({"id":"fc_2","type":"function_call",
      "status":"in_progress","arguments":"","call_id":"call_a","name":"weather"})"));
  EXPECT_EQ(s.events[19]["arguments"], R"({"city": "Paris"})");
  EXPECT_EQ(s.events[19]["name"], "weather");
  EXPECT_EQ(s.events[20]["item"], output[2]);
  EXPECT_EQ(s.events[12]["text"], "Checking.");
  EXPECT_EQ(s.events[0]["response"]["status"], "in_progress");
  EXPECT_TRUE(s.events[0]["response"]["usage"].is_null());
  EXPECT_EQ(writer.final_response(), final_response);
  EXPECT_EQ(writer.status(), ResponseStatus::kCompleted);
}

TEST(ResponsesStream, MaxOutputTokensEndsIncomplete) {
  ResponseEventWriter writer(test_settings(), counting_ids());
  Stream s;
  s.add(writer.start());
  s.add(writer.delta(delta("", "The answer is")));
  s.add(writer.finish(finished("length")));
  ASSERT_GE(s.types.size(), 4u);
  EXPECT_EQ(s.types.back(), "response.incomplete");
  const Json& response = s.final_response();
  EXPECT_EQ(response["status"], "incomplete");
  EXPECT_EQ(response["incomplete_details"]["reason"], "max_output_tokens");
  EXPECT_EQ(response["output"][0]["status"], "incomplete");
  EXPECT_EQ(s.events[s.events.size() - 2]["type"], "response.output_item.done");
  EXPECT_EQ(s.events[s.events.size() - 2]["item"]["status"], "incomplete");
}

TEST(ResponsesStream, EngineErrorEndsFailed) {
  ResponseEventWriter writer(test_settings(), counting_ids());
  Stream s;
  s.add(writer.start());
  s.add(writer.delta(delta("", "Hal")));
  s.add(writer.finish(finished("error", "out of memory")));
  EXPECT_EQ(s.types.back(), "response.failed");
  EXPECT_EQ(s.final_response()["status"], "failed");
  EXPECT_EQ(s.events.back()["response"]["error"]["message"], "out of memory");
  // Nothing after the end.
  EXPECT_TRUE(writer.delta(delta("", "more")).empty());
  EXPECT_TRUE(writer.finish(finished("stop")).empty());
}

TEST(ResponsesStream, EmptyOutputIsOneEmptyMessage) {
  ResponseEventWriter writer(test_settings(), counting_ids());
  Stream s;
  s.add(writer.start());
  s.add(writer.finish(finished("stop")));
  const std::vector<std::string> expected = {
      "response.created",           "response.in_progress",
      "response.output_item.added", "response.content_part.added",
      "response.output_text.done",  "response.content_part.done",
      "response.output_item.done",  "response.completed"};
  EXPECT_EQ(s.types, expected);
  EXPECT_EQ(s.final_response()["output"][0]["content"][0]["text"], "");
  EXPECT_EQ(s.events.back()["response"]["usage"]["output_tokens_details"]["reasoning_tokens"], 0);
}

TEST(ResponsesStream, SerialToolCallsKeepTheFirstOnly) {
  ResponseSettings settings = test_settings();
  settings.parallel_tool_calls = false;
  ResponseEventWriter writer(settings, counting_ids());
  Stream s;
  s.add(writer.start());
  s.add(writer.delta(delta("", "", {{0, "call_a", "f", "{}"}, {1, "call_b", "g", "{}"}})));
  s.add(writer.finish(finished("tool_calls")));
  const Json& output = s.final_response()["output"];
  ASSERT_EQ(output.size(), 1u);
  EXPECT_EQ(output[0]["name"], "f");
  EXPECT_EQ(s.events.back()["response"]["parallel_tool_calls"], false);
}

TEST(ResponsesStream, ContentAfterToolCallsStartsANewMessage) {
  ResponseEventWriter writer(test_settings(), counting_ids());
  Stream s;
  s.add(writer.start());
  s.add(writer.delta(delta("", "", {{0, "call_a", "f", "{}"}})));
  s.add(writer.delta(delta("", "trailing text")));
  s.add(writer.finish(finished("tool_calls")));
  const Json& output = s.final_response()["output"];
  ASSERT_EQ(output.size(), 2u);
  EXPECT_EQ(output[0]["type"], "function_call");
  EXPECT_EQ(output[1]["type"], "message");
  // Stored, the two items become one assistant turn.
  const auto messages = response_turn_messages({}, output);
  ASSERT_EQ(messages.size(), 1u);
  EXPECT_EQ(messages[0].content, "trailing text");
  EXPECT_EQ(messages[0].tool_calls.size(), 1u);
}

TEST(ResponsesStream, ReasoningTokenCounter) {
  ReasoningTokenCounter counter;
  counter.feed(delta("a", "", {}, 3));
  counter.feed(delta("", "", {}, 2));
  counter.feed(delta("", "answer", {}, 4));
  counter.feed(delta("late", "", {}, 9));
  EXPECT_EQ(counter.count(), 5);
  ReasoningTokenCounter chat_mode;
  chat_mode.feed(delta("", "", {}, 2));
  chat_mode.feed(delta("", "hi", {}, 1));
  EXPECT_EQ(chat_mode.count(), 0);
}

}  // namespace
}  // namespace flint::server
