# SPDX-License-Identifier: MIT
"""Random numbers on the GPU, as ``pycuda.curandom``.

    a = curandom.rand((1000,))                       # uniform in [0, 1), float32
    gen = curandom.XORWOWRandomNumberGenerator(seed=42)
    x = gen.gen_normal((1000,), np.float64)

XORWOW here is barecuda's own kernel (``templates/curandom.cu``): one xorshift state
with a Weyl counter per thread, seeded by splitmix64 of (seed, offset + thread).  Its
streams differ from curand's.
"""

import os

import numpy as np

from barecuda import driver as _drv
from barecuda import gpuarray as _ga
from barecuda.elementwise import context_cache, device_blocks, headers_for, render, source_module

__all__ = ["rand", "XORWOWRandomNumberGenerator", "seed_getter_uniform", "seed_getter_unique"]

BLOCK = 256
_KINDS = {("uniform", np.dtype(np.float32)): 0, ("uniform", np.dtype(np.float64)): 1,
          ("normal", np.dtype(np.float32)): 2, ("normal", np.dtype(np.float64)): 3}


def source():
    """The CUDA C source of the generator kernels."""
    return render("curandom.cu", headers=headers_for([]), block=BLOCK)


def _functions():
    cache = context_cache()
    ent = cache.get("__xorwow__")
    if ent is None:
        mod = source_module(source())
        init = mod.get_function("xorwow_init")
        init.prepare("PiQQ")
        fill = mod.get_function("xorwow_fill")
        fill.prepare("PiPqidd")
        ent = cache["__xorwow__"] = (init, fill, mod)
    return ent[0], ent[1]


def seed_getter_uniform(n):
    """PyCUDA's name: one random 64-bit seed (the same for every thread)."""
    return int.from_bytes(os.urandom(8), "little")


seed_getter_unique = seed_getter_uniform


class XORWOWRandomNumberGenerator:
    """XORWOWRandomNumberGenerator(seed_getter=None, offset=0, seed=None, stream=None)

    Holds one XORWOW state per thread of its launches in device memory.  `seed` (an
    int) or `seed_getter` (a callable of the state count returning an int, PyCUDA's
    hook) picks the seed (default: from os.urandom); `offset` shifts the
    subsequence every thread starts from.
    """

    def __init__(self, seed_getter=None, offset=0, seed=None, stream=None):
        if seed is None:
            seed = (seed_getter or seed_getter_uniform)(0)
            if isinstance(seed, _ga.GPUArray):
                seed = int(seed.get().ravel()[0])
        seed = int(seed) & (2**64 - 1)
        offset = int(offset)
        if offset < 0:
            raise ValueError(f"offset must be >= 0, got {offset}")
        sm = device_blocks()[0]
        self.nstates = sm * 4 * BLOCK
        self.seed = seed
        self._state = _ga.GPUArray((6 * self.nstates,), np.uint32, stream=stream)
        init, _ = _functions()
        grid = (self.nstates + BLOCK - 1) // BLOCK
        init.prepared_async_call((grid, 1, 1), (BLOCK, 1, 1), stream, self._state.ptr,
                                 self.nstates, seed, offset & (2**64 - 1))

    @property
    def state(self):
        return self._state

    def _fill(self, ary, kind, scale=1.0, shift=0.0, stream=None):
        if not isinstance(ary, _ga.GPUArray):
            raise TypeError(f"expected a GPUArray, not {type(ary).__name__}")
        dt = ary.dtype
        target = ary
        if dt == np.float16:
            target = _ga.GPUArray(ary.shape, np.float32, stream=stream)
            dt = target.dtype
            if kind == "uniform":
                # float32 values just below 1 round up to 1.0 in float16: keep them
                # under the last float16 below 1 so the range stays [0, 1)
                scale *= 1.0 - 2.0 ** -11
        code = _KINDS.get((kind, dt))
        if code is None:
            raise TypeError(f"{kind} numbers of dtype {ary.dtype} are not supported "
                            "(float16, float32, float64)")
        if not target._c:
            target = _ga.GPUArray(ary.shape, dt, stream=stream)
        if target.size:
            _, fill = _functions()
            grid = (self.nstates + BLOCK - 1) // BLOCK
            fill.prepared_async_call((grid, 1, 1), (BLOCK, 1, 1), stream, self._state.ptr,
                                     self.nstates, target.ptr, target.size, code, float(scale),
                                     float(shift))
        if target is not ary:
            if target.dtype != ary.dtype:
                target = target.astype(ary.dtype, stream)
            _ga._strided_copy(ary, target, stream)
        return ary

    def fill_uniform(self, data, stream=None):
        """Fill a float GPUArray with numbers uniform in [0, 1)."""
        return self._fill(data, "uniform", stream=stream)

    def fill_normal(self, data, stream=None):
        """Fill a float GPUArray with standard normal numbers."""
        return self._fill(data, "normal", stream=stream)

    def gen_uniform(self, shape, dtype=np.float32, stream=None):
        """A new GPUArray of numbers uniform in [0, 1)."""
        return self._fill(_ga.GPUArray(shape, dtype, stream=stream), "uniform", stream=stream)

    def gen_normal(self, shape, dtype=np.float32, stream=None):
        """A new GPUArray of standard normal numbers."""
        return self._fill(_ga.GPUArray(shape, dtype, stream=stream), "normal", stream=stream)

    def gen_log_normal(self, shape, dtype=np.float32, mean=0.0, stddev=1.0, stream=None):
        """A new GPUArray of exp(normal(mean, stddev)) numbers."""
        from barecuda import cumath
        a = self._fill(_ga.GPUArray(shape, dtype, stream=stream), "normal", stddev, mean, stream)
        return cumath.exp(a, stream=stream)

    def fill_poisson(self, *args, **kwargs):
        """fill_poisson(data, lambda_value=None, stream=None): PyCUDA's Poisson fill (not available).

        Always raises NotImplementedError: barecuda's generator has no Poisson
        distribution.  Draw on the host with ``numpy.random.Generator.poisson`` and
        copy with ``gpuarray.to_gpu``.
        """
        raise NotImplementedError("Poisson numbers are not implemented")


def _default_generator():
    cache = context_cache()
    gen = cache.get("__rand_generator__")
    if gen is None:
        gen = cache["__rand_generator__"] = XORWOWRandomNumberGenerator()
    return gen


def rand(shape, dtype=np.float32, stream=None):
    """A new GPUArray of numbers uniform in [0, 1) (float16, float32 or float64)."""
    dtype = np.dtype(dtype)
    if dtype not in (np.float16, np.float32, np.float64):
        raise TypeError(f"rand() supports float16, float32 and float64, not {dtype}")
    return _default_generator().gen_uniform(shape, dtype, stream)
