// A byte range of a text. The chat encoder reports where client text (message contents, tool
// schemas, arguments) sits in the prompt it writes, so that the tokenizer can keep special-token
// strings inside it as text instead of turning them into control tokens.
#pragma once

#include <cstddef>

namespace flint::text {

struct TextSpan {
  std::size_t begin = 0;
  std::size_t end = 0;  // one past the last byte
};

}  // namespace flint::text
