# SPDX-License-Identifier: MIT
"""No index given to barecuda's gather and scatter kernels can fault the context.

take, multi_take, multi_put, multi_take_put, subset_sum/dot/max/min take NumPy's
``mode=`` ("raise", "wrap", "clip"), compared here with ``numpy.take`` on random
data.  The hostile cases (out of range, negative, 2^40, the extremes of int64 and
uint64, float and bool indices, empty arrays) each end in a clear exception or
NumPy's answer; after every one, a reference array still holds its data and a
kernel still runs in the same context.  CPU part: every kernel variant compiles
and the sparse matrices' index arrays are checked on the host.
"""

import numpy as np
import pytest
from conftest import nvrtc_check_many

from barecuda import driver as drv
from barecuda import gpuarray as ga
from barecuda._array import gather as _gather
from barecuda.sparse import _matrix

gpu = pytest.mark.gpu

HUGE = [2 ** 40, -(2 ** 40), np.iinfo(np.int64).max, np.iinfo(np.int64).min]


# ------------------------------------------------------------------ CPU

@pytest.mark.parametrize("idt", [np.int8, np.int64, np.uint16, np.uint64], ids=str)
def test_every_mode_compiles(idt):
    idt = np.dtype(idt)
    ks = []
    for mode in (0, 1, 2):
        for dt in (np.dtype(np.float32), np.dtype(np.complex128), np.dtype(np.float16)):
            ks.append(_gather._take_kernel(dt, idt, mode))
            ks.append(_gather._multi_kernel("take", dt, idt, 2, mode=mode))
            ks.append(_gather._multi_kernel("put", dt, idt, 3, mode=mode))
            ks.append(_gather._multi_kernel("take_put", dt, idt, 2, True, mode=mode))
    nvrtc_check_many(k.source() for k in ks)


def test_the_collect_kernel_compiles():
    from conftest import nvrtc_check
    nvrtc_check(_gather._collect_kernel().source())


def test_subset_sum_kernel_compiles_in_every_mode():
    from conftest import nvrtc_check
    for mode in (0, 1, 2):
        for idt, dt, acc in ((np.int32, np.float16, np.float32), (np.uint64, np.bool_, np.bool_),
                             (np.int64, np.complex64, np.complex64)):
            k = _gather._subset_sum_kernel(np.dtype(idt), np.dtype(dt), np.dtype(acc), mode)
            nvrtc_check(k.source())


def test_index_helpers_are_in_the_public_header():
    from barecuda import compiler
    src = ("#include <barecuda_helpers.cuh>\n"
           "__global__ void k(float *z, const float *a, const long long *idx, long long n,"
           " unsigned long long *bad) {\n"
           "    long long i = bc_global_thread_id();\n"
           "    long long j = bc_index_signed(idx[i], n, BC_INDEX_RAISE);\n"
           "    if (j < 0) bc_index_report(bad, i); else z[i] = a[j];\n"
           "    z[0] += bc_index_unsigned(3ull, n, BC_INDEX_WRAP) + BC_INDEX_CLIP; }\n")
    compiler.compile(src, target="ptx", arch="compute_90", cache_dir=False,
                     options=["-fdevice-syntax-only"])


class _FakeCSR:
    """Stands for a SciPy matrix built from arrays SciPy did not check."""

    def __init__(self, indptr, indices, shape):
        self.indptr, self.indices, self.shape = np.asarray(indptr), np.asarray(indices), shape
        self.data = np.ones(len(self.indices), np.float32)
        self.nnz = len(self.indices)

    def tocsr(self):
        return self


def test_csr_index_arrays_are_checked_on_the_host():
    good = _FakeCSR([0, 2, 3], [0, 2, 1], (2, 3))
    shape, indptr, indices, data = _matrix.as_csr(good, np.float32, "CSR")
    assert shape == (2, 3) and indptr.dtype == np.int64 and indices.dtype == np.int32
    np.testing.assert_array_equal(indices, [0, 2, 1])
    with pytest.raises(ValueError, match=r"column index 3 \(entry 1\) lies outside the shape"):
        _matrix.as_csr(_FakeCSR([0, 2, 3], [0, 3, 1], (2, 3)), np.float32, "CSR")
    with pytest.raises(ValueError, match="column index -1"):
        _matrix.as_csr(_FakeCSR([0, 2, 3], [0, -1, 1], (2, 3)), np.float32, "CSR")
    with pytest.raises(ValueError, match="indptr decreases at row 1"):
        _matrix.as_csr(_FakeCSR([0, 2, 1, 3], [0, 1, 1], (3, 3)), np.float32, "CSR")
    with pytest.raises(ValueError, match="indptr has 2 entries, a matrix of 2 rows needs 3"):
        _matrix.as_csr(_FakeCSR([0, 3], [0, 1, 2], (2, 3)), np.float32, "CSR")
    with pytest.raises(ValueError, match="must run from 0 to the 3 stored entries"):
        _matrix.as_csr(_FakeCSR([0, 2, 5], [0, 1, 2], (2, 3)), np.float32, "CSR")
    with pytest.raises(TypeError, match="indices must be integers, not float64"):
        _matrix.as_csr(_FakeCSR([0, 2, 3], [0.0, 1.0, 2.0], (2, 3)), np.float32, "CSR")


def test_coo_from_scipy_like_objects_is_checked():
    class FakeCOO:
        shape, nnz = (2, 2), 2
        row, col, data = np.array([0, 1]), np.array([1, 2]), np.ones(2)

        def tocoo(self):
            return self
    with pytest.raises(ValueError, match="a col index lies outside the shape"):
        _matrix.as_coo(FakeCOO(), np.float32, "COO")


# ------------------------------------------------------------------ GPU helpers

def _indices(rng, n, m, idt):
    idt = np.dtype(idt)
    lo = 0 if idt.kind == "u" else max(-2 * n, np.iinfo(idt).min)
    hi = min(2 * n, np.iinfo(idt).max)
    return rng.integers(lo, hi, m, endpoint=True).astype(idt)


def _expect(a, idx, mode):
    """numpy.take(a, idx, mode=...), also for uint64 indices (which NumPy will not
    cast to intp)."""
    n = a.size
    if idx.dtype == np.uint64:
        v = idx.astype(object)
        if mode == "wrap":
            pos = np.array([x % n for x in v], np.int64)
        else:
            pos = np.array([min(x, n - 1) for x in v], np.int64)
        return a[pos]
    return np.take(a, idx.astype(np.int64), mode=mode)


@pytest.fixture
def sentinel(ctx):
    """A reference array and a check that the context still works: its data intact,
    a kernel and a copy still run."""
    host = np.arange(4096, dtype=np.float64)
    ref = ga.to_gpu(host)

    def check():
        drv.Context.synchronize()
        np.testing.assert_array_equal(ref.get(), host)
        np.testing.assert_array_equal((ref * 2 + 1).get(), host * 2 + 1)
    return check


def _raises_index(fn, match):
    with pytest.raises(IndexError, match=match):
        fn()


# ------------------------------------------------------------------ take

@gpu
@pytest.mark.parametrize("dt", [np.float32, np.int16, np.complex128, np.float16], ids=str)
@pytest.mark.parametrize("idt", [np.int8, np.int32, np.int64, np.uint16, np.uint64], ids=str)
def test_take_modes_match_numpy(ctx, rng, sentinel, dt, idt):
    n = 100
    a = (rng.standard_normal(n) * 50).astype(dt)
    ga_a = ga.to_gpu(a)
    idx = _indices(rng, n, 3000, idt)
    for mode in ("wrap", "clip"):
        got = ga.take(ga_a, ga.to_gpu(idx), mode=mode).get()
        np.testing.assert_array_equal(got, _expect(a, idx, mode))
    good = idx[(idx.astype(np.float64) >= -n) & (idx.astype(np.float64) < n)]
    np.testing.assert_array_equal(ga.take(ga_a, ga.to_gpu(good)).get(), np.take(a, good))
    if good.size < idx.size:
        bad_at = int(np.argmax((idx.astype(np.float64) < -n) | (idx.astype(np.float64) >= n)))
        _raises_index(lambda: ga.take(ga_a, ga.to_gpu(idx)),
                      rf"take\(\): indices\[{bad_at}\] = {idx[bad_at]} is out of bounds for an "
                      rf"array of size {n}")
    sentinel()


@gpu
def test_take_hostile_indices(ctx, rng, sentinel):
    a = rng.standard_normal(1000).astype(np.float32)
    ga_a = ga.to_gpu(a)
    for v in HUGE + [1000, -1001]:
        idx = np.array([0, 5, v, 7], np.int64)
        _raises_index(lambda: ga.take(ga_a, ga.to_gpu(idx)), rf"indices\[2\] = {v} is out of")
        # np.mod, not np.take(mode="wrap"): NumPy wraps a negative index by adding
        # the size in a loop, which for -2**63 would not end in our lifetime
        np.testing.assert_array_equal(ga.take(ga_a, ga.to_gpu(idx), mode="wrap").get(),
                                      a[np.mod(idx, a.size)])
        np.testing.assert_array_equal(ga.take(ga_a, ga.to_gpu(idx), mode="clip").get(),
                                      np.take(a, idx, mode="clip"))
        sentinel()
    for v in (2 ** 63, 2 ** 64 - 1, 2 ** 40):
        idx = np.array([v, 1], np.uint64)
        _raises_index(lambda: ga.take(ga_a, ga.to_gpu(idx)), rf"indices\[0\] = {v} is out")
        np.testing.assert_array_equal(ga.take(ga_a, ga.to_gpu(idx), mode="wrap").get(),
                                      a[[v % 1000, 1]])
        np.testing.assert_array_equal(ga.take(ga_a, ga.to_gpu(idx), mode="clip").get(),
                                      a[[999, 1]])
    # negative indices count from the end, as in NumPy
    idx = np.array([-1, -1000, 3], np.int32)
    np.testing.assert_array_equal(ga.take(ga_a, ga.to_gpu(idx)).get(), np.take(a, idx))
    # a 2-d index array: the position is named in its shape, the result has its shape
    idx2 = np.array([[1, 2], [3, 4000]], np.int32)
    _raises_index(lambda: ga.take(ga_a, ga.to_gpu(idx2)), r"indices\[1,1\] = 4000")
    assert ga.take(ga_a, ga.to_gpu(idx2), mode="clip").shape == (2, 2)
    # the first bad position is the one named, whatever the order threads ran in
    many = rng.integers(0, 1000, 1 << 20).astype(np.int64)
    many[[77777, 5000, 900000]] = [5000, -99999, 2 ** 40]
    _raises_index(lambda: ga.take(ga_a, ga.to_gpu(many)), r"indices\[5000\] = -99999")
    sentinel()


@gpu
def test_take_bad_arguments(ctx, sentinel):
    a = ga.to_gpu(np.arange(10, dtype=np.float32))
    i = ga.to_gpu(np.array([1, 2], np.int32))
    with pytest.raises(ValueError, match="mode must be 'raise', 'wrap' or 'clip', not 'nope'"):
        ga.take(a, i, mode="nope")
    with pytest.raises(TypeError, match="mode must be 'raise', 'wrap' or 'clip', not int"):
        ga.take(a, i, mode=1)
    with pytest.raises(TypeError, match="indices must have an integer dtype, not float32"):
        ga.take(a, ga.to_gpu(np.array([1.0], np.float32)))
    with pytest.raises(TypeError, match="integer dtype, not bool"):
        ga.take(a, ga.to_gpu(np.array([True])))
    with pytest.raises(TypeError, match="must be GPUArrays"):
        ga.take(a, np.array([1, 2]))
    empty = ga.empty(0, np.float32)
    for mode in ("raise", "wrap", "clip"):
        with pytest.raises(IndexError, match="through 2 indices into an empty array"):
            ga.take(empty, i, mode=mode)
    assert ga.take(a, ga.empty(0, np.int32)).shape == (0,)
    assert ga.take(empty, ga.empty(0, np.int32)).shape == (0,)
    sentinel()


@gpu
def test_take_on_a_stream(ctx, rng, sentinel):
    s = drv.Stream()
    a = rng.standard_normal(5000).astype(np.float64)
    ga_a = ga.to_gpu(a)
    idx = rng.integers(-5000, 5000, 20000).astype(np.int64)
    r = ga.take(ga_a, ga.to_gpu(idx), stream=s)            # raise: waits for the kernel
    np.testing.assert_array_equal(r.get(), np.take(a, idx))
    idx[-1] = 5000
    _raises_index(lambda: ga.take(ga_a, ga.to_gpu(idx), stream=s), r"indices\[19999\] = 5000")
    r = ga.take(ga_a, ga.to_gpu(idx), stream=s, mode="wrap")     # asynchronous
    s.synchronize()
    np.testing.assert_array_equal(r.get(), np.take(a, idx, mode="wrap"))
    sentinel()


@gpu
def test_the_kept_word_is_reset_after_a_bad_call(ctx, rng, sentinel):
    """Each thread keeps its bad-index word between calls: a bad call must leave it
    clean for the next one, on the default stream and on a stream alike."""
    a = rng.standard_normal(300).astype(np.float32)
    ga_a = ga.to_gpu(a)
    good = ga.to_gpu(rng.integers(-300, 300, 1000).astype(np.int32))
    bad = ga.to_gpu(np.array([3, 4, 300], np.int32))
    for s in (None, drv.Stream(), None):
        for _ in range(3):
            _raises_index(lambda: ga.take(ga_a, bad, stream=s), r"indices\[2\] = 300")
            np.testing.assert_array_equal(ga.take(ga_a, good, stream=s).get(),
                                          np.take(a, good.get()))
            assert float(ga.subset_sum(good, ga_a, stream=s).get()) == pytest.approx(
                float(np.take(a, good.get()).sum(dtype=np.float32)), rel=1e-4)
    # a call interrupted between its launch and its read leaves its slot busy: the
    # next call takes a fresh word rather than trusting that one
    slot = _gather._slot()
    drv.memset_d32(int(slot.word), 7, 2)        # as if a kernel had noted position 7
    np.testing.assert_array_equal(ga.take(ga_a, good).get(), np.take(a, good.get()))
    sentinel()


@gpu
def test_threads_do_not_see_each_others_bad_indices(ctx, rng, sentinel):
    import threading
    a = rng.standard_normal(500).astype(np.float32)
    ga_a = ga.to_gpu(a)
    good = ga.to_gpu(rng.integers(0, 500, 1 << 16).astype(np.int64))
    bad_h = rng.integers(0, 500, 1 << 16).astype(np.int64)
    bad_h[4321] = 500
    bad = ga.to_gpu(bad_h)
    errors, wrong = [], []

    def worker(idx, expect_bad):
        ctx.push()
        try:
            s = drv.Stream()
            for _ in range(40):
                try:
                    r = ga.take(ga_a, idx, stream=s)
                    if expect_bad:
                        wrong.append("no error for a bad index")
                    elif not np.array_equal(r.get(stream=s), a[good.get()]):
                        wrong.append("wrong values")
                except IndexError as e:
                    (errors if expect_bad else wrong).append(str(e))
        except BaseException as e:      # a thread's own failure would otherwise pass unseen
            wrong.append(repr(e))
        finally:
            drv.Context.pop()

    ts = [threading.Thread(target=worker, args=(good, False)),
          threading.Thread(target=worker, args=(bad, True))]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert wrong == []
    assert len(errors) == 40 and all("indices[4321] = 500" in e for e in errors)
    sentinel()


@gpu
def test_the_kept_word_does_not_keep_a_context_alive(rng):
    import gc
    import weakref
    c = drv.Device(0).make_context()
    try:
        a = ga.to_gpu(rng.standard_normal(10).astype(np.float32))
        with pytest.raises(IndexError, match="= 10 is out"):
            ga.take(a, ga.to_gpu(np.array([10], np.int32)))
        assert ga.take(a, ga.to_gpu(np.array([1], np.int32))).get()[0] == a.get()[1]
        del a
    finally:
        drv.Context.pop()
    ref = weakref.ref(c)
    c.detach()
    del c
    gc.collect()
    assert ref() is None


# ------------------------------------------------------------------ multi_*

@gpu
@pytest.mark.parametrize("count", [1, 3, 20])
@pytest.mark.parametrize("idt", [np.int32, np.uint64], ids=str)
def test_multi_take_and_put_modes(ctx, rng, sentinel, count, idt):
    sizes = [int(rng.integers(50, 120)) for _ in range(count)]
    hs = [rng.standard_normal(n).astype(np.float32) for n in sizes]
    gs = [ga.to_gpu(h) for h in hs]
    n_min = min(sizes)
    idx = _indices(rng, n_min, 400, idt)
    gi = ga.to_gpu(idx)
    for mode in ("wrap", "clip"):
        for g, h in zip(ga.multi_take(gs, gi, mode=mode), hs):
            np.testing.assert_array_equal(g.get(), _expect(h, idx, mode))
    ok = np.arange(n_min).astype(idt)
    for g, h in zip(ga.multi_take(gs, ga.to_gpu(ok)), hs):
        np.testing.assert_array_equal(g.get(), h[:n_min])
    bad = ok.copy()
    bad[7] = max(sizes) + 3
    _raises_index(lambda: ga.multi_take(gs, ga.to_gpu(bad)),
                  rf"multi_take\(\): indices\[7\] = {max(sizes) + 3} is out of bounds for "
                  rf"arrays\[\d+\] of size \d+")
    # put: each index checked against each out array
    outs = [ga.zeros(n, np.float32) for n in sizes]
    m = n_min - 1        # the destinations leave out n_min - 1, where "clip" sends one below
    src = [ga.to_gpu(h[:m]) for h in hs]
    dest = rng.permutation(m).astype(idt)
    ga.multi_put(src, ga.to_gpu(dest), out=outs)
    for o, h, n in zip(outs, hs, sizes):
        want = np.zeros(n, np.float32)
        want[dest] = h[:m]
        np.testing.assert_array_equal(o.get(), want)
    dest_bad = dest.copy()
    dest_bad[3] = n_min + max(sizes)
    _raises_index(lambda: ga.multi_put(src, ga.to_gpu(dest_bad), out=outs),
                  rf"dest_indices\[3\] = {n_min + max(sizes)} is out of bounds for out\[0\]")
    outs2 = [ga.zeros(n, np.float32) for n in sizes]
    ga.multi_put(src, ga.to_gpu(dest_bad), out=outs2, mode="clip")
    for o, h, n in zip(outs2, hs, sizes):
        want = np.zeros(n, np.float32)
        np.put(want, dest_bad.astype(np.int64), h[:m], mode="clip")
        np.testing.assert_array_equal(o.get(), want)
    sentinel()


@gpu
def test_multi_take_put_checks_dest_and_source_with_offsets(ctx, rng, sentinel):
    hs = [rng.standard_normal(200).astype(np.float64) for _ in range(3)]
    gs = [ga.to_gpu(h) for h in hs]
    m = 50
    didx = rng.permutation(100)[:m].astype(np.int64)
    sidx = rng.integers(0, 100, m).astype(np.int64)
    offs = [0, 50, 100]
    res = ga.multi_take_put(gs, ga.to_gpu(didx), ga.to_gpu(sidx), dest_shape=(100,),
                            src_offsets=offs)
    for r, h, o in zip(res, hs, offs):
        np.testing.assert_array_equal(r.get()[didx], h[sidx + o])
    s_bad = sidx.copy()
    s_bad[4] = 120               # in arrays[0] (120) and arrays[1] (170), past arrays[2] (220)
    _raises_index(lambda: ga.multi_take_put(gs, ga.to_gpu(didx), ga.to_gpu(s_bad),
                                            dest_shape=(100,), src_offsets=offs),
                  r"src_indices\[4\] = 120 \+ 100 is out of bounds for arrays\[2\] of size 200")
    d_bad = didx.copy()
    # out of range, and "wrap" takes it to a destination no other index names
    free = sorted(set(range(100)) - set(didx.tolist()))[0]
    d_bad[9] = free - 200
    _raises_index(lambda: ga.multi_take_put(gs, ga.to_gpu(d_bad), ga.to_gpu(sidx),
                                            dest_shape=(100,)),
                  rf"dest_indices\[9\] = {free - 200} is out of bounds for out\[0\] of size 100")
    with pytest.raises(OverflowError, match="src_offsets value"):
        ga.multi_take_put(gs, ga.to_gpu(didx), ga.to_gpu(sidx), dest_shape=(100,),
                          src_offsets=[2 ** 63, 0, 0])
    with pytest.raises(ValueError, match="mode must be"):
        ga.multi_take_put(gs, ga.to_gpu(didx), ga.to_gpu(sidx), dest_shape=(100,), mode="")
    wrapped = ga.multi_take_put(gs, ga.to_gpu(d_bad), ga.to_gpu(s_bad), dest_shape=(100,),
                                src_offsets=offs, mode="wrap")
    for r, h, o in zip(wrapped, hs, offs):
        np.testing.assert_array_equal(r.get()[d_bad % 100], h[(s_bad + o) % 200])
    sentinel()


# ------------------------------------------------------------------ subsets

@gpu
@pytest.mark.parametrize("idt", [np.int16, np.int64, np.uint32], ids=str)
def test_subset_reductions_modes(ctx, rng, sentinel, idt):
    n = 300
    a = rng.standard_normal(n)
    b = rng.standard_normal(n)
    ga_a, ga_b = ga.to_gpu(a), ga.to_gpu(b)
    idx = _indices(rng, n, 2000, idt)
    for mode in ("wrap", "clip"):
        sel = _expect(np.arange(n), idx, mode)
        np.testing.assert_allclose(ga.subset_sum(ga.to_gpu(idx), ga_a, mode=mode).get(),
                                   a[sel].sum())
        np.testing.assert_allclose(ga.subset_dot(ga.to_gpu(idx), ga_a, ga_b, mode=mode).get(),
                                   np.dot(a[sel], b[sel]))
        assert ga.subset_max(ga.to_gpu(idx), ga_a, mode=mode).get() == a[sel].max()
        assert ga.subset_min(ga.to_gpu(idx), ga_a, mode=mode).get() == a[sel].min()
    wide = idx.astype(np.float64)
    bad_at = int(np.argmax((wide < -n) | (wide >= n)))
    assert not -n <= wide[bad_at] < n
    for fn, args in ((ga.subset_sum, (ga_a,)), (ga.subset_dot, (ga_a, ga_b)),
                     (ga.subset_max, (ga_a,)), (ga.subset_min, (ga_a,))):
        with pytest.raises(IndexError, match=rf"\[{bad_at}\] = {idx[bad_at]} is out of bounds"):
            fn(ga.to_gpu(idx), *args)
    with pytest.raises(TypeError, match="integer dtype"):
        ga.subset_sum(ga.to_gpu(np.zeros(3, np.float64)), ga_a)
    with pytest.raises(IndexError, match="empty array"):
        ga.subset_sum(ga.to_gpu(np.zeros(3, np.int32)), ga.empty(0, np.float64))
    sentinel()
