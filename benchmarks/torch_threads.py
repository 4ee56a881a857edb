"""Thread pinning shared by the PyTorch benchmark scripts: import it before torch.

The BLAS's own thread pool must match torch.set_num_threads: importing this module sets
OPENBLAS_NUM_THREADS, OMP_NUM_THREADS and MKL_NUM_THREADS to the script's --threads value
(default 1) while torch is not loaded yet; otherwise OpenBLAS uses every core even with
torch.set_num_threads(1), and a "1 thread" figure is really 2.
"""
import os
import sys


def _threads_from_argv():
    for i, a in enumerate(sys.argv):
        if a == "--threads" and i + 1 < len(sys.argv):
            return sys.argv[i + 1]
    return "1"


for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = _threads_from_argv()
