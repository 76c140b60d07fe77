"""Names of a package that load on first use (PEP 562 ``__getattr__``), so importing one small
module of the package (``storage.files``, ``node.errors``) does not import the whole package and
numba with it::

    __getattr__ = lazy_exports(__name__, {"Log": "storage.log", ...})
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(package: str, exports: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package`` that imports ``exports[name]`` (a module name)
    when ``name`` is first read and returns its attribute of that name."""
    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(module), name)
    return __getattr__
