# SPDX-License-Identifier: MIT
"""One-launch reductions (last-block finish with a ticket counter) and their vector
loads: the plan and grid arithmetic and NVRTC compilation of every variant on the
CPU; results, determinism and concurrent streams on a GPU."""

import numpy as np
import pytest
from conftest import DTYPE_COVER, full_or, nvrtc_check

from barecuda import reduction as red
from barecuda import tools
from barecuda.reduction import ReductionKernel, _grid, _vector_plan

DTYPES = [np.dtype(t) for t in (np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8,
                                np.uint16, np.uint32, np.uint64, np.float16, np.float32,
                                np.float64, np.complex64, np.complex128)]


# ------------------------------------------------------------------ CPU: the plan

def _plan(args, map_expr):
    return _vector_plan(tools.parse_c_args(args), map_expr)


def test_vector_plan_reads_by_index_only():
    assert _plan("float *x", "x[i]")[:2] == (4, [("x", "float")])
    w, arrays, vmap = _plan("float *x, float *y", "x[i] * y [ i ]")
    assert w == 4 and [n for n, _ in arrays] == ["x", "y"]
    assert vmap == "bc_v_x[bc_u].v[bc_k] * bc_v_y[bc_u].v[bc_k]"
    assert _plan("double *x, float *y", "x[i]*y[i]")[0] == 2   # the widest element decides
    assert _plan("short *x", "x[i]")[0] == 8
    assert _plan("unsigned char *x", "x[i]")[0] == 16
    # a gather: the index array is packed, the gathered one read as written
    w, arrays, vmap = _plan("int *lookup, float *in", "in[lookup[i]]")
    assert w == 4 and arrays == [("lookup", "int")] and vmap == "in[bc_v_lookup[bc_u].v[bc_k]]"


@pytest.mark.parametrize("args,expr", [
    ("float *x", "x[i+1]"),            # another index
    ("float *x", "x[i] * i"),          # the index itself
    ("float *x", "x[i] + x[0]"),       # the array another way
    ("float *x", "*(x + i)"),
    ("double2 *x", "x[i].x"),          # a struct element: not packed
    ("pycuda::complex<double> *x", "x[i]"),  # 16 bytes: nothing to gain
    ("float *x, float s", "s"),        # no array read at all
])
def test_vector_plan_declines(args, expr):
    assert _plan(args, expr) == (1, [], "")


def test_grid_spreads_steps_evenly():
    assert _grid(0, 4096, 1056) == 1
    assert _grid(1, 4096, 1056) == 1
    assert _grid(4096 * 10, 4096, 1056) == 10
    assert _grid(4096 * 1056, 4096, 1056) == 1056
    g = _grid(2**28, 4096, 1056)   # 65536 steps: 63 rounds
    assert g == 1041 and -(-65536 // g) == 63
    for n in (2**20 + 3, 10**7, 2**28, 2**30):
        for cap in (132, 1056, 1320):
            g = _grid(n, 2048, cap)
            steps = -(-n // 2048)
            assert 1 <= g <= cap and -(-steps // g) == -(-steps // cap)


def test_tuning_round_trip():
    old = red._tuning()
    try:
        with pytest.raises(ValueError, match="passes"):
            red._tuning(passes=3)
        with pytest.raises(ValueError, match="blocks_per_sm"):
            red._tuning(blocks_per_sm=99)
        red._tuning(passes=2, vec=False, blocks_per_sm=4)
        k = ReductionKernel(np.float32, "0", "a+b", "x[i]", "float *x")
        assert k._passes == 2 and k._plan[0] == 1
        assert "#define BC_VEC 1" in k.source()
    finally:
        red._tuning(**old)
    k = ReductionKernel(np.float32, "0", "a+b", "x[i]", "float *x")
    assert k._passes == old["passes"]


# ------------------------------------------------------------------ CPU: NVRTC

def test_source_shape():
    k = ReductionKernel(np.float32, "0", "a+b", "x[i]*y[i]", "float *x, float *y", name="dotk")
    src = k.source()
    assert "#define BC_ONEPASS 1" in src and "#define BC_VEC 4" in src
    assert "atomicAdd(bc_ticket, 1u)" in src and "*bc_ticket = 0u" in src
    assert "bc_pack<float > bc_v_x[BC_U]" in src
    assert "#define BC_VEC 1" in k.source(False, True)   # range= reads through start/step
    code = [ln for ln in src.splitlines() if not ln.lstrip().startswith("//")]
    assert not any("$" in ln for ln in code)


@pytest.mark.parametrize("dt", full_or(DTYPES, DTYPE_COVER), ids=str)
def test_compile_every_variant(dt):
    """Vector and scalar paths, 32/64-bit indices, range variants, one and two
    inputs of mixed widths, for every dtype (of the cover, unless
    BARECUDA_FULL_TEMPLATES=1)."""
    ct = tools.dtype_to_ctype(dt)
    ks = [ReductionKernel(dt, "0", "a+b", arguments=f"{ct} *in"),
          ReductionKernel(dt, "0", "a+b", f"bc_cast<{ct}>(x[i]) * bc_cast<{ct}>(y[i])",
                          f"{ct} *x, float *y"),
          ReductionKernel(dt, "0", "a+b", "in[lookup[i]]",
                          f"unsigned short *lookup, {ct} *in")]
    old = red._tuning(vec=False)
    try:
        ks.append(ReductionKernel(dt, "0", "a+b", arguments=f"{ct} *in"))
    finally:
        red._tuning(**old)
    for k in ks:
        for v in ((False, False), (True, False), (True, True)):
            nvrtc_check(k.source(*v))


def test_gpuarray_reductions_use_vector_loads():
    from barecuda import gpuarray as ga
    ks = []
    for dt in DTYPES:
        res = np.add.reduce(np.zeros(1, dt)).dtype
        acc = np.dtype(np.float32) if res == np.float16 else res
        ks += [ga._sum_kernel(dt, acc), ga._minmax_kernel("max", dt),
               ga._minmax_kernel("min", dt)]
    assert all(k._plan[0] > 1 for k in ks if k.dtype_out.itemsize <= 8)


def test_pycuda_getter_layout_unchanged():
    """get_reduction_module keeps PyCUDA's per-block partials in out[blockIdx.x]."""
    seen = {}

    def fake(src, options=None, keep=False):
        seen["src"] = src
        return src
    from barecuda._kernels import reduction_getters as getters    # where the getter looks
    orig = getters._getter_module
    getters._getter_module = fake
    try:
        red.get_reduction_module("float", 128, "0", "a+b", "in[i]", "const float *in")
    finally:
        getters._getter_module = orig
    src = seen["src"]
    assert "#define BC_ONEPASS 0" in src and "#define BC_VEC 1" in src
    nvrtc_check(src)


# ------------------------------------------------------------------ GPU

gpu = pytest.mark.gpu


@gpu
@pytest.mark.parametrize("n", [0, 1, 3, 1023, 1024 * 4 + 3, 2**20 + 5, 10_000_019])
@pytest.mark.parametrize("passes", [1, 2])
def test_sum_min_max_dot_against_numpy(ctx, rng, n, passes):
    from barecuda import gpuarray as ga
    old = red._tuning(passes=passes)
    try:
        x = rng.standard_normal(n + 1).astype(np.float32)
        y = rng.standard_normal(n + 1).astype(np.float32)
        xg, yg = ga.to_gpu(x), ga.to_gpu(y)
        for a, b, ag, bg in ((x[:n], y[:n], xg[:n], yg[:n]),          # aligned
                             (x[1:], y[1:], xg[1:], yg[1:])):         # unaligned views
            tol = 1e-5 * max(1, np.sqrt(a.size))
            np.testing.assert_allclose(ga.sum(ag).get(), a.astype(np.float64).sum(),
                                       rtol=1e-4, atol=tol)
            np.testing.assert_allclose(ga.dot(ag, bg).get(), np.dot(a.astype(np.float64), b),
                                       rtol=1e-4, atol=tol)
            if a.size:
                assert ga.max(ag).get() == a.max() and ga.min(ag).get() == a.min()
    finally:
        red._tuning(**old)


@gpu
def test_int_sums_exact_and_repeatable(ctx, rng):
    from barecuda import gpuarray as ga
    x = rng.integers(-2**40, 2**40, 3_000_001)
    xg = ga.to_gpu(x)
    want = int(x.sum())
    for _ in range(20):   # the ticket counter is reset by every launch's last block
        assert int(ga.sum(xg).get()) == want
    i8 = rng.integers(-100, 100, 1_000_003).astype(np.int8)
    assert int(ga.sum(ga.to_gpu(i8)).get()) == int(i8.sum())


@gpu
def test_float_sum_deterministic(ctx, rng):
    from barecuda import gpuarray as ga
    xg = ga.to_gpu(rng.standard_normal(2**24 + 7).astype(np.float32))
    first = ga.sum(xg).get().tobytes()
    assert all(ga.sum(xg).get().tobytes() == first for _ in range(10))


@gpu
def test_concurrent_streams_have_their_own_counters(ctx, rng):
    from barecuda import driver as drv
    from barecuda import gpuarray as ga
    k = ReductionKernel(np.float64, "0", "a+b", "x[i]", "double *x", name="ssum")
    streams = [drv.Stream() for _ in range(4)]
    data = [rng.standard_normal(2**21 + s) for s in range(4)]
    arrays = [ga.to_gpu(d) for d in data]
    for _ in range(5):
        outs = [k(a, stream=s) for a, s in zip(arrays, streams)]
        outs.append(k(arrays[0]))            # the default stream's shared workspace
        for s in streams:
            s.synchronize()
        ctx.synchronize()
        for o, d in zip(outs, data + [data[0]]):
            np.testing.assert_allclose(o.get(), d.sum(), rtol=1e-10)


@gpu
def test_out_range_and_custom_reduce_one_launch(ctx, rng):
    from barecuda import gpuarray as ga
    k = ReductionKernel(np.float32, "-1e30", "fmaxf(a, b)", "fabsf(x[i])", "float *x", name="amax")
    x = rng.standard_normal(5_000_003).astype(np.float32)
    xg = ga.to_gpu(x)
    out = ga.empty((), np.float32)
    assert k(xg, out=out) is out and out.get() == np.abs(x).max()
    r = k(xg, range=range(7, 4_000_000, 3))
    assert r.get() == np.abs(x[7:4_000_000:3]).max()
