// The chat page of `flint serve` (GET / and GET /index.html): one self-contained HTML document
// with its CSS and JavaScript inline, compiled into the binary, so that a browser pointed at the
// server can talk to the model with nothing else installed and nothing fetched from elsewhere.
//
// The page is a client of the server's own OpenAI API, on relative URLs: GET /v1/models for
// the model name, POST /v1/chat/completions with "stream": true and
// stream_options.include_usage. It renders reasoning_content (folded "Thinking"), content and
// tool_calls as they stream, live tokens/s and the final usage; Stop aborts the fetch (the
// server then aborts the request and frees its KV). Model output is only ever inserted as text.
// An API key typed into the page is sent as "Authorization: Bearer" and kept in localStorage.
//
// Element ids the browser test (tests/web/) addresses: #prompt, #send, #stop, #new-chat,
// #messages (one .message.user / .message.assistant per turn; an assistant bubble holds
// details.thinking > .reasoning, .content, .tool-calls and .meta), #stats, #error, #model,
// and the settings #api-key, #system, #temperature, #top-p, #max-tokens, #thinking.
#pragma once

#include <string_view>

#include "server/http_server.h"

namespace flint::server {

inline constexpr std::string_view kChatPageContentType = "text/html; charset=utf-8";

// The whole document (about 20 KB), valid for the life of the program.
std::string_view chat_page_html();

// Headers to send with the page: a Content-Security-Policy that allows only the page's own
// inline code and same-origin fetches (and no framing: the page holds an API key), no caching
// across server versions, no MIME sniffing, no referrer.
const Headers& chat_page_headers();

// Answers a GET of the page: 200 with the document and the headers above. Needs no model:
// while the model loads, the page shows the 503 of /v1/models and retries.
void handle_chat_page(Responder& responder);

}  // namespace flint::server
