// op_kernel/runtime/swiglu_block.h: the two region forms of SWIGLU and SWIGLU_GRAD are accepted as the block
// they describe, and any region that disagrees with the block (another column, row range or slot) is refused,
// so a handler never reads or writes outside what the validator checked.
#include <gtest/gtest.h>

#include "../../op_kernel/runtime/swiglu_block.h"

namespace {

using namespace hpmoe;
using ssc::SscTask;
using ssc::SscTensorRef;

constexpr uint64_t kInter = 40;

SscTensorRef Ref(uint32_t slot, uint32_t col0, uint32_t cols, uint32_t row0 = 32, uint32_t rows = 16) {
  SscTensorRef r{};
  r.slot = uint16_t(slot);
  r.row_offset = row0;
  r.rows = rows;
  r.col_offset = col0;
  r.cols = cols;
  return r;
}

SscTask Task(uint32_t type) {
  SscTask t{};
  t.task_type = type;
  for (auto& r : t.inputs) r.slot = ssc::kNoSlot;
  for (auto& r : t.outputs) r.slot = ssc::kNoSlot;
  return t;
}

SscTask SwigluBlockTask(uint32_t c0, uint32_t cols) {
  SscTask t = Task(ssc::kTaskSwiglu);
  t.inputs[0] = Ref(ssc::kSlotH, c0, cols);
  t.inputs[1] = Ref(ssc::kSlotH, uint32_t(kInter) + c0, cols);
  t.inputs[2] = Ref(ssc::kSlotRecvCounts, 0, 2, 0, 4);
  t.outputs[0] = Ref(ssc::kSlotA, c0, cols);
  return t;
}

SscTask GradBlockTask(uint32_t c0, uint32_t cols) {
  SscTask t = Task(ssc::kTaskSwigluGrad);
  t.inputs[0] = Ref(ssc::kSlotDA, c0, cols);
  t.inputs[1] = Ref(ssc::kSlotH, c0, cols);
  t.inputs[2] = Ref(ssc::kSlotH, uint32_t(kInter) + c0, cols);
  t.inputs[3] = Ref(ssc::kSlotRecvCounts, 0, 2, 0, 4);
  t.outputs[0] = Ref(ssc::kSlotDH, c0, cols);
  t.outputs[1] = Ref(ssc::kSlotDH, uint32_t(kInter) + c0, cols);
  return t;
}

TEST(SwigluBlock, WholeRowsAreTheBlockOfAllColumns) {
  SscTask t = Task(ssc::kTaskSwiglu);
  t.inputs[0] = Ref(ssc::kSlotH, 0, 2 * kInter);
  t.inputs[1] = Ref(ssc::kSlotRecvCounts, 0, 2, 0, 4);
  t.outputs[0] = Ref(ssc::kSlotA, 0, kInter);
  rt::SwigluBlock b;
  ASSERT_TRUE(rt::SwigluBlockOf(t, kInter, &b));
  EXPECT_EQ(b.row0, 32u);
  EXPECT_EQ(b.rows, 16u);
  EXPECT_EQ(b.c0, 0u);
  EXPECT_EQ(b.cols, kInter);
  t.outputs[0] = Ref(ssc::kSlotA, 0, 16);  // whole H but a block of A
  EXPECT_FALSE(rt::SwigluBlockOf(t, kInter, &b));

  SscTask g = Task(ssc::kTaskSwigluGrad);
  g.inputs[0] = Ref(ssc::kSlotDA, 0, kInter);
  g.inputs[1] = Ref(ssc::kSlotH, 0, 2 * kInter);
  g.inputs[2] = Ref(ssc::kSlotRecvCounts, 0, 2, 0, 4);
  g.outputs[0] = Ref(ssc::kSlotDH, 0, 2 * kInter);
  ASSERT_TRUE(rt::SwigluGradBlockOf(g, kInter, &b));
  EXPECT_EQ(b.cols, kInter);
  g.outputs[0] = Ref(ssc::kSlotDH, 0, kInter);  // half of dH left unwritten
  EXPECT_FALSE(rt::SwigluGradBlockOf(g, kInter, &b));
}

TEST(SwigluBlock, ColumnBlocksIncludingARaggedLastOne) {
  rt::SwigluBlock b;
  ASSERT_TRUE(rt::SwigluBlockOf(SwigluBlockTask(16, 16), kInter, &b));
  EXPECT_EQ(b.c0, 16u);
  EXPECT_EQ(b.cols, 16u);
  ASSERT_TRUE(rt::SwigluBlockOf(SwigluBlockTask(32, 8), kInter, &b));
  ASSERT_TRUE(rt::SwigluGradBlockOf(GradBlockTask(32, 8), kInter, &b));
  EXPECT_EQ(b.c0, 32u);
  EXPECT_EQ(b.cols, 8u);
}

TEST(SwigluBlock, RefusesRegionsThatDisagreeWithTheBlock) {
  rt::SwigluBlock b;
  SscTask t = SwigluBlockTask(16, 16);
  t.inputs[1].col_offset = 16 + 16;  // up is not gate + I
  EXPECT_FALSE(rt::SwigluBlockOf(t, kInter, &b));
  t = SwigluBlockTask(16, 16);
  t.outputs[0].col_offset = 0;  // writes other columns than it reads
  EXPECT_FALSE(rt::SwigluBlockOf(t, kInter, &b));
  t = SwigluBlockTask(16, 16);
  t.inputs[1].row_offset = 48;  // up of another row tile
  EXPECT_FALSE(rt::SwigluBlockOf(t, kInter, &b));
  EXPECT_FALSE(rt::SwigluBlockOf(SwigluBlockTask(32, 16), kInter, &b));  // past I
  EXPECT_FALSE(rt::SwigluBlockOf(SwigluBlockTask(16, 0), kInter, &b));

  SscTask g = GradBlockTask(16, 16);
  g.outputs[1].col_offset = 16;  // dH's up written over its gate
  EXPECT_FALSE(rt::SwigluGradBlockOf(g, kInter, &b));
  g = GradBlockTask(16, 16);
  g.outputs[1].slot = ssc::kNoSlot;  // dH's up half missing
  EXPECT_FALSE(rt::SwigluGradBlockOf(g, kInter, &b));
  g = GradBlockTask(16, 16);
  g.inputs[0].cols = 8;  // dA narrower than the block
  EXPECT_FALSE(rt::SwigluGradBlockOf(g, kInter, &b));
  g = GradBlockTask(16, 16);
  g.inputs[0].slot = ssc::kSlotA;  // not dA
  EXPECT_FALSE(rt::SwigluGradBlockOf(g, kInter, &b));
}

// A block of 2^31 or more 8-element vectors would wrap the CUDA handlers' 31-bit vector index: refused.
TEST(SwigluBlock, RefusesABlockOf2To31Vectors) {
  auto with_rows = [](SscTask t, uint32_t rows) {
    for (auto* r : {&t.inputs[0], &t.inputs[1], &t.inputs[2], &t.outputs[0], &t.outputs[1]})
      if (r->slot != ssc::kNoSlot && r->slot != ssc::kSlotRecvCounts) r->rows = rows;
    return t;
  };
  rt::SwigluBlock b;
  constexpr uint32_t kMost = (1u << 30) - 1;  // 16 columns: 2 vectors a row
  EXPECT_TRUE(rt::SwigluBlockOf(with_rows(SwigluBlockTask(16, 16), kMost), kInter, &b));
  EXPECT_EQ(b.rows, kMost);
  EXPECT_FALSE(rt::SwigluBlockOf(with_rows(SwigluBlockTask(16, 16), kMost + 1), kInter, &b));
  EXPECT_TRUE(rt::SwigluGradBlockOf(with_rows(GradBlockTask(16, 16), kMost), kInter, &b));
  EXPECT_FALSE(rt::SwigluGradBlockOf(with_rows(GradBlockTask(16, 16), kMost + 1), kInter, &b));
}

}  // namespace
