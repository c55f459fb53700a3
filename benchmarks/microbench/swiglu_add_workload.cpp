#include "swiglu_add_workload.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <thread>

#include "../../op_kernel/cpu/dtype.h"

namespace hpmoe {
namespace microbench {
namespace {

ssc::SscTensorRef Rows(uint32_t slot, uint32_t r0, uint32_t rows, uint32_t cols) {
  return ssc::SscTensorRef{uint16_t(slot), 0, 0, r0, rows, 0, cols};
}

ssc::SscTask EmptyTask(uint32_t type, uint32_t index, uint32_t split_num, uint32_t split_value, uint32_t op) {
  ssc::SscTask t;
  std::memset(&t, 0, sizeof t);
  t.task_type = type;
  t.queue_type = ssc::kVTQ;
  for (uint32_t& e : t.dependent_event) e = ssc::kNoEvent;
  for (uint32_t& e : t.trigger_event) e = ssc::kNoEvent;
  for (auto& r : t.inputs) r.slot = ssc::kNoSlot;
  for (auto& r : t.outputs) r.slot = ssc::kNoSlot;
  t.task_index = index;
  t.task_split_num = split_num;
  t.task_split_value = split_value;
  t.op_id = op;
  return t;
}

inline uint64_t SplitMix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Rows [r0, r1) of a rows x cols slot filled with values lo + (hi - lo) * u, u uniform in [0, 1) from the
// 24 top bits of splitmix64(stream ^ element index): the same bytes for any thread split.
void FillRows(uint8_t* base, uint32_t dtype, uint64_t cols, uint64_t r0, uint64_t r1, uint64_t stream, float lo,
              float hi) {
  std::vector<float> row(cols);
  const uint64_t es = cpu::DTypeBytes(dtype);
  for (uint64_t r = r0; r < r1; ++r) {
    for (uint64_t c = 0; c < cols; ++c) {
      const uint64_t bits = SplitMix64(stream ^ (r * cols + c)) >> 40;
      row[c] = lo + (hi - lo) * (float(bits) * (1.0f / 16777216.0f));
    }
    cpu::StoreF32(row.data(), dtype, cols, base + r * cols * es);
  }
}

std::string WriteFile(const std::string& path, const void* data, uint64_t bytes) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return "cannot write " + path + ": " + std::strerror(errno);
  const bool ok = std::fwrite(data, 1, bytes, f) == bytes;
  if (std::fclose(f) != 0 || !ok) return "cannot write " + path + ": " + std::strerror(errno);
  return "";
}

}  // namespace

std::unique_ptr<SwigluAddWorkload> SwigluAddWorkload::Create(const WorkloadShape& shape, std::string* error) {
  if (shape.rows == 0 || shape.rows > 0x7FFFFFFFull || shape.tile_rows == 0 || shape.workers == 0) {
    *error = "rows, tile rows and workers must be positive (rows < 2^31)";
    return nullptr;
  }
  std::unique_ptr<SwigluAddWorkload> w(new SwigluAddWorkload());
  w->shape_ = shape;
  const uint32_t M = uint32_t(shape.rows), T = shape.tile_rows, K = shape.workers;
  const uint32_t n = (M + T - 1) / T;
  w->num_tiles_ = n;

  // What RunSwiglu reads: one receive slot of C = M rows, one local expert, all rows valid.
  ssc::SscConfig cfg{};
  cfg.ep = 1;
  cfg.tokens = M;
  cfg.hidden = kInter;
  cfg.inter = kInter;
  cfg.experts_per_rank = 1;
  cfg.topk = 1;
  cfg.dtype = shape.dtype;
  cfg.tile_m = T;
  cfg.recv_rows_per_src = M;
  cfg.num_aiv = K;
  const uint32_t dt = shape.dtype;
  const std::vector<cpu::LocalSlot> slots = {{ssc::kSlotH, dt, M, 2 * kInter},
                                             {ssc::kSlotA, dt, M, kInter},
                                             {ssc::kSlotX, dt, M, kInter},
                                             {ssc::kSlotY, dt, M, kInter},
                                             {ssc::kSlotRecvCounts, ssc::kINT32, 1, 1}};
  const uint64_t scratch = uint64_t(T) * 2 * kInter;  // converted H rows of one tile
  w->rank_ = cpu::LocalRank::Create(cfg, slots, n, K, scratch, shape.timeout_ms * 1000000ull, error);
  if (!w->rank_) return nullptr;
  w->rank_->Slot<int32_t>(ssc::kSlotRecvCounts)[0] = int32_t(M);

  w->tasks_.reserve(2 * n);
  for (uint32_t i = 0; i < n; ++i) {
    const uint32_t r0 = i * T, rows = r0 + T <= M ? T : M - r0;
    ssc::SscTask s = EmptyTask(ssc::kTaskSwiglu, i, n, T, 0);
    s.inputs[0] = Rows(ssc::kSlotH, r0, rows, 2 * kInter);
    s.outputs[0] = Rows(ssc::kSlotA, r0, rows, kInter);
    s.trigger_event[0] = i;
    s.trigger_rank[0] = 0;
    w->tasks_.push_back(s);
  }
  for (uint32_t i = 0; i < n; ++i) {
    const uint32_t r0 = i * T, rows = r0 + T <= M ? T : M - r0;
    ssc::SscTask a = EmptyTask(ssc::kTaskAdd, i, n, T, 1);
    a.inputs[0] = Rows(ssc::kSlotA, r0, rows, kInter);
    a.inputs[1] = Rows(ssc::kSlotX, r0, rows, kInter);
    a.outputs[0] = Rows(ssc::kSlotY, r0, rows, kInter);
    a.dependent_event[0] = i;
    w->tasks_.push_back(a);
  }
  w->events_.assign(n, ssc::SscEvent{1, 0, 1, 0});

  for (uint32_t order = 0; order < 2; ++order) {
    std::vector<uint32_t>& entries = w->entries_[order];
    for (uint32_t q = 0; q < K; ++q) {
      const uint32_t first = uint32_t(entries.size());
      if (order == kSerial) {
        for (uint32_t i = q; i < n; i += K) entries.push_back(i);
        for (uint32_t i = q; i < n; i += K) entries.push_back(n + i);
      } else {
        for (uint32_t i = q; i < n; i += K) {
          entries.push_back(i);
          entries.push_back(n + i);
        }
      }
      w->queues_[order].push_back(ssc::SscQueue{ssc::kVTQ, q, first, uint32_t(entries.size()) - first});
    }
    w->programs_[order] = rt::SscProgram{w->tasks_.data(), w->events_.data(), w->queues_[order].data(),
                                         entries.data(), 2 * n, n, K, 0, 0, nullptr, 0, 0};
  }
  return w;
}

uint64_t SwigluAddWorkload::intermediate_bytes() const { return rank_->SlotBytes(ssc::kSlotA); }

uint64_t SwigluAddWorkload::total_bytes() const {
  return rank_->SlotBytes(ssc::kSlotH) + rank_->SlotBytes(ssc::kSlotA) + rank_->SlotBytes(ssc::kSlotX) +
         rank_->SlotBytes(ssc::kSlotY);
}

void SwigluAddWorkload::FillInputs() {
  const uint64_t M = shape_.rows;
  const uint32_t parts = shape_.workers;
  std::vector<std::thread> threads;
  for (uint32_t p = 0; p < parts; ++p) {
    threads.emplace_back([this, p, parts, M] {
      const uint64_t r0 = M * p / parts, r1 = M * (p + 1) / parts;
      FillRows(rank_->Slot(ssc::kSlotH), shape_.dtype, 2 * kInter, r0, r1, SplitMix64(shape_.seed * 2 + 1), -4.0f,
               4.0f);
      FillRows(rank_->Slot(ssc::kSlotX), shape_.dtype, kInter, r0, r1, SplitMix64(shape_.seed * 2 + 2), -1.0f,
               1.0f);
    });
  }
  for (std::thread& t : threads) t.join();
}

void SwigluAddWorkload::PoisonOutputs() {
  std::memset(rank_->Slot(ssc::kSlotA), 0xFF, rank_->SlotBytes(ssc::kSlotA));
  std::memset(rank_->Slot(ssc::kSlotY), 0xFF, rank_->SlotBytes(ssc::kSlotY));
}

uint64_t SwigluAddWorkload::OutputHash() const {
  uint64_t h = 0x243F6A8885A308D3ull;
  for (uint32_t slot : {uint32_t(ssc::kSlotA), uint32_t(ssc::kSlotY)}) {
    const uint8_t* p = rank_->Slot(slot);
    const uint64_t bytes = rank_->SlotBytes(slot);  // a multiple of 8: rows x 2048 elements
    for (uint64_t i = 0; i < bytes; i += 8) {
      uint64_t v;
      std::memcpy(&v, p + i, 8);
      h = SplitMix64(h ^ v);
    }
  }
  return h;
}

std::string SwigluAddWorkload::Dump(const std::string& prefix, const std::string& tag, bool with_inputs) const {
  std::string err;
  if (with_inputs) {
    err = WriteFile(prefix + "h.bin", rank_->Slot(ssc::kSlotH), rank_->SlotBytes(ssc::kSlotH));
    if (err.empty()) err = WriteFile(prefix + "x.bin", rank_->Slot(ssc::kSlotX), rank_->SlotBytes(ssc::kSlotX));
  }
  if (err.empty()) err = WriteFile(prefix + "y." + tag + ".bin", rank_->Slot(ssc::kSlotY), rank_->SlotBytes(ssc::kSlotY));
  return err;
}

}  // namespace microbench
}  // namespace hpmoe
