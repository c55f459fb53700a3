// Without libFuzzer (gcc builds, sanitizer CI): run the fuzz target over the given seed files and, for each,
// a deterministic set of mutations: every truncation length class, single-bit flips across the file, and
// header/section/task fields overwritten with boundary values (checksum fixed up so the deep checks run).
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <vector>

#include "split_files.h"
#include "ssc_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

void Run(std::vector<uint8_t> bytes, bool fix_checksum) {
  // A seed may be several files back to back (the executing target's groups): re-stamp each one.
  for (const hpmoe::fuzz::FileSpan& f : hpmoe::fuzz::SplitFiles(bytes.data(), bytes.size())) {
    if (!fix_checksum || f.size < sizeof(hpmoe::ssc::SscHeader)) continue;
    uint8_t* file = bytes.data() + (f.data - bytes.data());
    const size_t off = offsetof(hpmoe::ssc::SscHeader, checksum);
    const uint32_t crc = hpmoe::ssc::Crc32(file, f.size, off);
    for (int i = 0; i < 4; ++i) file[off + i] = uint8_t(crc >> (8 * i));
  }
  LLVMFuzzerTestOneInput(bytes.data(), bytes.size());
}

}  // namespace

int main(int argc, char** argv) {
  const uint32_t boundary[] = {0u, 1u, 16u, 0x80000000u, 0xFFFFu, 0xFFFFFFFFu};
  size_t runs = 0;
  for (int a = 1; a < argc; ++a) {
    std::ifstream in(argv[a], std::ios::binary);
    const std::vector<uint8_t> seed((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (seed.empty()) {
      std::fprintf(stderr, "cannot read %s\n", argv[a]);
      return 1;
    }
    Run(seed, false);
    for (size_t cut = 0; cut < seed.size(); cut += 1 + cut / 3) Run(std::vector<uint8_t>(seed.begin(), seed.begin() + cut), true), ++runs;
    for (size_t bit = 0; bit < seed.size() * 8; bit += 509) {
      std::vector<uint8_t> b = seed;
      b[bit / 8] ^= uint8_t(1u << (bit % 8));
      Run(b, false);
      Run(b, true);
      runs += 2;
    }
    for (size_t word = 0; word + 4 <= seed.size(); word += 4 * (word < 256 ? 1 : 31)) {
      for (uint32_t v : boundary) {
        std::vector<uint8_t> b = seed;
        for (int i = 0; i < 4; ++i) b[word + i] = uint8_t(v >> (8 * i));
        Run(b, true);
        ++runs;
      }
    }
  }
  std::printf("%zu mutated SSCs loaded or refused cleanly\n", runs);
  return 0;
}
