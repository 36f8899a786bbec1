"""Build of the C extension ``uldp.secure._comb`` (the comb of Protocol 1, step 2(b)); the rest is in pyproject.toml.

The extension links the GMP that gmpy2's wheel bundles (``gmpy2.libs/libgmp-*.so*`` with the ``gmp.h`` it ships),
the library gmpy2 itself runs on, when it is there; else the system's ``-lgmp``. On the reference machine the
bundled GMP 6.3 multiplies 6144-bit numbers markedly faster than Debian's 6.2 (benchmarks/comb.py). The extension
is optional: if it does not build, ``uldp.secure.fast`` uses its gmpy2 code.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from setuptools import Extension, setup


def gmp_build_options() -> dict[str, list[str]]:
    """Compiler and linker options for GMP: gmpy2's bundled copy if installed, else the system library."""
    spec = importlib.util.find_spec("gmpy2")
    if spec is not None and spec.origin is not None:
        package = Path(spec.origin).parent
        bundled = sorted((package.parent / "gmpy2.libs").glob("libgmp-*.so*"))
        if bundled and (package / "gmp.h").is_file():
            return {
                "include_dirs": [str(package)],
                "extra_objects": [str(bundled[-1])],
                "runtime_library_dirs": [str(bundled[-1].parent)],
            }
    return {"libraries": ["gmp"]}


setup(
    ext_modules=[
        Extension(
            "uldp.secure._comb",
            sources=["uldp/secure/_comb.c"],
            extra_compile_args=["-O2", "-Wall", "-Wextra", "-Wno-unused-parameter"],
            optional=True,
            **gmp_build_options(),
        )
    ]
)
