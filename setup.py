"""Build of the C extension ``uldp.secure._comb`` (the comb of Protocol 1, step 2(b)); the rest is in pyproject.toml.

The extension links the GMP that gmpy2's wheel bundles (``gmpy2.libs/libgmp-*.so*`` with the ``gmp.h`` it ships),
the library gmpy2 itself runs on, when it is there; else the system's ``-lgmp``. On the reference machine the
bundled GMP 6.3 multiplies 6144-bit numbers markedly faster than Debian's 6.2 (benchmarks/comb.py). The extension
is optional: if it does not build, ``uldp.secure.fast`` uses its gmpy2 code.

The built file carries no path of the build machine: no RPATH/RUNPATH (the bundled GMP's soname is already loaded
when the extension is imported, because ``uldp.secure.fast`` imports gmpy2 first, and the dynamic loader reuses a
loaded soname), the interpreter's own ``-Wl,-rpath`` dropped from the link line, and no debug information (which
would record the source and include directories). ``tests/test_packaging.py`` checks it with ``readelf``.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext


def gmp_build_options() -> dict[str, list[str]]:
    """Compiler and linker options for GMP: gmpy2's bundled copy if installed, else the system library."""
    spec = importlib.util.find_spec("gmpy2")
    if spec is not None and spec.origin is not None:
        package = Path(spec.origin).parent
        bundled = sorted((package.parent / "gmpy2.libs").glob("libgmp-*.so*"))
        if bundled and (package / "gmp.h").is_file():
            return {"include_dirs": [str(package)], "extra_objects": [str(bundled[-1])]}
    return {"libraries": ["gmp"]}


class RelocatableBuildExt(build_ext):
    """``build_ext`` without the interpreter's ``-Wl,-rpath,<its lib dir>`` in the link line."""

    def build_extensions(self) -> None:
        self.compiler.linker_so = [arg for arg in self.compiler.linker_so if not arg.startswith("-Wl,-rpath")]
        super().build_extensions()


setup(
    cmdclass={"build_ext": RelocatableBuildExt},
    ext_modules=[
        Extension(
            "uldp.secure._comb",
            sources=["uldp/secure/_comb.c"],
            extra_compile_args=["-O2", "-g0", "-Wall", "-Wextra", "-Wno-unused-parameter"],
            optional=True,
            **gmp_build_options(),
        )
    ],
)
