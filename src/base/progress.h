// A one-line progress bar on stderr, drawn only when stderr is a terminal.
// Redraws at most ten times a second, so update() is cheap to call often.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace flint {

class ProgressBar {
 public:
  ProgressBar(std::string label, uint64_t total);
  ~ProgressBar();

  void update(uint64_t done);
  void finish();  // draws 100% and ends the line (idempotent)

 private:
  void draw(uint64_t done);

  std::string label_;
  uint64_t total_;
  bool enabled_;
  bool finished_ = false;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_draw_;
};

}  // namespace flint
