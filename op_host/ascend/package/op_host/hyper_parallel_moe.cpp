// The HyperParallelMoe custom op (msopgen layout): OpDef registration, InferShape / InferDataType, and the
// tiling function. aclnn names the generated API after the op type: aclnnHyperParallelMoe(GetWorkspaceSize).
// One call runs one direction of one EP rank (attribute `direction`); docs/ascend.md lists every input and
// output. Built by build_package.sh against CANN; in CI it compiles against the project's host-API stubs
// (op_host/ascend/stub_host) and tests/ascend/op_package_test.cpp calls it.
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "register/op_def_registry.h"
#include "tiling/platform/platform_ascendc.h"
#include "tiling/hccl/mc2_tiling.h"

#include "../../tiling_builder.h"  // op_host/ascend/tiling_builder.h

namespace hpmoe_op {

// Input and output indices in the OpDef's (IR) order; the kernel's arguments follow the same order. Inputs
// are read by IR index (GetRequiredInput* / GetOptionalInput*): an absent optional input (dy in forward)
// has no instance, so instance indices of the inputs after it would shift.
enum Input : size_t { kX, kW1, kW2, kTopkIds, kTopkWeights, kDy, kSendRows, kSendCounts, kTokenRows, kSsc, kEpoch };
enum Output : size_t { kY, kDx, kDW1, kDW2, kDTopkWeights };
enum Attr : size_t {
  kAttrGroup, kAttrRank, kAttrDirection, kAttrCountersFwd, kAttrCountersBwd, kAttrWindowNonce, kAttrTimeoutMs
};

ge::graphStatus Fail(const char* node, const std::string& why) {
  std::fprintf(stderr, "%s: %s\n", node, why.c_str());
  return ge::GRAPH_FAILED;
}

int64_t IntAttr(const gert::RuntimeAttrs* attrs, size_t i) {
  const int64_t* v = attrs == nullptr ? nullptr : attrs->GetAttrPointer<int64_t>(i);
  return v == nullptr ? -1 : *v;
}

// Checks that a tensor has exactly `dims`; names it on failure.
std::string CheckShape(const gert::TilingContext* ctx, size_t input, const char* name,
                       std::initializer_list<int64_t> dims) {
  const gert::StorageShape* s = ctx->GetRequiredInputShape(input);
  if (s == nullptr) return std::string(name) + " is missing";
  const gert::Shape& shape = s->GetStorageShape();
  bool same = shape.GetDimNum() == dims.size();
  size_t i = 0;
  for (int64_t d : dims) same = same && shape.GetDim(i++) == d;
  return same ? "" : std::string(name) + " does not have the shape the SSC was compiled for";
}

std::string GroupName(const gert::RuntimeAttrs* attrs) {
  const char* g = attrs == nullptr ? nullptr : attrs->GetAttrPointer<char>(kAttrGroup);
  return g == nullptr ? std::string() : std::string(g);
}
constexpr uint32_t kMc2OpType = HCCL_CMD_BATCH_WRITE;

// The HCCL window of each rank: HCCL_BUFFSIZE MiB (HCCL's documented default 200).
uint64_t HcclWindowBytes() {
  const char* env = std::getenv("HCCL_BUFFSIZE");
  const long long mib = env != nullptr && *env != '\0' ? std::atoll(env) : 200;
  return mib > 0 ? uint64_t(mib) << 20 : 0;
}

ge::graphStatus TilingFunc(gert::TilingContext* ctx) {
  const char* node = ctx->GetNodeName();
  const platform_ascendc::PlatformAscendC platform(ctx->GetPlatformInfo());
  const gert::Tensor* ssc = ctx->GetRequiredInputTensor(kSsc);
  const gert::Tensor* epoch = ctx->GetRequiredInputTensor(kEpoch);
  if (ssc == nullptr || epoch == nullptr || epoch->GetShapeSize() != 1)
    return Fail(node, "the ssc and epoch inputs must be value-depend tensors (epoch: one int64)");
  const gert::RuntimeAttrs* attrs = ctx->GetAttrs();
  hpmoe::ascend::TilingRequest req;
  req.ssc = ssc->GetData<uint8_t>();
  req.ssc_bytes = size_t(ssc->GetShapeSize());
  req.rank = uint32_t(IntAttr(attrs, kAttrRank));
  req.direction = uint32_t(IntAttr(attrs, kAttrDirection));
  req.invocation = uint32_t(*epoch->GetData<int64_t>());
  req.counters_fwd = uint32_t(IntAttr(attrs, kAttrCountersFwd));
  req.counters_bwd = uint32_t(IntAttr(attrs, kAttrCountersBwd));
  req.timeout_ms = uint64_t(IntAttr(attrs, kAttrTimeoutMs));
  req.window_nonce = uint64_t(IntAttr(attrs, kAttrWindowNonce));
  req.core_num_aic = platform.GetCoreNumAic();
  req.core_num_aiv = platform.GetCoreNumAiv();
  req.lib_workspace_bytes = platform.GetLibApiWorkSpaceSize();
  req.window_bytes = HcclWindowBytes();
  if (req.direction > 1) return Fail(node, "direction must be 0 (forward) or 1 (backward)");
  if ((ctx->GetOptionalInputShape(kDy) != nullptr) != (req.direction == 1))
    return Fail(node, "dy must be given in backward (direction 1) and only there");
  hpmoe::ascend::TilingResult result;
  std::string err = hpmoe::ascend::BuildTiling(req, &result);
  if (!err.empty()) return Fail(node, err);
  // The MC2 blocks the kernel's Hccl::Init / SetCcTiling read (first in the tiling data).
  Mc2CcTilingConfig mc2(GroupName(attrs), kMc2OpType, "");
  if (mc2.GetTiling(result.tiling.mc2_init) != 0 || mc2.GetTiling(result.tiling.mc2_cc) != 0)
    return Fail(node, "the MC2 tiling of communication group '" + GroupName(attrs) + "' could not be built");
  const hpmoe::ssc::SscConfig& c = result.tiling.config;
  const int64_t T = c.tokens, h = c.hidden, I = c.inter, E = c.experts_per_rank, k = c.topk;
  const int64_t C = c.recv_rows_per_src, ep = c.ep;
  for (const std::string& e : {CheckShape(ctx, kX, "x", {T, h}), CheckShape(ctx, kW1, "w1", {E, h, 2 * I}),
                               CheckShape(ctx, kW2, "w2", {E, I, h}), CheckShape(ctx, kTopkIds, "topk_ids", {T, k}),
                               CheckShape(ctx, kTopkWeights, "topk_weights", {T, k}),
                               CheckShape(ctx, kSendRows, "send_rows", {ep, C}),
                               CheckShape(ctx, kSendCounts, "send_counts", {ep, E}),
                               CheckShape(ctx, kTokenRows, "token_rows", {T, k})}) {
    if (!e.empty()) return Fail(node, e);
  }
  ctx->SetBlockDim(result.block_dim);           // AI cores: each runs 1 AIC + 2 AIV workers (MIX_AIC_1_2)
  ctx->SetScheduleMode(result.schedule_mode);   // batch mode: every core resident (workers wait on each other)
  size_t* workspace = ctx->GetWorkspaceSizes(1);
  workspace[0] = size_t(result.workspace_bytes);
  gert::TilingData* raw = ctx->GetRawTilingData();
  if (raw->GetCapacity() < sizeof(result.tiling)) return Fail(node, "tiling data capacity too small");
  std::memcpy(raw->GetData(), &result.tiling, sizeof(result.tiling));
  raw->SetDataSize(sizeof(result.tiling));
  return ge::GRAPH_SUCCESS;
}

ge::graphStatus InferShape(gert::InferShapeContext* ctx) {
  const gert::Shape* x = ctx->GetInputShape(kX);
  const gert::Shape* sources[] = {x, x, ctx->GetInputShape(kW1), ctx->GetInputShape(kW2),
                                  ctx->GetInputShape(kTopkWeights)};
  for (size_t o = 0; o < 5; ++o) {
    gert::Shape* out = ctx->GetOutputShape(o);
    if (out == nullptr || sources[o] == nullptr) return ge::GRAPH_FAILED;
    *out = *sources[o];
  }
  return ge::GRAPH_SUCCESS;
}

ge::graphStatus InferDataType(gert::InferDataTypeContext* ctx) {
  const ge::DataType act = ctx->GetInputDataType(kX);
  const ge::DataType types[] = {act, act, ge::DT_FLOAT, ge::DT_FLOAT, ge::DT_FLOAT};  // gradients of weights in fp32
  for (size_t o = 0; o < 5; ++o) {
    if (ctx->SetOutputDataType(o, types[o]) != ge::GRAPH_SUCCESS) return ge::GRAPH_FAILED;
  }
  return ge::GRAPH_SUCCESS;
}

}  // namespace hpmoe_op

namespace ops {

class HyperParallelMoe : public OpDef {
 public:
  explicit HyperParallelMoe(const char* name) : OpDef(name) {
    const std::vector<ge::DataType> act = {ge::DT_FLOAT16, ge::DT_BF16, ge::DT_FLOAT};
    auto same = [](ge::DataType d) { return std::vector<ge::DataType>{d, d, d}; };
    const std::vector<ge::Format> nd = {ge::FORMAT_ND, ge::FORMAT_ND, ge::FORMAT_ND};
    this->Input("x").ParamType(REQUIRED).DataType(act).Format(nd);
    this->Input("w1").ParamType(REQUIRED).DataType(act).Format(nd);
    this->Input("w2").ParamType(REQUIRED).DataType(act).Format(nd);
    this->Input("topk_ids").ParamType(REQUIRED).DataType(same(ge::DT_INT32)).Format(nd);
    this->Input("topk_weights").ParamType(REQUIRED).DataType(same(ge::DT_FLOAT)).Format(nd);
    this->Input("dy").ParamType(OPTIONAL).DataType(act).Format(nd);  // backward only
    this->Input("send_rows").ParamType(REQUIRED).DataType(same(ge::DT_INT32)).Format(nd);
    this->Input("send_counts").ParamType(REQUIRED).DataType(same(ge::DT_INT32)).Format(nd);
    this->Input("token_rows").ParamType(REQUIRED).DataType(same(ge::DT_INT32)).Format(nd);
    this->Input("ssc").ParamType(REQUIRED).DataType(same(ge::DT_UINT8)).Format(nd).ValueDepend(REQUIRED);
    this->Input("epoch").ParamType(REQUIRED).DataType(same(ge::DT_INT64)).Format(nd).ValueDepend(REQUIRED);
    this->Output("y").ParamType(REQUIRED).DataType(act).Format(nd);
    this->Output("dx").ParamType(REQUIRED).DataType(act).Format(nd);
    this->Output("dw1").ParamType(REQUIRED).DataType(same(ge::DT_FLOAT)).Format(nd);
    this->Output("dw2").ParamType(REQUIRED).DataType(same(ge::DT_FLOAT)).Format(nd);
    this->Output("dtopk_weights").ParamType(REQUIRED).DataType(same(ge::DT_FLOAT)).Format(nd);
    this->Attr("group").AttrType(REQUIRED).String();  // the EP communication group (HCCL window = symmetric region)
    this->Attr("rank").AttrType(REQUIRED).Int();
    this->Attr("direction").AttrType(REQUIRED).Int();  // 0 forward, 1 backward
    this->Attr("counters_fwd").AttrType(REQUIRED).Int();
    this->Attr("counters_bwd").AttrType(REQUIRED).Int();
    // Agreed by the EP group on the host, fresh for every set-up of its windows (kernel: window_setup.h).
    this->Attr("window_nonce").AttrType(REQUIRED).Int();
    this->Attr("timeout_ms").AttrType(OPTIONAL).Int(30000);
    this->SetInferShape(hpmoe_op::InferShape).SetInferDataType(hpmoe_op::InferDataType);
    this->AICore().SetTiling(hpmoe_op::TilingFunc).AddConfig("ascend910b").AddConfig("ascend910_93");
    this->MC2().HcclGroup("group");
  }
};

OP_ADD(HyperParallelMoe);

}  // namespace ops
