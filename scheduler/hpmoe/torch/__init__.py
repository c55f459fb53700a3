"""PyTorch entry point: `hpmoe.torch.moe_ffn` / `MoEFFN` (custom ops hpmoe::moe_ffn_fwd/bwd), backed by the
CUDA backend's persistent kernels. PyTorch is imported here and nowhere else in hpmoe (`import hpmoe` does not
need it)."""
from .moe_ffn import MoEFFN, moe_ffn
from .runtime import MoeFfnRuntime

__all__ = ["MoEFFN", "MoeFfnRuntime", "moe_ffn"]
