// The literal markers of DeepSeek-V4's chat format, as written by DeepSeek's reference encoder
// (encoding_dsv4.py). Every marker is plain UTF-8 text here; the tokenizer maps the special
// ones to single tokens. Note the full-width bar U+FF5C "｜" (3 bytes) and U+2581 "▁".
#pragma once

#include <string_view>

namespace flint::dsv4 {

inline constexpr std::string_view kBos = "<｜begin▁of▁sentence｜>";
inline constexpr std::string_view kEos = "<｜end▁of▁sentence｜>";
inline constexpr std::string_view kUser = "<｜User｜>";
inline constexpr std::string_view kAssistant = "<｜Assistant｜>";
inline constexpr std::string_view kLatestReminder = "<｜latest_reminder｜>";
inline constexpr std::string_view kThinkStart = "<think>";
inline constexpr std::string_view kThinkEnd = "</think>";
inline constexpr std::string_view kDsml = "｜DSML｜";

// DSML tool-call markup (see the "## Tools" section the encoder writes into the prompt).
// A block is "\n\n" + kToolCallsOpen + "\n" + invokes joined by "\n" + "\n" + kToolCallsClose.
inline constexpr std::string_view kToolCallsOpen = "<｜DSML｜tool_calls>";
inline constexpr std::string_view kToolCallsClose = "</｜DSML｜tool_calls>";
inline constexpr std::string_view kToolCallsOpenWithBreak = "\n\n<｜DSML｜tool_calls>";
inline constexpr std::string_view kInvokeOpen = "<｜DSML｜invoke";  // then ` name="X">`
inline constexpr std::string_view kInvokeClose = "</｜DSML｜invoke>";
inline constexpr std::string_view kParamOpen = "<｜DSML｜parameter";  // ` name="k" string="true">`
inline constexpr std::string_view kParamClose = "</｜DSML｜parameter>";

inline constexpr std::string_view kToolResultOpen = "<tool_result>";
inline constexpr std::string_view kToolResultClose = "</tool_result>";

}  // namespace flint::dsv4
