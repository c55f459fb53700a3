"""The CUDA backend's Python side: ctypes binding of libhpmoe_cuda.so (native.py), an EP group on the GPUs of
this host (group.py), `hpmoe run --backend cuda` (run.py) and the per-task GPU trace (trace.py). Nothing here
imports torch; the library is needed only when a group is created."""
