# SPDX-License-Identifier: MIT
"""``python -m barecuda``: report the driver and devices, then run a self-test.

Exit status 0 when every step that this machine can run passed; 1 when no driver
could be loaded (the message says what was searched) or a step failed.
"""

import sys


def _report_devices(drv, out):
    out.write(f"CUDA driver: {drv.loader_info()['libcuda']} "
              f"(supports CUDA {_fmt(drv.get_driver_version())}; "
              f"barecuda built with CUDA {_fmt(drv.CUDA_VERSION)} headers)\n")
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


def main(argv=None, out=sys.stdout):
    from barecuda import driver as drv

    out.write("barecuda self-test\n")
    try:
        drv.init()
    except drv.Error as exc:
        out.write(f"no GPU: {exc}\n")
        return 1
    try:
        _report_devices(drv, out)
    except drv.Error as exc:
        out.write(f"FAILED: {exc}\n")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
