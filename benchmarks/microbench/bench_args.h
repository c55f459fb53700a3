// Command line of hpmoe_microbench_swiglu_add. Bad input is one line on stderr and exit status 2.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace hpmoe {
namespace microbench {

struct BenchArgs {
  std::vector<uint64_t> rows = {2048, 8192, 32768};
  uint32_t tile_rows = 32;
  uint32_t workers = 2;
  uint32_t dtype = 0;  // ssc::kFP32
  std::vector<std::string> modes;  // empty: all
  uint32_t repeats = 7;
  uint32_t warmup = 2;
  uint64_t seed = 0;
  uint64_t timeout_ms = 60000;
  bool llc = false;
  bool json = false;
  std::string dump_dir;
};

// Returns "" and fills *out, "help" after printing usage, or a one-line error.
std::string ParseArgs(int argc, char** argv, BenchArgs* out);
const char* DtypeName(uint32_t dtype);
extern const char* const kProgramName;

}  // namespace microbench
}  // namespace hpmoe
