// --speculative-config of `flint serve`: the table of keys vLLM accepts, how each is read
// into SpeculativeArgs, the defaults and checks once all keys are known, and its start-up
// line. The flag itself is a row of serve_flag_table.cpp.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "base/error.h"
#include "base/strings.h"
#include "cli/flags.h"
#include "cli/serve_args_internal.h"

namespace flint::cli::serve_internal {

namespace {

// ---------------------------------------------------------------------------------------
// Value helpers

int64_t json_int(std::string_view where, const Json& v, int64_t min) {
  int64_t value = 0;
  if (v.is_number_integer()) {
    value = v.get<int64_t>();
  } else if (v.is_number_float()) {
    double d = v.get<double>();
    if (!(std::abs(d) < 9e18) || d != std::floor(d)) {
      throw UsageError("{} expects an integer, got {}", where, v.dump());
    }
    value = static_cast<int64_t>(d);  // 5.0 is 5, as pydantic reads it
  } else if (v.is_string()) {
    value = parse_int(where, v.get<std::string>());
  } else {
    throw UsageError("{} expects an integer, got {}", where, v.dump());
  }
  if (value < min) throw UsageError("{} must be at least {}, got {}", where, min, value);
  return value;
}

bool json_bool(std::string_view where, const Json& v) {
  if (v.is_boolean()) return v.get<bool>();
  if (v.is_string()) return parse_bool(where, v.get<std::string>());
  throw UsageError("{} expects true or false, got {}", where, v.dump());
}

std::string json_string(std::string_view where, const Json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number() || v.is_boolean()) return v.dump();
  throw UsageError("{} expects a string, got {}", where, v.dump());
}

bool same_directory(const std::string& a, const std::string& b) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::equivalent(a, b, ec) && !ec) return true;
  auto normal = [](const std::string& p) {
    std::string n = fs::path(p).lexically_normal().string();
    while (n.size() > 1 && n.back() == '/') n.pop_back();
    return n;
  };
  return normal(a) == normal(b);
}

// ---------------------------------------------------------------------------------------
// --speculative-config keys

using SpecApply = void (*)(SpeculativeArgs&, std::string_view where, const Json& value);

struct SpecKey {
  std::string_view name;
  std::string_view help;
  SpecApply apply = nullptr;     // null: accepted for vLLM compatibility, no effect
  std::string_view ignored_why;  // why it has no effect (apply == null)
};

void apply_method(SpeculativeArgs& s, std::string_view where, const Json& v) {
  std::string name = json_string(where, v);
  static constexpr std::string_view kElsewhere[] = {
      "eagle",        "eagle3",    "medusa",         "mlp_speculator",        "draft_model",
      "suffix",       "dflash",    "custom_class",   "extract_hidden_states", "mimo_mtp",
      "glm4_moe_mtp", "ernie_mtp", "qwen3_next_mtp", "longcat_flash_mtp"};
  if (name == "dspark") {
    s.method = SpecMethod::kDSpark;
  } else if (name == "mtp" || name == "deepseek_mtp") {
    s.method = SpecMethod::kMtp;
  } else if (name == "ngram" || name == "ngram_gpu" || name == "[ngram]") {
    s.method = SpecMethod::kNgram;
  } else if (std::find(std::begin(kElsewhere), std::end(kElsewhere), name) !=
             std::end(kElsewhere)) {
    throw UsageError(
        "{} {}: a vLLM method flint does not implement; flint drafts with dspark "
        "(DeepSeek-V4-Flash-0731's DSpark stages), mtp / deepseek_mtp (the MTP layer) or ngram",
        where, name);
  } else {
    std::vector<std::string> known{"dspark", "mtp", "deepseek_mtp", "ngram"};
    std::string near = closest_match(name, known);
    throw UsageError("{}: unknown method '{}'{}; flint offers dspark, mtp, deepseek_mtp, ngram",
                     where, name, near.empty() ? "" : fmt::format(" (did you mean '{}'?)", near));
  }
  s.method_name = name;
}

const SpecKey kSpecKeys[] = {
    {"method", "dspark (DeepSeek-V4-Flash-0731), mtp or deepseek_mtp (the MTP layer), ngram",
     apply_method},
    {"model", "the draft checkpoint: flint drafts only from the served checkpoint itself",
     [](SpeculativeArgs& s, std::string_view w, const Json& v) { s.model = json_string(w, v); }},
    {"num_speculative_tokens",
     "draft tokens per step (default: dspark_block_size of config.json for dspark, 1 for mtp)",
     [](SpeculativeArgs& s, std::string_view w, const Json& v) {
       s.num_speculative_tokens = json_int(w, v, 1);
     }},
    {"draft_tensor_parallel_size",
     "tensor parallel size of the draft (1 or the target's); recorded: flint splits the draft "
     "over the target's ranks like the target (docs/parallel.md)",
     [](SpeculativeArgs& s, std::string_view w, const Json& v) {
       s.draft_tensor_parallel_size = json_int(w, v, 1);
     }},
    {"prompt_lookup_max", "ngram: longest prompt n-gram to match (default 5)",
     [](SpeculativeArgs& s, std::string_view w, const Json& v) {
       s.prompt_lookup_max = json_int(w, v, 1);
     }},
    {"prompt_lookup_min", "ngram: shortest prompt n-gram to match (default: prompt_lookup_max)",
     [](SpeculativeArgs& s, std::string_view w, const Json& v) {
       s.prompt_lookup_min = json_int(w, v, 1);
     }},
    {"disable_by_batch_size", "stop drafting while more requests than this are running",
     [](SpeculativeArgs& s, std::string_view w, const Json& v) {
       s.disable_by_batch_size = json_int(w, v, 1);
     }},
    {"max_model_len", "stop drafting for a request once its context is longer than this",
     [](SpeculativeArgs& s, std::string_view w, const Json& v) {
       s.max_model_len = json_int(w, v, 1);
     }},
    {"draft_sample_method", "greedy (argmax drafts) or probabilistic (sampled drafts)",
     [](SpeculativeArgs& s, std::string_view w, const Json& v) {
       s.draft_sample_method = one_of(w, json_string(w, v), {"greedy", "probabilistic"}) == "greedy"
                                   ? DraftSampling::kGreedy
                                   : DraftSampling::kProbabilistic;
     }},
    {"acceptance_method", "rejection_sampler: lossless verification (the only one flint has)",
     [](SpeculativeArgs&, std::string_view w, const Json& v) {
       std::string m =
           one_of(w, json_string(w, v), {"rejection_sampler", "typical_acceptance_sampler"});
       if (m != "rejection_sampler") {
         throw UsageError(
             "{} {}: flint verifies drafts only with lossless rejection sampling "
             "(rejection_sampler)",
             w, m);
       }
     }},
    {"rejection_sample_method", "standard: lossless verification (the only one flint has)",
     [](SpeculativeArgs&, std::string_view w, const Json& v) {
       std::string m = one_of(w, json_string(w, v), {"standard", "synthetic", "block"});
       if (m != "standard") {
         throw UsageError("{} {}: flint verifies drafts only with standard rejection sampling", w,
                          m);
       }
     }},
    {"enable_adaptive_verification",
     "verify fewer draft tokens (down to none) when the confidence head (dspark) or the "
     "draft's probabilities and the measured step cost say they do not pay",
     [](SpeculativeArgs& s, std::string_view w, const Json& v) {
       s.enable_adaptive_verification = json_bool(w, v);
     }},
    {"tensor_parallel_size", "refused, as in vLLM: use draft_tensor_parallel_size",
     [](SpeculativeArgs&, std::string_view w, const Json&) {
       throw UsageError("{}: use draft_tensor_parallel_size for the draft's tensor parallel size",
                        w);
     }},
    {"enforce_eager", "", nullptr, "there are no CUDA graphs on CPU"},
    {"quantization", "", nullptr, "the draft uses the checkpoint's own quantization_config"},
    {"kv_cache_dtype", "", nullptr, "the draft's KV cache follows --kv-cache-dtype"},
    {"revision", "", nullptr, "flint never downloads"},
    {"code_revision", "", nullptr, "flint runs no model code"},
    {"disable_padded_drafter_batch", "", nullptr, "a GPU batching detail"},
    {"disable_logprobs", "", nullptr, "draft log-probabilities are never returned"},
    {"disable_mqa_scorer", "", nullptr, "a GPU scoring kernel"},
    {"posterior_threshold", "", nullptr, "only for typical acceptance, which flint does not have"},
    {"posterior_alpha", "", nullptr, "only for typical acceptance, which flint does not have"},
    {"attention_backend", "", nullptr, "a GPU kernel choice"},
    {"moe_backend", "", nullptr, "a GPU kernel choice"},
    {"use_local_argmax_reduction", "", nullptr, "a GPU reduction detail"},
};

}  // namespace

void apply_spec_key(SpeculativeArgs& s, std::string_view raw_key, const Json& value) {
  std::string key(raw_key);
  std::replace(key.begin(), key.end(), '-', '_');
  std::string where = "--speculative-config." + key;
  std::vector<std::string> names;
  for (const auto& k : kSpecKeys) names.emplace_back(k.name);
  std::string first = key.substr(0, key.find('.'));
  auto it = std::find_if(std::begin(kSpecKeys), std::end(kSpecKeys),
                         [&](const SpecKey& k) { return k.name == first; });
  if (it == std::end(kSpecKeys)) {
    std::string near = closest_match(first, names);
    throw UsageError("unknown key '{}' in --speculative-config{}; keys: {}", first,
                     near.empty() ? "" : fmt::format(" (did you mean '{}'?)", near),
                     join(names, ", "));
  }
  if (first != key) throw UsageError("{}: '{}' takes one value, not sub-keys", where, first);
  s.given[key] = value;
  if (it->apply == nullptr) {
    auto old = std::find_if(s.ignored_keys.begin(), s.ignored_keys.end(),
                            [&](const auto& p) { return p.first == key; });
    if (old == s.ignored_keys.end()) s.ignored_keys.emplace_back(key, std::string(it->ignored_why));
    return;
  }
  it->apply(s, where, value);
}

// Fills defaults and checks the combination once every key is known.
void resolve_speculative(SpeculativeArgs& s, const std::string& served_model) {
  if (s.given.empty()) return;
  if (s.method == SpecMethod::kNone) {
    if (!s.model) {
      throw UsageError("--speculative-config needs a method (dspark, mtp or ngram) or a model");
    }
    s.method = SpecMethod::kAuto;
  }
  if (s.method == SpecMethod::kNgram) {
    if (s.model) {
      throw UsageError(
          "--speculative-config: method ngram drafts from the prompt and takes no "
          "model (got model '{}')",
          *s.model);
    }
    if (!s.num_speculative_tokens) {
      throw UsageError("--speculative-config: method ngram needs num_speculative_tokens");
    }
    if (!s.prompt_lookup_min && !s.prompt_lookup_max) {
      s.prompt_lookup_min = s.prompt_lookup_max = 5;
    } else if (!s.prompt_lookup_min) {
      s.prompt_lookup_min = s.prompt_lookup_max;
    } else if (!s.prompt_lookup_max) {
      s.prompt_lookup_max = s.prompt_lookup_min;
    }
    if (*s.prompt_lookup_min > *s.prompt_lookup_max) {
      throw UsageError(
          "--speculative-config: prompt_lookup_min ({}) must not exceed "
          "prompt_lookup_max ({})",
          *s.prompt_lookup_min, *s.prompt_lookup_max);
    }
  } else {
    if (s.prompt_lookup_min || s.prompt_lookup_max) {
      throw UsageError("--speculative-config: prompt_lookup_min/max apply only to method ngram");
    }
    if (s.model && !same_directory(*s.model, served_model)) {
      throw UsageError(
          "--speculative-config.model '{}': flint drafts only from the served "
          "checkpoint '{}' (its DSpark or MTP stages); a separate draft model is "
          "not supported",
          *s.model, served_model);
    }
    s.draft_in_target_checkpoint = true;
  }
}

std::string explain_speculative(const ServeArgs& a, const MachineInfo&) {
  const SpeculativeArgs& s = a.speculative;
  std::string k = s.num_speculative_tokens ? std::to_string(*s.num_speculative_tokens) : "";
  std::string text;
  switch (s.method) {
    case SpecMethod::kDSpark:
      text = fmt::format(
          "DSpark drafting with the served checkpoint's own DSpark stages (mtp.0..2 of "
          "DeepSeek-V4-Flash-0731): {} draft tokens per step",
          k.empty() ? "dspark_block_size (from config.json)" : k);
      break;
    case SpecMethod::kMtp:
      text = fmt::format(
          "MTP drafting with the served checkpoint's own MTP layer (mtp.0): {} "
          "draft token(s) per step",
          k.empty() ? "1" : k);
      break;
    case SpecMethod::kAuto:
      text = fmt::format(
          "no method given: the draft comes from the served checkpoint, DSpark if "
          "its config.json has DSpark stages, else its MTP layer; {} draft tokens "
          "per step",
          k.empty() ? "the checkpoint's default" : k);
      break;
    case SpecMethod::kNgram:
      text = fmt::format(
          "n-gram prompt lookup (no draft weights): prompt matches of {}..{} tokens "
          "propose {} tokens per step",
          s.prompt_lookup_min.value_or(0), s.prompt_lookup_max.value_or(0), k);
      break;
    case SpecMethod::kNone:
      return "no speculative decoding";
  }
  if (s.model) text += " (model is the served checkpoint itself)";
  text += fmt::format(", verified by lossless speculative sampling ({} drafts)",
                      s.draft_sample_method == DraftSampling::kGreedy ? "greedy" : "sampled");
  if (s.enable_adaptive_verification) text += "; adaptive verification on";
  if (s.disable_by_batch_size) {
    text += fmt::format("; no drafting above {} running requests", *s.disable_by_batch_size);
  }
  if (s.max_model_len) text += fmt::format("; no drafting beyond {} tokens", *s.max_model_len);
  if (s.draft_tensor_parallel_size) {
    text += fmt::format(
        "; draft tensor parallel size {} recorded: the draft is split over the target's ranks "
        "like the target",
        *s.draft_tensor_parallel_size);
  }
  for (const auto& [key, why] : s.ignored_keys) {
    text += fmt::format("; {} ignored ({})", key, why);
  }
  return text;
}

std::vector<std::pair<std::string_view, std::string>> speculative_key_docs() {
  std::vector<std::pair<std::string_view, std::string>> docs;
  for (const auto& k : kSpecKeys) {
    docs.emplace_back(k.name, k.apply ? std::string(k.help)
                                      : "accepted, no effect: " + std::string(k.ignored_why));
  }
  return docs;
}

}  // namespace flint::cli::serve_internal

namespace flint::cli {

engine::SpeculativeConfig engine_speculative(const SpeculativeArgs& s, const dsv4::Config& model) {
  engine::SpeculativeConfig c;
  SpecMethod method = s.method;
  if (method == SpecMethod::kAuto) {
    method = model.dspark                         ? SpecMethod::kDSpark
             : model.num_nextn_predict_layers > 0 ? SpecMethod::kMtp
                                                  : SpecMethod::kNone;
    if (method == SpecMethod::kNone) {
      throw Error(
          "--speculative-config: the checkpoint has neither DSpark stages nor an MTP "
          "layer; give method ngram or drop the draft");
    }
  }
  switch (method) {
    case SpecMethod::kNone:
    case SpecMethod::kAuto:
      return c;
    case SpecMethod::kNgram:
      c.method = engine::SpecMethod::kNgram;
      c.prompt_lookup_min = s.prompt_lookup_min.value_or(5);
      c.prompt_lookup_max = s.prompt_lookup_max.value_or(c.prompt_lookup_min);
      break;
    case SpecMethod::kMtp:
      c.method = engine::SpecMethod::kMtp;
      break;
    case SpecMethod::kDSpark:
      c.method = engine::SpecMethod::kDSpark;
      break;
  }
  c.num_tokens = s.num_speculative_tokens.value_or(
      c.method == engine::SpecMethod::kDSpark && model.dspark ? model.dspark->block_size : 1);
  c.probabilistic_drafts = s.draft_sample_method == DraftSampling::kProbabilistic;
  c.adaptive = s.enable_adaptive_verification;
  c.disable_by_batch_size = s.disable_by_batch_size.value_or(0);
  c.max_model_len = s.max_model_len.value_or(0);
  return c;
}

}  // namespace flint::cli
