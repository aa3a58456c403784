#include "cli/serve_args.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/log.h"
#include "cli/command.h"
#include "cli/flags.h"

namespace flint::cli {
namespace {

using Args = std::vector<std::string>;

const std::string kModel = "/models/DeepSeek-V4-Flash-0731";

// The command line of the issue, verbatim apart from the paths.
Args issue_command_line() {
  return {kModel,
          "--trust-remote-code",
          "--tensor-parallel-size",
          "8",
          "--enable-expert-parallel",
          "--gpu-memory-utilization",
          "0.85",
          "--max-model-len",
          "524288",
          "--max-num-batched-tokens",
          "16384",
          "--max-num-seqs",
          "64",
          "--kv-cache-dtype",
          "fp8",
          "--block-size",
          "256",
          "--dtype",
          "auto",
          "--enable-prefix-caching",
          "--enable-chunked-prefill",
          "--kv-offloading-size",
          "512",
          "--kv-offloading-backend",
          "native",
          "--speculative-config.method",
          "dspark",
          "--speculative-config.model",
          kModel,
          "--speculative-config.num_speculative_tokens",
          "5",
          "--enable-auto-tool-choice",
          "--tool-call-parser",
          "deepseek_v4",
          "--reasoning-parser",
          "deepseek_v4",
          "--disable-custom-all-reduce"};
}

Args with_model(Args rest) {
  rest.insert(rest.begin(), kModel);
  return rest;
}

ServeArgs parse(const Args& args) { return parse_serve_args(args); }

std::string usage_error(const Args& args) {
  try {
    parse_serve_args(args);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "(no error)";
}

// True if `text` names `flag` as a whole word (not as the start of a longer flag).
bool mentions_flag(const std::string& text, const std::string& flag) {
  for (auto at = text.find(flag); at != std::string::npos; at = text.find(flag, at + 1)) {
    char next = at + flag.size() < text.size() ? text[at + flag.size()] : ' ';
    if (next != '-' && next != '_' && !std::isalnum(static_cast<unsigned char>(next))) return true;
  }
  return false;
}

MachineInfo test_machine() {
  return {.ram_bytes = int64_t{24} << 30, .available_bytes = int64_t{20} << 30, .cores = 2};
}

TEST(ServeArgs, IssueCommandLineParsesIntoTypedValues) {
  ServeArgs a = parse(issue_command_line());
  EXPECT_FALSE(a.help);
  EXPECT_EQ(a.model.path, kModel);
  EXPECT_TRUE(a.model.trust_remote_code);
  EXPECT_EQ(a.model.dtype, ModelDtype::kAuto);
  EXPECT_EQ(a.model.max_model_len, 524288);
  EXPECT_EQ(a.parallel.tensor_parallel_size, 8);
  EXPECT_TRUE(a.parallel.enable_expert_parallel);
  EXPECT_TRUE(a.parallel.disable_custom_all_reduce);
  EXPECT_DOUBLE_EQ(a.cache.gpu_memory_utilization, 0.85);
  EXPECT_EQ(a.cache.kv_cache_dtype, KvCacheDtype::kFp8E4m3);
  EXPECT_EQ(a.cache.block_size, 256);
  EXPECT_TRUE(a.cache.enable_prefix_caching);
  EXPECT_EQ(a.cache.kv_offloading_size_gib, 512.0);
  EXPECT_EQ(a.cache.kv_offloading_backend, "native");
  EXPECT_EQ(a.scheduler.max_num_batched_tokens, 16384);
  EXPECT_EQ(a.scheduler.max_num_seqs, 64);
  EXPECT_TRUE(a.scheduler.enable_chunked_prefill);
  EXPECT_TRUE(a.server.enable_auto_tool_choice);
  EXPECT_EQ(a.server.tool_call_parser, "deepseek_v4");
  EXPECT_EQ(a.server.reasoning_parser, "deepseek_v4");

  const SpeculativeArgs& s = a.speculative;
  EXPECT_TRUE(s.enabled());
  EXPECT_EQ(s.method, SpecMethod::kDSpark);
  EXPECT_EQ(s.method_name, "dspark");
  EXPECT_EQ(s.model, kModel);
  EXPECT_TRUE(s.draft_in_target_checkpoint);
  EXPECT_EQ(s.num_speculative_tokens, 5);
  EXPECT_TRUE(s.ignored_keys.empty());

  // Defaults of what was not given.
  EXPECT_EQ(a.server.port, 8000);
  EXPECT_FALSE(a.server.host);
  EXPECT_EQ(a.flint.threads, 0);
  EXPECT_EQ(a.flint.quant_simulation, QuantSimulation::kOfficial);
}

TEST(ServeArgs, DottedAndJsonFormsAreIdentical) {
  SpeculativeArgs dotted = parse(issue_command_line()).speculative;
  SpeculativeArgs json =
      parse(with_model({"--speculative-config", R"({"method":"dspark","model":")" + kModel +
                                                    R"(","num_speculative_tokens":5})"}))
          .speculative;
  EXPECT_EQ(dotted, json);
  // JSON-looking dotted values are JSON; a string in the JSON form is read the same way.
  SpeculativeArgs strings = parse(with_model({"--speculative_config={\"method\": \"dspark\", "
                                              "\"num_speculative_tokens\": \"5\"}"}))
                                .speculative;
  EXPECT_EQ(strings.num_speculative_tokens, 5);
  EXPECT_EQ(parse(with_model({"--speculative-config.num_speculative_tokens", "5.0",
                              "--speculative-config.method", "mtp"}))
                .speculative.num_speculative_tokens,
            5);
  EXPECT_NE(usage_error(with_model({"--speculative-config.num_speculative_tokens", "5.5"}))
                .find("expects an integer"),
            std::string::npos);
  EXPECT_NE(usage_error(with_model({"--speculative-config.num_speculative_tokens", "1e30"}))
                .find("expects an integer"),
            std::string::npos);
  EXPECT_TRUE(strings.draft_in_target_checkpoint);  // no model: the served checkpoint
}

TEST(ServeArgs, CombinedFormsMergeKeyByKeyInOrder) {
  SpeculativeArgs s = parse(with_model({"--speculative-config", R"({"method":"mtp",
                                          "num_speculative_tokens":1})",
                                        "--speculative-config.num_speculative_tokens=3"}))
                          .speculative;
  EXPECT_EQ(s.method, SpecMethod::kMtp);
  EXPECT_EQ(s.num_speculative_tokens, 3);
  SpeculativeArgs t = parse(with_model({"--speculative-config.num_speculative_tokens", "3",
                                        "--speculative-config", R"({"method":"deepseek_mtp",
                                          "num_speculative_tokens":2})"}))
                          .speculative;
  EXPECT_EQ(t.method, SpecMethod::kMtp);
  EXPECT_EQ(t.method_name, "deepseek_mtp");
  EXPECT_EQ(t.num_speculative_tokens, 2);
}

TEST(ServeArgs, DraftModelMustBeTheServedCheckpoint) {
  EXPECT_TRUE(parse(with_model({"--speculative-config.method", "dspark",
                                "--speculative-config.model", kModel + "/"}))
                  .speculative.draft_in_target_checkpoint);
  EXPECT_TRUE(parse(with_model({"--speculative-config.method", "mtp", "--speculative-config.model",
                                "/models/x/../DeepSeek-V4-Flash-0731"}))
                  .speculative.draft_in_target_checkpoint);
  EXPECT_NE(usage_error(with_model({"--speculative-config.method", "dspark",
                                    "--speculative-config.model", "/models/other-draft"}))
                .find("a separate draft model is not supported"),
            std::string::npos);
  // A model without a method: decided from the checkpoint by `flint serve`.
  EXPECT_EQ(parse(with_model({"--speculative-config.model", kModel})).speculative.method,
            SpecMethod::kAuto);
}

TEST(ServeArgs, NgramDefaultsAndChecks) {
  SpeculativeArgs s = parse(with_model({"--speculative-config",
                                        R"({"method":"ngram","num_speculative_tokens":4,
                                            "prompt_lookup_max":3})"}))
                          .speculative;
  EXPECT_EQ(s.method, SpecMethod::kNgram);
  EXPECT_EQ(s.prompt_lookup_max, 3);
  EXPECT_EQ(s.prompt_lookup_min, 3);
  EXPECT_FALSE(s.draft_in_target_checkpoint);
  EXPECT_EQ(parse(with_model({"--speculative-config.method", "ngram",
                              "--speculative-config.num_speculative_tokens", "2"}))
                .speculative.prompt_lookup_max,
            5);
  EXPECT_NE(usage_error(with_model({"--speculative-config.method", "ngram"}))
                .find("needs num_speculative_tokens"),
            std::string::npos);
  EXPECT_NE(usage_error(with_model({"--speculative-config", R"({"method":"ngram",
                "num_speculative_tokens":2,"prompt_lookup_min":4,"prompt_lookup_max":2})"}))
                .find("prompt_lookup_min (4) must not exceed"),
            std::string::npos);
}

TEST(ServeArgs, SpeculativeKeyErrors) {
  std::string typo = usage_error(with_model({"--speculative-config.num_speculative_token", "5"}));
  EXPECT_NE(typo.find("unknown key 'num_speculative_token'"), std::string::npos) << typo;
  EXPECT_NE(typo.find("did you mean 'num_speculative_tokens'?"), std::string::npos) << typo;
  std::string json_typo =
      usage_error(with_model({"--speculative-config", R"({"methd":"dspark"})"}));
  EXPECT_NE(json_typo.find("did you mean 'method'?"), std::string::npos) << json_typo;
  EXPECT_NE(
      usage_error(with_model({"--speculative-config.method", "eagle3"})).find("does not implement"),
      std::string::npos);
  EXPECT_NE(usage_error(with_model({"--speculative-config.method", "dsprak"}))
                .find("did you mean 'dspark'?"),
            std::string::npos);
  EXPECT_NE(usage_error(with_model({"--speculative-config.num_speculative_tokens", "0",
                                    "--speculative-config.method", "dspark"}))
                .find("at least 1"),
            std::string::npos);
  EXPECT_NE(usage_error(with_model({"--speculative-config", "[1,2]"})).find("JSON object"),
            std::string::npos);
  EXPECT_NE(usage_error(with_model({"--speculative-config.num_speculative_tokens", "5"}))
                .find("needs a method"),
            std::string::npos);
  EXPECT_NE(
      usage_error(with_model({"--speculative-config.acceptance_method",
                              "typical_acceptance_sampler", "--speculative-config.method", "mtp"}))
          .find("lossless"),
      std::string::npos);
  EXPECT_NE(usage_error(with_model({"--speculative-config.tensor_parallel_size", "2"}))
                .find("draft_tensor_parallel_size"),
            std::string::npos);
  // vLLM keys with no meaning here are accepted and reported.
  SpeculativeArgs s = parse(with_model({"--speculative-config.method", "dspark",
                                        "--speculative-config.enforce_eager", "true"}))
                          .speculative;
  ASSERT_EQ(s.ignored_keys.size(), 1u);
  EXPECT_EQ(s.ignored_keys[0].first, "enforce_eager");
}

TEST(ServeArgs, FlagForms) {
  ServeArgs a = parse(with_model({"--max_model_len", "4096", "-tp", "2", "--port=9000",
                                  "--no-enable-prefix-caching", "--enable_chunked_prefill=false",
                                  "--max-num-batched-tokens", "8k", "-O3", "--seed", "-1"}));
  EXPECT_EQ(a.model.max_model_len, 4096);
  EXPECT_EQ(a.parallel.tensor_parallel_size, 2);
  EXPECT_EQ(a.server.port, 9000);
  EXPECT_FALSE(a.cache.enable_prefix_caching);
  EXPECT_FALSE(a.scheduler.enable_chunked_prefill);
  EXPECT_EQ(a.scheduler.max_num_batched_tokens, 8000);
  EXPECT_EQ(a.gpu_only.optimization_level, 3);
  EXPECT_EQ(a.model.seed, -1);
  EXPECT_EQ(parse(with_model({"--max-model-len", "1K"})).model.max_model_len, 1024);
  EXPECT_FALSE(parse(with_model({"--max-model-len", "auto"})).model.max_model_len);
  EXPECT_EQ(parse(with_model({"--kv-cache-memory-bytes", "8G"})).cache.kv_cache_memory_bytes,
            int64_t{8} << 30);
  ServeArgs names =
      parse({"--model", kModel, "--served-model-name", "ds4", "deepseek", "--api-key", "k1"});
  EXPECT_EQ(names.model.path, kModel);
  EXPECT_EQ(names.server.served_model_names, (std::vector<std::string>{"ds4", "deepseek"}));
  EXPECT_EQ(names.server.api_keys, (std::vector<std::string>{"k1"}));
  // The last of a repeated flag wins and it is listed once.
  ServeArgs twice = parse(with_model({"--max-num-seqs", "4", "--max-num-seqs", "8"}));
  EXPECT_EQ(twice.scheduler.max_num_seqs, 8);
  ASSERT_EQ(twice.given.size(), 1u);
  EXPECT_EQ(twice.given[0].value, "8");
}

TEST(ServeArgs, OtherJsonFlagsTakeBothForms) {
  ServeArgs a = parse(with_model(
      {"--hf-overrides", R"({"rope_scaling":{"factor":8}})", "--hf-overrides.rope_scaling.type",
       "yarn", "--override-generation-config.temperature", "0.6",
       "--default-chat-template-kwargs.thinking", "true", "--compilation-config", "3",
       "--kv-transfer-config.kv_role", "kv_both"}));
  EXPECT_EQ(a.model.hf_overrides,
            nlohmann::json::parse(R"({"rope_scaling":{"factor":8,"type":"yarn"}})"));
  EXPECT_EQ(a.model.override_generation_config["temperature"], 0.6);
  EXPECT_EQ(a.server.default_chat_template_kwargs["thinking"], true);
  EXPECT_EQ(a.gpu_only.optimization_level, 3);
  EXPECT_EQ(a.gpu_only.kv_transfer_config["kv_role"], "kv_both");
  EXPECT_NE(usage_error(with_model({"--hf-overrides", "not json"})).find("expects JSON"),
            std::string::npos);
  EXPECT_NE(usage_error(with_model({"--hf-overrides", "[1]"})).find("expects a JSON object"),
            std::string::npos);
}

TEST(ServeArgs, UnknownFlagsSuggestTheClosest) {
  std::string message = usage_error(with_model({"--max-model-length", "4096"}));
  EXPECT_NE(message.find("unknown flag '--max-model-length'"), std::string::npos) << message;
  EXPECT_NE(message.find("did you mean '--max-model-len'?"), std::string::npos) << message;
  EXPECT_NE(
      usage_error(with_model({"--tensor-paralel-size", "8"})).find("'--tensor-parallel-size'"),
      std::string::npos);
  EXPECT_NE(usage_error(with_model({"--speculative-confg.method", "dspark"}))
                .find("'--speculative-config.method'"),
            std::string::npos);
}

TEST(ServeArgs, BadValuesAreUsageErrors) {
  auto error_for = [](Args flag_and_value) { return usage_error(with_model(flag_and_value)); };
  EXPECT_NE(error_for({"--max-num-seqs", "-1"}).find("at least 1"), std::string::npos);
  EXPECT_NE(error_for({"--swap-space", "-4"}).find("must not be negative"), std::string::npos);
  EXPECT_NE(error_for({"--kv-offloading-size", "-5"}).find("must not be negative"),
            std::string::npos);
  EXPECT_NE(error_for({"--kv-offloading-backend", "lmcache"}).find("lmcache is not available"),
            std::string::npos);
  EXPECT_NE(error_for({"--kv-cache-memory-bytes", "-1"}).find("at least 1"), std::string::npos);
  EXPECT_NE(error_for({"--tensor-parallel-size", "0"}).find("at least 1"), std::string::npos);
  EXPECT_NE(error_for({"--kv-cache-dtype", "fp8_e5m2"}).find("fp8 (e4m3"), std::string::npos);
  EXPECT_NE(error_for({"--kv-cache-dtype", "fp9"}).find("did you mean 'fp8'?"), std::string::npos);
  for (const char* size : {"100", "0", "-128", "16", "64"}) {
    EXPECT_NE(error_for({"--block-size", size}).find("positive multiple of 128"), std::string::npos)
        << size;
  }
  EXPECT_EQ(parse(with_model({"--block-size", "512"})).cache.block_size, 512);
  for (const char* fraction : {"0", "1.5", "-0.1", "nan", "x"}) {
    EXPECT_NE(error_for({"--gpu-memory-utilization", fraction}).find("--gpu-memory-utilization"),
              std::string::npos)
        << fraction;
  }
  EXPECT_DOUBLE_EQ(
      parse(with_model({"--gpu-memory-utilization", "1"})).cache.gpu_memory_utilization, 1.0);
  EXPECT_NE(error_for({"--port", "70000"}).find("0..65535"), std::string::npos);
  EXPECT_NE(error_for({"--dtype", "float16"}).find("bfloat16 and float32"), std::string::npos);
  EXPECT_NE(error_for({"--quantization", "awq"}).find("only fp8"), std::string::npos);
  EXPECT_NE(error_for({"--tool-call-parser", "hermes"}).find("deepseek_v4"), std::string::npos);
  EXPECT_NE(error_for({"--quant-simulation", "exact"}).find("official, off"), std::string::npos);
  EXPECT_NE(error_for({"--max-num-seqs", "64", "--max-num-batched-tokens", "32"})
                .find("must be at least --max-num-seqs"),
            std::string::npos);
  EXPECT_NE(error_for({"--no-enable-chunked-prefill", "--max-model-len", "8192",
                       "--max-num-batched-tokens", "4096"})
                .find("chunked prefill off"),
            std::string::npos);
  EXPECT_NE(usage_error({"--port", "8000"}).find("missing MODEL"), std::string::npos);
  EXPECT_NE(usage_error({kModel, "--model", "/other"}).find("two models"), std::string::npos);
  // Other commands taking the serve command line name themselves.
  try {
    parse_serve_args(Args{kModel, "--max-model-length", "1"}, "inspect");
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("`flint inspect --help`"), std::string::npos);
  }
}

TEST(ServeArgs, HelpDocumentsEveryFlag) {
  std::string help = serve_help();
  std::vector<std::string> names = serve_flag_names();
  EXPECT_GT(names.size(), 60u);
  for (const auto& name : names) EXPECT_TRUE(mentions_flag(help, name)) << name;
  for (const char* key : {"num_speculative_tokens", "prompt_lookup_max", "disable_by_batch_size",
                          "draft_tensor_parallel_size", "acceptance_method"}) {
    EXPECT_NE(help.find(key), std::string::npos) << key;
  }
  std::string markdown = serve_flags_markdown();
  for (const auto& name : names) EXPECT_NE(markdown.find("`" + name + "`"), std::string::npos);
  // docs/cli.md carries the generated table (`flint serve --help=markdown`).
  std::ifstream doc(std::string(FLINT_SOURCE_DIR) + "/docs/cli.md");
  ASSERT_TRUE(doc) << "docs/cli.md is missing";
  std::stringstream buffer;
  buffer << doc.rdbuf();
  std::string text = buffer.str();
  EXPECT_NE(text.find(markdown), std::string::npos)
      << "docs/cli.md is out of date: paste the output of `flint serve --help=markdown`";
  testing::internal::CaptureStdout();
  EXPECT_TRUE(parse({"--help"}).help);
  EXPECT_EQ(testing::internal::GetCapturedStdout(), help);
}

TEST(ServeArgs, EachGivenFlagExplainsItselfOnce) {
  ServeArgs a = parse(issue_command_line());
  std::vector<std::string> lines = explain_serve_args(a, test_machine());
  std::vector<std::string> flags;
  for (const auto& arg : issue_command_line()) {
    if (!arg.starts_with("--")) continue;
    std::string flag = arg.substr(0, arg.find('.'));
    if (std::find(flags.begin(), flags.end(), flag) == flags.end()) flags.push_back(flag);
  }
  ASSERT_EQ(lines.size(), flags.size());
  for (std::size_t i = 0; i < flags.size(); ++i) {
    EXPECT_TRUE(lines[i].starts_with(flags[i])) << lines[i];
  }
  auto line_of = [&](const std::string& flag) {
    return *std::find_if(lines.begin(), lines.end(), [&](const std::string& l) {
      return l.starts_with(flag + " ") || l.starts_with(flag + ":");
    });
  };
  EXPECT_NE(line_of("--tensor-parallel-size").find("split over 8 MPI ranks of 2 threads each"),
            std::string::npos)
      << line_of("--tensor-parallel-size");
  EXPECT_NE(line_of("--gpu-memory-utilization").find("0.85 x 24.00 GiB = 20.40 GiB"),
            std::string::npos)
      << line_of("--gpu-memory-utilization");
  EXPECT_NE(line_of("--speculative-config").find("served checkpoint itself"), std::string::npos);
  EXPECT_NE(line_of("--disable-custom-all-reduce").find("no effect"), std::string::npos);
}

// One sample per flag of the table: every row parses, explains itself in exactly one line,
// and a new row cannot be added without a sample here.
TEST(ServeArgs, EveryFlagParsesAndExplainsItself) {
  const std::map<std::string, Args> samples = {
      {"--model", {"--model", kModel}},
      {"--trust-remote-code", {"--trust-remote-code"}},
      {"--dtype", {"--dtype", "bfloat16"}},
      {"--max-model-len", {"--max-model-len", "128k"}},
      {"--max-logprobs", {"--max-logprobs", "-1"}},
      {"--seed", {"--seed", "7"}},
      {"--generation-config", {"--generation-config", "vllm"}},
      {"--override-generation-config", {"--override-generation-config", R"({"top_p":0.9})"}},
      {"--hf-overrides", {"--hf-overrides.max_position_embeddings", "65536"}},
      {"--tokenizer", {"--tokenizer", "/tok"}},
      {"--tokenizer-mode", {"--tokenizer-mode", "deepseek_v4"}},
      {"--revision", {"--revision", "main"}},
      {"--quantization", {"-q", "fp8"}},
      {"--load-format", {"--load-format", "safetensors"}},
      {"--download-dir", {"--download-dir", "/downloads"}},
      {"--tensor-parallel-size", {"-tp", "8"}},
      {"--pipeline-parallel-size", {"-pp", "2"}},
      {"--data-parallel-size", {"-dp", "2"}},
      {"--enable-expert-parallel", {"--enable-expert-parallel"}},
      {"--enable-eplb", {"--enable-eplb"}},
      {"--distributed-executor-backend", {"--distributed-executor-backend", "mp"}},
      {"--disable-custom-all-reduce", {"--disable-custom-all-reduce"}},
      {"--gpu-memory-utilization", {"--gpu-memory-utilization", "0.5"}},
      {"--kv-cache-memory-bytes", {"--kv-cache-memory-bytes", "4G"}},
      {"--kv-cache-dtype", {"--kv-cache-dtype", "bf16"}},
      {"--block-size", {"--block-size", "128"}},
      {"--enable-prefix-caching", {"--no-enable-prefix-caching"}},
      {"--num-gpu-blocks-override", {"--num-gpu-blocks-override", "100"}},
      {"--swap-space", {"--swap-space", "0"}},
      {"--cpu-offload-gb", {"--cpu-offload-gb", "10"}},
      {"--kv-offloading-size", {"--kv-offloading-size", "64"}},
      {"--kv-offloading-backend", {"--kv-offloading-backend", "native"}},
      {"--kv-offloading-dir", {"--kv-offloading-dir", "/tmp/kv"}},
      {"--max-num-batched-tokens", {"--max-num-batched-tokens", "8192"}},
      {"--max-num-seqs", {"--max-num-seqs", "16"}},
      {"--enable-chunked-prefill", {"--enable-chunked-prefill"}},
      {"--max-num-partial-prefills", {"--max-num-partial-prefills", "2"}},
      {"--max-long-partial-prefills", {"--max-long-partial-prefills", "1"}},
      {"--long-prefill-token-threshold", {"--long-prefill-token-threshold", "4k"}},
      {"--scheduling-policy", {"--scheduling-policy", "priority"}},
      {"--async-scheduling", {"--async-scheduling"}},
      {"--speculative-config", {"--speculative-config", R"({"method":"mtp"})"}},
      {"--host", {"--host", "127.0.0.1"}},
      {"--port", {"--port", "0"}},
      {"--served-model-name", {"--served-model-name", "ds4"}},
      {"--api-key", {"--api-key", "secret-one", "secret-two"}},
      {"--chat-template", {"--chat-template", "t.jinja"}},
      {"--chat-template-content-format", {"--chat-template-content-format", "openai"}},
      {"--default-chat-template-kwargs", {"--default-chat-template-kwargs", R"({"thinking":1})"}},
      {"--response-role", {"--response-role", "bot"}},
      {"--enable-auto-tool-choice", {"--enable-auto-tool-choice"}},
      {"--tool-call-parser", {"--tool-call-parser", "deepseek_v4"}},
      {"--reasoning-parser", {"--reasoning-parser", "deepseek_v4"}},
      {"--enable-prompt-tokens-details", {"--enable-prompt-tokens-details"}},
      {"--return-tokens-as-token-ids", {"--return-tokens-as-token-ids"}},
      {"--enable-force-include-usage", {"--enable-force-include-usage"}},
      {"--uvicorn-log-level", {"--uvicorn-log-level", "warning"}},
      {"--disable-uvicorn-access-log", {"--disable-uvicorn-access-log"}},
      {"--enable-log-requests", {"--enable-log-requests"}},
      {"--disable-log-requests", {"--disable-log-requests"}},
      {"--max-log-len", {"--max-log-len", "100"}},
      {"--disable-log-stats", {"--disable-log-stats"}},
      {"--enforce-eager", {"--enforce-eager"}},
      {"--optimization-level", {"-O", "0"}},
      {"--compilation-config", {"--compilation-config.cudagraph_mode", "NONE"}},
      {"--max-cudagraph-capture-size", {"--max-cudagraph-capture-size", "64"}},
      {"--attention-backend", {"--attention-backend", "FLASHINFER_MLA"}},
      {"--kv-transfer-config", {"--kv-transfer-config", R"({"kv_connector":"x"})"}},
      {"--threads", {"--threads", "4"}},
      {"--log-level", {"--log-level", "debug"}},
      {"--quant-simulation", {"--quant-simulation", "off"}},
      {"--max-waiting-requests", {"--max-waiting-requests", "64"}},
      {"--shutdown-timeout", {"--shutdown-timeout", "5"}},
      {"--enable-debug-replay", {"--enable-debug-replay"}},
      {"--collective-timeout", {"--collective-timeout", "30"}},
      {"--debug-fault", {"--debug-fault", "1:stall:3"}},
  };
  for (const auto& name : serve_flag_names()) {
    auto sample = samples.find(name);
    ASSERT_NE(sample, samples.end()) << "add a sample for " << name;
    Args args = sample->second;
    if (name != "--model") args.insert(args.begin(), kModel);
    ServeArgs parsed;
    ASSERT_NO_THROW(parsed = parse(args)) << name;
    std::vector<std::string> lines = explain_serve_args(parsed, test_machine());
    ASSERT_EQ(lines.size(), 1u) << name;
    EXPECT_TRUE(lines[0].starts_with(name)) << lines[0];
    EXPECT_EQ(lines[0].find("{}"), std::string::npos) << lines[0];
    EXPECT_EQ(lines[0].find("secret"), std::string::npos) << "API keys must not be logged";
  }
}

// `flint serve` itself: the checkpoint checks, then the start of the server.
class ServeCommand : public testing::Test {
 protected:
  void SetUp() override {
    dir_ =
        std::filesystem::temp_directory_path() /
        ("flint_serve_test_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
         "_" + testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override {
    std::filesystem::remove_all(dir_);
    init_logging("info");  // the runs below turn logging off
  }

  void write_config(const std::string& text) { std::ofstream(dir_ / "config.json") << text; }

  // Runs the registered `serve` command; returns the flint::Error message ("" if none).
  std::string run(Args args) {
    const auto& all = commands();
    auto it =
        std::find_if(all.begin(), all.end(), [](const Command& c) { return c.name == "serve"; });
    EXPECT_NE(it, all.end());
    args.insert(args.begin(), dir_.string());
    try {
      it->run(args);
    } catch (const UsageError& e) {
      return "usage: " + std::string(e.what());
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }

  std::filesystem::path dir_;
};

TEST_F(ServeCommand, NeedsAConfigJson) {
  EXPECT_NE(run({"--log-level", "off"}).find("config.json"), std::string::npos);
  std::filesystem::remove_all(dir_);
  EXPECT_NE(run({"--log-level", "off"}).find("does not exist"), std::string::npos);
}

// Flags that fit the checkpoint pass the checks; the server then listens and loads the model,
// which fails here with the loader's message: the directory holds a config.json only.
TEST_F(ServeCommand, PassesTheChecksThenLoadsTheCheckpoint) {
  write_config(R"({"max_position_embeddings": 1048576, "dspark_block_size": 5,
                   "num_nextn_predict_layers": 1})");
  std::string message = run({"--log-level", "off", "--port", "0", "--speculative-config.method",
                             "dspark", "--api-key", "hidden-key"});
  EXPECT_NE(message.find("config.json: missing required key"), std::string::npos) << message;
  EXPECT_EQ(message.find("hidden-key"), std::string::npos);
}

TEST_F(ServeCommand, ChecksFlagsAgainstTheCheckpoint) {
  write_config(R"({"max_position_embeddings": 65536, "num_nextn_predict_layers": 1})");
  EXPECT_NE(run({"--log-level", "off", "--max-model-len", "128k"}).find("exceeds"),
            std::string::npos);
  EXPECT_NE(
      run({"--log-level", "off", "--speculative-config.method", "dspark"}).find("no DSpark stages"),
      std::string::npos);
  // A model without a method: the checkpoint has an MTP layer, so mtp (no refusal; the
  // loader is reached).
  EXPECT_NE(run({"--log-level", "off", "--port", "0", "--speculative-config.model", dir_.string()})
                .find("missing required key"),
            std::string::npos);
  // --hf-overrides apply before the checks, as they will for the loader.
  EXPECT_NE(run({"--log-level", "off", "--port", "0", "--max-model-len", "128k", "--hf-overrides",
                 R"({"max_position_embeddings": 262144})"})
                .find("missing required key"),
            std::string::npos);
  testing::internal::CaptureStdout();
  EXPECT_TRUE(run({"--help"}).empty());
  EXPECT_NE(testing::internal::GetCapturedStdout().find("usage: flint serve"), std::string::npos);
}

}  // namespace
}  // namespace flint::cli
