# SPDX-License-Identifier: MIT
"""Texture objects and surface objects.

CPU tests: option validation that fails before the driver (on linear/pitched
memory given as int pointers).  GPU tests: kernels sample textures and are
compared with NumPy references (bilinear and trilinear filtering use exact
weights; CUDA's 9-bit fixed-point weights stay within ~1e-2 of them), every
address mode, integer data read as normalized floats, layered and 3D textures,
multichannel (float2/float4) data, surface writes read back, and the lifetime
rules (a texture keeps its array; Array.free() is a LogicError while it is open).
"""

import gc
import inspect
import pathlib
import subprocess
import sys
import weakref

import numpy as np
import pytest

from barecuda import driver as drv

AF = drv.array_format
FL = drv.array3d_flags

KERNELS = r"""
__global__ void sample1d(float *out, cudaTextureObject_t t, const float *xs, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = tex1D<float>(t, xs[i]);
}
__global__ void fetch1d(float *out, cudaTextureObject_t t, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = tex1Dfetch<float>(t, i);
}
__global__ void fetch1d_int(int *out, cudaTextureObject_t t, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = tex1Dfetch<int>(t, i);
}
__global__ void sample2d(float *out, cudaTextureObject_t t, const float *xs, const float *ys,
                         int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = tex2D<float>(t, xs[i], ys[i]);
}
__global__ void sample2d_int(int *out, cudaTextureObject_t t, const float *xs, const float *ys,
                             int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = tex2D<int>(t, xs[i], ys[i]);
}
__global__ void sample2d_f2(float2 *out, cudaTextureObject_t t, const float *xs,
                            const float *ys, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = tex2D<float2>(t, xs[i], ys[i]);
}
__global__ void sample2d_f4(float4 *out, cudaTextureObject_t t, const float *xs,
                            const float *ys, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = tex2D<float4>(t, xs[i], ys[i]);
}
__global__ void sample3d(float *out, cudaTextureObject_t t, const float *xs, const float *ys,
                         const float *zs, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = tex3D<float>(t, xs[i], ys[i], zs[i]);
}
__global__ void sample1d_layered(float *out, cudaTextureObject_t t, const float *xs,
                                 const int *layers, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = tex1DLayered<float>(t, xs[i], layers[i]);
}
__global__ void sample2d_layered(float *out, cudaTextureObject_t t, const float *xs,
                                 const float *ys, const int *layers, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = tex2DLayered<float>(t, xs[i], ys[i], layers[i]);
}
__global__ void surf_write2d(cudaSurfaceObject_t s, const float *src, int w, int h)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y;
    if (x < w && y < h) surf2Dwrite(src[y * w + x] * 2.0f + 1.0f, s, x * (int)sizeof(float), y);
}
__global__ void surf_read2d(float *out, cudaSurfaceObject_t s, int w, int h)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y;
    if (x < w && y < h) { float v; surf2Dread(&v, s, x * (int)sizeof(float), y); out[y * w + x] = v; }
}
__global__ void surf_write2d_f4(cudaSurfaceObject_t s, const float4 *src, int w, int h)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y;
    if (x < w && y < h) {
        float4 v = src[y * w + x];
        surf2Dwrite(make_float4(v.w, v.z, v.y, v.x), s, x * (int)sizeof(float4), y);
    }
}
__global__ void surf_write3d_u8(cudaSurfaceObject_t s, const unsigned char *src, int w, int h,
                                int d)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y, z = blockIdx.z;
    if (x < w && y < h && z < d)
        surf3Dwrite((unsigned char)(255 - src[(z * h + y) * w + x]), s, x, y, z);
}
__global__ void surf_write2d_layered(cudaSurfaceObject_t s, const float *src, int w, int h,
                                     int layers)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y, l = blockIdx.z;
    if (x < w && y < h && l < layers)
        surf2DLayeredwrite(-src[(l * h + y) * w + x], s, x * (int)sizeof(float), y, l);
}
"""

BLOCK = 128


# ------------------------------------------------------------------ references

def _at(img, idx):
    """img[idx...] with indices clamped to the edges (CLAMP addressing)."""
    clamped = tuple(np.clip(i, 0, n - 1) for i, n in zip(idx, img.shape))
    return img[clamped]


def bilinear(img, x, y):
    """CUDA's tex2D linear filtering in unnormalized coordinates, CLAMP addressing.
    img is (h, w) or (h, w, c); exact weights."""
    xb, yb = np.asarray(x, np.float64) - 0.5, np.asarray(y, np.float64) - 0.5
    i, j = np.floor(xb).astype(np.int64), np.floor(yb).astype(np.int64)
    a, b = xb - i, yb - j
    if img.ndim == 3:
        a, b = a[:, None], b[:, None]
    return ((1 - a) * (1 - b) * _at(img, (j, i)) + a * (1 - b) * _at(img, (j, i + 1))
            + (1 - a) * b * _at(img, (j + 1, i)) + a * b * _at(img, (j + 1, i + 1)))


def trilinear(vol, x, y, z):
    xb, yb, zb = (np.asarray(v, np.float64) - 0.5 for v in (x, y, z))
    i, j, k = (np.floor(v).astype(np.int64) for v in (xb, yb, zb))
    a, b, c = xb - i, yb - j, zb - k
    out = 0.0
    for dk, wk in ((0, 1 - c), (1, c)):
        for dj, wj in ((0, 1 - b), (1, b)):
            for di, wi in ((0, 1 - a), (1, a)):
                out = out + wk * wj * wi * _at(vol, (k + dk, j + dj, i + di))
    return out


def linear1d(v, x):
    xb = np.asarray(x, np.float64) - 0.5
    i = np.floor(xb).astype(np.int64)
    a = xb - i
    return (1 - a) * _at(v, (i,)) + a * _at(v, (i + 1,))


def address(k, n, mode):
    """Texel index for integer texel k (a texel centre) under address mode; -1: border."""
    k = np.asarray(k)
    if mode == "clamp":
        return np.clip(k, 0, n - 1)
    if mode == "wrap":
        return np.mod(k, n)
    if mode == "mirror":
        m = np.mod(k, 2 * n)
        return np.where(m < n, m, 2 * n - 1 - m)
    return np.where((k >= 0) & (k < n), k, -1)


# ------------------------------------------------------------------ helpers

def aligned_dev(ctx, a):
    """(keep-alive allocation, pointer) of a copy of `a` at TEXTURE_ALIGNMENT; the pointer
    is the allocation itself when mem_alloc already aligns that much."""
    align = ctx.device.get_attribute(drv.device_attribute.TEXTURE_ALIGNMENT)
    a = np.ascontiguousarray(a)
    mem = drv.mem_alloc(a.nbytes + align)
    off = (-int(mem)) % align
    drv.memcpy_htod(int(mem) + off, a)
    return mem, (mem if off == 0 else int(mem) + off)


def to_dev(a):
    a = np.ascontiguousarray(a)
    mem = drv.mem_alloc(max(a.nbytes, 1))
    drv.memcpy_htod(mem, a)
    return mem


def launch(func, n, *args, shape=(), dtype=np.float32):
    out_host = np.empty((n,) + shape, dtype)
    out = drv.mem_alloc(out_host.nbytes)
    func(out, *args, np.int32(n), block=(BLOCK, 1, 1), grid=((n + BLOCK - 1) // BLOCK, 1))
    drv.memcpy_dtoh(out_host, out)
    return out_host


@pytest.fixture
def mod(ctx):
    from barecuda.compiler import SourceModule

    return SourceModule(KERNELS)


def random_points(rng, n, w, h, margin=2.0):
    xs = rng.uniform(-margin, w + margin, n).astype(np.float32)
    ys = rng.uniform(-margin, h + margin, n).astype(np.float32)
    return xs, ys


# ------------------------------------------------------------------ CPU tests

FAKE_PTR = 1 << 20  # an int pointer: accepted without the driver, never dereferenced


@pytest.mark.parametrize("kwargs,exc,msg", [
    (dict(filter_mode="linear"), ValueError, "linear-memory texture .* only point filtering"),
    (dict(normalized_coords=True), ValueError, "linear-memory texture"),
    (dict(read_mode="float"), ValueError, "read_mode must be 'element' or 'normalized_float'"),
    (dict(read_mode=1), ValueError, "read_mode must be"),
    (dict(address_mode="bounce"), ValueError, "address_mode: unknown mode 'bounce'"),
    (dict(address_mode=7), ValueError, "address_mode must be in \\[0, 3\\]"),
    (dict(address_mode=("clamp",) * 4), ValueError, "give 1 to 3 modes"),
    (dict(address_mode=3.5), TypeError, "must be a mode or a sequence"),
    (dict(filter_mode="cubic"), ValueError, "filter_mode: unknown mode 'cubic'"),
    (dict(border_color=(1, 2, 3, 4, 5)), ValueError, "border_color: give 1 to 4 numbers"),
    (dict(border_color=("a",)), TypeError, "must be real number"),
    (dict(border_color=5), TypeError, "border_color must be a sequence"),
    (dict(max_anisotropy=17), ValueError, "max_anisotropy must be in \\[0, 16\\]"),
    (dict(flags=1 << 10), ValueError, "flags: unknown bits"),
    (dict(read_mode="normalized_float", flags=1), ValueError, "contradicts flags READ_AS_INTEGER"),
])
def test_linear_texture_options_rejected_before_the_driver(kwargs, exc, msg):
    with pytest.raises(exc, match=msg):
        drv.TextureObject.from_linear(FAKE_PTR, 1024, AF.FLOAT, 1, **kwargs)


@pytest.mark.parametrize("args,kwargs,msg", [
    ((FAKE_PTR, 1024, AF.FLOAT, 3), {}, "num_channels must be 1, 2 or 4"),
    ((FAKE_PTR, 1024, 0x55), {}, "unsupported array format 85"),
    ((FAKE_PTR, 1022, AF.FLOAT), {}, "positive multiple of the element size \\(4\\)"),
    ((FAKE_PTR, 0, AF.FLOAT), {}, "positive multiple"),
    ((FAKE_PTR, 1024, AF.SIGNED_INT32), dict(read_mode="normalized_float"),
     "not available for 32-bit integer formats"),
])
def test_from_linear_argument_errors(args, kwargs, msg):
    with pytest.raises(ValueError, match=msg):
        drv.TextureObject.from_linear(*args, **kwargs)
    with pytest.raises(ValueError, match="must not be negative"):
        drv.TextureObject.from_linear(FAKE_PTR, -4, AF.FLOAT)
    with pytest.raises(ValueError, match="device pointer out of range"):
        drv.TextureObject.from_linear(-1, 64, AF.FLOAT)
    with pytest.raises(TypeError, match="expected device memory"):
        drv.TextureObject.from_linear("ptr", 64, AF.FLOAT)


@pytest.mark.parametrize("args,kwargs,msg", [
    ((FAKE_PTR, 16, 16, 32, AF.FLOAT), {}, "pitch 32 is smaller than a row of 16 elements"),
    ((FAKE_PTR, 0, 16, 64, AF.FLOAT), {}, "width and height must be at least 1"),
    ((FAKE_PTR, 16, 16, 64, AF.FLOAT), dict(address_mode="wrap"),
     "address_mode wrap needs normalized_coords=True"),
    ((FAKE_PTR, 16, 16, 64, AF.FLOAT), dict(address_mode=("clamp", "mirror")),
     "address_mode mirror needs normalized_coords=True"),
    ((FAKE_PTR, 16, 16, 64, AF.UNSIGNED_INT8), dict(filter_mode="linear"),
     "linear filtering of an integer format needs read_mode='normalized_float'"),
    ((FAKE_PTR, 16, 16, 64, AF.SIGNED_INT32),
     dict(filter_mode=drv.filter_mode.LINEAR, read_mode="normalized_float"),
     "not available for 32-bit integer formats"),
])
def test_from_pitch2d_argument_errors(args, kwargs, msg):
    with pytest.raises(ValueError, match=msg):
        drv.TextureObject.from_pitch2d(*args, **kwargs)


def test_texture_and_surface_need_arrays():
    with pytest.raises(TypeError, match="TextureObject\\(\\) reads an Array, not numpy.ndarray; "
                                        "use TextureObject.from_linear"):
        drv.TextureObject(np.zeros(4, np.float32))
    with pytest.raises(TypeError, match="expected a barecuda.driver.Array, not int"):
        drv.SurfaceObject(FAKE_PTR)
    with pytest.raises(TypeError):
        drv.TextureObject()
    with pytest.raises(TypeError, match="positional"):
        drv.TextureObject(FAKE_PTR, "clamp")  # options are keyword-only


def test_kernels_compile_with_nvrtc():
    compiler = pytest.importorskip("barecuda.compiler")
    image = compiler.compile(KERNELS, arch="sm_90", cache_dir=False)
    assert len(image) > 1000


def test_texture_signatures_and_types():
    sig = inspect.signature(drv.TextureObject)
    assert list(sig.parameters)[:2] == ["resource", "address_mode"]
    assert sig.parameters["address_mode"].kind is inspect.Parameter.KEYWORD_ONLY
    assert str(inspect.signature(drv.SurfaceObject)) == "(array)"
    assert "pitch" in str(inspect.signature(drv.TextureObject.from_pitch2d))
    for tp in (drv.TextureObject, drv.SurfaceObject):
        # subclassable, as PyCUDA's classes (tests/test_subclassing.py), and immutable
        assert issubclass(type("Sub", (tp,), {}), tp)
        with pytest.raises(TypeError):
            tp.extra = 1


# ------------------------------------------------------------------ GPU tests

@pytest.mark.gpu
def test_bilinear_filtering_matches_numpy(ctx, rng, mod):
    h, w = 23, 37
    img = rng.random((h, w), dtype=np.float32)
    ary = drv.np_to_array(img)
    tex = drv.TextureObject(ary, filter_mode=drv.filter_mode.LINEAR)
    assert tex.filter_mode == drv.filter_mode.LINEAR and tex.read_mode == "element"
    assert tex.address_mode == (drv.address_mode.CLAMP,) * 3
    xs, ys = random_points(rng, 4000, w, h)
    got = launch(mod.get_function("sample2d"), len(xs), tex, to_dev(xs), to_dev(ys))
    np.testing.assert_allclose(got, bilinear(img, xs, ys), atol=1e-2, rtol=1e-2)
    # texel centres reproduce the data exactly
    yy, xx = np.mgrid[0:h, 0:w]
    cx, cy = (xx + 0.5).ravel().astype(np.float32), (yy + 0.5).ravel().astype(np.float32)
    got = launch(mod.get_function("sample2d"), cx.size, tex, to_dev(cx), to_dev(cy))
    np.testing.assert_array_equal(got, img.ravel())


@pytest.mark.gpu
def test_point_filtering_and_1d(ctx, rng, mod):
    v = rng.standard_normal(50).astype(np.float32)
    ary = drv.np_to_array(v)
    point = drv.TextureObject(ary)
    ks = rng.integers(-3, 53, 1000)
    xs = (ks + rng.uniform(0.05, 0.95, ks.size)).astype(np.float32)  # away from texel edges
    got = launch(mod.get_function("sample1d"), xs.size, point, to_dev(xs))
    np.testing.assert_array_equal(got, v[np.clip(ks, 0, 49)])
    lin = drv.TextureObject(ary, filter_mode="linear")
    xs = rng.uniform(-3, 53, 1000).astype(np.float32)
    got = launch(mod.get_function("sample1d"), xs.size, lin, to_dev(xs))
    np.testing.assert_allclose(got, linear1d(v, xs), atol=1e-2 * np.abs(v).max())


@pytest.mark.gpu
def test_trilinear_filtering_matches_numpy(ctx, rng, mod):
    d, h, w = 9, 11, 13
    vol = rng.random((d, h, w), dtype=np.float32)
    tex = drv.TextureObject(drv.np_to_array(vol), filter_mode="linear")
    n = 3000
    xs = rng.uniform(-1, w + 1, n).astype(np.float32)
    ys = rng.uniform(-1, h + 1, n).astype(np.float32)
    zs = rng.uniform(-1, d + 1, n).astype(np.float32)
    got = launch(mod.get_function("sample3d"), n, tex, to_dev(xs), to_dev(ys), to_dev(zs))
    np.testing.assert_allclose(got, trilinear(vol, xs, ys, zs), atol=1e-2, rtol=1e-2)


@pytest.mark.gpu
@pytest.mark.parametrize("mode", ["wrap", "clamp", "mirror", "border"])
def test_every_address_mode(ctx, rng, mod, mode):
    h, w = 8, 13
    img = rng.random((h, w), dtype=np.float32) + 1.0  # never equal to the border colour
    border = 0.25
    tex = drv.TextureObject(drv.np_to_array(img), address_mode=mode, normalized_coords=True,
                            border_color=(border, 0, 0, 0))
    assert tex.normalized_coords
    assert tex.address_mode == (getattr(drv.address_mode, mode.upper()),) * 3
    kx, ky = np.meshgrid(np.arange(-2 * w, 3 * w), np.arange(-2 * h, 3 * h))
    kx, ky = kx.ravel(), ky.ravel()
    xs = ((kx + 0.5) / w).astype(np.float32)  # texel centres, normalized
    ys = ((ky + 0.5) / h).astype(np.float32)
    got = launch(mod.get_function("sample2d"), xs.size, tex, to_dev(xs), to_dev(ys))
    ix, iy = address(kx, w, mode), address(ky, h, mode)
    inside = (ix >= 0) & (iy >= 0)
    expect = np.where(inside, img[np.maximum(iy, 0), np.maximum(ix, 0)], border)
    np.testing.assert_array_equal(got, expect.astype(np.float32))


@pytest.mark.gpu
def test_address_mode_per_dimension(ctx, rng, mod):
    h, w = 6, 10
    img = rng.random((h, w), dtype=np.float32)
    tex = drv.TextureObject(drv.np_to_array(img), normalized_coords=True,
                            address_mode=(drv.address_mode.WRAP, "mirror"))
    assert tex.address_mode[:2] == (drv.address_mode.WRAP, drv.address_mode.MIRROR)
    assert tex.address_mode[2] == drv.address_mode.CLAMP
    kx, ky = np.meshgrid(np.arange(-w, 2 * w), np.arange(-h, 2 * h))
    kx, ky = kx.ravel(), ky.ravel()
    xs, ys = ((kx + 0.5) / w).astype(np.float32), ((ky + 0.5) / h).astype(np.float32)
    got = launch(mod.get_function("sample2d"), xs.size, tex, to_dev(xs), to_dev(ys))
    np.testing.assert_array_equal(got, img[address(ky, h, "mirror"), address(kx, w, "wrap")])


@pytest.mark.gpu
@pytest.mark.parametrize("dtype,scale", [
    (np.uint8, 255.0), (np.int8, 127.0), (np.uint16, 65535.0), (np.int16, 32767.0)])
def test_integer_textures_read_as_normalized_float(ctx, rng, mod, dtype, scale):
    h, w = 10, 21
    info = np.iinfo(dtype)
    img = rng.integers(info.min, info.max, size=(h, w), endpoint=True, dtype=dtype)
    tex = drv.TextureObject(drv.np_to_array(img), read_mode="normalized_float")
    assert tex.read_mode == "normalized_float"
    assert not (tex.flags & drv.trsf_flags.READ_AS_INTEGER)
    yy, xx = np.mgrid[0:h, 0:w]
    cx, cy = (xx + 0.5).ravel().astype(np.float32), (yy + 0.5).ravel().astype(np.float32)
    got = launch(mod.get_function("sample2d"), cx.size, tex, to_dev(cx), to_dev(cy))
    expect = np.maximum(img.ravel() / scale, -1.0)
    np.testing.assert_allclose(got, expect, rtol=1e-5, atol=1e-6)
    # linear filtering works on normalized integer data
    lin = drv.TextureObject(drv.np_to_array(img), read_mode="normalized_float",
                            filter_mode="linear")
    xs, ys = random_points(rng, 2000, w, h)
    got = launch(mod.get_function("sample2d"), xs.size, lin, to_dev(xs), to_dev(ys))
    ref = bilinear(np.maximum(img / scale, -1.0), xs, ys)
    np.testing.assert_allclose(got, ref, atol=1e-2)


@pytest.mark.gpu
def test_integer_texture_read_as_element(ctx, rng, mod):
    img = rng.integers(-(2 ** 31), 2 ** 31 - 1, size=(7, 9), dtype=np.int32)
    tex = drv.TextureObject(drv.np_to_array(img))
    assert tex.flags & drv.trsf_flags.READ_AS_INTEGER
    yy, xx = np.mgrid[0:7, 0:9]
    cx, cy = (xx + 0.5).ravel().astype(np.float32), (yy + 0.5).ravel().astype(np.float32)
    got = launch(mod.get_function("sample2d_int"), cx.size, tex, to_dev(cx), to_dev(cy),
                 dtype=np.int32)
    np.testing.assert_array_equal(got, img.ravel())


@pytest.mark.gpu
@pytest.mark.parametrize("nc,kernel", [(2, "sample2d_f2"), (4, "sample2d_f4")])
def test_multichannel_float_textures(ctx, rng, mod, nc, kernel):
    h, w = 12, 17
    img = rng.random((h, w, nc), dtype=np.float32)
    ary = drv.make_multichannel_2d_array(img, "C")
    point = drv.TextureObject(ary)
    yy, xx = np.mgrid[0:h, 0:w]
    cx, cy = (xx + 0.5).ravel().astype(np.float32), (yy + 0.5).ravel().astype(np.float32)
    got = launch(mod.get_function(kernel), cx.size, point, to_dev(cx), to_dev(cy), shape=(nc,))
    np.testing.assert_array_equal(got, img.reshape(-1, nc))
    lin = drv.TextureObject(ary, filter_mode="linear")
    xs, ys = random_points(rng, 2000, w, h)
    got = launch(mod.get_function(kernel), xs.size, lin, to_dev(xs), to_dev(ys), shape=(nc,))
    np.testing.assert_allclose(got, bilinear(img, xs, ys), atol=1e-2, rtol=1e-2)


@pytest.mark.gpu
def test_layered_2d_texture(ctx, rng, mod):
    layers, h, w = 5, 9, 14
    data = rng.random((layers, h, w), dtype=np.float32)
    ary = drv.np_to_array(data, layered=True)
    tex = drv.TextureObject(ary, filter_mode="linear")
    n = 3000
    xs, ys = random_points(rng, n, w, h)
    ls = rng.integers(0, layers, n).astype(np.int32)
    got = launch(mod.get_function("sample2d_layered"), n, tex, to_dev(xs), to_dev(ys),
                 to_dev(ls))
    expect = np.empty(n)
    for lay in range(layers):
        sel = ls == lay
        expect[sel] = bilinear(data[lay], xs[sel], ys[sel])
    np.testing.assert_allclose(got, expect, atol=1e-2, rtol=1e-2)


@pytest.mark.gpu
def test_layered_1d_texture(ctx, rng, mod):
    layers, w = 4, 33
    data = rng.standard_normal((layers, w)).astype(np.float32)
    tex = drv.TextureObject(drv.np_to_array(data, layered=True))
    n = 1000
    ks = rng.integers(0, w, n)
    xs = (ks + 0.5).astype(np.float32)
    ls = rng.integers(0, layers, n).astype(np.int32)
    got = launch(mod.get_function("sample1d_layered"), n, tex, to_dev(xs), to_dev(ls))
    np.testing.assert_array_equal(got, data[ls, ks])


@pytest.mark.gpu
def test_from_linear_fetch(ctx, rng, mod):
    v = rng.standard_normal(1000).astype(np.float32)
    keep, ptr = aligned_dev(ctx, v)
    tex = drv.TextureObject.from_linear(ptr, v.nbytes, AF.FLOAT)
    assert tex.resource is ptr
    got = launch(mod.get_function("fetch1d"), v.size, tex)
    np.testing.assert_array_equal(got, v)
    iv = rng.integers(-1000, 1000, 500, dtype=np.int32)
    ikeep, iptr = aligned_dev(ctx, iv)
    itex = drv.TextureObject.from_linear(iptr, iv.nbytes, format=AF.SIGNED_INT32,
                                         num_channels=1)
    got = launch(mod.get_function("fetch1d_int"), iv.size, itex, dtype=np.int32)
    np.testing.assert_array_equal(got, iv)
    mem = drv.mem_alloc(4000)
    with pytest.raises(ValueError, match="nbytes 8000 exceeds the 4000 bytes"):
        drv.TextureObject.from_linear(mem, 8000, AF.FLOAT)


@pytest.mark.gpu
def test_from_pitch2d_bilinear(ctx, rng, mod):
    h, w, pitch_elems = 20, 48, 64  # rows 256 bytes apart
    img = rng.random((h, w), dtype=np.float32)
    padded = np.zeros((h, pitch_elems), np.float32)
    padded[:, :w] = img
    keep, ptr = aligned_dev(ctx, padded)
    tex = drv.TextureObject.from_pitch2d(ptr, w, h, pitch_elems * 4, AF.FLOAT,
                                         filter_mode="linear")
    xs, ys = random_points(rng, 3000, w, h)
    got = launch(mod.get_function("sample2d"), xs.size, tex, to_dev(xs), to_dev(ys))
    np.testing.assert_allclose(got, bilinear(img, xs, ys), atol=1e-2, rtol=1e-2)
    mem = drv.mem_alloc(padded.nbytes)
    with pytest.raises(ValueError, match="the image needs 10176 bytes, the memory holds 5120"):
        drv.TextureObject.from_pitch2d(mem, w, h * 2, pitch_elems * 4, AF.FLOAT)


@pytest.mark.gpu
def test_surface_write_2d_read_back(ctx, rng, mod):
    h, w = 13, 70
    src = rng.standard_normal((h, w)).astype(np.float32)
    ary = drv.np_to_array(np.zeros((h, w), np.float32), allow_surface_bind=True)
    surf = drv.SurfaceObject(ary)
    assert ary.users == 1 and surf.resource is ary
    mod.get_function("surf_write2d")(surf, to_dev(src), np.int32(w), np.int32(h),
                                     block=(BLOCK, 1, 1), grid=((w + BLOCK - 1) // BLOCK, h))
    np.testing.assert_array_equal(ary.get(), src * 2 + 1)
    out = drv.mem_alloc(src.nbytes)
    mod.get_function("surf_read2d")(out, surf, np.int32(w), np.int32(h),
                                    block=(BLOCK, 1, 1), grid=((w + BLOCK - 1) // BLOCK, h))
    back = np.empty_like(src)
    drv.memcpy_dtoh(back, out)
    np.testing.assert_array_equal(back, src * 2 + 1)
    # the same array can also be sampled as a texture
    tex = drv.TextureObject(ary)
    assert ary.users == 2
    yy, xx = np.mgrid[0:h, 0:w]
    cx, cy = (xx + 0.5).ravel().astype(np.float32), (yy + 0.5).ravel().astype(np.float32)
    got = launch(mod.get_function("sample2d"), cx.size, tex, to_dev(cx), to_dev(cy))
    np.testing.assert_array_equal(got, (src * 2 + 1).ravel())


@pytest.mark.gpu
def test_surface_write_float4_3d_and_layered(ctx, rng, mod):
    h, w = 5, 9
    src4 = rng.standard_normal((h, w, 4)).astype(np.float32)
    ary4 = drv.np_to_array(np.zeros((h, w, 4), np.float32), allow_surface_bind=True,
                           num_channels=4)
    s4 = drv.SurfaceObject(ary4)
    mod.get_function("surf_write2d_f4")(s4, to_dev(src4), np.int32(w), np.int32(h),
                                        block=(BLOCK, 1, 1), grid=(1, h))
    np.testing.assert_array_equal(ary4.get(), src4[..., ::-1])

    d = 3
    vol = rng.integers(0, 256, size=(d, h, w), dtype=np.uint8)
    ary3 = drv.np_to_array(np.zeros((d, h, w), np.uint8), allow_surface_bind=True)
    assert ary3.get_descriptor_3d().flags == FL.SURFACE_LDST
    s3 = drv.SurfaceObject(ary3)
    mod.get_function("surf_write3d_u8")(s3, to_dev(vol), np.int32(w), np.int32(h), np.int32(d),
                                        block=(BLOCK, 1, 1), grid=(1, h, d))
    np.testing.assert_array_equal(ary3.get(), 255 - vol)

    lay = rng.standard_normal((d, h, w)).astype(np.float32)
    aryl = drv.np_to_array(np.zeros((d, h, w), np.float32), layered=True,
                           allow_surface_bind=True)
    sl = drv.SurfaceObject(aryl)
    mod.get_function("surf_write2d_layered")(sl, to_dev(lay), np.int32(w), np.int32(h),
                                             np.int32(d), block=(BLOCK, 1, 1), grid=(1, h, d))
    np.testing.assert_array_equal(aryl.get(), -lay)


@pytest.mark.gpu
def test_texture_handle_forms(ctx, rng, mod):
    img = rng.random((4, 4), dtype=np.float32)
    tex = drv.TextureObject(drv.np_to_array(img))
    assert int(tex) == tex.handle == tex._kernel_arg_handle and tex.handle > 0
    assert f"0x{tex.handle:x}" in repr(tex)
    cx = np.full(1, 2.5, np.float32)
    cy = np.full(1, 1.5, np.float32)
    # a texture passes as the object itself or as its 64-bit handle
    for arg in (tex, np.uint64(tex.handle)):
        got = launch(mod.get_function("sample2d"), 1, arg, to_dev(cx), to_dev(cy))
        assert got[0] == img[1, 2]


@pytest.mark.gpu
def test_array_in_use_cannot_be_freed(ctx, rng):
    ary = drv.np_to_array(rng.random((8, 8), dtype=np.float32), allow_surface_bind=True)
    tex = drv.TextureObject(ary)
    surf = drv.SurfaceObject(ary)
    assert ary.users == 2
    with pytest.raises(drv.LogicError, match="2 TextureObject/SurfaceObject\\(s\\) still read "
                                             "this array; close\\(\\) them first"):
        ary.free()
    assert not ary.freed
    tex.close()
    tex.close()  # idempotent
    assert tex.closed and tex.resource is None and ary.users == 1
    with pytest.raises(drv.LogicError, match="1 TextureObject/SurfaceObject"):
        ary.free()
    del surf
    gc.collect()
    assert ary.users == 0
    ary.free()
    with pytest.raises(drv.LogicError, match="this Array was freed"):
        drv.TextureObject(ary)
    with pytest.raises(drv.LogicError, match="this Array was freed"):
        drv.SurfaceObject(ary)


@pytest.mark.gpu
def test_texture_keeps_its_array_alive(ctx, rng, mod):
    img = rng.random((6, 6), dtype=np.float32)
    ary = drv.np_to_array(img)
    ref = weakref.ref(ary)
    with drv.TextureObject(ary) as tex:
        del ary
        gc.collect()
        assert ref() is not None and tex.resource is ref()
        cx = np.array([3.5], np.float32)
        cy = np.array([4.5], np.float32)
        got = launch(mod.get_function("sample2d"), 1, tex, to_dev(cx), to_dev(cy))
        assert got[0] == img[4, 3]
    assert tex.closed
    gc.collect()
    assert ref() is None  # closing dropped the last reference: the array was destroyed


@pytest.mark.gpu
def test_closed_texture_is_refused(ctx, rng, mod):
    tex = drv.TextureObject(drv.np_to_array(rng.random((4, 4), dtype=np.float32)))
    tex.close()
    for call in (lambda: int(tex), lambda: tex.handle, lambda: tex._kernel_arg_handle):
        with pytest.raises(drv.LogicError, match="this TextureObject was closed"):
            call()
    with pytest.raises(drv.LogicError, match="this TextureObject was closed"):
        launch(mod.get_function("sample2d"), 1, tex, to_dev(np.zeros(1, np.float32)),
               to_dev(np.zeros(1, np.float32)))
    surf = drv.SurfaceObject(drv.np_to_array(np.zeros((4, 4), np.float32),
                                             allow_surface_bind=True))
    surf.close()
    with pytest.raises(drv.LogicError, match="this SurfaceObject was closed"):
        int(surf)
    assert "closed" in repr(surf)


@pytest.mark.gpu
def test_surface_needs_surface_ldst(ctx, rng):
    ary = drv.np_to_array(rng.random((4, 4), dtype=np.float32))
    with pytest.raises(ValueError, match="needs an Array made with array3d_flags.SURFACE_LDST"):
        drv.SurfaceObject(ary)
    assert ary.users == 0


@pytest.mark.gpu
def test_texture_option_errors_on_arrays(ctx, rng):
    ary = drv.np_to_array(rng.integers(0, 255, (4, 4), dtype=np.uint8))
    with pytest.raises(ValueError, match="address_mode wrap needs normalized_coords=True"):
        drv.TextureObject(ary, address_mode="wrap")
    with pytest.raises(ValueError, match="linear filtering of an integer format"):
        drv.TextureObject(ary, filter_mode="linear")
    assert ary.users == 0  # failed constructions do not count
    drv.TextureObject(ary, filter_mode="linear", read_mode="normalized_float").close()
    assert ary.users == 0


@pytest.mark.gpu
def test_texture_resample_example_runs():
    script = pathlib.Path(__file__).resolve().parent.parent / "examples" / "texture_resample.py"
    if not script.exists():
        pytest.skip(f"{script} is not in this checkout")
    proc = subprocess.run([sys.executable, str(script), "37", "0.8"], capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "max |GPU - NumPy bilinear|" in proc.stdout


@pytest.mark.gpu
def test_texture_objects_in_prepared_calls(ctx, rng, mod):
    v = rng.standard_normal(777).astype(np.float32)
    keep, ptr = aligned_dev(ctx, v)
    tex = drv.TextureObject.from_linear(ptr, v.nbytes, AF.FLOAT)
    f = mod.get_function("fetch1d").prepare("PPi")  # a texture object goes in a 64-bit slot
    out = drv.mem_alloc(v.nbytes)
    f.prepared_call(((v.size + BLOCK - 1) // BLOCK, 1), (BLOCK, 1, 1), out, tex, v.size)
    got = np.empty_like(v)
    drv.memcpy_dtoh(got, out)
    np.testing.assert_array_equal(got, v)
    tex.close()
    with pytest.raises(drv.LogicError, match="closed"):
        f.prepared_call((1, 1), (BLOCK, 1, 1), out, tex, v.size)
