// Errors of the HTTP API: a status, OpenAI's error type and the request field at fault.
//
// Endpoint code throws ApiError; the router (api_server.cpp) turns it into the error body of
// the endpoint's dialect: OpenAI's {"error": {"message", "type", "param", "code"}} or, on
// /v1/messages, Anthropic's {"type": "error", "error": {"type", "message"}}. A flint::Error from
// a lower layer (a bad chat message, a sampling value the engine refuses) is a 400 whose field is
// the part of its message before the first ": " when that looks like a JSON path
// ("messages[2].content: expected a string" names "messages[2].content").
#pragma once

#include <string>
#include <string_view>
#include <utility>

#include <fmt/format.h>

#include "base/error.h"

namespace flint::server {

class ApiError : public Error {
 public:
  // `param`: the JSON path of the field at fault, "" when no single field is.
  ApiError(int status, std::string param, std::string message)
      : Error(std::move(message)), status_(status), param_(std::move(param)) {}

  template <typename... Args>
  ApiError(int status, std::string param, fmt::format_string<Args...> format, Args&&... args)
      : Error(fmt::format(format, std::forward<Args>(args)...)),
        status_(status),
        param_(std::move(param)) {}

  int status() const { return status_; }
  const std::string& param() const { return param_; }
  // OpenAI's type for the status: invalid_request_error (400, 404, 413, 422),
  // authentication_error (401), rate_limit_error (429), server_error (5xx).
  std::string_view type() const;
  // Anthropic's type for the status: invalid_request_error, authentication_error,
  // not_found_error, request_too_large, rate_limit_error, api_error, overloaded_error (503).
  std::string_view anthropic_type() const;

 private:
  int status_;
  std::string param_;
};

// A lower layer's error as a 400 naming the field its message starts with (see above).
ApiError bad_request(const Error& e);
// A 400 for `param` with `message` ("temperature: must be in [0, 2], got 3").
ApiError invalid_field(std::string param, std::string_view message);

// {"error":{"message":...,"type":...,"param":...,"code":...}}: OpenAI's shape; param is null
// when empty, code is the status as a number (what vLLM sends).
std::string openai_error_body(const ApiError& e);
// {"type":"error","error":{"type":...,"message":...}}: Anthropic's shape.
std::string anthropic_error_body(const ApiError& e);

}  // namespace flint::server
