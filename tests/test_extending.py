# SPDX-License-Identifier: MIT
"""Libraries that extend PyCUDA's classes, written the way their authors write them
(issue 43): a GPUArray subclass whose __init__ calls GPUArray.__init__ with an int
gpudata and then assigns nbytes, gpudata and fields of its own, and overrides
_new_like_me, copy, __getitem__ and get; an ArgumentHandler subclass that defines
get_device_alloc() alone; a PointerHolderBase subclass; a Device subclass that
replaces its name() method by the name; structured dtypes in and out of kernels.

The CPU tests make arrays over made-up addresses (nothing reads them); the GPU tests
compare with NumPy on random data."""

import collections.abc as abc

import numpy as np
import pytest

from barecuda import driver as drv
from barecuda import gpuarray as ga
from barecuda.compiler import SourceModule

gpu = pytest.mark.gpu

FAKE = 0x7F0000001000      # an address nothing dereferences in the CPU tests


class Buffer:
    """Device memory a library hands out in pieces: an int address and a size,
    keeping its owner alive (the library's own pointer type)."""

    def __init__(self, owner, offset, size):
        self.owner, self.offset, self.size = owner, offset, size

    def __int__(self):
        return int(self.owner) + self.offset


class Array(ga.GPUArray):
    """A library's array: made from a context-like owner, an offset into a buffer,
    its own nbytes; results of operations stay Arrays."""

    def __init__(self, thread, shape, dtype, strides=None, offset=0, nbytes=None,
                 allocator=None, base_data=None):
        dtype = np.dtype(dtype)
        size = int(np.prod(shape)) if shape != () else 1
        if nbytes is None:
            nbytes = size * dtype.itemsize
        if base_data is None:
            alloc = allocator if allocator is not None else drv.mem_alloc
            base_data = alloc(nbytes + offset)
        data = int(base_data) + offset
        ga.GPUArray.__init__(self, shape, dtype, strides=strides, allocator=allocator,
                             gpudata=data)
        self.thread = thread
        self.base_data = base_data
        self.offset = offset
        self.nbytes = nbytes
        self.gpudata = data          # an int, as such libraries assign it

    def _new_like_me(self, dtype=None):
        dtype = self.dtype if dtype is None else dtype
        return Array(self.thread, self.shape, dtype, allocator=self.allocator)

    def copy(self):
        new = self._new_like_me()
        drv.memcpy_dtod(new.gpudata, self.gpudata, self.nbytes)
        return new

    def __getitem__(self, index):
        view = ga.GPUArray.__getitem__(self, index)
        return Array(self.thread, view.shape, view.dtype, strides=view.strides,
                     offset=int(view.gpudata) - int(self.base_data) if view.size else 0,
                     base_data=self.base_data)

    def get(self, ary=None, **kwargs):
        got = ga.GPUArray.get(self, ary=ary, **kwargs)
        self.thread.gets += 1
        return got


class Thread:
    gets = 0


# ------------------------------------------------------------ without a GPU

def fake_array(shape=(4, 3), dtype=np.float32, offset=0, nbytes=None):
    return Array(Thread(), shape, dtype, offset=offset, nbytes=nbytes, base_data=FAKE)


def test_subclass_init_assigns_pycudas_instance_attributes():
    a = fake_array((4, 3), np.float32, offset=64, nbytes=1000)
    assert (a.shape, a.dtype, a.strides, a.size) == ((4, 3), np.float32, (12, 4), 12)
    assert a.nbytes == 1000                 # its own, not size * itemsize
    assert a.gpudata == FAKE + 64 and a.ptr == FAKE + 64 and type(a.gpudata) is int
    assert a.mem_size == 12 and a.itemsize == 4 and a.ndim == 2
    assert a.thread.gets == 0 and a.offset == 64 and a.base_data == FAKE
    assert set(vars(a)) >= {"thread", "base_data", "offset", "nbytes"}


@pytest.mark.parametrize("name,value", [("nbytes", 7), ("itemsize", 3), ("mem_size", 5),
                                        ("_block", (32, 1, 1))])
def test_pycudas_computed_attributes_take_assignment(name, value):
    a = ga.GPUArray((10,), np.float64, gpudata=FAKE)
    before = getattr(a, name)
    setattr(a, name, value)
    assert getattr(a, name) == value and a.__dict__[name] == value
    del a.__dict__[name]
    assert getattr(a, name) == before       # back to the value the fields give
    b = ga.GPUArray((10,), np.float64, gpudata=FAKE)
    assert getattr(b, name) == before       # an instance's value stays its own
    b._grid = (9, 1)                        # (its computed value asks the device)
    assert b._grid == (9, 1)


def test_plain_arrays_take_attributes_of_their_own():
    a = ga.GPUArray((3,), np.int32, gpudata=FAKE)
    a.owner_tag = "mine"
    assert a.owner_tag == "mine" and vars(a) == {"owner_tag": "mine"}
    with pytest.raises(AttributeError):
        a.ndim = 3                          # a property in PyCUDA too
    with pytest.raises(AttributeError):
        a.flags = None


def test_gpudata_assignment_sets_the_address():
    a = ga.GPUArray((3,), np.int32, gpudata=FAKE)
    a.gpudata = FAKE + 8
    assert a.ptr == FAKE + 8 and a.gpudata == FAKE + 8
    a.gpudata = np.uintp(FAKE + 16)
    assert a.ptr == FAKE + 16
    holder = Buffer(FAKE, 32, 12)            # only __int__
    a.gpudata = holder
    assert a.gpudata is holder and a.ptr == FAKE + 32 and a._mem is holder

    class Held(drv.PointerHolderBase):
        def get_pointer(self):
            return FAKE + 48

    h = Held()
    a.gpudata = h
    assert a.ptr == FAKE + 48 and a.gpudata is h
    b = ga.GPUArray((3,), np.int32, gpudata=Held())
    assert b.ptr == FAKE + 48 and isinstance(b.gpudata, Held)
    c = ga.GPUArray((3,), np.int32, gpudata=holder)
    assert c.ptr == FAKE + 32
    a.gpudata = None
    assert a.ptr == 0 and a.gpudata is None


@pytest.mark.parametrize("bad,exc,match", [
    (1.5, TypeError, "expected device memory"),
    ("0x10", TypeError, "expected device memory"),
    (-8, (ValueError, OverflowError), "device pointer out of range"),
    (1 << 70, (ValueError, OverflowError), "device pointer out of range"),
    (object(), TypeError, "expected device memory"),
])
def test_bad_gpudata_is_refused_and_leaves_the_array_as_it_was(bad, exc, match):
    a = ga.GPUArray((3,), np.int32, gpudata=FAKE)
    with pytest.raises(exc, match=match):
        a.gpudata = bad
    assert a.gpudata == FAKE and a.ptr == FAKE
    with pytest.raises(exc, match=match):
        ga.GPUArray((3,), np.int32, gpudata=bad)
    with pytest.raises(AttributeError, match="cannot be deleted"):
        del a.gpudata


def test_no_iter_but_sized_and_iteration_by_index_as_pycuda():
    a = fake_array((4, 3))
    assert not isinstance(a, abc.Iterable) and not hasattr(ga.GPUArray, "__iter__")
    assert isinstance(a, abc.Sized) and not isinstance(a, abc.Container)
    assert not isinstance(a, abc.Sequence)
    rows = list(a)                           # the sequence protocol: a[0], a[1], ...
    assert [r.ptr for r in rows] == [FAKE + 12 * k for k in range(4)]
    assert all(type(r) is Array and r.shape == (3,) for r in rows)
    z = ga.GPUArray((), np.float32, gpudata=FAKE)
    assert not isinstance(z, abc.Iterable)
    with pytest.raises(TypeError, match="unsized"):
        len(z)


def test_nested_containers_of_arrays_walk_as_libraries_walk_them():
    def flatten(x):
        if isinstance(x, ga.GPUArray) or not isinstance(x, abc.Iterable):
            return [x]
        return [y for item in x for y in flatten(item)]

    z = ga.GPUArray((), np.float32, gpudata=FAKE)
    a = fake_array((2,))
    assert flatten([z, (a, [z]), 3]) == [z, a, z, 3]


def test_new_like_me_of_the_base_class():
    a = ga.GPUArray((5, 2), np.float32, gpudata=FAKE, order="F")
    calls = []

    class Sub(ga.GPUArray):
        def __init__(self, shape, dtype, allocator=None, strides=None, order="C"):
            calls.append((shape, np.dtype(dtype), strides, order))
            ga.GPUArray.__init__(self, shape, dtype, allocator=allocator, strides=strides,
                                 order=order, gpudata=FAKE)

    s = Sub((5, 2), np.float32, order="F")
    t = s._new_like_me()
    assert type(t) is Sub and t.strides == s.strides == (4, 20)
    u = s._new_like_me(np.float64)
    assert type(u) is Sub and u.dtype == np.float64 and u.strides == (16, 8)
    v = s._new_like_me(np.float64, "F")
    assert v.strides == (8, 40)
    assert [c[2] for c in calls] == [None, (4, 20), None, None]
    assert a.flags.f_contiguous and not a.flags.c_contiguous


# ---- structured dtypes, CPU side

STRUCTS = [
    np.dtype({"names": ["v"], "formats": [("<u4", (2,))], "aligned": True}),
    np.dtype([("a", np.uint8), ("b", np.float64), ("c", np.int16)], align=True),
    np.dtype([("a", np.uint8), ("b", np.float64)]),                       # packed: 9 bytes
    np.dtype([("p", [("x", np.float32), ("y", np.float32)]), ("n", np.int32, (3,))],
             align=True),
    np.dtype({"names": ["x", "y"], "formats": [np.int32, np.float32], "offsets": [0, 8],
              "itemsize": 16}),                                            # padding
]


@pytest.mark.parametrize("dt", STRUCTS, ids=lambda d: f"{d.itemsize}b")
def test_structured_dtypes_are_held(dt):
    a = ga.GPUArray((6, 2), dt, gpudata=FAKE)
    assert a.dtype == dt and a.nbytes == 12 * dt.itemsize and a.strides == (2 * dt.itemsize,
                                                                             dt.itemsize)
    v = a[1:4, 1]
    assert v.dtype == dt and v.shape == (3,) and v.ptr == FAKE + 3 * dt.itemsize
    assert a.view(np.uint8).shape == (6, 2 * dt.itemsize)


def test_unholdable_dtypes_say_why():
    with pytest.raises(TypeError, match="Python objects"):
        ga.GPUArray((2,), object, gpudata=FAKE)
    with pytest.raises(TypeError, match="Python objects"):
        ga.GPUArray((2,), [("a", np.int32), ("o", object)], gpudata=FAKE)
    with pytest.raises(TypeError, match=r"sub-array dtype .* appended to its shape"):
        ga.GPUArray((2,), np.dtype((np.float32, (3,))), gpudata=FAKE)
    with pytest.raises(TypeError, match="no bytes"):
        ga.GPUArray((2,), np.dtype([]), gpudata=FAKE)


def test_argument_handler_base_has_pre_call_only():
    assert hasattr(drv.ArgumentHandler, "pre_call")
    assert not hasattr(drv.ArgumentHandler, "post_call")
    assert hasattr(drv.Out, "post_call") and hasattr(drv.InOut, "post_call")


# ------------------------------------------------------------ on the GPU

ADD = """
__global__ void axpy(float *z, const float *x, const float *y, float a, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) z[i] = a * x[i] + y[i];
}
"""


def make(rng, shape, dtype=np.float32, thread=None, offset=0):
    host = rng.standard_normal(shape).astype(dtype)
    a = Array(thread or Thread(), shape, dtype, offset=offset)
    a.set(host)
    return a, host


@gpu
def test_subclass_arithmetic_keeps_the_type(ctx, rng):
    t = Thread()
    a, ha = make(rng, (1000,), thread=t, offset=256)
    b, hb = make(rng, (1000,), thread=t)
    for got, want in [(a + b, ha + hb), (a - b, ha - hb), (a * b, ha * hb), (a / b, ha / hb),
                      (a * 2.5, ha * np.float32(2.5)), (3.0 - a, np.float32(3.0) - ha),
                      (-a, -ha), (abs(a), abs(ha)), (a ** 2, ha ** 2)]:
        assert type(got) is Array and got.thread is t, type(got)
        np.testing.assert_allclose(got.get(), want, rtol=1e-5, atol=1e-6)
    c = a > b
    assert type(c) is Array and c.dtype == np.bool_
    np.testing.assert_array_equal(c.get(), ha > hb)
    d = a.astype(np.float64)
    assert type(d) is Array and d.dtype == np.float64
    np.testing.assert_array_equal(d.get(), ha.astype(np.float64))
    plain = ga.to_gpu(hb)
    np.testing.assert_allclose((a + plain).get(), ha + hb, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose((plain + a).get(), ha + hb, rtol=1e-5, atol=1e-6)
    a += b
    assert type(a) is Array
    np.testing.assert_allclose(a.get(), ha + hb, rtol=1e-5, atol=1e-6)


@gpu
def test_subclass_views_copies_reductions_and_kernels(ctx, rng):
    a, ha = make(rng, (40, 30), offset=128)
    row = a[3]
    assert type(row) is Array and row.ptr == a.ptr + 3 * 30 * 4
    np.testing.assert_array_equal(row.get(), ha[3])
    block = a[5:9, 2:7]
    assert type(block) is Array and not block.flags.forc
    np.testing.assert_array_equal(block.get(), ha[5:9, 2:7])
    cp = a.copy()
    assert type(cp) is Array and cp.ptr != a.ptr
    np.testing.assert_array_equal(cp.get(), ha)
    assert a.thread.gets >= 3
    np.testing.assert_allclose(ga.sum(a).get(), ha.sum(dtype=np.float64), rtol=1e-4)
    np.testing.assert_allclose(a.sum().get(), ha.sum(dtype=np.float64), rtol=1e-4)
    assert float(ga.max(a).get()) == ha.max() and float(ga.min(a).get()) == ha.min()
    np.testing.assert_allclose(ga.dot(a, a).get(), (ha.astype(np.float64) ** 2).sum(), rtol=1e-4)
    # as kernel arguments, offset addresses included
    f = SourceModule(ADD).get_function("axpy")
    x, hx = make(rng, (1000,), offset=4096)
    y, hy = make(rng, (1000,))
    z = Array(Thread(), (1000,), np.float32, offset=512)
    f(z, x, y, np.float32(2.0), np.int32(1000), block=(256, 1, 1), grid=(4, 1))
    np.testing.assert_allclose(z.get(), 2 * hx + hy, rtol=1e-5, atol=1e-6)


class ViewOnly(drv.ArgumentHandler):
    """A handler that never calls ArgumentHandler.__init__ and defines
    get_device_alloc() alone: a view of memory the library owns."""

    def __init__(self, mem, offset=0):
        self.mem, self.offset = mem, offset

    def get_device_alloc(self):
        return int(self.mem) + self.offset

    def __int__(self):
        return self.get_device_alloc()


@gpu
def test_argument_handler_with_only_get_device_alloc(ctx, rng):
    f = SourceModule(ADD).get_function("axpy")
    hx = rng.standard_normal(1000).astype(np.float32)
    hy = rng.standard_normal(1000).astype(np.float32)
    x, y = ga.to_gpu(hx), ga.to_gpu(hy)
    zmem = drv.mem_alloc(1000 * 4 + 64)
    f(ViewOnly(zmem, 64), ViewOnly(x.gpudata), y, np.float32(-1.5), np.int32(1000),
      block=(128, 1, 1), grid=(8, 1))
    out = np.empty(1000, np.float32)
    drv.memcpy_dtoh(out, int(zmem) + 64)
    np.testing.assert_allclose(out, -1.5 * hx + hy, rtol=1e-5, atol=1e-6)
    s = drv.Stream()
    f(ViewOnly(zmem), x, y, np.float32(0.5), np.int32(1000), block=(128, 1, 1), grid=(8, 1),
      stream=s)
    s.synchronize()
    drv.memcpy_dtoh(out, zmem)
    np.testing.assert_allclose(out, 0.5 * hx + hy, rtol=1e-5, atol=1e-6)


@gpu
def test_post_call_runs_after_the_kernel_and_only_where_defined(ctx, rng):
    f = SourceModule(ADD).get_function("axpy")
    n = 1 << 24                      # a kernel of tens of microseconds
    hx = rng.standard_normal(n).astype(np.float32)
    x = ga.to_gpu(hx)
    seen = []
    side = drv.Stream(flags=drv.stream_flags.NON_BLOCKING)   # does not wait for stream 0

    class Checked(ViewOnly):
        def pre_call(self, stream):
            seen.append(("pre", stream))

        def post_call(self, stream):
            # read the result on a stream that does not order after the kernel: right
            # only if the launch let the kernel finish before calling post_call(None)
            host = drv.pagelocked_empty(n, np.float32)
            drv.memcpy_dtoh_async(host, int(self), side)
            side.synchronize()
            seen.append(("post", stream, np.array(host)))

    z = drv.mem_alloc(4 * n)
    drv.memset_d32(z, 0x7FC00000, n)           # NaN until the kernel writes
    f(Checked(z), x, x, np.float32(3.0), np.int32(n), block=(256, 1, 1), grid=(n // 256, 1))
    assert seen[0] == ("pre", None) and seen[1][:2] == ("post", None)
    np.testing.assert_allclose(seen[1][2], 4 * hx, rtol=1e-5, atol=1e-6)

    class Broken(ViewOnly):
        def post_call(self, stream):
            raise RuntimeError("post_call of Broken")

    with pytest.raises(RuntimeError, match="post_call of Broken"):
        f(Broken(z), x, x, np.float32(1.0), np.int32(n), block=(256, 1, 1), grid=(n // 256, 1))


@gpu
def test_in_out_inout_still_copy_around_the_launch(ctx, rng):
    f = SourceModule(ADD).get_function("axpy")
    hx = rng.standard_normal(5000).astype(np.float32)
    hy = rng.standard_normal(5000).astype(np.float32)
    out = np.zeros(5000, np.float32)
    f(drv.Out(out), drv.In(hx), drv.In(hy), np.float32(2.0), np.int32(5000),
      block=(256, 1, 1), grid=(20, 1))
    np.testing.assert_allclose(out, 2 * hx + hy, rtol=1e-5, atol=1e-6)
    inout = hy.copy()
    s = drv.Stream()
    f(drv.InOut(inout), drv.In(hx), drv.In(hy), np.float32(-1.0), np.int32(5000),
      block=(256, 1, 1), grid=(20, 1), stream=s)
    s.synchronize()
    np.testing.assert_allclose(inout, -hx + hy, rtol=1e-5, atol=1e-6)


@gpu
def test_pointer_holder_subclass_in_arrays_and_launches(ctx, rng):
    mem = drv.mem_alloc(1000 * 4)

    class Holder(drv.PointerHolderBase):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def get_pointer(self):
            return int(self.m)

    h = Holder(mem)
    a = ga.GPUArray((1000,), np.float32, gpudata=h)
    host = rng.standard_normal(1000).astype(np.float32)
    a.set(host)
    np.testing.assert_array_equal(a.get(), host)
    f = SourceModule(ADD).get_function("axpy")
    z = ga.empty(1000, np.float32)
    f(z, h, a, np.float32(1.0), np.int32(1000), block=(256, 1, 1), grid=(4, 1))
    np.testing.assert_allclose(z.get(), 2 * host, rtol=1e-5, atol=1e-6)


@gpu
def test_device_subclass_replaces_name_by_its_value(ctx):
    class Device(drv.Device):
        def __init__(self, ordinal):
            super().__init__(ordinal)
            self.name = self.name()
            self.ordinal = ordinal

    d = Device(0)
    assert isinstance(d.name, str) and d.name == drv.Device(0).name()
    assert d.ordinal == 0 and d.compute_capability() == drv.Device(0).compute_capability()
    assert d == drv.Device(0)


# ---- structured dtypes, GPU side

def random_structs(rng, dt, shape):
    raw = rng.integers(0, 256, size=int(np.prod(shape)) * dt.itemsize, dtype=np.uint8)
    host = raw.view(dt).reshape(shape).copy()
    for name in dt.names:        # floats from random bytes may be NaN: give them values
        field = dt.fields[name][0]
        if field.kind == "f":
            host[name] = rng.standard_normal(host[name].shape)
        elif field.fields is not None:
            for sub in field.names:
                host[name][sub] = rng.standard_normal(host[name][sub].shape)
    return host


def as_bytes(a):
    return np.ascontiguousarray(a).view(np.uint8)


def same_fields(got, want):
    """Field by field: NumPy's copies of strided structured arrays leave the padding
    bytes unwritten, so only contiguous copies can be compared byte for byte."""
    assert got.dtype == want.dtype and got.shape == want.shape
    for name in want.dtype.names:
        np.testing.assert_array_equal(got[name], want[name])


@gpu
@pytest.mark.parametrize("dt", STRUCTS, ids=lambda d: f"{d.itemsize}b")
def test_structured_arrays_move_as_numpy(ctx, rng, dt):
    host = random_structs(rng, dt, (37, 5))
    a = ga.to_gpu(host)
    assert a.dtype == dt
    np.testing.assert_array_equal(as_bytes(a.get()), as_bytes(host))
    b = ga.empty((37, 5), dt)
    b.set(host[::-1])
    same_fields(b.get(), host[::-1])
    z = ga.zeros((7,), dt)
    np.testing.assert_array_equal(as_bytes(z.get()), np.zeros(7 * dt.itemsize, np.uint8))
    c = a.copy()
    assert c.ptr != a.ptr
    np.testing.assert_array_equal(as_bytes(c.get()), as_bytes(host))
    v = a[3:30:4, 1:4]                        # strided: the copy kernel moves bytes
    same_fields(v.get(), host[3:30:4, 1:4])
    t = a.T.copy()
    same_fields(t.get(), host.T)
    one = host[2, 3]
    f = ga.empty((50,), dt)
    f.fill(one)
    same_fields(f.get(), np.full(50, one, dt))
    cai = a.__cuda_array_interface__
    assert cai["typestr"] == dt.str and cai["descr"] == dt.descr
    assert np.dtype(cai["descr"]).itemsize == dt.itemsize
    r = ga.to_gpu(host[:, 0].copy()).reverse()
    same_fields(r.get(), host[::-1, 0])
    with pytest.raises(TypeError):
        a + a                                  # nothing to compute with: a clear error


STRUCT_KERNEL = """
struct item { unsigned char a; double b; short c; };
struct pair { float x, y; };
struct rec { pair p; int n[3]; };
__global__ void combine(double *out, const item *items, rec *recs, rec add, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    out[i] = items[i].a + items[i].b * items[i].c;
    recs[i].p.x += add.p.x;
    recs[i].p.y *= add.p.y;
    recs[i].n[1] += add.n[2];
}
"""


@gpu
def test_structured_arrays_as_kernel_arguments(ctx, rng):
    item, rec = STRUCTS[1], STRUCTS[3]
    n = 3000
    items = random_structs(rng, item, (n,))
    recs = random_structs(rng, rec, (n,))
    recs["n"] = rng.integers(-1000, 1000, size=(n, 3))
    add = np.zeros((), rec)
    add["p"]["x"], add["p"]["y"], add["n"] = 1.5, -2.0, (0, 0, 7)
    f = SourceModule(STRUCT_KERNEL).get_function("combine")
    out = ga.empty(n, np.float64)
    g_items, g_recs = ga.to_gpu(items), ga.to_gpu(recs)
    f(out, g_items, g_recs, add[()], np.int32(n), block=(256, 1, 1), grid=((n + 255) // 256, 1))
    np.testing.assert_allclose(out.get(), items["a"] + items["b"] * items["c"], rtol=1e-12)
    got = g_recs.get()
    np.testing.assert_allclose(got["p"]["x"], recs["p"]["x"] + np.float32(1.5), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got["p"]["y"], recs["p"]["y"] * np.float32(-2.0), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(got["n"][:, 1], recs["n"][:, 1] + 7)
    np.testing.assert_array_equal(got["n"][:, [0, 2]], recs["n"][:, [0, 2]])
