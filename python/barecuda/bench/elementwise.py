# SPDX-License-Identifier: MIT
"""Benchmark section ``elementwise``: GPUArray arithmetic on strided and mixed-dtype
operands, against CuPy.

Cases (``CASES``): ``x[::2] + y[::2]`` on float32 views with a step (the views are
made before the timing), ``float32 + float64`` and ``int32 * float32`` (both give
float64, as in NumPy).  Each at ``SMALL`` = 1000 result elements, where the launch
path dominates (microseconds per op), and at ``LARGE`` = 2^24, where memory does
(GB/s, counting one read of each operand's elements and one write of the
result).  ratio = barecuda's time / CuPy's time: less is better, 1.0 is par
(shared/PERFORMANCE.md asks for at least par on these operands).  Ours and
CuPy's loops alternate round by round (``interleaved_times``), each loop ending
in a synchronize that is inside its time.  Every result is checked against
NumPy on the same random data first; a wrong one is noted.  Without CuPy the
rows carry our figure alone and the note "cupy not installed"; an operation
GPUArray refuses gives a row without a value that says so.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, NamedTuple

import numpy as np

from barecuda.bench import interleaved_times, row

SMALL = 1000
LARGE = 1 << 24
ROUNDS = 15
ITERATIONS_SMALL = 2000   # ops per timed loop at SMALL
ITERATIONS_LARGE = 20     # and at LARGE


class Case(NamedTuple):
    """One operation: its label, the operand dtypes, the step of the operand views
    and the binary operation itself."""
    label: str
    dtypes: tuple[str, str]
    step: int
    op: Callable[[Any, Any], Any]


def _add(x: Any, y: Any) -> Any:
    return x + y


def _mul(x: Any, y: Any) -> Any:
    return x * y


CASES = [
    Case("x[::2] + y[::2] float32", ("float32", "float32"), 2, _add),
    Case("float32 + float64", ("float32", "float64"), 1, _add),
    Case("int32 * float32", ("int32", "float32"), 1, _mul),
]


def row_name(case: Case, size: int) -> str:
    """The row's name, e.g. ``"x[::2] + y[::2] float32, 1000 elements"``."""
    return f"{case.label}, {'2^24' if size == LARGE else size} elements"


def nbytes(case: Case, size: int) -> int:
    """Bytes one op moves at `size` result elements: each operand's elements read
    once, the result written once."""
    x, y = (np.dtype(d) for d in case.dtypes)
    return size * (x.itemsize + y.itemsize + np.result_type(x, y).itemsize)


def make_row(case: Case, size: int, ours: float | None, cupy: float | None = None,
             note: str | None = None) -> dict[str, Any]:
    """The row for `case` at `size`: `ours` and `cupy` are seconds per op (None
    when not measured); us/op at SMALL sizes, GB/s otherwise."""
    if ours is None:
        value = None
    elif size == LARGE:
        value = nbytes(case, size) / ours / 1e9
    else:
        value = ours * 1e6
    ratio = ours / cupy if ours is not None and cupy else None
    return row(row_name(case, size), value, "GB/s" if size == LARGE else "us/op", ratio,
               "cupy, time ours / theirs (less is better)" if ratio is not None else None, note)


def host_operands(case: Case, size: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Random host arrays of ``size * case.step`` elements for the two operands."""
    out = []
    for d in case.dtypes:
        dt = np.dtype(d)
        n = size * case.step
        if dt.kind in "iu":
            out.append(rng.integers(-1000, 1000, n).astype(dt))
        else:
            out.append(rng.standard_normal(n).astype(dt))
    return out[0], out[1]


def _cupy() -> tuple[Any, str | None]:
    """(cupy, None), or (None, why it cannot be used)."""
    try:
        import cupy
    except ImportError:
        return None, "cupy not installed"
    except Exception as exc:  # noqa: BLE001 - a broken install: say so
        return None, f"cupy does not import: {exc}"
    try:
        cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:  # noqa: BLE001
        return None, f"cupy unusable: {exc}"
    return cupy, None


def _check(got: np.ndarray, want: np.ndarray) -> str | None:
    if got.dtype != want.dtype:
        return f"WRONG DTYPE {got.dtype} (NumPy gives {want.dtype})"
    if not np.allclose(got, want, rtol=1e-6, atol=0):
        return "WRONG RESULT"
    return None


def run() -> list[dict[str, Any]]:
    from barecuda import driver as drv
    from barecuda import gpuarray
    from barecuda.tools import make_default_context

    ctx = drv.Context.get_current() or make_default_context()
    cp, why = _cupy()
    rng = np.random.default_rng(0)
    rows = []
    for size in (SMALL, LARGE):
        for case in CASES:
            hx, hy = host_operands(case, size, rng)
            s = slice(None, None, case.step)
            want = case.op(hx[s], hy[s])
            x, y = gpuarray.to_gpu(hx)[s], gpuarray.to_gpu(hy)[s]
            try:
                note = _check(case.op(x, y).get(), want)
            except Exception as exc:  # noqa: BLE001 - an operation we lack: a row says so
                rows.append(make_row(case, size, None,
                                     note=f"not supported: {type(exc).__name__}: {exc}"))
                continue
            fns: list[Callable[[], object]] = [functools.partial(case.op, x, y)]
            syncs: list[Callable[[], object] | None] = [drv.Context.synchronize]
            if cp is not None:
                cx, cy = cp.asarray(hx)[s], cp.asarray(hy)[s]
                fns.append(functools.partial(case.op, cx, cy))
                syncs.append(cp.cuda.Device().synchronize)
            iters = ITERATIONS_SMALL if size == SMALL else ITERATIONS_LARGE
            times = interleaved_times(fns, syncs, iterations=iters, rounds=ROUNDS)
            notes = [n for n in (note, why) if n]
            rows.append(make_row(case, size, times[0], times[1] if cp is not None else None,
                                 "; ".join(notes) or None))
            del x, y, fns
            if cp is not None:
                del cx, cy
    del ctx
    return rows


if __name__ == "__main__":
    from barecuda.bench import format_table
    print(format_table([dict(r, section="elementwise") for r in run()]), end="")
