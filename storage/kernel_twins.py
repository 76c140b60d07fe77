"""The kernels of ``storage.kernels`` run by the interpreter: the same functions (their Python
bodies, ``py_func``), with every call to another kernel bound to that kernel's own twin, so
calling one loads no compiled code.

Why: the first kernel call of a process costs numba's initialisation of its CPU target (its
typing and lowering registries, loaded once, even for kernels read from the on-disk cache):
about 150 ms, which made the first append of a fresh process slow. A small batch is cheap to
check interpreted (tens of microseconds a record), so ``kernel_for`` hands out the twin for a
small input until the compiled kernel has been loaded by a large one, or the process has made
``INTERPRETED_CALLS`` interpreted calls (a busy process, e.g. a broker taking small produce
batches, then loads the kernels: interpreted, its appends would cost ten times more). A short
process (a tool appending a few records, a test) never loads compiled code, and a long one pays
the load at its 65th small call instead of its first. One implementation, two ways to run it: the
twins answer exactly as the kernels do (``tests/storage/test_kernel_twins.py`` holds them to
it), because integers in the kernels are numpy ``int64`` scalars or small Python ints either way.
"""

from __future__ import annotations

import types
from typing import Any, Callable

import numpy as np

from storage import jit, kernel_encode, kernel_primitives, kernels

SMALL_INPUT_BYTES = 4096   # an input this small is checked interpreted until the kernel is loaded
INTERPRETED_CALLS = 64     # ... by this many calls of a process at most: then the kernels load
_interpreted = 0

_MODULES = (kernel_primitives, kernel_encode, kernels)
_twins: dict[str, Callable[..., Any]] = {}


def _build() -> None:
    """Make the twin of every kernel of ``_MODULES`` (in dependency order): its ``py_func`` with
    globals in which each kernel name, its own module's or one imported, is that kernel's twin."""
    for module in _MODULES:
        scope = dict(vars(module))
        for name, value in vars(module).items():
            if not jit.is_kernel(value):
                continue
            func = value.py_func
            key = f"{func.__module__}.{func.__qualname__}"
            if func.__module__ == module.__name__:
                _twins[key] = types.FunctionType(func.__code__, scope, func.__name__,
                                                 func.__defaults__, func.__closure__)
            scope[name] = _twins[key]


def twin(kernel: Any) -> Callable[..., Any]:
    """The interpreted twin of ``kernel`` (a kernel of ``storage.kernels``: its ``jit.Kernel``, or
    numba's dispatcher once loaded), called and answering as the kernel is and does."""
    if not _twins:
        _build()
    func = kernel.py_func
    return _quiet(_twins[f"{func.__module__}.{func.__qualname__}"])


def kernel_for(kernel: Any, input_bytes: int) -> Callable[..., Any]:
    """``kernel`` itself once it is loaded in this process, for an input above
    ``SMALL_INPUT_BYTES``, or once the process has made ``INTERPRETED_CALLS`` interpreted calls;
    else its interpreted twin (see the module docstring)."""
    global _interpreted
    if kernel.overloads or input_bytes > SMALL_INPUT_BYTES or _interpreted >= INTERPRETED_CALLS:
        return kernel
    _interpreted += 1   # (a race between threads only lets a call or two more through)
    return twin(kernel)


def _quiet(func: Callable[..., Any]) -> Callable[..., Any]:
    """``func`` with numpy's integer overflow warnings off (a kernel's int64 arithmetic wraps
    silently, and so does its twin's), its numpy scalars returned as the ``int`` and ``bool`` a
    compiled kernel returns."""
    def call(*args: Any) -> Any:
        with np.errstate(over="ignore"):
            result = func(*args)
        if isinstance(result, tuple):
            return tuple(_plain(value) for value in result)
        return _plain(result)
    return call


def _plain(value: Any) -> Any:
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, np.integer):
        return int(value)
    return value
