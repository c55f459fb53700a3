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

namespace AscendC {

// 16-bit floating types as their bits; conversions round to nearest even (the Cast stub's CAST_RINT).
struct half {
  uint16_t bits;
};
struct bfloat16_t {
  uint16_t bits;
};

enum class TPosition : int32_t { GM, A1, A2, B1, B2, CO1, CO2, VECIN, VECOUT, VECCALC };
enum class HardEvent : int32_t { MTE2_V, V_MTE3, MTE3_V, MTE2_S, S_MTE2, S_MTE3, MTE3_S, MTE3_MTE2 };

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
    stub::Log(stub::Op::kGmRead, 0, address_ + offset, sizeof(T));
    T v;
    std::memcpy(&v, address_ + offset, sizeof(T));
    return v;
  }
  void SetValue(uint64_t offset, T value) {
    stub::Log(stub::Op::kGmWrite, 0, address_ + offset, sizeof(T));
    std::memcpy(address_ + offset, &value, sizeof(T));
  }
  GlobalTensor operator[](uint64_t offset) const {
    GlobalTensor t;
    t.address_ = address_ + offset;
    t.size_ = size_ > offset ? size_ - offset : 0;
    return t;
  }

 private:
  __gm__ T* address_ = nullptr;
  uint64_t size_ = 0;
};

template <class T>
class LocalTensor {
 public:
  LocalTensor() = default;
  LocalTensor(T* address, uint32_t size) : address_(address), size_(size) {}
  T GetValue(uint32_t i) const { return address_[i]; }
  void SetValue(uint32_t i, T v) { address_[i] = v; }
  T* GetPhyAddr() const { return address_; }
  uint32_t GetSize() const { return size_; }
  LocalTensor operator[](uint32_t offset) const { return LocalTensor(address_ + offset, size_ - offset); }
  template <class U>
  LocalTensor<U> ReinterpretCast() const {
    return LocalTensor<U>(reinterpret_cast<U*>(address_), uint32_t(uint64_t(size_) * sizeof(T) / sizeof(U)));
  }

 private:
  T* address_ = nullptr;
  uint32_t size_ = 0;
};

template <TPosition Pos>
class TBuf {
 public:
  template <class T>
  LocalTensor<T> Get() const {
    return LocalTensor<T>(reinterpret_cast<T*>(address_), uint32_t(bytes_ / sizeof(T)));
  }
  template <class T>
  LocalTensor<T> Get(uint32_t count) const {
    if (count * sizeof(T) > bytes_) stub::Fail("TBuf::Get past the buffer");
    return LocalTensor<T>(reinterpret_cast<T*>(address_), count);
  }
  uint8_t* address_ = nullptr;
  uint64_t bytes_ = 0;
};

class TPipe {
 public:
  // Carves `bytes` (rounded up to 32, the UB block) out of this core's local memory.
  template <TPosition Pos>
  void InitBuffer(TBuf<Pos>& buf, uint32_t bytes) {
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

// Pipe synchronisation inside one core. The stub executes every instruction to completion in program order,
// so these only need to exist; PipeBarrier is logged because the put protocol relies on it.
template <HardEvent E>
inline void SetFlag(int32_t) {}
template <HardEvent E>
inline void WaitFlag(int32_t) {}

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
