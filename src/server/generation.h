// From engine events to what the endpoints format: one Generation per API request.
//
// An endpoint turns its JSON into a GenerationSpec (prompt tokens, sampling, how to read the
// output), then start_generation() runs it on the engine and feeds a GenerationSink:
//   engine tokens -> StreamDecoder (text, never half a UTF-8 character)
//                 -> StopStrings (the output ends before a stop string)
//                 -> CompletionParser when parse_chat (reasoning / content / DSML tool calls)
//                 -> sink->on_delta(), and sink->on_finish() once every sample is done.
// The same pipeline serves /v1/chat/completions, /v1/completions, /v1/messages and
// /v1/responses, so stop strings, parsing and finish reasons behave the same on all of them.
//
// Threads: start_generation() runs on the caller's thread (the HTTP I/O thread) and calls
// on_start() there; on_delta() and on_finish() run later on the engine thread, in order, never
// concurrently. Sinks format and write at once (Responder and SseStream are thread-safe); they
// must not block. A client that disconnects aborts the request (its KV is freed at the next
// step); on_finish() then still runs, with aborted set.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/request.h"
#include "server/api_context.h"
#include "server/http_server.h"
#include "server/sse_stream.h"
#include "text/chat_types.h"
#include "text/completion_parser.h"

namespace flint::server {

struct GenerationSpec {
  engine::EngineRequest request;  // prompt tokens and sampling; the id is filled in if empty
  // Chat output: split the text into reasoning, content and tool calls.
  bool parse_chat = false;
  ReasoningParser::Start reasoning_start = ReasoningParser::Start::kContent;
  std::vector<ToolDefinition> tools;  // schemas for the tool-call arguments
  // Text the prompt already forced after the generation prompt (the DSML opening of a call
  // that tool_choice required); the parser reads it first. Not part of the generated text.
  std::string parser_prefix;
  // tool_choice "none": DSML the model writes anyway is parsed (so it never reaches content)
  // and its calls are dropped.
  bool deliver_tool_calls = true;
  // Streaming responses: the SSE stream (registered for keep-alive comments; started by
  // start_generation before on_start). Null for a whole response.
  std::shared_ptr<SseStream> stream;
  std::string endpoint;  // "chat", "completions", "messages", "responses": logs
};

// Why a sample ended, in OpenAI's terms.
struct SampleFinish {
  // "stop" (EOS, a stop token or a stop string), "length", "tool_calls" (stopped after
  // delivering tool calls), "abort" (client gone, shutdown), "error".
  std::string reason;
  std::optional<std::string> stop_string;  // the stop string that ended it
  std::optional<int32_t> stop_token;       // the EOS / stop_token_ids token that ended it
};

// What one sample produced since its previous delta.
struct SampleDelta {
  int32_t sample = 0;
  std::vector<int32_t> tokens;                // the tokens behind this delta
  std::vector<SampleResult> logprobs;         // one per token when the request asked
  std::string text;                           // decoded text, after stop strings
  CompletionDelta parsed;                     // parse_chat: `text` split up
  std::optional<SampleFinish> finish;         // on the sample's last delta
};

// One sample, whole.
struct SampleOutput {
  std::vector<int32_t> tokens;
  std::vector<SampleResult> logprobs;
  std::string text;         // decoded text, after stop strings
  ParsedCompletion parsed;  // parse_chat: reasoning_content, content, tool_calls
  SampleFinish finish;
};

struct GenerationResult {
  std::string request_id;            // the engine's id
  std::vector<SampleOutput> samples;  // by sample index
  engine::Usage usage;
  bool aborted = false;  // the client went away or the server shut down
  std::string error;     // the engine failed the request (finish reason "error")
};

class GenerationSink {
 public:
  virtual ~GenerationSink() = default;
  // After the request was accepted (and the SSE stream started), before the engine runs it:
  // the place for a stream's opening events. Caller's thread.
  virtual void on_start() {}
  virtual void on_delta(const SampleDelta& /*delta*/) {}
  virtual void on_finish(const GenerationResult& result) = 0;
};

// Validates and submits `spec`. Throws ApiError before anything is sent or queued: 400 for a
// request the engine refuses (naming the field; a prompt above --max-model-len states both
// numbers), 429 when the waiting queue is full, 503 while the server shuts down. Then starts
// spec.stream (if any), calls sink->on_start(), submits, and arranges for a disconnect of
// `responder` to abort the request (replacing an earlier on_disconnect callback: an endpoint
// that starts several generations on one responder registers one for all). Returns the
// engine's request id.
std::string start_generation(ApiContext& ctx, GenerationSpec spec, std::shared_ptr<GenerationSink> sink,
                      std::shared_ptr<Responder> responder);

}  // namespace flint::server
