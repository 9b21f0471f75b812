"""nbdemo: reproducible notebooks for four papers on the learning dynamics of neural networks."""
import os
import random

__version__ = "0.1.0"


def resolve_device(device="auto"):
    """"auto" is cuda when available, else cpu; anything else is passed to torch.device."""
    import torch  # here, not on import: the command line checks its arguments without torch
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    device = torch.device(device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device={device!s} was asked for, but torch sees no CUDA device; use device='cpu' or 'auto'")
    return device


def setup(seed=0, device="auto"):
    """Seed every generator, make CPU runs deterministic, resolve the device and record provenance.

    The first call of every notebook. Returns the torch.device to use. On the CPU torch runs on one thread, in the
    sweep, under nbval and in a run by hand alike: the number of threads sets the order of float sums, so a run's
    numbers would otherwise depend on the machine's cores, and the small nets of the default profiles spend their
    time in the fixed cost of each operation, which a second thread does not share. A sweep runs one notebook per
    core instead (`nbdemo.runs.sweep.local_workers`).
    """
    import numpy as np
    import torch
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    torch.use_deterministic_algorithms(True, warn_only=True)
    device = resolve_device(device)
    if device.type == "cpu":
        torch.set_num_threads(1)
    from nbdemo.claims.registry import record_provenance
    record_provenance(seed=seed, device=str(device))
    return device
