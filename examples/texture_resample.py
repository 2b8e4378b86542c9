# SPDX-License-Identifier: MIT
"""Rotate and rescale an image on the GPU with a texture object (bilinear filtering).

The image goes into a CUDA array with ``np_to_array``; a ``TextureObject`` with
linear filtering, normalized coordinates and a black border samples it in a
kernel taking a ``cudaTextureObject_t``.  The result is checked against a NumPy
bilinear reference (CUDA interpolates with 9-bit fixed-point weights, so the two
agree to about 1e-3 of the value range) and the maximum error is printed.

Run: python examples/texture_resample.py [angle_degrees] [scale]
Exit status 0 when the result matches.  Writes no files.
"""

import math
import sys
from typing import Any

import numpy as np
import numpy.typing as npt

import barecuda.autoinit  # noqa: F401  (makes a context current)
from barecuda import driver as drv
from barecuda.compiler import SourceModule

KERNEL = r"""
__global__ void rotate(float *out, cudaTextureObject_t tex, int w, int h,
                       float c, float s, float inv_scale)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= w || y >= h)
        return;
    /* Output pixel centre -> source position (rotation and scale about the centre). */
    float cx = 0.5f * w, cy = 0.5f * h;
    float dx = (x + 0.5f - cx) * inv_scale, dy = (y + 0.5f - cy) * inv_scale;
    float u = c * dx + s * dy + cx;
    float v = -s * dx + c * dy + cy;
    out[y * w + x] = tex2D<float>(tex, u / w, v / h);
}
"""


def test_image(h: int, w: int, seed: int = 7) -> npt.NDArray[Any]:
    """A smooth pattern with some noise, values in [0, 1]."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float64)
    img = 0.5 + 0.25 * np.sin(xx / 9.0) * np.cos(yy / 13.0) + 0.15 * (xx / w - yy / h)
    img += 0.1 * rng.random((h, w))
    out: npt.NDArray[Any] = np.clip(img, 0.0, 1.0).astype(np.float32)
    return out


def bilinear_border(img: npt.NDArray[Any], u: npt.NDArray[Any], v: npt.NDArray[Any]) -> npt.NDArray[Any]:
    """Bilinear sample of img at texel coordinates (u, v) with zeros outside."""
    padded = np.pad(img.astype(np.float64), 1)
    x, y = u - 0.5 + 1.0, v - 0.5 + 1.0  # into the padded image's index space
    i, j = np.floor(x).astype(np.int64), np.floor(y).astype(np.int64)
    a, b = x - i, y - j
    ph, pw = padded.shape

    def at(jj: npt.NDArray[Any], ii: npt.NDArray[Any]) -> npt.NDArray[Any]:
        picked: npt.NDArray[Any] = padded[np.clip(jj, 0, ph - 1), np.clip(ii, 0, pw - 1)]
        return picked

    out: npt.NDArray[Any] = ((1 - a) * (1 - b) * at(j, i) + a * (1 - b) * at(j, i + 1)
                             + (1 - a) * b * at(j + 1, i) + a * b * at(j + 1, i + 1))
    return out


def reference(img: npt.NDArray[Any], c: float, s: float, inv_scale: float) -> npt.NDArray[Any]:
    h, w = img.shape
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float64)
    dx = (xx + 0.5 - 0.5 * w) * inv_scale
    dy = (yy + 0.5 - 0.5 * h) * inv_scale
    u = c * dx + s * dy + 0.5 * w
    v = -s * dx + c * dy + 0.5 * h
    return bilinear_border(img, u, v)


def main(argv: list[str]) -> int:
    angle = float(argv[1]) if len(argv) > 1 else 30.0
    scale = float(argv[2]) if len(argv) > 2 else 1.25
    h, w = 240, 320
    img = test_image(h, w)

    ary = drv.np_to_array(img)
    tex = drv.TextureObject(ary, filter_mode=drv.filter_mode.LINEAR, normalized_coords=True,
                            address_mode=drv.address_mode.BORDER, border_color=(0, 0, 0, 0))
    rotate = SourceModule(KERNEL).get_function("rotate")

    c, s = math.cos(math.radians(angle)), math.sin(math.radians(angle))
    out = drv.mem_alloc(img.nbytes)
    block = (32, 8, 1)
    grid = ((w + block[0] - 1) // block[0], (h + block[1] - 1) // block[1])
    rotate(out, tex, np.int32(w), np.int32(h), np.float32(c), np.float32(s),
           np.float32(1.0 / scale), block=block, grid=grid)
    result = np.empty_like(img)
    drv.memcpy_dtoh(result, out)

    expect = reference(img, c, s, 1.0 / scale)
    err = float(np.abs(result - expect).max())
    print(f"rotated a {w}x{h} image by {angle:g} degrees, scale {scale:g}: "
          f"max |GPU - NumPy bilinear| = {err:.2e}")
    tex.close()
    ary.free()
    out.free()
    if not np.isfinite(err) or err > 1e-2:
        print("MISMATCH: the texture result differs from the NumPy reference", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
