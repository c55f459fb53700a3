// Loads one rank's SSC for the CPU twin: ParseSsc (header, checksum, config sanity, every index and region),
// then what this runtime additionally relies on: the config, rank and direction it was launched with, tensor
// records equal to the heap layout, event ids inside the reserved counters, each task in exactly one queue,
// and put triggers addressed to the rank that receives the payload. Any failure is one line.
#pragma once

#include <cstdint>
#include <string>

#include "../../op_kernel/cpu/heap_layout.h"
#include "../../op_kernel/runtime/program.h"
#include "../ssc_file.h"
#include "../ssc_reader.h"

namespace hpmoe {
namespace cpu {

struct LoadedProgram {
  ssc::AlignedBytes bytes;  // owns the file image the view and program point into
  ssc::SscView view;
  rt::SscProgram program{};
  bool loaded = false;
};

std::string LoadProgram(const uint8_t* data, size_t size, const ssc::SscConfig& expected, uint32_t rank,
                        uint32_t direction, const HeapLayout& layout, LoadedProgram* out);

}  // namespace cpu
}  // namespace hpmoe
