// AIV local buffers and GM <-> UB moves of activation rows as fp32 (the vector handlers compute in fp32 and
// round once to the activation dtype with CAST_RINT: round to nearest even, as the CPU twin does).
// Rows are processed in column chunks of kVecChunk elements so any hidden size fits the 192 KiB UB.
#pragma once

#include "kernel_operator.h"

#include "kernel_context.h"

namespace hpmoe {
namespace ascend {

constexpr uint32_t kVecChunk = 2048;  // fp32 elements per vector buffer (8 KiB)
constexpr uint32_t kVecBuffers = 6;

struct VectorBuffers {
  AscendC::TBuf<AscendC::TPosition::VECCALC> raw;  // dtype bytes of one chunk (in or out)
  AscendC::TBuf<AscendC::TPosition::VECCALC> f[kVecBuffers];

  HPMOE_DEVICE void Init(AscendC::TPipe& pipe) {
    pipe.InitBuffer(raw, kVecChunk * sizeof(float));
    for (uint32_t i = 0; i < kVecBuffers; ++i) pipe.InitBuffer(f[i], kVecChunk * sizeof(float));
  }
  HPMOE_DEVICE AscendC::LocalTensor<float> F(uint32_t i) const { return f[i].Get<float>(); }
};

HPMOE_DEVICE void Barrier() { AscendC::PipeBarrier<AscendC::PIPE_ALL>(); }

HPMOE_DEVICE void GmToUb(const AscendC::LocalTensor<uint8_t>& dst, const __gm__ uint8_t* src, uint32_t bytes) {
  AscendC::GlobalTensor<uint8_t> g;
  g.SetGlobalBuffer(const_cast<__gm__ uint8_t*>(src), bytes);
  AscendC::DataCopyPad(dst, g, AscendC::DataCopyExtParams{1, bytes, 0, 0, 0},
                       AscendC::DataCopyPadExtParams<uint8_t>{});
}

HPMOE_DEVICE void UbToGm(__gm__ uint8_t* dst, const AscendC::LocalTensor<uint8_t>& src, uint32_t bytes) {
  AscendC::GlobalTensor<uint8_t> g;
  g.SetGlobalBuffer(dst, bytes);
  AscendC::DataCopyPad(g, src, AscendC::DataCopyExtParams{1, bytes, 0, 0, 0});
}

// n (<= kVecChunk) elements of `dtype` at `src` into `dst` as fp32.
HPMOE_DEVICE void LoadF32(const VectorBuffers& b, const AscendC::LocalTensor<float>& dst, const __gm__ uint8_t* src,
                          uint32_t dtype, uint32_t n) {
  if (dtype == ssc::kFP32) {
    GmToUb(dst.template ReinterpretCast<uint8_t>(), src, n * 4);
    Barrier();
    return;
  }
  AscendC::LocalTensor<uint8_t> raw = b.raw.Get<uint8_t>();
  GmToUb(raw, src, n * 2);
  Barrier();
  if (dtype == ssc::kBF16) {
    AscendC::Cast(dst, raw.ReinterpretCast<AscendC::bfloat16_t>(), AscendC::RoundMode::CAST_NONE, n);
  } else {
    AscendC::Cast(dst, raw.ReinterpretCast<AscendC::half>(), AscendC::RoundMode::CAST_NONE, n);
  }
  Barrier();
}

// n fp32 elements of `src` to `dst` in `dtype` (one rounding).
HPMOE_DEVICE void StoreF32(const VectorBuffers& b, __gm__ uint8_t* dst, const AscendC::LocalTensor<float>& src,
                           uint32_t dtype, uint32_t n) {
  Barrier();
  if (dtype == ssc::kFP32) {
    UbToGm(dst, src.template ReinterpretCast<uint8_t>(), n * 4);
    return;
  }
  AscendC::LocalTensor<uint8_t> raw = b.raw.Get<uint8_t>();
  if (dtype == ssc::kBF16) {
    AscendC::Cast(raw.ReinterpretCast<AscendC::bfloat16_t>(), src, AscendC::RoundMode::CAST_RINT, n);
  } else {
    AscendC::Cast(raw.ReinterpretCast<AscendC::half>(), src, AscendC::RoundMode::CAST_RINT, n);
  }
  Barrier();
  UbToGm(dst, raw, n * 2);
}

// A scalar the host wrote before the launch (routing plan, topk weights): a plain cached read.
template <class T>
HPMOE_DEVICE T ReadGm(const __gm__ T* p) {
  AscendC::GlobalTensor<T> g;
  g.SetGlobalBuffer(const_cast<__gm__ T*>(p));
  return g.GetValue(0);
}

}  // namespace ascend
}  // namespace hpmoe
