#include "local_rank.h"

#include <sys/mman.h>

#include <cstring>

namespace hpmoe {
namespace cpu {
namespace {

constexpr uint64_t kSlotAlign = 2ull << 20;  // huge-page aligned slots

uint64_t RoundUp(uint64_t v, uint64_t m) { return (v + m - 1) / m * m; }

}  // namespace

std::unique_ptr<LocalRank> LocalRank::Create(const ssc::SscConfig& cfg, const std::vector<LocalSlot>& slots,
                                             uint32_t num_events, uint32_t workers, uint64_t scratch_floats,
                                             uint64_t timeout_ns, std::string* error) {
  std::unique_ptr<LocalRank> r(new LocalRank());
  uint64_t offset = 0;
  for (const LocalSlot& s : slots) {
    if (s.slot >= ssc::kSlotCount || s.dtype > ssc::kINT32 || s.rows == 0 || s.cols == 0 ||
        r->layout_.slots[s.slot].ndim != 0 || s.rows > 0xFFFFFFFFull || s.cols > 0xFFFFFFFFull) {
      *error = "local rank: slot " + std::to_string(s.slot) + " is unknown, repeated, empty or too large";
      return nullptr;
    }
    SlotShape& sh = r->layout_.slots[s.slot];
    sh.ndim = 2;
    sh.dims[0] = uint32_t(s.rows);
    sh.dims[1] = uint32_t(s.cols);
    sh.dtype = s.dtype;
    sh.rows = s.rows;
    sh.cols = s.cols;
    sh.bytes = s.rows * s.cols * (s.dtype == ssc::kFP16 || s.dtype == ssc::kBF16 ? 2 : 4);
    r->layout_.slot_offset[s.slot] = offset;
    offset = RoundUp(offset + sh.bytes, kSlotAlign);
  }
  r->data_bytes_ = offset == 0 ? kSlotAlign : offset;
  void* p = mmap(nullptr, r->data_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    *error = "local rank: cannot map " + std::to_string(r->data_bytes_ >> 20) + " MiB: " + std::strerror(errno);
    return nullptr;
  }
  r->data_ = p;
#ifdef MADV_HUGEPAGE
  madvise(p, r->data_bytes_, MADV_HUGEPAGE);  // a hint; fine if refused
#endif
  r->layout_.segment_bytes = r->data_bytes_;
  r->ctx_.cfg = cfg;
  r->ctx_.rank = 0;
  r->ctx_.layout = &r->layout_;
  r->ctx_.segment = static_cast<uint8_t*>(p);

  // Control block, then the counters, each on its own cache line (as in the heap layout).
  const uint64_t control_bytes = kControlBytes + uint64_t(num_events) * ssc::kCounterStrideBytes;
  r->control_words_.assign(control_bytes / 8 + 8, 0);
  uint8_t* base = reinterpret_cast<uint8_t*>(r->control_words_.data());
  base += (64 - reinterpret_cast<uintptr_t>(base) % 64) % 64;
  r->group_.base = base;
  r->group_.segment_bytes = control_bytes;
  r->group_.ep = 1;
  ControlBlock* cb = r->group_.Control(0);
  cb->magic = kControlMagic;
  cb->ep = 1;
  cb->segment_bytes = control_bytes;
  r->sync_.reset(new CpuSync(r->group_, 0, kControlBytes, timeout_ns));

  r->scratch_floats_.assign(scratch_floats * 3 * workers, 0.0f);
  r->scratch_.resize(workers);
  for (uint32_t w = 0; w < workers; ++w) {
    float* f = r->scratch_floats_.data() + uint64_t(w) * 3 * scratch_floats;
    r->scratch_[w].a = f;
    r->scratch_[w].b = f + scratch_floats;
    r->scratch_[w].out = f + 2 * scratch_floats;
  }
  return r;
}

LocalRank::~LocalRank() {
  if (data_ != nullptr) munmap(data_, data_bytes_);
}

}  // namespace cpu
}  // namespace hpmoe
