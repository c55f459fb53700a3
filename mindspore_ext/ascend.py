"""On device_target="Ascend" the cell calls the AscendC op of op_kernel/ascend through
ops.Custom("aclnnHyperParallelMoe", func_type="aot"); where its op package is not installed, construction
fails with one line saying how to build and install it."""
from __future__ import annotations

import os
from pathlib import Path

from hpmoe.errors import HpmoeError

ACLNN_OP = "aclnnHyperParallelMoe"


def on_ascend_device() -> bool:
    import mindspore as ms

    return ms.get_context("device_target") == "Ascend"


def ascend_op_installed() -> bool:
    """CANN finds custom op packages under $ASCEND_CUSTOM_OPP_PATH (':'-separated); ours ships the aclnn
    header and library of ACLNN_OP there."""
    for root in filter(None, os.environ.get("ASCEND_CUSTOM_OPP_PATH", "").split(":")):
        if any(Path(root).glob(f"**/*{ACLNN_OP[len('aclnn'):].lower()}*")) or any(Path(root).glob(f"**/{ACLNN_OP}*")):
            return True
    return False


def require_ascend_op() -> None:
    if not ascend_op_installed():
        raise HpmoeError(f"hpmoe.mindspore: the Ascend op {ACLNN_OP} is not installed: build and install its "
                         "op package from op_kernel/ascend + op_host/ascend (see their README) and source its "
                         "set_env.bash so that ASCEND_CUSTOM_OPP_PATH names it")
