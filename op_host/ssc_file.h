// Loads an SSC file into a 16-byte aligned buffer and parses it (host tools and tests).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "ssc_reader.h"

namespace hpmoe {
namespace ssc {

struct AlignedBytes {
  std::unique_ptr<uint64_t[]> storage;  // uint64_t[] gives at least 8-byte alignment; see Allocate
  uint8_t* data = nullptr;
  size_t size = 0;
  void Allocate(size_t bytes);
};

// Reads `path` and parses it; returns "" or a one-line error that starts with the path.
std::string LoadSscFile(const std::string& path, AlignedBytes* bytes, SscView* view);

}  // namespace ssc
}  // namespace hpmoe
