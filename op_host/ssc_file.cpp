#include "ssc_file.h"

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace hpmoe {
namespace ssc {

void AlignedBytes::Allocate(size_t bytes) {
  // Two extra words so the data can start on a 16-byte boundary whatever new[] returned.
  storage.reset(new uint64_t[bytes / 8 + 3]);
  const uintptr_t raw = reinterpret_cast<uintptr_t>(storage.get());
  data = reinterpret_cast<uint8_t*>((raw + 15) & ~uintptr_t(15));
  size = bytes;
}

std::string LoadSscFile(const std::string& path, AlignedBytes* bytes, SscView* view) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return path + ": cannot open: " + std::strerror(errno);
  std::fseek(f, 0, SEEK_END);
  const long length = std::ftell(f);
  std::fseek(f, 0, SEEK_SET);
  if (length < 0) {
    std::fclose(f);
    return path + ": cannot determine its size";
  }
  bytes->Allocate(static_cast<size_t>(length));
  const size_t got = length ? std::fread(bytes->data, 1, static_cast<size_t>(length), f) : 0;
  std::fclose(f);
  if (got != static_cast<size_t>(length)) return path + ": short read";
  const std::string error = ParseSsc(bytes->data, bytes->size, view);
  return error.empty() ? error : path + ": " + error;
}

}  // namespace ssc
}  // namespace hpmoe
