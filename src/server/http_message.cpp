#include "server/http_message.h"

#include <fmt/format.h>

#include <array>
#include <utility>

#include "base/log.h"
#include "text/py_json.h"

namespace flint::server {
namespace {

char lower(char c) { return (c >= 'A' && c <= 'Z') ? char(c - 'A' + 'a') : c; }

bool is_framing_header(std::string_view name) {
  return iequals(name, "content-length") || iequals(name, "transfer-encoding") ||
         iequals(name, "connection");
}

bool has_line_break(std::string_view s) {
  return s.find_first_of(std::string_view("\r\n\0", 3)) != s.npos;
}

}  // namespace

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (lower(a[i]) != lower(b[i])) return false;
  }
  return true;
}

std::optional<std::string_view> Request::header(std::string_view name) const {
  for (const auto& [key, value] : headers) {
    if (iequals(key, name)) return std::string_view(value);
  }
  return std::nullopt;
}

std::string_view reason_phrase(int status) {
  static constexpr std::array<std::pair<int, std::string_view>, 27> kPhrases{{
      {100, "Continue"},
      {200, "OK"},
      {201, "Created"},
      {202, "Accepted"},
      {204, "No Content"},
      {301, "Moved Permanently"},
      {302, "Found"},
      {304, "Not Modified"},
      {400, "Bad Request"},
      {401, "Unauthorized"},
      {403, "Forbidden"},
      {404, "Not Found"},
      {405, "Method Not Allowed"},
      {408, "Request Timeout"},
      {409, "Conflict"},
      {411, "Length Required"},
      {413, "Payload Too Large"},
      {415, "Unsupported Media Type"},
      {422, "Unprocessable Entity"},
      {429, "Too Many Requests"},
      {431, "Request Header Fields Too Large"},
      {500, "Internal Server Error"},
      {501, "Not Implemented"},
      {502, "Bad Gateway"},
      {503, "Service Unavailable"},
      {504, "Gateway Timeout"},
      {505, "HTTP Version Not Supported"},
  }};
  for (const auto& [code, phrase] : kPhrases) {
    if (code == status) return phrase;
  }
  return "Unknown";
}

std::string response_head(int status, std::string_view content_type, const Headers& extra,
                          std::string_view server_header, const Framing& framing) {
  std::string head = fmt::format("HTTP/1.1 {} {}\r\n", status, reason_phrase(status));
  if (!server_header.empty()) head += fmt::format("Server: {}\r\n", server_header);
  if (!content_type.empty()) head += fmt::format("Content-Type: {}\r\n", content_type);
  for (const auto& [name, value] : extra) {
    if (is_framing_header(name) || has_line_break(name) || has_line_break(value) || name.empty() ||
        name.find(':') != name.npos) {
      spdlog::error("HTTP response {}: dropped header '{}' (framing header or bad characters)",
                    status, name);
      continue;
    }
    head += fmt::format("{}: {}\r\n", name, value);
  }
  if (framing.content_length)
    head += fmt::format("Content-Length: {}\r\n", *framing.content_length);
  if (framing.chunked) head += "Transfer-Encoding: chunked\r\n";
  if (framing.close) head += "Connection: close\r\n";
  head += "\r\n";
  return head;
}

std::string chunk_frame(std::string_view data) {
  std::string out = fmt::format("{:x}\r\n", data.size());
  out.reserve(out.size() + data.size() + 2);
  out += data;
  out += "\r\n";
  return out;
}

std::string error_body(int status, std::string_view message) {
  std::string out = "{\"error\":{\"message\":";
  // The text layer's escaper: it also turns bytes that are not UTF-8 into U+FFFD, so an
  // error message quoting a client's bytes stays valid JSON.
  append_py_json_string(out, message);
  out += fmt::format(",\"type\":\"{}\",\"code\":{}}}}}",
                     status >= 500 ? "server_error" : "invalid_request_error", status);
  return out;
}

}  // namespace flint::server
