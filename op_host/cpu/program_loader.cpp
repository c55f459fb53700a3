#include "program_loader.h"
#include "../one_line.h"

#include <cstdio>
#include <cstring>

namespace hpmoe {
namespace cpu {
namespace {

const char* kDirNames[2] = {"fwd", "bwd"};

std::string CheckTensors(const ssc::SscView& v, const HeapLayout& layout) {
  for (uint32_t i = 0; i < v.num_tensors; ++i) {
    const ssc::SscTensor& t = v.tensors[i];
    const SlotShape& want = layout.slots[t.slot];
    bool same = t.ndim == want.ndim && t.dtype == want.dtype && t.bytes == want.bytes;
    for (uint32_t d = 0; same && d < t.ndim; ++d) same = t.dims[d] == want.dims[d];
    if (!same)
      return Format("tensor %s has shape/dtype/bytes that do not match the config (%llu bytes, expected %llu)",
                    ssc::SlotName(t.slot), (unsigned long long)t.bytes, (unsigned long long)want.bytes);
  }
  return "";
}

}  // namespace

std::string LoadProgram(const uint8_t* data, size_t size, const ssc::SscConfig& expected, uint32_t rank,
                        uint32_t direction, const HeapLayout& layout, LoadedProgram* out) {
  ssc::LoadExpect expect;
  expect.config = &expected;
  expect.rank = rank;
  expect.direction = direction;
  expect.counter_capacity = layout.counter_capacity[direction];
  std::string err = ssc::LoadSsc(data, size, expect, out);
  if (!err.empty()) return err;
  err = CheckTensors(out->view, layout);
  if (err.empty()) return "";
  out->loaded = false;
  return Format("rank %u %s SSC: %s", rank, kDirNames[direction & 1], err.c_str());
}

}  // namespace cpu
}  // namespace hpmoe
