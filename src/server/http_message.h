// The bytes of HTTP/1.1 responses, apart from any socket: status line and headers, chunk
// framing, and the short JSON error bodies the transport sends on its own (400, 408, 413,
// 431, 500, 503). Used by http_server.cpp; pure functions, cheap, testable without Asio.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "server/http_server.h"

namespace flint::server {

// How the body of a response is delimited.
struct Framing {
  std::optional<std::size_t> content_length;  // set: Content-Length
  bool chunked = false;                       // Transfer-Encoding: chunked
  bool close = false;                         // Connection: close
};

// "HTTP/1.1 <status> <reason>\r\n" + headers + "\r\n". Headers of `extra` that would change
// the framing (Content-Length, Transfer-Encoding, Connection) or that contain CR, LF or NUL
// are dropped with an error in the log: the framing belongs to the transport, and a stray
// line break would let a value forge headers. An empty content type is left out.
std::string response_head(int status, std::string_view content_type, const Headers& extra,
                          std::string_view server_header, const Framing& framing);

// One chunk of a chunked body: "<hex size>\r\n<data>\r\n". `data` must not be empty (an
// empty chunk ends the body: that is kLastChunk).
std::string chunk_frame(std::string_view data);
inline constexpr std::string_view kLastChunk = "0\r\n\r\n";

// {"error":{"message":"...","type":"invalid_request_error","code":413}}; the type is
// "server_error" for 5xx statuses, as OpenAI's API does.
std::string error_body(int status, std::string_view message);

// "Not Found" for 404; "Unknown" for codes without a standard phrase.
std::string_view reason_phrase(int status);

bool iequals(std::string_view a, std::string_view b);

}  // namespace flint::server
