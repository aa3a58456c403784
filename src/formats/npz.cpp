#include "formats/npz.h"

#include <array>
#include <cstring>
#include <fstream>

#include "base/error.h"

namespace flint {

namespace {

uint32_t crc32(const std::string& bytes) {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  uint32_t c = 0xFFFFFFFFu;
  for (unsigned char b : bytes) c = table[(c ^ b) & 0xFF] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

void put16(std::string& s, uint32_t v) {
  s.push_back(static_cast<char>(v & 0xFF));
  s.push_back(static_cast<char>((v >> 8) & 0xFF));
}
void put32(std::string& s, uint32_t v) {
  put16(s, v & 0xFFFF);
  put16(s, v >> 16);
}

}  // namespace

void write_npz_f32(const std::filesystem::path& path, const std::vector<NpzEntry>& entries) {
  std::string archive, directory;
  for (const auto& e : entries) {
    std::string member = npy_f32_header(e.array.shape);
    size_t header = member.size();
    member.resize(header + e.array.data.size() * sizeof(float));
    std::memcpy(member.data() + header, e.array.data.data(), e.array.data.size() * sizeof(float));
    const std::string name = e.name + ".npy";
    if (archive.size() + member.size() + name.size() + 64 > 0xFFFFFFFFull) {
      throw Error("{}: the dump exceeds 4 GiB, which .npz without zip64 cannot hold",
                  path.string());
    }
    const uint32_t crc = crc32(member), size = static_cast<uint32_t>(member.size());
    const uint32_t offset = static_cast<uint32_t>(archive.size());
    // Local file header: stored (method 0), no data descriptor.
    put32(archive, 0x04034b50);
    put16(archive, 20);
    put16(archive, 0);
    put16(archive, 0);
    put16(archive, 0);
    put16(archive, 0);
    put32(archive, crc);
    put32(archive, size);
    put32(archive, size);
    put16(archive, static_cast<uint32_t>(name.size()));
    put16(archive, 0);
    archive += name;
    archive += member;
    // Central directory entry.
    put32(directory, 0x02014b50);
    put16(directory, 20);
    put16(directory, 20);
    put16(directory, 0);
    put16(directory, 0);
    put16(directory, 0);
    put16(directory, 0);
    put32(directory, crc);
    put32(directory, size);
    put32(directory, size);
    put16(directory, static_cast<uint32_t>(name.size()));
    put16(directory, 0);
    put16(directory, 0);
    put16(directory, 0);
    put16(directory, 0);
    put32(directory, 0);
    put32(directory, offset);
    directory += name;
  }
  const uint32_t directory_offset = static_cast<uint32_t>(archive.size());
  archive += directory;
  put32(archive, 0x06054b50);
  put16(archive, 0);
  put16(archive, 0);
  put16(archive, static_cast<uint32_t>(entries.size()));
  put16(archive, static_cast<uint32_t>(entries.size()));
  put32(archive, static_cast<uint32_t>(directory.size()));
  put32(archive, directory_offset);
  put16(archive, 0);
  std::ofstream out(path, std::ios::binary);
  out.write(archive.data(), static_cast<std::streamsize>(archive.size()));
  if (!out) throw Error("cannot write {}", path.string());
}

}  // namespace flint
