# SPDX-License-Identifier: MIT
"""barecuda.sparse: partitioning and packet layout (CPU), input checks (CPU), kernel
compilation with NVRTC (CPU), and on the GPU the packeted and coordinate SpMV
against NumPy and conjugate gradients against NumPy's residual."""

import numpy as np
import pytest
from conftest import nvrtc_check

from barecuda.sparse import (COOMatrix, CoordinateSpMV, DiagonalPreconditioner,
                             IdentityOperator, IdentityPreconditioner, PacketedSpMV,
                             build_packets, partition)
from barecuda.sparse import _kernels, cg
from barecuda.sparse._matrix import as_coo, as_csr

DTYPES = [np.float32, np.float64]


def random_dense(rng, n, m, density, dtype=np.float64, empty_rows=()):
    a = rng.standard_normal((n, m)) * (rng.random((n, m)) < density)
    a[list(empty_rows), :] = 0
    return a.astype(dtype)


def random_spd(rng, n, density, dtype=np.float64):
    """Sparse symmetric, strictly diagonally dominant with positive diagonal: SPD."""
    b = random_dense(rng, n, n, density / 2)
    a = b + b.T
    np.fill_diagonal(a, np.abs(a).sum(axis=1) + 1 + rng.random(n))
    return a.astype(dtype)


def csr_of(a):
    _shape, indptr, indices, data = as_csr(a, a.dtype, "test")
    return indptr, indices, data


def permuted_laplacian_1d(rng, n):
    a = np.zeros((n, n))
    i = np.arange(n)
    a[i, i] = 2.0
    a[i[:-1], i[:-1] + 1] = a[i[:-1] + 1, i[:-1]] = -1.0
    p = rng.permutation(n)
    return a[np.ix_(p, p)]


# ------------------------------------------------------------------ partitioning (CPU)

def test_contiguous_partition():
    labels = partition.contiguous_partition(10, 4)
    assert labels.tolist() == [0, 0, 0, 0, 1, 1, 1, 1, 2, 2]


@pytest.mark.parametrize("labels,cap", [([5, 5, 5, 5, 5, 9, 9, 2], 2), ([0] * 7, 3),
                                        ([3, 1, 3, 1, 0], 10), ([7], 1)])
def test_split_oversized(labels, cap):
    out = partition.split_oversized(np.array(labels), cap)
    counts = np.bincount(out)
    assert counts.max() <= cap and counts.min() >= 1          # compact, none too big
    # rows that shared a packet came from one label
    for p in range(out.max() + 1):
        assert len({labels[i] for i in np.flatnonzero(out == p)}) == 1


def test_symmetric_graph_and_bfs(rng):
    a = random_dense(rng, 60, 60, 0.05)
    np.fill_diagonal(a, 1.0)
    indptr, indices, _ = csr_of(a)
    gptr, gidx = partition.symmetric_graph(indptr, indices, 60)
    dense = np.zeros((60, 60), bool)
    rows = np.repeat(np.arange(60), np.diff(gptr))
    dense[rows, gidx] = True
    assert (dense == dense.T).all() and not dense.diagonal().any()
    assert (dense == ((a != 0) | (a.T != 0)) & ~np.eye(60, dtype=bool)).all()
    order = partition.bfs_ordering(gptr, gidx, 60)
    assert sorted(order.tolist()) == list(range(60))


def test_bfs_recovers_locality_of_a_permuted_band(rng):
    n = 2000
    a = permuted_laplacian_1d(rng, n)
    indptr, indices, _ = csr_of(a)
    cont = partition.contiguous_partition(n, 100)
    bfs = partition.bfs_partition(indptr, indices, n, 100, is_symmetric=True)
    assert np.bincount(bfs).max() <= 100
    nnz = indices.size
    assert partition.local_entry_count(indptr, indices, bfs) > 0.97 * nnz
    assert partition.local_entry_count(indptr, indices, cont) < 0.5 * nnz   # the diagonal only
    auto = partition.partition_rows(indptr, indices, n, 100, True, "auto")
    if not partition.have_pymetis():
        assert (auto == bfs).all()


def test_partition_rows_callable_and_errors(rng):
    a = random_dense(rng, 30, 30, 0.1)
    indptr, indices, _ = csr_of(a)
    labels = partition.partition_rows(indptr, indices, 30, 4,
                                      method=lambda p, i, n, r: np.arange(n) % 3)
    assert np.bincount(labels).max() <= 4
    with pytest.raises(ValueError, match="unknown partition method"):
        partition.partition_rows(indptr, indices, 30, 4, method="spectral")
    with pytest.raises(ValueError, match="one label per row"):
        partition.partition_rows(indptr, indices, 30, 4, method=lambda p, i, n, r: [0, 1])
    with pytest.raises(TypeError, match="max_rows must be an int"):
        partition.partition_rows(indptr, indices, 30, 2.5)
    with pytest.raises(ValueError, match="at least 1"):
        partition.contiguous_partition(30, 0)
    with pytest.raises(ValueError, match="n \\+ 1"):
        partition.partition_rows(indptr, indices, 31, 4)
    bad = indices.copy()
    bad[0] = 99
    with pytest.raises(ValueError, match="outside"):
        partition.partition_rows(indptr, bad, 30, 4)


def test_metis_partition_without_pymetis(monkeypatch, rng):
    import sys
    monkeypatch.setitem(sys.modules, "pymetis", None)      # import fails
    assert not partition.have_pymetis()
    a = random_dense(rng, 40, 40, 0.1)
    indptr, indices, _ = csr_of(a)
    with pytest.raises(ImportError):
        partition.metis_partition(indptr, indices, 40, 8)
    labels = partition.partition_rows(indptr, indices, 40, 8)       # auto still works
    assert np.bincount(labels).max() <= 8


# ------------------------------------------------------------------ packet layout (CPU)

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n,density,rows,threads,method", [
    (1, 1.0, 1, 1, "contiguous"), (50, 0.1, 7, 4, "bfs"), (97, 0.03, 16, 5, "contiguous"),
    (300, 0.02, 40, 8, "auto"), (64, 0.0, 8, 4, "auto"), (120, 0.5, 120, 32, "auto")])
def test_packet_layout_reproduces_the_product(rng, dtype, n, density, rows, threads, method):
    a = random_dense(rng, n, n, density, dtype, empty_rows=range(0, n, 7))
    indptr, indices, data = csr_of(a)
    labels = partition.partition_rows(indptr, indices, n, rows, False, method)
    lay = build_packets(indptr, indices, data, labels, threads, rows)
    assert lay.max_packet_rows <= rows
    assert lay.local_nnz + lay.remaining.nnz == np.count_nonzero(a)
    assert sorted(lay.new2old.tolist()) == list(range(n))
    assert (lay.old2new[lay.new2old] == np.arange(n)).all()
    base = lay.packet_base_rows
    assert base[0] == 0 and base[-1] == n and (np.diff(base) >= 1).all()
    # every local entry lies inside its packet and every slot is used at most once
    T = threads
    used = np.zeros(lay.index_array.size, int)
    for g in range(lay.packet_count * T):
        p = g // T
        pos = np.arange(lay.thread_starts[g], lay.thread_ends[g], T)
        used[pos] += 1
        rc = lay.index_array[pos].astype(np.int64)
        size = base[p + 1] - base[p]
        assert ((rc >> 16) < size).all() and ((rc & 0xFFFF) < size).all()
    assert used.max(initial=0) <= 1 and used.sum() == lay.local_nnz
    x = rng.standard_normal(n).astype(dtype)
    y = lay.spmv(x[lay.new2old])[lay.old2new]
    tol = 1e-4 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(y, a.astype(np.float64) @ x, rtol=tol, atol=tol * 10)


def test_each_row_has_one_thread(rng):
    a = random_dense(rng, 200, 200, 0.2)
    indptr, indices, data = csr_of(a)
    labels = partition.contiguous_partition(200, 50)
    lay = build_packets(indptr, indices, data, labels, 8, 50)
    owner = {}
    for g in range(lay.packet_count * 8):
        pos = np.arange(lay.thread_starts[g], lay.thread_ends[g], 8)
        for r in set((lay.index_array[pos] >> 16).tolist()):
            key = (g // 8, r)
            assert owner.setdefault(key, g) == g, "a row is shared by two threads"


def test_build_packets_errors(rng):
    a = random_dense(rng, 10, 10, 0.3)
    indptr, indices, data = csr_of(a)
    with pytest.raises(ValueError, match="threads_per_packet"):
        build_packets(indptr, indices, data, np.zeros(10, int), 0)
    with pytest.raises(ValueError, match="65536"):
        build_packets(indptr, indices, data, np.zeros(10, int), 4, 70000)
    with pytest.raises(ValueError, match="one packet label per row"):
        build_packets(indptr, indices, data, np.zeros(9, int), 4)


# ------------------------------------------------------------------ input checks (CPU)

def test_matrix_inputs(rng):
    a = random_dense(rng, 12, 9, 0.3)
    coo = as_coo(a, np.float32, "t")
    dense = np.zeros((12, 9), np.float32)
    np.add.at(dense, (coo.row, coo.col), coo.data)
    assert (dense == a.astype(np.float32)).all()
    m = COOMatrix(np.array([0, 2, 2]), np.array([1, 0, 0]), np.array([1.0, 2.0, 3.0]), (3, 3))
    shape, indptr, indices, data = as_csr(m, np.float64, "t")
    assert shape == (3, 3) and indptr.tolist() == [0, 1, 1, 3] and data.sum() == 6.0
    with pytest.raises(ValueError, match="outside the shape"):
        as_coo(COOMatrix(np.array([3]), np.array([0]), np.array([1.0]), (3, 3)), np.float32, "t")
    with pytest.raises(TypeError, match="integers"):
        as_coo(COOMatrix(np.array([0.5]), np.array([0]), np.array([1.0]), (3, 3)), np.float32, "t")
    with pytest.raises(ValueError, match="one length"):
        as_coo(COOMatrix(np.array([0, 1]), np.array([0]), np.array([1.0]), (3, 3)), np.float32, "t")


def test_scipy_input(rng):
    sp = pytest.importorskip("scipy.sparse")
    a = random_dense(rng, 20, 20, 0.2)
    for fmt in ("csr", "csc", "coo"):
        m = sp.csr_matrix(a).asformat(fmt)
        shape, indptr, indices, data = as_csr(m, np.float64, "t")
        back = sp.csr_matrix((data, indices, indptr), shape=shape).toarray()
        assert (back == a).all()


@pytest.mark.parametrize("cls", [PacketedSpMV, CoordinateSpMV])
def test_bad_matrices_rejected_before_any_gpu_work(cls):
    def make(mat, dtype=np.float32):
        return cls(mat, False, dtype) if cls is PacketedSpMV else cls(mat, dtype)
    good = np.eye(4)
    for dt in (np.int32, np.complex64, np.float16, "U3"):
        with pytest.raises(TypeError, match="float32 or float64"):
            make(good, dt)
    with pytest.raises(TypeError, match="complex"):
        make(good.astype(np.complex128))
    with pytest.raises(TypeError, match="not numbers"):
        make(np.array([["a", "b"], ["c", "d"]]))
    with pytest.raises(TypeError, match="SciPy sparse matrix or a 2-D NumPy array"):
        make("matrix")
    with pytest.raises(TypeError, match="SciPy sparse matrix or a 2-D NumPy array"):
        make(None)
    with pytest.raises(ValueError, match="two dimensions"):
        make(np.ones(5))
    with pytest.raises(ValueError, match="two dimensions"):
        make(np.ones((2, 2, 2)))


def test_packeted_needs_a_square_matrix():
    with pytest.raises(ValueError, match="only square matrices"):
        PacketedSpMV(np.ones((3, 4)), False, np.float32)
    with pytest.raises(ValueError, match="no rows"):
        PacketedSpMV(np.ones((0, 0)), False, np.float32)


def test_operators_on_the_host():
    op = IdentityOperator(np.float32, 5)
    token = object()
    assert op(token) is token and op.shape == (5, 5) and op.dtype == np.float32
    assert isinstance(IdentityPreconditioner(np.float64, 2), IdentityOperator)
    with pytest.raises(ValueError):
        IdentityOperator(np.float32, -1)
    with pytest.raises(TypeError, match="GPUArray"):
        DiagonalPreconditioner(np.ones(4))


# ------------------------------------------------------------------ NVRTC (CPU)

@pytest.mark.parametrize("dtype", DTYPES)
def test_sparse_kernels_compile(dtype):
    ptx = nvrtc_check(_kernels.source(dtype), ptx=True, cache_dir=False)
    assert b".visible .entry" in ptx


@pytest.mark.parametrize("dtype", DTYPES)
def test_cg_kernels_compile(dtype):
    dt = np.dtype(dtype)
    kernels = [cg._step_kernel(dt, True), cg._step_kernel(dt, False), cg._direction_kernel(dt),
               cg._div_kernel(dt, dt, dt)]
    kernels += [cg._lc2_kernel(dt, a, b) for a in (False, True) for b in (False, True)]
    for k in kernels:
        nvrtc_check(k.source(), cache_dir=False)


# ------------------------------------------------------------------ GPU: SpMV

def _tol(dtype):
    return (2e-4, 1e-4) if dtype == np.float32 else (1e-11, 1e-11)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n,density,small", [(1, 1.0, False), (37, 0.2, True), (500, 0.02, True),
                                             (500, 0.02, False), (3000, 0.002, False),
                                             (256, 0.0, True), (800, 0.3, True)])
def test_packeted_spmv_matches_numpy(ctx, rng, dtype, n, density, small):
    from barecuda import gpuarray
    a = random_dense(rng, n, n, density, dtype, empty_rows=range(1, n, 5))
    kw = dict(rows_per_packet=16, threads_per_packet=32) if small else {}
    spmv = PacketedSpMV(a, False, dtype, **kw)
    assert spmv.nnz == np.count_nonzero(a)
    x = rng.standard_normal(n).astype(dtype)
    x_gpu = gpuarray.to_gpu(x)
    y_gpu = spmv.unpermute(spmv(spmv.permute(x_gpu)))
    rtol, atol = _tol(dtype)
    want = a.astype(np.float64) @ x.astype(np.float64)
    np.testing.assert_allclose(y_gpu.get(), want, rtol=rtol, atol=atol * max(1, np.abs(want).max()))
    # y given: the product is added to it
    y0 = rng.standard_normal(n).astype(dtype)
    y_perm = spmv.permute(gpuarray.to_gpu(y0))
    spmv(spmv.permute(x_gpu), y_perm)
    np.testing.assert_allclose(spmv.unpermute(y_perm).get(), want + y0, rtol=rtol,
                               atol=atol * max(1, np.abs(want).max()))


@pytest.mark.gpu
@pytest.mark.parametrize("method", ["contiguous", "bfs"])
def test_packeted_spmv_partitioners(ctx, rng, method):
    from barecuda import gpuarray
    n = 5000
    a = permuted_laplacian_1d(rng, n)
    spmv = PacketedSpMV(a, True, np.float64, rows_per_packet=256, partitioner=method)
    x = rng.standard_normal(n)
    y = spmv.unpermute(spmv(spmv.permute(gpuarray.to_gpu(x)))).get()
    np.testing.assert_allclose(y, a @ x, rtol=1e-12, atol=1e-12)


@pytest.mark.gpu
def test_packeted_spmv_from_scipy(ctx, rng):
    sp = pytest.importorskip("scipy.sparse")
    from barecuda import gpuarray
    m = sp.random(4000, 4000, density=0.003, random_state=7, format="csr", dtype=np.float32)
    spmv = PacketedSpMV(m, False, np.float32)
    x = rng.standard_normal(4000).astype(np.float32)
    y = spmv.unpermute(spmv(spmv.permute(gpuarray.to_gpu(x)))).get()
    np.testing.assert_allclose(y, m @ x, rtol=1e-4, atol=1e-4)


@pytest.mark.gpu
def test_permute_roundtrip(ctx, rng):
    from barecuda import gpuarray
    spmv = PacketedSpMV(random_dense(rng, 300, 300, 0.05), False, np.float32,
                        rows_per_packet=20, partitioner="bfs")
    x = rng.standard_normal(300).astype(np.float32)
    xp = spmv.permute(gpuarray.to_gpu(x))
    assert (xp.get() == x[spmv.layout.new2old]).all()
    assert (spmv.unpermute(xp).get() == x).all()


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,density", [((1, 1), 1.0), ((50, 80), 0.1), ((1000, 300), 0.05),
                                           ((70, 70), 0.0)])
def test_coordinate_spmv_matches_numpy(ctx, rng, dtype, shape, density):
    from barecuda import gpuarray
    a = random_dense(rng, *shape, density, dtype, empty_rows=range(0, shape[0], 3))
    spmv = CoordinateSpMV(a, dtype)
    x = rng.standard_normal(shape[1]).astype(dtype)
    y = spmv(gpuarray.to_gpu(x)).get()
    rtol, atol = _tol(dtype)
    want = a.astype(np.float64) @ x
    np.testing.assert_allclose(y, want, rtol=rtol, atol=atol * max(1, np.abs(want).max()))


@pytest.mark.gpu
def test_coordinate_spmv_long_rows_and_duplicates(ctx, rng):
    """Rows spanning many warps and repeated positions (segments cross tiles)."""
    from barecuda import gpuarray
    row = np.concatenate([np.zeros(10000, int), np.full(77, 3), rng.integers(0, 5, 500)])
    col = rng.integers(0, 200, row.size)
    val = rng.standard_normal(row.size)
    spmv = CoordinateSpMV(COOMatrix(row, col, val, (5, 200)), np.float64)
    x = rng.standard_normal(200)
    want = np.zeros(5)
    np.add.at(want, row, val * x[col])
    np.testing.assert_allclose(spmv(gpuarray.to_gpu(x)).get(), want, rtol=1e-11, atol=1e-10)


@pytest.mark.gpu
def test_spmv_rejects_bad_vectors(ctx, rng):
    from barecuda import gpuarray
    spmv = PacketedSpMV(random_dense(rng, 40, 40, 0.2), False, np.float32)
    coo = CoordinateSpMV(random_dense(rng, 40, 30, 0.2), np.float32)
    x = gpuarray.to_gpu(np.ones(40, np.float32))
    with pytest.raises(TypeError, match="dtype float64"):
        spmv(gpuarray.to_gpu(np.ones(40)))
    with pytest.raises(ValueError, match="39 elements"):
        spmv(gpuarray.to_gpu(np.ones(39, np.float32)))
    with pytest.raises(TypeError, match="GPUArray"):
        spmv(np.ones(40, np.float32))
    with pytest.raises(ValueError, match="same memory"):
        spmv(x, x)
    with pytest.raises(ValueError, match="40 elements"):
        coo(x)                                       # needs 30
    with pytest.raises(ValueError, match="needs 40"):
        coo(gpuarray.to_gpu(np.ones(30, np.float32)), gpuarray.zeros(30, np.float32))
    with pytest.raises(ValueError, match="does not fit"):
        PacketedSpMV(np.eye(4), False, np.float64, rows_per_packet=10**6)
    with pytest.raises(ValueError, match="exceeds"):
        PacketedSpMV(np.eye(4), False, np.float64, threads_per_packet=4096)


# ------------------------------------------------------------------ GPU: CG

@pytest.mark.gpu
@pytest.mark.parametrize("dtype,tol,want", [(np.float64, 1e-9, 1e-7), (np.float32, 1e-4, 2e-3)])
@pytest.mark.parametrize("precon_kind", ["identity", "diagonal"])
@pytest.mark.parametrize("n,small", [(400, True), (2500, False)])
def test_cg_solves_spd_system(ctx, rng, dtype, tol, want, precon_kind, n, small):
    from barecuda import gpuarray
    from barecuda.sparse.cg import solve_pkt_with_cg
    a = random_spd(rng, n, 8.0 / n, dtype)
    kw = dict(rows_per_packet=64, threads_per_packet=32) if small else {}
    spmv = PacketedSpMV(a, True, dtype, **kw)
    precon = None
    if precon_kind == "diagonal":
        inv = (1 / a.diagonal()).astype(dtype)
        precon = DiagonalPreconditioner(spmv.permute(gpuarray.to_gpu(inv)))
    b = rng.standard_normal(n).astype(dtype)
    x_gpu, iterations, checks = solve_pkt_with_cg(spmv, gpuarray.to_gpu(b), precon, tol=tol)
    x = x_gpu.get()
    a64 = a.astype(np.float64)
    rel = np.linalg.norm(a64 @ x - b) / np.linalg.norm(b)
    assert rel < want, (rel, iterations)
    assert 0 < iterations <= 10 * n and 1 <= checks <= iterations
    np.testing.assert_allclose(x, np.linalg.solve(a64, b), rtol=0, atol=50 * want)


@pytest.mark.gpu
def test_cg_initial_guess_zero_rhs_and_failure(ctx, rng):
    from barecuda import gpuarray
    from barecuda.sparse.cg import ConvergenceError, solve_pkt_with_cg
    n = 300
    a = random_spd(rng, n, 0.03)
    spmv = PacketedSpMV(a, True, np.float64)
    b = rng.standard_normal(n)
    exact = np.linalg.solve(a, b)
    x0 = exact + 1e-3 * rng.standard_normal(n)
    x, it, _ = solve_pkt_with_cg(spmv, gpuarray.to_gpu(b), x=gpuarray.to_gpu(x0), tol=1e-10)
    assert np.linalg.norm(a @ x.get() - b) / np.linalg.norm(b) < 1e-8
    z, _, _ = solve_pkt_with_cg(spmv, gpuarray.zeros(n, np.float64))
    assert (z.get() == 0).all()
    with pytest.raises(ConvergenceError, match="did not converge"):
        solve_pkt_with_cg(spmv, gpuarray.to_gpu(b), tol=1e-14, max_iterations=2)
    with pytest.raises(TypeError, match="dtype float32"):
        solve_pkt_with_cg(spmv, gpuarray.to_gpu(b.astype(np.float32)))
    with pytest.raises(TypeError, match="dtype"):
        solve_pkt_with_cg(spmv, gpuarray.to_gpu(b),
                          DiagonalPreconditioner(gpuarray.to_gpu(np.ones(n, np.float32))))


@pytest.mark.gpu
def test_cg_helpers_and_async_inner_product(ctx, rng):
    from barecuda import gpuarray
    from barecuda.sparse.cg import CGStateContainer
    from barecuda.sparse.inner import AsyncInnerProduct
    from barecuda.tools import PageLockedMemoryPool
    pool = PageLockedMemoryPool()
    a, b = rng.standard_normal(1000), rng.standard_normal(1000)
    ip = AsyncInnerProduct(gpuarray.to_gpu(a), gpuarray.to_gpu(b), pool.allocate)
    assert ip.wait() == pytest.approx(a @ b, rel=1e-12)
    assert ip.get_host_result() == pytest.approx(a @ b, rel=1e-12)
    state = CGStateContainer(IdentityOperator(np.float64, 1000))
    x, y = gpuarray.to_gpu(a), gpuarray.to_gpu(b)
    two = gpuarray.to_gpu(np.array(2.0))
    np.testing.assert_allclose(state.lc2(3.0, x, two, y).get(), 3 * a + 2 * b)
    num = gpuarray.to_gpu(np.array([1.0, 2.0, 3.0]))
    den = gpuarray.to_gpu(np.array([2.0, 0.0, -1.0]))
    assert state.guarded_div(num, den).get().tolist() == [0.5, 0.0, -3.0]
