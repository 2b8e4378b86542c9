# SPDX-License-Identifier: MIT
"""PyCUDA's kernel getters (elementwise.get_*, reduction.get_*).

CPU part: every getter's source compiles with NVRTC (to PTX, for sm_90) and the
signature it prepares has the kernel's parameter sizes, read from the PTX; bad
dtypes, operators and functions raise clear exceptions.  GPU part: the returned
Functions launched the PyCUDA way (``prepared_call(grid, block, ...)``) against NumPy.
"""

import re
import types
import warnings
import weakref

import numpy as np
import pytest
from conftest import DTYPE_COVER, full_or, nvrtc_check

from barecuda import elementwise, reduction, tools
from barecuda.tools import ScalarArg, VectorArg

# ----------------------------------------------------------------- offline harness

_PTX_SIZE = {"8": 1, "16": 2, "32": 4, "64": 8}
_FMT_SIZE = {"b": 1, "B": 1, "?": 1, "c": 1, "h": 2, "H": 2, "e": 2, "i": 4, "I": 4, "f": 4,
             "l": 8, "L": 8, "q": 8, "Q": 8, "d": 8, "P": 8, "n": 8, "N": 8, "F": 8, "D": 16}


def _fmt_sizes(fmt):
    out = []
    for count, ch in re.findall(r"(\d*)([a-zA-Z?])", fmt):
        if ch == "s":
            out.append(int(count))
        else:
            out += [_FMT_SIZE[ch]] * int(count or 1)
    return out


class _OfflineFunction:
    def __init__(self, name, sizes):
        self.name, self.param_sizes, self.format = name, sizes, None

    def prepare(self, fmt):
        assert _fmt_sizes(fmt) == self.param_sizes, (self.name, fmt, self.param_sizes)
        self.format = fmt
        return self


class _OfflineModule:
    """What the getters load, compiled to PTX here instead of loaded on a GPU."""

    def __init__(self, source, options=None, keep=False):
        self.source = source
        ptx = nvrtc_check(source, ptx=True, options=options)
        self.ptx = ptx.decode() if isinstance(ptx, bytes) else ptx

    def get_function(self, name):
        m = re.search(r"\.entry\s+%s\s*\((.*?)\)" % re.escape(name), self.ptx, re.S)
        assert m is not None, f"no kernel {name} in the PTX"
        sizes = []
        for bits, count in re.findall(r"\.param\s+(?:\.align\s+\d+\s+)?\.[a-z]+?(\d+)\s+\w+"
                                      r"(?:\[(\d+)\])?", m.group(1)):
            sizes.append(_PTX_SIZE[bits] * int(count or 1))
        return _OfflineFunction(name, sizes)

    def get_global(self, name):
        assert re.search(r"\.global .*\b%s\b" % re.escape(name), self.ptx), name
        return (0, 16)


class _FakeContext:
    """Stands for a Context: the getters' results live in its kernel_cache."""

    def __init__(self):
        self.kernel_cache = {}


@pytest.fixture
def offline(monkeypatch):
    """Getters build offline: no context current, modules compiled to PTX."""
    ctx = {"current": None}
    fake_drv = types.SimpleNamespace(
        Context=types.SimpleNamespace(get_current=lambda: ctx["current"]))
    # the getters live in barecuda._kernels (elementwise and reduction show them),
    # their memoization in barecuda._core.contexts (tools shows it)
    from barecuda._core import contexts
    from barecuda._kernels import elementwise_getters, reduction_getters
    monkeypatch.setattr(contexts, "_drv", fake_drv)
    monkeypatch.setattr(elementwise_getters, "_getter_module", _OfflineModule)
    monkeypatch.setattr(reduction_getters, "_getter_module", _OfflineModule)
    yield ctx
    for w in list(tools._memoized):
        w.clear_cache()


def _compile(src):
    return _OfflineModule(src)


REALS = [np.dtype(t) for t in (np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32,
                               np.int64, np.uint64, np.float32, np.float64)]
ALL = REALS + [np.dtype(t) for t in (np.bool_, np.float16, np.complex64, np.complex128)]
FLOATS = [np.dtype(np.float32), np.dtype(np.float64)]
COMPLEX = [np.dtype(np.complex64), np.dtype(np.complex128)]


# ----------------------------------------------------------------- CPU: compile + layout

def test_struct_char_is_an_attribute():
    assert VectorArg(np.float32, "x").struct_char == "P"
    assert ScalarArg(np.float32, "a").struct_char == "f"
    assert ScalarArg(np.complex64, "a").struct_char == "F"
    assert ScalarArg(np.uintp, "n").struct_char == np.dtype(np.uintp).char
    assert "".join(a.struct_char for a in tools.parse_c_args("float *x, double a, int n")) == "Pdi"


def test_elwise_kernel_and_types_layout(offline):
    args = [VectorArg(np.float32, "x"), ScalarArg(np.complex64, "a"), VectorArg(np.complex64, "z")]
    mod, f, out_args = elementwise.get_elwise_kernel_and_types(args, "z[i] = a * x[i]", "scale")
    assert f.format == "PFP" + np.dtype(np.uintp).char
    assert [a.name for a in out_args] == ["x", "a", "z", "n"]
    assert len(args) == 3            # the caller's list is left alone
    mod, f, out_args = elementwise.get_elwise_kernel_and_types(
        "float *x, float *z", "z[i] = x[i]", "cp", use_range=True)
    assert [a.name for a in out_args][-3:] == ["start", "stop", "step"]
    assert f.format == "PP" + 3 * np.dtype(np.intp).char
    f = elementwise.get_elwise_kernel("__half *x, __half h, bool *z", "z[i] = x[i] == h", "eqh")
    assert f.format == "PeP" + np.dtype(np.uintp).char


def test_elwise_module_needs_loop_bound(offline):
    with pytest.raises(ValueError, match="must declare n"):
        elementwise.get_elwise_module("float *x", "x[i] = 0")
    with pytest.raises(ValueError, match="start, step, stop"):
        elementwise.get_elwise_range_module("float *x, long n", "x[i] = 0")
    with pytest.raises(ValueError, match="reserved"):
        elementwise.get_elwise_kernel("float *x, int tid", "x[i] = 0")
    with pytest.raises(ValueError, match="non-empty"):
        elementwise.get_elwise_kernel("float *x", "  ")
    with pytest.raises(TypeError, match="unknown C type"):
        elementwise.get_elwise_kernel("quux *x", "x[i] = 0")


def test_elwise_module_as_the_wiki_example(offline):
    # the shape of PyCUDA's gpu_scalar_mult.py example, kernel without textures
    args = [VectorArg(np.float32, "global_a0"), VectorArg(np.float32, "x0"),
            VectorArg(np.float32, "global_a1"), VectorArg(np.float32, "x1"),
            VectorArg(np.float32, "z"), ScalarArg(np.uintp, "n")]
    mod = elementwise.get_elwise_module(args, "z[i] = a0*x0[i] + a1*x1[i]", "linear_combination",
                                        loop_prep="float a0 = *global_a0;\nfloat a1 = *global_a1")
    f = mod.get_function("linear_combination").prepare("".join(a.struct_char for a in args))
    assert f.format == "PPPPPL"


@pytest.mark.parametrize("dt", full_or(ALL, DTYPE_COVER), ids=str)
def test_simple_getters_compile(offline, dt):
    L = np.dtype(np.uintp).char
    ch = ScalarArg(dt, "a").struct_char
    assert elementwise.get_fill_kernel(dt).format == ch + "P" + L
    assert elementwise.get_reverse_kernel(dt).format == "PP" + L
    assert elementwise.get_arange_kernel(dt).format == "P" + ch + ch + L
    assert elementwise.get_copy_kernel(dt, np.float32).format == "PP" + L
    assert elementwise.get_copy_kernel(np.int32, dt).format == "PP" + L
    assert elementwise.get_where_kernel(np.int8, dt).format == "PPPP" + L
    if dt.kind != "c":
        assert elementwise.get_if_positive_kernel(dt, np.float32).format == "PPPP" + L
    assert elementwise.get_logical_not_kernel(dt, np.bool_).format == "PP" + L
    assert elementwise.get_take_kernel(dt, np.int32)[0].format == "PP" + L
    assert elementwise.get_put_kernel(dt, np.int64, 2).format == "PPPPP" + L
    f, refs = elementwise.get_take_put_kernel(dt, np.uint32, True, 3)
    assert f.format == "PPPPP" + "III" + L and len(refs) == 3
    real = dt if dt.kind != "c" else np.dtype(dt.char.lower())
    assert elementwise.get_real_kernel(dt, real).format == "PP" + L
    assert elementwise.get_imag_kernel(dt, real).format == "PP" + L
    assert elementwise.get_conj_kernel(dt, dt).format == "PP" + L


_BINARY = [(np.float32, np.float32, np.float32), (np.float64, np.float32, np.float64),
           (np.int32, np.int64, np.int64), (np.complex64, np.float32, np.complex64),
           (np.float32, np.complex128, np.complex128), (np.float16, np.float16, np.float16),
           (np.uint8, np.int8, np.int16)]


@pytest.mark.parametrize("dx,dy,dz", full_or(_BINARY, _BINARY[4:]),
                         ids=str)
def test_binary_getters_compile(offline, dx, dy, dz):
    dx, dy, dz = np.dtype(dx), np.dtype(dy), np.dtype(dz)
    L = np.dtype(np.uintp).char
    cx, cy, cz = (ScalarArg(d, "s").struct_char for d in (dx, dy, dz))
    assert elementwise.get_axpbyz_kernel(dx, dy, dz).format == f"{cx}P{cy}PP{L}"
    assert elementwise.get_axpbyz_kernel(dx, dy, dz, True, False).format == f"{cx}P{cy}PP{L}"
    assert elementwise.get_axpbz_kernel(dx, dz).format == f"{cz}P{cz}P{L}"
    # one template: the operator is a string in it; the cover takes one of each kind
    for op in full_or(["+", "-", "*", "/", "==", "<", ">=", "&&", "||", "!="], ["/", "<", "||"]):
        if dz.kind == "c" and op in ("<", ">="):
            continue
        assert elementwise.get_binary_op_kernel(dx, dy, dz, op, False, True).format == "PPP" + L
        assert elementwise.get_scalar_op_kernel(dx, dy, dz, op).format == f"P{cy}P{L}"
    if all(d.kind in "iu" for d in (dx, dy)):
        for op in full_or(["%", "&", "|", "^", "<<", ">>"], ["%", "<<"]):
            elementwise.get_binary_op_kernel(dx, dy, dz, op)
    assert elementwise.get_rdivide_elwise_kernel(dx, dz).format == f"P{cz}P{L}"
    for xa, ya in ((True, True), (True, False), (False, True)):
        f = elementwise.get_pow_array_kernel(dx, dy, dz, xa, ya)
        assert f.format == ("P" if xa else cx) + ("P" if ya else cy) + "P" + L
    if dz.kind != "c" and dz != np.float16:
        for func in ("max", "min"):
            assert elementwise.get_binary_minmax_kernel(func, dx, dy, dz, False).format == "PPP" + L
            assert elementwise.get_binary_minmax_kernel(func, dx, dy, dz, True).format == f"P{cy}P{L}"


def test_function_getters_compile(offline):
    L = np.dtype(np.uintp).char
    for f in (elementwise.get_fmod_kernel(), elementwise.get_modf_kernel(),
              elementwise.get_frexp_kernel(), elementwise.get_ldexp_kernel()):
        assert f.format == "PPP" + L
    for dt in FLOATS + COMPLEX:
        for name in full_or(["sin", "exp", "sqrt", "log"], ["sqrt"]):
            assert elementwise.get_unary_func_kernel(name, dt).format == "PP" + L
    assert elementwise.get_unary_func_kernel("fabs", np.float64, np.float32).format == "PP" + L
    assert elementwise.get_unary_func_kernel("barecuda::abs", np.complex64, np.float32).format == "PP" + L
    assert elementwise.get_binary_func_kernel("atan2", np.float64, np.float64, np.float64).format == "PPP" + L
    assert elementwise.get_binary_func_scalar_kernel("fmaxf", np.float32, np.float32,
                                                     np.float32).format == "PfP" + L


@pytest.mark.parametrize("desc,dz,fmt,nrefs", [
    (((True, np.float32, np.float32), (True, np.float32, np.float32)), np.float32, "PPP", 2),
    (((False, np.float64, np.float32), (True, np.float32, np.float32)), np.float64, "dPPP", 1),
    (((False, np.complex64, np.complex64), (False, np.float32, np.float32)), np.complex64,
     "FPfPP", 0),
    (((True, np.complex128, np.complex128),), np.complex128, "PP", 1),
], ids=["two-gpu", "mixed", "cpu-complex", "gpu-complex"])
def test_linear_combination_layout(offline, desc, dz, fmt, nrefs):
    f, refs = elementwise.get_linear_combination_kernel(desc, dz)
    assert f.format == fmt + np.dtype(np.uintp).char
    assert len(refs) == nrefs
    for r in refs:
        assert isinstance(r, elementwise.PointerTextureRef)
        assert r.module.get_global(r.symbol)


def test_texref_stand_in_checks_arguments(offline):
    _, refs = elementwise.get_take_kernel(np.float32, np.int32)
    r = refs[0]
    with pytest.raises(TypeError, match="must be an int"):
        r.set_address(1.5, 16)
    with pytest.raises(TypeError, match="must be an int"):
        r.set_address(4096, "16")
    with pytest.raises(ValueError, match="negative"):
        r.set_address(-8, 16)
    with pytest.raises(TypeError, match="set_array"):
        r.set_array(None)
    r.set_format(1, 1)
    r.set_flags(3)
    assert r.get_format() == (1, 1) and r.get_flags() == 3 and r.get_address() == 0
    assert "bc_tex_src0" in repr(r)


def test_bad_arguments_raise(offline):
    E = elementwise
    with pytest.raises(ValueError, match="unsupported operator"):
        E.get_binary_op_kernel(np.float32, np.float32, np.float32, "**")
    with pytest.raises(ValueError, match="unsupported operator"):
        E.get_scalar_op_kernel(np.float32, np.float32, np.float32, "+ 1; x")
    with pytest.raises(TypeError, match="operator must be a str"):
        E.get_binary_op_kernel(np.float32, np.float32, np.float32, None)
    with pytest.raises(TypeError, match="integer dtypes"):
        E.get_binary_op_kernel(np.float32, np.int32, np.float32, "%")
    with pytest.raises(TypeError, match="integer dtypes"):
        E.get_scalar_op_kernel(np.int32, np.float64, np.int32, "<<")
    with pytest.raises(TypeError):
        E.get_fill_kernel(np.dtype("U4"))
    with pytest.raises(TypeError):
        E.get_fill_kernel(object)
    with pytest.raises(TypeError, match="may not be None"):
        E.get_copy_kernel(None, np.float32)
    with pytest.raises(TypeError, match="integer dtype"):
        E.get_take_kernel(np.float32, np.float32)
    with pytest.raises(ValueError, match="vec_count"):
        E.get_put_kernel(np.float32, np.int32, 0)
    with pytest.raises(ValueError, match="vec_count"):
        E.get_take_put_kernel(np.float32, np.int32, False, True)
    with pytest.raises(ValueError, match="must name a device function"):
        E.get_unary_func_kernel("sin(x); foo", np.float32)
    with pytest.raises(TypeError, match="device function"):
        E.get_binary_func_kernel(3, np.float32, np.float32, np.float32)
    with pytest.raises(ValueError, match="'max' or 'min'"):
        E.get_binary_minmax_kernel("mean", np.float32, np.float32, np.float32, False)
    with pytest.raises(TypeError, match="complex"):
        E.get_binary_minmax_kernel("max", np.complex64, np.complex64, np.complex64, False)
    with pytest.raises(ValueError, match="at least one"):
        E.get_pow_array_kernel(np.float32, np.float32, np.float32, False, False)
    with pytest.raises(ValueError, match="at least one summand"):
        E.get_linear_combination_kernel((), np.float32)
    with pytest.raises(TypeError, match="triples"):
        E.get_linear_combination_kernel(((True, np.float32),), np.float32)
    with pytest.raises(TypeError, match="complex"):
        E.get_if_positive_kernel(np.complex64, np.float32)


def test_getters_memoized_per_context(offline):
    a, b = _FakeContext(), _FakeContext()
    offline["current"] = a
    f1 = elementwise.get_fill_kernel(np.float32)
    assert elementwise.get_fill_kernel(np.dtype(np.float32)) is f1
    assert elementwise.get_fmod_kernel() is elementwise.get_fmod_kernel()
    assert reduction.get_sum_kernel(None, np.float32) is reduction.get_sum_kernel(np.float32,
                                                                                  np.float32)
    offline["current"] = b
    assert elementwise.get_fill_kernel(np.float32) is not f1
    ref = weakref.ref(a)
    offline["current"] = None
    del a
    import gc
    gc.collect()
    assert ref() is None            # the caches hold contexts weakly


# ----------------------------------------------------------------- CPU: reductions

def test_reduction_module_layout(offline):
    f, types_ = reduction.get_reduction_kernel_and_types(
        1, "float", 512, "0", "a+b", "a[i]*b[i]", "const float *a, const float *b",
        name="dot_stage1")
    assert types_ == ["P", "P"] and f.format == "PPPIN"
    f, types_ = reduction.get_reduction_kernel_and_types(
        2, "float", 512, "0", "a+b", arguments="const float *a, const float *b",
        name="dot_stage2")
    assert types_ == ["P", "P", "P"] and f.format == "PPPPIN"
    mod = reduction.get_reduction_module("double", 256, "-MY_INFINITY", "fmax(a,b)", "in[i]",
                                         "const double *in, int k", preamble="#define MY_INFINITY (1./0)")
    assert mod.get_function("reduce_kernel").prepare("PPiIN").format == "PPiIN"
    with pytest.raises(ValueError, match="block_size"):
        reduction.get_reduction_module("float", 100, "0", "a+b", "in[i]", "const float *in")
    with pytest.raises(ValueError, match="stage"):
        reduction.get_reduction_kernel_and_types(3, "float", 512, "0", "a+b")
    with pytest.raises(ValueError, match="array"):
        reduction.get_reduction_module("float", 512, "0", "a+b", "k", "int k")
    with pytest.raises(ValueError, match="reserved"):
        reduction.get_reduction_module("float", 512, "0", "a+b", "x[0]", "const float *x, int i")


@pytest.mark.parametrize("dt", full_or(REALS + COMPLEX, [np.dtype(t) for t in (
    np.int8, np.float32, np.complex128)]), ids=str)
def test_reduction_getters_compile(offline, dt):
    R = reduction
    kernels = [R.get_sum_kernel(None, dt), R.get_sum_kernel(np.float64 if dt.kind != "c" else dt, dt),
               R.get_subset_sum_kernel(None, np.int32, dt), R.get_dot_kernel(dt, dt, dt),
               R.get_subset_dot_kernel(dt, np.uint32, dt, dt), R.get_any_kernel(np.bool_, dt),
               R.get_all_kernel(None, dt)]
    if dt.kind != "c":
        kernels += [R.get_minmax_kernel("min", dt), R.get_minmax_kernel("max", dt),
                    R.get_subset_minmax_kernel("max", dt, np.int64)]
    for k in kernels:
        assert isinstance(k, R.ReductionKernel)
        _compile(k.source())


def test_reduction_bad_arguments(offline):
    R = reduction
    with pytest.raises(ValueError, match="'min' or 'max'"):
        R.get_minmax_neutral("mean", np.float32)
    with pytest.raises(TypeError, match="float32, float64 and integer"):
        R.get_minmax_kernel("max", np.complex64)
    with pytest.raises(TypeError, match="float32, float64 and integer"):
        R.get_minmax_kernel("min", np.float16)
    with pytest.raises(TypeError, match="integer dtype"):
        R.get_subset_sum_kernel(None, np.float32, np.float32)
    with pytest.raises(TypeError, match="may not be None"):
        R.get_dot_kernel(None, np.float32, np.float32)
    assert R.get_minmax_neutral("min", np.float64) == "MY_INFINITY"
    assert R.get_minmax_neutral("max", np.float32) == "-MY_INFINITY"
    assert R.get_minmax_neutral("min", np.int8) == "127"
    assert R.get_minmax_neutral("max", np.uint32) == "0"


# ----------------------------------------------------------------- GPU

gpu = pytest.mark.gpu


def _rand(rng, n, dt):
    dt = np.dtype(dt)
    if dt.kind == "c":
        return (rng.standard_normal(n) + 1j * rng.standard_normal(n)).astype(dt)
    if dt.kind == "b":
        return rng.integers(0, 2, n).astype(dt)
    if dt.kind in "iu":
        lo, hi = (1, 50) if dt.kind == "u" else (-50, 50)
        return rng.integers(lo, hi, n).astype(dt)
    return (rng.standard_normal(n) * 3).astype(dt)


def _ga():
    from barecuda import gpuarray
    return gpuarray


def _close(got, want, dt):
    dt = np.dtype(dt)
    if dt.kind in "fc":
        tol = 2e-2 if dt == np.float16 else (1e-5 if dt.itemsize * (2 if dt.kind == "f" else 1) <= 8 else 1e-12)
        np.testing.assert_allclose(got, want.astype(dt), rtol=tol, atol=tol)
    else:
        np.testing.assert_array_equal(got, want.astype(dt))


@gpu
@pytest.mark.parametrize("dt", ALL, ids=str)
def test_gpu_fill_reverse_copy_arange(ctx, rng, dt):
    ga = _ga()
    n = 10007
    x = _rand(rng, n, dt)
    gx, gz = ga.to_gpu(x), ga.empty(n, dt)
    elementwise.get_reverse_kernel(dt).prepared_call(gz._grid, gz._block, gx.gpudata, gz.gpudata, n)
    np.testing.assert_array_equal(gz.get(), x[::-1])
    v = _rand(rng, 1, dt)[0]
    elementwise.get_fill_kernel(dt).prepared_call(gz._grid, gz._block, v, gz.gpudata, n)
    np.testing.assert_array_equal(gz.get(), np.full(n, v, dt))
    for dst in (np.float64, np.int32, dt):
        gd = ga.empty(n, dst)
        elementwise.get_copy_kernel(dst, dt).prepared_async_call(gd._grid, gd._block, None,
                                                                 gd.gpudata, gx.gpudata, n)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")      # ComplexWarning: the real part is kept
            want = x.astype(dst)
        np.testing.assert_array_equal(gd.get(), want)
    if dt.kind in "iuf":
        start, step = dt.type(3), dt.type(2)
        elementwise.get_arange_kernel(dt).prepared_call(gz._grid, gz._block, gz.gpudata,
                                                        start, step, n)
        want = (start + np.arange(n, dtype=np.float64) * step)
        _close(gz.get(), want if dt.kind == "f" else np.arange(n).astype(dt) * step + start, dt)


@gpu
@pytest.mark.parametrize("dx,dy,dz", [
    (np.float32, np.float32, np.float32), (np.float64, np.float32, np.float64),
    (np.int32, np.int32, np.int32), (np.complex64, np.float32, np.complex64),
    (np.float64, np.complex128, np.complex128)], ids=str)
def test_gpu_axpbyz_binary_ops(ctx, rng, dx, dy, dz):
    ga = _ga()
    n = 4099
    x, y = _rand(rng, n, dx), _rand(rng, n, dy)
    gx, gy, gz = ga.to_gpu(x), ga.to_gpu(y), ga.empty(n, dz)
    a, b = np.dtype(dx).type(2), np.dtype(dy).type(-3)
    elementwise.get_axpbyz_kernel(np.dtype(dx), np.dtype(dy), np.dtype(dz)).prepared_call(
        gz._grid, gz._block, a, gx.gpudata, b, gy.gpudata, gz.gpudata, n)
    _close(gz.get(), a * x.astype(dz) + b * y.astype(dz), dz)
    gs = ga.to_gpu(y[:1].copy())
    elementwise.get_axpbyz_kernel(np.dtype(dx), np.dtype(dy), np.dtype(dz), False, True) \
        .prepared_call(gz._grid, gz._block, a, gx.gpudata, b, gs.gpudata, gz.gpudata, n)
    _close(gz.get(), a * x.astype(dz) + b * y[0], dz)
    elementwise.get_axpbz_kernel(np.dtype(dx), np.dtype(dz)).prepared_call(
        gz._grid, gz._block, np.dtype(dz).type(3), gx.gpudata, np.dtype(dz).type(1), gz.gpudata, n)
    _close(gz.get(), 3 * x.astype(dz) + 1, dz)
    for op, fn in (("+", np.add), ("-", np.subtract), ("*", np.multiply)):
        elementwise.get_binary_op_kernel(np.dtype(dx), np.dtype(dy), np.dtype(dz), op) \
            .prepared_call(gz._grid, gz._block, gx.gpudata, gy.gpudata, gz.gpudata, n)
        _close(gz.get(), fn(x.astype(dz), y.astype(dz)), dz)
        elementwise.get_scalar_op_kernel(np.dtype(dx), np.dtype(dy), np.dtype(dz), op) \
            .prepared_call(gz._grid, gz._block, gx.gpudata, y[5], gz.gpudata, n)
        _close(gz.get(), fn(x.astype(dz), y[5]), dz)
    gb = ga.empty(n, np.bool_)
    if np.dtype(dz).kind != "c":
        for op, fn in (("<", np.less), ("==", np.equal), ("&&", np.logical_and)):
            elementwise.get_binary_op_kernel(np.dtype(dx), np.dtype(dy), np.dtype(np.bool_), op) \
                .prepared_call(gb._grid, gb._block, gx.gpudata, gy.gpudata, gb.gpudata, n)
            np.testing.assert_array_equal(gb.get(), fn(x, y))
    if np.dtype(dz).kind == "f":
        xs = np.where(x == 0, 1, x)
        gx.set(xs)
        elementwise.get_rdivide_elwise_kernel(np.dtype(dx), np.dtype(dz)).prepared_call(
            gz._grid, gz._block, gx.gpudata, np.dtype(dz).type(5), gz.gpudata, n)
        _close(gz.get(), 5 / xs.astype(dz), dz)


@gpu
def test_gpu_integer_ops_and_minmax(ctx, rng):
    ga = _ga()
    n = 3001
    x = rng.integers(-1000, 1000, n).astype(np.int32)
    y = rng.integers(1, 30, n).astype(np.int32)
    gx, gy, gz = ga.to_gpu(x), ga.to_gpu(y), ga.empty(n, np.int32)
    for op, want in (("&", x & y), ("|", x | y), ("^", x ^ y), ("<<", x << (y % 8)),
                     ("%", np.fmod(x, y))):
        gy.set(y % 8 if op == "<<" else y)
        elementwise.get_binary_op_kernel(np.dtype(np.int32), np.dtype(np.int32),
                                         np.dtype(np.int32), op).prepared_call(
            gz._grid, gz._block, gx.gpudata, gy.gpudata, gz.gpudata, n)
        np.testing.assert_array_equal(gz.get(), want)   # C's %: sign of the dividend
    gy.set(y)
    for dt in (np.int32, np.float32, np.float64):
        xd, yd = x.astype(dt), y.astype(dt)
        gxd, gyd, gzd = ga.to_gpu(xd), ga.to_gpu(yd), ga.empty(n, dt)
        for func, fn in (("max", np.maximum), ("min", np.minimum)):
            elementwise.get_binary_minmax_kernel(func, np.dtype(dt), np.dtype(dt), np.dtype(dt),
                                                 False).prepared_call(
                gzd._grid, gzd._block, gxd.gpudata, gyd.gpudata, gzd.gpudata, n)
            np.testing.assert_array_equal(gzd.get(), fn(xd, yd))
            elementwise.get_binary_minmax_kernel(func, np.dtype(dt), np.dtype(dt), np.dtype(dt),
                                                 True).prepared_call(
                gzd._grid, gzd._block, gxd.gpudata, dt(7), gzd.gpudata, n)
            np.testing.assert_array_equal(gzd.get(), fn(xd, dt(7)))


@gpu
@pytest.mark.parametrize("dt", [np.float32, np.float64, np.complex64, np.complex128], ids=str)
def test_gpu_unary_pow_parts(ctx, rng, dt):
    ga = _ga()
    dt = np.dtype(dt)
    n = 2049
    x = _rand(rng, n, dt)
    x = np.where(x == 0, 1, x).astype(dt)
    gx, gz = ga.to_gpu(x), ga.empty(n, dt)
    for name, fn in (("exp", np.exp), ("sin", np.sin), ("sqrt", np.sqrt)):
        xin = np.abs(x).astype(dt) if name == "sqrt" and dt.kind == "f" else x
        gx.set(xin)
        elementwise.get_unary_func_kernel(name, dt).prepared_call(gz._grid, gz._block,
                                                                  gx.gpudata, gz.gpudata, n)
        _close(gz.get(), fn(xin), dt)
    base = (np.abs(x) + 0.5).astype(dt)
    e = _rand(rng, n, dt) * 0.5
    gb, ge = ga.to_gpu(base), ga.to_gpu(e.astype(dt))
    k = elementwise.get_pow_array_kernel(dt, dt, dt, True, True)
    k.prepared_call(gz._grid, gz._block, gb.gpudata, ge.gpudata, gz.gpudata, n)
    _close(gz.get(), base ** e.astype(dt), dt)
    k = elementwise.get_pow_array_kernel(dt, dt, dt, True, False)
    k.prepared_call(gz._grid, gz._block, gb.gpudata, dt.type(2), gz.gpudata, n)
    _close(gz.get(), base ** dt.type(2), dt)
    k = elementwise.get_pow_array_kernel(dt, dt, dt, False, True)
    k.prepared_call(gz._grid, gz._block, dt.type(1.5), ge.gpudata, gz.gpudata, n)
    _close(gz.get(), dt.type(1.5) ** e.astype(dt), dt)
    real = np.dtype(np.float32) if dt in (np.float32, np.complex64) else np.dtype(np.float64)
    gr = ga.empty(n, real)
    gx.set(x)
    elementwise.get_real_kernel(dt, real).prepared_call(gr._grid, gr._block, gx.gpudata, gr.gpudata, n)
    np.testing.assert_array_equal(gr.get(), x.real)
    elementwise.get_imag_kernel(dt, real).prepared_call(gr._grid, gr._block, gx.gpudata, gr.gpudata, n)
    np.testing.assert_array_equal(gr.get(), np.imag(x))
    elementwise.get_conj_kernel(dt, dt).prepared_call(gz._grid, gz._block, gx.gpudata, gz.gpudata, n)
    np.testing.assert_array_equal(gz.get(), np.conj(x))


@gpu
def test_gpu_float32_math_kernels(ctx, rng):
    ga = _ga()
    n = 1500
    x = (rng.standard_normal(n) * 10).astype(np.float32)
    m = (np.abs(rng.standard_normal(n)) + 0.5).astype(np.float32)
    gx, gm = ga.to_gpu(x), ga.to_gpu(m)
    g1, g2 = ga.empty(n, np.float32), ga.empty(n, np.float32)
    g, b = gx._grid, gx._block
    elementwise.get_fmod_kernel().prepared_call(g, b, gx.gpudata, gm.gpudata, g1.gpudata, n)
    np.testing.assert_allclose(g1.get(), np.fmod(x, m), rtol=1e-6, atol=1e-6)
    elementwise.get_modf_kernel().prepared_call(g, b, gx.gpudata, g1.gpudata, g2.gpudata, n)
    frac, whole = np.modf(x)
    np.testing.assert_array_equal(g1.get(), whole)
    np.testing.assert_array_equal(g2.get(), frac)
    elementwise.get_frexp_kernel().prepared_call(g, b, gx.gpudata, g1.gpudata, g2.gpudata, n)
    mant, expo = np.frexp(x)
    np.testing.assert_array_equal(g1.get(), mant)
    np.testing.assert_array_equal(g2.get(), expo.astype(np.float32))
    elementwise.get_ldexp_kernel().prepared_call(g, b, g1.gpudata, g2.gpudata, gx.gpudata, n)
    np.testing.assert_array_equal(gx.get(), x)


@gpu
@pytest.mark.parametrize("dt", [np.int32, np.float32, np.float64, np.complex64, np.uint8], ids=str)
def test_gpu_select_logical_not(ctx, rng, dt):
    ga = _ga()
    n = 5000
    crit = rng.integers(-2, 3, n).astype(np.int16)
    t, e = _rand(rng, n, dt), _rand(rng, n, dt)
    gc_, gt, ge, gr = ga.to_gpu(crit), ga.to_gpu(t), ga.to_gpu(e), ga.empty(n, dt)
    elementwise.get_if_positive_kernel(crit.dtype, np.dtype(dt)).prepared_call(
        gr._grid, gr._block, gc_.gpudata, gt.gpudata, ge.gpudata, gr.gpudata, n)
    np.testing.assert_array_equal(gr.get(), np.where(crit > 0, t, e))
    elementwise.get_where_kernel(crit.dtype, np.dtype(dt)).prepared_call(
        gr._grid, gr._block, gc_.gpudata, gt.gpudata, ge.gpudata, gr.gpudata, n)
    np.testing.assert_array_equal(gr.get(), np.where(crit != 0, t, e))
    gb = ga.empty(n, np.bool_)
    elementwise.get_logical_not_kernel(np.dtype(dt), np.dtype(np.bool_)).prepared_call(
        gb._grid, gb._block, gt.gpudata, gb.gpudata, n)
    np.testing.assert_array_equal(gb.get(), np.logical_not(t))


@gpu
@pytest.mark.parametrize("dt", [np.float32, np.float64, np.complex128, np.int64, np.int8], ids=str)
@pytest.mark.parametrize("idt", [np.int32, np.uint32, np.int64], ids=str)
def test_gpu_take_put(ctx, rng, dt, idt):
    ga = _ga()
    n, m = 3000, 1777
    srcs = [_rand(rng, n, dt) for _ in range(3)]
    idx = rng.integers(0, n, m).astype(idt)
    gidx = ga.to_gpu(idx)
    gsrc = [ga.to_gpu(s) for s in srcs]
    # take, one and three vectors
    for count in (1, 3):
        f, refs = elementwise.get_take_kernel(np.dtype(dt), np.dtype(idt), count)
        outs = [ga.empty(m, dt) for _ in range(count)]
        for r, s in zip(refs, gsrc):
            s.bind_to_texref_ext(r, allow_double_hack=True, allow_complex_hack=True)
        f.prepared_async_call(gidx._grid, gidx._block, None, gidx.gpudata,
                              *[o.gpudata for o in outs], m)
        for o, s in zip(outs, srcs):
            np.testing.assert_array_equal(o.get(), s[idx])
    # out-of-range indices read 0, as tex1Dfetch
    f, refs = elementwise.get_take_kernel(np.dtype(dt), np.dtype(idt))
    gsrc[0][:10].bind_to_texref_ext(refs[0])
    out = ga.empty(m, dt)
    f.prepared_call(gidx._grid, gidx._block, gidx.gpudata, out.gpudata, m)
    np.testing.assert_array_equal(out.get(), np.where(idx < 10, srcs[0][np.minimum(idx, 9)], 0))
    # take_put with offsets
    dest_idx = rng.permutation(n)[:m].astype(idt)
    gdi = ga.to_gpu(dest_idx)
    f, refs = elementwise.get_take_put_kernel(np.dtype(dt), np.dtype(idt), True, 2)
    dests = [ga.to_gpu(np.zeros(n, dt)) for _ in range(2)]
    for r, s in zip(refs, gsrc):
        s.bind_to_texref_ext(r)
    small = rng.integers(0, n - 5, m).astype(idt)
    gsmall = ga.to_gpu(small)
    f.prepared_call(gdi._grid, gdi._block, gdi.gpudata, gsmall.gpudata,
                    *[d.gpudata for d in dests], idt(2), idt(5), m)
    for k, (d, s, off) in enumerate(zip(dests, srcs, (2, 5))):
        want = np.zeros(n, dt)
        want[dest_idx] = s[small + off]
        np.testing.assert_array_equal(d.get(), want)
    # put
    f = elementwise.get_put_kernel(np.dtype(dt), np.dtype(idt), 2)
    vals = [ga.to_gpu(_rand(rng, m, dt)) for _ in range(2)]
    dests = [ga.to_gpu(np.zeros(n, dt)) for _ in range(2)]
    f.prepared_call(gdi._grid, gdi._block, gdi.gpudata, *[d.gpudata for d in dests],
                    *[v.gpudata for v in vals], m)
    for d, v in zip(dests, vals):
        want = np.zeros(n, dt)
        want[dest_idx] = v.get()
        np.testing.assert_array_equal(d.get(), want)


@gpu
@pytest.mark.parametrize("dt", [np.float32, np.float64, np.complex64], ids=str)
def test_gpu_linear_combination_as_the_wiki_example(ctx, rng, dt):
    ga = _ga()
    from barecuda import driver as drv
    dt = np.dtype(dt)
    lc, refs = elementwise.get_linear_combination_kernel(((True, dt, dt), (True, dt, dt)), dt)
    for n in (1 << 10, 1 << 20):
        a = ga.to_gpu(np.array(5, dtype=dt))
        b = ga.to_gpu(np.array(7, dtype=dt))
        x, y = _rand(rng, n, dt), _rand(rng, n, dt)
        gx, gy, gz = ga.to_gpu(x), ga.to_gpu(y), ga.empty_like(ga.to_gpu(x))
        start, stop = drv.Event(), drv.Event()
        start.record()
        for _ in range(3):
            a.bind_to_texref_ext(refs[0], allow_double_hack=True)
            b.bind_to_texref_ext(refs[1], allow_double_hack=True)
            lc.prepared_call(gx._grid, gx._block, gx.gpudata, gy.gpudata, gz.gpudata, gx.mem_size)
        stop.record()
        stop.synchronize()
        assert stop.time_since(start) >= 0
        _close(gz.get(), 5 * x + 7 * y, dt)
    # a CPU factor and a GPU one, different vector dtypes
    f, refs = elementwise.get_linear_combination_kernel(
        ((False, np.float64, np.float32), (True, np.float32, np.float64)), np.float64)
    n = 1001
    x, y = _rand(rng, n, np.float32), _rand(rng, n, np.float64)
    c = ga.to_gpu(np.array([-2.5], np.float32))
    c.bind_to_texref(refs[0])
    gx, gy, gz = ga.to_gpu(x), ga.to_gpu(y), ga.empty(n, np.float64)
    f.prepared_call(gz._grid, gz._block, 1.5, gx.gpudata, gy.gpudata, gz.gpudata, n)
    np.testing.assert_allclose(gz.get(), 1.5 * x.astype(np.float64) - 2.5 * y, rtol=1e-12)


@gpu
def test_gpu_elwise_module_and_range(ctx, rng):
    ga = _ga()
    n = 5000
    args = [VectorArg(np.float32, "global_a0"), VectorArg(np.float32, "x0"),
            VectorArg(np.float32, "z"), ScalarArg(np.uintp, "n")]
    mod = elementwise.get_elwise_module(args, "z[i] = a0 * x0[i]", "scale",
                                        loop_prep="float a0 = *global_a0")
    f = mod.get_function("scale")
    f.prepare("".join(a.struct_char for a in args))
    x = _rand(rng, n, np.float32)
    a, gx, gz = ga.to_gpu(np.array([3], np.float32)), ga.to_gpu(x), ga.empty(n, np.float32)
    f.prepared_call(gx._grid, gx._block, a.gpudata, gx.gpudata, gz.gpudata, gx.mem_size)
    np.testing.assert_allclose(gz.get(), 3 * x, rtol=1e-6)
    _, f, _ = elementwise.get_elwise_kernel_and_types("float *x, float *z", "z[i] = -x[i]",
                                                      "neg", use_range=True)
    gz.fill(0)
    f.prepared_call((4, 1), (128, 1, 1), gx.gpudata, gz.gpudata, n - 1, 2, -3)
    want = np.zeros(n, np.float32)
    want[n - 1:2:-3] = -x[n - 1:2:-3]
    np.testing.assert_array_equal(gz.get(), want)


@gpu
@pytest.mark.parametrize("dt", [np.float32, np.float64, np.int32, np.int64, np.uint16, np.complex64],
                         ids=str)
def test_gpu_reduction_getters(ctx, rng, dt):
    ga = _ga()
    dt = np.dtype(dt)
    R = reduction
    n = 100003
    x, y = _rand(rng, n, dt), _rand(rng, n, dt)
    gx, gy = ga.to_gpu(x), ga.to_gpu(y)
    tol = dict(rtol=1e-4) if dt in (np.float32, np.complex64) else dict(rtol=1e-10)
    acc = np.float64 if dt.kind == "f" else (np.complex128 if dt.kind == "c" else dt)
    if dt.kind in "fc":
        np.testing.assert_allclose(R.get_sum_kernel(acc, dt)(gx).get(), x.astype(acc).sum(), **tol)
        np.testing.assert_allclose(R.get_dot_kernel(acc, dt, dt)(gx, gy).get(),
                                   (x.astype(acc) * y).sum(), **tol)
    else:
        assert R.get_sum_kernel(None, dt)(gx).get() == x.sum(dtype=dt)
        assert R.get_dot_kernel(dt, dt, dt)(gx, gy).get() == (x * y).sum(dtype=dt)
    sub = rng.integers(0, n, 5000).astype(np.int32)
    gsub = ga.to_gpu(sub)
    # integer sums wrap around in dtype_out, as NumPy's with dtype=
    np.testing.assert_allclose(R.get_subset_sum_kernel(acc, np.int32, dt)(gsub, gx).get(),
                               x[sub].astype(acc).sum(dtype=acc), **tol)
    np.testing.assert_allclose(R.get_subset_dot_kernel(acc, np.int32, dt, dt)(gsub, gx, gy).get(),
                               (x[sub].astype(acc) * y[sub].astype(acc)).sum(dtype=acc), **tol)
    if dt.kind != "c":
        assert R.get_minmax_kernel("max", dt)(gx).get() == x.max()
        assert R.get_minmax_kernel("min", dt)(gx).get() == x.min()
        assert R.get_subset_minmax_kernel("min", dt, np.int32)(gsub, gx).get() == x[sub].min()
    z = np.zeros(n, dt)
    gz = ga.to_gpu(z)
    assert not R.get_any_kernel(np.bool_, dt)(gz).get()
    assert R.get_all_kernel(np.bool_, dt)(gx).get() == bool(np.all(x))
    z[n // 2] = 1
    gz.set(z)
    assert R.get_any_kernel(None, dt)(gz).get() == 1
    assert R.get_all_kernel(None, dt)(gz).get() == 0


@gpu
def test_gpu_reduction_kernel_and_types_two_pass(ctx, rng):
    """A PyCUDA-style driver loop over get_reduction_kernel_and_types."""
    ga = _ga()
    n, bs, seq = 300001, 512, 4
    x, y = _rand(rng, n, np.float64), _rand(rng, n, np.float64)
    gx, gy = ga.to_gpu(x), ga.to_gpu(y)
    s1, t1 = reduction.get_reduction_kernel_and_types(
        1, "double", bs, "0", "a+b", "a[i]*b[i]", "const double *a, const double *b",
        name="dot_stage1")
    s2, t2 = reduction.get_reduction_kernel_and_types(
        2, "double", bs, "0", "a+b", arguments="const double *a, const double *b",
        name="dot_stage2")
    blocks = (n + bs * seq - 1) // (bs * seq)
    part = ga.empty(blocks, np.float64)
    s1.prepared_call((blocks, 1), (bs, 1, 1), part.gpudata, gx.gpudata, gy.gpudata, seq, n,
                     shared_size=bs * 8)
    out = ga.empty((), np.float64)
    s2.prepared_call((1, 1), (bs, 1, 1), out.gpudata, part.gpudata, gx.gpudata, gy.gpudata,
                     (blocks + bs - 1) // bs, blocks, shared_size=bs * 8)
    np.testing.assert_allclose(out.get(), np.dot(x, y), rtol=1e-10)
    # the map may use i bare and argument names the kernel's loop could shadow
    f, _ = reduction.get_reduction_kernel_and_types(
        1, "double", 256, "0", "a+b", "x[i] * k + i", "const double *x, int k")
    g = 37
    part = ga.empty(g, np.float64)
    f.prepared_call((g, 1), (256, 1, 1), part.gpudata, gx.gpudata, 3, 1, n)
    np.testing.assert_allclose(part.get().sum(), (3 * x + np.arange(n)).sum(), rtol=1e-10)


@gpu
def test_gpu_texref_bind_errors(ctx):
    ga = _ga()
    _, refs = elementwise.get_take_kernel(np.float32, np.int32)
    g = ga.to_gpu(np.arange(10, dtype=np.float32).reshape(2, 5))
    with pytest.raises(ValueError, match="channel"):
        g.bind_to_texref_ext(refs[0], channels=2)
    with pytest.raises(ValueError, match="contiguous"):
        g[:, ::2].bind_to_texref_ext(refs[0])
    assert g.bind_to_texref(refs[0]) == 0 and refs[0].nbytes == 40
