"""Kernels declared without numba: numba is imported, and every kernel declared here handed to
it, at the first call of any one of them.

Why: importing numba costs about 0.2 s of CPU, and most processes that import the storage engine
never run a compiled kernel: a Ray node actor loading empty or cleanly closed directories, a tool
appending a few records (those run the kernels' Python bodies, ``storage.kernel_twins``), a
coordinator. On a host of few cores, a cluster's actors starting at once paid it one after the
other.

``@jit.njit(**options)`` records the function and numba's options and leaves a ``Kernel`` in the
module in its place: it has the function as ``py_func`` and, called, loads every kernel and runs
the compiled one. ``load()`` (the first call of any kernel; ``storage.kernels.warm_up``) imports
numba, points its cache at ``storage.kernel_cache``'s directory, wraps each recorded function in
``numba.njit`` with its options, and puts the dispatchers in place of the ``Kernel`` objects in
every module that declared one (and of those it imported from the others), so numba compiling a
kernel finds the kernels it calls as dispatchers, and a caller reading ``kernels.<name>`` from then
on gets the dispatcher itself. A kernel declared after the load is a dispatcher at once. A module
whose own ``numba.njit`` kernels call these passes its globals to ``load`` before it defines them
(``cleaner.kernels``). A ``Kernel`` kept elsewhere (``from storage.kernels import x``) still
works, one Python call slower.

numba compiles nothing at ``numba.njit``: each dispatcher compiles, or loads from the cache, at
its first call with new argument types, as before.
"""

from __future__ import annotations

import sys
import threading
from typing import Any, Callable

_lock = threading.Lock()
_declared: list[Kernel] = []
_loaded = False


class Kernel:
    """A kernel before numba is loaded: its Python function and numba's options; calling it loads
    every kernel (``load``) and calls the compiled one."""

    def __init__(self, py_func: Callable[..., Any], options: dict[str, Any]) -> None:
        self.py_func = py_func
        self.options = options
        self.dispatcher: Any = None
        self.__name__ = py_func.__name__
        self.__qualname__ = py_func.__qualname__
        self.__module__ = py_func.__module__
        self.__doc__ = py_func.__doc__
        self.__wrapped__ = py_func

    @property
    def overloads(self) -> dict[Any, Any]:
        """The compiled signatures (none before ``load``), as a numba dispatcher has them."""
        return {} if self.dispatcher is None else self.dispatcher.overloads

    def __call__(self, *args: Any) -> Any:
        if self.dispatcher is None:
            load()
        return self.dispatcher(*args)

    def __repr__(self) -> str:
        return f"<kernel {self.__module__}.{self.__qualname__}>"


def njit(**options: Any) -> Callable[[Callable[..., Any]], Any]:
    """``numba.njit(**options)``, applied when the kernels load (at once when they have)."""
    def declare(func: Callable[..., Any]) -> Any:
        with _lock:
            if _loaded:
                import numba

                return numba.njit(**options)(func)
            kernel = Kernel(func, options)
            _declared.append(kernel)
            return kernel
    return declare


def is_kernel(value: Any) -> bool:
    """Whether ``value`` is a kernel: a ``Kernel``, or a numba dispatcher once numba is loaded."""
    if isinstance(value, Kernel):
        return True
    dispatcher = sys.modules.get("numba.core.dispatcher")
    return dispatcher is not None and isinstance(value, dispatcher.Dispatcher)


def loaded() -> bool:
    return _loaded


def load(namespace: dict[str, Any] | None = None) -> None:
    """Import numba and hand it every kernel declared so far (once; safe from any thread); then
    put the dispatchers in place of the ``Kernel`` objects of ``namespace`` too (the globals of a
    module whose own numba kernels call these: ``cleaner.kernels``)."""
    with _lock:
        if not _loaded:
            _load()
        if namespace is not None:
            _bind(namespace)


def _load() -> None:
    """The ``Kernel`` objects of every module that declared one become dispatchers in one
    ``dict.update`` a module (no other thread runs inside it), module after module in the order
    they declared their first (their import order: a module after those it imports), and the
    ``Kernel`` objects forward to them only after: a thread that finds a dispatcher finds the
    kernels it calls as dispatchers too."""
    global _loaded
    modules = [sys.modules[name] for name in dict.fromkeys(k.__module__ for k in _declared)]
    import numba

    from storage import kernel_cache

    kernel_cache.use()     # before the first numba.njit(cache=True)
    dispatchers = {id(kernel): numba.njit(**kernel.options)(kernel.py_func)
                   for kernel in _declared}
    for module in modules:
        _bind(vars(module), dispatchers)
    for kernel in _declared:
        kernel.dispatcher = dispatchers[id(kernel)]
    _loaded = True


def _bind(namespace: dict[str, Any], dispatchers: dict[int, Any] | None = None) -> None:
    found = {name: value for name, value in namespace.items() if isinstance(value, Kernel)}
    namespace.update({name: value.dispatcher if dispatchers is None else dispatchers[id(value)]
                      for name, value in found.items()})
