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
                "ModuleGlobal"]
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
