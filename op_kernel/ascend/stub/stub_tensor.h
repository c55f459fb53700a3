// Project-written AscendC stub: element types, GlobalTensor, LocalTensor, TPipe/TBuf.
// Doc pages (asc-devkit, docs/zh/api/...): GlobalTensor.md (SetGlobalBuffer, GetValue, SetValue,
// operator[]), LocalTensor.md (GetValue, SetValue, ReinterpretCast, operator[]), TPipe.md (InitBuffer),
// TBuf.md (Get, GetWithOffset), 数据类型/half.md, bfloat16_t.md.
// Local memory is real: each core thread owns an arena of the size of its UB (AIV, 192 KiB on A2/A3) or L1
// (AIC, 512 KiB); InitBuffer past it stops the process, as a UB overflow would fault on hardware.
#pragma once

#include <cstdint>
#include <cstring>

#include "../../cpu/dtype.h"
#include "stub_core.h"
#include "stub_pipe.h"

namespace AscendC {

// 16-bit floating types as their bits; conversions round to nearest even (the Cast stub's CAST_RINT).
struct half {
  uint16_t bits;
};
struct bfloat16_t {
  uint16_t bits;
};

enum class TPosition : int32_t { GM, A1, A2, B1, B2, C1, CO1, CO2, VECIN, VECOUT, VECCALC };
enum class HardEvent : int32_t { MTE2_V, V_MTE3, MTE3_V, MTE2_S, S_MTE2, S_MTE3, MTE3_S, MTE3_MTE2, S_V, V_S,
                                 MTE2_MTE3 };

namespace stub {
// Where a position lives (TPosition.md): VECIN/VECOUT/VECCALC in the AIV's UB, A1/B1/C1 in the AIC's L1,
// A2/B2 in L0A/L0B, CO1 in L0C.
constexpr bool IsUb(TPosition p) { return p == TPosition::VECIN || p == TPosition::VECOUT || p == TPosition::VECCALC; }
constexpr bool IsL1(TPosition p) { return p == TPosition::A1 || p == TPosition::B1 || p == TPosition::C1; }
// Declared only: a call emitted in the other core's build fails it (HPMOE_STUB_AIV_ONLY / AIC_ONLY).
HPMOE_STUB_AIV_ONLY("a UB buffer (VECIN/VECOUT/VECCALC)") void UbBufferOnThisCore();
HPMOE_STUB_AIC_ONLY("an L1/L0 buffer (A1/B1/C1/A2/B2/CO1)") void CubeBufferOnThisCore();
#if !defined(HPMOE_STUB_CORE_AIC)
inline void UbBufferOnThisCore() {
  if (Core().core_type != AIV) Fail("a UB buffer (VECIN/VECOUT/VECCALC) on an AIC: the cube core has no UB");
}
#endif
#if !defined(HPMOE_STUB_CORE_AIV)
inline void CubeBufferOnThisCore() {
  if (Core().core_type != AIC) Fail("an L1/L0 buffer (A1/B1/C1/A2/B2/CO1) on an AIV: the vector core has none");
}
#endif
}  // namespace stub

template <class T>
class GlobalTensor {
 public:
  void SetGlobalBuffer(__gm__ T* buffer, uint64_t size = 0) {
    address_ = buffer;
    size_ = size;
  }
  __gm__ T* GetPhyAddr() const { return address_; }
  __gm__ T* GetPhyAddr(uint64_t offset) const { return address_ + offset; }
  uint64_t GetSize() const { return size_; }
  // Scalar access goes through the core's data cache on hardware (see DataCacheCleanAndInvalid).
  T GetValue(uint64_t offset) const {
    CheckBounds(offset, "GlobalTensor::GetValue");
    stub::Log(stub::Op::kGmRead, 0, stub::Host(address_ + offset), sizeof(T));
    T v;
    std::memcpy(&v, stub::Host(address_ + offset), sizeof(T));
    return v;
  }
  void SetValue(uint64_t offset, T value) {
    CheckBounds(offset, "GlobalTensor::SetValue");
    stub::Log(stub::Op::kGmWrite, 0, stub::Host(address_ + offset), sizeof(T));
    std::memcpy(stub::Host(address_ + offset), &value, sizeof(T));
  }
  GlobalTensor operator[](uint64_t offset) const {
    GlobalTensor t;
    t.address_ = address_ + offset;
    t.size_ = size_ > offset ? size_ - offset : 0;
    return t;
  }

 private:
  // A tensor given a size (SetGlobalBuffer's bufferSize) is bounds-checked; size 0 means unknown.
  void CheckBounds(uint64_t offset, const char* api) const {
    if (size_ != 0 && offset >= size_) stub::Fail(api);
  }
  __gm__ T* address_ = nullptr;
  uint64_t size_ = 0;
};

// A local tensor knows its position, so copies and instructions can refuse what its memory does not allow.
template <class T>
class LocalTensor {
 public:
  LocalTensor() = default;
  LocalTensor(T* address, uint32_t size, TPosition pos) : address_(address), size_(size), pos_(pos) {}
  T GetValue(uint32_t i) const {
    stub::PipeAccess(stub::kPipeS, false, address_ + i, sizeof(T), "LocalTensor::GetValue");
    return address_[i];
  }
  void SetValue(uint32_t i, T v) {
    stub::PipeAccess(stub::kPipeS, true, address_ + i, sizeof(T), "LocalTensor::SetValue");
    address_[i] = v;
  }
  T* GetPhyAddr() const { return address_; }
  uint32_t GetSize() const { return size_; }
  TPosition GetPosition() const { return pos_; }
  LocalTensor operator[](uint32_t offset) const { return LocalTensor(address_ + offset, size_ - offset, pos_); }
  template <class U>
  LocalTensor<U> ReinterpretCast() const {
    return LocalTensor<U>(reinterpret_cast<U*>(address_), uint32_t(uint64_t(size_) * sizeof(T) / sizeof(U)), pos_);
  }

 private:
  T* address_ = nullptr;
  uint32_t size_ = 0;
  TPosition pos_ = TPosition::VECCALC;
};

template <TPosition Pos>
class TBuf {
 public:
  template <class T>
  LocalTensor<T> Get() const {
    return LocalTensor<T>(reinterpret_cast<T*>(address_), uint32_t(bytes_ / sizeof(T)), Pos);
  }
  template <class T>
  LocalTensor<T> Get(uint32_t count) const {
    if (count * sizeof(T) > bytes_) stub::Fail("TBuf::Get past the buffer");
    return LocalTensor<T>(reinterpret_cast<T*>(address_), count, Pos);
  }
  uint8_t* address_ = nullptr;
  uint64_t bytes_ = 0;
};

class TPipe {
 public:
  // Carves `bytes` (rounded up to 32, the UB block) out of this core's local memory: UB positions on an AIV,
  // L1 positions on an AIC (the other core's buffers do not exist there).
  template <TPosition Pos>
  void InitBuffer(TBuf<Pos>& buf, uint32_t bytes) {
    if constexpr (stub::IsUb(Pos)) {
      stub::UbBufferOnThisCore();
    } else {
      stub::CubeBufferOnThisCore();
    }
    stub::CoreState& c = stub::Core();
    const uint64_t rounded = (uint64_t(bytes) + 31) & ~uint64_t(31);
    if (c.local_arena == nullptr || c.local_used + rounded > c.local_bytes)
      stub::Fail(c.core_type == AIC ? "L1 exhausted by TPipe::InitBuffer" : "UB exhausted by TPipe::InitBuffer");
    buf.address_ = c.local_arena + c.local_used;
    buf.bytes_ = rounded;
    c.local_used += rounded;
  }
  void Reset() { stub::Core().local_used = 0; }
  void Destroy() { Reset(); }
};

namespace stub {
constexpr uint8_t EventSrc(HardEvent e) {
  switch (e) {
    case HardEvent::MTE2_V: case HardEvent::MTE2_S: case HardEvent::MTE2_MTE3: return kPipeMte2;
    case HardEvent::V_MTE3: case HardEvent::V_S: return kPipeV;
    case HardEvent::MTE3_V: case HardEvent::MTE3_S: case HardEvent::MTE3_MTE2: return kPipeMte3;
    default: return kPipeS;
  }
}
constexpr uint8_t EventDst(HardEvent e) {
  switch (e) {
    case HardEvent::MTE2_V: case HardEvent::MTE3_V: case HardEvent::S_V: return kPipeV;
    case HardEvent::MTE2_S: case HardEvent::MTE3_S: case HardEvent::V_S: return kPipeS;
    case HardEvent::S_MTE2: case HardEvent::MTE3_MTE2: return kPipeMte2;
    default: return kPipeMte3;
  }
}
}  // namespace stub

// Pipe synchronisation inside one core (the pipe model, stub_pipe.h).
template <HardEvent E>
inline void SetFlag(int32_t id) {
  stub::PipeSetFlag(stub::EventSrc(E), stub::EventDst(E), id);
}
template <HardEvent E>
inline void WaitFlag(int32_t id) {
  stub::PipeWaitFlag(stub::EventSrc(E), stub::EventDst(E), id);
}

}  // namespace AscendC

namespace AscendC {
namespace stub {
// Element conversions the Cast stub uses (the CPU twin's round-to-nearest-even, op_kernel/cpu/dtype.h).
inline float ToFloat(half v) { return hpmoe::cpu::F16ToF32(v.bits); }
inline float ToFloat(bfloat16_t v) { return hpmoe::cpu::Bf16ToF32(v.bits); }
inline float ToFloat(float v) { return v; }
template <class T>
inline T FromFloat(float v);
template <>
inline half FromFloat<half>(float v) { return half{hpmoe::cpu::F32ToF16(v)}; }
template <>
inline bfloat16_t FromFloat<bfloat16_t>(float v) { return bfloat16_t{hpmoe::cpu::F32ToBf16(v)}; }
template <>
inline float FromFloat<float>(float v) { return v; }
}  // namespace stub
}  // namespace AscendC
