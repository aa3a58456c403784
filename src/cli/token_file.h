// Token ids from a file, for commands that score or replay a corpus (perplexity, bench).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/deepseek_v4/config.h"

namespace flint::cli {

// The ids of FILE in `format`: "text" (tokenized with MODEL_DIR's tokenizer, BOS first), or
// raw little-endian "u16" / "i32" ids (as training programs store them). Throws Error naming
// the file for an unreadable file, a torn id or an id outside the vocabulary; UsageError for
// an unknown format.
std::vector<int32_t> read_token_file(const std::string& model_dir, const std::string& path,
                                     const std::string& format, const dsv4::Config& config);

}  // namespace flint::cli
