#include "base/progress.h"

#include <unistd.h>

#include <cstdio>

#include <fmt/format.h>

#include "base/strings.h"

namespace flint {

ProgressBar::ProgressBar(std::string label, uint64_t total)
    : label_(std::move(label)),
      total_(total),
      enabled_(::isatty(STDERR_FILENO) != 0),
      start_(std::chrono::steady_clock::now()),
      last_draw_(start_) {}

ProgressBar::~ProgressBar() {
  if (enabled_ && !finished_) std::fputs("\n", stderr);
}

void ProgressBar::update(uint64_t done) {
  if (!enabled_ || finished_) return;
  auto now = std::chrono::steady_clock::now();
  if (now - last_draw_ < std::chrono::milliseconds(100)) return;
  last_draw_ = now;
  draw(done);
}

void ProgressBar::finish() {
  if (!enabled_ || finished_) return;
  draw(total_);
  std::fputs("\n", stderr);
  finished_ = true;
}

void ProgressBar::draw(uint64_t done) {
  constexpr int kWidth = 30;
  double fraction = total_ == 0 ? 1.0 : static_cast<double>(done) / static_cast<double>(total_);
  if (fraction > 1.0) fraction = 1.0;
  int filled = static_cast<int>(fraction * kWidth);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  std::string bar(static_cast<std::size_t>(filled), '#');
  bar.resize(kWidth, '.');
  std::string line = fmt::format("\r{} [{}] {:5.1f}% {} / {} {:.1f}s", label_, bar,
                                 fraction * 100.0, format_bytes(static_cast<double>(done)),
                                 format_bytes(static_cast<double>(total_)), seconds);
  std::fputs(line.c_str(), stderr);
  std::fflush(stderr);
}

}  // namespace flint
