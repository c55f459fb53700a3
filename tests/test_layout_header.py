"""op_kernel/ssc_layout.h and scheduler/hpmoe/ssc_format.py describe the same bytes."""
from __future__ import annotations

from hpmoe import ssc_format as F


def test_record_sizes_match(layout_probe):
    probe = layout_probe
    expected = {"SscConfig": F.CONFIG_DTYPE, "SscSection": F.SECTION_DTYPE, "SscHeader": F.HEADER_DTYPE,
                "SscTensor": F.TENSOR_DTYPE, "SscTensorRef": F.REF_DTYPE, "SscTask": F.TASK_DTYPE,
                "SscEvent": F.EVENT_DTYPE, "SscQueue": F.QUEUE_DTYPE, "SscTiling": F.TILING_DTYPE}
    for name, dtype in expected.items():
        assert probe[f"sizeof.{name}"] == dtype.itemsize, f"{name}: header {probe[f'sizeof.{name}']} != {dtype.itemsize}"


def test_field_offsets_match(layout_probe):
    probe = layout_probe
    dtypes = {"SscConfig": F.CONFIG_DTYPE, "SscHeader": F.HEADER_DTYPE, "SscTensor": F.TENSOR_DTYPE,
              "SscTensorRef": F.REF_DTYPE, "SscTask": F.TASK_DTYPE, "SscEvent": F.EVENT_DTYPE,
              "SscQueue": F.QUEUE_DTYPE, "SscTiling": F.TILING_DTYPE}
    checked = 0
    for key, value in probe.items():
        if not key.startswith("offset."):
            continue
        _, record, field = key.split(".")
        assert dtypes[record].fields[field][1] == value, f"{record}.{field}: header {value}, python {dtypes[record].fields[field][1]}"
        checked += 1
    assert checked > 50


def test_constants_and_enum_counts_match(layout_probe):
    probe = layout_probe
    expected = {
        "kMagic": F.MAGIC, "kVersionMajor": F.VERSION_MAJOR, "kVersionMinor": F.VERSION_MINOR,
        "kMaxInputs": F.MAX_INPUTS, "kMaxOutputs": F.MAX_OUTPUTS, "kMaxWaits": F.MAX_WAITS,
        "kMaxTriggers": F.MAX_TRIGGERS, "kMaxTensorDims": F.MAX_TENSOR_DIMS, "kTensorNameBytes": F.TENSOR_NAME_BYTES,
        "kNoEvent": F.NO_EVENT, "kNoSlot": F.NO_SLOT, "kCounterStrideBytes": F.COUNTER_STRIDE_BYTES,
        "kTaskTypeCount": len(F.TaskType), "kSlotCount": len(F.Slot), "kSectionCount": len(F.Section),
        "kTensorSymmetric": F.TENSOR_SYMMETRIC, "kRefRemote": F.REF_REMOTE, "kRefRowsDynamic": F.REF_ROWS_DYNAMIC,
        "kRefGather": F.REF_GATHER, "kEventRemoteTriggered": F.EVENT_REMOTE_TRIGGERED,
        "kConfigRatr": F.CONFIG_RATR, "kConfigInterleave": F.CONFIG_INTERLEAVE,
        "kConfigMixedQueues": F.CONFIG_MIXED_QUEUES,
        "kConfigRowPipelines": F.CONFIG_ROW_PIPELINES, "kConfigClaimPool": F.CONFIG_CLAIM_POOL,
        "kConfigWeightsTransposed": F.CONFIG_WEIGHTS_TRANSPOSED, "kConfigFusedSwiglu": F.CONFIG_FUSED_SWIGLU,
        "kConfigExpertAligned": F.CONFIG_EXPERT_ALIGNED,
        "kFusedSwigluGroup": F.FUSED_SWIGLU_GROUP,
        "kPoolQueue": int(F.QueueType.POOL),
    }
    for name, value in expected.items():
        assert probe[f"value.{name}"] == value, f"{name}: header {probe[f'value.{name}']}, python {value}"
