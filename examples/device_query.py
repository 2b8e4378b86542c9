# SPDX-License-Identifier: MIT
"""Ask the driver what GPUs there are and what they can do.

Teaches: enumerating devices with ``Device.count()``, reading a device's name,
compute capability and memory, and the device attributes that shape how
kernels are written (multiprocessors, warp size, threads per block, shared
memory per block, L2 cache ...) with ``get_attributes()`` and the lower-case
shortcuts such as ``dev.multiprocessor_count``.

Run: python examples/device_query.py
Exit status 0 when the numbers are self-consistent (each value read two ways agrees).
"""

import sys

import barecuda.driver as cuda

# A few attributes worth knowing when you write kernels.
INTERESTING = [
    "MULTIPROCESSOR_COUNT", "WARP_SIZE", "MAX_THREADS_PER_BLOCK", "MAX_BLOCK_DIM_X",
    "MAX_GRID_DIM_X", "MAX_SHARED_MEMORY_PER_BLOCK", "MAX_SHARED_MEMORY_PER_MULTIPROCESSOR",
    "MAX_REGISTERS_PER_BLOCK", "L2_CACHE_SIZE", "CLOCK_RATE", "MEMORY_CLOCK_RATE",
    "GLOBAL_MEMORY_BUS_WIDTH", "CONCURRENT_KERNELS", "ASYNC_ENGINE_COUNT",
    "UNIFIED_ADDRESSING",
]


def main() -> int:
    cuda.init()                  # no context is needed just to query devices
    n = cuda.Device.count()
    print(f"{n} CUDA device(s), driver API version {cuda.get_driver_version()}")
    if n == 0:
        print("MISMATCH: no CUDA device found", file=sys.stderr)
        return 1
    problems = []
    for ordinal in range(n):
        dev = cuda.Device(ordinal)
        major, minor = dev.compute_capability()
        print(f"device {ordinal}: {dev.name()}  sm_{major}{minor}  "
              f"{dev.total_memory() / 2**30:.1f} GiB  PCI {dev.pci_bus_id()}")
        attrs = dev.get_attributes()           # {device_attribute: value}
        for name in INTERESTING:
            attr = getattr(cuda.device_attribute, name)
            if attr in attrs:
                print(f"    {name.lower():40s} {attrs[attr]}")
        # Three ways to read one attribute must agree.
        sms = attrs[cuda.device_attribute.MULTIPROCESSOR_COUNT]
        if not (sms == dev.multiprocessor_count
                == dev.get_attribute(cuda.device_attribute.MULTIPROCESSOR_COUNT)):
            problems.append(f"device {ordinal}: multiprocessor counts disagree")
        if attrs[cuda.device_attribute.WARP_SIZE] != 32:
            problems.append(f"device {ordinal}: unexpected warp size")
        if attrs[cuda.device_attribute.COMPUTE_CAPABILITY_MAJOR] != major:
            problems.append(f"device {ordinal}: compute capability disagrees")
    if problems:
        print("MISMATCH: " + "; ".join(problems), file=sys.stderr)
        return 1
    print(f"OK: queried {n} device(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
