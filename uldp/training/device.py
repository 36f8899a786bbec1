"""Where and in what precision training runs: the device string every entry point takes (``fit(device=)``,
``RunConfig.device``, a Flower silo's ``uldp-device``, ``--device``), checked in one place, the settings a CUDA
device needs, and the warning that bfloat16 on the CPU is usually slower than float32 (:func:`warn_if_slower`).

Every training path (the per-user engine, the closed forms, ``vmap``, DP-SGD) computes on the device of the records
and parameters it is given; :func:`uldp.fit` and :func:`uldp.simulation.run` move the model and the records there
once. The run's random draws that the guarantee or the reproducibility rests on (the user sample, the record order,
DP-SGD's Poisson batches, every Gaussian noise vector) are drawn on the CPU from the run's generators, as before,
and moved to the device once per round or epoch, so they are the same numbers on every device (see
:func:`uldp.methods.base.gaussian_noise` for the noise). Only dropout masks, drawn at every step, come from a
generator on the device (seeded from the same stream).

CUDA settings (:func:`device_settings`, around training): ``cudnn.benchmark`` on (the per-user convolutions have a
few fixed shapes per run, for which cuDNN then picks its fastest kernel) and TF32 off unless asked for with
``precision="tf32"``: TF32 rounds the inputs of every matmul and convolution to 10 bits of mantissa, and on the
H100 the per-user CNN step measured 2.6 times slower with cuDNN's default TF32 than without (issue 43).
``precision="bf16"`` runs the forward and backward passes under ``torch.autocast`` with bfloat16 (parameters,
updates, clipping and noise stay float32), through ``vmap(grad(...))`` rather than the float32 closed forms.
"""

from __future__ import annotations

import contextlib
import platform
import re
import warnings
from typing import TYPE_CHECKING

import torch

from uldp.method_names import FAMILY_CAPABILITIES

if TYPE_CHECKING:
    from collections.abc import Iterator

#: What a device may be: the CPU, or a CUDA device (``"cuda"`` is the current one, ``"cuda:<index>"`` another).
DEVICES = ("cpu", "cuda", "cuda:<index>")
#: Training precisions: float32 (the default; on CUDA without TF32), float32 with TF32 matmuls and convolutions on
#: CUDA, and bfloat16 autocast.
PRECISIONS = ("float32", "tf32", "bf16")

_CUDA = re.compile(r"cuda(?::(\d+))?")


def resolve_device(device: str | torch.device) -> torch.device:
    """The torch device ``device`` names, checked: the CPU or an available CUDA device.

    Args:
        device: ``"cpu"``, ``"cuda"``, ``"cuda:<index>"`` or a ``torch.device`` of those.

    Returns:
        The ``torch.device``.

    Raises:
        ValueError: Another kind of device (``"meta"`` holds no data to train on; ``"mps"``, ``"xpu"`` are not
            supported), a malformed string, CUDA on a machine without it, or a CUDA index it does not have.

    Example:
        >>> resolve_device("cpu")
        device(type='cpu')
    """
    if isinstance(device, torch.device):
        text = str(device)
    elif isinstance(device, str):
        text = device.strip().lower()
    else:
        raise ValueError(
            f"device must be a string or torch.device ({', '.join(DEVICES)}), got {type(device).__name__}"
        )
    if text == "cpu":
        return torch.device("cpu")
    match = _CUDA.fullmatch(text)
    if match is None:
        raise ValueError(f"device must be one of {', '.join(DEVICES)}, got {device!r}")
    if not torch.cuda.is_available():
        raise ValueError(
            f"device={device!r} needs CUDA, which this machine does not have (torch {torch.__version__}, "
            f"torch.cuda.is_available() is False: a CPU-only torch build or no NVIDIA driver); use device='cpu'"
        )
    index = torch.cuda.current_device() if match.group(1) is None else int(match.group(1))
    if index >= torch.cuda.device_count():
        raise ValueError(
            f"device={device!r}: this machine has {torch.cuda.device_count()} CUDA device(s), "
            f"cuda:0 to cuda:{torch.cuda.device_count() - 1}"
        )
    return torch.device("cuda", index)


def check_precision(precision: str) -> str:
    """``precision`` if it is one of :data:`PRECISIONS`.

    Raises:
        ValueError: Any other value.

    Example:
        >>> check_precision("bf16")
        'bf16'
    """
    if not isinstance(precision, str) or precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
    return precision


def check_precision_for(family: str, precision: str) -> str:
    """``precision`` if the method family ``family`` can train in it: bfloat16 is for local training only, not a
    family that clips per-record gradients (ULDP-GROUP-k's DP-SGD: its clipping and closed forms are float32), as
    its :class:`uldp.method_names.Capabilities` say.

    Raises:
        ValueError: An unknown precision, or ``"bf16"`` for a per-record-gradient family.

    Example:
        >>> check_precision_for("ULDP-AVG", "bf16")
        'bf16'
    """
    if (
        check_precision(precision) == "bf16"
        and FAMILY_CAPABILITIES[family].clipped == "per-record gradient"
    ):
        raise ValueError(
            f"precision='bf16' applies to local training, not {family}'s per-record DP-SGD, which runs in "
            "float32: use precision='float32' or 'tf32'"
        )
    return precision


@contextlib.contextmanager
def device_settings(device: torch.device, precision: str = "float32") -> Iterator[None]:
    """Inside the block, CUDA's cuDNN autotuning on and TF32 off unless ``precision == "tf32"`` (restored after);
    nothing changes on the CPU."""
    check_precision(precision)
    if device.type != "cuda":
        yield
        return
    cudnn, matmul = torch.backends.cudnn, torch.backends.cuda.matmul
    previous = (cudnn.benchmark, cudnn.allow_tf32, matmul.allow_tf32)
    tf32 = precision == "tf32"
    cudnn.benchmark, cudnn.allow_tf32, matmul.allow_tf32 = True, tf32, tf32
    try:
        yield
    finally:
        cudnn.benchmark, cudnn.allow_tf32, matmul.allow_tf32 = previous


def autocast(device: torch.device, precision: str) -> contextlib.AbstractContextManager:
    """``torch.autocast`` to bfloat16 on ``device`` for ``precision == "bf16"``, otherwise nothing."""
    if check_precision(precision) != "bf16":
        return contextlib.nullcontext()
    return torch.autocast(device.type, dtype=torch.bfloat16)


class PrecisionWarning(UserWarning):
    """A precision that usually trains slower than float32 on its device: bfloat16 on the CPU."""


def warn_if_slower(device: torch.device, precision: str) -> None:
    """Warn (:class:`PrecisionWarning`) when ``precision`` is ``"bf16"`` on the CPU: autocast there leaves the
    float32 closed forms for ``vmap(grad(...))``, whose per-user convolutions fall back to torch's slow CPU kernels
    in bfloat16 (``benchmarks/gpu.py --device cpu --quick`` times both precisions: the MNIST CNN's engine ran
    several times slower in bfloat16 on a 2-core CPU). bfloat16 is meant for CUDA devices."""
    if check_precision(precision) == "bf16" and device.type == "cpu":
        warnings.warn(
            "precision='bf16' on the CPU is usually slower than float32: bfloat16 autocast trains through "
            "vmap(grad(...)) instead of the float32 closed forms, and the per-user convolutions have no fast "
            "bfloat16 CPU kernel; bf16 is meant for CUDA devices: use precision='float32' here",
            PrecisionWarning,
            stacklevel=3,
        )


def default_generator(device: torch.device) -> torch.Generator:
    """Torch's global generator of ``device`` (what ``torch.rand(..., device=device)`` draws from)."""
    if device.type == "cuda":
        index = device.index if device.index is not None else torch.cuda.current_device()
        return torch.cuda.default_generators[index]
    return torch.default_generator


def device_name(device: torch.device) -> str:
    """A readable name of ``device``: the GPU's model, or the CPU's (``platform.processor()``, else the machine)."""
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return platform.processor() or platform.machine() or "cpu"
