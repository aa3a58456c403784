#include "formats/checkpoint.h"

#include <algorithm>
#include <optional>
#include <system_error>

#include "base/error.h"
#include "base/log.h"
#include "base/mmap_file.h"
#include "formats/json_checked.h"

namespace flint {

namespace fs = std::filesystem;

namespace {

constexpr const char* kIndexName = "model.safetensors.index.json";

// The *.safetensors regular files directly in `dir`, sorted by name.
std::vector<fs::path> list_safetensors(const fs::path& dir) {
  std::vector<fs::path> files;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->path().extension() == ".safetensors" && it->is_regular_file(ec)) {
      files.push_back(it->path());
    }
  }
  if (ec) throw Error("{}: cannot list the directory: {}", dir.string(), ec.message());
  std::sort(files.begin(), files.end());
  return files;
}

// A shard named by the index must be a plain relative path inside the checkpoint.
bool is_inside(const fs::path& relative) {
  if (relative.empty() || relative.is_absolute() || relative.has_root_name()) return false;
  return std::none_of(relative.begin(), relative.end(),
                      [](const fs::path& part) { return part == ".."; });
}

struct Index {
  std::map<std::string, std::string> weight_map;             // tensor -> shard file name
  std::map<std::string, std::string> first_tensor_of_shard;  // shard -> a tensor it holds
};

Index read_index(const fs::path& path) {
  const std::string label = path.string();
  MappedFile file = MappedFile::open(path);
  const std::string_view text(reinterpret_cast<const char*>(file.bytes().data()), file.size());
  CheckedJson parsed = parse_json_checked(text, label, "the index");
  if (!parsed.value.is_object()) {
    throw Error("{}: index is {}, expected a JSON object", label, parsed.value.type_name());
  }
  const auto& dup = parsed.duplicate_path;
  if (dup.size() == 2 && dup[0] == "weight_map") {
    throw Error("{}: tensor '{}' is listed twice in weight_map", label, printable(dup[1]));
  }
  if (!dup.empty()) {
    throw Error("{}: key '{}' appears twice in one object", label, printable(dup.back()));
  }
  auto map_it = parsed.value.find("weight_map");
  if (map_it == parsed.value.end()) throw Error("{}: \"weight_map\" is missing", label);
  if (!map_it->is_object()) {
    throw Error("{}: \"weight_map\" is {}, expected an object", label, map_it->type_name());
  }
  if (map_it->empty()) throw Error("{}: \"weight_map\" is empty", label);

  Index index;
  for (const auto& [tensor, shard] : map_it->items()) {
    if (!shard.is_string()) {
      throw Error("{}: tensor '{}' maps to {}, expected a file name", label, printable(tensor),
                  shard.type_name());
    }
    const std::string& name = shard.get_ref<const std::string&>();
    if (!is_inside(fs::path(name))) {
      throw Error("{}: tensor '{}' maps to '{}', which is not a file inside the checkpoint", label,
                  printable(tensor), printable(name));
    }
    index.weight_map.emplace(tensor, name);
    index.first_tensor_of_shard.emplace(name, tensor);  // keeps the first (sorted) tensor
  }
  return index;
}

}  // namespace

Checkpoint Checkpoint::open(const fs::path& path) {
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  if (!fs::exists(status)) throw Error("{}: no such file or directory", path.string());

  Checkpoint ckpt;
  std::vector<fs::path> files;
  std::optional<Index> index;
  fs::path index_path;
  if (fs::is_directory(status)) {
    ckpt.dir_ = path;
    index_path = path / kIndexName;
    if (fs::exists(index_path, ec)) {
      index = read_index(index_path);
      for (const auto& [shard, first_tensor] : index->first_tensor_of_shard) {
        fs::path file = path / shard;
        if (!fs::is_regular_file(file, ec)) {
          throw Error("{}: shard file '{}' (holding tensor '{}') is missing", index_path.string(),
                      printable(shard), printable(first_tensor));
        }
        files.push_back(std::move(file));
      }
      for (const fs::path& present : list_safetensors(path)) {
        const std::string name = present.filename().string();
        if (!index->first_tensor_of_shard.contains(name)) {
          spdlog::warn("{}: not named in {}, ignored", present.string(), kIndexName);
        }
      }
    } else {
      files = list_safetensors(path);
      if (files.empty()) {
        throw Error("{}: no {} and no *.safetensors files in the directory", path.string(),
                    kIndexName);
      }
    }
  } else {
    ckpt.dir_ = path.has_parent_path() ? path.parent_path() : fs::path(".");
    files.push_back(path);
  }

  for (const fs::path& file : files) {
    ckpt.files_.push_back(std::make_unique<SafetensorsFile>(SafetensorsFile::open(file)));
    const SafetensorsFile& shard = *ckpt.files_.back();
    for (const TensorInfo& info : shard.tensors()) {
      CheckpointTensor tensor{&info, &shard, shard.data(info)};
      auto [it, inserted] = ckpt.tensors_.emplace(info.name, tensor);
      if (!inserted) {
        throw Error("{}: tensor '{}' is also in {}", file.string(), printable(info.name),
                    it->second.file->path().string());
      }
    }
  }

  if (index) {
    for (const auto& [tensor, shard] : index->weight_map) {
      auto it = ckpt.tensors_.find(tensor);
      if (it == ckpt.tensors_.end()) {
        throw Error("{}: tensor '{}' is mapped to {}, which does not contain it",
                    index_path.string(), printable(tensor), printable(shard));
      }
      if (it->second.file->path() != path / shard) {
        throw Error("{}: tensor '{}' is mapped to {} but found in {}", index_path.string(),
                    printable(tensor), printable(shard), it->second.file->path().string());
      }
    }
    if (ckpt.tensors_.size() > index->weight_map.size()) {
      for (const auto& [name, tensor] : ckpt.tensors_) {
        if (!index->weight_map.contains(name)) {
          spdlog::warn("{}: {} tensors of the shards are not in the index (first: '{}' in {})",
                       index_path.string(), ckpt.tensors_.size() - index->weight_map.size(),
                       printable(name), tensor.file->path().string());
          break;
        }
      }
    }
  }
  return ckpt;
}

const CheckpointTensor* Checkpoint::find(std::string_view name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

uint64_t Checkpoint::total_bytes() const {
  uint64_t total = 0;
  for (const auto& [name, tensor] : tensors_) total += tensor.info->nbytes();
  return total;
}

}  // namespace flint
