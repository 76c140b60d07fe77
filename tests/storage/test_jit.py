"""Kernels declared through ``storage.jit`` load numba at the first call of any of them, and then
run compiled, calling each other as numba dispatchers. Each case runs in a fresh interpreter: the
test process has loaded numba long before."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

KERNELS = '''
import numpy as np
from storage import jit

@jit.njit(cache=False, nogil=True)
def inner(x):
    return x * 2 + 1

@jit.njit(cache=False, nogil=True)
def outer(values):
    total = 0
    for v in values:
        total += inner(v)
    return total
'''


def _run(tmp_path: Path, script: str) -> object:
    (tmp_path / "declared_kernels.py").write_text(KERNELS)
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{tmp_path}"}
    out = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_declaring_kernels_imports_no_numba_and_the_first_call_loads_them_compiled(
        tmp_path: Path) -> None:
    script = '''
import json, sys
import numpy as np
import declared_kernels as k
from storage import jit
before = ["numba" in sys.modules, type(k.outer).__name__, jit.loaded(), k.outer.overloads]
result = k.outer(np.arange(4, dtype=np.int64))       # the Kernel object: it loads every kernel
import numba.core.dispatcher
after = [isinstance(getattr(k, name), numba.core.dispatcher.Dispatcher)
         for name in ("inner", "outer")]
print(json.dumps([before, int(result), jit.loaded(), after, len(k.outer.overloads),
                  len(k.inner.overloads)]))
'''
    before, result, loaded, after, outer_signatures, inner_signatures = _run(tmp_path, script)
    assert before == [False, "Kernel", False, {}]
    assert result == sum(2 * v + 1 for v in range(4))
    assert loaded is True and after == [True, True]
    # outer compiled (once), and inner within it: inner was a dispatcher when outer compiled
    assert outer_signatures == 1 and inner_signatures == 1


def test_a_kernel_declared_after_the_load_is_a_dispatcher_at_once(tmp_path: Path) -> None:
    script = '''
import json
import numpy as np
from storage import jit
jit.load()
import declared_kernels as k
import numba.core.dispatcher
print(json.dumps([isinstance(k.outer, numba.core.dispatcher.Dispatcher),
                  int(k.outer(np.arange(3, dtype=np.int64)))]))
'''
    assert _run(tmp_path, script) == [True, 1 + 3 + 5]


def test_threads_calling_kernels_at_once_all_load_and_run_them(tmp_path: Path) -> None:
    script = '''
import json, threading
import numpy as np
import declared_kernels as k
from storage import jit
outer, inner = k.outer, k.inner        # Kernel objects, as a caller that imported them keeps
results, errors = [], []
start = threading.Barrier(8)
def call(i):
    try:
        start.wait()
        results.append(int(outer(np.arange(i, dtype=np.int64)) if i % 2 else inner(i)))
    except BaseException as err:
        errors.append(repr(err))
threads = [threading.Thread(target=call, args=(i,)) for i in range(8)]
for t in threads: t.start()
for t in threads: t.join()
print(json.dumps([sorted(results), errors, jit.loaded()]))
'''
    results, errors, loaded = _run(tmp_path, script)
    expected = sorted(sum(2 * v + 1 for v in range(i)) if i % 2 else 2 * i + 1
                      for i in range(8))
    assert errors == [] and results == expected and loaded is True


def test_a_kernel_reads_as_its_function_does(tmp_path: Path) -> None:
    script = '''
import json
import declared_kernels as k
print(json.dumps([k.outer.__name__, k.outer.__module__, k.outer.py_func.__name__,
                  k.inner.py_func(3), repr(k.inner)]))
'''
    assert _run(tmp_path, script) == ["outer", "declared_kernels", "outer", 7,
                                      "<kernel declared_kernels.inner>"]
