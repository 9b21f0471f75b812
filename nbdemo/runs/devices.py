"""The devices a run may ask for: which torch sees here (`cuda_devices`), and the refusal of one it does not
(`check_device`), both known before a kernel starts and, where no GPU driver is loaded, without importing torch."""
import os
import sys

from nbdemo.runs.params import CUDA, ParameterError

def _no_gpu_driver():
    """True where torch cannot see a GPU, known without importing torch: Linux with no NVIDIA driver loaded, no
    ROCm device and no WSL GPU (elsewhere, or with torch imported already, torch itself is asked)."""
    return (sys.platform.startswith("linux") and "torch" not in sys.modules
            and not any(os.path.exists(p) for p in ("/proc/driver/nvidia", "/dev/nvidiactl", "/dev/kfd", "/dev/dxg")))


def cuda_devices():
    """How many CUDA devices torch sees here."""
    if _no_gpu_driver():
        return 0
    import torch
    return torch.cuda.device_count()


def check_device(device):
    """Refuse a device that torch does not see here (`cuda:99`, `cuda` without a GPU, `mps` off a Mac): one line,
    before a kernel starts."""
    m = CUDA.fullmatch(device)
    if m:
        n, index = cuda_devices(), int(m[1] or 0)
        if index >= n:
            raise ParameterError(f"device {device!r}: torch sees {'no CUDA device' if not n else f'{n} CUDA devices'} "
                                 f"here{f' (cuda:0..cuda:{n - 1})' if n else ''}; give device auto or cpu")
    elif device == "mps":
        if sys.platform != "darwin":
            raise ParameterError("device 'mps': Apple's GPU exists only on macOS; give device auto or cpu")
        import torch
        if not torch.backends.mps.is_available():
            raise ParameterError("device 'mps': torch sees no Apple GPU here; give device auto or cpu")
