"""Performance model of Ascend A3 for SSC groups (issue 4): every latency it produces is a prediction.

Modules, one concern each: hw (parameters), routing (row counts), workload (per-task work from SSC records),
memory (L2 LRU and bandwidth reservations), engine (discrete-event simulation of the queues), fused (the
SSC path end to end), baseline (kernel-by-kernel), trace, plot, tune, microbench, cli.
"""
