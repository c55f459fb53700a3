"""PyTorch entry point: `hpmoe.torch.MoEFFN`, backed by the CUDA backend's persistent kernels. PyTorch is
imported here and nowhere else in hpmoe (`import hpmoe` does not need it)."""
from .moe_ffn import MoEFFN, MoeFfnFunction, MoeFfnRuntime, moe_ffn

__all__ = ["MoEFFN", "MoeFfnFunction", "MoeFfnRuntime", "moe_ffn"]
