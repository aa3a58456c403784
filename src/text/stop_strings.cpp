#include "text/stop_strings.h"

#include <algorithm>
#include <utility>

namespace flint::text {

StopStrings::StopStrings(std::vector<std::string> stops, bool include_stop)
    : stops_(std::move(stops)), include_(include_stop) {
  std::erase_if(stops_, [](const std::string& s) { return s.empty(); });
}

const std::string& StopStrings::matched_string() const {
  static const std::string none;
  return matched_ >= 0 ? stops_[static_cast<size_t>(matched_)] : none;
}

std::string StopStrings::push(const std::string& piece) {
  if (matched()) return {};
  held_ += piece;
  if (stops_.empty()) return std::exchange(held_, {});
  // The earliest complete stop string ends the output.
  size_t best = std::string::npos;
  for (size_t i = 0; i < stops_.size(); ++i) {
    const size_t at = held_.find(stops_[i]);
    if (at != std::string::npos && (best == std::string::npos || at < best)) {
      best = at;
      matched_ = static_cast<int>(i);
    }
  }
  if (matched()) {
    std::string out =
        held_.substr(0, best + (include_ ? stops_[static_cast<size_t>(matched_)].size() : 0));
    held_.clear();
    return out;
  }
  // Hold back the longest suffix that is a proper prefix of some stop string.
  size_t hold = 0;
  for (const std::string& s : stops_) {
    for (size_t len = std::min(s.size() - 1, held_.size()); len > hold; --len) {
      if (held_.compare(held_.size() - len, len, s, 0, len) == 0) {
        hold = len;
        break;
      }
    }
  }
  std::string out = held_.substr(0, held_.size() - hold);
  held_.erase(0, held_.size() - hold);
  return out;
}

std::string StopStrings::flush() {
  if (matched()) return {};
  return std::exchange(held_, {});
}

}  // namespace flint::text
