// SPDX-License-Identifier: MIT
// <pycuda-complex.hpp>: pycuda::complex<float> and pycuda::complex<double> for kernels
// written for PyCUDA.  pycuda::complex is barecuda::complex (see barecuda_complex.cuh,
// which lists the API): one type, one implementation, laid out as NumPy's complex64
// and complex128.
//
// As PyCUDA's, a default-constructed pycuda::complex is zero, when this header is the
// first to bring the type in (it defines BARECUDA_COMPLEX_ZERO_INIT first).  Where
// barecuda's own kernels included barecuda_complex.cuh before (ElementwiseKernel,
// ReductionKernel and the scans put their headers ahead of the preamble) the type is
// already defined, trivially default-constructible: initialise values explicitly there.
//
// May be included inside SourceModule's extern "C" { } wrapper (the declarations sit
// in extern "C++"), or with no_extern_c=True.
#ifndef BARECUDA_PYCUDA_COMPLEX_HPP
#define BARECUDA_PYCUDA_COMPLEX_HPP

#if !defined(BARECUDA_COMPLEX_CUH) && !defined(BARECUDA_COMPLEX_ZERO_INIT)
#define BARECUDA_COMPLEX_ZERO_INIT 1
#endif
#include <barecuda_complex.cuh>

#endif
