# SPDX-License-Identifier: MIT
"""The arrays floor: GPUArray and its operations (barecuda.gpuarray is its face).

Bottom up: layout (dtypes, shapes, strides, memory), kept (host arrays page-locked
in place), core (copies, fills, casts), dlpack (export), array (the GPUArray class),
then the operations on it: ops (NumPy's dtype rules), strided, arith, create,
reduce, logic, gather, shape, interop.  Importing any of them loads this package,
which wires the floor up once: GPUArray's operators and reductions get the
functions that implement them (array.register_operations), and the kernel
templates below get the array type and its factories (barecuda._kernels.arrays).
"""

from barecuda._array import arith, array, create, gather, interop, logic, reduce, shape
from barecuda._kernels import arrays as _kernel_arrays

array.register_operations(binary=arith._binary, unary=arith._unary, sum=reduce.sum,
                          max=reduce.max, min=reduce.min, mean=reduce.mean, dot=reduce.dot,
                          any=logic.any, all=logic.all, zeros_like=create.zeros_like)
_kernel_arrays.register(array.GPUArray, scalar=array._new_scalar, view=interop._device_view)
