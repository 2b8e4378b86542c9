# SPDX-License-Identifier: MIT
"""PyCUDA's class behaviour that libraries built on it rely on (issue 32):

- enum members whose str() is the member's name (Boost.Python enums), keys of
  Device.get_attributes() among them (kernel_tuner reads
  ``{str(k): v for k, v in dev.get_attributes().items()}["MAX_THREADS_PER_BLOCK"]``);
- the driver classes can be subclassed, as Boost.Python classes can;
- GPUArray.mul_add's add_timer(n, get_time) is called as PyCUDA calls it.

CPU tests run everywhere (the instances through tests/fakecuda.c, in a child
process); GPU tests carry the gpu marker."""

import pickle
import textwrap

import numpy as np
import pytest

from barecuda import _driver
from barecuda import driver as drv

from test_launch_fakedriver import c_compiler, build_fake_driver, run_with, toolkit_include

# {{{ enums


def test_enum_str_is_the_member_name_and_int_behaviour_stays():
    a = drv.device_attribute.MAX_THREADS_PER_BLOCK
    assert str(a) == "MAX_THREADS_PER_BLOCK" and f"{a}" == "MAX_THREADS_PER_BLOCK"
    assert repr(a) == "<device_attribute.MAX_THREADS_PER_BLOCK: 1>"
    assert a == 1 and hash(a) == hash(1) and a + 1 == 2 and {1: "x"}[a] == "x"
    assert "%d" % a == "1" and f"{a:d}" == "1" and f"{a:03d}" == "001" and int(a) == 1
    assert str(drv.func_cache.PREFER_SHARED) == "PREFER_SHARED"
    assert pickle.loads(pickle.dumps(a)) is a


def test_flag_str_names_the_combination():
    f = drv.host_alloc_flags
    assert str(f.PORTABLE) == "PORTABLE"
    both = f.PORTABLE | f.DEVICEMAP
    assert str(both) == "PORTABLE|DEVICEMAP" and int(both) == 3 and "%d" % both == "3"
    assert str(f(0)) == "0"


def test_driver_registers_its_enum_factory():
    # barecuda.driver hands _driver a factory at import; the C floor never imports it
    made = []

    def factory(name):
        made.append(name)
        return getattr(drv, name)

    try:
        _driver._set_enum_factory(factory)
        _driver._set_enum_factory(None)
        with pytest.raises(TypeError, match="callable or None"):
            _driver._set_enum_factory(42)
    finally:
        _driver._set_enum_factory(drv._enum_for_driver)


@pytest.mark.skipif(toolkit_include() is None or c_compiler() is None,
                    reason="needs a C compiler and a CUDA toolkit's cuda.h")
def test_get_attributes_keys_are_members_on_the_fake_driver(tmp_path):
    r = run_with(build_fake_driver(tmp_path), textwrap.dedent("""
        from barecuda import driver as drv, _driver
        drv.init()
        dev = drv.Device(0)
        attrs = dev.get_attributes()
        named = {str(k): v for k, v in attrs.items()}
        assert named["MAX_THREADS_PER_BLOCK"] == 1024, named
        assert named["COMPUTE_CAPABILITY_MAJOR"] == 9
        k = next(iter(attrs))
        assert type(k) is drv.device_attribute, type(k)
        assert attrs[drv.device_attribute.MAX_THREADS_PER_BLOCK] == 1024
        assert attrs[1] == 1024                      # int keys still look them up
        _driver._set_enum_factory(None)              # no factory: plain ints
        assert all(type(k) is int for k in dev.get_attributes())
        _driver._set_enum_factory(drv._enum_for_driver)
        print("ok")
    """))
    assert r.returncode == 0 and "ok" in r.stdout, r.stderr

# }}}

# {{{ subclassing

SUBCLASSABLE = ["Device", "Context", "Stream", "Event", "Module", "Function",
                "DeviceAllocation", "PooledDeviceAllocation", "ManagedAllocation",
                "HostAllocation", "RegisteredHostMemory", "Graph", "GraphExec", "MemPool",
                "ModuleGlobal", "Array", "ArrayDescriptor", "ArrayDescriptor3D",
                "TextureObject", "SurfaceObject", "Linker", "Memcpy2D", "Memcpy3D",
                "Memcpy3DPeer", "IPCMemoryHandle"]
# Made by the library only (PyCUDA's no_init classes): a subclass cannot be instantiated
LIBRARY_MADE = ["Context", "Module", "Function", "DeviceAllocation", "PooledDeviceAllocation",
                "ManagedAllocation", "HostAllocation", "RegisteredHostMemory", "Graph",
                "GraphExec", "MemPool", "ModuleGlobal"]


@pytest.mark.parametrize("name", SUBCLASSABLE)
def test_driver_classes_can_be_subclassed(name):
    base = getattr(drv, name)
    sub = type(f"My{name}", (base,), {"extra": 1, "__module__": __name__})
    assert issubclass(sub, base) and sub.extra == 1
    if name in LIBRARY_MADE:
        with pytest.raises(TypeError):
            sub()
    with pytest.raises(TypeError):          # the base stays immutable
        base.extra = 1


def test_pycuda_aliases_are_subclassable():
    class Pinned(drv.PagelockedHostAllocation):
        pass

    assert issubclass(Pinned, drv.HostAllocation)


@pytest.mark.skipif(toolkit_include() is None or c_compiler() is None,
                    reason="needs a C compiler and a CUDA toolkit's cuda.h")
def test_subclass_instances_on_the_fake_driver(tmp_path):
    r = run_with(build_fake_driver(tmp_path), textwrap.dedent("""
        import gc, pickle, weakref
        from barecuda import driver as drv
        drv.init()

        class MyDevice(drv.Device):
            def __init__(self, ordinal, tag):
                super().__init__(ordinal)
                self.tag = tag

        d = MyDevice(0, "x")
        assert d.tag == "x" and d == drv.Device(0) and drv.Device(0) == d
        assert hash(d) == hash(drv.Device(0))
        assert d.compute_capability() == (9, 0)
        assert d.max_threads_per_block == 1024
        ctx = d.retain_primary_context()
        assert type(ctx) is drv.Context               # made by the library: the base type
        ctx.push()

        class Plain(drv.Device):                       # no __init__ of its own
            pass
        assert Plain(0).compute_capability() == (9, 0)

        class Forgot(drv.Device):
            def __init__(self):
                pass
        f = Forgot()
        for use in (f.compute_capability, f.name, lambda: f.max_threads_per_block,
                    f.retain_primary_context, f.get_attributes):
            try:
                use()
            except drv.LogicError as e:
                assert "not initialised" in str(e) and "Device.__init__" in str(e), e
            else:
                raise AssertionError("no LogicError")
        try:
            d.__init__(0, "again")
        except TypeError as e:
            assert "called twice" in str(e), e
        else:
            raise AssertionError("no TypeError")
        drv.Device(0).__init__(0)                      # the base's own: a no-op

        class MyStream(drv.Stream):
            def __init__(self, name, flags=0):
                super().__init__(flags)
                self.name = name
        s = MyStream("work", flags=drv.stream_flags.NON_BLOCKING)
        assert s.name == "work" and isinstance(s, drv.Stream)
        s.synchronize()
        r = weakref.ref(s)

        class Slotted(drv.Stream):
            __slots__ = ("a", "b")
        t = Slotted()
        try:
            t.a
        except AttributeError:
            pass
        t.a = [1]
        t.synchronize()
        del t

        class MyEvent(drv.Event):
            def __init__(self, label):
                super().__init__()
                self.label = label
        e1, e2 = MyEvent("a"), MyEvent("b")
        e1.record(s)
        e2.record(s)
        e2.synchronize()
        assert e2.time_since(e1) == 0.0                # the stand-in's elapsed time
        s.wait_for_event(e1)

        class ForgotStream(drv.Stream):
            def __init__(self):
                pass
        class ForgotEvent(drv.Event):
            def __init__(self):
                pass
        fs, fe = ForgotStream(), ForgotEvent()
        for use in (fs.synchronize, fe.synchronize, lambda: fe.record(),
                    lambda: e1.record(fs), lambda: s.wait_for_event(fe)):
            try:
                use()
            except drv.LogicError as e:
                assert "not initialised" in str(e), e
            else:
                raise AssertionError("no LogicError")
        assert "not initialised" in repr(fs)
        del fs, fe

        # a Stream subclass in the launch path and in copies
        from barecuda.bench import launch as L
        import numpy as np
        module = drv.module_from_buffer(L.kernel_ptx())
        fn = module.get_function("empty4")
        assert type(fn) is drv.Function
        a = drv.mem_alloc(256)
        fn(*L.call_args(4, a, a), block=(1, 1, 1), stream=s)
        fn.prepare(L.prepared_signature(4))
        fn.prepared_async_call((1,), (1,), s, *L.prepared_args(4, a, a))

        # cycles through a subclass's __dict__ are collected
        s.me = s
        del s
        gc.collect()
        assert r() is None
        print("ok")
    """))
    assert r.returncode == 0 and "ok" in r.stdout, r.stdout + r.stderr


def _raises(exc, match, fn, *args, **kwargs):
    with pytest.raises(exc, match=match):
        fn(*args, **kwargs)


NOT_INITIALISED = "not initialised: its __init__ must call"


class MyDescriptor(drv.ArrayDescriptor):
    """PyCUDA's way: an empty descriptor, fields set afterwards."""

    def __init__(self, shape, dtype):
        super().__init__()
        self.height, self.width = shape
        self.format = drv.dtype_to_array_format(dtype)
        self.dtype = np.dtype(dtype)

    def describe(self):
        return f"{self.height}x{self.width} {self.dtype}"


class MyDescriptor3D(drv.ArrayDescriptor3D):
    def __init__(self, depth, height, width, surface=False):
        super().__init__(width, height, depth, drv.array_format.FLOAT, 1,
                         drv.array3d_flags.SURFACE_LDST if surface else 0)
        self.surface = surface

    def describe(self):
        return "3D"


def test_array_descriptor_subclasses():
    d = MyDescriptor((8, 16), np.float32)
    assert isinstance(d, drv.ArrayDescriptor) and d.describe() == "8x16 float32"
    assert (d.width, d.height, d.num_channels) == (16, 8, 1)
    assert d.format == drv.array_format.FLOAT
    base = drv.ArrayDescriptor(16, 8, drv.array_format.FLOAT)
    assert d == base and base == d and not (d != base)
    d.num_channels = 2
    assert d != base and "num_channels=2" in repr(d)
    d3 = MyDescriptor3D(4, 5, 6, surface=True)
    assert (d3.width, d3.height, d3.depth) == (6, 5, 4) and d3.surface
    assert d3.flags == drv.array3d_flags.SURFACE_LDST and d3.describe() == "3D"
    assert d3 == drv.ArrayDescriptor3D(6, 5, 4, drv.array_format.FLOAT, 1, d3.flags)
    assert d3 != MyDescriptor((5, 6), np.float32)          # 2D and 3D never equal
    assert drv.ArrayDescriptor() == drv.ArrayDescriptor()   # the bases as before
    with pytest.raises(TypeError):
        hash(d)

    class Plain(drv.ArrayDescriptor3D):                     # no __init__ of its own
        pass

    p = Plain(width=3, flags=drv.array3d_flags.LAYERED, depth=2)
    assert (p.width, p.depth, p.flags) == (3, 2, drv.array3d_flags.LAYERED)
    # Array() takes them: the descriptor is checked before any driver call
    _raises(ValueError, "Array\\(\\): format is not set", drv.Array, Plain(width=4))
    _raises(ValueError, "width must be at least 1", drv.Array, MyDescriptor((0, 0), np.uint8))

    _raises(TypeError, "ArrayDescriptor.__init__\\(\\) called twice on this MyDescriptor",
            d.__init__, (1, 1), np.uint8)
    _raises(TypeError, "ArrayDescriptor3D.__init__\\(\\) called twice",
            drv.ArrayDescriptor3D.__init__, d3)
    drv.ArrayDescriptor(4).__init__(5)                      # the base's own: a no-op
    # the base's __init__ checks its arguments as the base's constructor does
    # CPython's own wording: "'bogus' is an invalid keyword argument for X()" up to 3.12,
    # "X() got an unexpected keyword argument 'bogus'" from 3.13
    _raises(TypeError, "invalid keyword argument for ArrayDescriptor\\(\\)|"
            "ArrayDescriptor\\(\\) got an unexpected keyword argument 'bogus'",
            type("Bad", (drv.ArrayDescriptor,), {}), bogus=1)
    _raises(ValueError, "num_channels must be 1, 2 or 4", Plain, num_channels=3)

    class Forgot(drv.ArrayDescriptor):
        def __init__(self, shape):
            self.shape = shape

    f = Forgot((2, 2))
    assert f.shape == (2, 2) and "not initialised" in repr(f)
    for use in (lambda: f.width, lambda: f.format, lambda: f.num_channels,
                lambda: setattr(f, "height", 3), lambda: f == base, lambda: base == f,
                lambda: drv.Array(f)):
        _raises(drv.LogicError, NOT_INITIALISED + " ArrayDescriptor.__init__", use)
    Forgot3 = type("Forgot3", (drv.ArrayDescriptor3D,), {"__init__": lambda self: None})
    _raises(drv.LogicError, "ArrayDescriptor3D.__init__", lambda: Forgot3().flags)


class MyMemcpy2D(drv.Memcpy2D):
    def __init__(self, src, dst, rows):
        super().__init__()
        self.set_src_host(src)
        self.set_dst_host(dst)
        self.width_in_bytes = src.strides[0]
        self.src_pitch = src.strides[0]
        self.dst_pitch = dst.strides[0]
        self.height = rows
        self.calls = 0

    def __call__(self, *args, **kwargs):
        self.calls += 1
        return super().__call__(*args, **kwargs)


def test_memcpy_subclasses_without_a_gpu():
    src = np.arange(12, dtype=np.float32).reshape(3, 4)
    dst = np.zeros_like(src)
    c = MyMemcpy2D(src, dst, 3)
    assert isinstance(c, drv.Memcpy2D) and (c.height, c.width_in_bytes) == (3, 16)
    assert c.src_memory_type == drv.memorytype.HOST and c.calls == 0
    _raises(TypeError, "Memcpy2D.__init__\\(\\) called twice on this MyMemcpy2D",
            drv.Memcpy2D.__init__, c)
    _raises(TypeError, "this copy descriptor takes no arguments", drv.Memcpy2D, 1)
    drv.Memcpy2D().__init__()                                # the base's own: a no-op

    class Takes(drv.Memcpy3D):
        def __init__(self, depth):
            super().__init__(depth)

    _raises(TypeError, "Memcpy3D.__init__\\(\\) takes no arguments", Takes, 2)

    class Peer(drv.Memcpy3DPeer):
        def __init__(self, depth):
            super().__init__()
            self.depth = depth

    p = Peer(3)
    assert p.depth == 3 and isinstance(p, drv.Memcpy3DPeer)
    assert not isinstance(p, drv.Memcpy3D)

    for base, name in ((drv.Memcpy2D, "Memcpy2D"), (drv.Memcpy3D, "Memcpy3D"),
                       (drv.Memcpy3DPeer, "Memcpy3DPeer")):
        forgot = type("Forgot", (base,), {"__init__": lambda self, x: None})(1)
        uses = [lambda: forgot.height, lambda: setattr(forgot, "height", 2),
                lambda: forgot.src_memory_type, lambda: forgot.set_src_host(src),
                lambda: forgot.set_dst_device(1 << 20), forgot]
        if name == "Memcpy3DPeer":
            uses.append(lambda: forgot.set_src_context(None))
        for use in uses:
            _raises(drv.LogicError, f"{NOT_INITIALISED} {name}.__init__\\(self\\)", use)
        del forgot


class MyLinker(drv.Linker):
    def __init__(self, tag, verbose=False):
        self.messages = []
        super().__init__(lambda *a: self.messages.append(a), log_verbose=verbose)
        self.tag = tag

    def add_source_ptx(self, data, name="unknown"):
        self.last_name = name
        return super().add_source_ptx(data, name)


def test_linker_subclasses_without_a_gpu():
    with MyLinker("t", verbose=True) as linker:
        assert linker.tag == "t" and linker.num_inputs == 0 and linker.context is None
        assert linker.info_log == "" and "0 inputs" in repr(linker)
        _raises(TypeError, "Linker.__init__\\(\\) called twice on this MyLinker",
                linker.__init__, "again")
        _raises(TypeError, "message_handler must be callable",
                lambda: type("Bad", (drv.Linker,), {})(message_handler=3))
    assert linker.closed and "closed" in repr(linker)
    _raises(drv.LogicError, "was closed", linker.add_source_ptx, ".version 8.0")

    class Forgot(drv.Linker):
        def __init__(self, *args):
            pass

    f = Forgot(1, 2)
    assert "not initialised" in repr(f) and not f.closed
    for use in (lambda: f.add_source_ptx(".version 8.0"), f.link_module,
                lambda: f.add_data(b"x", drv.jit_input_type.PTX), lambda: f.info_log,
                lambda: f.error_log):
        _raises(drv.LogicError, NOT_INITIALISED + " Linker.__init__", use)
    f.close()                                                # nothing to destroy
    with f:
        pass
    del f


def test_forgotten_base_init_of_gpu_types_is_a_logic_error():
    # none of these reaches the driver: the unset object is refused first
    class ForgotArray(drv.Array):
        def __init__(self, shape):
            self.wanted = shape

    a = ForgotArray((4, 4))
    assert "not initialised" in repr(a) and not a.freed and a.users == 0
    assert a.context is None
    host = np.zeros(16, np.float32)
    msg = NOT_INITIALISED + " Array.__init__\\(self, descriptor\\)"
    for use in (a.get, lambda: a.set(host), lambda: a.shape, lambda: a.dtype,
                lambda: a.nbytes, lambda: a.handle, a.get_descriptor, a.get_descriptor_3d,
                lambda: drv.TextureObject(a), lambda: drv.SurfaceObject(a),
                lambda: drv.Memcpy2D().set_src_array(a),
                lambda: drv.Memcpy3D().set_dst_array(a),
                lambda: drv.memcpy_htoa(a, 0, host), lambda: drv.memcpy_atoh(host, a, 0),
                lambda: drv.memcpy_dtoa(a, 0, 1 << 20, 4)):
        _raises(drv.LogicError, msg, use)
    a.free()                                                 # nothing to free
    with a:
        pass

    for base, init in ((drv.TextureObject, "TextureObject.__init__\\(self, resource, ...\\)"),
                       (drv.SurfaceObject, "SurfaceObject.__init__\\(self, array\\)")):
        t = type("ForgotTex", (base,), {"__init__": lambda self: None})()
        assert "not initialised" in repr(t) and t.resource is None and not t.closed
        uses = [lambda: int(t), lambda: t.handle, lambda: t._kernel_arg_handle]
        if base is drv.TextureObject:
            uses += [lambda: t.address_mode, lambda: t.filter_mode, lambda: t.read_mode,
                     lambda: t.normalized_coords, lambda: t.flags]
        for use in uses:
            _raises(drv.LogicError, f"{NOT_INITIALISED} {init}", use)
        t.close()
        del t

    class ForgotIPC(drv.IPCMemoryHandle):
        def __init__(self):
            pass

    m = ForgotIPC()
    assert "not initialised" in repr(m) and not m.freed and m.context is None
    msg = NOT_INITIALISED + " IPCMemoryHandle.__init__\\(self, handle\\)"
    for use in (lambda: int(m), lambda: m.__cuda_array_interface__,
                lambda: drv.memcpy_htod(m, host), lambda: drv.memcpy_dtoh(host, m),
                lambda: drv.Memcpy2D().set_src_device(m)):
        _raises(drv.LogicError, msg, use)
    m.close()
    m.free()
    del m
    # a handle of the wrong size is refused by the subclass's base __init__ too
    Sub = type("Sub", (drv.IPCMemoryHandle,), {})
    _raises(ValueError, "handle must be 64 bytes, got 3", Sub, b"abc")


@pytest.mark.skipif(toolkit_include() is None or c_compiler() is None,
                    reason="needs a C compiler and a CUDA toolkit's cuda.h")
def test_array_texture_memcpy_linker_ipc_subclasses_on_the_fake_driver(tmp_path):
    r = run_with(build_fake_driver(tmp_path), textwrap.dedent("""
        import ctypes, gc, os, struct, weakref
        import numpy as np
        from barecuda import driver as drv
        from barecuda.bench import launch as L
        drv.init()
        ctx = drv.Device(0).retain_primary_context()
        ctx.push()
        fake = ctypes.CDLL(os.environ["BARECUDA_LIBCUDA"])
        fake.fake_last_launch.restype = ctypes.c_size_t

        def last_launch_bytes():
            dims = (ctypes.c_uint * 7)()
            buf = (ctypes.c_ubyte * 4096)()
            n = fake.fake_last_launch(dims, buf, 4096)
            return bytes(buf[:n])

        def expect(exc, text, fn, *args):
            try:
                fn(*args)
            except exc as e:
                assert text in str(e), e
            else:
                raise AssertionError(f"no {exc.__name__}")

        class Desc(drv.ArrayDescriptor3D):
            def __init__(self, shape, surface):
                super().__init__()
                self.depth, self.height, self.width = shape
                self.format = drv.array_format.FLOAT
                self.flags = drv.array3d_flags.SURFACE_LDST if surface else 0

        class MyArray(drv.Array):
            def __init__(self, shape, surface=False):
                super().__init__(Desc(shape, surface))
                self.label = "img"

            def get(self, out=None):
                return super().get(out) * 1     # a copy, as an override might

        img = np.arange(2 * 3 * 4, dtype=np.float32).reshape(2, 3, 4)
        a = MyArray(img.shape, surface=True)
        assert a.label == "img" and isinstance(a, drv.Array) and a.shape == img.shape
        assert a.context == ctx and a.nbytes == img.nbytes and a.dtype == np.float32
        assert a.get_descriptor_3d() == Desc(img.shape, True)
        a.set(img)
        assert (a.get() == img).all()
        expect(TypeError, "Array.__init__() called twice", a.__init__, (1, 1, 1))

        # Memcpy subclasses copy into and out of the Array subclass, with a stream
        class HostToArray(drv.Memcpy3D):
            def __init__(self, src, ary):
                super().__init__()
                self.set_src_host(src)
                self.set_dst_array(ary)
                self.width_in_bytes = self.src_pitch = src.strides[1]
                self.height = self.src_height = src.shape[1]
                self.depth = src.shape[0]

        HostToArray(img + 1, a)(drv.Stream())
        assert (a.get() == img + 1).all()
        row = np.zeros(4, np.float32)

        class Row(drv.Memcpy2D):
            def __init__(self, ary, y, out):
                super().__init__()
                self.set_src_array(ary)
                self.set_dst_host(out)
                self.src_y = y
                self.width_in_bytes = out.nbytes
                self.height = 1
                self.calls = 0

            def __call__(self, *args, **kwargs):
                self.calls += 1
                return super().__call__(*args, **kwargs)

        c = Row(a, 2, row)
        c()
        assert (row == img[0, 2] + 1).all()
        s = drv.Stream()
        c(s)
        c(aligned=True)
        s.synchronize()
        assert c.calls == 3

        # textures and surfaces over it, subclassed too
        class Tex(drv.TextureObject):
            def __init__(self, ary, note):
                super().__init__(ary, filter_mode="linear")
                self.note = note

        class Surf(drv.SurfaceObject):
            def __init__(self, ary):
                super().__init__(array=ary)

        t = Tex(a, "smooth")
        sf = Surf(a)
        assert t.note == "smooth" and t.resource is a and sf.resource is a and a.users == 2
        assert t.filter_mode == drv.filter_mode.LINEAR and t.handle > 0 and int(sf) > 0
        plain = drv.TextureObject(a)
        assert type(plain) is drv.TextureObject and a.users == 3
        del plain
        assert a.users == 2
        expect(drv.LogicError, "still read this array", a.free)
        expect(TypeError, "TextureObject.__init__() called twice", t.__init__, a, "x")
        expect(TypeError, "SurfaceObject.__init__() called twice", sf.__init__, a)
        expect(ValueError, "SURFACE_LDST", Surf, MyArray((1, 2, 2)))

        # as kernel arguments: the handle goes to the driver
        module = drv.module_from_buffer(L.kernel_ptx())
        fn = module.get_function("empty4")
        fn.prepare("PPif")
        fn.prepared_call((1,), (1,), t, sf, 1, 2.0)
        assert struct.unpack_from("<QQ", last_launch_bytes()) == (t.handle, sf.handle)
        fn(t, sf, np.int32(1), np.float32(2), block=(1, 1, 1))
        assert struct.unpack_from("<QQ", last_launch_bytes()) == (t.handle, sf.handle)

        # from_linear on the subclass makes one of it (its __init__ not run)
        mem = drv.mem_alloc(1024)
        lin = Tex.from_linear(mem, 1024, drv.array_format.FLOAT)
        assert type(lin) is Tex and not hasattr(lin, "note") and lin.resource is mem
        lin.close()
        t.close(); sf.close()
        assert a.users == 0
        a.free()
        assert a.freed
        expect(drv.LogicError, "was freed", a.get)

        # the Linker subclass links PTX (the stand-in hands back its input)
        class MyLinker(drv.Linker):
            def __init__(self, tag):
                super().__init__(lambda *m: self.seen.append(m[0]))
                self.seen, self.tag = [], tag

        ln = MyLinker("x")
        ln.add_source_ptx(L.kernel_ptx(), "bench")
        assert ln.context == ctx and ln.num_inputs == 1
        linked = ln.link_module()
        assert ln.seen == [True] and ln.closed
        f2 = linked.get_function("empty4")
        f2(mem, mem, np.int32(1), np.float32(2), block=(1, 1, 1))

        # IPCMemoryHandle: the stand-in's handle is the pointer
        class MyIPC(drv.IPCMemoryHandle):
            def __init__(self, handle, peer):
                super().__init__(handle, flags=1)
                self.peer = peer
                self.closes = 0

            def close(self):
                self.closes += 1
                super().close()

        handle = struct.pack("<Q", int(mem)) + bytes(56)
        m = MyIPC(handle, peer=3)
        assert int(m) == int(mem) and m.peer == 3 and m.context == ctx
        expect(TypeError, "IPCMemoryHandle.__init__() called twice", m.__init__, handle, 1)
        data = np.arange(256, dtype=np.float32)
        drv.memcpy_htod(m, data)
        back = np.zeros_like(data)
        drv.memcpy_dtoh(back, mem)
        assert (back == data).all()
        fn(m, m, np.int32(1), np.float32(2), block=(1, 1, 1))
        assert struct.unpack_from("<QQ", last_launch_bytes()) == (int(mem), int(mem))
        fn.prepared_call((1,), (1,), m, m, 1, 2.0)
        assert struct.unpack_from("<QQ", last_launch_bytes()) == (int(mem), int(mem))
        r = weakref.ref(m)
        m.close()
        assert m.freed and m.closes == 1
        expect(drv.LogicError, "was closed", int, m)
        m.me = m                                           # a cycle through its __dict__
        del m
        gc.collect()
        assert r() is None
        print("ok")
    """))
    assert r.returncode == 0 and "ok" in r.stdout, r.stdout + r.stderr


@pytest.mark.gpu
def test_subclass_stream_and_event_on_the_gpu(ctx, rng):
    class MyStream(drv.Stream):
        def __init__(self, tag):
            super().__init__()
            self.tag = tag

    class MyEvent(drv.Event):
        pass

    s = MyStream("t")
    host = rng.standard_normal(4096).astype(np.float32)
    dev = drv.mem_alloc(host.nbytes)
    start = MyEvent().record(s)
    drv.memcpy_htod_async(dev, host, s)
    back = np.empty_like(host)
    drv.memcpy_dtoh_async(back, dev, s)
    end = MyEvent().record(s)
    end.synchronize()
    assert end.time_since(start) >= 0
    np.testing.assert_array_equal(back, host)


SUBCLASS_KERNELS = r"""
__global__ void sample2d(float *out, cudaTextureObject_t t, int w, int h)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y;
    if (x < w && y < h) out[y * w + x] = tex2D<float>(t, x + 0.5f, y + 0.5f);
}
__global__ void surf_scale2d(cudaSurfaceObject_t s, int w, int h)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y;
    if (x < w && y < h) {
        float v;
        surf2Dread(&v, s, x * (int)sizeof(float), y);
        surf2Dwrite(v * 2.0f + 1.0f, s, x * (int)sizeof(float), y);
    }
}
__global__ void add_one(float *a, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) a[i] += 1.0f;
}
"""


@pytest.mark.gpu
def test_array_texture_surface_and_memcpy_subclasses_on_the_gpu(ctx, rng):
    from barecuda.compiler import SourceModule

    mod = SourceModule(SUBCLASS_KERNELS)

    class MyArray(drv.Array):
        def __init__(self, img):
            super().__init__(MyDescriptor3D(0, *img.shape, surface=True))
            self.set(img)
            self.source = img

    class MyTex(drv.TextureObject):
        def __init__(self, ary, tag):
            super().__init__(ary, address_mode="clamp", filter_mode="point")
            self.tag = tag

    class MySurf(drv.SurfaceObject):
        pass

    class ArrayToDevice(drv.Memcpy2D):
        def __init__(self, ary, dev):
            super().__init__()
            self.set_src_array(ary)
            self.set_dst_device(dev)
            self.width_in_bytes = self.dst_pitch = ary.shape[1] * 4
            self.height = ary.shape[0]

    h, w = 13, 70
    img = rng.standard_normal((h, w)).astype(np.float32)
    a = MyArray(img)
    assert a.shape == (h, w) and a.source is img and isinstance(a, drv.Array)
    np.testing.assert_array_equal(a.get(), img)
    surf = MySurf(a)
    grid = ((w + 127) // 128, h)
    mod.get_function("surf_scale2d")(surf, np.int32(w), np.int32(h), block=(128, 1, 1),
                                     grid=grid)
    np.testing.assert_array_equal(a.get(), img * 2 + 1)
    tex = MyTex(a, "t")
    assert tex.tag == "t" and a.users == 2 and tex.resource is a
    out = drv.mem_alloc(img.nbytes)
    sample = mod.get_function("sample2d")
    sample(out, tex, np.int32(w), np.int32(h), block=(128, 1, 1), grid=grid)
    got = np.empty_like(img)
    drv.memcpy_dtoh(got, out)
    np.testing.assert_array_equal(got, img * 2 + 1)
    sample.prepare("PPii")
    drv.memset_d32(out, 0, img.size)
    sample.prepared_call(grid, (128, 1, 1), out, tex, w, h)
    drv.memcpy_dtoh(got, out)
    np.testing.assert_array_equal(got, img * 2 + 1)

    # a Memcpy2D subclass called with a stream, into memory a kernel then changes
    dev = drv.mem_alloc(img.nbytes)
    s = drv.Stream()
    ArrayToDevice(a, dev)(s)
    mod.get_function("add_one")(dev, np.int32(img.size), block=(128, 1, 1),
                                grid=((img.size + 127) // 128, 1), stream=s)
    s.synchronize()
    drv.memcpy_dtoh(got, dev)
    # (img * 2 + 1) + 1 in float32, in the kernels' order: img * 2 + 2 rounds differently
    np.testing.assert_array_equal(got, img * 2 + 1 + 1)
    # and Memcpy3D's subclass from host into the array, synchronously
    c3 = type("HostToArray", (drv.Memcpy3D,), {})()
    c3.set_src_host(img)
    c3.set_dst_array(a)
    c3.width_in_bytes = c3.src_pitch = w * 4
    c3.height = c3.src_height = h
    c3.depth = 1
    c3()
    np.testing.assert_array_equal(a.get(), img)
    # the module's Memcpy2D subclass, host to host, with its __call__ override
    dst = np.zeros_like(img)
    c2 = MyMemcpy2D(img, dst, h)
    c2()
    c2(aligned=True)
    assert c2.calls == 2
    np.testing.assert_array_equal(dst, img)

    with pytest.raises(drv.LogicError, match="still read this array"):
        a.free()
    tex.close()
    surf.close()
    a.free()
    with pytest.raises(drv.LogicError, match="was freed"):
        MySurf(a)


@pytest.mark.gpu
def test_linker_subclass_on_the_gpu(ctx):
    from barecuda.bench import launch as L

    class MyLinker(drv.Linker):
        def __init__(self, name):
            self.log = []
            super().__init__(message_handler=lambda *m: self.log.append(m[0]))
            self.name = name

        def link_module(self):
            self.linked_by = self.name
            return super().link_module()

    ln = MyLinker("bench")
    ln.add_data(L.kernel_ptx(), drv.jit_input_type.PTX, "bench.ptx")
    assert ln.context == ctx and ln.num_inputs == 1
    module = ln.link_module()
    assert ln.linked_by == "bench" and ln.log == [True] and ln.closed
    a = drv.mem_alloc(64)
    module.get_function("empty4")(*L.call_args(4, a, a), block=(1, 1, 1))
    ctx.synchronize()
    with pytest.raises(drv.LogicError, match="link_module"):
        ln.add_source_ptx(L.kernel_ptx())


def _open_subclassed_ipc(handle, n, conn):
    from barecuda import driver as d

    class Imported(d.IPCMemoryHandle):
        def __init__(self, handle, n):
            super().__init__(handle)
            self.n = n

        def read(self):
            out = np.empty(self.n, np.float64)
            d.memcpy_dtoh(out, self)
            return out

    d.init()
    ctx = d.Device(0).retain_primary_context()
    ctx.push()
    try:
        mem = Imported(handle, n)
        got = mem.read()
        d.memcpy_htod(mem, got * 2)
        mem.close()
        conn.send(("ok", got))
    except Exception as exc:  # noqa: BLE001 - report instead of hanging the parent
        conn.send(("error", repr(exc)))
    finally:
        d.Context.pop()
        ctx.detach()


@pytest.mark.gpu
def test_ipc_memory_handle_subclass_in_another_process(ctx, rng):
    import multiprocessing

    mp = multiprocessing.get_context("spawn")
    data = rng.random(4096)
    mem = drv.mem_alloc(data.nbytes)
    drv.memcpy_htod(mem, data)
    parent, child = mp.Pipe()
    p = mp.Process(target=_open_subclassed_ipc,
                   args=(drv.mem_get_ipc_handle(mem), data.size, child))
    p.start()
    status, got = parent.recv()
    p.join(60)
    assert status == "ok", got
    assert p.exitcode == 0
    np.testing.assert_array_equal(got, data)
    back = np.empty_like(data)
    drv.memcpy_dtoh(back, mem)
    np.testing.assert_array_equal(back, data * 2)
    mem.free()


@pytest.mark.gpu
def test_get_attributes_and_cache_config_are_members(ctx):
    attrs = {str(k): v for k, v in drv.Device(0).get_attributes().items()}
    assert attrs["MAX_THREADS_PER_BLOCK"] == drv.Device(0).max_threads_per_block
    assert attrs["WARP_SIZE"] == 32
    cfg = drv.Context.get_cache_config()
    assert isinstance(cfg, drv.func_cache) and str(cfg) == cfg.name

# }}}

# {{{ add_timer


@pytest.mark.gpu
def test_mul_add_calls_add_timer_as_pycuda(ctx, rng):
    from barecuda import gpuarray

    x = rng.standard_normal(10000).astype(np.float32)
    y = rng.standard_normal(10000).astype(np.float32)
    gx, gy = gpuarray.to_gpu(x), gpuarray.to_gpu(y)
    calls = []
    out = gx.mul_add(2.0, gy, -3.0, add_timer=lambda n, t: calls.append((n, t)))
    np.testing.assert_allclose(out.get(), 2 * x - 3 * y, rtol=1e-6, atol=1e-6)
    (n, get_time), = calls
    assert n == 3 * x.size
    secs = get_time()
    assert isinstance(secs, float) and 0 <= secs < 10
    s = drv.Stream()
    out2 = gx.mul_add(1.5, gy, 0.5, add_timer=lambda n, t: calls.append((n, t())), stream=s)
    s.synchronize()
    np.testing.assert_allclose(out2.get(), 1.5 * x + 0.5 * y, rtol=1e-6, atol=1e-6)
    assert calls[-1][0] == 3 * x.size and calls[-1][1] >= 0
    with pytest.raises(TypeError, match="add_timer must be callable"):
        gx.mul_add(1, gy, 1, add_timer=5)

# }}}
