# SPDX-License-Identifier: MIT
"""Modules: loading PTX/CUBIN/fatbin, JIT options and logs, lookups, unloading."""

import numpy as np
import pytest

from barecuda import driver as drv

PTX = """
.version 8.0
.target sm_75
.address_size 64

.visible .global .align 4 .b8 table[16];

.visible .entry fill(.param .u64 out, .param .u32 value)
{
    .reg .b32 %r<3>;
    .reg .b64 %rd<5>;
    ld.param.u64 %rd1, [out];
    ld.param.u32 %r1, [value];
    cvta.to.global.u64 %rd2, %rd1;
    mov.u32 %r2, %tid.x;
    mul.wide.u32 %rd3, %r2, 4;
    add.s64 %rd4, %rd2, %rd3;
    st.global.u32 [%rd4], %r1;
    ret;
}
"""

BAD_PTX = ".version 8.0\n.target sm_75\n.address_size 64\n.visible .entry broken( { ret; }\n"


# ------------------------------------------------------------------ CPU

@pytest.mark.parametrize("data,exc,match", [
    (12, TypeError, "PTX text"),
    (b"", ValueError, "empty"),
    ("", ValueError, "empty"),
])
def test_module_from_buffer_bad_data(data, exc, match):
    with pytest.raises(exc, match=match):
        drv.module_from_buffer(data)


@pytest.mark.parametrize("options,exc,match", [
    (5, TypeError, "list of"),
    ([(1,)], TypeError, "jit_option, value"),
    ([("x", 1)], TypeError, "JIT option must be an int"),
    ([(10_000, 1)], ValueError, "JIT option"),
    ([(drv.jit_option.INFO_LOG_BUFFER, 0)], ValueError, "managed by barecuda"),
    ([(drv.jit_option.MAX_REGISTERS, "x")], TypeError, "JIT option value"),
])
def test_module_from_buffer_bad_options(options, exc, match):
    with pytest.raises(exc, match=match):
        drv.module_from_buffer(PTX, options=options)


def test_module_from_buffer_bad_handler():
    with pytest.raises(TypeError, match="message_handler must be callable"):
        drv.module_from_buffer(PTX, message_handler=3)


def test_module_from_file_missing(tmp_path):
    with pytest.raises(FileNotFoundError):
        drv.module_from_file(str(tmp_path / "nope.ptx"))
    empty = tmp_path / "empty.ptx"
    empty.write_bytes(b"")
    with pytest.raises(ValueError, match="empty"):
        drv.module_from_file(empty)


# ------------------------------------------------------------------ GPU

def _run_fill(mod, value=7, n=32):
    f = mod.get_function("fill")
    d = drv.mem_alloc(4 * n)
    f(d, np.int32(value), block=(n, 1, 1))
    got = np.zeros(n, np.int32)
    drv.memcpy_dtoh(got, d)
    return got


@pytest.mark.gpu
@pytest.mark.parametrize("as_bytes", [False, True])
def test_load_ptx_and_run(ctx, as_bytes):
    mod = drv.module_from_buffer(PTX.encode() if as_bytes else PTX)
    assert isinstance(mod, drv.Module)
    assert (_run_fill(mod, 11) == 11).all()
    assert mod.context == ctx


@pytest.mark.gpu
def test_message_handler_and_options(ctx):
    seen = []
    mod = drv.module_from_buffer(
        PTX, options=[(drv.jit_option.MAX_REGISTERS, 32), (drv.jit_option.LOG_VERBOSE, 1)],
        message_handler=lambda ok, info, err: seen.append((ok, info, err)))
    assert len(seen) == 1
    ok, info, err = seen[0]
    assert ok is True and isinstance(info, str) and isinstance(err, str)
    assert (_run_fill(mod) == 7).all()


@pytest.mark.gpu
def test_bad_ptx_error_has_log(ctx):
    with pytest.raises(drv.Error, match="cuModuleLoadDataEx failed") as info:
        drv.module_from_buffer(BAD_PTX)
    assert "JIT error log" in str(info.value)
    assert info.value.log


@pytest.mark.gpu
def test_cubin_and_file(ctx, tmp_path):
    from barecuda import compiler
    dev = drv.Context.get_device()
    major, minor = dev.compute_capability()
    cubin = compiler.compile("__global__ void fill(int *o, int v) { o[threadIdx.x] = v; }",
                             arch=f"sm_{major}{minor}")
    mod = drv.module_from_buffer(cubin)
    assert (_run_fill(mod, 3) == 3).all()
    path = tmp_path / "k.cubin"
    path.write_bytes(cubin)
    assert (_run_fill(drv.module_from_file(str(path)), 4) == 4).all()
    ptx_path = tmp_path / "k.ptx"
    ptx_path.write_text(PTX)
    assert (_run_fill(drv.module_from_file(ptx_path), 5) == 5).all()


@pytest.mark.gpu
def test_missing_names_are_logic_errors(ctx):
    mod = drv.module_from_buffer(PTX)
    with pytest.raises(drv.LogicError, match="no function named 'nope'"):
        mod.get_function("nope")
    with pytest.raises(drv.LogicError, match="no global named 'nope'"):
        mod.get_global("nope")
    with pytest.raises(TypeError, match="name must be a str"):
        mod.get_function(3)


@pytest.mark.gpu
def test_get_global(ctx, rng):
    mod = drv.module_from_buffer(PTX)
    ptr, size = mod.get_global("table")
    assert size == 16
    assert int(ptr) != 0 and ptr.size == 16 and ptr.module is mod
    vals = rng.integers(0, 1000, 4).astype(np.int32)
    drv.memcpy_htod(ptr, vals)
    back = np.zeros(4, np.int32)
    drv.memcpy_dtoh(back, ptr)
    np.testing.assert_array_equal(back, vals)
    # as a kernel argument: fill the global itself
    mod.get_function("fill")(ptr, np.int32(9), block=(4, 1, 1))
    drv.memcpy_dtoh(back, ptr)
    assert (back == 9).all()


@pytest.mark.gpu
def test_unload_idempotent_and_use_after(ctx):
    mod = drv.module_from_buffer(PTX)
    f = mod.get_function("fill")
    ptr, _ = mod.get_global("table")
    mod.unload()
    mod.unload()
    mod.close()
    assert mod.handle == 0
    with pytest.raises(drv.LogicError, match="unloaded"):
        mod.get_function("fill")
    with pytest.raises(drv.LogicError, match="unloaded"):
        f(ptr, np.int32(1), block=(1, 1, 1))
    with pytest.raises(drv.LogicError, match="unloaded"):
        int(ptr)


@pytest.mark.gpu
def test_module_context_manager(ctx):
    with drv.module_from_buffer(PTX) as mod:
        assert (_run_fill(mod, 1) == 1).all()
    assert mod.handle == 0
