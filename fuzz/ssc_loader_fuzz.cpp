// Fuzz target over the CPU twin's SSC loader (ParseSsc + the runtime's own checks). Any input must give
// either a loaded program or a one-line error: no crash, no sanitizer report, no multi-line message.
// Two expectations per input: the config the file claims (reaches the deeper checks) and a fixed one.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "program_loader.h"

namespace {

void LoadOnce(const uint8_t* data, size_t size, const hpmoe::ssc::SscConfig& cfg, uint32_t rank, uint32_t dir) {
  hpmoe::cpu::HeapLayout layout;
  if (!hpmoe::cpu::ComputeHeapLayout(cfg, 1u << 12, 1u << 12, &layout).empty()) return;
  hpmoe::cpu::LoadedProgram program;
  const std::string err = hpmoe::cpu::LoadProgram(data, size, cfg, rank, dir, layout, &program);
  if (err.find('\n') != std::string::npos || (err.empty() != program.loaded)) std::abort();
  if (program.loaded) {  // touch every queue entry the way a worker would
    const hpmoe::rt::SscProgram& p = program.program;
    uint64_t sum = 0;
    for (uint32_t q = 0; q < p.num_queues; ++q)
      for (uint32_t k = 0; k < p.queues[q].count; ++k) sum += p.tasks[p.entries[p.queues[q].first_entry + k]].task_type;
    if (sum == ~uint64_t(0)) std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  hpmoe::ssc::SscConfig small = {2, 64, 64, 32, 2, 2, 0, 16, 80, 16, 16, 2, 4, 3, {0, 0}};
  LoadOnce(data, size, small, 0, 0);
  if (size >= sizeof(hpmoe::ssc::SscHeader)) {
    // Most random mutations die at the checksum; a copy with the checksum fixed reaches the record checks.
    std::vector<uint8_t> fixed(data, data + size);
    const size_t off = offsetof(hpmoe::ssc::SscHeader, checksum);
    const uint32_t crc = hpmoe::ssc::Crc32(fixed.data(), size, off);
    std::memcpy(fixed.data() + off, &crc, 4);
    hpmoe::ssc::SscHeader h;
    std::memcpy(&h, data, sizeof h);
    LoadOnce(fixed.data(), size, small, 0, 0);
    if (h.config.ep != 0 && h.config.ep < 4096 && uint64_t(h.config.recv_rows_per_src) * h.config.ep < (1u << 24))
      LoadOnce(fixed.data(), size, h.config, h.rank % h.config.ep, h.direction & 1u);
  }
  return 0;
}
