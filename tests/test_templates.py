# SPDX-License-Identifier: MIT
"""CPU tests of the array layer: template rendering, C declaration parsing, dtype names,
and NVRTC compilation (no GPU needed) of every kernel the array layer generates."""

import numpy as np
import pytest
from conftest import DTYPE_COVER, FULL_TEMPLATES, full_or, nvrtc_check, nvrtc_check_many

from barecuda import tools
from barecuda import elementwise as ew
from barecuda import gpuarray as ga
from barecuda._array import gather as _gather
from barecuda import cumath, curandom
from barecuda.elementwise import ElementwiseKernel
from barecuda.reduction import ReductionKernel
from barecuda.scan import ExclusiveScanKernel, InclusiveScanKernel

DTYPES = [np.dtype(t) for t in (np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8,
                                np.uint16, np.uint32, np.uint64, np.float16, np.float32,
                                np.float64, np.complex64, np.complex128)]
FLOATS = [np.dtype(t) for t in (np.float16, np.float32, np.float64)]
BINOPS = ["add", "subtract", "multiply", "true_divide", "floor_divide", "remainder", "power",
          "equal", "not_equal", "less", "less_equal", "greater", "greater_equal", "maximum",
          "minimum"]
#: The dtypes whose kernels are compiled: all of them with BARECUDA_FULL_TEMPLATES=1.
COMPILED = full_or(DTYPES, DTYPE_COVER)


def _compile_in_batches(kernels, variants=((False, False),)):
    nvrtc_check_many(k.source(*v) for k in kernels for v in variants)


# ------------------------------------------------------------------ dtypes, parsing

@pytest.mark.parametrize("dt,name", [
    (np.bool_, "bool"), (np.int8, "signed char"), (np.uint8, "unsigned char"),
    (np.int16, "short"), (np.uint16, "unsigned short"), (np.int32, "int"),
    (np.uint32, "unsigned int"), (np.int64, "long long"), (np.uint64, "unsigned long long"),
    (np.float16, "__half"), (np.float32, "float"), (np.float64, "double"),
    (np.complex64, "barecuda::complex<float>"), (np.complex128, "barecuda::complex<double>")])
def test_dtype_to_ctype(dt, name):
    assert tools.dtype_to_ctype(dt) == name
    assert tools.dtype_to_ctype(np.dtype(dt).str) == name
    assert tools.get_or_register_dtype(name) == np.dtype(dt)


def test_dtype_to_ctype_errors():
    with pytest.raises(TypeError, match="has no C type"):
        tools.dtype_to_ctype(np.dtype("U3"))
    with pytest.raises(ValueError, match="None"):
        tools.dtype_to_ctype(None)
    with pytest.raises(TypeError, match="unknown C type 'struct foo'"):
        tools.get_or_register_dtype("struct foo")


def test_register_dtype():
    dt = np.dtype([("a", np.int32), ("b", np.float32)])
    tools.register_dtype(dt, "my_pair_t")
    assert tools.dtype_to_ctype(dt) == "my_pair_t"
    assert tools.parse_c_arg("my_pair_t *p") == tools.VectorArg(dt, "p")
    with pytest.raises(RuntimeError, match="already registered"):
        tools.register_dtype(dt, "other_pair_t")
    with pytest.raises(RuntimeError, match="already registered"):
        tools.register_dtype(np.float32, "my_pair_t")


@pytest.mark.parametrize("decl,cls,dt,name", [
    ("float a", tools.ScalarArg, np.float32, "a"),
    ("const double *x", tools.VectorArg, np.float64, "x"),
    ("double* x", tools.VectorArg, np.float64, "x"),
    ("unsigned int n2", tools.ScalarArg, np.uint32, "n2"),
    ("unsigned long long *u", tools.VectorArg, np.uint64, "u"),
    ("pycuda::complex<float> *z", tools.VectorArg, np.complex64, "z"),
    ("barecuda::complex< double > c", tools.ScalarArg, np.complex128, "c"),
    ("__half h[]", tools.VectorArg, np.float16, "h"),
    ("float *__restrict__ y", tools.VectorArg, np.float32, "y"),
    ("int8_t q", tools.ScalarArg, np.int8, "q"),
    ("bool flag", tools.ScalarArg, np.bool_, "flag"),
])
def test_parse_c_arg(decl, cls, dt, name):
    arg = tools.parse_c_arg(decl)
    assert type(arg) is cls
    assert arg.dtype == np.dtype(dt)
    assert arg.name == name


@pytest.mark.parametrize("decl,exc,msg", [
    ("floot *x", TypeError, "unknown C type 'floot'"),
    ("float **x", ValueError, "pointers to pointers"),
    ("float", ValueError, "cannot parse"),
    ("", ValueError, "empty"),
    ("float x[4]", ValueError, "arrays"),
])
def test_parse_c_arg_errors(decl, exc, msg):
    with pytest.raises(exc, match=msg):
        tools.parse_c_arg(decl)


def test_parse_c_args_list():
    args = tools.parse_c_args("float a, pycuda::complex<float> *z, int n2")
    assert [a.name for a in args] == ["a", "z", "n2"]
    assert tools.parse_c_args([tools.VectorArg(np.float32, "x"), "int k"])[1].dtype == np.int32
    with pytest.raises(ValueError, match="used twice"):
        tools.parse_c_args("float a, int a")
    with pytest.raises(ValueError, match="empty declaration"):
        tools.parse_c_args("float a,, int b")
    with pytest.raises(TypeError, match="must be a str"):
        tools.parse_c_arg(3)


# ------------------------------------------------------------------ rendering

def test_templates_render_completely():
    k = ElementwiseKernel("float a, float *x, float *y, float *z", "z[i] = a * x[i] + y[i]", "axpy",
                          preamble="#define TWO 2", loop_prep="int unused = 0", after_loop="(void)unused")
    for v in ((False, False), (True, False), (False, True), (True, True)):
        src = k.source(*v)
        code = [ln for ln in src.splitlines() if not ln.lstrip().startswith("//")]
        assert not any("$" in ln for ln in code)
        assert 'extern "C" __global__ void axpy(' in src
        assert "z[i] = a * x[i] + y[i]" in src
        assert "#define TWO 2" in src
    assert "long long n" in k.source(True) and "int n" in k.source(False)
    assert "bc_start" in k.source(False, True)
    r = ReductionKernel(np.float32, "0", "a+b", "x[i]*y[i]", "float *x, float *y", name="dotk")
    src = r.source()
    assert "dotk_stage1" in src and "dotk_stage2" in src and "REDUCE(a, b) (a+b)" in src
    assert "(bc_start + (bc_j) * bc_step)" in r.source(False, True)
    s = InclusiveScanKernel(np.int32, "a+b").source()
    assert "scan_tiles" in s and "scan_carry" in s
    assert "xorwow_fill" in curandom.source()


def test_headers_for():
    assert "cuda_fp16.h" not in ew.headers_for([np.float32])
    assert "cuda_fp16.h" in ew.headers_for([np.float32, np.float16])
    assert "barecuda_complex.cuh" in ew.headers_for([])


def test_scalar_transport():
    k = ElementwiseKernel("pycuda::complex<double> c, __half h, bool b, long long q, float *x",
                          "x[i] = 0", "t")
    sig = k._sig
    assert sig.fmt == "ddfiqP"
    flat, first = sig.convert([1 + 2j, 0.5, True, 7, 12345], "t")
    assert flat == [1.0, 2.0, 0.5, 1, 7, 12345] and first is None
    with pytest.raises(OverflowError, match="argument 'q'"):
        sig.convert([1, 1, 1, 2**70, 0], "t")
    with pytest.raises(TypeError, match="argument 'x' .* must be a GPUArray of float32, not str"):
        sig.convert([1, 1, 1, 1, "no"], "t")


def test_elementwise_kernel_errors():
    with pytest.raises(ValueError, match="reserved"):
        ElementwiseKernel("float *n", "n[i] = 0")
    with pytest.raises(ValueError, match="at least one array"):
        ElementwiseKernel("float a", "a = 0")
    with pytest.raises(ValueError, match="non-empty"):
        ElementwiseKernel("float *x", "   ")
    with pytest.raises(ValueError, match="C identifier"):
        ElementwiseKernel("float *x", "x[i] = 0", name="bad name")
    with pytest.raises(TypeError, match="unexpected keyword"):
        ElementwiseKernel("float *x", "x[i] = 0", bogus=1)
    k = ElementwiseKernel("float *x, float a", "x[i] = a", "k")
    with pytest.raises(TypeError, match="takes 2 arguments"):
        k(1)
    with pytest.raises(TypeError, match="unexpected keyword"):
        k(1, 2, strem=None)


def test_reduction_and_scan_errors():
    with pytest.raises(ValueError, match="needs arguments"):
        ReductionKernel(np.float32, "0", "a+b")
    with pytest.raises(ValueError, match="single array"):
        ReductionKernel(np.float32, "0", "a+b", arguments="float *x, float *y")
    with pytest.raises(TypeError, match="has no C type"):
        ReductionKernel(np.dtype("U2"), "0", "a+b", arguments="float *x")
    with pytest.raises(ValueError, match="neutral"):
        ExclusiveScanKernel(np.int32, "a+b", None)
    with pytest.raises(ValueError, match="scan_expr"):
        InclusiveScanKernel(np.int32, "")


def test_gpuarray_cpu_validation():
    with pytest.raises(ValueError, match="negative dimensions"):
        ga.GPUArray((2, -1), np.float32)
    with pytest.raises(TypeError, match="shape must be"):
        ga.GPUArray("abc", np.float32)
    with pytest.raises(TypeError, match="does not support dtype object"):
        ga.GPUArray((2,), np.dtype(object))
    with pytest.raises(TypeError, match="not supported for bool"):
        ga._result_dtype("subtract", np.dtype(np.bool_), np.dtype(np.bool_))
    assert ga._result_dtype("add", np.dtype(np.int8), 3) == np.int8
    assert ga._result_dtype("add", np.dtype(np.float32), 2.5) == np.float32
    assert ga._result_dtype("add", np.dtype(np.int32), 2.5) == np.float64
    assert ga._result_dtype("true_divide", np.dtype(np.int16), np.dtype(np.int16)) == np.float64
    # a 0-size array needs no memory (and so no GPU)
    z = ga.GPUArray((0, 3), np.float32)
    assert z.size == 0 and z.ptr == 0 and z.shape == (0, 3) and z.flags.c_contiguous
    assert z.strides == (12, 4) and z.nbytes == 0 and len(z) == 0
    v = z.T
    assert v.shape == (3, 0) and v.strides == (4, 12)


# ------------------------------------------------------------------ compilation

def _binop_kernels(pairs, scalars):
    ks = []
    for x, y in pairs:
        for op in BINOPS:
            try:
                res = ga._result_dtype(op, x, y)
            except (TypeError, OverflowError):
                continue
            ks.append(ga._binary_kernel(op, x, y, False, False, res,
                                        ga._compute_dtype(op, x, y, res)))
    for x in COMPILED:
        for op in BINOPS:
            for sc in scalars:
                try:
                    res = ga._result_dtype(op, x, sc)
                except (TypeError, OverflowError):
                    continue
                cd = ga._compute_dtype(op, x, sc, res)
                for rev in (False, True):
                    ks.append(ga._binary_kernel(op, x, None, True, rev, res, cd))
    return ks


def test_compile_binary_ops():
    pairs = [(x, y) for x in DTYPES for y in DTYPES] if FULL_TEMPLATES else \
        [(x, x) for x in COMPILED] + [(x, y) for x, y in zip(COMPILED, COMPILED[1:] + COMPILED[:1])]
    scalars = [True, 3, 2.5, 1j, np.float32(1)] if FULL_TEMPLATES else [3, 2.5]
    _compile_in_batches(_binop_kernels(pairs, scalars))


def test_compile_unary_casts_and_helpers():
    ks = []
    for x in COMPILED:
        for op in ("negative", "absolute", "conjugate"):
            try:
                ga._result_dtype(op, x)
            except TypeError:
                continue
            ks.append(ga._unary_kernel(op, x))
        for y in COMPILED:
            ks.append(ga._cast_kernel(x, y))
        for nd in (1, 2, 3, 4):
            ks.append(ga._strided_copy_kernel(x, nd))
        ks.append(ga._fill_kernel(x))
        ks.append(ga._arange_kernel(x, np.dtype(np.float64)))
        ks.append(ga._arange_kernel(x, np.dtype(np.int64)))
        ks.append(_gather._take_kernel(x, np.dtype(np.int32)))
        ks.append(_gather._take_kernel(x, np.dtype(np.uint64)))
        ks.append(ga._if_positive_kernel(x, x))
    _compile_in_batches(ks)


def test_compile_user_elementwise_variants():
    ks = [ElementwiseKernel(f"{tools.dtype_to_ctype(dt)} a, {tools.dtype_to_ctype(dt)} *x, "
                            f"{tools.dtype_to_ctype(dt)} *z", "z[i] = x[i]; (void)a", f"user_{n}")
          for n, dt in enumerate(DTYPES)]
    ks.append(ElementwiseKernel("float *x, double s", "x[i] = s * SCALE(i)", "pre",
                                preamble="#define SCALE(k) ((k) + 1)", loop_prep="double t = 0",
                                after_loop="(void)t"))
    _compile_in_batches(ks, ((False, False), (True, False), (False, True), (True, True)))


@pytest.mark.parametrize("dt", COMPILED, ids=str)
def test_compile_reductions(dt):
    ks = []
    res = np.add.reduce(np.zeros(1, dt)).dtype
    acc = np.dtype(np.float32) if res == np.float16 else res
    ks.append(ga._sum_kernel(dt, acc))
    ks.append(ga._minmax_kernel("max", dt))
    ks.append(ga._minmax_kernel("min", dt))
    for conj in (False, True):
        r = np.result_type(dt, dt)
        ks.append(ga._dot_kernel(dt, dt, np.dtype(np.float32) if r == np.float16 else r, conj))
    ks.append(ReductionKernel(dt, "0", "a+b", arguments=f"{tools.dtype_to_ctype(dt)} *in"))
    for k in ks:
        for v in ((False, False), (True, True)):
            nvrtc_check(k.source(*v))


@pytest.mark.parametrize("dt", COMPILED, ids=str)
def test_compile_scans(dt):
    expr = "a || b" if dt == np.bool_ else "a + b"
    nvrtc_check(InclusiveScanKernel(dt, expr).source())
    nvrtc_check(ExclusiveScanKernel(dt, expr, "0").source())


def test_compile_scan_noncommutative():
    # a non-commutative operator: keep the first non-zero
    nvrtc_check(InclusiveScanKernel(np.int32, "(a != 0 ? a : b)", name_prefix="firstnz").source())


def test_compile_cumath():
    ks = []
    for dt in COMPILED:
        for name in cumath._UNARY:
            try:
                ks.append(cumath._func_kernel(name, dt))
            except TypeError:
                continue
    _compile_in_batches(ks)


def test_cumath_types():
    with pytest.raises(TypeError, match="complex"):
        cumath._func_kernel("floor", np.dtype(np.complex64))
    assert cumath._out_dtype("sin", np.dtype(np.int16)) == np.float32
    assert cumath._out_dtype("sin", np.dtype(np.float16)) == np.float16


def test_compile_curandom():
    nvrtc_check(curandom.source())


def test_complex_header_alone():
    nvrtc_check('#include <barecuda_complex.cuh>\n'
                   'extern "C" __global__ void k(pycuda::complex<float> *z, barecuda::complex<double> *w)'
                   '{ z[0] = barecuda::exp(z[1]) * z[2] / z[3] + barecuda::sqrt(z[4]);'
                   '  w[0] = barecuda::pow(w[1], w[2]) - barecuda::tanh(w[3]) + barecuda::log10(w[4]); }')


def test_grid_cap_follows_bytes_per_element():
    """Kernels that move WIDE_BYTES or more per element run a block per BLOCK elements;
    narrower ones, and any with per-thread loop_prep/after_loop code, a grid-stride
    loop over BLOCKS_PER_SM blocks per SM (no GPU needed: the choice is made here)."""
    wide = ElementwiseKernel("double *z, float *x, double *y", "z[i] = x[i] + y[i]")
    narrow = ElementwiseKernel("double *z, int *x, float *y", "z[i] = x[i] * y[i]")
    plain = ElementwiseKernel("float a, float *x, float *y, float *z", "z[i] = a * x[i] + y[i]")
    prep = ElementwiseKernel("double *z, double *x", "z[i] = x[i] + s", loop_prep="double s = 1")
    assert wide._per_sm * ew.BLOCK >= ew._SMALL_N
    assert narrow._per_sm == plain._per_sm == prep._per_sm == ew.BLOCKS_PER_SM

