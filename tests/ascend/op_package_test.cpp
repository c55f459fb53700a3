// The HyperParallelMoe op package's host side (op_host/ascend/package/op_host/hyper_parallel_moe.cpp)
// compiled against the project's host-API stubs: the OpDef MindSpore's ops.Custom("aclnnHyperParallelMoe")
// relies on, InferShape / InferDataType, and the tiling function on a real compiled SSC (golden file).
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <string>
#include <fstream>
#include <iterator>
#include <vector>

#include "register/op_def_registry.h"

#include "../../op_host/ssc_loader.h"
#include "../../op_kernel/ascend/ascend_tiling.h"

namespace {

std::vector<uint8_t> ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), {});
}

std::vector<std::string> Names(const std::vector<ops::OpParamDef>& v) {
  std::vector<std::string> out;
  for (const auto& p : v) out.push_back(p.name);
  return out;
}

TEST(OpPackage, RegistersHyperParallelMoeForAclnn) {
  auto it = ops::Registry().find("HyperParallelMoe");
  ASSERT_NE(it, ops::Registry().end());  // aclnn generates aclnnHyperParallelMoe from this type name
  const ops::OpDef& def = *it->second;
  EXPECT_EQ(Names(def.inputs), (std::vector<std::string>{"x", "w1", "w2", "topk_ids", "topk_weights", "dy",
                                                         "send_rows", "send_counts", "token_rows", "ssc", "epoch"}));
  EXPECT_EQ(Names(def.outputs), (std::vector<std::string>{"y", "dx", "dw1", "dw2", "dtopk_weights"}));
  EXPECT_TRUE(def.inputs[9].value_depend);   // the tiling function validates the SSC bytes on the host
  EXPECT_TRUE(def.inputs[10].value_depend);
  EXPECT_TRUE(def.inputs[5].optional);       // dy: backward only
  EXPECT_EQ(def.mc2.group_attr, "group");
  EXPECT_NE(def.aicore.tiling, nullptr);
  EXPECT_EQ(def.aicore.socs, (std::vector<std::string>{"ascend910b", "ascend910_93"}));
  // The kernel's tensor arguments are the inputs then the outputs, minus ssc/epoch (hpmoe::ascend::kTensorArgSlots).
  EXPECT_EQ(def.inputs.size() - 2 + def.outputs.size(), hpmoe::ascend::kNumTensorArgs);
}

TEST(OpPackage, InferShapeAndDataType) {
  const ops::OpDef& def = *ops::Registry().at("HyperParallelMoe");
  gert::InferShapeContext s;
  s.inputs.resize(11);
  s.inputs[0].dims_ = {64, 32};
  s.inputs[1].dims_ = {2, 32, 48};
  s.inputs[2].dims_ = {2, 24, 32};
  s.inputs[4].dims_ = {64, 2};
  s.outputs.resize(5);
  ASSERT_EQ(def.infer_shape(&s), ge::GRAPH_SUCCESS);
  EXPECT_EQ(s.outputs[0].dims_, (std::vector<int64_t>{64, 32}));
  EXPECT_EQ(s.outputs[1].dims_, (std::vector<int64_t>{64, 32}));
  EXPECT_EQ(s.outputs[2].dims_, (std::vector<int64_t>{2, 32, 48}));
  EXPECT_EQ(s.outputs[3].dims_, (std::vector<int64_t>{2, 24, 32}));
  EXPECT_EQ(s.outputs[4].dims_, (std::vector<int64_t>{64, 2}));
  gert::InferDataTypeContext d;
  d.inputs.assign(11, ge::DT_BF16);
  d.outputs.resize(5);
  ASSERT_EQ(def.infer_dtype(&d), ge::GRAPH_SUCCESS);
  EXPECT_EQ(d.outputs, (std::vector<ge::DataType>{ge::DT_BF16, ge::DT_BF16, ge::DT_FLOAT, ge::DT_FLOAT, ge::DT_FLOAT}));
}

struct TilingCase {
  std::vector<uint8_t> ssc;
  hpmoe::ssc::SscConfig cfg{};
  uint32_t events = 0;
  int64_t epoch = 3;
  gert::TilingContext ctx;

  explicit TilingCase(const std::string& file) : ssc(ReadFile(file)) {
    hpmoe::ssc::LoadedSsc loaded;
    hpmoe::ssc::LoadExpect expect;
    expect.rank = 0;
    EXPECT_EQ(hpmoe::ssc::LoadSsc(ssc.data(), ssc.size(), expect, &loaded), "");
    cfg = loaded.view.config();
    events = loaded.view.num_events;
    ctx.platform = {25, 50};
    const int64_t T = cfg.tokens, h = cfg.hidden, I = cfg.inter, E = cfg.experts_per_rank, k = cfg.topk;
    const std::vector<std::vector<int64_t>> shapes = {{T, h}, {E, h, 2 * I}, {E, I, h}, {T, k}, {T, k}, {T, h},
                                                      {int64_t(cfg.ep), int64_t(cfg.recv_rows_per_src)},
                                                      {int64_t(cfg.ep), E}, {T, k}};
    ctx.inputs.resize(11);
    for (size_t i = 0; i < shapes.size(); ++i) ctx.inputs[i].shape.dims_ = shapes[i];
    ctx.values.resize(11);
    ctx.values[9] = {ssc.data(), int64_t(ssc.size())};
    ctx.values[10] = {&epoch, 1};
    ctx.inputs[5].present = false;  // dy: absent in forward, so instance indices after it shift
    // group (string), rank, direction, counters, window nonce, timeout
    ctx.attrs.ints = {0, 0, 0, events, events, 0x1234567890ABLL, 5000};
    ctx.attrs.strs = {"ep_group"};
  }
  ge::graphStatus Run() { return ops::Registry().at("HyperParallelMoe")->aicore.tiling(&ctx); }
};

const std::string kGolden = HPMOE_GOLDEN_DIR "/small_ep2_rank0.fwd.ssc";

TEST(OpPackage, TilingValidatesTheSscAndSizesTheLaunch) {
  TilingCase c(kGolden);
  ASSERT_EQ(c.Run(), ge::GRAPH_SUCCESS);
  EXPECT_EQ(c.ctx.block_dim, c.cfg.num_aic);
  EXPECT_EQ(c.ctx.schedule_mode, 1u);
  ASSERT_EQ(c.ctx.workspace.size(), 1u);
  // GetLibApiWorkSpaceSize() (the system part, 16 MiB) + one report line per worker.
  EXPECT_EQ(c.ctx.workspace[0], (16u << 20) + (c.cfg.num_aic + c.cfg.num_aiv) * hpmoe::ascend::kReportBytes);
  ASSERT_EQ(c.ctx.tiling.size, sizeof(hpmoe::ascend::KernelTiling));
  hpmoe::ascend::KernelTiling t;
  std::memcpy(&t, c.ctx.tiling.bytes.data(), sizeof(t));
  EXPECT_EQ(t.magic, hpmoe::ascend::kTilingMagic);
  EXPECT_EQ(t.invocation, 3u);
  EXPECT_EQ(t.num_blocks, c.cfg.num_aic);
  EXPECT_EQ(t.timeout_cycles, 5000u * 50000u);
  EXPECT_EQ(t.signal_one[0], 1);
  EXPECT_EQ(t.counter_offset % 64, 0u);
  EXPECT_EQ(t.first_use, 0u);  // invocation 3: the windows were set up by invocation 1
  EXPECT_EQ(uint32_t(t.hello[0]), 0x567890ABu);
  EXPECT_EQ(uint32_t(t.hello[1]), 0x1234u);
  EXPECT_EQ(t.hello[2], 1);
  uint32_t mark;
  std::memcpy(&mark, t.mc2_init.reserved, 4);
  EXPECT_EQ(mark, 0x3243434Du);  // Mc2CcTilingConfig::GetTiling filled the MC2 blocks
  EXPECT_EQ(offsetof(hpmoe::ascend::KernelTiling, mc2_init), 0u);
  // Every GEMM kind has a tiling the Matmul stub accepts (baseM/baseN/baseK within L0A/L0B/L0C).
  for (const hpmoe::ascend::GemmTiling& g : t.gemm) {
    EXPECT_GT(g.baseM, 0);
    EXPECT_EQ(g.baseM % 16, 0);
    EXPECT_EQ(g.baseN % 16, 0);
    EXPECT_LE(int64_t(g.baseM) * g.baseN * 4, 128 * 1024);
  }
}

// CANN numbers present inputs by instance: with dy absent, instance 6 is send_counts. A tiling function that
// read send_rows by GetInputShape(6) (the pre-issue-18 code) would check the wrong tensor; the stub shows it.
TEST(OpPackage, OptionalInputsShiftInstanceIndices) {
  TilingCase c(kGolden);
  const gert::StorageShape* by_instance = c.ctx.GetInputShape(6);
  const gert::StorageShape* by_ir = c.ctx.GetRequiredInputShape(6);
  ASSERT_NE(by_instance, nullptr);
  EXPECT_EQ(by_instance, &c.ctx.inputs[7]);  // send_counts
  EXPECT_EQ(by_ir, &c.ctx.inputs[6]);        // send_rows
  EXPECT_EQ(c.ctx.GetInputTensor(9), &c.ctx.values[10]);  // instance 9 is epoch, not ssc
  EXPECT_EQ(c.ctx.GetOptionalInputShape(5), nullptr);
  ASSERT_EQ(c.Run(), ge::GRAPH_SUCCESS);  // the op's tiling reads by IR index
}

TEST(OpPackage, TilingNamesHcclBuffsizeWhenTheWindowIsTooSmall) {
  TilingCase c(kGolden);
  ::setenv("HCCL_BUFFSIZE", "0", 1);
  testing::internal::CaptureStderr();
  const ge::graphStatus st = c.Run();
  const std::string err = testing::internal::GetCapturedStderr();
  ::unsetenv("HCCL_BUFFSIZE");
  EXPECT_EQ(st, ge::GRAPH_FAILED);
  EXPECT_NE(err.find("HCCL_BUFFSIZE"), std::string::npos) << err;
}

TEST(OpPackage, TilingRefusesBadInputsInOneLine) {
  {
    TilingCase c(kGolden);
    c.ssc[c.ssc.size() / 2] ^= 0x10;  // corrupted file: the shared loader refuses it
    EXPECT_EQ(c.Run(), ge::GRAPH_FAILED);
  }
  {
    TilingCase c(kGolden);
    c.ctx.platform = {1, 2};  // fewer AI cores than the SSC's workers
    EXPECT_EQ(c.Run(), ge::GRAPH_FAILED);
  }
  {
    TilingCase c(kGolden);
    c.epoch = 0;  // invocations count from 1
    EXPECT_EQ(c.Run(), ge::GRAPH_FAILED);
  }
  {
    TilingCase c(kGolden);
    c.ctx.attrs.ints[5] = 0;  // no window nonce: the handshake could not tell a hello from a zeroed window
    EXPECT_EQ(c.Run(), ge::GRAPH_FAILED);
  }
  {
    TilingCase c(kGolden);
    c.ctx.inputs[0].shape.dims_[1] += 1;  // x of another hidden size
    EXPECT_EQ(c.Run(), ge::GRAPH_FAILED);
  }
  {
    TilingCase c(kGolden);
    c.ctx.attrs.ints[1] = 1;  // rank 1 given rank 0's file
    EXPECT_EQ(c.Run(), ge::GRAPH_FAILED);
  }
  {
    TilingCase c(kGolden);
    c.ctx.inputs[5].present = true;  // dy given to a forward call
    EXPECT_EQ(c.Run(), ge::GRAPH_FAILED);
  }
}

}  // namespace
