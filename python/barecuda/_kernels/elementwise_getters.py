# SPDX-License-Identifier: MIT
"""PyCUDA's kernel getters (``pycuda.elementwise.get_*``, shown by barecuda.elementwise):
prepared Functions with PyCUDA's argument layout, for programs that launch them
themselves:

    f = get_axpbyz_kernel(x.dtype, y.dtype, z.dtype)
    f.prepared_async_call(x._grid, x._block, stream, a, x.gpudata, b, y.gpudata,
                          z.gpudata, x.size)

The source is templates/elementwise.cu, rendered with the declared parameters as they
are (complex scalars by value, no transport) and a trailing ``unsigned long long n``
(PyCUDA's uintp "n"), or ``start, stop, step`` (intp) for the range variant.  Each
getter is memoized per context (tools.context_dependent_memoize).

Texture references are gone since CUDA 12.  Where PyCUDA's getters read a source
array through texrefs (take, take_put, linear_combination) ours return, in their
place, PointerTextureRef objects: ``ary.bind_to_texref_ext(ref)`` (or
``ref.set_address(ptr, nbytes)``) stores the array's pointer and element count in a
__device__ variable of the kernel's module, which the kernel reads with tex1Dfetch's
rules (out-of-range or unbound reads give 0).  So the PyCUDA calls work unchanged.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from barecuda import _driver as _drv
from barecuda._core.contexts import context_dependent_memoize
from barecuda._core.names import public
from barecuda._kernels.cache import source_module
from barecuda._kernels.cdecl import ScalarArg, VectorArg, dtype_to_ctype, parse_c_args
from barecuda._kernels.templates import headers_for, render

if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

    import numpy.typing as npt

    from barecuda._driver import Function
    from barecuda.compiler import SourceModule

def _getter_module(source, options=None, keep=False):
    """Compile and load a getter's source (tests replace this to compile offline)."""
    return source_module(source, options, keep)


def _as_args(arguments):
    """A fresh list of tools.VectorArg/ScalarArg from a C declaration string or list."""
    return list(parse_c_args(arguments))


def _pycuda_source(args, operation, name, preamble, loop_prep, after_loop, use_range):
    if not isinstance(operation, str) or not operation.strip():
        raise ValueError("operation must be a non-empty string of C code")
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"kernel name must be a C identifier, not {name!r}")
    names = {a.name for a in args}
    if use_range:
        missing = {"start", "stop", "step"} - names
        loop = ("for (i = start + tid * step; step > 0 ? i < stop : i > stop; "
                "i += total_threads * step)")
        index_t = "long long"
    else:
        missing = {"n"} - names
        loop = "for (i = tid; i < n; i += total_threads)"
        index_t = "unsigned long long"
    if missing:
        raise ValueError(f"the argument list of kernel '{name}' must declare "
                         f"{', '.join(sorted(missing))} (the loop bounds)")
    for a in args:
        if a.name in ("i", "tid", "total_threads", "index_t"):
            raise ValueError(f"argument name '{a.name}' is reserved by the elementwise loop")
    return render("elementwise.cu", headers=headers_for([a.dtype for a in args]),
                  preamble=preamble, name=name,
                  params=", ".join(a.declarator() for a in args), unpack="",
                  index_t=index_t, loop_prep=loop_prep, loop=loop, operation=operation,
                  after_loop=after_loop)


@public("barecuda.elementwise")
def get_elwise_module(arguments: str | Sequence[Any], operation: str, name: str = "kernel",
                      keep: bool = False, options: Sequence[str] | None = None,
                      preamble: str = "", loop_prep: str = "",
                      after_loop: str = "") -> SourceModule:
    """get_elwise_module(arguments, operation, name="kernel", keep=False, options=None, preamble="", loop_prep="", after_loop="")

    PyCUDA's module builder: a SourceModule holding the kernel `name` whose
    parameters are `arguments` (VectorArg/ScalarArg list or C declarations) exactly
    as declared, looping ``i`` over ``0 <= i < n``.  The arguments must declare the
    count ``n`` themselves (PyCUDA's callers append ``ScalarArg(np.uintp, "n")``);
    prepare the Function with ``"".join(a.struct_char for a in arguments)``.
    """
    args = _as_args(arguments)
    src = _pycuda_source(args, operation, name, preamble, loop_prep, after_loop, False)
    return _getter_module(src, options, keep)


@public("barecuda.elementwise")
def get_elwise_range_module(arguments: str | Sequence[Any], operation: str,
                            name: str = "kernel", keep: bool = False,
                            options: Sequence[str] | None = None, preamble: str = "",
                            loop_prep: str = "", after_loop: str = "") -> SourceModule:
    """get_elwise_range_module(arguments, operation, name="kernel", keep=False, options=None, preamble="", loop_prep="", after_loop="")

    As get_elwise_module, but ``i`` runs over ``range(start, stop, step)``: the
    arguments must declare ``start``, ``stop`` and ``step`` (intp scalars).
    """
    args = _as_args(arguments)
    src = _pycuda_source(args, operation, name, preamble, loop_prep, after_loop, True)
    return _getter_module(src, options, keep)


def _struct_chars(args):
    return "".join(a.struct_char for a in args)


@public("barecuda.elementwise")
def get_elwise_kernel_and_types(arguments: str | Sequence[Any], operation: str,
                                name: str = "kernel", keep: bool = False,
                                options: Sequence[str] | None = None, use_range: bool = False,
                                **kwargs: Any) -> tuple[SourceModule, Function, list[Any]]:
    """get_elwise_kernel_and_types(arguments, operation, name="kernel", keep=False, options=None, use_range=False, preamble="", loop_prep="", after_loop="")

    PyCUDA's (module, prepared Function, argument list): `arguments` plus
    ``n`` (uintp) or, with `use_range`, ``start, stop, step`` (intp) appended; the
    Function is prepared with their struct characters.  The caller's list is not
    modified.
    """
    args = _as_args(arguments)
    if use_range:
        args += [ScalarArg(np.intp, "start"), ScalarArg(np.intp, "stop"),
                 ScalarArg(np.intp, "step")]
        builder = get_elwise_range_module
    else:
        args.append(ScalarArg(np.uintp, "n"))
        builder = get_elwise_module
    mod = builder(args, operation, name, keep, options, **kwargs)
    func = mod.get_function(name)
    func.prepare(_struct_chars(args))
    return mod, func, args


@public("barecuda.elementwise")
def get_elwise_kernel(arguments: str | Sequence[Any], operation: str, name: str = "kernel",
                      keep: bool = False, options: Sequence[str] | None = None,
                      **kwargs: Any) -> Function:
    """get_elwise_kernel(arguments, operation, name="kernel", keep=False, options=None, **kwargs)

    PyCUDA's helper: the prepared Function of get_elwise_kernel_and_types, launched
    as ``f.prepared_call(grid, block, *args, n)`` (any grid: the loop strides).
    """
    return get_elwise_kernel_and_types(arguments, operation, name, keep, options,
                                       **kwargs)[1]


@public("barecuda.elementwise")
class PointerTextureRef:
    """The stand-in for a texture reference that barecuda's kernel getters return.

    It names a ``__device__`` variable (a pointer and an element count) of the
    kernel's module.  ``set_address(devptr, nbytes)`` - called by
    ``GPUArray.bind_to_texref(_ext)`` - writes the array's address there (a small
    synchronous host-to-device copy); the kernel then reads element k as
    ``tex1Dfetch`` would, 0 when k is out of range or nothing is bound.
    ``set_format``, ``set_flags`` and the address/filter modes are recorded only:
    the kernel reads elements of `dtype` directly.
    """

    def __init__(self, module: Any, symbol: str, dtype: npt.DTypeLike) -> None:
        self.module = module
        self.symbol = symbol
        self.dtype = np.dtype(dtype)
        self.address = 0
        self.nbytes = 0
        self.format = None
        self.flags = 0
        self._modes = {}

    def set_address(self, devptr: Any, bytes: int, allow_offset: bool = False) -> int:
        """set_address(devptr, bytes, allow_offset=False): bind `bytes` bytes at `devptr`.

        `devptr` is an int or anything with ``int()`` (DeviceAllocation).  Returns
        0, the byte offset (the pointer is used as it is).  TypeError/ValueError for
        a non-integer or negative size or address.
        """
        ptr = _int_value(devptr, "devptr")
        size = _int_value(bytes, "bytes")
        if ptr < 0 or size < 0:
            raise ValueError(f"set_address(): address and size must not be negative "
                             f"(got {ptr:#x}, {size})")
        gptr, _ = self.module.get_global(self.symbol)
        count = size // self.dtype.itemsize if ptr else 0
        _drv.memcpy_htod(gptr, np.array([ptr, count], dtype=np.uint64))
        self.address, self.nbytes = ptr, size
        return 0

    def get_address(self) -> int:
        """The device address bound last (0 when none)."""
        return self.address

    def set_format(self, fmt: Any, num_channels: int) -> None:
        """Recorded only (the kernel reads elements of `dtype`)."""
        self.format = (fmt, num_channels)

    def get_format(self) -> Any:
        """The (format, channels) given to set_format, or None."""
        return self.format

    def set_flags(self, flags: int) -> None:
        """Recorded only."""
        self.flags = flags

    def get_flags(self) -> int:
        """The flags given to set_flags."""
        return self.flags

    def set_address_mode(self, dim: int, mode: Any) -> None:
        """Recorded only (out-of-range reads give 0, as a border)."""
        self._modes[("address", dim)] = mode

    def set_filter_mode(self, mode: Any) -> None:
        """Recorded only (reads are of whole elements)."""
        self._modes["filter"] = mode

    def set_array(self, ary: Any) -> None:
        """Not supported: these references read linear memory only."""
        raise TypeError("a barecuda kernel getter's texture-reference stand-in reads "
                        "linear memory: bind a GPUArray (bind_to_texref_ext) or call "
                        "set_address(), not set_array()")

    def __repr__(self) -> str:
        return (f"<PointerTextureRef {self.symbol} of {self.dtype}, bound to "
                f"{self.address:#x} ({self.nbytes} bytes)>")


def _int_value(v, what):
    if isinstance(v, (float, complex, str, bytes)) or not hasattr(v, "__int__"):
        raise TypeError(f"set_address(): {what} must be an int, not {type(v).__name__}")
    return int(v)


_TEXREF_PREAMBLE = """
template <typename T> struct bc_pointer_texref { const T *ptr; unsigned long long count; };
template <typename T, typename I>
__device__ __forceinline__ T bc_texref_fetch(const bc_pointer_texref<T> &r, I k)
{
    const long long j = (long long)k;
    return (r.ptr != 0 && j >= 0 && (unsigned long long)j < r.count)
           ? r.ptr[j] : barecuda::bc_cast<T>(0);
}
"""


def _texref_decls(ctype, names):
    return _TEXREF_PREAMBLE + "\n".join(
        f"__device__ bc_pointer_texref<{ctype} > {n};" for n in names)


def _dt(d, what="dtype"):
    if d is None:
        raise TypeError(f"{what} may not be None")
    try:
        dt = np.dtype(d)
    except TypeError as exc:
        raise TypeError(f"{what}: {exc}") from None
    dtype_to_ctype(dt)      # TypeError for a dtype with no C type
    return dt


def _idx_dt(d):
    dt = _dt(d, "idx_dtype")
    if dt.kind not in "iu":
        raise TypeError(f"index dtype must be an integer dtype, not {dt}")
    return dt


def _vec_count(n):
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise ValueError(f"vec_count must be a positive int, got {n!r}")
    return n


def _ct(dt):
    return dtype_to_ctype(dt)


def _cast(dt, expr):
    return f"barecuda::bc_cast<{_ct(dt)} >({expr})"


def _real_of(dt):
    return np.dtype(np.float32) if dt == np.complex64 else np.dtype(np.float64)


_kernel = get_elwise_kernel
_vec = VectorArg


@public("barecuda.elementwise")
def get_take_kernel(dtype: npt.DTypeLike, idx_dtype: npt.DTypeLike, vec_count: int = 1) -> Any:
    """get_take_kernel(dtype, idx_dtype, vec_count=1) -> (Function, [PointerTextureRef])

    ``dest<k>[i] = src<k>[idx[i]]``: launch with ``(idx, dest0 .. dest<vec_count-1>,
    n)`` after binding each source array to its reference
    (``src.bind_to_texref_ext(refs[k])``).  Prepared ``"P" + "P"*vec_count + "L"``.
    """
    return _take(_dt(dtype), _idx_dt(idx_dtype), _vec_count(vec_count))


@context_dependent_memoize
def _take(dt, idt, count):
    ct = _ct(dt)
    names = [f"bc_tex_src{k}" for k in range(count)]
    args = [_vec(idt, "idx")] + [_vec(dt, f"dest{k}") for k in range(count)]
    body = "\n".join(f"dest{k}[i] = bc_texref_fetch({names[k]}, bc_src_idx);"
                     for k in range(count))
    mod, func, _ = get_elwise_kernel_and_types(
        args, f"const {_ct(idt)} bc_src_idx = idx[i];\n" + body, "take",
        preamble=_texref_decls(ct, names))
    return func, [PointerTextureRef(mod, n, dt) for n in names]


@public("barecuda.elementwise")
def get_take_put_kernel(dtype: npt.DTypeLike, idx_dtype: npt.DTypeLike, with_offsets: bool,
                        vec_count: int = 1) -> Any:
    """get_take_put_kernel(dtype, idx_dtype, with_offsets, vec_count=1) -> (Function, [PointerTextureRef])

    ``dest<k>[dest_idx[i]] = src<k>[src_idx[i] (+ offset<k>)]``: launch with
    ``(dest_idx, src_idx, dest0.., [offset0.. of idx_dtype], n)``, the sources
    bound to the references.
    """
    return _take_put(_dt(dtype), _idx_dt(idx_dtype), bool(with_offsets),
                     _vec_count(vec_count))


@context_dependent_memoize
def _take_put(dt, idt, with_offsets, count):
    names = [f"bc_tex_src{k}" for k in range(count)]
    args = [_vec(idt, "gmem_dest_idx"), _vec(idt, "gmem_src_idx")]
    args += [_vec(dt, f"dest{k}") for k in range(count)]
    if with_offsets:
        args += [ScalarArg(idt, f"offset{k}") for k in range(count)]
    it = _ct(idt)
    body = [f"const {it} bc_src_idx = gmem_src_idx[i];",
            f"const {it} bc_dest_idx = gmem_dest_idx[i];"]
    for k in range(count):
        src = f"bc_src_idx + offset{k}" if with_offsets else "bc_src_idx"
        body.append(f"dest{k}[bc_dest_idx] = bc_texref_fetch({names[k]}, {src});")
    mod, func, _ = get_elwise_kernel_and_types(args, "\n".join(body), "take_put",
                                               preamble=_texref_decls(_ct(dt), names))
    return func, [PointerTextureRef(mod, n, dt) for n in names]


@public("barecuda.elementwise")
def get_put_kernel(dtype: npt.DTypeLike, idx_dtype: npt.DTypeLike, vec_count: int = 1) -> Any:
    """get_put_kernel(dtype, idx_dtype, vec_count=1) -> Function

    ``dest<k>[dest_idx[i]] = src<k>[i]``: launch with ``(dest_idx, dest0..,
    src0.., n)``.
    """
    return _put(_dt(dtype), _idx_dt(idx_dtype), _vec_count(vec_count))


@context_dependent_memoize
def _put(dt, idt, count):
    args = ([_vec(idt, "gmem_dest_idx")] + [_vec(dt, f"dest{k}") for k in range(count)]
            + [_vec(dt, f"src{k}") for k in range(count)])
    body = f"const {_ct(idt)} bc_dest_idx = gmem_dest_idx[i];\n" + "\n".join(
        f"dest{k}[bc_dest_idx] = src{k}[i];" for k in range(count))
    return _kernel(args, body, "put")


@public("barecuda.elementwise")
def get_copy_kernel(dtype_dest: npt.DTypeLike, dtype_src: npt.DTypeLike) -> Any:
    """get_copy_kernel(dtype_dest, dtype_src) -> Function

    ``dest[i] = src[i]`` converted as NumPy's astype (unsafe casting); launch
    with ``(dest, src, n)``.
    """
    return _copy(_dt(dtype_dest, "dtype_dest"), _dt(dtype_src, "dtype_src"))


@context_dependent_memoize
def _copy(dd, ds):
    return _kernel([_vec(dd, "dest"), _vec(ds, "src")], f"dest[i] = {_cast(dd, 'src[i]')}",
                   "copy")


@public("barecuda.elementwise")
def get_linear_combination_kernel(summand_descriptors: Any, dtype_z: npt.DTypeLike) -> Any:
    """get_linear_combination_kernel(summand_descriptors, dtype_z) -> (Function, [PointerTextureRef])

    ``z[i] = a0*x0[i] + a1*x1[i] + ...``; `summand_descriptors` holds one
    ``(is_gpu_scalar, scalar_dtype, vector_dtype)`` per summand.  A CPU factor is a
    by-value parameter before its vector; a GPU factor (``is_gpu_scalar``) is read
    from element 0 of a device array bound to that summand's reference (PyCUDA read
    it through a texture reference; bind the same way:
    ``a_gpu.bind_to_texref_ext(refs[k])``, or ``refs[k].set_address(ptr, nbytes)``).
    The references are listed in summand order, GPU factors only.  Launch with
    ``([a_k,] x_k ..., z, n)``.
    """
    try:
        desc = tuple((bool(g), _dt(s, "scalar_dtype"), _dt(v, "vector_dtype"))
                     for g, s, v in summand_descriptors)
    except (TypeError, ValueError) as exc:
        if isinstance(exc, TypeError) and "dtype" in str(exc):
            raise
        raise TypeError("summand_descriptors must be (is_gpu_scalar, scalar_dtype, "
                        "vector_dtype) triples") from None
    if not desc:
        raise ValueError("get_linear_combination_kernel needs at least one summand")
    return _linear_combination(desc, _dt(dtype_z, "dtype_z"))


@context_dependent_memoize
def _linear_combination(desc, dz):
    args, prep, terms, refs = [], [], [], []
    for k, (on_gpu, sdt, vdt) in enumerate(desc):
        if on_gpu:
            refs.append((f"bc_tex_a{k}", sdt))
            prep.append(f"const {_ct(sdt)} a{k} = bc_texref_fetch(bc_tex_a{k}, 0)")
        else:
            args.append(ScalarArg(sdt, f"a{k}"))
        args.append(_vec(vdt, f"x{k}"))
        terms.append(f"{_cast(dz, f'a{k}')} * {_cast(dz, f'x{k}[i]')}")
    args.append(_vec(dz, "z"))
    preamble = _TEXREF_PREAMBLE + "".join(
        f"\n__device__ bc_pointer_texref<{_ct(s)} > {n};" for n, s in refs)
    mod, func, _ = get_elwise_kernel_and_types(
        args, "z[i] = " + " + ".join(terms), "linear_combination",
        preamble=preamble, loop_prep=";\n".join(prep))
    return func, [PointerTextureRef(mod, n, s) for n, s in refs]


def _operand_type(dz, dother):
    """PyCUDA's rule: operands are computed in z's type, or in its real type for a
    real operand of a complex result."""
    if dz.kind == "c" and dother.kind != "c":
        return _real_of(dz)
    return dz


@public("barecuda.elementwise")
def get_axpbyz_kernel(dtype_x: npt.DTypeLike, dtype_y: npt.DTypeLike, dtype_z: npt.DTypeLike,
                      x_is_scalar: bool = False, y_is_scalar: bool = False) -> Any:
    """get_axpbyz_kernel(dtype_x, dtype_y, dtype_z, x_is_scalar=False, y_is_scalar=False) -> Function

    ``z[i] = a*x[i] + b*y[i]``; launch with ``(a, x, b, y, z, n)`` (a of dtype_x,
    b of dtype_y).  `x_is_scalar`/`y_is_scalar`: that array has one element, read
    as x[0] / y[0].
    """
    return _axpbyz(_dt(dtype_x, "dtype_x"), _dt(dtype_y, "dtype_y"),
                   _dt(dtype_z, "dtype_z"), bool(x_is_scalar), bool(y_is_scalar))


@context_dependent_memoize
def _axpbyz(dx, dy, dz, xs, ys):
    tx, ty = _operand_type(dz, dx), _operand_type(dz, dy)
    x = "x[0]" if xs else "x[i]"
    y = "y[0]" if ys else "y[i]"
    expr = (f"{_cast(tx, 'a')} * {_cast(tx, x)} + "
            f"{_cast(ty, 'b')} * {_cast(ty, y)}")
    return _kernel([ScalarArg(dx, "a"), _vec(dx, "x"), ScalarArg(dy, "b"), _vec(dy, "y"),
                    _vec(dz, "z")], f"z[i] = {_cast(dz, expr)}", "axpbyz")


@public("barecuda.elementwise")
def get_axpbz_kernel(dtype_x: npt.DTypeLike, dtype_z: npt.DTypeLike) -> Any:
    """get_axpbz_kernel(dtype_x, dtype_z) -> Function

    ``z[i] = a*x[i] + b`` computed in dtype_z; launch with ``(a, x, b, z, n)``
    (a and b of dtype_z).
    """
    return _axpbz(_dt(dtype_x, "dtype_x"), _dt(dtype_z, "dtype_z"))


@context_dependent_memoize
def _axpbz(dx, dz):
    return _kernel([ScalarArg(dz, "a"), _vec(dx, "x"), ScalarArg(dz, "b"), _vec(dz, "z")],
                   f"z[i] = a * {_cast(dz, 'x[i]')} + b", "axpb")


_ARITH_OPS = {"+", "-", "*", "/"}
_INT_OPS = {"%", "&", "|", "^", "<<", ">>"}
_COMPARE_OPS = {"==", "!=", "<", "<=", ">", ">="}
_LOGICAL_OPS = {"&&", "||"}


def _check_operator(operator, dtypes):
    if not isinstance(operator, str):
        raise TypeError(f"operator must be a str such as '+', not {type(operator).__name__}")
    op = operator.strip()
    if op not in _ARITH_OPS | _INT_OPS | _COMPARE_OPS | _LOGICAL_OPS:
        raise ValueError(f"unsupported operator {operator!r}: use one of "
                         f"{' '.join(sorted(_ARITH_OPS | _INT_OPS | _COMPARE_OPS | _LOGICAL_OPS))}")
    if op in _INT_OPS and any(d.kind not in "iub" for d in dtypes):
        raise TypeError(f"operator {op!r} needs integer dtypes, got "
                        f"{', '.join(str(d) for d in dtypes)}")
    return op


def _op_expr(op, x, dx, y, dy, dz):
    """``x op y`` with PyCUDA's operand casts for arithmetic; comparisons and logical
    operators compare the operands in their common type."""
    if op in _COMPARE_OPS or op in _LOGICAL_OPS:
        common = np.result_type(dx, dy)
        if op in _LOGICAL_OPS:
            return f"({_cast(np.bool_, x)} {op} {_cast(np.bool_, y)})"
        return f"({_cast(common, x)} {op} {_cast(common, y)})"
    tx, ty = _operand_type(dz, dx), _operand_type(dz, dy)
    return f"({_cast(tx, x)} {op} {_cast(ty, y)})"


@public("barecuda.elementwise")
def get_binary_op_kernel(dtype_x: npt.DTypeLike, dtype_y: npt.DTypeLike,
                         dtype_z: npt.DTypeLike, operator: str, x_is_scalar: bool = False,
                         y_is_scalar: bool = False) -> Any:
    """get_binary_op_kernel(dtype_x, dtype_y, dtype_z, operator, x_is_scalar=False, y_is_scalar=False) -> Function

    ``z[i] = x[i] <operator> y[i]`` (x[0]/y[0] for a scalar array); launch with
    ``(x, y, z, n)``.  `operator`: + - * / % & | ^ << >> == != < <= > >= && ||;
    ValueError for any other, TypeError for a bitwise one on non-integers.
    """
    dts = (_dt(dtype_x, "dtype_x"), _dt(dtype_y, "dtype_y"), _dt(dtype_z, "dtype_z"))
    op = _check_operator(operator, dts[:2])
    return _binary_op(*dts, op, bool(x_is_scalar), bool(y_is_scalar))


@context_dependent_memoize
def _binary_op(dx, dy, dz, op, xs, ys):
    expr = _op_expr(op, "x[0]" if xs else "x[i]", dx, "y[0]" if ys else "y[i]", dy, dz)
    return _kernel([_vec(dx, "x"), _vec(dy, "y"), _vec(dz, "z")],
                   f"z[i] = {_cast(dz, expr)}", "multiply")


@public("barecuda.elementwise")
def get_rdivide_elwise_kernel(dtype_x: npt.DTypeLike, dtype_z: npt.DTypeLike) -> Any:
    """get_rdivide_elwise_kernel(dtype_x, dtype_z) -> Function

    ``z[i] = y / x[i]`` for a scalar y of dtype_z; launch with ``(x, y, z, n)``.
    """
    return _rdivide(_dt(dtype_x, "dtype_x"), _dt(dtype_z, "dtype_z"))


@context_dependent_memoize
def _rdivide(dx, dz):
    return _kernel([_vec(dx, "x"), ScalarArg(dz, "y"), _vec(dz, "z")],
                   f"z[i] = y / {_cast(dz, 'x[i]')}", "divide_r")


def _check_func(func):
    if not isinstance(func, str):
        raise TypeError(f"func must be the name of a device function, not {type(func).__name__}")
    parts = func.split("::")
    if not all(p.isidentifier() for p in parts[1 if func.startswith("::") else 0:]):
        raise ValueError(f"func must name a device function (a C identifier such as "
                         f"'fmaxf' or 'barecuda::abs'), not {func!r}")
    return func


def _func_kernel_name(func):
    return func.split("::")[-1] + "_kernel"


@public("barecuda.elementwise")
def get_binary_func_kernel(func: str, dtype_x: npt.DTypeLike, dtype_y: npt.DTypeLike,
                           dtype_z: npt.DTypeLike) -> Any:
    """get_binary_func_kernel(func, dtype_x, dtype_y, dtype_z) -> Function

    ``z[i] = func(x[i], y[i])`` for a device function named `func` (e.g. "fmaxf",
    "atan2"); launch with ``(x, y, z, n)``.
    """
    return _binary_func(_check_func(func), _dt(dtype_x, "dtype_x"),
                        _dt(dtype_y, "dtype_y"), _dt(dtype_z, "dtype_z"), False)


@public("barecuda.elementwise")
def get_binary_func_scalar_kernel(func: str, dtype_x: npt.DTypeLike, dtype_y: npt.DTypeLike,
                                  dtype_z: npt.DTypeLike) -> Any:
    """get_binary_func_scalar_kernel(func, dtype_x, dtype_y, dtype_z) -> Function

    ``z[i] = func(x[i], y)`` for a scalar y of dtype_y; launch with ``(x, y, z, n)``.
    """
    return _binary_func(_check_func(func), _dt(dtype_x, "dtype_x"),
                        _dt(dtype_y, "dtype_y"), _dt(dtype_z, "dtype_z"), True)


@context_dependent_memoize
def _binary_func(func, dx, dy, dz, scalar):
    y = ScalarArg(dy, "y") if scalar else _vec(dy, "y")
    expr = f"{func}(x[i], {'y' if scalar else 'y[i]'})"
    return _kernel([_vec(dx, "x"), y, _vec(dz, "z")], f"z[i] = {_cast(dz, expr)}",
                   _func_kernel_name(func))


@public("barecuda.elementwise")
def get_binary_minmax_kernel(func: str, dtype_x: npt.DTypeLike, dtype_y: npt.DTypeLike,
                             dtype_z: npt.DTypeLike, use_scalar: bool) -> Any:
    """get_binary_minmax_kernel(func, dtype_x, dtype_y, dtype_z, use_scalar) -> Function

    Elementwise maximum/minimum (`func` "max" or "min"): fmax/fmin (NaN-ignoring)
    for floating dtypes, max/min for integers, computed in dtype_z.  As
    get_binary_func_scalar_kernel with `use_scalar`, else get_binary_func_kernel.
    """
    if func not in ("max", "min"):
        raise ValueError(f"func must be 'max' or 'min', not {func!r}")
    dts = (_dt(dtype_x, "dtype_x"), _dt(dtype_y, "dtype_y"), _dt(dtype_z, "dtype_z"))
    if any(d.kind == "c" for d in dts):
        raise TypeError("maximum/minimum of complex dtypes is not supported")
    return _minmax2(func, *dts, bool(use_scalar))


@context_dependent_memoize
def _minmax2(func, dx, dy, dz, scalar):
    if dz.kind == "f" or dx.kind == "f" or dy.kind == "f":
        ct = np.dtype(np.float32) if dz == np.float32 else np.dtype(np.float64)
        name = "f" + func + ("f" if ct == np.float32 else "")
    else:
        ct, name = dz, func
    y = "y" if scalar else "y[i]"
    expr = f"{name}({_cast(ct, 'x[i]')}, {_cast(ct, y)})"
    yarg = ScalarArg(dy, "y") if scalar else _vec(dy, "y")
    return _kernel([_vec(dx, "x"), yarg, _vec(dz, "z")], f"z[i] = {_cast(dz, expr)}",
                   name + "_kernel")


@public("barecuda.elementwise")
def get_fill_kernel(dtype: npt.DTypeLike) -> Any:
    """get_fill_kernel(dtype) -> Function: ``z[i] = a``; launch with ``(a, z, n)``."""
    return _fill_k(_dt(dtype))


@context_dependent_memoize
def _fill_k(dt):
    return _kernel([ScalarArg(dt, "a"), _vec(dt, "z")], "z[i] = a", "fill")


@public("barecuda.elementwise")
def get_reverse_kernel(dtype: npt.DTypeLike) -> Any:
    """get_reverse_kernel(dtype) -> Function: ``z[i] = y[n-1-i]``; launch with ``(y, z, n)``."""
    return _reverse(_dt(dtype))


@context_dependent_memoize
def _reverse(dt):
    return _kernel([_vec(dt, "y"), _vec(dt, "z")], "z[i] = y[n - 1 - i]", "reverse")


def _part_kernel(dtype, out_dtype, part):
    dt, dout = _dt(dtype), _dt(out_dtype)
    return _part(dt, dout, part)


@context_dependent_memoize
def _part(dt, dout, part):
    if part == "conj":
        expr = "barecuda::conj(y[i])"
    elif dt.kind != "c":
        expr = "y[i]" if part == "real" else "0"
    else:
        expr = f"barecuda::{part}(y[i])"
    return _kernel([_vec(dt, "y"), _vec(dout, "z")], f"z[i] = {_cast(dout, expr)}", part)


@public("barecuda.elementwise")
def get_real_kernel(dtype: npt.DTypeLike, real_dtype: npt.DTypeLike) -> Any:
    """get_real_kernel(dtype, real_dtype) -> Function: ``z[i] = real(y[i])``; launch with ``(y, z, n)``."""
    return _part_kernel(dtype, real_dtype, "real")


@public("barecuda.elementwise")
def get_imag_kernel(dtype: npt.DTypeLike, real_dtype: npt.DTypeLike) -> Any:
    """get_imag_kernel(dtype, real_dtype) -> Function: ``z[i] = imag(y[i])``; launch with ``(y, z, n)``."""
    return _part_kernel(dtype, real_dtype, "imag")


@public("barecuda.elementwise")
def get_conj_kernel(dtype: npt.DTypeLike, conj_dtype: npt.DTypeLike) -> Any:
    """get_conj_kernel(dtype, conj_dtype) -> Function: ``z[i] = conj(y[i])``; launch with ``(y, z, n)``."""
    return _part_kernel(dtype, conj_dtype, "conj")


@public("barecuda.elementwise")
def get_arange_kernel(dtype: npt.DTypeLike) -> Any:
    """get_arange_kernel(dtype) -> Function: ``z[i] = start + i*step``; launch with ``(z, start, step, n)``."""
    return _arange(_dt(dtype))


@context_dependent_memoize
def _arange(dt):
    if dt.kind == "c" or dt == np.float16:
        expr = f"start + {_cast(dt, 'i')} * step"
    else:
        expr = f"{_cast(dt, f'start + ({_ct(dt)})i * step')}"
    return _kernel([_vec(dt, "z"), ScalarArg(dt, "start"), ScalarArg(dt, "step")],
                   f"z[i] = {expr}", "arange")


@public("barecuda.elementwise")
def get_pow_array_kernel(dtype_x: npt.DTypeLike, dtype_y: npt.DTypeLike,
                         dtype_z: npt.DTypeLike, is_base_array: bool,
                         is_exp_array: bool) -> Any:
    """get_pow_array_kernel(dtype_x, dtype_y, dtype_z, is_base_array, is_exp_array) -> Function

    ``z[i] = x ** y`` with x and/or y arrays (the other a scalar of its dtype);
    launch with ``(x, y, z, n)``.  Computed with powf for float32 results, complex
    pow for complex ones, pow in double otherwise.  ValueError when neither is an
    array.
    """
    if not is_base_array and not is_exp_array:
        raise ValueError("get_pow_array_kernel: at least one of the base and the "
                         "exponent must be an array")
    return _pow(_dt(dtype_x, "dtype_x"), _dt(dtype_y, "dtype_y"), _dt(dtype_z, "dtype_z"),
                bool(is_base_array), bool(is_exp_array))


@context_dependent_memoize
def _pow(dx, dy, dz, xa, ya):
    x = "x[i]" if xa else "x"
    y = "y[i]" if ya else "y"
    if dz.kind == "c":
        expr = f"barecuda::pow({_cast(dz, x)}, {_cast(dz, y)})"
    elif dz == np.float32:
        expr = f"powf({_cast(np.float32, x)}, {_cast(np.float32, y)})"
    else:
        expr = f"pow({_cast(np.float64, x)}, {_cast(np.float64, y)})"
    args = [_vec(dx, "x") if xa else ScalarArg(dx, "x"),
            _vec(dy, "y") if ya else ScalarArg(dy, "y"), _vec(dz, "z")]
    return _kernel(args, f"z[i] = {_cast(dz, expr)}", "pow_method")


@context_dependent_memoize
@public("barecuda.elementwise")
def get_fmod_kernel() -> Any:
    """get_fmod_kernel() -> Function: float32 ``z[i] = fmod(arg[i], mod[i])``; launch with ``(arg, mod, z, n)``."""
    return _kernel("float *arg, float *mod, float *z", "z[i] = fmodf(arg[i], mod[i])",
                   "fmod_kernel")


@context_dependent_memoize
@public("barecuda.elementwise")
def get_modf_kernel() -> Any:
    """get_modf_kernel() -> Function: float32 ``fracpart[i] = modf(x[i], &intpart[i])``; launch with ``(x, intpart, fracpart, n)``."""
    return _kernel("float *x, float *intpart, float *fracpart",
                   "fracpart[i] = modff(x[i], &intpart[i])", "modf_kernel")


@context_dependent_memoize
@public("barecuda.elementwise")
def get_frexp_kernel() -> Any:
    """get_frexp_kernel() -> Function: float32 mantissa and exponent of x; launch with ``(x, significand, exponent, n)``."""
    return _kernel("float *x, float *significand, float *exponent",
                   "int bc_e = 0; significand[i] = frexpf(x[i], &bc_e); exponent[i] = bc_e",
                   "frexp_kernel")


@context_dependent_memoize
@public("barecuda.elementwise")
def get_ldexp_kernel() -> Any:
    """get_ldexp_kernel() -> Function: float32 ``z[i] = ldexp(sig[i], int(expt[i]))``; launch with ``(sig, expt, z, n)``."""
    return _kernel("float *sig, float *expt, float *z",
                   "z[i] = ldexpf(sig[i], (int)expt[i])", "ldexp_kernel")


@public("barecuda.elementwise")
def get_unary_func_kernel(func_name: str, in_dtype: npt.DTypeLike,
                          out_dtype: npt.DTypeLike = None) -> Any:
    """get_unary_func_kernel(func_name, in_dtype, out_dtype=None) -> Function

    ``z[i] = func_name(y[i])`` for a device function (e.g. "sin", "fabs"; complex
    arguments find barecuda's complex overloads); launch with ``(y, z, n)``.
    """
    din = _dt(in_dtype, "in_dtype")
    dout = din if out_dtype is None else _dt(out_dtype, "out_dtype")
    return _unary_func(_check_func(func_name), din, dout)


@context_dependent_memoize
def _unary_func(func, din, dout):
    return _kernel([_vec(din, "y"), _vec(dout, "z")], f"z[i] = {_cast(dout, f'{func}(y[i])')}",
                   _func_kernel_name(func))


@public("barecuda.elementwise")
def get_if_positive_kernel(crit_dtype: npt.DTypeLike, dtype: npt.DTypeLike) -> Any:
    """get_if_positive_kernel(crit_dtype, dtype) -> Function

    ``result[i] = crit[i] > 0 ? then_[i] : else_[i]``; launch with ``(crit, then_,
    else_, result, n)``.
    """
    dc = _dt(crit_dtype, "crit_dtype")
    if dc.kind == "c":
        raise TypeError("the criterion of if_positive cannot be complex")
    return _select(dc, _dt(dtype), "> 0")


@public("barecuda.elementwise")
def get_where_kernel(crit_dtype: npt.DTypeLike, dtype: npt.DTypeLike) -> Any:
    """get_where_kernel(crit_dtype, dtype) -> Function

    ``result[i] = crit[i] != 0 ? then_[i] : else_[i]``; launch with ``(crit, then_,
    else_, result, n)``.
    """
    return _select(_dt(crit_dtype, "crit_dtype"), _dt(dtype), "!= 0")


@context_dependent_memoize
def _select(dc, dt, test):
    crit = _cast(np.bool_, "crit[i]") if test == "!= 0" else f"crit[i] > {_cast(dc, 0)}"
    return _kernel([_vec(dc, "crit"), _vec(dt, "then_"), _vec(dt, "else_"),
                    _vec(dt, "result")], f"result[i] = {crit} ? then_[i] : else_[i]",
                   "if_positive")


@public("barecuda.elementwise")
def get_scalar_op_kernel(dtype_x: npt.DTypeLike, dtype_a: npt.DTypeLike,
                         dtype_y: npt.DTypeLike, operator: str) -> Any:
    """get_scalar_op_kernel(dtype_x, dtype_a, dtype_y, operator) -> Function

    ``y[i] = x[i] <operator> a`` for a scalar a of dtype_a; launch with ``(x, a, y,
    n)``.  Operators as get_binary_op_kernel.
    """
    dts = (_dt(dtype_x, "dtype_x"), _dt(dtype_a, "dtype_a"), _dt(dtype_y, "dtype_y"))
    return _scalar_op(*dts, _check_operator(operator, dts[:2]))


@context_dependent_memoize
def _scalar_op(dx, da, dy, op):
    expr = _op_expr(op, "x[i]", dx, "a", da, dy)
    return _kernel([_vec(dx, "x"), ScalarArg(da, "a"), _vec(dy, "y")],
                   f"y[i] = {_cast(dy, expr)}", "scalarop_kernel")


@public("barecuda.elementwise")
def get_logical_not_kernel(dtype_x: npt.DTypeLike, dtype_out: npt.DTypeLike) -> Any:
    """get_logical_not_kernel(dtype_x, dtype_out) -> Function: ``out[i] = (x[i] == 0)``; launch with ``(x, out, n)``."""
    return _logical_not(_dt(dtype_x, "dtype_x"), _dt(dtype_out, "dtype_out"))


@context_dependent_memoize
def _logical_not(dx, dout):
    return _kernel([_vec(dx, "x"), _vec(dout, "out")],
                   f"out[i] = {_cast(dout, '!' + _cast(np.bool_, 'x[i]'))}", "logical_not")
