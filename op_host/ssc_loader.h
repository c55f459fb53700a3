// The one validating SSC loader every backend's host side uses (CPU twin, AscendC, CUDA): nothing executes a
// file this has not accepted. LoadSsc checks one rank's file on its own (format, config, rank, direction,
// every region, queue and event); ValidateGroup adds what needs every rank's file of one direction (each
// threshold equals the triggers counted across the group). Backends add only their own binding checks
// (e.g. the CPU twin's heap layout). Every failure is one line naming rank, task, field and value.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "../op_kernel/runtime/program.h"
#include "ssc_file.h"
#include "ssc_reader.h"

namespace hpmoe {
namespace ssc {

// What the launcher was asked to run; the file must agree with every field.
struct LoadExpect {
  const SscConfig* config = nullptr;  // nullptr: accept the file's own config (tools)
  uint32_t rank = 0;
  uint32_t direction = 0;             // Direction
  uint32_t counter_capacity = 0;      // counters the backend reserves per rank and direction; 0 = no limit
  bool from_file = false;             // tools: take rank and direction from the file's own header
};

struct LoadedSsc {
  AlignedBytes bytes;  // owns the file image the view and program point into
  SscView view;
  rt::SscProgram program{};
  bool loaded = false;
};

// Copies `data` into an aligned buffer, parses and validates it. Returns "" or one line.
std::string LoadSsc(const uint8_t* data, size_t size, const LoadExpect& expect, LoadedSsc* out);

// Checks a whole EP group's files of one direction, loaded with LoadSsc: ranks[r] is rank r's file, all
// with one config. Every threshold must equal the triggers counted across the group, and an event's remote
// flag must say whether another rank triggers it. Returns "" or one line.
std::string ValidateGroup(const LoadedSsc* const* ranks, uint32_t num_ranks);

}  // namespace ssc
}  // namespace hpmoe
