# SPDX-License-Identifier: MIT
"""Host-to-device bandwidth: page-locked (pinned) against ordinary (pageable) memory.

Teaches: the GPU's copy engines can only read host memory that the operating
system promises not to move, i.e. page-locked memory.  From an ordinary NumPy
array the driver first copies through a pinned staging buffer, which costs
bandwidth.  ``cuda.pagelocked_empty`` allocates pinned memory directly.  The
copies are timed with CUDA events, the bandwidths printed (not checked: they
depend on the machine), and the copied data is checked after every transfer.

Run: python examples/pinned_vs_pageable.py [MiB]
Exit status 0 when every copy arrived intact.
"""

import sys
from collections.abc import Callable

import numpy as np

import barecuda.autoinit  # noqa: F401
import barecuda.driver as cuda


def bandwidth(copy: Callable[[], None], nbytes: int, repeats: int = 10) -> float:
    """GB/s of `copy()`, timed on the GPU with events around `repeats` calls."""
    copy()                                   # warm up
    start, stop = cuda.Event(), cuda.Event()
    start.record()
    for _ in range(repeats):
        copy()
    stop.record()
    stop.synchronize()
    return nbytes * repeats / (start.time_till(stop) * 1e-3) / 1e9


def main(argv: list[str]) -> int:
    mib = int(argv[1]) if len(argv) > 1 else 64
    n = mib * (1 << 20) // 4
    data = np.random.default_rng(6).random(n, dtype=np.float32)

    pageable = data.copy()                                   # ordinary NumPy memory
    pinned = cuda.pagelocked_empty(n, np.float32)            # page-locked memory
    pinned[:] = data
    back_pageable = np.empty_like(data)
    back_pinned = cuda.pagelocked_empty(n, np.float32)
    dev = cuda.mem_alloc(data.nbytes)

    results = {}
    ok = True
    for label, up, down in (("pageable", pageable, back_pageable),
                            ("pinned", pinned, back_pinned)):
        h2d = bandwidth(lambda: cuda.memcpy_htod(dev, up), data.nbytes)
        d2h = bandwidth(lambda: cuda.memcpy_dtoh(down, dev), data.nbytes)
        results[label] = h2d
        intact = np.array_equal(down, data)
        ok &= intact
        print(f"{label:9s} host->device {h2d:6.1f} GB/s   device->host {d2h:6.1f} GB/s   "
              f"data {'intact' if intact else 'CORRUPTED'}")
    dev.free()
    print(f"pinned / pageable upload speed: {results['pinned'] / results['pageable']:.1f}x "
          "(not checked)")
    if not ok:
        print("MISMATCH: a copy did not bring back the data that was sent", file=sys.stderr)
        return 1
    print(f"OK: {mib} MiB copied both ways from pageable and pinned memory")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
