# SPDX-License-Identifier: MIT
"""curandom: rand(), libcurand's tables and the cuRAND generator classes.

CPU: the generator kernels compile with NVRTC, libcurand's version and tables,
argument checks that need no device.  GPU: every generator and method against
NumPy statistics with fixed seeds, Sobol points against a host walk of the same
direction vectors, skip-ahead equivalence, rand() for every dtype.
"""

import os
import re
import subprocess
import sys

import numpy as np
import pytest
from conftest import full_or, need_curand_headers, nvrtc_check

from barecuda import _driver, curandom
from barecuda import driver as drv
from barecuda import gpuarray as ga

GENERATORS = [curandom.XORWOWRandomNumberGenerator, curandom.MRG32k3aRandomNumberGenerator,
              curandom.Sobol32RandomNumberGenerator, curandom.Sobol64RandomNumberGenerator,
              curandom.ScrambledSobol32RandomNumberGenerator,
              curandom.ScrambledSobol64RandomNumberGenerator]
PSEUDO = GENERATORS[:2]
SOBOL = GENERATORS[2:]
def ids(cls):
    return cls.__name__.replace("RandomNumberGenerator", "")


_headers = need_curand_headers


@pytest.fixture(autouse=True)
def _curand_headers_for_gpu_tests(request):
    """The GPU tests compile generators: they skip, saying why, where the headers
    are missing (test_curand_without_cccl_is_clear checks that message)."""
    if request.node.get_closest_marker("gpu"):
        need_curand_headers()


def _need_libcurand():
    if curandom.get_curand_version() is None:
        pytest.skip(f"no libcurand: {_driver._curand_info()[1]}")


# ------------------------------------------------------------------- CPU

_PTX_TYPE = {"P": "u64", "Q": "u64", "I": "u32", "f": "f32", "d": "f64"}


# The cover: a pseudo-random generator with 32-bit output and Box-Muller, and a
# scrambled 64-bit quasi-random one (each compile is minutes of NVRTC on the CI machine).
@pytest.mark.parametrize("cls", full_or(GENERATORS, [
    curandom.XORWOWRandomNumberGenerator, curandom.ScrambledSobol64RandomNumberGenerator]),
    ids=ids)
def test_generator_kernels_compile_with_the_formats_prepare_packs(cls):
    """Each generator's source compiles with NVRTC, with the kernels the class
    launches, and every kernel's parameters (read from its PTX) are what
    prepare() packs.  One PTX compile a generator: <curand_kernel.h> takes NVRTC
    tens of seconds on a small CPU (the GPU tests compile the cubins)."""
    inc = _headers()
    src = curandom._generator_source(cls)
    assert f"#define BC_STATE {cls._config['state']}" in src and "$" not in src.split("\n", 12)[-1]
    ptx = nvrtc_check(src, ptx=True, include_dirs=inc)
    text = ptx.decode() if isinstance(ptx, bytes) else ptx
    entries = {m.group(1): re.findall(r"\.param \.(\w+)", m.group(2))
               for m in re.finditer(r"\.entry (\w+)\(([^)]*)\)", text)}
    names = curandom._kernel_names(cls)
    assert set(names) <= set(entries), sorted(entries)
    assert re.search(r"\.global .*\bbc_state_probe\b", text)   # its size is the state's
    assert ("normal_float2" in names) == cls.has_box_muller
    assert ("uniform_long" in names) == (cls.generator_bits == 64)
    assert ("skip_ahead_sequence" in names) == (cls in PSEUDO)
    assert ("skip_ahead_subsequence" in names) == (cls is curandom.MRG32k3aRandomNumberGenerator)
    formats = curandom._kernel_formats(cls)
    assert set(entries) == set(formats)
    for name, fmt in formats.items():
        assert entries[name] == [_PTX_TYPE[c] for c in fmt], name


def test_curand_version():
    _need_libcurand()
    v = curandom.get_curand_version()
    assert isinstance(v, tuple) and len(v) == 3 and all(isinstance(x, int) for x in v)
    assert v >= (10, 0, 0)
    raw = _driver._curand_version()
    assert v == (raw // 1000, raw % 1000 // 10, raw % 10)
    path, failure = _driver._curand_info()
    assert "libcurand" in path and failure is None


@pytest.mark.parametrize("vset,width,dt", [(101, 32, np.uint32), (102, 32, np.uint32),
                                           (103, 64, np.uint64), (104, 64, np.uint64)])
def test_direction_vectors_host(vset, width, dt):
    _need_libcurand()
    a = _driver._curand_direction_vectors(vset, 5)
    assert a.shape == (5, width) and a.dtype == dt and a.flags.c_contiguous
    if vset in (101, 103):
        # dimension 0 is van der Corput's: vector k is the bit width-1-k
        np.testing.assert_array_equal(a[0], (np.ones(1, dt) << np.arange(width - 1, -1, -1,
                                                                         dtype=dt)))
    assert len({tuple(r) for r in a}) == 5
    big = _driver._curand_direction_vectors(vset, 20003)
    np.testing.assert_array_equal(big[20000:], big[:3])
    np.testing.assert_array_equal(big[:5], a)
    assert _driver._curand_direction_vectors(vset, 0).shape == (0, width)


@pytest.mark.parametrize("bits,dt", [(32, np.uint32), (64, np.uint64)])
def test_scramble_constants_host(bits, dt):
    _need_libcurand()
    c = _driver._curand_scramble_constants(bits, 20002)
    assert c.shape == (20002,) and c.dtype == dt
    np.testing.assert_array_equal(c[20000:], c[:2])
    assert len(np.unique(c[:100])) == 100


def test_host_table_arguments():
    for bad in (0, 100, 105, -1):
        with pytest.raises(ValueError, match="direction vector set"):
            _driver._curand_direction_vectors(bad, 1)
    with pytest.raises(ValueError, match="count must be >= 0"):
        _driver._curand_direction_vectors(101, -1)
    with pytest.raises(ValueError, match="bits must be 32 or 64"):
        _driver._curand_scramble_constants(16, 1)
    with pytest.raises(ValueError, match="count must be >= 0"):
        _driver._curand_scramble_constants(32, -5)
    with pytest.raises(TypeError):
        _driver._curand_scramble_constants(32, "3")
    # the public wrappers check before touching the device
    with pytest.raises(ValueError, match="count must be >= 0"):
        curandom.generate_direction_vectors(-1)
    with pytest.raises(TypeError, match="count must be an int"):
        curandom.generate_scramble_constants32(2.5)
    with pytest.raises(TypeError, match="count must be an int"):
        curandom.generate_scramble_constants64(True)
    with pytest.raises(ValueError):
        curandom.generate_direction_vectors(4, 99)
    with pytest.raises(ValueError, match="count must be >= 0"):
        curandom.seed_getter_unique(-3)
    assert curandom.direction_vector_set.SCRAMBLED_VECTOR_64 == 104


def test_missing_libcurand_is_clear(tmp_path):
    code = ("from barecuda import curandom, _driver, driver\n"
            "assert curandom.get_curand_version() is None\n"
            "try:\n"
            "    _driver._curand_direction_vectors(101, 1)\n"
            "except driver.Error as e:\n"
            "    print('ERR', e)\n")
    env = dict(os.environ, BARECUDA_LIBCURAND=str(tmp_path / "libcurand.so.10"))
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    assert "ERR BARECUDA_LIBCURAND=" in r.stdout and "could not be loaded as cuRAND" in r.stdout


def _header(root, rel, text="// fake\n"):
    path = root.joinpath(*rel.split("/"))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


# curand_kernel.h as CUDA 13's: it includes CCCL's <nv/target>
CURAND_13 = "#include <nv/target>\n// cuRAND's device API\n"


@pytest.fixture
def fake_wheels(tmp_path, monkeypatch):
    """Two site-packages folders, as a venv and a `pip install --target` folder:
    `venv` has NVIDIA's CUDA 13 runtime and cuRAND wheels (one include folder),
    `extra` an empty nvidia/ folder (its CCCL wheel comes later).  sys.path has both; curandom forgets what it found."""
    venv, extra = tmp_path / "venv", tmp_path / "extra"
    inc = venv / "nvidia" / "cu13" / "include"
    _header(inc, "cuda_fp16.h")
    _header(inc, "curand_kernel.h", CURAND_13)
    (extra / "nvidia").mkdir(parents=True)
    # this environment's own NVIDIA wheels, if any, are left out
    monkeypatch.setattr(sys, "path", [str(venv), str(extra)] + [
        e for e in sys.path if not os.path.isdir(os.path.join(e or ".", "nvidia"))])
    monkeypatch.setattr(curandom, "_CACHE", {})
    from barecuda import compiler
    from barecuda._compile import toolkit

    def dirs():
        return toolkit._toolkit_dirs(str(inc))
    monkeypatch.setattr(toolkit, "_toolkit_include_dirs", dirs)
    monkeypatch.setattr(compiler, "_toolkit_include_dirs", dirs)
    return venv, extra, inc


def test_curand_without_cccl_is_clear(fake_wheels):
    venv, extra, inc = fake_wheels
    with pytest.raises(drv.RuntimeError) as info:
        curandom._find_curand_headers()
    msg = str(info.value)
    assert f"{inc / 'curand_kernel.h'} includes <nv/target>" in msg
    assert "no CCCL was found" in msg and "nvidia-cuda-cccl" in msg and "barecuda[cu13]" in msg
    # every place it looked is named: the include folder's cccl/, and both wheels' folders
    for where in (inc / "cccl", venv / "nvidia" / "cuda_cccl" / "include",
                  extra / "nvidia" / "cu13" / "include" / "cccl"):
        assert str(where) in msg
    assert curandom._CACHE == {}          # nothing cached: installing CCCL later works
    # a generator says the same before NVRTC would fail deep inside the header
    with pytest.raises(drv.RuntimeError, match="no CCCL was found"):
        curandom.XORWOWRandomNumberGenerator(seed=1)


def test_curand_finds_cccl_in_another_site_folder(fake_wheels):
    venv, extra, inc = fake_wheels
    cccl = extra / "nvidia" / "cu13" / "include" / "cccl"
    _header(cccl, "cuda/std/type_traits")
    _header(cccl, "nv/target")
    from barecuda._compile import toolkit
    # the compiler's include path gets it (so <cuda/std/...> works in any kernel) ...
    assert toolkit._toolkit_include_dirs() == [str(inc), str(cccl)]
    # ... and curandom needs nothing beyond that path
    assert curandom._find_curand_headers() == []


def test_curand_headers_of_cuda12_wheels(tmp_path, monkeypatch):
    """CUDA 12's wheels: one include folder each, under one site-packages."""
    site = tmp_path / "site"
    rt = site / "nvidia" / "cuda_runtime" / "include"
    _header(rt, "cuda_fp16.h")
    curand = _header(site / "nvidia" / "curand" / "include", "curand_kernel.h", CURAND_13).parent
    cccl = site / "nvidia" / "cuda_cccl" / "include"
    _header(cccl, "cuda/std/type_traits")
    monkeypatch.setattr(sys, "path", [str(site)] + [
        e for e in sys.path if not os.path.isdir(os.path.join(e or ".", "nvidia"))])
    from barecuda._compile import toolkit
    assert toolkit._toolkit_dirs(str(rt)) == [str(rt), str(curand), str(cccl)]
    # a CUDA toolkit's include folder is taken as it is: its cccl/ beside, no wheels
    tk = tmp_path / "cuda" / "include"
    _header(tk, "cuda_fp16.h")
    assert toolkit._toolkit_dirs(str(tk)) == [str(tk)]
    _header(tk / "cccl", "cuda/std/type_traits")
    assert toolkit._toolkit_dirs(str(tk)) == [str(tk), str(tk / "cccl")]


def test_rand_arguments_checked_first():
    for dt in (np.complex64, np.int64, np.int8, np.bool_):
        with pytest.raises(TypeError, match="rand\\(\\) supports") as info:
            curandom.rand(10, dt)
        assert isinstance(info.value, NotImplementedError)       # PyCUDA raises that
    with pytest.raises(ValueError, match="negative dimension"):
        curandom.rand((3, -1))
    with pytest.raises(TypeError, match="shape must hold ints"):
        curandom.rand((3, 2.0))


# ------------------------------------------------------------------- GPU

def _gen(cls, **kw):
    if cls in PSEUDO:
        kw.setdefault("seed", 1234)
    return cls(**kw)


@pytest.mark.gpu
@pytest.mark.parametrize("dt", [np.float16, np.float32, np.float64, np.int32, np.uint32], ids=str)
def test_rand_every_dtype(ctx, dt):
    a = curandom.rand((300, 1000), dt)
    assert a.shape == (300, 1000) and a.dtype == dt
    h = a.get().astype(np.float64)
    if np.dtype(dt).kind == "f":
        assert h.min() >= 0 and h.max() < 1
        assert abs(h.mean() - 0.5) < 0.01 and abs(h.var() - 1 / 12) < 0.01
    else:
        lo, hi = (-(2.0**31), 2.0**31) if dt == np.int32 else (0.0, 2.0**32)
        assert h.min() < lo + 0.01 * (hi - lo) and h.max() > hi - 0.01 * (hi - lo)
        assert abs(h.mean() - (lo + hi) / 2) < 0.01 * (hi - lo)
        assert len(np.unique(h)) > 0.99 * h.size
    b = curandom.rand(1000, dt).get()
    assert not np.array_equal(b, a.get().ravel()[:1000])


@pytest.mark.gpu
def test_rand_minmax_like_pycuda(ctx):
    a = curandom.rand((200000,), np.int32)
    h = a.get()
    assert ga.min(a).get() == h.min() and ga.max(a).get() == h.max()


@pytest.mark.gpu
@pytest.mark.parametrize("cls", GENERATORS, ids=ids)
def test_generator_attributes(ctx, cls):
    g = _gen(cls)
    assert g.block_count == drv.Context.get_device().multiprocessor_count
    assert 32 <= g.generators_per_block <= 1024
    assert g.generator_count == g.block_count * g.generators_per_block
    assert isinstance(g.state, drv.DeviceAllocation)
    assert g.state_type == cls._config["state"]
    assert set(g.generators) == set(curandom._kernel_names(cls))


@pytest.mark.gpu
@pytest.mark.parametrize("cls", GENERATORS, ids=ids)
def test_uniform(ctx, cls):
    g = _gen(cls, offset=1) if cls in SOBOL else _gen(cls)
    n = g.generator_count * 16
    for dt in (np.float32, np.float64):
        x = g.gen_uniform(n, dt).get().astype(np.float64)
        assert x.dtype == np.float64 and x.min() > 0 and x.max() <= 1
        assert abs(x.mean() - 0.5) < 0.01 and abs(x.var() - 1 / 12) < 0.01
    u = g.gen_uniform((n,), np.uint32).get().astype(np.float64)
    assert abs(u.mean() / 2.0**32 - 0.5) < 0.01
    i = g.gen_uniform(n, np.int32).get()
    assert (i < 0).any() and (i > 0).any()
    h = g.gen_uniform((7, 9), np.float16).get()
    assert h.dtype == np.float16 and h.shape == (7, 9) and (h >= 0).all() and (h <= 1).all()
    if cls.generator_bits == 64:
        w = g.gen_uniform(n, np.uint64).get()
        assert abs(w.astype(np.float64).mean() / 2.0**64 - 0.5) < 0.01
        assert g.gen_uniform(10, np.int64).dtype == np.int64
    else:
        with pytest.raises(TypeError, match="does not produce"):
            g.gen_uniform(10, np.uint64)
    with pytest.raises(TypeError, match="does not produce") as info:
        g.gen_uniform(10, np.complex64)
    assert isinstance(info.value, NotImplementedError)
    with pytest.raises(TypeError, match="expected a GPUArray"):
        g.fill_uniform(np.zeros(4, np.float32))
    with pytest.raises(ValueError, match="negative"):
        g.gen_uniform(-1, np.float32)


@pytest.mark.gpu
@pytest.mark.parametrize("cls", GENERATORS, ids=ids)
def test_normal_and_log_normal(ctx, cls):
    g = _gen(cls, offset=1) if cls in SOBOL else _gen(cls)
    n = g.generator_count * 32
    # Every Sobol dimension's first 32 points are the same 32 strata j/32 (one per
    # stratum, at its lower edge), so the normals made from them by inverse CDF are
    # symmetric about 0 but miss both tails: their std is 0.90 to 0.91 (seen on an
    # H100), deterministically, not 1 (scrambled ones come near 1).  Pseudo-random
    # generators must be close to 1.
    tol_m = 0.05 if cls in SOBOL else 0.02
    std_range = (0.85, 1.03) if cls in SOBOL else (0.98, 1.02)
    for size in (n, n + 1):                 # Box-Muller pairs and single draws
        for dt in (np.float32, np.float64):
            x = g.gen_normal(size, dt).get().astype(np.float64)
            assert x.shape == (size,) and np.isfinite(x).all()
            assert abs(x.mean()) < tol_m and std_range[0] < x.std() < std_range[1]
            y = g.gen_log_normal(size, dt, 0.5, 0.25).get().astype(np.float64)
            assert (y > 0).all()
            ly = np.log(y)
            assert abs(ly.mean() - 0.5) < tol_m / 2
            assert std_range[0] * 0.25 < ly.std() < std_range[1] * 0.25
    with pytest.raises(TypeError, match="does not produce"):
        g.gen_normal(10, np.int32)
    with pytest.raises(ValueError, match="stddev"):
        g.gen_log_normal(10, np.float32, 0.0, -1.0)
    with pytest.raises(TypeError, match="mean must be a real"):
        g.gen_log_normal(10, np.float32, "0", 1.0)
    # a strided view is filled through a contiguous temporary (uniform: never 0)
    base = ga.zeros((64, 64), np.float32)
    view = base[:, ::2]
    assert g.fill_uniform(view) is view
    hb = base.get()
    assert (hb[:, 1::2] == 0).all() and (hb[:, ::2] > 0).all()


@pytest.mark.gpu
@pytest.mark.parametrize("cls", GENERATORS, ids=ids)
def test_poisson(ctx, cls):
    g = _gen(cls, offset=1) if cls in SOBOL else _gen(cls)
    n = g.generator_count * 16
    p = g.gen_poisson(n, np.uint32, 13.0)
    assert p.dtype == np.uint32
    h = p.get().astype(np.float64)
    sobol = cls in SOBOL                    # 16 stratified points per dimension
    assert abs(h.mean() - 13) < (0.5 if sobol else 0.1)
    # the same 16 strata in every dimension miss the tails (see above): var 9.2, not 13
    assert (7 < h.var() < 13.5) if sobol else abs(h.var() - 13) < 0.5
    # in place: every element is its own lambda
    for dt in (np.float32, np.float64, np.uint32):
        lam = np.where(np.arange(n) % 2 == 0, 4, 40).astype(dt)
        a = ga.to_gpu(lam)
        g.fill_poisson(a)
        r = a.get().astype(np.float64)
        assert abs(r[0::2].mean() - 4) < (0.3 if sobol else 0.1)
        assert abs(r[1::2].mean() - 40) < (1.0 if sobol else 0.3)
        assert (r == np.round(r)).all()
    with pytest.raises(TypeError, match="does not produce"):
        g.gen_poisson(10, np.float32, 3.0)
    with pytest.raises(TypeError, match="does not produce"):
        g.fill_poisson(ga.zeros(10, np.int64))
    for bad in (-1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="lambda_value"):
            g.gen_poisson(10, np.uint32, bad)


@pytest.mark.gpu
@pytest.mark.parametrize("cls", PSEUDO, ids=ids)
def test_pseudo_seeding(ctx, cls):
    a = cls(seed=7).gen_uniform(100000, np.uint32).get()
    b = cls(seed=7).gen_uniform(100000, np.uint32).get()
    c = cls(seed=8).gen_uniform(100000, np.uint32).get()
    np.testing.assert_array_equal(a, b)
    assert (a != c).mean() > 0.99
    g = cls(seed_getter=curandom.seed_getter_uniform)
    s = curandom.seed_getter_uniform(10).get()
    assert s.dtype == np.int32 and (s == s[0]).all()
    u = curandom.seed_getter_unique(1000).get()
    assert u.dtype == np.int32 and len(np.unique(u)) > 990
    assert g.gen_uniform(10, np.float32).size == 10
    # offset: generator i starts `offset` numbers into its subsequence
    k = 3
    n = cls(seed=7).generator_count
    full = cls(seed=7).gen_uniform(n * (k + 2), np.uint32).get().reshape(k + 2, n)
    shifted = cls(seed=7, offset=k).gen_uniform(n * 2, np.uint32).get().reshape(2, n)
    np.testing.assert_array_equal(full[k:], shifted)
    with pytest.raises(TypeError, match="int32 GPUArray"):
        cls(seed_getter=lambda n: ga.zeros(n, np.int64))
    with pytest.raises(TypeError, match="int32 GPUArray"):
        cls(seed_getter=lambda n: ga.zeros(n - 1, np.int32))
    with pytest.raises(ValueError, match="offset"):
        cls(seed=1, offset=-1)
    with pytest.raises(ValueError, match="seed must fit"):
        cls(seed=2**40)


def _skip_check(make, skip, k, m, dtype=np.uint32):
    """Generating n*k then n*m numbers equals skipping k then generating n*m."""
    g1, g2 = make(), make()
    n = g1.generator_count
    g1.gen_uniform(n * k, dtype)
    a = g1.gen_uniform(n * m, dtype).get()
    skip(g2)
    b = g2.gen_uniform(n * m, dtype).get()
    np.testing.assert_array_equal(a, b)
    return a


@pytest.mark.gpu
@pytest.mark.parametrize("cls", GENERATORS, ids=ids)
def test_skip_ahead(ctx, cls):
    make = (lambda: cls(seed=99)) if cls in PSEUDO else cls
    k = 5
    _skip_check(make, lambda g: g.call_skip_ahead(k), k, 3)
    n = make().generator_count
    skip_t = np.uint32 if cls._config["skip_t"] == "unsigned int" else np.uint64
    _skip_check(make, lambda g: g.call_skip_ahead_array(ga.to_gpu(np.full(n, k, skip_t))), k, 2)
    # per-generator skips: generator j skips j % 4
    g1, g2 = make(), make()
    full = g1.gen_uniform(n * 6, np.uint32).get().reshape(6, n)
    g2.call_skip_ahead_array(ga.to_gpu((np.arange(n) % 4).astype(skip_t)))
    part = g2.gen_uniform(n, np.uint32).get()
    np.testing.assert_array_equal(part, full[np.arange(n) % 4, np.arange(n)])
    g = make()
    with pytest.raises(TypeError, match="skips must be uint"):
        g.call_skip_ahead_array(ga.zeros(n, np.float64))
    with pytest.raises(ValueError, match="one per generator"):
        g.call_skip_ahead_array(ga.zeros(n + 1, skip_t))
    with pytest.raises(ValueError, match="skip must be in"):
        g.call_skip_ahead(-1)
    with pytest.raises(TypeError, match="skip must be an int"):
        g.call_skip_ahead(1.5)
    if skip_t == np.uint32:
        with pytest.raises(ValueError, match="skip must be in"):
            g.call_skip_ahead(2**32)


@pytest.mark.gpu
@pytest.mark.parametrize("cls", PSEUDO, ids=ids)
def test_skip_ahead_sequence(ctx, cls):
    mrg = cls is curandom.MRG32k3aRandomNumberGenerator
    g1, g2 = cls(seed=5), cls(seed=5)
    n = g1.generator_count
    # generator i starts at subsequence i (XORWOW: skipahead_sequence's unit, MRG32k3a:
    # skipahead_subsequence's): skipping one puts generator i where generator i + 1 began
    a = g1.gen_uniform(n * 2, np.uint32).get().reshape(2, n)
    shift = g2.call_skip_ahead_subsequence if mrg else g2.call_skip_ahead_sequence
    shift(1)
    b = g2.gen_uniform(n * 2, np.uint32).get().reshape(2, n)
    np.testing.assert_array_equal(b[:, :-1], a[:, 1:])
    g3 = cls(seed=5)
    shift_array = (g3.call_skip_ahead_subsequence_array if mrg
                   else g3.call_skip_ahead_sequence_array)
    shift_array(ga.to_gpu(np.ones(n, np.uint64)))
    np.testing.assert_array_equal(g3.gen_uniform(n * 2, np.uint32).get().reshape(2, n), b)
    g4, g5 = cls(seed=5), cls(seed=5)
    g4.call_skip_ahead_sequence(2)
    g5.call_skip_ahead_sequence_array(ga.to_gpu(np.full(n, 2, np.uint64)))
    c = g4.gen_uniform(n, np.uint32).get()
    np.testing.assert_array_equal(c, g5.gen_uniform(n, np.uint32).get())
    assert (c != a[0]).mean() > 0.99
    with pytest.raises(TypeError, match="skips must be uint64"):
        g4.call_skip_ahead_sequence_array(ga.zeros(n, np.uint32))


def _sobol_walk(vectors, start, points):
    """Host Sobol: x_0 = start, x_{j+1} = x_j ^ v[lowest zero bit of j]; (points, dims)."""
    out = np.empty((points,) + start.shape, start.dtype)
    x = start.copy()
    for j in range(points):
        out[j] = x
        bit = (~j & (j + 1)).bit_length() - 1
        x ^= vectors[:, bit]
    return out


@pytest.mark.gpu
@pytest.mark.parametrize("cls", SOBOL, ids=ids)
def test_sobol_points(ctx, cls):
    g = cls()
    n, bits = g.generator_count, cls.generator_bits
    dt = np.uint32 if bits == 32 else np.uint64
    vset = {32: (101, 102), 64: (103, 104)}[bits][int(cls._scrambled)]
    vectors = curandom.generate_direction_vectors(n, vset)
    assert vectors.shape == (n, bits) and vectors.dtype == dt
    host_v = vectors.get()
    if cls._scrambled:
        sc = (curandom.generate_scramble_constants32 if bits == 32
              else curandom.generate_scramble_constants64)(n)
        assert sc.shape == (n,) and sc.dtype == dt
        start = sc.get()
    else:
        start = np.zeros(n, dt)
    pts = 12
    want = _sobol_walk(host_v, start, pts)
    if bits == 32:
        got = g.gen_uniform(n * pts, np.uint32).get().reshape(pts, n)
        np.testing.assert_array_equal(got, want)
    else:
        got = g.gen_uniform(n * pts, np.uint64).get().reshape(pts, n)
        np.testing.assert_array_equal(got, want)
        g2 = cls()
        hi = g2.gen_uniform(n * pts, np.uint32).get().reshape(pts, n)
        np.testing.assert_array_equal(hi, (want >> np.uint64(32)).astype(np.uint32))
    if not cls._scrambled:
        # dimension 0 is van der Corput's sequence in Gray-code order
        first = g.__class__().gen_uniform(n * 8, np.float64).get().reshape(8, n)[:, 0]
        np.testing.assert_allclose(first, [0, .5, .75, .25, .375, .875, .625, .125],
                                   atol=1e-9)
    # explicit tables and an offset
    args = (vectors,) if not cls._scrambled else (vectors, sc)
    g3 = cls(*args, offset=4)
    got = g3.gen_uniform(n * 2, dt).get().reshape(2, n)
    np.testing.assert_array_equal(got, want[4:6])
    with pytest.raises(TypeError, match="dir_vector must be"):
        cls(vectors[:-1] if n > 1 else ga.zeros((1, 3), dt))
    with pytest.raises(TypeError, match="dir_vector must be"):
        cls(ga.zeros((n, bits), np.float32))
    with pytest.raises(ValueError, match="offset"):
        cls(offset=-1)
    if cls._scrambled:
        with pytest.raises(TypeError, match="scramble_vector must be"):
            cls(vectors, ga.zeros(n, np.int8))


@pytest.mark.gpu
def test_generators_on_a_stream(ctx):
    s = drv.Stream()
    g = curandom.XORWOWRandomNumberGenerator(seed=3)
    a = g.gen_normal(100001, np.float32, stream=s)
    b = g.gen_uniform(1000, np.float64, stream=s)
    s.synchronize()
    assert np.isfinite(a.get()).all() and (b.get() > 0).all()


@pytest.mark.gpu
def test_pycuda_curand_wrappers_shape(ctx):
    """PyCUDA's own test_curand_wrappers, small: every class, every method, as it calls them."""
    for cls in GENERATORS:
        gen = cls()
        for dtype in (np.float32, np.float64):
            gen.gen_normal(10000, dtype)
            gen.gen_normal(10001, dtype)
            gen.gen_log_normal(10000, dtype, 10.0, 3.0)
            gen.gen_log_normal(10001, dtype, 10.0, 3.0)
            x = gen.gen_uniform(10000, dtype).get()
            assert (x >= -1).all() and (x <= 1).all()
        gen.gen_uniform(10000, np.uint32)
        gen.gen_poisson(10000, np.uint32, 13.0)
        for dtype in (np.float32, np.float64, np.uint32):
            a = ga.empty(1000000, dtype=dtype)
            a.fill(10)
            gen.fill_poisson(a)
            tmp = (a.get() == 9).sum() / a.size
            if cls in PSEUDO:               # Sobol: ~8 stratified points per dimension
                assert np.isclose(0.12511, tmp, atol=0.005), (cls.__name__, dtype, tmp)
