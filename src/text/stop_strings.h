// Stop strings on generated text, as vLLM's detokenizer applies them: text that could still
// be the start of a stop string is held back; when a stop string appears, the output ends
// before it (or after it with include_stop_str_in_output) and nothing more is emitted.
// Cost: O(piece x longest stop string) per push.
#pragma once

#include <string>
#include <vector>

namespace flint::text {

class StopStrings {
 public:
  StopStrings(std::vector<std::string> stops, bool include_stop);

  // Adds generated text; returns the text safe to emit now.
  std::string push(const std::string& piece);
  // After the last token: releases what was held back (nothing once a stop matched).
  std::string flush();
  bool matched() const { return matched_ >= 0; }
  const std::string& matched_string() const;

 private:
  std::vector<std::string> stops_;
  bool include_;
  std::string held_;  // emitted-pending text: a suffix that may begin a stop string
  int matched_ = -1;
};

}  // namespace flint::text
