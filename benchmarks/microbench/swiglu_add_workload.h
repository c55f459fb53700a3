// The taskified SwiGLU + Add workload of the paper's section 6, as SSC records in memory, on one CPU-twin
// rank (LocalRank): H [M x 2I] (gate | up) -> SwiGLU -> A [M x I]; Y = A + X with X [M x I]; I = 2048.
// Tiles of T rows (the last one may be shorter): SwiGLU tile i triggers event i (threshold 1), Add tile i
// waits on it. Tasks 0..n-1 are the SwiGLU tiles, n..2n-1 the Add tiles; tile i belongs to worker i mod K.
// Two static programs over the same tasks and events differ only in queue order:
//   serial:      worker w runs all its SwiGLU tiles, then all its Add tiles;
//   interleaved: worker w runs S_i, A_i, S_{i+K}, A_{i+K}, ...
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "../../op_host/cpu/local_rank.h"
#include "../../op_kernel/runtime/program.h"

namespace hpmoe {
namespace microbench {

constexpr uint32_t kInter = 2048;  // SwiGLU output width (input 2 * kInter), Add width

enum Order : uint32_t { kSerial = 0, kInterleaved = 1 };

struct WorkloadShape {
  uint64_t rows;       // M
  uint32_t tile_rows;  // T
  uint32_t dtype;      // ssc::kFP32 or ssc::kBF16 (or kFP16)
  uint32_t workers;    // K
  uint64_t seed;
  uint64_t timeout_ms;
};

class SwigluAddWorkload {
 public:
  static std::unique_ptr<SwigluAddWorkload> Create(const WorkloadShape& shape, std::string* error);

  rt::SscProgram& program(Order order) { return programs_[order]; }
  cpu::LocalRank& rank() { return *rank_; }
  uint32_t num_tiles() const { return num_tiles_; }
  uint32_t num_tasks() const { return 2 * num_tiles_; }
  uint64_t intermediate_bytes() const;  // A: the SwiGLU -> Add tensor
  uint64_t total_bytes() const;         // H + A + X + Y

  void FillInputs();     // deterministic in (seed, index): H in [-4, 4), X in [-1, 1), rounded to the dtype
  void PoisonOutputs();  // A and Y to all-ones bytes (NaN in every float dtype) before a checked run
  uint64_t OutputHash() const;  // of A then Y
  // Writes <prefix>h.bin and <prefix>x.bin (with_inputs) and <prefix>y.<tag>.bin, raw little-endian storage.
  std::string Dump(const std::string& prefix, const std::string& tag, bool with_inputs) const;

 private:
  SwigluAddWorkload() = default;
  WorkloadShape shape_{};
  uint32_t num_tiles_ = 0;
  std::unique_ptr<cpu::LocalRank> rank_;
  std::vector<ssc::SscTask> tasks_;
  std::vector<ssc::SscEvent> events_;
  std::vector<ssc::SscQueue> queues_[2];
  std::vector<uint32_t> entries_[2];
  rt::SscProgram programs_[2];
};

}  // namespace microbench
}  // namespace hpmoe
