// /v1/messages without the engine: request translation (every block type, tool results, tools,
// tool_choice, thinking, sampling, errors naming the field), the Message object (content
// blocks, stop reasons, usage arithmetic) and the SSE event stream (block order and indices,
// interleaved deltas, and a stream fed by the real parser accumulating to the whole message).
// Then through the real pipeline on the tiny checkpoint: the handlers called directly with a
// recording Responder, what the model "says" coming from flint_debug_replay.
#include "server/anthropic_messages.h"

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "api_harness.h"
#include "base/log.h"
#include "text/chat_encoding.h"
#include "text/chat_markers.h"

namespace flint::server {
namespace {

Json parse(std::string_view text) { return Json::parse(text); }

// The param of the 400 that `f` throws ("" and a test failure if it throws none).
std::string error_param(const std::function<void()>& f) {
  try {
    f();
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400) << e.what();
    if (!e.param().empty()) {
      EXPECT_EQ(std::string(e.what()).rfind(e.param(), 0), 0u) << e.what();
    }
    return e.param();
  }
  ADD_FAILURE() << "expected an ApiError";
  return "";
}

AnthropicRequest request(std::string_view body, const SamplingParams& defaults = {}) {
  return parse_anthropic_request(parse(body), defaults);
}

std::string request_error(std::string_view body) {
  return error_param([&] { request(body); });
}

// A body with max_tokens and the given messages (JSON text of the list).
std::string with_messages(std::string_view messages, std::string_view extra = "") {
  std::string body = R"({"model":"m","max_tokens":64,"messages":)";
  body += messages;
  if (!extra.empty()) {
    body += ",";
    body += extra;
  }
  body += "}";
  return body;
}

// ---------------------------------------------------------------------------------------------
// Requests

TEST(AnthropicRequest, MinimalBodyAndDefaults) {
  SamplingParams defaults;
  defaults.temperature = 0.6;
  defaults.top_p = 0.95;
  const AnthropicRequest r = request(
      R"({"model":"m","max_tokens":100,"messages":[{"role":"user","content":"Hi"}]})", defaults);
  ASSERT_EQ(r.chat.messages.size(), 1u);
  EXPECT_EQ(r.chat.messages[0].role, ChatRole::kUser);
  EXPECT_EQ(r.chat.messages[0].content, "Hi");
  EXPECT_FALSE(r.chat.messages[0].wo_eos);
  EXPECT_FALSE(r.stream);
  EXPECT_EQ(r.sampling.max_tokens, 100);
  EXPECT_EQ(r.sampling.temperature, 0.6);
  EXPECT_EQ(r.sampling.top_p, 0.95);
  EXPECT_EQ(r.sampling.n, 1);
  EXPECT_FALSE(r.chat.thinking);  // the server default applies
  EXPECT_FALSE(r.chat.reasoning_effort);
  EXPECT_TRUE(r.chat.tools.empty());
  EXPECT_EQ(r.chat.tool_choice.mode, ToolChoiceMode::kAuto);
}

TEST(AnthropicRequest, SamplingFields) {
  const AnthropicRequest r = request(with_messages(
      R"([{"role":"user","content":"Hi"}])",
      R"("temperature":0.2,"top_p":0.5,"top_k":40,"stop_sequences":["END","\n\nHuman:"],
         "stream":true,"metadata":{"user_id":"u1"},"service_tier":"auto","unknown":[1,2])"));
  EXPECT_EQ(r.sampling.temperature, 0.2);
  EXPECT_EQ(r.sampling.top_p, 0.5);
  EXPECT_EQ(r.sampling.top_k, 40);
  EXPECT_EQ(r.sampling.stop, (std::vector<std::string>{"END", "\n\nHuman:"}));
  EXPECT_TRUE(r.stream);
}

TEST(AnthropicRequest, MaxTokensIsRequired) {
  EXPECT_EQ(request_error(R"({"messages":[{"role":"user","content":"Hi"}]})"), "max_tokens");
  EXPECT_EQ(request_error(R"({"max_tokens":0,"messages":[{"role":"user","content":"Hi"}]})"),
            "max_tokens");
  EXPECT_EQ(request_error(R"({"max_tokens":"9","messages":[{"role":"user","content":"Hi"}]})"),
            "max_tokens");
  // count_tokens does not need it.
  EXPECT_EQ(parse_anthropic_chat(parse(R"({"messages":[{"role":"user","content":"Hi"}]})"))
                .messages.size(),
            1u);
}

TEST(AnthropicRequest, SystemStringOrTextBlocks) {
  AnthropicRequest r =
      request(with_messages(R"([{"role":"user","content":"Hi"}])", R"("system":"Be brief.")"));
  ASSERT_EQ(r.chat.messages.size(), 2u);
  EXPECT_EQ(r.chat.messages[0].role, ChatRole::kSystem);
  EXPECT_EQ(r.chat.messages[0].content, "Be brief.");

  r = request(with_messages(R"([{"role":"user","content":"Hi"}])", R"("system":[
      {"type":"text","text":"You are an agent."},
      {"type":"text","text":"Be brief.","cache_control":{"type":"ephemeral"}}])"));
  EXPECT_EQ(r.chat.messages[0].content, "You are an agent.\n\nBe brief.");

  r = request(with_messages(R"([{"role":"user","content":"Hi"}])", R"("system":"")"));
  EXPECT_EQ(r.chat.messages.size(), 1u);  // no empty system message

  EXPECT_EQ(request_error(with_messages(R"([{"role":"user","content":"Hi"}])",
                                        R"("system":[{"type":"image","source":{}}])")),
            "system[0].type");
  EXPECT_EQ(request_error(with_messages(R"([{"role":"user","content":"Hi"}])", R"("system":3)")),
            "system");
}

TEST(AnthropicRequest, UserTextBlocksAreJoined) {
  const AnthropicRequest r = request(with_messages(R"([{"role":"user","content":[
      {"type":"text","text":"<system-reminder>x</system-reminder>"},
      {"type":"text","text":""},
      {"type":"text","text":"Fix the bug.","cache_control":{"type":"ephemeral"},"citations":null}]}])"));
  ASSERT_EQ(r.chat.messages.size(), 1u);
  EXPECT_EQ(r.chat.messages[0].content, "<system-reminder>x</system-reminder>\n\nFix the bug.");
}

TEST(AnthropicRequest, ToolResultsBecomeToolMessagesBeforeTheText) {
  const AnthropicRequest r = request(with_messages(R"([
      {"role":"user","content":"List files"},
      {"role":"assistant","content":[
        {"type":"text","text":"Looking."},
        {"type":"tool_use","id":"toolu_a","name":"ls","input":{"path":"."}},
        {"type":"tool_use","id":"toolu_b","name":"cat","input":{"file":"x","n":2}}]},
      {"role":"user","content":[
        {"type":"text","text":"also this"},
        {"type":"tool_result","tool_use_id":"toolu_a","content":"a.txt"},
        {"type":"tool_result","tool_use_id":"toolu_b","is_error":true,"content":[
          {"type":"text","text":"no such file"},
          {"type":"image","source":{"type":"base64","media_type":"image/png","data":"AA=="}},
          {"type":"text","text":"see above"}]},
        {"type":"tool_result","tool_use_id":"toolu_c"}]}])"));
  const auto& m = r.chat.messages;
  ASSERT_EQ(m.size(), 6u);
  EXPECT_EQ(m[1].role, ChatRole::kAssistant);
  EXPECT_EQ(m[1].content, "Looking.");
  ASSERT_EQ(m[1].tool_calls.size(), 2u);
  EXPECT_EQ(m[1].tool_calls[0].id, "toolu_a");
  EXPECT_EQ(m[1].tool_calls[0].name, "ls");
  EXPECT_EQ(m[1].tool_calls[0].arguments, R"({"path":"."})");
  EXPECT_EQ(m[1].tool_calls[1].arguments, R"({"file":"x","n":2})");
  EXPECT_FALSE(m[1].wo_eos);
  EXPECT_EQ(m[2].role, ChatRole::kTool);
  EXPECT_EQ(m[2].tool_call_id, "toolu_a");
  EXPECT_EQ(m[2].content, "a.txt");
  EXPECT_EQ(m[3].role, ChatRole::kTool);
  EXPECT_EQ(m[3].tool_call_id, "toolu_b");
  EXPECT_EQ(m[3].content, "Error: no such file\n\n[Unsupported image]\n\nsee above");
  EXPECT_EQ(m[4].role, ChatRole::kTool);
  EXPECT_EQ(m[4].content, "");
  EXPECT_EQ(m[5].role, ChatRole::kUser);
  EXPECT_EQ(m[5].content, "also this");
}

TEST(AnthropicRequest, OnlyToolResultsMakeNoUserMessage) {
  const AnthropicRequest r = request(with_messages(R"([
      {"role":"user","content":"go"},
      {"role":"assistant","content":[{"type":"tool_use","id":"toolu_a","name":"f","input":{}}]},
      {"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_a","content":"ok"}]}])"));
  ASSERT_EQ(r.chat.messages.size(), 3u);
  EXPECT_EQ(r.chat.messages[2].role, ChatRole::kTool);
  EXPECT_EQ(r.chat.messages[1].tool_calls[0].arguments, "{}");
}

TEST(AnthropicRequest, ToolResultsRenderInCallOrderWithTheTextAfter) {
  // What the prompt makes of it: the results answer the calls in their order, the user's text
  // follows them in the same turn.
  const AnthropicRequest r = request(with_messages(R"([
      {"role":"user","content":"go"},
      {"role":"assistant","content":[
        {"type":"tool_use","id":"toolu_1","name":"f","input":{"q":"one"}},
        {"type":"tool_use","id":"toolu_2","name":"f","input":{"q":"two"}}]},
      {"role":"user","content":[
        {"type":"tool_result","tool_use_id":"toolu_2","content":"R2"},
        {"type":"tool_result","tool_use_id":"toolu_1","content":"R1"},
        {"type":"text","text":"thanks"}]}])"));
  ChatEncodeOptions options = resolve_encode_options(r.chat, /*default_thinking=*/false);
  const std::string prompt = encode_chat(r.chat, options);
  const std::string expected = std::string(dsv4::kUser) +
                               "<tool_result>R1</tool_result>\n\n<tool_result>R2</tool_result>" +
                               "\n\nthanks" + std::string(dsv4::kAssistant);
  EXPECT_NE(prompt.find(expected), std::string::npos) << prompt;
}

TEST(AnthropicRequest, AssistantThinkingAndRedactedThinking) {
  const AnthropicRequest r = request(with_messages(R"([
      {"role":"user","content":"Hi"},
      {"role":"assistant","content":[
        {"type":"thinking","thinking":"Let me think.","signature":"abc"},
        {"type":"redacted_thinking","data":"xyz"},
        {"type":"text","text":"Hello"},
        {"type":"text","text":" there"}]},
      {"role":"user","content":"Again"}])"));
  const ChatMessage& a = r.chat.messages[1];
  EXPECT_EQ(a.reasoning_content, "Let me think.");
  EXPECT_EQ(a.content, "Hello there");
  EXPECT_TRUE(a.tool_calls.empty());
  EXPECT_FALSE(a.wo_eos);
}

TEST(AnthropicRequest, FinalAssistantMessageIsAPrefill) {
  const AnthropicRequest r = request(with_messages(R"([
      {"role":"user","content":"Give JSON"},{"role":"assistant","content":"{\"a\":"}])"));
  ASSERT_EQ(r.chat.messages.size(), 2u);
  EXPECT_TRUE(r.chat.messages[1].wo_eos);
  EXPECT_EQ(r.chat.messages[1].content, "{\"a\":");
}

TEST(AnthropicRequest, ToolUseInputKeepsKeyOrder) {
  const AnthropicRequest r = request(with_messages(R"([
      {"role":"user","content":"x"},
      {"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"f",
        "input":{"zeta":1,"alpha":{"y":[1,2],"b":"é"},"mid":null}}]},
      {"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"ok"}]}])"));
  EXPECT_EQ(r.chat.messages[1].tool_calls[0].arguments,
            R"({"zeta":1,"alpha":{"y":[1,2],"b":"é"},"mid":null})");
}

TEST(AnthropicRequest, RefusedBlocksNameTheField) {
  EXPECT_EQ(request_error(with_messages(R"([{"role":"user","content":[
      {"type":"text","text":"What is this?"},
      {"type":"image","source":{"type":"base64","media_type":"image/png","data":"AA=="}}]}])")),
            "messages[0].content[1].type");
  EXPECT_EQ(request_error(with_messages(R"([{"role":"user","content":[
      {"type":"document","source":{"type":"text","data":"x"}}]}])")),
            "messages[0].content[0].type");
  EXPECT_EQ(request_error(with_messages(R"([{"role":"user","content":[{"type":"audio"}]}])")),
            "messages[0].content[0].type");
  EXPECT_EQ(request_error(with_messages(R"([{"role":"user","content":[
      {"type":"tool_use","id":"t","name":"f","input":{}}]}])")),
            "messages[0].content[0].type");
  EXPECT_EQ(request_error(with_messages(R"([{"role":"user","content":"x"},{"role":"assistant",
      "content":[{"type":"tool_result","tool_use_id":"t","content":"x"}]}])")),
            "messages[1].content[0].type");
  EXPECT_EQ(request_error(with_messages(R"([{"role":"user","content":"x"},{"role":"assistant",
      "content":[{"type":"image","source":{}}]}])")),
            "messages[1].content[0].type");
  EXPECT_EQ(request_error(with_messages(R"([{"role":"user","content":"x"},{"role":"assistant",
      "content":[{"type":"server_tool_use","id":"s","name":"web_search","input":{}}]}])")),
            "messages[1].content[0].type");
}

TEST(AnthropicRequest, MalformedMessagesNameTheField) {
  EXPECT_EQ(request_error(R"({"max_tokens":5})"), "messages");
  EXPECT_EQ(request_error(R"({"max_tokens":5,"messages":[]})"), "messages");
  EXPECT_EQ(request_error(R"({"max_tokens":5,"messages":{"role":"user"}})"), "messages");
  EXPECT_EQ(request_error(with_messages(R"(["hi"])")), "messages[0]");
  EXPECT_EQ(request_error(with_messages(R"([{"content":"hi"}])")), "messages[0].role");
  EXPECT_EQ(request_error(with_messages(R"([{"role":"system","content":"hi"}])")),
            "messages[0].role");
  EXPECT_EQ(request_error(with_messages(R"([{"role":"user"}])")), "messages[0].content");
  EXPECT_EQ(request_error(with_messages(R"([{"role":"user","content":5}])")),
            "messages[0].content");
  EXPECT_EQ(request_error(with_messages(R"([{"role":"user","content":[5]}])")),
            "messages[0].content[0]");
  EXPECT_EQ(request_error(with_messages(R"([{"role":"user","content":[{"text":"x"}]}])")),
            "messages[0].content[0].type");
  EXPECT_EQ(request_error(with_messages(R"([{"role":"user","content":[{"type":"text"}]}])")),
            "messages[0].content[0].text");
  EXPECT_EQ(
      request_error(with_messages(R"([{"role":"user","content":[{"type":"text","text":["a"]}]}])")),
      "messages[0].content[0].text");
  EXPECT_EQ(request_error(with_messages(
                R"([{"role":"user","content":[{"type":"tool_result","content":"x"}]}])")),
            "messages[0].content[0].tool_use_id");
  EXPECT_EQ(request_error(with_messages(R"([{"role":"user","content":[
      {"type":"tool_result","tool_use_id":"t","content":{"a":1}}]}])")),
            "messages[0].content[0].content");
  EXPECT_EQ(request_error(with_messages(R"([{"role":"user","content":[
      {"type":"tool_result","tool_use_id":"t","content":[{"type":"text","text":1}]}]}])")),
            "messages[0].content[0].content[0].text");
  EXPECT_EQ(request_error(with_messages(R"([{"role":"user","content":[
      {"type":"tool_result","tool_use_id":"t","is_error":"yes"}]}])")),
            "messages[0].content[0].is_error");
  EXPECT_EQ(request_error(with_messages(R"([{"role":"user","content":"x"},{"role":"assistant",
      "content":[{"type":"tool_use","id":"t","name":"f","input":"{}"}]}])")),
            "messages[1].content[0].input");
  EXPECT_EQ(request_error(with_messages(R"([{"role":"user","content":"x"},{"role":"assistant",
      "content":[{"type":"tool_use","name":"f","input":{}}]}])")),
            "messages[1].content[0].id");
  EXPECT_EQ(request_error(with_messages(R"([{"role":"user","content":"x"},{"role":"assistant",
      "content":[{"type":"thinking","signature":"s"}]}])")),
            "messages[1].content[0].thinking");
}

TEST(AnthropicRequest, Tools) {
  const AnthropicRequest r = request(with_messages(R"([{"role":"user","content":"x"}])", R"(
      "tools":[
        {"name":"get_weather","description":"Weather now","cache_control":{"type":"ephemeral"},
         "input_schema":{"type":"object","properties":{"zip":{"type":"string"},"city":{"type":"string"}},
                         "required":["city"]}},
        {"type":"custom","name":"noop","input_schema":{"type":"object"}}])"));
  ASSERT_EQ(r.chat.tools.size(), 2u);
  const ToolDefinition& t = r.chat.tools[0];
  EXPECT_EQ(t.name, "get_weather");
  EXPECT_EQ(t.description, "Weather now");
  // Key order as sent (it reaches the prompt).
  EXPECT_EQ(
      t.parameters.dump(),
      R"({"type":"object","properties":{"zip":{"type":"string"},"city":{"type":"string"}},"required":["city"]})");
  EXPECT_EQ(t.function.dump(),
            R"({"name":"get_weather","description":"Weather now","parameters":)" +
                t.parameters.dump() + "}");
  EXPECT_EQ(r.chat.tools[1].description, "");
  EXPECT_EQ(r.chat.tools[1].function.dump(), R"({"name":"noop","parameters":{"type":"object"}})");
}

TEST(AnthropicRequest, ToolErrorsNameTheField) {
  const std::string m = R"([{"role":"user","content":"x"}])";
  EXPECT_EQ(request_error(with_messages(m, R"("tools":{"name":"f"})")), "tools");
  EXPECT_EQ(request_error(with_messages(m, R"("tools":["f"])")), "tools[0]");
  EXPECT_EQ(request_error(with_messages(m, R"("tools":[{"input_schema":{}}])")), "tools[0].name");
  EXPECT_EQ(request_error(with_messages(m, R"("tools":[{"name":"","input_schema":{}}])")),
            "tools[0].name");
  EXPECT_EQ(request_error(with_messages(m, R"("tools":[{"name":"f"}])")), "tools[0].input_schema");
  EXPECT_EQ(request_error(with_messages(m, R"("tools":[{"name":"f","input_schema":"x"}])")),
            "tools[0].input_schema");
  EXPECT_EQ(request_error(with_messages(m, R"("tools":[{"name":"f","description":7,
                                                         "input_schema":{}}])")),
            "tools[0].description");
  EXPECT_EQ(request_error(with_messages(
                m, R"("tools":[{"type":"web_search_20250305","name":"web_search"}])")),
            "tools[0].type");
  EXPECT_EQ(request_error(with_messages(m, R"("tools":[{"name":"f","input_schema":{}},
                                                        {"name":"f","input_schema":{}}])")),
            "tools[1].name");
}

TEST(AnthropicRequest, ToolChoice) {
  const std::string m = R"([{"role":"user","content":"x"}])";
  auto choice = [&](std::string_view json) {
    return request(with_messages(m, std::string(R"("tool_choice":)") + std::string(json)))
        .chat.tool_choice;
  };
  EXPECT_EQ(choice(R"({"type":"auto","disable_parallel_tool_use":true})").mode,
            ToolChoiceMode::kAuto);
  EXPECT_EQ(choice(R"({"type":"any"})").mode, ToolChoiceMode::kRequired);
  EXPECT_EQ(choice(R"({"type":"none"})").mode, ToolChoiceMode::kNone);
  const ToolChoice named = choice(R"({"type":"tool","name":"get_weather"})");
  EXPECT_EQ(named.mode, ToolChoiceMode::kNamed);
  EXPECT_EQ(named.name, "get_weather");
  EXPECT_EQ(request_error(with_messages(m, R"("tool_choice":{"type":"tool"})")),
            "tool_choice.name");
  EXPECT_EQ(request_error(with_messages(m, R"("tool_choice":{"type":"required"})")),
            "tool_choice.type");
  EXPECT_EQ(request_error(with_messages(m, R"("tool_choice":"auto")")), "tool_choice");
  EXPECT_EQ(request_error(with_messages(m, R"("tool_choice":{})")), "tool_choice.type");
}

TEST(AnthropicRequest, ThinkingAndEffort) {
  const std::string m = R"([{"role":"user","content":"x"}])";
  auto thinking = [&](std::string_view json) {
    return request(with_messages(m, std::string(R"("thinking":)") + std::string(json)))
        .chat.thinking;
  };
  EXPECT_EQ(thinking(R"({"type":"enabled","budget_tokens":2048})"), true);
  EXPECT_EQ(thinking(R"({"type":"adaptive"})"), true);
  EXPECT_EQ(thinking(R"({"type":"disabled"})"), false);
  EXPECT_EQ(thinking("null"), std::nullopt);
  EXPECT_EQ(request_error(with_messages(m, R"("thinking":{"type":"on"})")), "thinking.type");
  EXPECT_EQ(request_error(with_messages(m, R"("thinking":true)")), "thinking");
  EXPECT_EQ(request_error(with_messages(m, R"("thinking":{"type":"enabled","budget_tokens":"x"})")),
            "thinking.budget_tokens");

  EXPECT_EQ(request(with_messages(m, R"("output_config":{"effort":"max"})")).chat.reasoning_effort,
            "max");
  EXPECT_EQ(request(with_messages(m, R"("output_config":{"format":null})")).chat.reasoning_effort,
            std::nullopt);
  EXPECT_EQ(request_error(with_messages(m, R"("output_config":{"effort":"huge"})")),
            "output_config.effort");
}

TEST(AnthropicRequest, SamplingErrorsNameTheField) {
  const std::string m = R"([{"role":"user","content":"x"}])";
  EXPECT_EQ(request_error(with_messages(m, R"("temperature":"hot")")), "temperature");
  EXPECT_EQ(request_error(with_messages(m, R"("top_p":[1])")), "top_p");
  EXPECT_EQ(request_error(with_messages(m, R"("top_k":1.5)")), "top_k");
  EXPECT_EQ(request_error(with_messages(m, R"("stop_sequences":"END")")), "stop_sequences");
  EXPECT_EQ(request_error(with_messages(m, R"("stop_sequences":["a",1])")), "stop_sequences[1]");
  EXPECT_EQ(request_error(with_messages(m, R"("stream":"yes")")), "stream");
}

// ---------------------------------------------------------------------------------------------
// Whole responses

SampleOutput sample(std::string reasoning, std::string content, std::vector<ParsedToolCall> calls,
                    SampleFinish finish) {
  SampleOutput out;
  out.parsed.reasoning_content = std::move(reasoning);
  out.parsed.content = std::move(content);
  out.parsed.tool_calls = std::move(calls);
  out.finish = std::move(finish);
  return out;
}

engine::Usage usage(int64_t prompt, int64_t cached, int64_t completion) {
  engine::Usage u;
  u.prompt_tokens = prompt;
  u.cached_prompt_tokens = cached;
  u.completion_tokens = completion;
  return u;
}

TEST(AnthropicResponse, ToolUseIds) {
  EXPECT_EQ(anthropic_tool_use_id("call_abc123"), "toolu_abc123");
  EXPECT_EQ(anthropic_tool_use_id("toolu_abc"), "toolu_abc");
  EXPECT_EQ(anthropic_tool_use_id("xyz"), "toolu_xyz");
}

TEST(AnthropicResponse, StopReasons) {
  EXPECT_EQ(anthropic_stop({"stop", std::nullopt, 1}).reason, "end_turn");
  EXPECT_EQ(anthropic_stop({"stop", std::nullopt, std::nullopt}).sequence, nullptr);
  const AnthropicStop seq = anthropic_stop({"stop", "END", std::nullopt});
  EXPECT_EQ(seq.reason, "stop_sequence");
  EXPECT_EQ(seq.sequence, "END");
  EXPECT_EQ(anthropic_stop({"length", std::nullopt, std::nullopt}).reason, "max_tokens");
  EXPECT_EQ(anthropic_stop({"tool_calls", std::nullopt, std::nullopt}).reason, "tool_use");
  EXPECT_EQ(anthropic_stop({"abort", std::nullopt, std::nullopt}).reason, "end_turn");
}

TEST(AnthropicResponse, UsageExcludesCacheReads) {
  EXPECT_EQ(anthropic_usage_json(usage(100, 60, 7)),
            parse(R"({"input_tokens":40,"cache_creation_input_tokens":0,
                      "cache_read_input_tokens":60,"output_tokens":7})"));
  EXPECT_EQ(anthropic_usage_json(usage(10, 0, 0))["input_tokens"], 10);
  // A cache count beyond the prompt (never expected) does not go negative.
  EXPECT_EQ(anthropic_usage_json(usage(10, 12, 0))["input_tokens"], 0);
}

TEST(AnthropicResponse, MessageWithEveryBlock) {
  const SampleOutput out =
      sample("Think.", "Let me check.",
             {{"call_1", "get_weather", R"({"city":"Paris","days":3})"}, {"call_2", "noop", "{}"}},
             {"tool_calls", std::nullopt, std::nullopt});
  const Json m = anthropic_message_json("msg_1", "deepseek-v4", out, usage(50, 20, 9));
  EXPECT_EQ(m, parse(R"({
      "id":"msg_1","type":"message","role":"assistant","model":"deepseek-v4",
      "content":[
        {"type":"thinking","thinking":"Think.","signature":""},
        {"type":"text","text":"Let me check."},
        {"type":"tool_use","id":"toolu_1","name":"get_weather","input":{"city":"Paris","days":3}},
        {"type":"tool_use","id":"toolu_2","name":"noop","input":{}}],
      "stop_reason":"tool_use","stop_sequence":null,
      "usage":{"input_tokens":30,"cache_creation_input_tokens":0,"cache_read_input_tokens":20,
               "output_tokens":9}})"));
  // Key order of the input as the model wrote it.
  EXPECT_EQ(m["content"][2]["input"].dump(), R"({"city":"Paris","days":3})");
}

TEST(AnthropicResponse, PlainAndEmptyMessages) {
  Json m = anthropic_message_json(
      "msg_2", "m", sample("", "Hi!", {}, {"stop", "END", std::nullopt}), usage(5, 0, 2));
  EXPECT_EQ(m["content"], parse(R"([{"type":"text","text":"Hi!"}])"));
  EXPECT_EQ(m["stop_reason"], "stop_sequence");
  EXPECT_EQ(m["stop_sequence"], "END");
  m = anthropic_message_json(
      "msg_3", "m", sample("", "", {}, {"length", std::nullopt, std::nullopt}), usage(5, 0, 0));
  EXPECT_EQ(m["content"], Json::array());
  EXPECT_EQ(m["stop_reason"], "max_tokens");
}

// ---------------------------------------------------------------------------------------------
// Streams

struct Event {
  std::string name;
  Json data;
};

std::vector<Event> events_of(std::string_view text) {
  std::vector<Event> events;
  while (!text.empty()) {
    const std::size_t end = text.find("\n\n");
    EXPECT_NE(end, std::string_view::npos) << "unterminated event: " << text;
    if (end == std::string_view::npos) break;
    const std::string_view event = text.substr(0, end);
    text.remove_prefix(end + 2);
    EXPECT_EQ(event.rfind("event: ", 0), 0u) << event;
    const std::size_t newline = event.find('\n');
    EXPECT_NE(newline, std::string_view::npos) << event;
    if (newline == std::string_view::npos) break;
    Event e;
    e.name = std::string(event.substr(7, newline - 7));
    const std::string_view data = event.substr(newline + 1);
    EXPECT_EQ(data.rfind("data: ", 0), 0u) << event;
    e.data = Json::parse(data.substr(6));
    EXPECT_EQ(e.data["type"], e.name);  // Anthropic's events repeat their name as "type"
    events.push_back(std::move(e));
  }
  return events;
}

// Checks the protocol (message_start and ping first; blocks started in index order, deltas
// only into the open block and of its kind, every block stopped; message_delta, message_stop
// last) and accumulates the message the way the SDKs do.
Json accumulate(const std::vector<Event>& events) {
  EXPECT_GE(events.size(), 4u);
  if (events.size() < 4) return nullptr;
  EXPECT_EQ(events[0].name, "message_start");
  EXPECT_EQ(events[1].name, "ping");
  Json message = events[0].data["message"];
  EXPECT_EQ(message["content"], Json::array());
  std::vector<std::string> partial_json;
  int open = -1;
  for (std::size_t i = 2; i + 2 < events.size(); ++i) {
    const Event& e = events[i];
    if (e.name == "content_block_start") {
      EXPECT_EQ(open, -1) << "a block started before the previous one stopped";
      open = e.data["index"].get<int>();
      EXPECT_EQ(open, static_cast<int>(message["content"].size()));
      message["content"].push_back(e.data["content_block"]);
      partial_json.emplace_back();
    } else if (e.name == "content_block_delta") {
      EXPECT_EQ(e.data["index"], open);
      if (open < 0) continue;
      Json& block = message["content"][static_cast<std::size_t>(open)];
      const Json& d = e.data["delta"];
      const std::string type = d["type"];
      if (type == "text_delta") {
        EXPECT_EQ(block["type"], "text");
        block["text"] = block["text"].get<std::string>() + d["text"].get<std::string>();
      } else if (type == "thinking_delta") {
        EXPECT_EQ(block["type"], "thinking");
        block["thinking"] = block["thinking"].get<std::string>() + d["thinking"].get<std::string>();
      } else if (type == "signature_delta") {
        EXPECT_EQ(block["type"], "thinking");
        block["signature"] = d["signature"];
      } else if (type == "input_json_delta") {
        EXPECT_EQ(block["type"], "tool_use");
        partial_json.back() += d["partial_json"].get<std::string>();
      } else {
        ADD_FAILURE() << "unknown delta " << type;
      }
    } else if (e.name == "content_block_stop") {
      EXPECT_EQ(e.data["index"], open);
      if (open < 0) continue;
      Json& block = message["content"][static_cast<std::size_t>(open)];
      if (block["type"] == "tool_use") block["input"] = Json::parse(partial_json.back());
      open = -1;
    } else {
      ADD_FAILURE() << "unexpected event " << e.name;
    }
  }
  EXPECT_EQ(open, -1) << "a block was never stopped";
  const Event& delta = events[events.size() - 2];
  EXPECT_EQ(delta.name, "message_delta");
  EXPECT_EQ(events.back().name, "message_stop");
  message["stop_reason"] = delta.data["delta"]["stop_reason"];
  message["stop_sequence"] = delta.data["delta"]["stop_sequence"];
  message["usage"] = delta.data["usage"];
  return message;
}

CompletionDelta reasoning(std::string text) {
  CompletionDelta d;
  d.reasoning = std::move(text);
  return d;
}
CompletionDelta content(std::string text) {
  CompletionDelta d;
  d.content = std::move(text);
  return d;
}
CompletionDelta call(int index, std::string id, std::string name, std::string arguments) {
  CompletionDelta d;
  d.tool_calls.push_back({index, std::move(id), std::move(name), std::move(arguments)});
  return d;
}

TEST(AnthropicStream, StartEvents) {
  AnthropicStreamFormatter f("msg_1", "deepseek-v4");
  const std::vector<Event> events = events_of(f.start(42));
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].data, parse(R"({"type":"message_start","message":{
      "id":"msg_1","type":"message","role":"assistant","model":"deepseek-v4","content":[],
      "stop_reason":null,"stop_sequence":null,
      "usage":{"input_tokens":42,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,
               "output_tokens":0}}})"));
  EXPECT_EQ(events[1].data, parse(R"({"type":"ping"})"));
}

TEST(AnthropicStream, EveryBlockKindInOrder) {
  AnthropicStreamFormatter f("msg_1", "m");
  std::string sse = f.start(10);
  sse += f.delta(reasoning("Let me "));
  sse += f.delta(reasoning("think."));
  sse += f.delta(content("Checking"));
  sse += f.delta(content("."));
  sse += f.delta(call(0, "call_a", "get_weather", "{"));
  sse += f.delta(call(0, "", "", R"("city": "Pa)"));
  sse += f.delta(call(0, "", "", R"(ris"})"));
  sse += f.delta(call(1, "call_b", "noop", "{"));
  sse += f.delta(call(1, "", "", "}"));
  EXPECT_EQ(f.delta(CompletionDelta{}), "");
  sse += f.finish({"tool_calls", std::nullopt, std::nullopt}, usage(10, 4, 20));
  const std::vector<Event> events = events_of(sse);
  EXPECT_EQ(accumulate(events), parse(R"({
      "id":"msg_1","type":"message","role":"assistant","model":"m",
      "content":[
        {"type":"thinking","thinking":"Let me think.","signature":""},
        {"type":"text","text":"Checking."},
        {"type":"tool_use","id":"toolu_a","name":"get_weather","input":{"city":"Paris"}},
        {"type":"tool_use","id":"toolu_b","name":"noop","input":{}}],
      "stop_reason":"tool_use","stop_sequence":null,
      "usage":{"input_tokens":6,"cache_creation_input_tokens":0,"cache_read_input_tokens":4,
               "output_tokens":20}})"));
  // The exact shapes of the block events.
  EXPECT_EQ(events[2].data, parse(R"({"type":"content_block_start","index":0,
      "content_block":{"type":"thinking","thinking":"","signature":""}})"));
  EXPECT_EQ(events[3].data, parse(R"({"type":"content_block_delta","index":0,
      "delta":{"type":"thinking_delta","thinking":"Let me "}})"));
  EXPECT_EQ(events[5].data, parse(R"({"type":"content_block_delta","index":0,
      "delta":{"type":"signature_delta","signature":""}})"));
  EXPECT_EQ(events[6].data, parse(R"({"type":"content_block_stop","index":0})"));
  EXPECT_EQ(events[7].data, parse(R"({"type":"content_block_start","index":1,
      "content_block":{"type":"text","text":""}})"));
  EXPECT_EQ(events[8].data, parse(R"({"type":"content_block_delta","index":1,
      "delta":{"type":"text_delta","text":"Checking"}})"));
  EXPECT_EQ(events[11].data, parse(R"({"type":"content_block_start","index":2,
      "content_block":{"type":"tool_use","id":"toolu_a","name":"get_weather","input":{}}})"));
  EXPECT_EQ(events[12].data, parse(R"({"type":"content_block_delta","index":2,
      "delta":{"type":"input_json_delta","partial_json":"{"}})"));
  EXPECT_EQ(events[events.size() - 2].data, parse(R"({"type":"message_delta",
      "delta":{"stop_reason":"tool_use","stop_sequence":null},
      "usage":{"input_tokens":6,"cache_creation_input_tokens":0,"cache_read_input_tokens":4,
               "output_tokens":20}})"));
  EXPECT_EQ(events.back().data, parse(R"({"type":"message_stop"})"));
  EXPECT_EQ(f.dropped_fragments(), 0);
}

TEST(AnthropicStream, TextOnlyWithStopSequence) {
  AnthropicStreamFormatter f("msg_1", "m");
  std::string sse = f.start(3);
  sse += f.delta(content("Hello"));
  sse += f.finish({"stop", "END", std::nullopt}, usage(3, 0, 2));
  const Json m = accumulate(events_of(sse));
  EXPECT_EQ(m["content"], parse(R"([{"type":"text","text":"Hello"}])"));
  EXPECT_EQ(m["stop_reason"], "stop_sequence");
  EXPECT_EQ(m["stop_sequence"], "END");
}

TEST(AnthropicStream, EmptyOutputHasNoBlocks) {
  AnthropicStreamFormatter f("msg_1", "m");
  std::string sse = f.start(3);
  sse += f.finish({"length", std::nullopt, std::nullopt}, usage(3, 0, 0));
  const std::vector<Event> events = events_of(sse);
  ASSERT_EQ(events.size(), 4u);
  EXPECT_EQ(accumulate(events)["stop_reason"], "max_tokens");
}

TEST(AnthropicStream, InterleavedDeltasKeepBlocksWellFormed) {
  AnthropicStreamFormatter f("msg_1", "m");
  std::string sse = f.start(1);
  // Text before the call and the call's first fragment in one delta: text first.
  CompletionDelta d = content("Before.");
  d.tool_calls.push_back({0, "call_x", "f", R"({"a": )"});
  sse += f.delta(d);
  // The call's last fragment and text after its block in one delta: the fragment goes into
  // the tool_use block before it closes; the text opens a new text block.
  d = content("After.");
  d.tool_calls.push_back({0, "", "", "1}"});
  sse += f.delta(d);
  // Then a second call, and more reasoning (never expected, but handled as a new block).
  sse += f.delta(call(1, "call_y", "g", "{}"));
  sse += f.delta(reasoning("hmm"));
  sse += f.delta(content("End."));
  sse += f.finish({"tool_calls", std::nullopt, std::nullopt}, usage(1, 0, 5));
  EXPECT_EQ(accumulate(events_of(sse))["content"], parse(R"([
      {"type":"text","text":"Before."},
      {"type":"tool_use","id":"toolu_x","name":"f","input":{"a":1}},
      {"type":"text","text":"After."},
      {"type":"tool_use","id":"toolu_y","name":"g","input":{}},
      {"type":"thinking","thinking":"hmm","signature":""},
      {"type":"text","text":"End."}])"));
  EXPECT_EQ(f.dropped_fragments(), 0);
}

TEST(AnthropicStream, FragmentsOfAClosedCallAreDropped) {
  AnthropicStreamFormatter f("msg_1", "m");
  std::string sse = f.start(1);
  sse += f.delta(call(0, "call_x", "f", "{}"));
  sse += f.delta(call(1, "call_y", "g", "{"));
  sse += f.delta(call(0, "", "", "oops"));  // call 0's block is closed
  sse += f.delta(call(1, "", "", "}"));
  sse += f.finish({"tool_calls", std::nullopt, std::nullopt}, usage(1, 0, 5));
  const Json m = accumulate(events_of(sse));  // still well formed
  EXPECT_EQ(m["content"].size(), 2u);
  EXPECT_EQ(f.dropped_fragments(), 1);
}

TEST(AnthropicStream, ErrorEvent) {
  const std::vector<Event> events = events_of(anthropic_error_event(ApiError(500, "", "boom")));
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].data,
            parse(R"({"type":"error","error":{"type":"api_error","message":"boom"}})"));
  EXPECT_EQ(events_of(anthropic_error_event(ApiError(503, "", "busy")))[0].data["error"]["type"],
            "overloaded_error");
}

// The real parser's deltas, however the text is cut, stream to exactly the whole message.
TEST(AnthropicStream, ParserDeltasAccumulateToTheWholeMessage) {
  const std::vector<ChatToolCall> calls = {
      {"", "get_weather", R"({"city": "Paris", "days": 3})"},
      {"", "search", R"({"query": "a \"quoted\" value", "filters": {"lang": ["en", "fr"]}})"}};
  const std::string text = "The user wants weather.</think>Let me look that up." +
                           render_tool_calls(calls) + std::string(dsv4::kEos);
  auto options = [] {
    CompletionParserOptions o;
    o.start = ReasoningParser::Start::kReasoning;
    o.tools.make_id = counting_tool_call_ids();
    return o;
  };
  SampleOutput whole;
  whole.parsed = parse_completion(text, options());
  whole.finish = {"tool_calls", std::nullopt, std::nullopt};
  ASSERT_EQ(whole.parsed.tool_calls.size(), 2u);
  const Json expected = anthropic_message_json("msg_1", "m", whole, usage(10, 0, 30));
  ASSERT_EQ(expected["content"].size(), 4u);
  EXPECT_EQ(expected["content"][0]["thinking"], "The user wants weather.");
  EXPECT_EQ(expected["content"][1]["text"], "Let me look that up.");
  EXPECT_EQ(expected["content"][2]["id"], "toolu_0");
  EXPECT_EQ(expected["content"][3]["input"],
            parse(R"({"query": "a \"quoted\" value", "filters": {"lang": ["en", "fr"]}})"));

  for (std::size_t step : {std::size_t{1}, std::size_t{3}, std::size_t{7}, std::size_t{64}}) {
    CompletionParser parser(options());
    AnthropicStreamFormatter f("msg_1", "m");
    std::string sse = f.start(10);
    for (std::size_t i = 0; i < text.size(); i += step) {
      sse += f.delta(parser.feed(std::string_view(text).substr(i, step)));
    }
    sse += f.delta(parser.finish());
    sse += f.finish(whole.finish, usage(10, 0, 30));
    EXPECT_EQ(accumulate(events_of(sse)), expected) << "chunks of " << step;
    EXPECT_EQ(f.dropped_fragments(), 0);
  }
}

// ---------------------------------------------------------------------------------------------
// Through the pipeline

using namespace std::chrono_literals;
using testing::ApiHarness;
using testing::v4_tokenizer;

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
  bool start_stream(int status, std::string_view content_type,
                    const Headers& /*extra_headers*/) override {
    std::lock_guard lock(mutex_);
    status_ = status;
    content_type_ = content_type;
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

  // The status and body once answered (status 0 after a timeout: generous, for the sanitizer
  // builds).
  std::pair<int, std::string> wait() {
    std::unique_lock lock(mutex_);
    if (!cv_.wait_for(lock, 600s, [&] { return done_; })) return {0, body_};
    return {status_, body_};
  }
  std::string content_type() {
    std::lock_guard lock(mutex_);
    return content_type_;
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  int status_ = 0;
  std::string body_;
  std::string content_type_;
  bool done_ = false;
};

Json replay_ids(const std::string& text) {
  std::vector<int32_t> ids = v4_tokenizer().encode(text, false);
  ids.push_back(v4_tokenizer().token_id(std::string(dsv4::kEos)));
  return ids;
}

struct Answer {
  int status = 0;
  std::string text;
  Json body;  // whole answers; the accumulated message for streams
};

Answer post(ApiHarness& h, const Json& body,
            void (*handler)(ApiContext&, const Request&,
                            std::shared_ptr<Responder>) = handle_messages) {
  auto responder = std::make_shared<RecordingResponder>();
  Request r;
  r.method = "POST";
  r.target = "/v1/messages";
  r.body = body.dump();
  handler(*h.ctx, r, responder);
  Answer a;
  std::tie(a.status, a.text) = responder->wait();
  if (body.value("stream", false)) {
    EXPECT_EQ(responder->content_type().rfind("text/event-stream", 0), 0u);
    a.body = accumulate(events_of(a.text));
  } else {
    a.body = Json::parse(a.text, nullptr, false);
  }
  return a;
}

const std::string kCall =
    "\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"get_weather\">\n<｜DSML｜parameter "
    "name=\"city\" "
    "string=\"true\">Paris</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>";

Json weather_request() {
  return Json::parse(R"({"model":"tiny","max_tokens":200,"system":"Be brief.",
    "messages":[{"role":"user","content":"Weather in Paris?"}],
    "tools":[{"name":"get_weather","description":"Weather now",
              "input_schema":{"type":"object","properties":{"city":{"type":"string"}},
                              "required":["city"]}}],
    "thinking":{"type":"enabled","budget_tokens":1024}})");
}

TEST(AnthropicApi, WholeAndStreamedMessageWithReasoningAndToolUse) {
  ApiHarness h;
  Json body = weather_request();
  body["flint_debug_replay"] = replay_ids("The user wants the weather.</think>Checking." + kCall);
  const Answer whole = post(h, body);
  ASSERT_EQ(whole.status, 200) << whole.text;
  const Json& m = whole.body;
  EXPECT_EQ(m["type"], "message");
  EXPECT_EQ(m["role"], "assistant");
  EXPECT_EQ(m["model"], "tiny");
  EXPECT_EQ(m["id"].get<std::string>().rfind("msg_", 0), 0u);
  ASSERT_EQ(m["content"].size(), 3u) << m.dump();
  EXPECT_EQ(m["content"][0], parse(R"({"type":"thinking","thinking":"The user wants the weather.",
                                        "signature":""})"));
  EXPECT_EQ(m["content"][1], parse(R"({"type":"text","text":"Checking."})"));
  EXPECT_EQ(m["content"][2]["type"], "tool_use");
  EXPECT_EQ(m["content"][2]["id"].get<std::string>().rfind("toolu_", 0), 0u);
  EXPECT_EQ(m["content"][2]["name"], "get_weather");
  EXPECT_EQ(m["content"][2]["input"], parse(R"({"city":"Paris"})"));
  EXPECT_EQ(m["stop_reason"], "tool_use");
  EXPECT_TRUE(m["stop_sequence"].is_null());
  const Json& u = m["usage"];
  EXPECT_GT(u["output_tokens"].get<int64_t>(), 10);
  const int64_t prompt =
      u["input_tokens"].get<int64_t>() + u["cache_read_input_tokens"].get<int64_t>();

  // The prompt length count_tokens reports.
  const Answer count = post(h, body, handle_count_tokens);
  ASSERT_EQ(count.status, 200) << count.text;
  EXPECT_EQ(count.body, (Json{{"input_tokens", prompt}}));

  body["stream"] = true;
  const Answer streamed = post(h, body);
  ASSERT_EQ(streamed.status, 200) << streamed.text;
  const std::vector<Event> events = events_of(streamed.text);
  EXPECT_EQ(events[0].data["message"]["usage"]["input_tokens"], prompt);
  Json s = streamed.body;
  // Same message but for its id and the tool call's id.
  EXPECT_NE(s["id"], m["id"]);
  EXPECT_EQ(s["content"][2]["id"].get<std::string>().rfind("toolu_", 0), 0u);
  s["id"] = m["id"];
  s["content"][2]["id"] = m["content"][2]["id"];
  s["usage"]["input_tokens"] = u["input_tokens"];  // the second run may hit the prefix cache
  s["usage"]["cache_read_input_tokens"] = u["cache_read_input_tokens"];
  EXPECT_EQ(s, m);
  EXPECT_EQ(streamed.text.find("DSML"), std::string::npos);
}

TEST(AnthropicApi, PrefixCacheHitsAreCacheReads) {
  ApiHarness h;
  Json body = weather_request();
  // The prompt (system, tools, message: about 280 tokens) spans whole cache blocks.
  body["flint_debug_replay"] = replay_ids("Ok.</think>Fine.");
  const Answer first = post(h, body);
  ASSERT_EQ(first.status, 200) << first.text;
  const Answer second = post(h, body);
  ASSERT_EQ(second.status, 200) << second.text;
  const Json& a = first.body["usage"];
  const Json& b = second.body["usage"];
  EXPECT_EQ(a["input_tokens"].get<int64_t>() + a["cache_read_input_tokens"].get<int64_t>(),
            b["input_tokens"].get<int64_t>() + b["cache_read_input_tokens"].get<int64_t>());
  EXPECT_GT(b["cache_read_input_tokens"].get<int64_t>(), 0);
  EXPECT_LT(b["input_tokens"], a["input_tokens"]);
}

TEST(AnthropicApi, StopSequenceAndMaxTokens) {
  ApiHarness h;
  Json body = parse(R"({"model":"tiny","max_tokens":50,"thinking":{"type":"disabled"},
      "stop_sequences":["END"],"messages":[{"role":"user","content":"Count"}]})");
  body["flint_debug_replay"] = replay_ids("one two END three");
  for (bool stream : {false, true}) {
    body["stream"] = stream;
    const Answer a = post(h, body);
    ASSERT_EQ(a.status, 200) << a.text;
    EXPECT_EQ(a.body["content"], parse(R"([{"type":"text","text":"one two "}])"));
    EXPECT_EQ(a.body["stop_reason"], "stop_sequence");
    EXPECT_EQ(a.body["stop_sequence"], "END");
  }
  body.erase("flint_debug_replay");
  body.erase("stop_sequences");
  body["max_tokens"] = 3;
  body["stream"] = false;
  const Answer a = post(h, body);
  ASSERT_EQ(a.status, 200) << a.text;
  EXPECT_EQ(a.body["usage"]["output_tokens"], 3);
  EXPECT_EQ(a.body["stop_reason"], "max_tokens");
}

TEST(AnthropicApi, ToolResultConversationRuns) {
  ApiHarness h;
  Json body = weather_request();
  body["messages"] = parse(R"([
      {"role":"user","content":"Weather in Paris?"},
      {"role":"assistant","content":[
        {"type":"thinking","thinking":"Need the tool.","signature":""},
        {"type":"tool_use","id":"toolu_abc","name":"get_weather","input":{"city":"Paris"}}]},
      {"role":"user","content":[
        {"type":"tool_result","tool_use_id":"toolu_abc","content":[{"type":"text","text":"Sunny"}]},
        {"type":"text","text":"Answer briefly."}]}])");
  body["flint_debug_replay"] = replay_ids("Done.</think>It is sunny.");
  const Answer a = post(h, body);
  ASSERT_EQ(a.status, 200) << a.text;
  EXPECT_EQ(a.body["content"][1], parse(R"({"type":"text","text":"It is sunny."})"));
  EXPECT_EQ(a.body["stop_reason"], "end_turn");
}

TEST(AnthropicApi, ErrorsBeforeAnythingIsSent) {
  ApiHarness h;
  auto status_of = [&](const Json& body) {
    try {
      post(h, body);
    } catch (const ApiError& e) {
      return e.status();
    }
    return 0;
  };
  Json body = weather_request();
  body.erase("max_tokens");
  EXPECT_EQ(status_of(body), 400);
  body = weather_request();
  body["model"] = "claude-unknown";
  EXPECT_EQ(status_of(body), 404);
  body = weather_request();
  body["tool_choice"] = parse(R"({"type":"tool","name":"nope"})");
  EXPECT_EQ(status_of(body), 400);
  body = weather_request();
  body["messages"][0]["content"] =
      parse(R"([{"type":"image","source":{"type":"base64","media_type":"image/png","data":""}}])");
  EXPECT_EQ(status_of(body), 400);
}

}  // namespace
}  // namespace flint::server
