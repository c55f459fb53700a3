// Project-written stand-in for CANN's op_host registration and context headers (no CANN here): only what
// op_host/ascend/package/op_host/hyper_parallel_moe.cpp uses, with the documented shapes, recording the
// definition so tests can read it back. Doc pages (asc-devkit, docs/zh/api/...): 算子原型定义/OpDef.md,
// OpParamDef.md (ParamType, DataType, Format, ValueDepend), OpAttrDef.md, OpAICoreDef.md (SetTiling,
// AddConfig), OpMC2Def.md (HcclGroup); TilingContext.md (SetBlockDim, SetScheduleMode, GetWorkspaceSizes,
// GetRawTilingData, GetInputTensor, GetAttrs), InferShapeContext.md, InferDataTypeContext.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

namespace ge {
enum DataType : int32_t { DT_FLOAT = 0, DT_FLOAT16 = 1, DT_INT32 = 3, DT_UINT8 = 4, DT_INT64 = 9, DT_BF16 = 27 };
enum Format : int32_t { FORMAT_ND = 2 };
using graphStatus = uint32_t;
constexpr graphStatus GRAPH_SUCCESS = 0;
constexpr graphStatus GRAPH_FAILED = 0xFFFFFFFFu;
}  // namespace ge

namespace fe {
struct PlatFormInfos {  // what the stub platform reports
  uint32_t core_num_aic = 0;
  uint32_t core_num_aiv = 0;
};
}  // namespace fe

namespace gert {

class Shape {
 public:
  size_t GetDimNum() const { return dims_.size(); }
  int64_t GetDim(size_t i) const { return dims_[i]; }
  void SetDimNum(size_t n) { dims_.resize(n, 0); }
  void SetDim(size_t i, int64_t v) { dims_[i] = v; }
  std::vector<int64_t> dims_;
};

class StorageShape {
 public:
  const Shape& GetStorageShape() const { return shape; }
  const Shape& GetOriginShape() const { return shape; }
  Shape shape;
  bool present = true;  // false: an OPTIONAL input the caller left out (it has no instance)
};

class Tensor {
 public:
  template <class T>
  const T* GetData() const { return reinterpret_cast<const T*>(data); }
  int64_t GetShapeSize() const { return size; }  // elements
  const void* data = nullptr;
  int64_t size = 0;
};

class RuntimeAttrs {
 public:
  template <class T>
  const T* GetAttrPointer(size_t i) const {
    if constexpr (std::is_same<T, char>::value) {
      return i < strs.size() ? strs[i].c_str() : nullptr;
    } else {
      return i < ints.size() ? reinterpret_cast<const T*>(&ints[i]) : nullptr;
    }
  }
  std::vector<int64_t> ints;  // the op's attributes in declaration order
  std::vector<std::string> strs;  // string attributes by the same index (GetAttrPointer<char>)
};

class TilingData {
 public:
  void* GetData() { return bytes.data(); }
  size_t GetCapacity() const { return bytes.size(); }
  void SetDataSize(size_t n) { size = n; }
  std::vector<uint8_t> bytes = std::vector<uint8_t>(64 * 1024);
  size_t size = 0;
};

// Inputs have two numberings (TilingContext.md): GetInputShape / GetInputTensor take the INSTANCE index, which
// skips optional inputs the caller left out; GetRequired* / GetOptional* take the IR index (the order of the
// OpDef). `inputs` and `values` here are IR-indexed; `present` marks which inputs have instances.
class TilingContext {
 public:
  fe::PlatFormInfos* GetPlatformInfo() { return &platform; }
  const StorageShape* GetInputShape(size_t instance) const {
    const size_t ir = IrIndex(instance);
    return ir < inputs.size() ? &inputs[ir] : nullptr;
  }
  const Tensor* GetInputTensor(size_t instance) const { return Value(IrIndex(instance)); }
  const StorageShape* GetRequiredInputShape(size_t ir) const { return ir < inputs.size() ? &inputs[ir] : nullptr; }
  const StorageShape* GetOptionalInputShape(size_t ir) const {
    return ir < inputs.size() && inputs[ir].present ? &inputs[ir] : nullptr;
  }
  const Tensor* GetRequiredInputTensor(size_t ir) const { return Value(ir); }
  const Tensor* GetOptionalInputTensor(size_t ir) const {
    return ir < inputs.size() && inputs[ir].present ? Value(ir) : nullptr;
  }
  const RuntimeAttrs* GetAttrs() const { return &attrs; }
  void SetBlockDim(uint32_t n) { block_dim = n; }
  ge::graphStatus SetScheduleMode(uint32_t m) { schedule_mode = m; return ge::GRAPH_SUCCESS; }
  size_t* GetWorkspaceSizes(size_t n) { workspace.resize(n, 0); return workspace.data(); }
  TilingData* GetRawTilingData() { return &tiling; }
  const char* GetNodeName() const { return "HyperParallelMoe"; }

  size_t IrIndex(size_t instance) const {
    for (size_t ir = 0; ir < inputs.size(); ++ir) {
      if (!inputs[ir].present) continue;
      if (instance-- == 0) return ir;
    }
    return inputs.size();
  }
  const Tensor* Value(size_t ir) const { return ir < values.size() && values[ir].data ? &values[ir] : nullptr; }

  fe::PlatFormInfos platform;
  std::vector<StorageShape> inputs;
  std::vector<Tensor> values;  // ValueDepend inputs
  RuntimeAttrs attrs;
  uint32_t block_dim = 0, schedule_mode = 0;
  std::vector<size_t> workspace;
  TilingData tiling;
};

class InferShapeContext {
 public:
  const Shape* GetInputShape(size_t i) const { return i < inputs.size() ? &inputs[i] : nullptr; }
  Shape* GetOutputShape(size_t i) { return i < outputs.size() ? &outputs[i] : nullptr; }
  const RuntimeAttrs* GetAttrs() const { return &attrs; }
  std::vector<Shape> inputs, outputs;
  RuntimeAttrs attrs;
};

class InferDataTypeContext {
 public:
  ge::DataType GetInputDataType(size_t i) const { return inputs[i]; }
  ge::graphStatus SetOutputDataType(size_t i, ge::DataType d) {
    if (i >= outputs.size()) return ge::GRAPH_FAILED;
    outputs[i] = d;
    return ge::GRAPH_SUCCESS;
  }
  std::vector<ge::DataType> inputs, outputs;
};

}  // namespace gert

namespace ops {

enum Option { REQUIRED = 0, OPTIONAL = 1 };

class OpParamDef {
 public:
  OpParamDef& ParamType(Option o) { optional = o == OPTIONAL; return *this; }
  OpParamDef& DataType(std::vector<ge::DataType> d) { dtypes = std::move(d); return *this; }
  OpParamDef& Format(std::vector<ge::Format> f) { formats = std::move(f); return *this; }
  OpParamDef& UnknownShapeFormat(std::vector<ge::Format> f) { formats = std::move(f); return *this; }
  OpParamDef& ValueDepend(Option) { value_depend = true; return *this; }
  std::string name;
  bool optional = false, value_depend = false;
  std::vector<ge::DataType> dtypes;
  std::vector<ge::Format> formats;
};

class OpAttrDef {
 public:
  OpAttrDef& AttrType(Option o) { optional = o == OPTIONAL; return *this; }
  OpAttrDef& Int(int64_t v = 0) { kind = "int"; int_default = v; return *this; }
  OpAttrDef& String(const char* v = "") { kind = "string"; str_default = v; return *this; }
  std::string name, kind, str_default;
  bool optional = false;
  int64_t int_default = 0;
};

using TilingFunc = ge::graphStatus (*)(gert::TilingContext*);
using InferShapeFunc = ge::graphStatus (*)(gert::InferShapeContext*);
using InferDataTypeFunc = ge::graphStatus (*)(gert::InferDataTypeContext*);

class OpAICoreConfig {};
class OpAICoreDef {
 public:
  OpAICoreDef& SetTiling(TilingFunc f) { tiling = f; return *this; }
  OpAICoreDef& AddConfig(const char* soc) { socs.push_back(soc); return *this; }
  OpAICoreDef& AddConfig(const char* soc, OpAICoreConfig&) { return AddConfig(soc); }
  TilingFunc tiling = nullptr;
  std::vector<std::string> socs;
};

class OpMC2Def {
 public:
  OpMC2Def& HcclGroup(const char* attr) { group_attr = attr; return *this; }
  std::string group_attr;
};

class OpDef {
 public:
  explicit OpDef(const char* name) : name_(name) {}
  virtual ~OpDef() = default;
  OpParamDef& Input(const char* n) { inputs.emplace_back(); inputs.back().name = n; return inputs.back(); }
  OpParamDef& Output(const char* n) { outputs.emplace_back(); outputs.back().name = n; return outputs.back(); }
  OpAttrDef& Attr(const char* n) { attrs.emplace_back(); attrs.back().name = n; return attrs.back(); }
  OpDef& SetInferShape(InferShapeFunc f) { infer_shape = f; return *this; }
  OpDef& SetInferDataType(InferDataTypeFunc f) { infer_dtype = f; return *this; }
  OpAICoreDef& AICore() { return aicore; }
  OpMC2Def& MC2() { return mc2; }
  const std::string& name() const { return name_; }

  std::vector<OpParamDef> inputs, outputs;
  std::vector<OpAttrDef> attrs;
  InferShapeFunc infer_shape = nullptr;
  InferDataTypeFunc infer_dtype = nullptr;
  OpAICoreDef aicore;
  OpMC2Def mc2;

 private:
  std::string name_;
};

// What OP_ADD registered, by op type name (the aclnn API is named aclnn<OpType>).
inline std::map<std::string, std::shared_ptr<OpDef>>& Registry() {
  static std::map<std::string, std::shared_ptr<OpDef>> registry;
  return registry;
}

}  // namespace ops

#define OP_ADD(OpType) \
  static const bool g_op_add_##OpType = (::ops::Registry()[#OpType] = std::make_shared<OpType>(#OpType), true)
