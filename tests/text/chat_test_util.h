// Helpers shared by the chat encoding and completion parser tests.
#pragma once

#include <nlohmann/json.hpp>

#include <fstream>
#include <sstream>
#include <string>

namespace flint::testing {

inline std::string chat_data_path(const std::string& name) {
  return std::string(FLINT_SOURCE_DIR) + "/tests/text/data/chat/" + name;
}

inline std::string read_chat_data(const std::string& name) {
  std::ifstream in(chat_data_path(name), std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

inline nlohmann::ordered_json read_chat_json(const std::string& name) {
  return nlohmann::ordered_json::parse(read_chat_data(name));
}

}  // namespace flint::testing
