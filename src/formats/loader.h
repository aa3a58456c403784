// Loading: match a checkpoint against a component's declared parameters.
//
// Every checkpoint tensor ends up in exactly one bucket of the LoadReport: loaded, skipped
// (another component's, or unclaimed inside a lenient draft's namespace), unexpected
// (unclaimed inside a strict component's namespace), mismatched (dtype or shape), and every
// required parameter without tensors is missing. Problems are collected, not thrown one at
// a time: check_load_report() throws one flint::Error listing all of them.
//
// Weights used in place stay in the checkpoint's mmap (no copy); concatenated parameters get
// one owned buffer. With LoadOptions::read_pages the loader reads every page of the loaded
// tensors once (showing a progress bar on a terminal) so that the time and bytes/s it
// reports are the real cost of loading, and the first forward pass does not stall on disk.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "formats/checkpoint.h"
#include "formats/param_registry.h"

namespace flint {

struct LoadedParam {
  const ParamSpec* spec = nullptr;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  std::span<const std::byte> bytes;
  // E8M0 scales checked at load (LoadOptions::check_scales) and free of codes 0 and 255
  // (e8m0_codes_regular): kernels then skip their own check. False when not checked.
  bool regular_e8m0 = false;
};

// The parameters of one component, valid as long as this object (it shares the checkpoint).
class LoadedParams {
 public:
  const LoadedParam* find(std::string_view name) const;
  // The parameter `name`, which must have been declared and loaded (FLINT_CHECK).
  const LoadedParam& at(std::string_view name) const;
  // The name of the parameter whose bytes hold `p` ("" if none): for error messages about a
  // view of a parameter. Linear in the number of parameters.
  std::string name_of(const std::byte* p) const;
  size_t size() const { return params_.size(); }

 private:
  friend struct LoaderAccess;
  std::shared_ptr<const Checkpoint> checkpoint_;
  std::map<std::string, LoadedParam, std::less<>> params_;
  std::vector<std::unique_ptr<std::byte[]>> buffers_;
};

struct LoadReport {
  struct Item {
    std::string tensor;
    uint64_t bytes = 0;
    std::string detail;  // why skipped, what mismatched
  };
  std::string component;
  std::string checkpoint;
  std::vector<Item> loaded;
  std::vector<Item> skipped;
  std::vector<Item> missing;
  std::vector<Item> mismatched;
  std::vector<Item> unexpected;  // errors for strict components
  std::vector<Item> corrupt;     // e.g. NaN (0xFF) E8M0 scales
  uint64_t loaded_bytes = 0;
  uint64_t skipped_bytes = 0;
  double seconds = 0.0;
  bool pages_read = false;  // LoadOptions::read_pages: seconds measure reading the weights
  // The E8M0 scale tensors of the loaded parameters, and whether they were read for the NaN
  // check (LoadOptions::check_scales). DeepSeek-V4-Flash has 35,718 of them, 8.6 GiB.
  size_t scale_tensors = 0;
  uint64_t scale_bytes = 0;
  bool scales_checked = false;

  bool ok() const;
  // One line each: loaded (count, bytes, time, bytes/s; without read_pages, what was read:
  // nothing, or the E8M0 scales for the NaN check), skipped (count and bytes per reason).
  std::vector<std::string> summary_lines() const;
  // Every problem, one per line (empty if ok()).
  std::string problems() const;
};

struct LoadOptions {
  bool read_pages = true;  // read every loaded page once (progress bar, honest timing)
  // Reject NaN (0xFF) E8M0 scales. This reads every scale byte: nearly free when the pages
  // are read anyway, but 8.6 GiB from disk for DeepSeek-V4-Flash when they are not (inspect
  // turns it off; the report then says the scales were not checked).
  bool check_scales = true;
  bool log = true;  // summary at info level, one line per skipped tensor at debug
};

// Matches `checkpoint` against `registry`, filling `out` with what loaded. Never throws for
// problems in the checkpoint: they go into the report.
LoadReport load_params(const std::shared_ptr<const Checkpoint>& checkpoint,
                       const ParamRegistry& registry, const LoadOptions& options,
                       LoadedParams* out);

// Throws flint::Error listing every problem of `report` if it is not ok().
void check_load_report(const LoadReport& report);

// Throws flint::Error unless `path` is a checkpoint directory: a folder holding config.json
// and *.safetensors files (or model.safetensors.index.json). Commands call it before reading
// config.json, so that `flint inspect README.md` says what it expected instead of reporting
// a JSON syntax error. Reads only the directory listing.
void require_checkpoint_dir(const std::filesystem::path& path);

}  // namespace flint
