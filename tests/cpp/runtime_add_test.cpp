// The ADD task type (ssc::kTaskAdd) on the CPU twin: run through the real worker loop with the CPU sync and
// CPU handlers over a LocalRank, checked element by element against the same fp32 math done here.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "../../op_kernel/cpu/cpu_handlers.h"
#include "../../op_kernel/cpu/dtype.h"
#include "../../op_kernel/runtime/worker_loop.h"
#include "local_rank.h"

namespace {

using namespace hpmoe;
using cpu::LocalRank;

constexpr uint64_t kRows = 6, kCols = 10;

ssc::SscTensorRef Ref(uint32_t slot, uint32_t r0, uint32_t rows, uint32_t c0, uint32_t cols) {
  return ssc::SscTensorRef{uint16_t(slot), 0, 0, r0, rows, c0, cols};
}

ssc::SscTask AddTask(const ssc::SscTensorRef& a, const ssc::SscTensorRef& b, const ssc::SscTensorRef& out) {
  ssc::SscTask t;
  std::memset(&t, 0, sizeof t);
  t.task_type = ssc::kTaskAdd;
  t.queue_type = ssc::kVTQ;
  for (uint32_t& e : t.dependent_event) e = ssc::kNoEvent;
  for (uint32_t& e : t.trigger_event) e = ssc::kNoEvent;
  for (auto& r : t.inputs) r.slot = ssc::kNoSlot;
  for (auto& r : t.outputs) r.slot = ssc::kNoSlot;
  t.inputs[0] = a;
  t.inputs[1] = b;
  t.outputs[0] = out;
  return t;
}

struct AddRig {
  std::unique_ptr<LocalRank> rank;
  uint32_t dtype;
  explicit AddRig(uint32_t dt) : dtype(dt) {
    ssc::SscConfig cfg{};
    cfg.ep = 1;
    cfg.dtype = dt;
    std::string err;
    rank = LocalRank::Create(cfg,
                             {{ssc::kSlotA, dt, kRows, kCols}, {ssc::kSlotX, dt, kRows, kCols},
                              {ssc::kSlotY, dt, kRows, kCols}},
                             2, 1, kCols, 1000000000ull, &err);
    EXPECT_TRUE(rank) << err;
    std::vector<float> a(kRows * kCols), x(kRows * kCols), y(kRows * kCols, -7.0f);
    for (uint64_t i = 0; i < a.size(); ++i) {
      a[i] = 0.37f * float(i) - 9.5f;
      x[i] = 1.0f / float(i + 3) + 0.001f * float(i * i);
    }
    cpu::StoreF32(a.data(), dt, a.size(), rank->Slot(ssc::kSlotA));
    cpu::StoreF32(x.data(), dt, x.size(), rank->Slot(ssc::kSlotX));
    cpu::StoreF32(y.data(), dt, y.size(), rank->Slot(ssc::kSlotY));
  }
  std::vector<float> Read(uint32_t slot) const {
    std::vector<float> v(kRows * kCols);
    cpu::LoadF32(rank->Slot(slot), dtype, v.size(), v.data());
    return v;
  }
  // Runs `tasks` in order on one worker queue; returns the loop's status.
  int32_t Run(std::vector<ssc::SscTask> tasks, const std::vector<ssc::SscEvent>& events, uint32_t invocation,
              rt::WorkerReport* report) {
    std::vector<uint32_t> entries(tasks.size());
    for (uint32_t i = 0; i < entries.size(); ++i) entries[i] = i;
    ssc::SscQueue q{ssc::kVTQ, 0, 0, uint32_t(tasks.size())};
    rt::SscProgram p{tasks.data(), events.data(), &q, entries.data(), uint32_t(tasks.size()),
                     uint32_t(events.size()), 1, 0, invocation, nullptr, 0, 0};
    cpu::CpuHandlers<cpu::CpuSync> h(rank->context(), rank->scratch(0), rank->sync());
    return rt::RunWorkerQueue(p, 0, rank->sync(), h, report);
  }
};

// What the handler must produce: fp32 sum of the stored operands, rounded once to the dtype.
float Expected(uint32_t dtype, float a, float b) {
  const float sum = a + b;
  uint32_t storage = 0;  // 4 bytes for fp32, the low 2 for fp16/bf16
  cpu::StoreF32(&sum, dtype, 1, &storage);
  float out;
  cpu::LoadF32(&storage, dtype, 1, &out);
  return out;
}

class AddByDtype : public ::testing::TestWithParam<uint32_t> {};

TEST_P(AddByDtype, FullTileEqualsFp32SumRoundedOnce) {
  AddRig rig(GetParam());
  const auto full = [](uint32_t s) { return Ref(s, 0, kRows, 0, kCols); };
  rt::WorkerReport rep{};
  ASSERT_EQ(rig.Run({AddTask(full(ssc::kSlotA), full(ssc::kSlotX), full(ssc::kSlotY))}, {}, 1, &rep), rt::kOk);
  const std::vector<float> a = rig.Read(ssc::kSlotA), x = rig.Read(ssc::kSlotX), y = rig.Read(ssc::kSlotY);
  for (uint64_t i = 0; i < y.size(); ++i) ASSERT_EQ(y[i], Expected(GetParam(), a[i], x[i])) << "element " << i;
}

TEST_P(AddByDtype, SubRegionWritesOnlyItsRowsAndColumnsAndWaitsOnItsEvent) {
  AddRig rig(GetParam());
  const std::vector<float> a = rig.Read(ssc::kSlotA), x = rig.Read(ssc::kSlotX), y0 = rig.Read(ssc::kSlotY);
  // task 0: Y[1:4, 2:7] = A[2:5, 3:8] + X[0:3, 5:10], triggers event 1 (threshold 1)
  // task 1 waits on it: Y[1:4, 2:7] += X[0:3, 5:10] (in place: out aliases input 0)
  std::vector<ssc::SscTask> tasks = {
      AddTask(Ref(ssc::kSlotA, 2, 3, 3, 5), Ref(ssc::kSlotX, 0, 3, 5, 5), Ref(ssc::kSlotY, 1, 3, 2, 5)),
      AddTask(Ref(ssc::kSlotY, 1, 3, 2, 5), Ref(ssc::kSlotX, 0, 3, 5, 5), Ref(ssc::kSlotY, 1, 3, 2, 5))};
  tasks[0].trigger_event[0] = 1;
  tasks[1].dependent_event[0] = 1;
  const std::vector<ssc::SscEvent> events = {{1, 0, 0, 0}, {1, 0, 0, 0}};
  rt::WorkerReport rep{};
  ASSERT_EQ(rig.Run(tasks, events, 1, &rep), rt::kOk);
  EXPECT_EQ(*rig.rank->counter(1), 1u);
  const std::vector<float> y = rig.Read(ssc::kSlotY);
  for (uint64_t r = 0; r < kRows; ++r) {
    for (uint64_t c = 0; c < kCols; ++c) {
      const uint64_t i = r * kCols + c;
      if (r >= 1 && r < 4 && c >= 2 && c < 7) {
        const float xv = x[(r - 1) * kCols + c + 3];
        const float once = Expected(GetParam(), a[(r + 1) * kCols + c + 1], xv);
        ASSERT_EQ(y[i], Expected(GetParam(), once, xv)) << "row " << r << " col " << c;
      } else {
        ASSERT_EQ(y[i], y0[i]) << "row " << r << " col " << c << " outside the region changed";
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, AddByDtype, ::testing::Values(uint32_t(ssc::kFP32), uint32_t(ssc::kBF16),
                                                                uint32_t(ssc::kFP16)));

TEST(Add, MismatchedOrOutOfSlotRegionsFailTheTaskWithErrRegion) {
  AddRig rig(ssc::kFP32);
  const std::vector<ssc::SscTask> bad = {
      AddTask(Ref(ssc::kSlotA, 0, 2, 0, kCols), Ref(ssc::kSlotX, 0, 3, 0, kCols), Ref(ssc::kSlotY, 0, 2, 0, kCols)),
      AddTask(Ref(ssc::kSlotA, 0, 2, 0, 4), Ref(ssc::kSlotX, 0, 2, 0, 4), Ref(ssc::kSlotY, 0, 2, 0, 5)),
      AddTask(Ref(ssc::kSlotA, 5, 2, 0, 4), Ref(ssc::kSlotX, 0, 2, 0, 4), Ref(ssc::kSlotY, 0, 2, 0, 4)),
      AddTask(Ref(ssc::kSlotA, 0, 2, 8, 4), Ref(ssc::kSlotX, 0, 2, 0, 4), Ref(ssc::kSlotY, 0, 2, 0, 4)),
      AddTask(Ref(ssc::kSlotH, 0, 2, 0, 4), Ref(ssc::kSlotX, 0, 2, 0, 4), Ref(ssc::kSlotY, 0, 2, 0, 4)),
      AddTask(Ref(ssc::kSlotA, 0, 2, 0, 4), Ref(ssc::kNoSlot, 0, 2, 0, 4), Ref(ssc::kSlotY, 0, 2, 0, 4))};
  for (size_t i = 0; i < bad.size(); ++i) {
    rt::WorkerReport rep{};
    EXPECT_EQ(rig.Run({bad[i]}, {}, 1, &rep), rt::kHandlerFailed) << "case " << i;
    EXPECT_EQ(rep.detail, rt::kErrRegion) << "case " << i;
    EXPECT_EQ(rep.task_type, uint32_t(ssc::kTaskAdd));
  }
  ssc::SscTask dynamic_rows =
      AddTask(Ref(ssc::kSlotA, 0, 2, 0, 4), Ref(ssc::kSlotX, 0, 2, 0, 4), Ref(ssc::kSlotY, 0, 2, 0, 4));
  dynamic_rows.inputs[0].flags = ssc::kRefRowsDynamic;
  rt::WorkerReport rep{};
  EXPECT_EQ(rig.Run({dynamic_rows}, {}, 1, &rep), rt::kHandlerFailed);
  EXPECT_EQ(rep.detail, rt::kErrRegion);
}

}  // namespace
