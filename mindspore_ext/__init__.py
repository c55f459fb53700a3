"""hpmoe.mindspore: the MoE-FFN as a MindSpore nn.Cell (HyperParallelMoEFFN) and a reference built from
standard MindSpore ops. Importing this module imports MindSpore; `import hpmoe` alone never does."""
from .moe_ffn import HyperParallelMoEFFN  # noqa: F401
