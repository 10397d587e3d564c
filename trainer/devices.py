"""Where a model encodes at evaluation and mining time (``--device``); training's device is the
HF Trainer's (``--use_cpu``, ``torchrun``).

``auto`` is the first CUDA GPU when torch sees one, else the CPU. The flag's spelling is
checked without importing torch (``device_name``, an argparse type), so a BM25-only
evaluation never loads it; whether the machine has the device is checked before the model
loads (``inference_device``).
"""

from __future__ import annotations

import re

from lake.cli import flag_check

DEVICE_HELP = "auto (the first CUDA GPU torch sees, else the CPU), cpu, cuda or cuda:N"
_DEVICE = re.compile(r"auto|cpu|cuda(:\d+)?")


def check_device(value: str) -> str:
    """``value`` stripped when it names a device (auto, cpu, cuda, cuda:N), else a ValueError."""
    name = value.strip()
    if not _DEVICE.fullmatch(name):
        raise ValueError(f"--device: {value!r} is not a device: use {DEVICE_HELP}")
    return name


device_name = flag_check(check_device)  # argparse type of --device


def inference_device(name: str = "auto"):
    """The ``torch.device`` for ``name``; a GPU this machine lacks is an error naming it."""
    import torch  # deferred: see the module docstring

    name = check_device(name)
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(name)
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(
                f"--device {name}: torch sees no CUDA GPU on this machine "
                f"(torch {torch.__version__}); use --device cpu, or auto"
            )
        count = torch.cuda.device_count()
        if device.index is not None and device.index >= count:
            raise ValueError(
                f"--device {name}: this machine has {count} CUDA GPU(s), cuda:0 to cuda:{count - 1}"
            )
    return device
