# SPDX-License-Identifier: MIT
"""``python -m barecuda``: report NVRTC, the kernel cache, the driver and devices,
then run a self-test: compile a kernel with NVRTC, launch it on random data and
check the result against NumPy.

The exit status is 0 only when the kernel ran on a GPU and matched NumPy.
Without a GPU (no driver, or no device) the kernel is still compiled, for the
newest architecture NVRTC supports, the report says why it cannot be run, and
the exit status is 2 (NO_GPU).  It is 1 when something failed: NVRTC cannot be
loaded or compiled the kernel wrongly, or the kernel ran and gave a wrong answer.
"""

import sys

OK, FAILED, NO_GPU = 0, 1, 2

SELF_TEST = r"""
#include <barecuda_helpers.cuh>
__global__ void axpb(float *y, const float *x, float a, float b, long long n)
{
    BC_GRID_STRIDE_LOOP(i, n)
        y[i] = a * x[i] + b;
}
"""


def _report_devices(drv, out):
    out.write(f"CUDA driver: {drv.loader_info()['libcuda']} "
              f"(supports CUDA {_fmt(drv.get_driver_version())}; "
              f"barecuda built with CUDA {_fmt(drv.CUDA_VERSION)} headers)\n")
    try:
        major, minor = drv.nvrtc_version()
    except drv.Error:
        major = minor = 0          # reported with the self-test
    driver = drv.get_driver_version()
    if major * 1000 + minor * 10 > driver:
        out.write(f"note: NVRTC {major}.{minor} is newer than the driver: CUBIN for the "
                  "device loads, PTX and relocatable device code do not; for those, "
                  f"pip install 'nvidia-cuda-nvrtc=={_fmt(driver)}.*' or update the driver\n")
    n = drv.Device.count()
    out.write(f"{n} device{'s' if n != 1 else ''}\n")
    for i in range(n):
        d = drv.Device(i)
        major, minor = d.compute_capability()
        out.write(
            f"  [{i}] {d.name()}  sm_{major}{minor}  {d.total_memory() / 2**30:.1f} GiB  "
            f"{d.multiprocessor_count} SMs  {d.clock_rate / 1000:.0f} MHz core, "
            f"{d.memory_clock_rate / 1000:.0f} MHz memory  PCI {d.pci_bus_id()}\n")
    return n


def _fmt(v):
    return f"{v // 1000}.{v % 1000 // 10}"


def _run_kernel(drv, compiler, out):
    """Compile, launch and check the self-test kernel on device 0; True when right."""
    import numpy as np

    mod = compiler.SourceModule(SELF_TEST)
    out.write(f"compiled the self-test kernel for {mod.arch} "
              f"({'CUBIN' if mod.cubin is not None else 'PTX'}, "
              f"{len(mod.cubin if mod.cubin is not None else mod.ptx)} bytes)\n")
    fn = mod.get_function("axpb")
    rng = np.random.default_rng()
    n = 1 << 20
    x = rng.standard_normal(n).astype(np.float32)
    a, b = np.float32(rng.uniform(-2, 2)), np.float32(rng.uniform(-2, 2))
    x_gpu = drv.mem_alloc(x.nbytes)
    y_gpu = drv.mem_alloc(x.nbytes)
    try:
        drv.memcpy_htod(x_gpu, x)
        fn(y_gpu, x_gpu, a, b, np.int64(n), block=(256, 1, 1), grid=(256, 1))
        y = np.empty_like(x)
        drv.memcpy_dtoh(y, y_gpu)
    finally:
        x_gpu.free()
        y_gpu.free()
    expected = a * x + b
    if not np.allclose(y, expected, rtol=1e-5, atol=1e-6):
        bad = int(np.sum(~np.isclose(y, expected, rtol=1e-5, atol=1e-6)))
        out.write(f"FAILED: the self-test kernel gave {bad} wrong values of {n}\n")
        return False
    out.write(f"launched it on {n} random floats: matches NumPy: OK\n")
    return True


def main(argv=None, out=sys.stdout):
    from barecuda import driver as drv

    out.write("barecuda self-test\n")
    try:
        from barecuda import compiler
        major, minor = drv.nvrtc_version()
    except drv.Error as exc:
        out.write(f"FAILED: NVRTC could not be loaded: {exc}\n")
        return FAILED
    info = drv.loader_info()
    out.write(f"NVRTC {major}.{minor}: {info['libnvrtc']}\n")
    builtins = info.get("libnvrtc_builtins")
    out.write(f"NVRTC builtins: {builtins}\n" if builtins else
              "NVRTC builtins: none beside libnvrtc (NVRTC looks for "
              f"libnvrtc-builtins.so.{major}.{minor} itself)\n")
    dirs = compiler._toolkit_include_dirs()
    out.write("CUDA headers: " + (", ".join(dirs) if dirs else
                                  "none found (kernels can include barecuda's own only)")
              + "\n")
    if dirs and compiler._find_header(compiler.CCCL_MARKER, dirs) is None:
        out.write("CCCL: not found beside those headers, so curandom and kernels that "
                  "include <cuda/std/...>, <cub/...>, <thrust/...> or <nv/target> cannot "
                  "compile: " + compiler._cccl_install_advice() + "\n")
    out.write(f"kernel cache: {compiler.get_cache_dir() or 'off'}\n")

    try:
        drv.init()
        n = _report_devices(drv, out)
        if n == 0:
            raise drv.Error("the CUDA driver reports no device")
    except drv.Error as exc:
        out.write(f"no GPU: {exc}\n")
        try:
            arch = f"sm_{compiler._supported_archs()[-1]}"
            image = compiler.compile(SELF_TEST, arch=arch)
        except drv.Error as exc2:
            out.write(f"FAILED: NVRTC could not compile the self-test kernel: {exc2}\n")
            return FAILED
        if not image.startswith(b"\x7fELF"):
            out.write(f"FAILED: NVRTC returned {len(image)} bytes that are not a CUBIN\n")
            return FAILED
        out.write(f"no GPU: compiled the self-test kernel for {arch} with NVRTC "
                  f"{major}.{minor} ({len(image)} bytes of CUBIN) but cannot run it\n")
        out.write(f"NOT RUN: the self-test kernel needs a GPU; exit status {NO_GPU}\n")
        return NO_GPU

    try:
        ok = _run_kernel(drv, compiler, out)
    except (drv.Error, AttributeError) as exc:
        out.write(f"FAILED: {type(exc).__name__}: {exc}\n")
        return FAILED
    return OK if ok else FAILED


if __name__ == "__main__":
    sys.exit(main())
