#include "tiny_fixture.h"

#include <cstdlib>
#include <map>
#include <mutex>
#include <random>

#include <fmt/format.h>

#include "formats/checkpoint.h"
#include "model/deepseek_v4/params.h"

namespace flint::testing {

namespace {
struct Cleanup {
  std::vector<std::filesystem::path> dirs;
  ~Cleanup() {
    for (const auto& d : dirs) {
      std::error_code ec;
      std::filesystem::remove_all(d, ec);
    }
  }
};
Cleanup& cleanup() {
  static Cleanup c;
  return c;
}
}  // namespace

std::filesystem::path temp_dir(const std::string& tag) {
  static std::mt19937_64 gen(std::random_device{}());
  auto dir = std::filesystem::temp_directory_path() / fmt::format("flint-test-{}-{:x}", tag, gen());
  std::filesystem::create_directories(dir);
  cleanup().dirs.push_back(dir);
  return dir;
}

// Checkpoints are cached in the build tree across test processes (ctest runs each test in
// its own process). The cache key hashes the preset's config and the declared tensor layout,
// so a change of either makes a new checkpoint; a directory appears only once complete
// (written aside, then renamed), so concurrent test processes never see a partial one.
const std::filesystem::path& tiny_checkpoint(const std::string& preset, dsv4::ExpertDType experts) {
  static std::mutex mutex;
  static std::map<std::pair<std::string, int>, std::filesystem::path> made;
  std::lock_guard lock(mutex);
  auto key = std::make_pair(preset, static_cast<int>(experts));
  auto it = made.find(key);
  if (it != made.end()) return it->second;

  dsv4::Config config = dsv4::tiny_preset(preset);
  config.expert_dtype = experts;
  std::string layout = dsv4::config_to_json(config).dump();
  ParamRegistry registry = dsv4::declare(dsv4::Component::kTarget, config);
  for (const auto& spec : registry.params()) {
    layout += spec.name + std::string(dtype_name(spec.dtype)) + std::to_string(spec.shape.size());
    for (int64_t d : spec.shape) layout += "," + std::to_string(d);
  }
  auto dir =
      std::filesystem::path(FLINT_TEST_CACHE_DIR) /
      fmt::format("{}-{}-{:016x}", preset, experts == dsv4::ExpertDType::kFp4 ? "fp4" : "fp8",
                  std::hash<std::string>{}(layout));
  if (!std::filesystem::exists(dir / "config.json")) {
    static std::mt19937_64 gen(std::random_device{}());
    auto partial = dir.parent_path() / fmt::format(".partial-{:x}", gen());  // same file system
    dsv4::TinyCheckpointOptions options;
    options.seed = 1;
    options.expert_dtype = experts;
    dsv4::write_tiny_checkpoint(partial, config, options);
    std::error_code ec;
    std::filesystem::rename(partial, dir, ec);  // fails harmlessly if another process won
    if (ec) std::filesystem::remove_all(partial, ec);
    if (!std::filesystem::exists(dir / "config.json")) {
      throw std::runtime_error("cannot create the test checkpoint " + dir.string());
    }
  }
  return made.emplace(key, dir).first->second;
}

std::filesystem::path edited_copy(const std::filesystem::path& source, const std::string& tag,
                                  const std::function<void(std::vector<EditableTensor>&)>& edit) {
  Checkpoint checkpoint = Checkpoint::open(source);
  std::vector<EditableTensor> tensors;
  for (const auto& [name, t] : checkpoint.tensors()) {
    tensors.push_back({name, t.info->dtype, t.info->shape, {t.bytes.begin(), t.bytes.end()}});
  }
  edit(tensors);
  auto dir = temp_dir(tag);
  std::vector<TensorToWrite> out;
  for (const auto& t : tensors) out.push_back({t.name, t.dtype, t.shape, t.bytes});
  write_safetensors(dir / "model.safetensors", out);
  std::filesystem::copy_file(source / "config.json", dir / "config.json");
  return dir;
}

}  // namespace flint::testing
