"""The kernels' interpreted twins (``storage.kernel_twins``) answer exactly as the compiled
kernels do, and a fresh process's first append loads no compiled kernel."""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path

import crc32c
import numpy as np
import pytest

from storage import kernel_twins, kernels
from storage.records import Record, build_batch, build_batch_columns

ROOT = Path(__file__).resolve().parents[2]


def _batches() -> list[bytes]:
    rng = random.Random(3)
    plain = build_batch_columns([b"k1", b"k2", b"k3"], [b"v" * 100, b"", b"w"],
                                np.array([5, 9, 6], dtype=np.int64))
    with_headers = build_batch([Record(key=b"k", value=b"v", headers=[("h", b"1"), ("i", None)]),
                                Record(key=None, value=None)])
    batches = [plain, with_headers]
    for _ in range(300):      # damaged copies: every kind of refusal the kernel can give
        data = bytearray(rng.choice((plain, with_headers)))
        for _ in range(rng.randint(1, 3)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        batches.append(bytes(data[:rng.randint(len(data) - 3, len(data))]))
    return batches


@pytest.mark.parametrize("require_keys", [False, True])
@pytest.mark.parametrize("from_client", [False, True])
def test_the_validation_twin_answers_as_the_kernel_does(require_keys: bool,
                                                        from_client: bool) -> None:
    interpreted = kernel_twins.twin(kernels.validate_batch)
    for data in _batches():
        buf = kernels.as_input(data)
        crc = crc32c.crc32c(data[21:])
        for computed in (crc, crc ^ 1):
            args = (buf, computed, 1 << 20, require_keys, from_client)
            assert interpreted(*args) == kernels.validate_batch(*args), data.hex()


def test_the_records_validation_twin_answers_as_the_kernel_does() -> None:
    interpreted = kernel_twins.twin(kernels.validate_records)
    for data in _batches():
        buf = kernels.as_input(data)
        for count in (1, 2, 3):
            args = (buf, 61, len(data), count, True)
            assert interpreted(*args) == kernels.validate_records(*args), data.hex()


def test_the_header_scan_twin_answers_as_the_kernel_does() -> None:
    """Over runs of whole and damaged batches, as a segment read or a recovery scans them."""
    interpreted = kernel_twins.twin(kernels.scan_batch_headers)
    batches = _batches()
    rng = random.Random(5)
    for _ in range(200):
        data = b"".join(rng.choice(batches) for _ in range(rng.randint(1, 4)))
        buf = kernels.as_input(data)
        for capacity in (1, 4):
            _assert_same_table(kernels.scan_batch_headers, interpreted, (buf, 0, len(data)),
                               (kernels.SCAN_ROWS, capacity), data)


def test_the_record_walk_twin_answers_as_the_kernel_does() -> None:
    interpreted = kernel_twins.twin(kernels.walk_records)
    for data in _batches():
        body = kernels.as_input(data[61:])
        for count in (1, 2, 3):
            _assert_same_table(kernels.walk_records, interpreted, (body, 0, len(body)),
                               (kernels.RECORD_ROWS, count), data)


def _assert_same_table(kernel: object, interpreted: object, args: tuple[object, ...],
                       shape: tuple[int, int], data: bytes) -> None:
    """``kernel`` and its twin, each filling a table of ``shape`` after ``args``, answer the same
    and fill the columns they report (the answer's first value) the same."""
    table_twin, table_kernel = np.zeros(shape, dtype=np.int64), np.zeros(shape, dtype=np.int64)
    answer = interpreted(*args, table_twin)  # type: ignore[operator]
    assert answer == kernel(*args, table_kernel), data.hex()  # type: ignore[operator]
    assert (table_twin[:, :answer[0]] == table_kernel[:, :answer[0]]).all(), data.hex()


def test_the_encoding_twin_writes_the_bytes_the_kernel_writes() -> None:
    keys, values = b"k1k22", b"v" * 300 + b"w"
    columns = (kernels.as_input(keys), np.array([2, 3, -1], dtype=np.int64),
               kernels.as_input(values), np.array([300, 1, -1], dtype=np.int64),
               kernels.as_input(b"\x02\x02h\x021"), np.array([0, 5, 0], dtype=np.int64),
               np.array([0, -7, 2**40], dtype=np.int64), np.arange(3, dtype=np.int64))
    out_twin, out_kernel = np.zeros(600, dtype=np.uint8), np.zeros(600, dtype=np.uint8)
    end = kernel_twins.twin(kernels.encode_records)(out_twin, 61, *columns)
    assert end == kernels.encode_records(out_kernel, 61, *columns)
    assert type(end) is int
    assert out_twin.tobytes() == out_kernel.tobytes()


def test_a_fresh_process_appends_its_first_records_without_importing_numba(
        tmp_path: Path) -> None:
    script = f"""
import sys
from storage import Log, Record
log = Log.open({str(tmp_path / "t-0")!r})
log.append([Record(key=b"k", value=b"v")])
log.append([Record(key=b"k%d" % i, value=b"v" * 100) for i in range(10)])
assert [r.offset for r in log.read(0)] == list(range(11))
log.close()
print(sorted(name for name in sys.modules if name.split(".")[0] in ("numba", "llvmlite")))
"""
    out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, check=True,
                         capture_output=True, text=True).stdout
    assert eval(out) == []     # the numba modules imported


def test_a_large_input_loads_the_compiled_kernels_and_rebinds_them_in_their_modules(
        tmp_path: Path) -> None:
    script = f"""
import sys
import numpy as np
import numba.core.dispatcher
from storage import Log, jit, kernels, kernel_primitives
from storage.records import build_batch_columns
assert not jit.loaded() and isinstance(kernels.validate_batch, jit.Kernel)
log = Log.open({str(tmp_path / "t-0")!r})
n = 200     # above the twins' small-input size: the compiled kernel checks it
log.append_batch(build_batch_columns([b"k%d" % i for i in range(n)], [b"v" * 100] * n,
                                     np.arange(n, dtype=np.int64)))
log.close()
dispatcher = numba.core.dispatcher.Dispatcher
print(jit.loaded(), isinstance(kernels.validate_batch, dispatcher),
      bool(kernels.validate_batch.overloads),
      isinstance(kernels.read_varint, dispatcher), isinstance(kernel_primitives.read_varint,
                                                               dispatcher))
"""
    out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, check=True,
                         capture_output=True, text=True).stdout
    assert out.split() == ["True"] * 5


def test_a_busy_process_loads_the_kernels_after_its_interpreted_calls(
        monkeypatch: pytest.MonkeyPatch) -> None:
    class Unloaded:             # a kernel not yet loaded in this process
        overloads: dict[object, object] = {}
        py_func = kernels.validate_batch.py_func

    kernel = Unloaded()
    monkeypatch.setattr(kernel_twins, "_interpreted", 0)
    calls = [kernel_twins.kernel_for(kernel, 100) for _ in range(kernel_twins.INTERPRETED_CALLS)]
    assert all(call is not kernel for call in calls)
    assert kernel_twins.kernel_for(kernel, 100) is kernel
    monkeypatch.setattr(kernel_twins, "_interpreted", 0)
    assert kernel_twins.kernel_for(kernel, kernel_twins.SMALL_INPUT_BYTES + 1) is kernel


def test_warm_up_loads_every_kernel_signature_an_append_uses(tmp_path: Path) -> None:
    script = f"""
from storage import Log, kernels
from storage.records import build_batch_columns
import numpy as np
kernels.warm_up()
before = {{name: len(value.overloads) for name, value in vars(kernels).items()
          if hasattr(value, "overloads")}}
log = Log.open({str(tmp_path / "t-0")!r})
n = 200     # above the twins' small-input size: the compiled kernel checks it
log.append_batch(build_batch_columns([b"k%d" % i for i in range(n)], [b"v" * 100] * n,
                                     np.arange(n, dtype=np.int64)))
log.close()
print(sorted(name for name, value in vars(kernels).items()
             if hasattr(value, "overloads") and len(value.overloads) != before[name]))
"""
    out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, check=True,
                         capture_output=True, text=True).stdout
    assert eval(out) == []   # the kernels that loaded a signature on the append's path
