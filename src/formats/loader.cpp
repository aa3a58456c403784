#include "formats/loader.h"

#include <cstring>
#include <numeric>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "base/check.h"
#include "base/error.h"
#include "base/log.h"
#include "base/progress.h"
#include "base/strings.h"
#include "base/timer.h"
#include "formats/e8m0.h"

namespace flint {

struct LoaderAccess {
  static void bind(LoadedParams& out, const std::shared_ptr<const Checkpoint>& checkpoint) {
    out.checkpoint_ = checkpoint;
    out.params_.clear();
    out.buffers_.clear();
  }
  static void add(LoadedParams& out, LoadedParam param) {
    std::string name = param.spec->name;
    out.params_.emplace(std::move(name), std::move(param));
  }
  static std::byte* buffer(LoadedParams& out, size_t bytes) {
    out.buffers_.push_back(std::make_unique<std::byte[]>(bytes));
    return out.buffers_.back().get();
  }
};

const LoadedParam* LoadedParams::find(std::string_view name) const {
  auto it = params_.find(name);
  return it == params_.end() ? nullptr : &it->second;
}

std::string LoadedParams::name_of(const std::byte* p) const {
  for (const auto& [name, param] : params_) {
    if (p >= param.bytes.data() && p < param.bytes.data() + param.bytes.size()) return name;
  }
  return {};
}

const LoadedParam& LoadedParams::at(std::string_view name) const {
  const LoadedParam* p = find(name);
  FLINT_CHECK(p != nullptr, "parameter {} was not loaded", name);
  return *p;
}

namespace {

std::string shape_text(const std::vector<int64_t>& shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

// Checks one parameter's source tensors; returns an empty string if they fit, else why not.
std::string check_sources(const ParamSpec& spec,
                          const std::vector<const CheckpointTensor*>& sources) {
  int64_t rows = 0;
  for (const auto* t : sources) {
    if (t->info->dtype != spec.dtype) {
      return fmt::format("{}: dtype {} but expected {}", t->info->name, dtype_name(t->info->dtype),
                         dtype_name(spec.dtype));
    }
  }
  if (sources.size() == 1) {
    if (sources[0]->info->shape != spec.shape) {
      return fmt::format("{}: shape {} but expected {}", sources[0]->info->name,
                         shape_text(sources[0]->info->shape), shape_text(spec.shape));
    }
    return {};
  }
  for (const auto* t : sources) {
    const auto& shape = t->info->shape;
    if (shape.empty() || shape.size() != spec.shape.size() ||
        !std::equal(shape.begin() + 1, shape.end(), spec.shape.begin() + 1)) {
      return fmt::format("{}: shape {} cannot be stacked into {} {}", t->info->name,
                         shape_text(shape), spec.name, shape_text(spec.shape));
    }
    rows += shape[0];
  }
  if (spec.shape.empty() || rows != spec.shape[0]) {
    return fmt::format("{}: sources stack to {} rows but expected shape {}", spec.name, rows,
                       shape_text(spec.shape));
  }
  return {};
}

}  // namespace

bool LoadReport::ok() const {
  return missing.empty() && mismatched.empty() && unexpected.empty() && corrupt.empty();
}

std::vector<std::string> LoadReport::summary_lines() const {
  std::vector<std::string> lines;
  double rate = seconds > 0 ? static_cast<double>(loaded_bytes) / seconds : 0.0;
  if (pages_read) {
    lines.push_back(fmt::format("{}: loaded {} tensors ({}) in {:.2f} s ({}/s)", component,
                                loaded.size(), format_bytes(static_cast<double>(loaded_bytes)),
                                seconds, format_bytes(rate)));
  } else {
    std::string scales;
    if (scale_tensors > 0) {
      std::string size = format_bytes(static_cast<double>(scale_bytes));
      scales = scales_checked
                   ? fmt::format(" except the {} E8M0 scale tensors ({}), checked for NaN",
                                 scale_tensors, size)
                   : fmt::format("; the {} E8M0 scale tensors ({}) not checked for NaN",
                                 scale_tensors, size);
    }
    lines.push_back(fmt::format("{}: matched {} tensors ({}); weights not read{}", component,
                                loaded.size(), format_bytes(static_cast<double>(loaded_bytes)),
                                scales));
  }
  // Skipped tensors grouped by reason, so a draft that skips 2,000 target tensors says so in
  // one line instead of 2,000.
  std::map<std::string, std::pair<size_t, uint64_t>> by_reason;
  for (const auto& item : skipped) {
    auto& [count, bytes] = by_reason[item.detail];
    ++count;
    bytes += item.bytes;
  }
  for (const auto& [reason, stats] : by_reason) {
    lines.push_back(fmt::format("{}: skipped {} tensors ({}): {}", component, stats.first,
                                format_bytes(static_cast<double>(stats.second)), reason));
  }
  if (!ok()) {
    lines.push_back(fmt::format("{}: {} missing, {} mismatched, {} unexpected, {} corrupt",
                                component, missing.size(), mismatched.size(), unexpected.size(),
                                corrupt.size()));
  }
  return lines;
}

std::string LoadReport::problems() const {
  std::string out;
  for (const auto& m : missing)
    out +=
        fmt::format("  missing: {}{}\n", m.tensor, m.detail.empty() ? "" : " (" + m.detail + ")");
  for (const auto& m : mismatched) out += fmt::format("  mismatch: {}\n", m.detail);
  for (const auto& u : unexpected)
    out += fmt::format("  unexpected: {} ({})\n", u.tensor, u.detail);
  for (const auto& c : corrupt) out += fmt::format("  corrupt: {}\n", c.detail);
  return out;
}

void check_load_report(const LoadReport& report) {
  if (report.ok()) return;
  size_t count = report.missing.size() + report.mismatched.size() + report.unexpected.size() +
                 report.corrupt.size();
  throw Error("{}: cannot load the {} from this checkpoint: {} problem{}:\n{}", report.checkpoint,
              report.component, count, count == 1 ? "" : "s", report.problems());
}

void require_checkpoint_dir(const std::filesystem::path& path) {
  namespace fs = std::filesystem;
  constexpr std::string_view kExpected =
      "expected a folder with config.json and *.safetensors, as downloaded from Hugging Face";
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  if (!fs::exists(status)) throw Error("{}: no such file or directory", path.string());
  if (!fs::is_directory(status)) {
    throw Error("{} is not a checkpoint directory ({})", path.string(), kExpected);
  }
  if (!fs::is_regular_file(path / "config.json", ec)) {
    throw Error("{} is not a checkpoint directory: it has no config.json ({})", path.string(),
                kExpected);
  }
  bool weights = fs::exists(path / "model.safetensors.index.json", ec);
  for (fs::directory_iterator it(path, ec), end; !weights && !ec && it != end; it.increment(ec)) {
    weights = it->path().extension() == ".safetensors";
  }
  if (!weights) {
    throw Error("{} is not a checkpoint directory: it has no *.safetensors files ({})",
                path.string(), kExpected);
  }
}

LoadReport load_params(const std::shared_ptr<const Checkpoint>& checkpoint,
                       const ParamRegistry& registry, const LoadOptions& options,
                       LoadedParams* out) {
  FLINT_CHECK(checkpoint != nullptr && out != nullptr);
  Stopwatch watch;
  const ComponentScope& scope = registry.scope();
  LoadReport report;
  report.component = scope.component;
  report.checkpoint = checkpoint->dir().string();
  LoaderAccess::bind(*out, checkpoint);

  // 1. Every declared parameter: find its sources, check them, bind a view or a copy.
  std::vector<std::pair<const ParamSpec*, std::vector<const CheckpointTensor*>>> bound;
  for (const ParamSpec& spec : registry.params()) {
    std::vector<const CheckpointTensor*> sources;
    std::vector<std::string> absent;
    for (const auto& name : spec.sources) {
      const CheckpointTensor* t = checkpoint->find(name);
      if (t == nullptr)
        absent.push_back(name);
      else
        sources.push_back(t);
    }
    if (!absent.empty()) {
      if (!spec.optional || absent.size() != spec.sources.size()) {
        std::string detail = spec.sources.size() > 1 ? fmt::format("part of {}", spec.name) : "";
        if (!spec.owner.empty())
          detail = fmt::format("owned by the {}, needed by the {}", spec.owner, scope.component);
        for (const auto& name : absent) report.missing.push_back({name, 0, detail});
      }
      continue;
    }
    if (std::string why = check_sources(spec, sources); !why.empty()) {
      report.mismatched.push_back({spec.name, 0, why});
      continue;
    }
    bound.emplace_back(&spec, std::move(sources));
  }

  // 2. Every checkpoint tensor nobody claimed: skipped or unexpected.
  for (const auto& [name, tensor] : checkpoint->tensors()) {
    if (registry.claimant(name) != nullptr) continue;
    uint64_t bytes = tensor.info->nbytes();
    if (scope.owns(name) && scope.unexpected_is_error) {
      report.unexpected.push_back(
          {name, bytes, fmt::format("no {} parameter uses it", scope.component)});
      continue;
    }
    std::string why =
        scope.owns(name)
            ? fmt::format("in the {}'s namespace but not used by it", scope.component)
            : fmt::format("not owned by the {}{}", scope.component,
                          scope.foreign_note.empty() ? "" : " (" + scope.foreign_note + ")");
    report.skipped.push_back({name, bytes, std::move(why)});
    report.skipped_bytes += bytes;
  }

  // 3. Bind views (or copies for stacked parameters) and read the pages once.
  uint64_t total = 0;
  for (const auto& [spec, sources] : bound) {
    for (const auto* t : sources) total += t->info->nbytes();
  }
  ProgressBar progress(fmt::format("loading {}", scope.component), total);
  uint64_t done = 0;
  volatile uint8_t sink = 0;
  for (const auto& [spec, sources] : bound) {
    LoadedParam param;
    param.spec = spec;
    param.dtype = spec->dtype;
    param.shape = spec->shape;
    uint64_t bytes = 0;
    for (const auto* t : sources) bytes += t->info->nbytes();
    if (sources.size() == 1) {
      param.bytes = sources[0]->bytes;
    } else {
      std::byte* buffer = LoaderAccess::buffer(*out, bytes);
      uint64_t offset = 0;
      for (const auto* t : sources) {
        std::memcpy(buffer + offset, t->bytes.data(), t->bytes.size());
        offset += t->bytes.size();
      }
      param.bytes = {buffer, bytes};
    }
    if (options.read_pages) {
      uint8_t acc = 0;
      for (const auto* t : sources) {
        const auto* p = reinterpret_cast<const uint8_t*>(t->bytes.data());
        for (size_t i = 0; i < t->bytes.size(); i += 4096) acc ^= p[i];
        done += t->bytes.size();
        progress.update(done);
      }
      sink = sink ^ acc;
    }
    if (spec->dtype == DType::F8_E8M0) {
      report.scale_tensors += sources.size();
      report.scale_bytes += bytes;
    }
    if (options.check_scales && spec->dtype == DType::F8_E8M0) {
      const auto* p = reinterpret_cast<const uint8_t*>(param.bytes.data());
      param.regular_e8m0 = e8m0_codes_regular(p, param.bytes.size());
      for (size_t i = 0; !param.regular_e8m0 && i < param.bytes.size(); ++i) {
        if (p[i] == 0xFF) {
          report.corrupt.push_back(
              {spec->name, bytes, fmt::format("{}: E8M0 scale {} is 0xFF (NaN)", spec->name, i)});
          break;
        }
      }
    }
    report.loaded.push_back({spec->name, bytes, {}});
    report.loaded_bytes += bytes;
    LoaderAccess::add(*out, std::move(param));
  }
  progress.finish();
  report.seconds = watch.seconds();
  report.pages_read = options.read_pages;
  report.scales_checked = options.check_scales;

  if (options.log) {
    for (const auto& line : report.summary_lines()) spdlog::info("{}", line);
    for (const auto& item : report.skipped) {
      spdlog::debug("{}: skipped {} ({}): {}", scope.component, item.tensor,
                    format_bytes(static_cast<double>(item.bytes)), item.detail);
    }
  }
  return report;
}

}  // namespace flint
