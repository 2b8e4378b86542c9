# SPDX-License-Identifier: MIT
"""The Mandelbrot set computed on the GPU and saved as a PNG image.

Teaches: an "embarrassingly parallel" 2D kernel where every pixel's work is
independent but uneven (points inside the set iterate to the limit, points far
outside stop at once), mapping pixel coordinates to the complex plane, and
getting an image out.  The escape counts of a sample of pixels are checked
against a NumPy implementation of the same iteration; the PNG is written with
a tiny encoder using only ``zlib`` and ``struct`` from the standard library.

Run: python examples/mandelbrot_png.py [output.png]
(default: mandelbrot.png in a new temporary directory).  Exit status 0 when
the sampled pixels agree with NumPy.
"""

import os
import struct
import sys
import tempfile
import zlib
from typing import Any

import numpy as np
import numpy.typing as npt

import barecuda.autoinit  # noqa: F401
from barecuda import gpuarray
from barecuda.compiler import SourceModule

MAX_ITER = 256
OPTIONS = ["--fmad=false"]
KERNEL = r"""
__global__ void mandelbrot(int *count, int w, int h, double x0, double y0, double step,
                           int max_iter)
{
    int px = blockIdx.x * blockDim.x + threadIdx.x;
    int py = blockIdx.y * blockDim.y + threadIdx.y;
    if (px >= w || py >= h) return;
    double cr = x0 + px * step, ci = y0 + py * step;   /* this pixel's point c */
    double zr = 0.0, zi = 0.0;
    int k = 0;
    /* z <- z^2 + c until |z| > 2 (escaped) or max_iter steps (inside the set). */
    while (k < max_iter && zr * zr + zi * zi <= 4.0) {
        double t = zr * zr - zi * zi + cr;
        zi = 2.0 * zr * zi + ci;
        zr = t;
        ++k;
    }
    count[py * w + px] = k;
}
"""


def numpy_counts(cr: npt.NDArray[Any], ci: npt.NDArray[Any], max_iter: int) -> npt.NDArray[Any]:
    """The same iteration for arrays of points, in NumPy."""
    c = cr + 1j * ci
    z = np.zeros_like(c)
    k = np.zeros(c.shape, np.int32)
    for _ in range(max_iter):
        active = (z.real * z.real + z.imag * z.imag) <= 4.0
        if not active.any():
            break
        t = z.real * z.real - z.imag * z.imag + c.real
        zi = 2.0 * z.real * z.imag + c.imag
        z = np.where(active, t + 1j * zi, z)
        k += active
    return k


def write_png(path: str, rgb: npt.NDArray[Any]) -> None:
    """Write an 8-bit RGB image (h x w x 3 uint8) as a PNG file."""
    h, w, _ = rgb.shape

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    # Each row starts with filter type 0 (none); then the pixels, all deflated.
    raw = b"".join(b"\x00" + rgb[y].tobytes() for y in range(h))
    png = (b"\x89PNG\r\n\x1a\n"
           + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
           + chunk(b"IDAT", zlib.compress(raw, 6)) + chunk(b"IEND", b""))
    with open(path, "wb") as f:
        f.write(png)


def main(argv: list[str]) -> int:
    path = argv[1] if len(argv) > 1 else os.path.join(tempfile.mkdtemp(), "mandelbrot.png")
    w, h = 900, 600
    x0, y0, step = -2.25, -1.0, 3.0 / w          # the view: [-2.25, 0.75] x [-1, 1]

    # --fmad=false: no fused multiply-adds, so the GPU rounds exactly as NumPy does.
    mandel = SourceModule(KERNEL, options=OPTIONS).get_function("mandelbrot")
    count_gpu = gpuarray.empty((h, w), np.int32)
    mandel(count_gpu, np.int32(w), np.int32(h), np.float64(x0), np.float64(y0),
           np.float64(step), np.int32(MAX_ITER), block=(32, 8, 1), grid=((w + 31) // 32, (h + 7) // 8))
    count = count_gpu.get()

    # Check a random sample of 2000 pixels against NumPy (same doubles, same order of operations).
    rng = np.random.default_rng(10)
    ys, xs = rng.integers(0, h, 2000), rng.integers(0, w, 2000)
    want = numpy_counts(x0 + xs * step, y0 + ys * step, MAX_ITER)
    bad = np.flatnonzero(count[ys, xs] != want)
    # Allow a few anyway: a boundary point is the first to differ should the rounding ever change.
    if len(bad) > 5:
        i = bad[0]
        print(f"MISMATCH: {len(bad)} of 2000 sampled pixels differ, e.g. ({ys[i]}, {xs[i]}): "
              f"GPU {count[ys[i], xs[i]]}, NumPy {want[i]}", file=sys.stderr)
        return 1

    # Colour: black inside the set, a blue-orange ramp by escape time outside.
    t = np.sqrt(count / MAX_ITER)
    rgb = np.stack([255 * t, 255 * t ** 2, 255 * (1 - t) * (count > 1)], axis=-1)
    rgb[count == MAX_ITER] = 0
    write_png(path, rgb.astype(np.uint8))
    inside = float((count == MAX_ITER).mean())
    print(f"{100 * inside:.1f}% of the pixels are in the set; image written to {path}")
    print(f"OK: Mandelbrot {w}x{h} agrees with NumPy on {2000 - len(bad)}/2000 sampled pixels")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
