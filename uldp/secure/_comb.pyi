"""Type stub of the C extension :mod:`uldp.secure._comb` (source ``_comb.c``; built by ``setup.py``)."""

import numpy as np

def multiply_in_base(
    accumulators: np.ndarray,
    digits: np.ndarray,
    base: np.ndarray,
    inverse: np.ndarray,
    modulus: np.ndarray,
    modulus_inverse: np.ndarray,
    window: int,
    /,
) -> None: ...
def from_montgomery(
    accumulators: np.ndarray, modulus: np.ndarray, modulus_inverse: np.ndarray, /
) -> None: ...
