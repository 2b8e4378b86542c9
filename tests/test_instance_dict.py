# SPDX-License-Identifier: MIT
"""Instances of the driver's types take attributes, as PyCUDA's Boost.Python
instances do (``func.my_block = (128, 1, 1)``, a library's bookkeeping on a Context,
Stream or allocation), and the garbage collector still frees cycles made through
those attributes (``f.me = f``).

The CPU tests make the instances on the stand-in driver (tests/fakecuda.c) in a
child process; the GPU test carries the gpu marker."""

import textwrap

import pytest

from barecuda import driver as drv

from test_launch_fakedriver import c_compiler, build_fake_driver, run_with, toolkit_include

DICT_TYPES = ["Context", "Device", "Stream", "Event", "Module", "Function", "Linker", "Array",
              "ArrayDescriptor", "ArrayDescriptor3D", "DeviceAllocation", "HostAllocation",
              "PagelockedHostAllocation", "AlignedHostAllocation", "ManagedAllocation",
              "RegisteredHostMemory", "IPCMemoryHandle", "PooledDeviceAllocation",
              "PooledHostAllocation", "Memcpy2D", "Memcpy3D", "Memcpy3DPeer"]

# Makes each kind of instance; `ctx` is current.  Shared by the fake-driver and GPU tests.
MAKERS = textwrap.dedent("""
    import gc, weakref
    import numpy as np
    from barecuda import driver as drv, tools

    def ipc_handle(mem):
        try:
            return drv.mem_get_ipc_handle(mem)
        except drv.Error:                       # the stand-in's handle is the pointer
            import struct
            return struct.pack("<Q", int(mem)) + bytes(56)

    def makers(ctx, ptx, kernel, managed=True):
        desc = drv.ArrayDescriptor()
        desc.width, desc.height, desc.format = 4, 2, drv.array_format.FLOAT
        pool = tools.DeviceMemoryPool()
        hpool = tools.PageLockedMemoryPool()
        mem = drv.mem_alloc(256)
        out = {
            "Context": lambda: drv.Context.get_current(),
            "Device": lambda: drv.Device(0),
            "Stream": drv.Stream,
            "Event": drv.Event,
            "Module": lambda: drv.module_from_buffer(ptx),
            "Function": lambda: drv.module_from_buffer(ptx).get_function(kernel),
            "Linker": drv.Linker,
            "Array": lambda: drv.Array(desc),
            "ArrayDescriptor": drv.ArrayDescriptor,
            "ArrayDescriptor3D": drv.ArrayDescriptor3D,
            "DeviceAllocation": lambda: drv.mem_alloc(64),
            "HostAllocation": lambda: drv.pagelocked_empty(4, np.float32).base,
            "AlignedHostAllocation": lambda: drv.aligned_empty(4, np.float32).base,
            "RegisteredHostMemory": lambda: drv.register_host_memory(np.zeros(4096, np.uint8)).base,
            "IPCMemoryHandle": lambda: drv.IPCMemoryHandle(ipc_handle(mem)),
            "PooledDeviceAllocation": lambda: pool.allocate(64),
            "PooledHostAllocation": lambda: hpool.allocate((4,), np.float32).base,
            "Memcpy2D": drv.Memcpy2D,
            "Memcpy3D": drv.Memcpy3D,
            "Memcpy3DPeer": drv.Memcpy3DPeer,
        }
        if managed:
            out["ManagedAllocation"] = lambda: drv.managed_empty(
                4, np.float32, mem_flags=drv.mem_attach_flags.GLOBAL).base
        return out

    def check(name, make):
        obj = make()
        kind = getattr(drv, name, None)
        if kind is not None and name not in ("Context", "Device"):
            assert isinstance(obj, kind), (name, type(obj))
        obj.some_attr = 1
        assert obj.some_attr == 1 and obj.__dict__ == {"some_attr": 1}, name
        vars(obj)["other"] = 2
        assert obj.other == 2
        del obj.other
        # a cycle through the instance dict is collected
        obj.me = obj
        if name in ("Context", "Device"):   # shared wrappers: only drop the cycle
            del obj.me
            return
        obj.sentinel = Sentinel()               # weakly referenceable, unlike some types
        r = weakref.ref(obj.sentinel)
        del obj
        gc.collect()
        assert r() is None, name + " kept alive by a cycle through its __dict__"

    class Sentinel:
        pass
""")


@pytest.mark.parametrize("name", DICT_TYPES)
def test_driver_types_give_instances_a_dict(name):
    cls = getattr(drv, name)
    # a C type carries the slot itself; a Python class gets one from its body
    assert cls.__dictoffset__ != 0 or "__dict__" in dir(cls), name


@pytest.mark.parametrize("name", ["ArrayDescriptor", "ArrayDescriptor3D", "Memcpy2D", "Memcpy3D",
                                  "Memcpy3DPeer"])
def test_cpu_made_instances_take_attributes_and_cycles_are_collected(name):
    import gc
    import weakref
    obj = getattr(drv, name)()
    obj.tag = "x"
    assert obj.tag == "x" and obj.__dict__ == {"tag": "x"}
    obj.me = obj

    class Sentinel:
        pass

    obj.sentinel = Sentinel()
    r = weakref.ref(obj.sentinel)
    del obj
    gc.collect()
    assert r() is None


def test_subclass_dict_is_the_base_slot():
    class F(drv.Memcpy2D):
        pass

    f = F()
    f.a = 1
    assert f.__dict__ == {"a": 1} and F.__dictoffset__ == drv.Memcpy2D.__dictoffset__

    class S(drv.Memcpy2D):
        __slots__ = ("b",)

    s = S()
    s.b, s.c = 1, 2
    assert s.__dict__ == {"c": 2}


@pytest.mark.skipif(toolkit_include() is None or c_compiler() is None,
                    reason="needs a C compiler and a CUDA toolkit's cuda.h")
def test_every_driver_instance_takes_attributes_on_the_fake_driver(tmp_path):
    r = run_with(build_fake_driver(tmp_path), MAKERS + textwrap.dedent("""
        from barecuda.bench import launch as L
        drv.init()
        ctx = drv.Device(0).retain_primary_context()
        ctx.push()
        done = []
        for name, make in makers(ctx, L.kernel_ptx(), "empty4").items():
            try:
                make()
            except drv.Error as e:              # what the stand-in does not offer
                print("skipped", name, e)
                continue
            check(name, make)
            done.append(name)
        # launching still works after a Function got attributes
        f = drv.module_from_buffer(L.kernel_ptx()).get_function("empty4")
        f.my_block = (1, 1, 1)
        mem = drv.mem_alloc(256)
        f(*L.call_args(4, mem, mem), block=f.my_block)
        print("done", sorted(done))
        print("ok")
    """))
    assert r.returncode == 0 and "ok" in r.stdout, r.stdout + r.stderr
    done = r.stdout.split("done ", 1)[1]
    for name in ("Context", "Device", "Stream", "Event", "Module", "Function", "Array",
                 "DeviceAllocation", "HostAllocation", "PooledDeviceAllocation", "Memcpy2D",
                 "IPCMemoryHandle", "RegisteredHostMemory", "PooledHostAllocation"):
        assert repr(name) in done, (name, r.stdout)


@pytest.mark.gpu
def test_every_driver_instance_takes_attributes_on_the_gpu(ctx):
    ns = {}
    exec(MAKERS, ns)
    from barecuda.bench import launch as L
    for name, make in ns["makers"](ctx, L.kernel_ptx(), "empty4").items():
        if name == "IPCMemoryHandle":
            continue                            # a process cannot open its own handle
        ns["check"](name, make)


@pytest.mark.skipif(toolkit_include() is None or c_compiler() is None,
                    reason="needs a C compiler and a CUDA toolkit's cuda.h")
def test_pooled_allocations_are_sized_on_the_fake_driver(tmp_path):
    r = run_with(build_fake_driver(tmp_path), textwrap.dedent("""
        import collections.abc
        import numpy as np
        from barecuda import driver as drv, tools
        drv.init()
        ctx = drv.Device(0).retain_primary_context()
        ctx.push()
        d = tools.DeviceMemoryPool().allocate(100)
        assert len(d) == 100 and isinstance(d, collections.abc.Sized) and bool(d)
        assert bool(tools.DeviceMemoryPool().allocate(0))   # still true when empty
        h = tools.PageLockedMemoryPool().allocate((3, 5), np.float64).base
        assert len(h) == 120 and isinstance(h, collections.abc.Sized) and bool(h)
        print("ok")
    """))
    assert r.returncode == 0 and "ok" in r.stdout, r.stdout + r.stderr


# {{{ PyCUDA's parameter names (keyword callers)

def _params(fn):
    import inspect
    return list(inspect.signature(fn).parameters)


def test_pycuda_keyword_names():
    assert _params(drv.In.__init__)[1] == "ary" and _params(drv.Out.__init__)[1] == "ary"
    assert _params(drv.InOut.__init__)[1] == "ary"
    assert _params(drv.ArgumentHandler.__init__)[1] == "ary"
    for w in ("8", "16", "32"):
        assert _params(getattr(drv, "memset_d" + w))[:3] == ["dest", "data", "size"]
        assert _params(getattr(drv, f"memset_d{w}_async"))[:4] == ["dest", "data", "size",
                                                                   "stream"]
    assert _params(drv.module_from_file)[0] == "filename"
    assert _params(drv.module_from_buffer)[0] == "buffer"
    assert _params(drv.np_to_array)[:3] == ["nparray", "order", "allowSurfaceBind"]
    assert _params(drv.gpuarray_to_array)[:3] == ["gpuarray", "order", "allowSurfaceBind"]
    assert "allow_surface_bind" in _params(drv.np_to_array)


def test_in_out_take_ary_by_keyword():
    import numpy as np
    a = np.zeros(4, np.float32)
    assert drv.In(ary=a).array is a and drv.Out(ary=a).array is a and drv.InOut(ary=a).array is a
    assert drv.ArgumentHandler(ary=a).array is a


def test_module_from_file_and_buffer_keyword_names_reach_the_parser():
    # the keyword is accepted (the failure comes later, from the missing file or
    # the bad image, not from the argument parser)
    with pytest.raises(Exception) as e:
        drv.module_from_file(filename="/nonexistent/x.ptx")
    assert not isinstance(e.value, TypeError) or "keyword" not in str(e.value)
    with pytest.raises(Exception) as e:
        drv.module_from_buffer(buffer=42)
    assert "keyword" not in str(e.value)
    try:
        drv.memset_d8(dest=0, data=0, size=0)       # nothing to set
    except TypeError:
        raise
    except Exception:
        pass

# }}}


def test_compile_error_has_pycudas_attributes():
    e = drv.CompileError("nvcc was not found")
    assert e.msg == "nvcc was not found" and e.command_line is None
    assert e.stdout is None and e.stderr is None
    e.msg, e.stdout, e.stderr, e.command_line = "m", "out", "err", ["nvcc", "-c"]
    assert (e.msg, e.stdout, e.stderr, e.command_line) == ("m", "out", "err", ["nvcc", "-c"])
    assert drv.CompileError().msg == ""


def test_enum_members_under_pycudas_names():
    f = drv.jit_fallback
    assert f.PREFER_PTX == 0 and f.PREFER_BINARY == 1 and str(f.PREFER_PTX) == "PREFER_PTX"
    assert f.PTX is f.PREFER_PTX                      # our generated name stays an alias
    assert str(drv.ipc_mem_flags.LAZY_ENABLE_PEER_ACCESS) == "LAZY_ENABLE_PEER_ACCESS"
    assert drv.ipc_mem_flags.LAZY_ENABLE_PEER_ACCESS == 1
    a = drv.array3d_flags
    assert a.ARRAY3D_LAYERED is a.LAYERED and a.ARRAY3D_2DARRAY == a.LAYERED


def test_memcpy_memory_type_and_device_fields_without_a_gpu():
    import numpy as np
    for cls in (drv.Memcpy2D, drv.Memcpy3D, drv.Memcpy3DPeer):
        c = cls()
        assert c.src_device is None and c.dst_device is None
        c.src_memory_type = c.src_memory_type or 0          # unset: setting "unset" is a no-op
        c.set_src_host(np.zeros(16, np.uint8))
        assert c.src_memory_type == drv.memory_type.HOST and c.src_device is None
        c.src_memory_type = drv.memory_type.HOST             # the same type again
        with pytest.raises(ValueError, match="set_src_host/device/array/unified"):
            c.src_memory_type = drv.memory_type.DEVICE
        with pytest.raises(ValueError, match="dst_memory_type: this end is not set"):
            c.dst_memory_type = drv.memory_type.DEVICE


@pytest.mark.skipif(toolkit_include() is None or c_compiler() is None,
                    reason="needs a C compiler and a CUDA toolkit's cuda.h")
def test_memcpy_device_fields_on_the_fake_driver(tmp_path):
    r = run_with(build_fake_driver(tmp_path), textwrap.dedent("""
        import numpy as np
        from barecuda import driver as drv
        drv.init()
        ctx = drv.Device(0).retain_primary_context()
        ctx.push()
        mem = drv.mem_alloc(64)
        c = drv.Memcpy2D()
        c.src_device = mem                                  # set_src_device
        assert c.src_device == int(mem) and c.src_memory_type == drv.memory_type.DEVICE
        c.src_memory_type = drv.memory_type.UNIFIED
        assert c.src_memory_type == drv.memory_type.UNIFIED and c.src_device == int(mem)
        c.src_memory_type = drv.memory_type.DEVICE
        out = np.zeros(64, np.uint8)
        drv.memcpy_htod(mem, np.arange(64, dtype=np.uint8))
        c.set_dst_host(out)
        c.width_in_bytes, c.height = 64, 1
        c()
        assert (out == np.arange(64)).all()
        print("ok")
    """))
    assert r.returncode == 0 and "ok" in r.stdout, r.stdout + r.stderr


def test_pycuda_alias_and_abc_members():
    assert drv.ManagedAllocationOrStub is drv.ManagedAllocation
    assert callable(drv.HostPointer.get_device_pointer)


@pytest.mark.skipif(toolkit_include() is None or c_compiler() is None,
                    reason="needs a C compiler and a CUDA toolkit's cuda.h")
def test_host_allocation_get_flags_on_the_fake_driver(tmp_path):
    r = run_with(build_fake_driver(tmp_path), textwrap.dedent("""
        import numpy as np
        from barecuda import driver as drv
        drv.init()
        ctx = drv.Device(0).retain_primary_context()
        ctx.push()
        f = drv.host_alloc_flags.PORTABLE
        h = drv.pagelocked_empty(4, np.float32, mem_flags=f).base
        assert h.get_flags() == f == h.flags
        assert isinstance(h, drv.HostPointer)
        a = drv.aligned_empty(4, np.float32).base
        try:
            a.get_flags()
        except drv.LogicError as e:
            assert "not page-locked" in str(e)
        else:
            raise AssertionError("no LogicError")
        h.free()
        try:
            h.get_flags()
        except drv.LogicError:
            pass
        else:
            raise AssertionError("no LogicError after free")
        print("ok")
    """))
    assert r.returncode == 0 and "ok" in r.stdout, r.stdout + r.stderr


@pytest.mark.skipif(toolkit_include() is None or c_compiler() is None,
                    reason="needs a C compiler and a CUDA toolkit's cuda.h")
def test_context_attach_and_shared_config_on_the_fake_driver(tmp_path):
    r = run_with(build_fake_driver(tmp_path), textwrap.dedent("""
        from barecuda import driver as drv
        drv.init()
        try:
            drv.Context.attach()
        except drv.LogicError as e:
            assert "no context is current" in str(e), e
        else:
            raise AssertionError("attach() without a current context")
        ctx = drv.Device(0).retain_primary_context()
        ctx.push()
        assert drv.Context.attach() == ctx and drv.Context.attach(flags=0) == ctx
        for bad in ((1,), ("x",)):
            try:
                drv.Context.attach(*bad)
            except (TypeError, ValueError):
                pass
            else:
                raise AssertionError(bad)
        # the stand-in lacks the deprecated calls: a driver.Error naming each
        for call, args, name in ((drv.Context.get_shared_config, (), "cuCtxGetSharedMemConfig"),
                                 (drv.Context.set_shared_config,
                                  (drv.shared_config.FOUR_BYTE_BANK_SIZE,),
                                  "cuCtxSetSharedMemConfig")):
            try:
                call(*args)
            except drv.Error as e:
                assert name in str(e), e
            else:
                raise AssertionError(name)
        print("ok")
    """))
    assert r.returncode == 0 and "ok" in r.stdout, r.stdout + r.stderr


@pytest.mark.gpu
def test_shared_config_and_attach_on_the_gpu(ctx):
    assert drv.Context.attach() == ctx
    try:
        cfg = drv.Context.get_shared_config()
    except drv.Error as e:                      # a driver without the deprecated call
        assert "cuCtxGetSharedMemConfig" in str(e)
    else:
        assert cfg in list(drv.shared_config)
        drv.Context.set_shared_config(cfg)
