"""Build of the optional bfsvtab SQLite extension (vendor/bfsvtab) as kgr/store/_bfsvtab*.so.

The project metadata is in pyproject.toml. bfsvtab is a plain SQLite loadable
extension (entry point sqlite3_bfsvtab_init), not a Python module: it is built as
an Extension only so that the system C compiler builds it on ``pip install``. When
there is no compiler, or it fails, the install goes on without it, with a warning,
and kgr.graph falls back to the recursive CTE. With ``pip install -e .``,
setuptools copies the built library into kgr/ in the source tree.

The man pages (man/*.1) are installed into PREFIX/share/man/man1 by ``pip install .``, so
``man kgr`` finds them when PREFIX/bin is on PATH. An editable install installs no data
files: there ``kgr man`` shows them, and ``kgr man --write DIR`` puts them where man looks.
"""

from __future__ import annotations

import warnings

from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext


class OptionalBuildExt(build_ext):
    """build_ext that warns instead of failing when the C extension can't be built."""

    def run(self):
        try:
            super().run()
        except Exception as exc:  # noqa: BLE001 - no compiler, a failed compile or copy: install without it
            self._skip(exc)

    def build_extension(self, ext):
        try:
            super().build_extension(ext)
        except Exception as exc:  # noqa: BLE001
            self._skip(exc)

    def copy_extensions_to_source(self):
        try:
            super().copy_extensions_to_source()
        except Exception as exc:  # noqa: BLE001 - the library was not built
            self._skip(exc)

    def get_export_symbols(self, ext):
        # A SQLite extension exports its init function, not PyInit_* (matters on Windows only).
        return ["sqlite3_bfsvtab_init"]

    def _skip(self, exc):
        msg = (f"kgr: the optional bfsvtab SQLite extension was not built ({exc}); "
               "graph traversal will use the recursive CTE instead")
        warnings.warn(msg, stacklevel=1)
        self.announce(f"WARNING: {msg}", level=3)


setup(
    ext_modules=[
        Extension(
            "kgr.store._bfsvtab",
            sources=["vendor/bfsvtab/bfsvtab.c"],
            include_dirs=["vendor/bfsvtab"],
            depends=["vendor/bfsvtab/sqlite3.h", "vendor/bfsvtab/sqlite3ext.h"],
            optional=True,
        )
    ],
    cmdclass={"build_ext": OptionalBuildExt},
    data_files=[("share/man/man1", sorted(str(p) for p in Path("man").glob("*.1")))],
)
