# SPDX-License-Identifier: MIT
"""The migration check: programs written exactly the PyCUDA way (the tutorial's
"doublify" and its variants, GPUArray arithmetic, ElementwiseKernel "lin_comb",
a ReductionKernel dot product) run with only their imports changed from pycuda
to barecuda.  Each program is kept here as PyCUDA text; the test changes the
imports and runs it in a fresh interpreter (as a user would run a script);
each program compares its result with NumPy itself and prints OK."""

import os
import subprocess
import sys

import pytest

# ------------------------------------------------------------------ the programs

DOUBLIFY = '''
import pycuda.driver as cuda
import pycuda.autoinit
from pycuda.compiler import SourceModule

import numpy
a = numpy.random.randn(4,4)
a = a.astype(numpy.float32)
a_gpu = cuda.mem_alloc(a.nbytes)
cuda.memcpy_htod(a_gpu, a)

mod = SourceModule("""
  __global__ void doublify(float *a)
  {
    int idx = threadIdx.x + threadIdx.y*4;
    a[idx] *= 2;
  }
  """)

func = mod.get_function("doublify")
func(a_gpu, block=(4,4,1))

a_doubled = numpy.empty_like(a)
cuda.memcpy_dtoh(a_doubled, a_gpu)
print(a_doubled)
print(a)
assert numpy.array_equal(a_doubled, 2 * a)
print("OK")
'''

DOUBLIFY_INOUT = '''
import pycuda.driver as cuda
import pycuda.autoinit
from pycuda.compiler import SourceModule
import numpy

a = numpy.random.randn(4,4).astype(numpy.float32)
original = a.copy()
mod = SourceModule("""
  __global__ void doublify(float *a)
  {
    int idx = threadIdx.x + threadIdx.y*4;
    a[idx] *= 2;
  }
  """)
func = mod.get_function("doublify")
func(cuda.InOut(a), block=(4, 4, 1))
assert numpy.array_equal(a, 2 * original)

# In and Out: b = 2 * a without touching a
b = numpy.empty_like(a)
twice = SourceModule("""
  __global__ void twice(float *dest, float *src)
  {
    const int i = threadIdx.x + threadIdx.y*4;
    dest[i] = 2*src[i];
  }
  """).get_function("twice")
twice(cuda.Out(b), cuda.In(a), block=(4, 4, 1), grid=(1, 1))
assert numpy.array_equal(b, 4 * original)
print("OK")
'''

DOUBLIFY_PREPARED = '''
import pycuda.driver as cuda
import pycuda.autoinit
from pycuda.compiler import SourceModule
import numpy

a = numpy.random.randn(4,4).astype(numpy.float32)
a_gpu = cuda.mem_alloc(a.nbytes)
cuda.memcpy_htod(a_gpu, a)
mod = SourceModule("""
  __global__ void doublify(float *a)
  {
    int idx = threadIdx.x + threadIdx.y*4;
    a[idx] *= 2;
  }
  """)
func = mod.get_function("doublify")
func.prepare("P")
grid = (1, 1)
block = (4, 4, 1)
func.prepared_call(grid, block, a_gpu)
elapsed = func.prepared_timed_call(grid, block, a_gpu)()
assert elapsed >= 0
a_quadrupled = numpy.empty_like(a)
cuda.memcpy_dtoh(a_quadrupled, a_gpu)
assert numpy.array_equal(a_quadrupled, 4 * a)
print("OK")
'''

GPUARRAY_DOUBLIFY = '''
import pycuda.gpuarray as gpuarray
import pycuda.driver as cuda
import pycuda.autoinit
import numpy

a = numpy.random.randn(4,4).astype(numpy.float32)
a_gpu = gpuarray.to_gpu(a)
a_doubled = (2*a_gpu).get()
print(a_doubled)
print(a_gpu)
assert numpy.array_equal(a_doubled, 2 * a)
assert numpy.array_equal(a_gpu.get(), a)
print("OK")
'''

LIN_COMB = '''
import pycuda.gpuarray as gpuarray
import pycuda.driver as cuda
import pycuda.autoinit
import numpy
from pycuda.curandom import rand as curand

a_gpu = curand((50,))
b_gpu = curand((50,))

from pycuda.elementwise import ElementwiseKernel
lin_comb = ElementwiseKernel(
        "float a, float *x, float b, float *y, float *z",
        "z[i] = a*x[i] + b*y[i]",
        "linear_combination")

c_gpu = gpuarray.empty_like(a_gpu)
lin_comb(5, a_gpu, 6, b_gpu, c_gpu)

import numpy.linalg as la
assert la.norm((c_gpu - (5*a_gpu+6*b_gpu)).get()) < 1e-5
a, b = a_gpu.get(), b_gpu.get()
assert ((0 <= a) & (a < 1)).all()
assert numpy.allclose(c_gpu.get(), 5 * a + 6 * b, rtol=1e-6, atol=1e-6)
print("OK")
'''

DOT_PRODUCT = '''
import pycuda.gpuarray as gpuarray
import pycuda.driver as cuda
import pycuda.autoinit
import numpy
from pycuda.reduction import ReductionKernel

a = gpuarray.arange(400, dtype=numpy.float32)
b = gpuarray.arange(400, dtype=numpy.float32)

krnl = ReductionKernel(numpy.float32, neutral="0",
        reduce_expr="a+b", map_expr="x[i]*y[i]",
        arguments="float *x, float *y")

my_dot_prod = krnl(a, b).get()
x = numpy.arange(400, dtype=numpy.float64)
assert abs(my_dot_prod - numpy.dot(x, x)) <= 1e-5 * numpy.dot(x, x), my_dot_prod
assert abs(gpuarray.dot(a, b).get() - numpy.dot(x, x)) <= 1e-6 * numpy.dot(x, x)

r = numpy.random.randn(100000).astype(numpy.float32)
r_gpu = gpuarray.to_gpu(r)
total = gpuarray.sum(r_gpu).get()
assert abs(total - r.astype(numpy.float64).sum()) < 1e-2
print("OK")
'''

STREAMS_AND_EVENTS = '''
import pycuda.driver as drv
import pycuda.autoinit
import pycuda.gpuarray as gpuarray
from pycuda.compiler import SourceModule
import numpy

mod = SourceModule("""
__global__ void multiply_them(float *dest, float *a, float *b)
{
  const int i = threadIdx.x;
  dest[i] = a[i] * b[i];
}
""")
multiply_them = mod.get_function("multiply_them")

a = numpy.random.randn(400).astype(numpy.float32)
b = numpy.random.randn(400).astype(numpy.float32)
dest = numpy.zeros_like(a)
multiply_them(drv.Out(dest), drv.In(a), drv.In(b), block=(400,1,1), grid=(1,1))
assert numpy.array_equal(dest, a * b)

stream = drv.Stream()
start, end = drv.Event(), drv.Event()
host = drv.pagelocked_empty(400, numpy.float32)
host[:] = a
a_gpu = gpuarray.to_gpu_async(host, stream=stream)
b_gpu = gpuarray.to_gpu_async(b, stream=stream)
d_gpu = gpuarray.empty_like(a_gpu)
start.record(stream)
multiply_them(d_gpu, a_gpu, b_gpu, block=(400,1,1), grid=(1,1), stream=stream)
end.record(stream)
end.synchronize()
assert start.time_till(end) >= 0
stream.synchronize()
assert numpy.array_equal(d_gpu.get(), a * b)
print("OK")
'''

PROGRAMS = {
    "doublify": DOUBLIFY,
    "doublify_inout": DOUBLIFY_INOUT,
    "doublify_prepared": DOUBLIFY_PREPARED,
    "gpuarray_doublify": GPUARRAY_DOUBLIFY,
    "lin_comb": LIN_COMB,
    "dot_product": DOT_PRODUCT,
    "streams_and_events": STREAMS_AND_EVENTS,
}


def port(program):
    """The migration: change the imports, nothing else."""
    return program.replace("pycuda", "barecuda")


# ------------------------------------------------------------------ the checks

@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_only_imports_change(name):
    before = PROGRAMS[name].splitlines()
    after = port(PROGRAMS[name]).splitlines()
    assert len(before) == len(after)
    changed = [a for b, a in zip(before, after) if a != b]
    assert changed, "the program should import pycuda"
    for line in changed:
        assert line.startswith(("import ", "from ")), line
    compile(port(PROGRAMS[name]), name, "exec")


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_pycuda_program_runs_on_barecuda(name, tmp_path):
    env = dict(os.environ)
    proc = subprocess.run([sys.executable, "-c", port(PROGRAMS[name])], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"{name} failed:\n{out}"
    assert proc.stdout.rstrip().endswith("OK"), out
