// libFuzzer target for the chat request edge: bytes -> JSON -> ChatRequest -> prompt.
// Whatever a client sends, parsing and encoding may only throw flint::Error (a 400 response),
// never crash, hang or throw anything else.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "base/error.h"
#include "text/chat_encoding.h"
#include "text/chat_types.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view body(reinterpret_cast<const char*>(data), size);
  try {
    flint::ChatRequest request = flint::parse_chat_request(body);
    flint::ChatEncodeOptions options = flint::resolve_encode_options(request);
    (void)flint::encode_chat(request, options);
  } catch (const flint::Error&) {
    // a bad request: reported to the client
  }
  return 0;
}
