# SPDX-License-Identifier: MIT
"""Random numbers on the GPU, as ``pycuda.curandom``.

    a = curandom.rand((1000,))                       # uniform in [0, 1), float32
    gen = curandom.XORWOWRandomNumberGenerator()
    x = gen.gen_normal((1000,), np.float64)

``rand`` runs barecuda's own small generator (``templates/curandom.cu``: one
xorshift state with a Weyl counter per thread, seeded by splitmix64), which needs
no cuRAND header and compiles in a moment.

The generator classes run cuRAND's device API (``curand_kernel.h``, compiled with
NVRTC from ``templates/curand_generators.cu``), so their streams are cuRAND's:
XORWOW and MRG32k3a (pseudo-random; generator ``i`` is ``curand_init(seed[i], i,
offset)``), Sobol32/Sobol64 and their scrambled forms (quasi-random; generator ``i``
walks dimension ``i`` of the direction vectors).  A generator object holds one
curand state per thread of its launches (``block_count`` blocks of
``generators_per_block`` threads) in device memory.  Uniform floats are in
(0, 1], as curand gives them.

The Sobol tables and ``get_curand_version`` come from the host library libcurand,
found at run time where NVRTC is looked for (``$BARECUDA_LIBCURAND``, NVIDIA's
pip wheels, ``$CUDA_HOME``/``$CUDA_PATH``, ``/usr/local/cuda``, the system
loader).  ``curand_kernel.h`` is looked for in the toolkit's include directory
and in NVIDIA's wheels.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

import enum
import os

import numpy as np

from barecuda import _driver
from barecuda import driver as _drv
from barecuda import gpuarray as _ga
from barecuda.elementwise import context_cache, device_blocks, headers_for, render, source_module

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import SupportsIndex

    import numpy.typing as npt

    from barecuda._driver import DeviceAllocation, Stream
    from barecuda.gpuarray import GPUArray

    _ShapeLike = SupportsIndex | Sequence[SupportsIndex]

__all__ = ["rand", "get_curand_version", "direction_vector_set", "generate_direction_vectors",
           "generate_scramble_constants32", "generate_scramble_constants64",
           "seed_getter_uniform", "seed_getter_unique", "XORWOWRandomNumberGenerator",
           "MRG32k3aRandomNumberGenerator", "Sobol32RandomNumberGenerator",
           "Sobol64RandomNumberGenerator", "ScrambledSobol32RandomNumberGenerator",
           "ScrambledSobol64RandomNumberGenerator"]


class _DtypeNotSupported(TypeError, NotImplementedError):
    """A dtype a generator does not produce (a TypeError, and PyCUDA's NotImplementedError)."""


def _shape_of(shape: Any) -> tuple[int, ...]:
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    for s in shape:
        if isinstance(s, bool) or not isinstance(s, (int, np.integer)):
            raise TypeError(f"shape must hold ints, got {shape!r}")
        if s < 0:
            raise ValueError(f"negative dimension in shape {shape!r}")
    return shape  # type: ignore[no-any-return]


# ------------------------------------------------------------------ rand()

BLOCK = 256
_RAND_KINDS = {np.dtype(np.float32): 0, np.dtype(np.float64): 1, np.dtype(np.int32): 4,
               np.dtype(np.uint32): 4}


def source() -> str:
    """The CUDA C source of rand()'s generator kernels."""
    return render("curandom.cu", headers=headers_for([]), block=BLOCK)  # type: ignore[no-any-return, unused-ignore]


def _rand_functions() -> Any:
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


def _rand_state() -> Any:
    """(state array, state count) of rand()'s generator in the current context."""
    sm = device_blocks()[0]
    cache = context_cache()
    ent = cache.get("__rand_generator__")
    if ent is None:
        n = sm * 4 * BLOCK
        state = _ga.GPUArray((6 * n,), np.uint32)
        init, _ = _rand_functions()
        init.prepared_call(((n + BLOCK - 1) // BLOCK, 1, 1), (BLOCK, 1, 1), state.ptr, n,
                           int.from_bytes(os.urandom(8), "little"), 0)
        ent = cache["__rand_generator__"] = (state, n)
    return ent


def rand(shape: _ShapeLike, dtype: npt.DTypeLike = np.float32, stream: Stream | None = None) -> GPUArray:
    """rand(shape, dtype=float32, stream=None): a new GPUArray of random numbers.

    float16, float32 and float64 are uniform in [0, 1); int32 and uint32 hold
    32 random bits each (so int32 values take either sign), as PyCUDA's.  Other
    dtypes raise NotImplementedError (also a TypeError).
    """
    dtype = np.dtype(dtype)
    shape = _shape_of(shape)
    half = dtype == np.float16
    kind = _RAND_KINDS.get(np.dtype(np.float32) if half else dtype)
    if kind is None:
        raise _DtypeNotSupported(f"rand() supports float16, float32, float64, int32 and uint32, "
                                 f"not {dtype}")
    out = _ga.GPUArray(shape, np.float32 if half else dtype, stream=stream)
    if out.size:
        state, n = _rand_state()
        _, fill = _rand_functions()
        # float32 values just below 1 round up to 1.0 in float16: keep them under the
        # last float16 below 1 so that the range stays [0, 1)
        scale = 1.0 - 2.0 ** -11 if half else 1.0
        fill.prepared_async_call(((n + BLOCK - 1) // BLOCK, 1, 1), (BLOCK, 1, 1), stream,
                                 state.ptr, n, out.ptr, out.size, kind, scale, 0.0)
    return out.astype(np.float16, stream) if half else out


# --------------------------------------------------------- libcurand (host)

class direction_vector_set(enum.IntEnum):
    """Sobol direction vector sets of libcurand (curandDirectionVectorSet_t)."""
    VECTOR_32 = 101
    SCRAMBLED_VECTOR_32 = 102
    VECTOR_64 = 103
    SCRAMBLED_VECTOR_64 = 104


def get_curand_version() -> tuple[int, int, int] | None:
    """get_curand_version(): libcurand's version as (major, minor, patch), PyCUDA's
    way (10400 -> (10, 40, 0)); None when no libcurand is found
    (``_driver._curand_info()`` then says where it was looked for)."""
    try:
        v = _driver._curand_version()
    except _drv.Error:
        return None
    return (v // 1000, (v % 1000) // 10, v % 10)


def _count(count: Any) -> int:
    if isinstance(count, bool) or not isinstance(count, (int, np.integer)):
        raise TypeError(f"count must be an int, not {type(count).__name__}")
    if count < 0:
        raise ValueError(f"count must be >= 0, got {count}")
    return int(count)


def generate_direction_vectors(count: int, direction: int | None = None) -> GPUArray:
    """generate_direction_vectors(count, direction=None): Sobol direction vectors of
    `count` dimensions as a GPUArray: (count, 32) uint32 for the 32-bit sets
    (default ``direction_vector_set.VECTOR_32``), (count, 64) uint64 for the 64-bit
    ones.  libcurand has 20,000 dimensions; dimension i gets its vectors i % 20000."""
    direction = direction_vector_set(direction_vector_set.VECTOR_32 if direction is None
                                     else direction)
    return _ga.to_gpu(_driver._curand_direction_vectors(int(direction), _count(count)))


def generate_scramble_constants32(count: int) -> GPUArray:
    """generate_scramble_constants32(count): libcurand's scrambled Sobol constants for
    `count` dimensions, a uint32 GPUArray (constant i % 20000 for dimension i)."""
    return _ga.to_gpu(_driver._curand_scramble_constants(32, _count(count)))


def generate_scramble_constants64(count: int) -> GPUArray:
    """generate_scramble_constants64(count): as generate_scramble_constants32, uint64."""
    return _ga.to_gpu(_driver._curand_scramble_constants(64, _count(count)))


def seed_getter_uniform(n: int) -> GPUArray:
    """seed_getter_uniform(n): an int32 GPUArray of `n` copies of one random seed (the
    generators then differ by their subsequence only, as curand advises)."""
    return _ga.GPUArray((_count(n),), np.int32).fill(int.from_bytes(os.urandom(4), "little")
                                                    & 0x7FFFFFFF)


def seed_getter_unique(n: int) -> GPUArray:
    """seed_getter_unique(n): an int32 GPUArray of `n` independent random seeds."""
    rng = np.random.default_rng(int.from_bytes(os.urandom(8), "little"))
    return _ga.to_gpu(rng.integers(0, 2**31 - 1, _count(n), dtype=np.int32))


# ------------------------------------------------------------ curand_kernel.h

def _find_curand_headers() -> Any:
    """The include directories that curand_kernel.h needs beyond those compiler.py
    always passes (empty when the toolkit's include directories have it all).
    Raises RuntimeError, naming what was searched and what to install, when
    curand_kernel.h is missing, or when it needs CCCL (CUDA 13's includes <nv/target>)
    and no CCCL is found: NVRTC would otherwise fail deep inside the header."""
    from barecuda import compiler
    ent = _CACHE.get("include")
    if ent is not None:
        return ent
    base = compiler._toolkit_include_dirs()
    extra = compiler._wheel_companions(base)    # a toolkit without them: from the wheels
    where = compiler._find_header("curand_kernel.h", base + extra)
    if where is None:
        searched = base + compiler._wheel_header_dirs("curand_kernel.h")
        raise _drv.RuntimeError(
            "curand_kernel.h (cuRAND's device API, needed by the curandom generators) was "
            "not found; searched:\n  " + "\n  ".join(searched or ["(no CUDA toolkit found)"])
            + "\nInstall the CUDA toolkit or NVIDIA's wheels (`pip install \"barecuda[cu13]\"`), "
            "or set CUDA_HOME")
    marker = compiler.CCCL_MARKER
    if compiler._find_header(marker, base + extra) is None \
            and _needs_cccl(os.path.join(where, "curand_kernel.h")):
        raise _drv.RuntimeError(
            f"{os.path.join(where, 'curand_kernel.h')} includes <nv/target>, a header of "
            "CCCL (NVIDIA's C++ core libraries), and no CCCL was found; searched:\n  "
            + "\n  ".join([os.path.join(d, "cccl") for d in base]
                           + compiler._wheel_header_dirs(marker))
            + "\nTo fix: " + compiler._cccl_install_advice())
    _CACHE["include"] = extra
    return extra


def _needs_cccl(header: str) -> bool:
    """Whether curand_kernel.h at `header` includes CCCL's <nv/target> (CUDA 13's
    and late CUDA 12's do; older ones need nothing beyond the toolkit's)."""
    try:
        with open(header, encoding="utf-8", errors="replace") as f:
            return "nv/target" in f.read()
    except OSError:
        return False


_CACHE: dict[str, Any] = {}

# kernel name -> prepare() format
_FORMATS = {
    "uniform_int": "PPQ", "uniform_long": "PPQ", "uniform_float": "PPQ",
    "uniform_double": "PPQ", "normal_float": "PPQ", "normal_double": "PPQ",
    "normal_float2": "PPQ", "normal_double2": "PPQ", "normal_log_float": "PPffQ",
    "normal_log_double": "PPddQ", "normal_log_float2": "PPffQ", "normal_log_double2": "PPddQ",
    "poisson_int": "PPdQ", "poisson_inplace_float": "PPQ", "poisson_inplace_double": "PPQ",
    "poisson_inplace_int": "PPQ",
}


def _generator_source(cls: Any) -> Any:
    """The CUDA C source of the kernels of generator class `cls`."""
    c = cls._config
    lines = [f"#define BC_STATE {c['state']}", f"#define BC_BITS {cls.generator_bits}",
             f"#define BC_SKIP_T {c['skip_t']}", f"#define BC_INIT {c['init']}",
             f"#define BC_DIRVEC {c.get('dirvec', 'void')}",
             f"#define BC_SCRAMBLE {c.get('scramble', 'void')}",
             f"#define BC_BOX_MULLER {int(cls.has_box_muller)}",
             f"#define BC_SUBSEQUENCE {int(c.get('subsequence', False))}"]
    return render("curand_generators.cu", config="\n".join(lines))


def _kernel_formats(cls: Any) -> Any:
    """{kernel name: prepare() format} of generator class `cls`."""
    init, skip = cls._config["init"], "I" if cls._config["skip_t"] == "unsigned int" else "Q"
    out = {n: f for n, f in _FORMATS.items()
           if (cls.has_box_muller or not n.endswith("2"))
           and (cls.generator_bits == 64 or n != "uniform_long")}
    out["prepare"] = {1: "PQPQ", 2: "PQP" + skip, 3: "PQPP" + skip}[init]
    kinds = ["skip_ahead"]
    if init == 1:
        kinds.append("skip_ahead_sequence")
    if cls._config.get("subsequence"):
        kinds.append("skip_ahead_subsequence")
    for k in kinds:
        out[k] = "PQ" + skip
        out[k + "_array"] = "PQP"
    return out


def _kernel_names(cls: Any) -> Any:
    """The kernels of generator class `cls`."""
    return list(_kernel_formats(cls))


def _load_kernels(cls: Any) -> Any:
    """(module, {name: prepared Function}, state size, generators per block) of `cls`
    in the current context, compiled once per context (and cached on disk)."""
    from barecuda.compiler import SourceModule
    include = _find_curand_headers()    # first: a missing header is said without a GPU
    device_blocks()                     # makes a context current
    cache = context_cache()
    key = ("__curand__", cls.__name__)
    ent = cache.get(key)
    if ent is None:
        mod = SourceModule(_generator_source(cls), no_extern_c=True,
                           include_dirs=include)
        funcs = {}
        for name, fmt in _kernel_formats(cls).items():
            f = mod.get_function(name)
            f.prepare(fmt)
            funcs[name] = f
        state_size = mod.get_global("bc_state_probe")[1]
        per_block = min(f.max_threads_per_block for f in funcs.values())
        ent = cache[key] = (mod, funcs, state_size, per_block)
    return ent


# -------------------------------------------------------------- generators

class _RandomNumberGeneratorBase:
    """What every curand generator class shares: the kernels, the states, the fills."""

    _config: ClassVar[dict[str, Any]] = {}
    generator_bits = 32
    has_box_muller = False

    def __init__(self) -> None:
        self.module, self.generators, self._state_size, self.generators_per_block = \
            _load_kernels(type(self))
        self.block_count = device_blocks()[0]
        self.state_type = self._config["state"]
        self._state = _drv.mem_alloc(self.generator_count * self._state_size)
        self._prepare_skipahead()

    def _prepare_skipahead(self) -> None:
        """The skip-ahead kernels as attributes, under PyCUDA's names: prepared
        Functions taking (state, generator_count, skip) and (state, generator_count,
        skips array), launched by call_skip_ahead*; a library may launch them itself
        with prepared_async_call((block_count, 1, 1), (generators_per_block, 1, 1), ...)."""
        self.skip_ahead = self.generators["skip_ahead"]
        self.skip_ahead_array = self.generators["skip_ahead_array"]

    def _kernels(self) -> list[Any]:
        """Every prepared Function of this generator (fills, prepare, skip-aheads)."""
        return list(self.generators.values())

    @property
    def generator_count(self) -> int:
        """block_count * generators_per_block: the number of curand states."""
        return self.block_count * self.generators_per_block  # type: ignore[no-any-return]

    @property
    def state(self) -> DeviceAllocation:
        """The DeviceAllocation holding the curand states."""
        return self._state

    def _launch(self, name: Any, stream: Any, *args: Any) -> None:
        self.generators[name].prepared_async_call(
            (self.block_count, 1, 1), (self.generators_per_block, 1, 1), stream,
            self._state, *args)

    # -- fills

    def _fill(self, data: GPUArray, base: str, kinds: Any, stream: Stream | None,
              extra: Any = (), pairs: bool = False, half: bool = True,
              what: str = "numbers") -> GPUArray:
        """Fill `data` with kernel base + kinds[dtype]; float16 through a float32 temporary,
        non-contiguous arrays through a contiguous one."""
        if not isinstance(data, _ga.GPUArray):
            raise TypeError(f"expected a GPUArray, not {type(data).__name__}")
        dt = data.dtype
        work_dt = np.dtype(np.float32) if dt == np.float16 and half else dt
        suffix = kinds.get(work_dt)
        if suffix is None:
            names = ", ".join(str(np.dtype(k)) for k in kinds)
            raise _DtypeNotSupported(f"{type(self).__name__} does not produce {what} of "
                                     f"dtype {dt} (supported: {names})")
        target = data if (work_dt == dt and data._c) else _ga.GPUArray(data.shape, work_dt,
                                                                         stream=stream)
        n = target.size
        if n:
            name = base + suffix
            if pairs and self.has_box_muller and n % 2 == 0 \
                    and target.ptr % (2 * work_dt.itemsize) == 0:
                name, n = name + "2", n // 2
            self._launch(name, stream, target.ptr, *extra, n)
        if target is not data:
            if target.dtype != dt:
                target = target.astype(dt, stream)
            _ga._strided_copy(data, target, stream)
        return data

    _UNIFORM = {np.dtype(np.float32): "float", np.dtype(np.float64): "double",
                np.dtype(np.int32): "int", np.dtype(np.uint32): "int"}
    _NORMAL = {np.dtype(np.float32): "float", np.dtype(np.float64): "double"}

    def fill_uniform(self, data: GPUArray, stream: Stream | None = None) -> GPUArray:
        """fill_uniform(data, stream=None): fill a GPUArray with uniform numbers: floats in
        (0, 1], 32 random bits for int32/uint32, 64 for int64/uint64 (64-bit
        generators only); float16 is filled from float32 numbers."""
        kinds = dict(self._UNIFORM)
        if self.generator_bits == 64:
            kinds.update({np.dtype(np.int64): "long", np.dtype(np.uint64): "long"})
        return self._fill(data, "uniform_", kinds, stream, what="uniform numbers")

    def gen_uniform(self, shape: _ShapeLike, dtype: npt.DTypeLike = np.float32,
                    stream: Stream | None = None) -> GPUArray:
        """gen_uniform(shape, dtype=float32, stream=None): a new GPUArray, as fill_uniform."""
        return self.fill_uniform(_ga.GPUArray(_shape_of(shape), dtype, stream=stream), stream)

    def fill_normal(self, data: GPUArray, stream: Stream | None = None) -> GPUArray:
        """fill_normal(data, stream=None): fill a float GPUArray with standard normal
        numbers (Box-Muller pairs where the generator has them and the size is even)."""
        return self._fill(data, "normal_", self._NORMAL, stream, pairs=True,
                          what="normal numbers")

    def gen_normal(self, shape: _ShapeLike, dtype: npt.DTypeLike = np.float32,
                   stream: Stream | None = None) -> GPUArray:
        """gen_normal(shape, dtype=float32, stream=None): a new GPUArray, as fill_normal."""
        return self.fill_normal(_ga.GPUArray(_shape_of(shape), dtype, stream=stream), stream)

    def fill_log_normal(self, data: GPUArray, mean: float, stddev: float,
                        stream: Stream | None = None) -> GPUArray:
        """fill_log_normal(data, mean, stddev, stream=None): fill a float GPUArray with
        exp(x), x normal of mean `mean` and standard deviation `stddev`."""
        mean, stddev = _real(mean, "mean"), _real(stddev, "stddev")
        if stddev < 0:
            raise ValueError(f"stddev must be >= 0, got {stddev}")
        return self._fill(data, "normal_log_", self._NORMAL, stream, extra=(mean, stddev),
                          pairs=True, what="log-normal numbers")

    def gen_log_normal(self, shape: _ShapeLike, dtype: npt.DTypeLike, mean: float, stddev: float,
                       stream: Stream | None = None) -> GPUArray:
        """gen_log_normal(shape, dtype, mean, stddev, stream=None): a new GPUArray, as
        fill_log_normal."""
        return self.fill_log_normal(_ga.GPUArray(_shape_of(shape), dtype, stream=stream),
                                    mean, stddev, stream)

    def fill_poisson(self, data: GPUArray, lambda_value: Any = None,
                     stream: Stream | None = None) -> GPUArray:
        """fill_poisson(data, lambda_value=None, stream=None): Poisson numbers.

        With `lambda_value`, fill a uint32 GPUArray with draws of that mean.  Without,
        each element of a float32, float64 or uint32 array is the mean of the draw that
        replaces it."""
        if lambda_value is None:
            kinds = {np.dtype(np.float32): "float", np.dtype(np.float64): "double",
                     np.dtype(np.uint32): "int"}
            return self._fill(data, "poisson_inplace_", kinds, stream, half=False,
                              what="in-place Poisson numbers")
        lam = _real(lambda_value, "lambda_value")
        if not lam >= 0 or lam == float("inf"):
            raise ValueError(f"lambda_value must be finite and >= 0, got {lambda_value}")
        return self._fill(data, "poisson_", {np.dtype(np.uint32): "int"}, stream, extra=(lam,),
                          half=False, what="Poisson numbers")

    def gen_poisson(self, shape: _ShapeLike, dtype: npt.DTypeLike, lambda_value: Any,
                    stream: Stream | None = None) -> GPUArray:
        """gen_poisson(shape, dtype, lambda_value, stream=None): a new uint32 GPUArray of
        Poisson numbers of mean `lambda_value`."""
        return self.fill_poisson(_ga.GPUArray(_shape_of(shape), dtype, stream=stream),
                                 lambda_value, stream)

    # -- skip ahead

    def _skip(self, name: Any, i: Any, stream: Any) -> None:
        skip_bits = 32 if self._config["skip_t"] == "unsigned int" else 64
        if isinstance(i, bool) or not isinstance(i, (int, np.integer)):
            raise TypeError(f"the skip must be an int, not {type(i).__name__}")
        if not 0 <= i < 2**skip_bits:
            raise ValueError(f"the skip must be in [0, 2**{skip_bits}), got {i}")
        self._launch(name, stream, self.generator_count, int(i))

    def _skip_array(self, name: Any, i: Any, stream: Any) -> None:
        skip_bits = 32 if self._config["skip_t"] == "unsigned int" else 64
        if not isinstance(i, _ga.GPUArray):
            raise TypeError(f"expected a GPUArray of skips, not {type(i).__name__}")
        if i.dtype.kind not in "iu" or i.dtype.itemsize * 8 != skip_bits:
            raise TypeError(f"the skips must be uint{skip_bits} (one per generator), not "
                            f"{i.dtype}")
        if i.size != self.generator_count or not i._c:
            raise ValueError(f"the skips must be a contiguous array of {self.generator_count} "
                             f"elements (one per generator), got shape {i.shape}")
        self._launch(name, stream, self.generator_count, i.ptr)

    def call_skip_ahead(self, i: int, stream: Stream | None = None) -> None:
        """call_skip_ahead(i, stream=None): every generator skips `i` numbers."""
        self._skip("skip_ahead", i, stream)

    def call_skip_ahead_array(self, i: GPUArray, stream: Stream | None = None) -> None:
        """call_skip_ahead_array(i, stream=None): generator k skips i[k] numbers (`i` a
        GPUArray of generator_count unsigned ints: 32-bit for Sobol32, else 64-bit)."""
        self._skip_array("skip_ahead_array", i, stream)


def _real(x: Any, what: Any) -> float:
    if isinstance(x, bool) or not isinstance(x, (int, float, np.integer, np.floating)):
        raise TypeError(f"{what} must be a real number, not {type(x).__name__}")
    return float(x)


def _check_table(ary: Any, shape: Any, dtype: Any, what: Any) -> None:
    if not (isinstance(ary, _ga.GPUArray) and ary.dtype == dtype and ary.shape == shape
            and ary._c):
        got = (f"{ary.dtype} GPUArray of shape {ary.shape}" if isinstance(ary, _ga.GPUArray)
               else type(ary).__name__)
        raise TypeError(f"{what} must be a contiguous {np.dtype(dtype)} GPUArray of shape "
                        f"{shape} (one row per generator), got {got}")


class _PseudoRandomNumberGeneratorBase(_RandomNumberGeneratorBase):
    has_box_muller = True

    def __init__(self, seed_getter: Callable[[int], GPUArray] | None = None, offset: int = 0,
                 seed: int | None = None) -> None:
        super().__init__()
        count = self.generator_count
        if seed is not None:
            if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
                raise TypeError(f"seed must be an int, not {type(seed).__name__}")
            if not -2**31 <= seed < 2**32:
                raise ValueError(f"seed must fit in 32 bits, got {seed}")
            seeds = _ga.GPUArray((count,), np.int32).fill(np.uint32(seed % 2**32).view(np.int32))
        elif seed_getter is None:
            seeds = seed_getter_unique(count)
        else:
            seeds = seed_getter(count)
        if not (isinstance(seeds, _ga.GPUArray) and seeds.dtype == np.int32
                and seeds.size == count and seeds._c):
            got = (f"{seeds.dtype} GPUArray of size {seeds.size}"
                   if isinstance(seeds, _ga.GPUArray) else type(seeds).__name__)
            raise TypeError(f"seed_getter({count}) must return a contiguous int32 GPUArray of "
                            f"{count} seeds, got {got}")
        if isinstance(offset, bool) or not isinstance(offset, (int, np.integer)):
            raise TypeError(f"offset must be an int, not {type(offset).__name__}")
        if not 0 <= offset < 2**64:
            raise ValueError(f"offset must be in [0, 2**64), got {offset}")
        self._launch("prepare", None, count, seeds.ptr, int(offset))

    def _prepare_skipahead(self) -> None:
        super()._prepare_skipahead()
        self.skip_ahead_sequence = self.generators["skip_ahead_sequence"]
        self.skip_ahead_sequence_array = self.generators["skip_ahead_sequence_array"]

    def call_skip_ahead_sequence(self, i: int, stream: Stream | None = None) -> None:
        """call_skip_ahead_sequence(i, stream=None): every generator skips `i`
        sequences (curand's skipahead_sequence: 2**67 numbers each for XORWOW, the
        spacing of its generators; 2**127 for MRG32k3a)."""
        self._skip("skip_ahead_sequence", i, stream)

    def call_skip_ahead_sequence_array(self, i: GPUArray, stream: Stream | None = None) -> None:
        """call_skip_ahead_sequence_array(i, stream=None): generator k skips i[k]
        sequences (`i` a uint64 GPUArray of generator_count elements)."""
        self._skip_array("skip_ahead_sequence_array", i, stream)


class XORWOWRandomNumberGenerator(_PseudoRandomNumberGeneratorBase):
    """XORWOWRandomNumberGenerator(seed_getter=None, offset=0, seed=None)

    curand's XORWOW.  `seed_getter(n)` returns an int32 GPUArray of the n
    generators' seeds (default ``seed_getter_unique``); `seed` (an int, barecuda's
    addition) gives every generator that one seed, for repeatable streams.
    Generator i starts at subsequence i, `offset` numbers in.
    """
    _config = {"state": "curandStateXORWOW", "skip_t": "unsigned long long", "init": 1}


class MRG32k3aRandomNumberGenerator(_PseudoRandomNumberGeneratorBase):
    """MRG32k3aRandomNumberGenerator(seed_getter=None, offset=0, seed=None)

    curand's MRG32k3a; arguments as XORWOWRandomNumberGenerator.
    """
    _config = {"state": "curandStateMRG32k3a", "skip_t": "unsigned long long", "init": 1,
               "subsequence": True}

    def _prepare_skipahead(self) -> None:
        super()._prepare_skipahead()
        self.skip_ahead_subsequence = self.generators["skip_ahead_subsequence"]
        self.skip_ahead_subsequence_array = self.generators["skip_ahead_subsequence_array"]

    def call_skip_ahead_subsequence(self, i: int, stream: Stream | None = None) -> None:
        """call_skip_ahead_subsequence(i, stream=None): every generator skips `i`
        subsequences (of 2**76 numbers each, the spacing of MRG32k3a's generators)."""
        self._skip("skip_ahead_subsequence", i, stream)

    def call_skip_ahead_subsequence_array(self, i: GPUArray, stream: Stream | None = None) -> None:
        """call_skip_ahead_subsequence_array(i, stream=None): generator k skips i[k]
        subsequences (`i` a uint64 GPUArray of generator_count elements)."""
        self._skip_array("skip_ahead_subsequence_array", i, stream)


class _SobolRandomNumberGeneratorBase(_RandomNumberGeneratorBase):
    _vector_set = direction_vector_set.VECTOR_32
    _scrambled = False

    def __init__(self, dir_vector: GPUArray | None = None, scramble_vector: GPUArray | None = None,
                 offset: int = 0) -> None:

        super().__init__()
        count, bits = self.generator_count, self.generator_bits
        dt = np.dtype(np.uint32 if bits == 32 else np.uint64)
        if dir_vector is None:
            dir_vector = generate_direction_vectors(count, self._vector_set)
        _check_table(dir_vector, (count, bits), dt, "dir_vector")
        args = [dir_vector.ptr]
        if self._scrambled:
            if scramble_vector is None:
                scramble_vector = (generate_scramble_constants32 if bits == 32
                                   else generate_scramble_constants64)(count)
            _check_table(scramble_vector, (count,), dt, "scramble_vector")
            args.append(scramble_vector.ptr)
        if isinstance(offset, bool) or not isinstance(offset, (int, np.integer)):
            raise TypeError(f"offset must be an int, not {type(offset).__name__}")
        if not 0 <= offset < 2**bits:
            raise ValueError(f"offset must be in [0, 2**{bits}), got {offset}")
        self._launch("prepare", None, count, *args, int(offset))


class Sobol32RandomNumberGenerator(_SobolRandomNumberGeneratorBase):
    """Sobol32RandomNumberGenerator(dir_vector=None, offset=0)

    curand's 32-bit Sobol sequence: generator i walks dimension i, from point
    `offset`.  `dir_vector` is a (generator_count, 32) uint32 GPUArray (default
    ``generate_direction_vectors(generator_count, VECTOR_32)``).
    """
    _config = {"state": "curandStateSobol32", "skip_t": "unsigned int", "init": 2,
               "dirvec": "curandDirectionVectors32_t"}

    def __init__(self, dir_vector: GPUArray | None = None, offset: int = 0) -> None:
        super().__init__(dir_vector, None, offset)


class Sobol64RandomNumberGenerator(_SobolRandomNumberGeneratorBase):
    """Sobol64RandomNumberGenerator(dir_vector=None, offset=0)

    curand's 64-bit Sobol sequence; `dir_vector` (generator_count, 64) uint64.
    """
    generator_bits = 64
    _vector_set = direction_vector_set.VECTOR_64
    _config = {"state": "curandStateSobol64", "skip_t": "unsigned long long", "init": 2,
               "dirvec": "curandDirectionVectors64_t"}

    def __init__(self, dir_vector: GPUArray | None = None, offset: int = 0) -> None:
        super().__init__(dir_vector, None, offset)


class ScrambledSobol32RandomNumberGenerator(_SobolRandomNumberGeneratorBase):
    """ScrambledSobol32RandomNumberGenerator(dir_vector=None, scramble_vector=None, offset=0)

    curand's scrambled 32-bit Sobol sequence; `scramble_vector` a (generator_count,)
    uint32 GPUArray (default ``generate_scramble_constants32``).
    """
    _vector_set = direction_vector_set.SCRAMBLED_VECTOR_32
    _scrambled = True
    _config = {"state": "curandStateScrambledSobol32", "skip_t": "unsigned int", "init": 3,
               "dirvec": "curandDirectionVectors32_t", "scramble": "unsigned int"}


class ScrambledSobol64RandomNumberGenerator(_SobolRandomNumberGeneratorBase):
    """ScrambledSobol64RandomNumberGenerator(dir_vector=None, scramble_vector=None, offset=0)

    curand's scrambled 64-bit Sobol sequence; tables as uint64.
    """
    generator_bits = 64
    _vector_set = direction_vector_set.SCRAMBLED_VECTOR_64
    _scrambled = True
    _config = {"state": "curandStateScrambledSobol64", "skip_t": "unsigned long long",
               "init": 3, "dirvec": "curandDirectionVectors64_t",
               "scramble": "unsigned long long"}
