#include "formats/safetensors.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <limits>
#include <numeric>
#include <set>
#include <tuple>

#include "base/check.h"
#include "base/error.h"
#include "base/log.h"
#include "formats/json_checked.h"

namespace flint {

namespace {

using nlohmann::json;

// Real headers are a few MB (about 100 bytes per tensor); anything this large is garbage.
constexpr uint64_t kMaxHeaderBytes = uint64_t{100} << 20;

std::string known_dtypes() {
  std::string names;
  for (int i = 0; i <= static_cast<int>(DType::BOOL); ++i) {
    if (!names.empty()) names += ", ";
    names += dtype_name(static_cast<DType>(i));
  }
  return names;
}

// Reads a JSON integer that must be >= 0 and fit in int64 (dims and offsets).
bool get_count(const json& value, uint64_t& out) {
  if (!value.is_number_unsigned()) return false;  // negatives parse as signed, 1.0 as float
  out = value.get<uint64_t>();
  return out <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
}

const char* json_kind(const json& value) {
  if (value.is_number_unsigned()) return "an integer above 2^63";
  if (value.is_number_integer()) return "a negative integer";
  return value.type_name();
}

class HeaderParser {
 public:
  HeaderParser(const std::string& label, uint64_t data_size)
      : label_(label), data_size_(data_size) {}

  [[noreturn]] void fail(const std::string& tensor, const std::string& message) const {
    throw Error("{}: tensor '{}': {}", label_, printable(tensor), message);
  }

  void parse_metadata(const json& entry, std::map<std::string, std::string>& metadata) const {
    if (!entry.is_object()) {
      throw Error("{}: __metadata__ is {}, expected an object of strings", label_,
                  entry.type_name());
    }
    for (const auto& [key, value] : entry.items()) {
      if (!value.is_string()) {
        throw Error("{}: __metadata__ entry '{}' is {}, expected a string", label_, printable(key),
                    value.type_name());
      }
      metadata.emplace(key, value.get<std::string>());
    }
  }

  TensorInfo parse_tensor(const std::string& name, const json& entry) const {
    if (!entry.is_object())
      fail(name, fmt::format("entry is {}, expected an object", entry.type_name()));
    TensorInfo info;
    info.name = name;

    auto dtype_it = entry.find("dtype");
    if (dtype_it == entry.end()) fail(name, "missing \"dtype\"");
    if (!dtype_it->is_string())
      fail(name, fmt::format("\"dtype\" is {}, expected a string", dtype_it->type_name()));
    const auto& dtype_text = dtype_it->get_ref<const std::string&>();
    auto dtype = parse_dtype(dtype_text);
    if (!dtype) {
      fail(name,
           fmt::format("unknown dtype '{}' (known: {})", printable(dtype_text), known_dtypes()));
    }
    info.dtype = *dtype;

    auto shape_it = entry.find("shape");
    if (shape_it == entry.end()) fail(name, "missing \"shape\"");
    if (!shape_it->is_array())
      fail(name, fmt::format("\"shape\" is {}, expected an array", shape_it->type_name()));
    info.shape.reserve(shape_it->size());
    for (const json& dim : *shape_it) {
      uint64_t value = 0;
      if (!get_count(dim, value)) {
        fail(name, fmt::format("shape {} has a dimension that is {}, expected an integer >= 0",
                               printable(shape_it->dump()), json_kind(dim)));
      }
      info.shape.push_back(static_cast<int64_t>(value));
    }

    auto offsets_it = entry.find("data_offsets");
    if (offsets_it == entry.end()) fail(name, "missing \"data_offsets\"");
    if (!offsets_it->is_array() || offsets_it->size() != 2 ||
        !get_count((*offsets_it)[0], info.begin) || !get_count((*offsets_it)[1], info.end)) {
      fail(name, fmt::format("\"data_offsets\" is {}, expected [begin, end] with integers >= 0",
                             printable(offsets_it->dump())));
    }
    if (info.begin > info.end) {
      fail(name, fmt::format("data_offsets [{}, {}] are reversed", info.begin, info.end));
    }
    if (info.end > data_size_) {
      fail(name, fmt::format("data_offsets [{}, {}] lie outside the data section ({} bytes)",
                             info.begin, info.end, data_size_));
    }

    uint64_t expected = dtype_size(info.dtype);
    for (int64_t dim : info.shape) {
      if (__builtin_mul_overflow(expected, static_cast<uint64_t>(dim), &expected)) {
        fail(name, fmt::format("shape {} overflows 64 bits in bytes", printable(shape_it->dump())));
      }
    }
    if (expected != info.nbytes()) {
      fail(name, fmt::format("shape {} of {} needs {} bytes but data_offsets [{}, {}] hold {}",
                             printable(shape_it->dump()), dtype_name(info.dtype), expected,
                             info.begin, info.end, info.nbytes()));
    }
    return info;
  }

  // Tensors must not share bytes. Empty tensors never overlap; gaps are tolerated.
  void check_layout(const std::vector<TensorInfo>& tensors) const {
    std::vector<std::size_t> order(tensors.size());
    std::iota(order.begin(), order.end(), std::size_t{0});
    std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
      return std::tie(tensors[a].begin, tensors[a].end) <
             std::tie(tensors[b].begin, tensors[b].end);
    });
    uint64_t covered_end = 0;
    const TensorInfo* last = nullptr;  // the tensor that reaches covered_end
    for (std::size_t i : order) {
      const TensorInfo& t = tensors[i];
      if (t.nbytes() == 0) continue;
      if (last != nullptr && t.begin < covered_end) {
        fail(t.name, fmt::format("data_offsets [{}, {}] overlap tensor '{}' [{}, {}]", t.begin,
                                 t.end, printable(last->name), last->begin, last->end));
      }
      if (t.begin > covered_end) {
        spdlog::debug("{}: {} unused bytes before tensor '{}'", label_, t.begin - covered_end,
                      printable(t.name));
      }
      covered_end = t.end;
      last = &t;
    }
    if (covered_end < data_size_) {
      spdlog::debug("{}: {} unused bytes after the last tensor", label_, data_size_ - covered_end);
    }
  }

 private:
  const std::string& label_;
  uint64_t data_size_;
};

}  // namespace

uint64_t TensorInfo::numel() const {
  uint64_t n = 1;
  for (int64_t dim : shape) n *= static_cast<uint64_t>(dim);
  return n;
}

SafetensorsHeader parse_safetensors_header(std::span<const std::byte> file,
                                           const std::string& label) {
  if (file.size() < 8) {
    throw Error("{}: file is {} bytes, too short for a safetensors file (8-byte header length)",
                label, file.size());
  }
  uint64_t header_size = 0;
  for (int i = 7; i >= 0; --i)
    header_size = (header_size << 8) | std::to_integer<uint64_t>(file[i]);
  if (header_size > kMaxHeaderBytes) {
    throw Error("{}: header length {} exceeds the {} byte limit: not a safetensors file?", label,
                header_size, kMaxHeaderBytes);
  }
  if (header_size > file.size() - 8) {
    throw Error("{}: header length {} is larger than the file ({} bytes): truncated?", label,
                header_size, file.size());
  }
  const std::string_view text(reinterpret_cast<const char*>(file.data() + 8), header_size);
  CheckedJson parsed = parse_json_checked(text, label, "the header");
  if (!parsed.value.is_object()) {
    throw Error("{}: header is {}, expected a JSON object", label, parsed.value.type_name());
  }
  const auto& dup = parsed.duplicate_path;
  if (dup.size() == 1)
    throw Error("{}: tensor '{}' is named twice in the header", label, printable(dup[0]));
  if (dup.size() >= 2) {
    throw Error("{}: {} '{}': key '{}' appears twice", label,
                dup[0] == "__metadata__" ? "entry" : "tensor", printable(dup[0]),
                printable(dup.back()));
  }

  SafetensorsHeader header;
  header.data_start = 8 + header_size;
  HeaderParser parser(label, file.size() - header.data_start);
  header.tensors.reserve(parsed.root_keys.size());
  for (const std::string& key : parsed.root_keys) {
    const json& entry = parsed.value.at(key);
    if (key == "__metadata__") {
      parser.parse_metadata(entry, header.metadata);
    } else {
      header.tensors.push_back(parser.parse_tensor(key, entry));
    }
  }
  parser.check_layout(header.tensors);
  return header;
}

SafetensorsFile SafetensorsFile::open(const std::filesystem::path& path) {
  SafetensorsFile result;
  result.file_ = MappedFile::open(path);
  result.header_ = parse_safetensors_header(result.file_.bytes(), path.string());
  for (std::size_t i = 0; i < result.header_.tensors.size(); ++i) {
    result.index_.emplace(result.header_.tensors[i].name, i);
  }
  return result;
}

const TensorInfo* SafetensorsFile::find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &header_.tensors[it->second];
}

std::span<const std::byte> SafetensorsFile::data(const TensorInfo& tensor) const {
  FLINT_CHECK(tensor.begin <= tensor.end && header_.data_start + tensor.end <= file_.size(),
              "tensor '{}' is not from {}", tensor.name, path().string());
  return file_.bytes().subspan(header_.data_start + tensor.begin, tensor.nbytes());
}

void write_safetensors(const std::filesystem::path& path, std::span<const TensorToWrite> tensors,
                       const std::map<std::string, std::string>& metadata) {
  const std::string label = path.string();
  std::set<std::string_view> names;
  for (const TensorToWrite& t : tensors) {
    if (t.name == "__metadata__") throw Error("{}: '__metadata__' cannot name a tensor", label);
    if (!names.insert(t.name).second) throw Error("{}: tensor '{}' given twice", label, t.name);
    uint64_t expected = dtype_size(t.dtype);
    for (int64_t dim : t.shape) {
      if (dim < 0 || __builtin_mul_overflow(expected, static_cast<uint64_t>(dim), &expected)) {
        throw Error("{}: tensor '{}': invalid shape", label, t.name);
      }
    }
    if (expected != t.bytes.size()) {
      throw Error("{}: tensor '{}': {} bytes given, its shape and dtype need {}", label, t.name,
                  t.bytes.size(), expected);
    }
  }

  // Largest elements first keeps every tensor aligned to its element size (the data
  // section starts 8-aligned), as the reference writer does.
  std::vector<const TensorToWrite*> order;
  for (const TensorToWrite& t : tensors) order.push_back(&t);
  std::stable_sort(order.begin(), order.end(), [](const TensorToWrite* a, const TensorToWrite* b) {
    return dtype_size(a->dtype) > dtype_size(b->dtype);
  });

  std::string header = "{";
  if (!metadata.empty()) header += "\"__metadata__\":" + json(metadata).dump();
  uint64_t offset = 0;
  for (const TensorToWrite* t : order) {
    if (header.size() > 1) header += ",";
    header += fmt::format("{}:{{\"dtype\":\"{}\",\"shape\":{},\"data_offsets\":[{},{}]}}",
                          json(t->name).dump(), dtype_name(t->dtype), json(t->shape).dump(), offset,
                          offset + t->bytes.size());
    offset += t->bytes.size();
  }
  header += "}";
  header.append((8 - header.size() % 8) % 8, ' ');

  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw Error("cannot create {}: {}", label, std::strerror(errno));
  char length[8];
  for (int i = 0; i < 8; ++i) length[i] = static_cast<char>((header.size() >> (8 * i)) & 0xFF);
  out.write(length, 8);
  out.write(header.data(), static_cast<std::streamsize>(header.size()));
  for (const TensorToWrite* t : order) {
    out.write(reinterpret_cast<const char*>(t->bytes.data()),
              static_cast<std::streamsize>(t->bytes.size()));
  }
  out.close();
  if (!out) throw Error("cannot write {}: {}", label, std::strerror(errno));
}

}  // namespace flint
