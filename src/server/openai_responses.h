// POST /v1/responses, GET and DELETE /v1/responses/{id}: OpenAI's Responses API, as the
// official SDKs and Codex use it (docs/server.md, "/v1/responses").
//
// A request is parsed into chat messages (responses_request.h), previous_response_id's stored
// conversation is put in front, and the result runs through the common pipeline
// (generation.h) like a chat completion; the output is formatted as response items, whole or
// as the API's SSE events (responses_output.h). Responses with store != false are kept
// (response_store.h): previous_response_id chains across any number of turns, and GET returns
// the response object. A response is stored before its last byte is sent, so a client may
// chain from it as soon as it has read it.
//
// Not supported, each a 400 naming the field: background, conversation, prompt templates,
// truncation "auto", logprobs (top_logprobs > 0, include message.output_text.logprobs),
// item_reference items, image / file / audio content, tool types other than function (the
// hosted web_search and image_generation tools are dropped instead: Codex sends them by
// default), tool_choice other than auto / none / required / a function.
#pragma once

#include <cstddef>
#include <memory>
#include <string_view>
#include <vector>

#include "engine/sampler.h"
#include "server/api_context.h"
#include "server/http_server.h"
#include "server/response_store.h"
#include "server/responses_request.h"

namespace flint::server {

class ResponsesApi {
 public:
  explicit ResponsesApi(std::size_t capacity = ResponseStore::kDefaultMaxEntries,
                        std::size_t max_bytes = ResponseStore::kDefaultMaxBytes);

  // POST /v1/responses. Throws ApiError before anything is sent (bad body, unknown model or
  // previous_response_id, engine refusal); afterwards answers through `responder`.
  void handle_create(ApiContext& ctx, const Request& request, std::shared_ptr<Responder> responder);
  // GET /v1/responses/{id}: the stored response object; ApiError 404 if unknown.
  void handle_get(ApiContext& ctx, std::string_view id, std::shared_ptr<Responder> responder);
  // DELETE /v1/responses/{id}: {"id","object":"response.deleted","deleted":true}; 404 if unknown.
  void handle_delete(ApiContext& ctx, std::string_view id, std::shared_ptr<Responder> responder);

  ResponseStore& store() { return *store_; }

 private:
  // Shared with the sinks of requests in flight, which may finish after the API is gone.
  std::shared_ptr<ResponseStore> store_;
};

// The request's sampling: the server's defaults overridden by temperature, top_p and
// max_output_tokens.
SamplingParams responses_sampling(const SamplingParams& defaults, const ResponsesRequest& request);

// What a finished response adds to its conversation: its input items, then its output items
// (the response object's "output") as one assistant turn.
std::vector<ChatMessage> response_turn_messages(const std::vector<ChatMessage>& input,
                                                const Json& output);

}  // namespace flint::server
