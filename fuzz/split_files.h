// An executing-fuzzer input is one group's SSC files back to back, each as long as its header's file_bytes;
// a tail that is not a whole file becomes the last span as it is (so the loader sees truncations too).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "../op_kernel/ssc_layout.h"

namespace hpmoe {
namespace fuzz {

struct FileSpan {
  const uint8_t* data;
  size_t size;
};

inline std::vector<FileSpan> SplitFiles(const uint8_t* data, size_t size) {
  std::vector<FileSpan> files;
  size_t at = 0;
  while (at < size && files.size() < 8) {
    uint32_t file_bytes = 0;
    if (size - at >= sizeof(ssc::SscHeader))
      std::memcpy(&file_bytes, data + at + offsetof(ssc::SscHeader, file_bytes), 4);
    if (file_bytes < sizeof(ssc::SscHeader) || file_bytes > size - at) {
      files.push_back({data + at, size - at});
      break;
    }
    files.push_back({data + at, file_bytes});
    at += file_bytes;
  }
  return files;
}

}  // namespace fuzz
}  // namespace hpmoe
