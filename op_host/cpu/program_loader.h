// Loads one rank's SSC for the CPU twin through the shared validating loader (op_host/ssc_loader.h), then
// checks what only this runtime relies on: tensor records equal to its heap layout. Any failure is one line.
#pragma once

#include <cstdint>
#include <string>

#include "../../op_kernel/cpu/heap_layout.h"
#include "../../op_kernel/runtime/program.h"
#include "../ssc_file.h"
#include "../ssc_loader.h"
#include "../ssc_reader.h"

namespace hpmoe {
namespace cpu {

// The shared loader's result; the CPU twin adds nothing of its own.
using LoadedProgram = ssc::LoadedSsc;

std::string LoadProgram(const uint8_t* data, size_t size, const ssc::SscConfig& expected, uint32_t rank,
                        uint32_t direction, const HeapLayout& layout, LoadedProgram* out);

}  // namespace cpu
}  // namespace hpmoe
