#include "cli/flags.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "base/strings.h"

namespace flint::cli {

namespace {

std::string wrap(std::string_view text, std::size_t indent, std::size_t width) {
  std::string out;
  std::size_t column = indent;
  for (const auto& word : split(text, ' ')) {
    if (word.empty()) continue;
    if (column + word.size() + 1 > width && column > indent) {
      out += "\n" + std::string(indent, ' ');
      column = indent;
    } else if (column > indent) {
      out += ' ';
      ++column;
    }
    out += word;
    column += word.size();
  }
  return out;
}

// "-1", "-0.5", "-2e3": values, not flags (argparse draws the same line).
bool looks_like_number(std::string_view text) {
  if (text.empty()) return false;
  std::string copy(text);
  char* end = nullptr;
  std::strtod(copy.c_str(), &end);
  return end == copy.c_str() + copy.size() && std::isdigit(static_cast<unsigned char>(copy[1]));
}

bool is_flag_token(std::string_view arg) {
  return arg.size() >= 2 && arg[0] == '-' && !looks_like_number(arg);
}

std::string lower(std::string_view text) {
  std::string out(text);
  for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

int64_t parse_int(std::string_view flag, std::string_view text) {
  int64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) {
    throw UsageError("{} expects an integer, got '{}'", flag, text);
  }
  return value;
}

int64_t parse_human_int(std::string_view flag, std::string_view text) {
  static constexpr std::string_view kSuffixes = "kmgtKMGT";
  if (text.size() < 2 || kSuffixes.find(text.back()) == std::string_view::npos) {
    return parse_int(flag, text);
  }
  char suffix = text.back();
  std::string_view number = text.substr(0, text.size() - 1);
  bool digits_ok = !number.empty() && number.front() != '.' && number.back() != '.' &&
                   std::count(number.begin(), number.end(), '.') <= 1 &&
                   std::all_of(number.begin(), number.end(), [](char c) {
                     return c == '.' || std::isdigit(static_cast<unsigned char>(c));
                   });
  if (!digits_ok) {
    throw UsageError("{} expects an integer such as 4096, 16k or 8G, got '{}'", flag, text);
  }
  int power = static_cast<int>(std::string_view("kmgt").find(
                  static_cast<char>(std::tolower(static_cast<unsigned char>(suffix))))) +
              1;
  bool binary = std::isupper(static_cast<unsigned char>(suffix));
  if (binary && number.find('.') != std::string_view::npos) {
    throw UsageError(
        "{}: decimals are not allowed with the binary suffix {} in '{}' (did you mean {}{}?)", flag,
        suffix, text, number, static_cast<char>(std::tolower(static_cast<unsigned char>(suffix))));
  }
  double value = std::strtod(std::string(number).c_str(), nullptr);
  for (int k = 0; k < power; ++k) value *= binary ? 1024.0 : 1000.0;
  if (!(value < 9.2e18)) throw UsageError("{}: '{}' is too large", flag, text);
  return static_cast<int64_t>(value);
}

double parse_double(std::string_view flag, std::string_view text) {
  std::string copy(text);
  char* end = nullptr;
  double value = std::strtod(copy.c_str(), &end);
  if (copy.empty() || end != copy.c_str() + copy.size() || !std::isfinite(value)) {
    throw UsageError("{} expects a number, got '{}'", flag, text);
  }
  return value;
}

bool parse_bool(std::string_view flag, std::string_view text) {
  std::string value = lower(text);
  if (value == "true" || value == "1" || value == "yes" || value == "on") return true;
  if (value == "false" || value == "0" || value == "no" || value == "off") return false;
  throw UsageError("{} expects true or false, got '{}'", flag, text);
}

std::string parse_choice(std::string_view flag, std::string_view text,
                         std::span<const std::string_view> choices) {
  for (auto choice : choices) {
    if (choice == text) return std::string(text);
  }
  std::vector<std::string> names(choices.begin(), choices.end());
  std::string suggestion = closest_match(text, names);
  throw UsageError("{} expects one of {}, got '{}'{}", flag, join(names, ", "), text,
                   suggestion.empty() ? "" : fmt::format(" (did you mean '{}'?)", suggestion));
}

nlohmann::json parse_json_flag_value(std::string_view text) {
  nlohmann::json value = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!value.is_discarded()) return value;
  try {
    return parse_human_int("", text);
  } catch (const UsageError&) {
    return std::string(text);
  }
}

void merge_json_object(nlohmann::json& target, std::string_view flag,
                       const nlohmann::json& update) {
  if (!update.is_object()) {
    throw UsageError("{} expects a JSON object such as '{{\"key\": 1}}' (or {}.KEY VALUE), got {}",
                     flag, flag, update.dump());
  }
  if (!target.is_object()) target = nlohmann::json::object();
  for (const auto& [key, value] : update.items()) {
    if (value.is_object() && target.contains(key) && target[key].is_object()) {
      merge_json_object(target[key], flag, value);
    } else {
      target[key] = value;
    }
  }
}

FlagParser::FlagParser(std::string usage, std::string description)
    : usage_(std::move(usage)), description_(std::move(description)) {}

void FlagParser::positional(std::string name, std::string help, std::string* out, bool required) {
  positionals_.push_back({std::move(name), std::move(help), out, required});
}

void FlagParser::group(std::string title) { groups_.push_back(std::move(title)); }

void FlagParser::add_flag(Flag flag) {
  flag.group = groups_.size() - 1;
  flag.order = declared_++;
  flags_.push_back(std::move(flag));
}

void FlagParser::add_string(std::string name, std::string help, std::string* out) {
  Flag f{.name = std::move(name), .help = std::move(help), .value_name = "TEXT"};
  f.set = [out](std::string_view v) { *out = std::string(v); };
  f.default_text = *out;
  add_flag(std::move(f));
}

void FlagParser::add_int(std::string name, std::string help, int64_t* out) {
  Flag f{.name = name, .help = std::move(help), .value_name = "N"};
  f.set = [out, name](std::string_view v) { *out = parse_int(name, v); };
  f.default_text = std::to_string(*out);
  add_flag(std::move(f));
}

void FlagParser::add_double(std::string name, std::string help, double* out) {
  Flag f{.name = name, .help = std::move(help), .value_name = "X"};
  f.set = [out, name](std::string_view v) { *out = parse_double(name, v); };
  f.default_text = fmt::format("{}", *out);
  add_flag(std::move(f));
}

void FlagParser::add_bool(std::string name, std::string help, bool* out) {
  Flag f{.name = name, .help = std::move(help), .value_name = "", .arity = Arity::kSwitch};
  f.set = [out, name](std::string_view v) { *out = parse_bool(name, v); };
  f.default_text = *out ? "true" : "";
  add_flag(std::move(f));
}

void FlagParser::add_optional_int(std::string name, std::string help, std::optional<int64_t>* out) {
  Flag f{.name = name, .help = std::move(help), .value_name = "N"};
  f.set = [out, name](std::string_view v) { *out = parse_int(name, v); };
  add_flag(std::move(f));
}

void FlagParser::add_optional_double(std::string name, std::string help,
                                     std::optional<double>* out) {
  Flag f{.name = name, .help = std::move(help), .value_name = "X"};
  f.set = [out, name](std::string_view v) { *out = parse_double(name, v); };
  add_flag(std::move(f));
}

void FlagParser::add_optional_string(std::string name, std::string help,
                                     std::optional<std::string>* out) {
  Flag f{.name = std::move(name), .help = std::move(help), .value_name = "TEXT"};
  f.set = [out](std::string_view v) { *out = std::string(v); };
  add_flag(std::move(f));
}

void FlagParser::add_custom(std::string name, std::string help, bool takes_value,
                            std::function<void(std::string_view)> handler, std::string value_name,
                            std::string default_text) {
  Flag f{.name = std::move(name),
         .help = std::move(help),
         .value_name = takes_value ? std::move(value_name) : "",
         .arity = takes_value ? Arity::kOne : Arity::kSwitch};
  f.set = std::move(handler);
  f.default_text = std::move(default_text);
  add_flag(std::move(f));
}

void FlagParser::add_list(std::string name, std::string help,
                          std::function<void(std::vector<std::string>)> handler,
                          std::string value_name, std::string default_text) {
  Flag f{.name = std::move(name),
         .help = std::move(help),
         .value_name = std::move(value_name),
         .arity = Arity::kList};
  f.set_list = std::move(handler);
  f.default_text = std::move(default_text);
  add_flag(std::move(f));
}

void FlagParser::add_json(std::string name, std::string help,
                          std::function<void(const nlohmann::json&)> handler,
                          std::string value_name, std::string default_text) {
  add_custom(
      name, std::move(help), true,
      [name, handler](std::string_view text) {
        nlohmann::json value = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
        if (value.is_discarded()) {
          throw UsageError("{} expects JSON such as '{{\"key\": 1}}' (or {}.KEY VALUE), got '{}'",
                           name, name, text);
        }
        handler(value);
      },
      std::move(value_name), std::move(default_text));
  std::string prefix = name + ".";
  prefixes_.push_back(
      {prefix,
       fmt::format("one key of {} (nested: a.b); VALUE is JSON if it parses, else text", name),
       [name, handler](std::string_view key, std::string_view text) {
         nlohmann::json update = parse_json_flag_value(text);
         std::vector<std::string> parts = split(key, '.');
         for (auto part = parts.rbegin(); part != parts.rend(); ++part) {
           if (part->empty()) throw UsageError("{}.{}: empty key", name, key);
           update = nlohmann::json{{*part, std::move(update)}};
         }
         handler(update);
       },
       groups_.size() - 1, declared_++, name});
}

void FlagParser::add_prefix(std::string prefix, std::string help,
                            std::function<void(std::string_view, std::string_view)> handler) {
  prefixes_.push_back({std::move(prefix), std::move(help), std::move(handler), groups_.size() - 1,
                       declared_++, ""});
}

void FlagParser::alias(std::string alias, std::string name) {
  Flag* flag = find(name);
  if (flag == nullptr) throw Error("FlagParser::alias: no flag named '{}'", name);
  flag->aliases.push_back(std::move(alias));
}

void FlagParser::add_help_section(std::string title, std::string text) {
  sections_.push_back({std::move(title), std::move(text)});
}

FlagParser::Flag* FlagParser::find(std::string_view name) {
  for (auto& f : flags_) {
    if (f.name == name) return &f;
    for (const auto& a : f.aliases) {
      if (a == name) return &f;
    }
  }
  return nullptr;
}

std::vector<std::string> FlagParser::flag_names() const {
  std::vector<std::string> names;
  for (const auto& f : flags_) names.push_back(f.name);
  return names;
}

bool FlagParser::was_set(std::string_view name) const {
  return std::find(seen_.begin(), seen_.end(), name) != seen_.end();
}

void FlagParser::unknown_flag(const std::string& name) const {
  std::vector<std::string> names;
  for (const auto& f : flags_) {
    names.push_back(f.name);
    names.insert(names.end(), f.aliases.begin(), f.aliases.end());
    if (f.arity == Arity::kSwitch) names.push_back("--no-" + f.name.substr(2));
  }
  std::string suggestion;
  if (auto dot = name.find('.'); dot != std::string::npos) {
    // A misspelt family: compare "--speculative-confg." with the declared prefixes.
    std::vector<std::string> prefixes;
    for (const auto& p : prefixes_) prefixes.push_back(p.prefix);
    std::string near = closest_match(name.substr(0, dot + 1), prefixes);
    if (!near.empty()) suggestion = near + name.substr(dot + 1);
  }
  if (suggestion.empty()) suggestion = closest_match(name, names);
  throw UsageError("unknown flag '{}'{} (see `flint {} --help`)", name,
                   suggestion.empty() ? "" : fmt::format("; did you mean '{}'?", suggestion),
                   split(usage_, ' ')[0]);
}

bool FlagParser::parse(std::span<const std::string> args) {
  std::size_t next_positional = 0;
  bool only_positionals = false;
  // A flag that needs a value takes the next argument whatever it looks like, as getopt
  // does: `--text "- item"`, `--seed -1`, `--stop --`. Only the end of the line is missing.
  auto take_value = [&](std::size_t& i, const std::string& name,
                        const std::string& value_name) -> std::string {
    if (i + 1 < args.size()) return args[++i];
    throw UsageError("{} expects a value{}", name,
                     value_name.empty() ? "" : fmt::format(" ({})", value_name));
  };
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (only_positionals || !is_flag_token(arg)) {
      if (next_positional >= positionals_.size()) {
        throw UsageError("unexpected argument '{}' (usage: flint {})", arg, usage_);
      }
      *positionals_[next_positional++].out = arg;
      continue;
    }
    if (arg == "--") {
      only_positionals = true;
      continue;
    }
    if (arg == "-h" || arg == "--help") {
      std::fputs(help().c_str(), stdout);
      return false;
    }
    if (arg.starts_with("--help=")) {
      std::fputs(help_matching(std::string_view(arg).substr(7)).c_str(), stdout);
      return false;
    }
    std::string name = arg;
    std::optional<std::string> inline_value;
    if (auto eq = arg.find('='); eq != std::string::npos) {
      name = arg.substr(0, eq);
      inline_value = arg.substr(eq + 1);
    }
    // vLLM accepts underscores in flag names (--max_model_len); so do we. Keys after the
    // first '.' (--speculative-config.num_speculative_tokens) keep theirs.
    for (std::size_t k = 1; k < name.size() && name[k] != '.'; ++k) {
      if (name[k] == '_') name[k] = '-';
    }
    Flag* flag = find(name);
    if (flag == nullptr && name.size() > 2 && name[1] != '-' && !inline_value) {
      // A value attached to a two-character flag: -O3.
      Flag* short_flag = find(name.substr(0, 2));
      if (short_flag != nullptr && short_flag->arity == Arity::kOne) {
        flag = short_flag;
        inline_value = arg.substr(2);
      }
    }
    if (flag == nullptr && name.starts_with("--no-") && !inline_value) {
      Flag* positive = find("--" + name.substr(5));
      if (positive != nullptr && positive->arity == Arity::kSwitch) {
        positive->set("false");
        seen_.push_back(positive->name);
        continue;
      }
    }
    if (flag == nullptr) {
      const Prefix* prefix = nullptr;
      for (const auto& p : prefixes_) {
        if (name.size() > p.prefix.size() && name.starts_with(p.prefix)) prefix = &p;
      }
      if (prefix == nullptr) unknown_flag(name);
      std::string value = inline_value ? *inline_value : take_value(i, name, "VALUE");
      prefix->handler(std::string_view(name).substr(prefix->prefix.size()), value);
      seen_.push_back(prefix->owner.empty() ? name : prefix->owner);
      continue;
    }
    switch (flag->arity) {
      case Arity::kSwitch:
        flag->set(inline_value.value_or("true"));
        break;
      case Arity::kOne:
        flag->set(inline_value ? *inline_value : take_value(i, flag->name, flag->value_name));
        break;
      case Arity::kList: {
        std::vector<std::string> values;
        if (inline_value) {
          values.push_back(*inline_value);
        } else {
          // The first value is taken like any flag's value; later ones until the next flag.
          if (i + 1 >= args.size()) {
            throw UsageError("{} expects one or more values{}", flag->name,
                             fmt::format(" ({})", flag->value_name));
          }
          values.push_back(args[++i]);
          while (i + 1 < args.size() && !is_flag_token(args[i + 1])) values.push_back(args[++i]);
        }
        flag->set_list(std::move(values));
        break;
      }
    }
    seen_.push_back(flag->name);
  }
  for (std::size_t k = next_positional; k < positionals_.size(); ++k) {
    if (positionals_[k].required) {
      throw UsageError("missing {} (usage: flint {})", positionals_[k].name, usage_);
    }
  }
  return true;
}

std::string FlagParser::render_flag(const Flag& f) const {
  std::string left = f.name;
  for (const auto& a : f.aliases) left += ", " + a;
  if (!f.value_name.empty()) left += " " + f.value_name;
  if (f.arity == Arity::kList) left += " [...]";
  std::string text = f.help;
  if (!f.default_text.empty()) text += fmt::format(" (default: {})", f.default_text);
  if (left.size() > 28) return fmt::format("  {}\n  {:<28} {}\n", left, "", wrap(text, 31, 100));
  return fmt::format("  {:<28} {}\n", left, wrap(text, 31, 100));
}

std::string FlagParser::render_prefix(const Prefix& p) const {
  std::string left = p.prefix + "KEY VALUE";
  if (left.size() > 28) return fmt::format("  {}\n  {:<28} {}\n", left, "", wrap(p.help, 31, 100));
  return fmt::format("  {:<28} {}\n", left, wrap(p.help, 31, 100));
}

std::string FlagParser::render_group(std::size_t group) const {
  // Flags and prefixes in declaration order, so "--x.KEY VALUE" follows "--x".
  std::vector<std::pair<std::size_t, std::string>> rows;
  for (const auto& f : flags_) {
    if (f.group == group) rows.emplace_back(f.order, render_flag(f));
  }
  for (const auto& p : prefixes_) {
    if (p.group == group) rows.emplace_back(p.order, render_prefix(p));
  }
  std::sort(rows.begin(), rows.end());
  std::string out;
  for (const auto& [order, text] : rows) out += text;
  return out;
}

std::string FlagParser::help() const {
  std::string out = fmt::format("usage: flint {}\n\n{}\n", usage_, wrap(description_, 0, 90));
  if (!positionals_.empty()) {
    out += "\narguments:\n";
    for (const auto& p : positionals_) {
      out += fmt::format("  {:<28} {}\n", p.name, wrap(p.help, 31, 100));
    }
  }
  std::string ungrouped = render_group(0);
  if (!ungrouped.empty()) out += "\nflags:\n" + ungrouped;
  for (std::size_t g = 1; g < groups_.size(); ++g) {
    std::string rows = render_group(g);
    if (!rows.empty()) out += fmt::format("\n{}:\n{}", groups_[g], rows);
  }
  if (groups_.size() > 1) out += "\nhelp:\n";
  out += fmt::format("  {:<28} {}\n", "-h, --help", "show this help");
  out += fmt::format(
      "  {:<28} {}\n", "--help=WORD",
      wrap("show only the group titled WORD, or the flags whose name contains WORD", 31, 100));
  for (const auto& s : sections_) out += fmt::format("\n{}:\n{}\n", s.title, s.text);
  return out;
}

std::string FlagParser::help_matching(std::string_view keyword) const {
  std::string key = lower(keyword);
  std::replace(key.begin(), key.end(), '_', '-');
  if (key == "all") return help();
  for (std::size_t g = 1; g < groups_.size(); ++g) {
    std::string title = lower(groups_[g]);
    std::string dashed = title;
    std::replace(dashed.begin(), dashed.end(), ' ', '-');
    if (key == title || key == dashed) {
      return fmt::format("usage: flint {}\n\n{}:\n{}", usage_, groups_[g], render_group(g));
    }
  }
  std::string rows;
  for (const auto& f : flags_) {
    bool hit = f.name.find(key) != std::string::npos;
    for (const auto& a : f.aliases) hit = hit || a == key;
    if (hit) rows += render_flag(f);
  }
  for (const auto& p : prefixes_) {
    if (p.prefix.find(key) != std::string::npos) rows += render_prefix(p);
  }
  if (rows.empty()) {
    std::vector<std::string> titles(groups_.begin() + 1, groups_.end());
    return fmt::format("no group or flag matches '{}'{}; `flint {} --help` lists everything\n",
                       keyword, titles.empty() ? "" : " (groups: " + join(titles, ", ") + ")",
                       split(usage_, ' ')[0]);
  }
  return fmt::format("usage: flint {}\n\nflags matching '{}':\n{}", usage_, keyword, rows);
}

}  // namespace flint::cli
