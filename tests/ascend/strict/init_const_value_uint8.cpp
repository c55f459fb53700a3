// Deliberately broken (ctest ascend_strict_rejects_init_const_value_uint8): the pre-issue-18 zero block
// used InitConstValue<uint8_t>, a type InitConstValue is not documented for.
#include "kernel_operator.h"

extern "C" __global__ __aicore__ void broken() {
  AscendC::TPipe pipe;
  AscendC::TBuf<AscendC::TPosition::A1> zeros;
  pipe.InitBuffer(zeros, 4096);
  AscendC::LocalTensor<uint8_t> z = zeros.Get<uint8_t>();
  AscendC::InitConstValue(z, AscendC::InitConstValueParams<uint8_t>{1, 128, 0, 0});
}
