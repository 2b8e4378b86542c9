# SPDX-License-Identifier: MIT
"""Each SourceModule has its own __constant__ / __device__ / __managed__ variables
(issue 43, item 7), as in PyCUDA.

Two SourceModules of one source used to share one loaded module, so data set into
the second one's globals silently replaced the first one's.  Now a loaded module is
shared only when its image keeps no variables in module memory; the CPU tests check
that verdict (barecuda._compile.cubin.module_globals) on images NVRTC makes here,
and the choice SourceModule makes from it with a stand-in for the module load; the
GPU tests run kernels of two SourceModules side by side against NumPy."""

import gc
import weakref

import numpy as np
import pytest

from barecuda import compiler, gpuarray
from barecuda import driver as drv
from barecuda._compile import cubin

ARCH = "sm_90"

PLAIN = r"""
__global__ void twice(float *y, const float *x, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = 2.0f * x[i];
}
"""

CONSTANT = r"""
__constant__ float coef[16];
__global__ void weigh(float *y, const float *x, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = coef[i & 15] * x[i];
}
"""

# each thread takes a ticket from the module's counter
COUNTER = r"""
%s unsigned int counter;
__global__ void take(unsigned int *ticket, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        ticket[i] = atomicAdd(&counter, 1u);
}
"""

# a literal table local to the kernel: NVRTC keeps it out of module memory
LOCAL_TABLE = r"""
__global__ void lookup(float *y, const int *k, int n)
{
    const float table[4] = {0.5f, 1.5f, 2.5f, 3.5f};
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = table[k[i] & 3];
}
"""

# ... while a static or file-scope one lives there, const or not
STATIC_TABLE = r"""
__global__ void lookup(float *y, const int *k, int n)
{
    static const float table[5] = {0.5f, 1.5f, 2.5f, 3.5f, 4.5f};
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = table[k[i] % 5];
}
"""

FILE_TABLE = r"""
__device__ const float table[5] = {0.5f, 1.5f, 2.5f, 3.5f, 4.5f};
__global__ void lookup(float *y, const int *k, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = table[k[i] % 5];
}
"""

# what the compiler adds on its own: printf's and assert's strings, the math
# library's tables (sin of a double), shared memory (-G gives it symbols)
COMPILER_DATA = r"""
#include <stdio.h>
#include <assert.h>
#include <math.h>
__shared__ float stage[64];
extern __shared__ float dynamic[];
__global__ void busy(double *y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    stage[threadIdx.x & 63] = dynamic[threadIdx.x];
    __syncthreads();
    assert(n >= 0);
    if (i == 0)
        printf("busy %d\n", n);
    if (i < n)
        y[i] = sin(y[i] * 1e7) + stage[(threadIdx.x + 1) & 63];
}
"""

# (source, the globals module_globals names)
CASES = {
    "no globals": (PLAIN, []),
    "__constant__ array": (CONSTANT, ["coef"]),
    "__device__ variable": (COUNTER % "__device__", ["counter"]),
    "__managed__ variable": (COUNTER % "__managed__", ["counter"]),
    "static __device__": (COUNTER % "static __device__", ["counter"]),
    "local const table": (LOCAL_TABLE, []),
    "static const table": (STATIC_TABLE, ["_ZZ6lookupE5table"]),
    "__device__ const table": (FILE_TABLE, ["table"]),
    "compiler's own data": (COMPILER_DATA, []),
}


@pytest.fixture(autouse=True)
def fresh_memory():
    compiler.clear_memory_cache()
    yield
    compiler.clear_memory_cache()


# ----------------------------------------------------------------- CPU: the verdict

@pytest.mark.parametrize("options", [[], ["-G"]], ids=["optimised", "debug"])
@pytest.mark.parametrize("case", list(CASES))
def test_module_globals_of_cubin(case, options):
    source, expected = CASES[case]
    image = compiler.compile(source, arch=ARCH, options=options, cache_dir=False)
    assert image[:4] == b"\x7fELF"
    assert cubin.module_globals(image) == expected
    assert cubin.has_module_globals(image) is bool(expected)


@pytest.mark.parametrize("case", list(CASES))
def test_module_globals_of_ptx(case):
    # where NVRTC does not know the device, SourceModule loads PTX: the same verdict
    source, expected = CASES[case]
    ptx = compiler.compile(source, arch="compute_90", target="ptx", cache_dir=False)
    assert cubin.module_globals(ptx) == expected
    assert cubin.module_globals(ptx.decode()) == expected
    assert cubin.module_globals(ptx + b"\0") == expected     # NUL-terminated, as loaded


def test_kernel_parameter_bank_is_not_a_global():
    # the kernel's parameters live in .nv.constant0.<kernel>, a constant bank like
    # the one __constant__ variables go to, but one per launch
    image = compiler.compile(PLAIN, arch=ARCH, cache_dir=False)
    assert b".nv.constant0.twice" in image
    assert cubin.module_globals(image) == []


def test_every_kind_of_global_in_one_image():
    source = (r"""
    __constant__ float coef[16];
    __device__ int hits;
    __managed__ double total;
    static __device__ unsigned int seen;
    __global__ void all(float *y, int n)
    {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) {
            y[i] = coef[i & 15];
            atomicAdd(&hits, 1);
            atomicAdd(&seen, 1u);
            if (i == 0)
                total += n;
        }
    }
    """)
    image = compiler.compile(source, arch=ARCH, cache_dir=False)
    assert sorted(cubin.module_globals(image)) == ["coef", "hits", "seen", "total"]


def test_a_global_no_kernel_uses_still_counts():
    # the host reaches it through get_global all the same
    source = "__constant__ float unused[8];\n" + PLAIN
    image = compiler.compile(source, arch=ARCH, cache_dir=False)
    assert cubin.module_globals(image) == ["unused"]


@pytest.mark.parametrize("image", [b"", b"\x7fELF", b"\x7fELF" + b"\x02\x01" + b"\xff" * 90,
                                   b"\x50\xed\x55\xba\x01\x00\x10\x00" + b"\0" * 64,
                                   "not PTX at all"],
                         ids=["empty", "magic only", "broken ELF", "fatbin", "text"])
def test_unreadable_images_count_as_having_globals(image):
    assert cubin.module_globals(image) is None
    assert cubin.has_module_globals(image) is True


def test_a_damaged_symbol_table_counts_as_having_globals():
    image = bytearray(compiler.compile(CONSTANT, arch=ARCH, cache_dir=False))
    image[0x28:0x30] = (len(image) - 8).to_bytes(8, "little")   # section headers past the end
    assert cubin.module_globals(bytes(image)) is None
    assert cubin.has_module_globals(bytes(image)) is True


def test_ptx_variables_are_read_from_module_scope_only():
    ptx = "\n".join([
        ".version 9.0", ".target sm_90", ".address_size 64",
        ".visible .global .align 4 .u32 visible_counter;",
        ".global .attribute(.managed) .align 8 .f64 managed_total;",
        ".const .align 4 .b8 coef[64];",
        ".extern .global .align 4 .u32 elsewhere;",
        ".global .align 1 .b8 $str[4] = {37, 100, 10, 0};",
        ".global .align 8 .b8 __cudart_i2opi_d[144] = {8, 93};",
        ".visible .entry k(.param .u64 k_param_0)", "{",
        "\t.reg .b32 %r<3>;", "\t.shared .align 4 .b8 stage[256];",
        "\tld.global.u32 %r1, [visible_counter];", "\tst.global.u32 [visible_counter], %r1;",
        "\tld.const.f32 %r2, [coef];", "\tret;", "}", ""])
    assert cubin.module_globals(ptx) == ["visible_counter", "managed_total", "coef", "elsewhere"]


def test_the_verdict_costs_little():
    # read once per compiled image; it must not weigh on a compile or a disk hit
    import time
    image = compiler.compile(COMPILER_DATA, arch=ARCH, options=["-G"], cache_dir=False)
    cubin.module_globals(image)
    n = 200
    t = time.perf_counter()
    for _ in range(n):
        cubin.module_globals(image)
    per = (time.perf_counter() - t) / n
    assert per < 500e-6, f"module_globals took {per * 1e6:.0f} us on a {len(image)} byte image"


# ------------------------------------------- CPU: what SourceModule does with it

class _FakeContext:
    """What compiler._module_for reads of a context."""
    released = False
    is_primary = True

    def __init__(self, handle):
        self.handle = handle


@pytest.fixture
def fake_loads(monkeypatch):
    """compiler._load replaced by a stand-in that makes a new object per load and
    counts the loads."""
    loads = []

    class Module:
        pass

    def load(image, kind):
        loads.append(image)
        return Module()
    monkeypatch.setattr(compiler, "_load", load)
    return loads


def _compiled(source):
    return compiler._get_compiled(source, "nvcc", None, False, False, ARCH, None, None, [],
                                  "nvrtc", None, "cubin", None)


def test_image_without_globals_shares_one_loaded_module(fake_loads, tmp_path, monkeypatch):
    monkeypatch.setenv("BARECUDA_CACHE_DIR", str(tmp_path))
    ctx = _FakeContext(0x1000)
    compiled = _compiled(PLAIN)
    assert _compiled(PLAIN) is compiled                  # the memory cache's hit
    first, loaded = compiler._module_for(compiled, ctx, True)
    again, loaded_again = compiler._module_for(compiled, ctx, True)
    assert again is first and loaded_again is loaded and len(fake_loads) == 1
    assert loaded.module is first and loaded.context is ctx
    # another context loads its own
    other, _ = compiler._module_for(compiled, _FakeContext(0x2000), True)
    assert other is not first and len(fake_loads) == 2
    # a released context's module is never handed out again, even to a new context
    # that got the same handle
    ctx.released = True
    fresh, _ = compiler._module_for(compiled, _FakeContext(0x1000), True)
    assert fresh is not first and len(fake_loads) == 3


def test_image_with_globals_gets_a_module_per_source_module(fake_loads, tmp_path, monkeypatch):
    monkeypatch.setenv("BARECUDA_CACHE_DIR", str(tmp_path))
    ctx = _FakeContext(0x1000)
    compiled = _compiled(CONSTANT)
    kept = (len(compiler._loaded), len(compiler._recent))
    first, loaded = compiler._module_for(compiled, ctx, True)
    second, loaded2 = compiler._module_for(compiled, ctx, True)
    assert first is not second and len(fake_loads) == 2
    assert loaded is None and loaded2 is None
    # nothing keeps such a module but its SourceModule (and Functions)
    assert (len(compiler._loaded), len(compiler._recent)) == kept
    ref = weakref.ref(first)
    del first
    gc.collect()
    assert ref() is None


def test_cache_off_loads_every_time(fake_loads):
    ctx = _FakeContext(0x1000)
    compiled = compiler._get_compiled(PLAIN, "nvcc", None, False, False, ARCH, None, False,
                                      [], "nvrtc", None, "cubin", None)
    a, la = compiler._module_for(compiled, ctx, False)
    b, lb = compiler._module_for(compiled, ctx, False)
    assert a is not b and la is None and lb is None and len(fake_loads) == 2


def test_the_verdict_is_read_once_per_image(fake_loads, tmp_path, monkeypatch):
    monkeypatch.setenv("BARECUDA_CACHE_DIR", str(tmp_path))
    calls = []
    real = cubin.has_module_globals

    def counting(image):
        calls.append(1)
        return real(image)
    monkeypatch.setattr(cubin, "has_module_globals", counting)
    ctx = _FakeContext(0x1000)
    compiled = _compiled(CONSTANT)
    for _ in range(3):
        compiler._module_for(compiled, ctx, True)
    assert len(calls) == 1 and len(fake_loads) == 3


# ----------------------------------------------------------------- GPU

def _launch(fn, n, *args):
    fn(*args, np.int32(n), block=(128, 1, 1), grid=((n + 127) // 128, 1))


def _to_gpu(a):
    g = drv.mem_alloc(a.nbytes)
    drv.memcpy_htod(g, a)
    return g


def _get(g, like):
    out = np.empty_like(like)
    drv.memcpy_dtoh(out, g)
    return out


@pytest.fixture(params=["cache", "cache off"])
def cache_dir(request, tmp_path):
    return str(tmp_path / "cache") if request.param == "cache" else False


@pytest.mark.gpu
def test_constant_data_is_each_source_modules_own(ctx, rng, cache_dir):
    a = compiler.SourceModule(CONSTANT, cache_dir=cache_dir)
    b = compiler.SourceModule(CONSTANT, cache_dir=cache_dir)
    assert a.module is not b.module and a.module.handle != b.module.handle
    ca, cb = (rng.standard_normal(16).astype(np.float32) for _ in range(2))
    pa, size = a.get_global("coef")
    pb, _ = b.get_global("coef")
    assert size == 64 and int(pa) != int(pb)
    drv.memcpy_htod(pa, ca)                                          # one way in
    gpuarray.GPUArray((16,), np.float32, gpudata=pb).set(cb)         # another
    n = 4000
    x = rng.standard_normal(n).astype(np.float32)
    gx, ya, yb = _to_gpu(x), drv.mem_alloc(x.nbytes), drv.mem_alloc(x.nbytes)
    _launch(a.get_function("weigh"), n, ya, gx)
    _launch(b.get_function("weigh"), n, yb, gx)
    weights_a, weights_b = np.tile(ca, n // 16 + 1)[:n], np.tile(cb, n // 16 + 1)[:n]
    np.testing.assert_array_equal(_get(ya, x), weights_a * x)
    np.testing.assert_array_equal(_get(yb, x), weights_b * x)
    # new data into b, on a stream, and a runs again: still its own coefficients
    stream = drv.Stream()
    cb2 = drv.pagelocked_empty(16, np.float32)
    cb2[:] = rng.standard_normal(16)
    drv.memcpy_htod_async(pb, cb2, stream)
    stream.synchronize()
    _launch(a.get_function("weigh"), n, ya, gx)
    _launch(b.get_function("weigh"), n, yb, gx)
    np.testing.assert_array_equal(_get(ya, x), weights_a * x)
    np.testing.assert_array_equal(_get(yb, x), np.tile(cb2, n // 16 + 1)[:n] * x)
    back = np.empty(16, np.float32)
    drv.memcpy_dtoh(back, pa)
    np.testing.assert_array_equal(back, ca)


@pytest.mark.gpu
@pytest.mark.parametrize("storage", ["__device__", "static __device__", "__managed__"])
def test_device_counter_is_each_source_modules_own(ctx, rng, cache_dir, storage):
    if storage == "__managed__" and not ctx.get_device().get_attribute(
            drv.device_attribute.MANAGED_MEMORY):
        pytest.skip("the device has no managed memory")
    source = COUNTER % storage
    a = compiler.SourceModule(source, cache_dir=cache_dir)
    b = compiler.SourceModule(source, cache_dir=cache_dir)
    assert a.module is not b.module
    start_a, start_b = (int(v) for v in rng.integers(0, 1 << 20, 2))
    pa, size = a.get_global("counter")
    pb, _ = b.get_global("counter")
    assert size == 4
    drv.memcpy_htod(pa, np.array([start_a], np.uint32))
    drv.memcpy_htod(pb, np.array([start_b], np.uint32))
    na, nb = 3000, 1100
    ta, tb = drv.mem_alloc(4 * na), drv.mem_alloc(4 * nb)
    _launch(a.get_function("take"), na, ta)
    _launch(b.get_function("take"), nb, tb)
    _launch(a.get_function("take"), na, ta)          # a second round on a alone
    drv.Context.synchronize()
    tickets_a = np.sort(_get(ta, np.empty(na, np.uint32)))
    tickets_b = np.sort(_get(tb, np.empty(nb, np.uint32)))
    np.testing.assert_array_equal(tickets_a, np.arange(start_a + na, start_a + 2 * na))
    np.testing.assert_array_equal(tickets_b, np.arange(start_b, start_b + nb))
    for ptr, expected in ((pa, start_a + 2 * na), (pb, start_b + nb)):
        got = np.empty(1, np.uint32)
        drv.memcpy_dtoh(got, ptr)
        assert got[0] == expected


@pytest.mark.gpu
def test_source_without_globals_shares_its_module(ctx, rng, tmp_path):
    cache = str(tmp_path / "cache")
    a = compiler.SourceModule(PLAIN, cache_dir=cache)
    before = dict(compiler.stats)
    b = compiler.SourceModule(PLAIN, cache_dir=cache)
    assert b.module is a.module and b.module.handle == a.module.handle
    assert compiler.stats["memory_hits"] == before["memory_hits"] + 1
    assert compiler.stats["nvrtc"] == before["nvrtc"]
    # the same for a kernel that only has parameters and a local literal table
    c = compiler.SourceModule(LOCAL_TABLE, cache_dir=cache)
    assert compiler.SourceModule(LOCAL_TABLE, cache_dir=cache).module is c.module
    n = 1000
    k = rng.integers(0, 1 << 30, n).astype(np.int32)
    gk, gy = _to_gpu(k), drv.mem_alloc(4 * n)
    _launch(c.get_function("lookup"), n, gy, gk)
    table = np.array([0.5, 1.5, 2.5, 3.5], np.float32)
    np.testing.assert_array_equal(_get(gy, np.empty(n, np.float32)), table[k & 3])
    # a static const table is module memory: each SourceModule has its own
    s1 = compiler.SourceModule(STATIC_TABLE, cache_dir=cache)
    s2 = compiler.SourceModule(STATIC_TABLE, cache_dir=cache)
    assert s1.module is not s2.module
    _launch(s2.get_function("lookup"), n, gy, gk)
    table5 = np.array([0.5, 1.5, 2.5, 3.5, 4.5], np.float32)
    np.testing.assert_array_equal(_get(gy, np.empty(n, np.float32)), table5[k % 5])
    # with the cache off nothing is shared
    d = compiler.SourceModule(PLAIN, cache_dir=False)
    assert d.module is not a.module


@pytest.mark.gpu
def test_repeated_source_module_with_globals_compiles_nothing(ctx, tmp_path):
    cache = str(tmp_path / "cache")
    compiler.SourceModule(CONSTANT, cache_dir=cache)
    before = dict(compiler.stats)
    mods = [compiler.SourceModule(CONSTANT, cache_dir=cache) for _ in range(20)]
    assert compiler.stats["nvrtc"] == before["nvrtc"]
    assert compiler.stats["memory_hits"] == before["memory_hits"] + 20
    assert len({m.module.handle for m in mods}) == 20


@pytest.mark.gpu
def test_own_module_goes_with_its_last_user(ctx, rng, tmp_path):
    cache = str(tmp_path / "cache")
    mod = compiler.SourceModule(CONSTANT, cache_dir=cache)
    ref = weakref.ref(mod.module)
    weigh = mod.get_function("weigh")
    coef, _ = mod.get_global("coef")
    c = rng.standard_normal(16).astype(np.float32)
    drv.memcpy_htod(coef, c)
    del mod, coef
    gc.collect()
    assert ref() is not None            # the Function holds its module
    n = 64
    x = rng.standard_normal(n).astype(np.float32)
    gx, gy = _to_gpu(x), drv.mem_alloc(x.nbytes)
    _launch(weigh, n, gy, gx)
    np.testing.assert_array_equal(_get(gy, x), np.tile(c, 4) * x)
    del weigh
    gc.collect()
    assert ref() is None                # no cache keeps it, in a primary context too
    # while the shared module of a source without globals stays for the next one
    plain = compiler.SourceModule(PLAIN, cache_dir=cache)
    ref = weakref.ref(plain.module)
    del plain
    gc.collect()
    assert ref() is not None
    assert compiler.SourceModule(PLAIN, cache_dir=cache).module is ref()


@pytest.mark.gpu
def test_modules_of_a_released_context(ctx, rng, tmp_path):
    cache = str(tmp_path / "cache")
    own = ctx.get_device().make_context()
    try:
        own_const = compiler.SourceModule(CONSTANT, cache_dir=cache)
        own_plain = compiler.SourceModule(PLAIN, cache_dir=cache)
        assert own_const.module.context == own and own_plain.module.context == own
        weigh_there = own_const.get_function("weigh")
    finally:
        drv.Context.pop()
        own.detach()
    assert own.released
    # back in the primary context: modules of its own, and correct results
    n = 512
    x = rng.standard_normal(n).astype(np.float32)
    gx, gy = _to_gpu(x), drv.mem_alloc(x.nbytes)
    here_plain = compiler.SourceModule(PLAIN, cache_dir=cache)
    assert here_plain.module is not own_plain.module and here_plain.module.context == ctx
    _launch(here_plain.get_function("twice"), n, gy, gx)
    np.testing.assert_array_equal(_get(gy, x), 2 * x)
    here_const = compiler.SourceModule(CONSTANT, cache_dir=cache)
    assert here_const.module.context == ctx
    c = rng.standard_normal(16).astype(np.float32)
    drv.memcpy_htod(here_const.get_global("coef")[0], c)
    _launch(here_const.get_function("weigh"), n, gy, gx)
    np.testing.assert_array_equal(_get(gy, x), np.tile(c, n // 16) * x)
    # a new context, whose handle may be the released one's, loads afresh even while
    # the released context's shared module is still referenced
    again = ctx.get_device().make_context()
    try:
        fresh = compiler.SourceModule(PLAIN, cache_dir=cache)
        assert fresh.module is not own_plain.module and fresh.module.context == again
        gx2, gy2 = _to_gpu(x), drv.mem_alloc(x.nbytes)
        _launch(fresh.get_function("twice"), n, gy2, gx2)
        np.testing.assert_array_equal(_get(gy2, x), 2 * x)
        del gx2, gy2, fresh
    finally:
        drv.Context.pop()
        again.detach()
    # the released context's modules go quietly
    refs = [weakref.ref(m.module) for m in (own_const, own_plain)]
    del own_const, own_plain, weigh_there
    gc.collect()
    assert [r() for r in refs] == [None, None]
