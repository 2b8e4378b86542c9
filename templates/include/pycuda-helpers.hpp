// SPDX-License-Identifier: MIT
// <pycuda-helpers.hpp>: PyCUDA's helpers for reading double and complex values through
// textures and surfaces, which only carry 32-bit components: a double travels as an
// int2, a complex<float> as a uint2, a complex<double> as an int4.
//
// PyCUDA's versions take texture and surface *references*, which CUDA 12 removed.  The
// ones here take texture and surface *objects* (cudaTextureObject_t,
// cudaSurfaceObject_t; see barecuda.driver.TextureObject), so the value type cannot
// come from the reference's declaration: name it as a template argument,
//
//     double v = fp_tex1Dfetch<double>(tex, i);
//     pycuda::complex<float> z = fp_tex2D<pycuda::complex<float> >(tex, x, y);
//
// where the texture object was made over an array (or linear memory) of the transport
// type: fp_tex_double (int2, 2 x 32-bit signed), fp_tex_cfloat (uint2) or
// fp_tex_cdouble (int4), with element-type reads (no normalisation, no filtering).
// Any other type T is fetched as it is (tex1Dfetch<T>, ...).  The surface helpers take
// the value type from their argument, as PyCUDA's do, and address element (i, j, ...)
// (the byte offset i * sizeof(transport type) is computed here).
//
// May be included inside SourceModule's extern "C" { } wrapper (the declarations sit
// in extern "C++"), or with no_extern_c=True.
#ifndef BARECUDA_PYCUDA_HELPERS_HPP
#define BARECUDA_PYCUDA_HELPERS_HPP

#include <pycuda-complex.hpp>

extern "C++" {

typedef float fp_tex_float;
typedef int2 fp_tex_double;
typedef uint2 fp_tex_cfloat;
typedef int4 fp_tex_cdouble;

namespace barecuda {
namespace detail {
// Reassembly of a value from its 32-bit transport words, and the reverse.
template <typename T> struct fp_transport {
    typedef T type;
    static __device__ __forceinline__ T unpack(const T &v) { return v; }
    static __device__ __forceinline__ T pack(const T &v) { return v; }
};
template <> struct fp_transport<double> {
    typedef fp_tex_double type;
    static __device__ __forceinline__ double unpack(const int2 &v) { return __hiloint2double(v.y, v.x); }
    static __device__ __forceinline__ int2 pack(double d) { return make_int2(__double2loint(d), __double2hiint(d)); }
};
template <> struct fp_transport<complex<float> > {
    typedef fp_tex_cfloat type;
    static __device__ __forceinline__ complex<float> unpack(const uint2 &v)
    {
        return complex<float>(__uint_as_float(v.x), __uint_as_float(v.y));
    }
    static __device__ __forceinline__ uint2 pack(const complex<float> &z)
    {
        return make_uint2(__float_as_uint(z.re), __float_as_uint(z.im));
    }
};
template <> struct fp_transport<complex<double> > {
    typedef fp_tex_cdouble type;
    static __device__ __forceinline__ complex<double> unpack(const int4 &v)
    {
        return complex<double>(__hiloint2double(v.y, v.x), __hiloint2double(v.w, v.z));
    }
    static __device__ __forceinline__ int4 pack(const complex<double> &z)
    {
        return make_int4(__double2loint(z.re), __double2hiint(z.re), __double2loint(z.im), __double2hiint(z.im));
    }
};
}  // namespace detail
}  // namespace barecuda

// Texture fetches: element i of a 1-D texture over linear memory; (x, y), (x, y) of a
// layer, (x, y, z) of 2-D, layered and 3-D textures (coordinates as tex2D takes them).
template <typename T> __device__ __forceinline__ T fp_tex1Dfetch(cudaTextureObject_t tex, int i)
{
    typedef barecuda::detail::fp_transport<T> tr;
    return tr::unpack(tex1Dfetch<typename tr::type>(tex, i));
}
template <typename T> __device__ __forceinline__ T fp_tex2D(cudaTextureObject_t tex, float x, float y)
{
    typedef barecuda::detail::fp_transport<T> tr;
    return tr::unpack(tex2D<typename tr::type>(tex, x, y));
}
template <typename T> __device__ __forceinline__ T fp_tex2DLayered(cudaTextureObject_t tex, float x, float y, int layer)
{
    typedef barecuda::detail::fp_transport<T> tr;
    return tr::unpack(tex2DLayered<typename tr::type>(tex, x, y, layer));
}
template <typename T> __device__ __forceinline__ T fp_tex3D(cudaTextureObject_t tex, float x, float y, float z)
{
    typedef barecuda::detail::fp_transport<T> tr;
    return tr::unpack(tex3D<typename tr::type>(tex, x, y, z));
}

// Surface writes and reads of element (i, j, layer) or (i, j, k).
template <typename T>
__device__ __forceinline__ void fp_surf2DLayeredwrite(T var, cudaSurfaceObject_t surf, int i, int j, int layer,
                                                      cudaSurfaceBoundaryMode mode = cudaBoundaryModeTrap)
{
    typedef barecuda::detail::fp_transport<T> tr;
    surf2DLayeredwrite(tr::pack(var), surf, i * (int)sizeof(typename tr::type), j, layer, mode);
}
template <typename T>
__device__ __forceinline__ void fp_surf3Dwrite(T var, cudaSurfaceObject_t surf, int i, int j, int k,
                                               cudaSurfaceBoundaryMode mode = cudaBoundaryModeTrap)
{
    typedef barecuda::detail::fp_transport<T> tr;
    surf3Dwrite(tr::pack(var), surf, i * (int)sizeof(typename tr::type), j, k, mode);
}
template <typename T>
__device__ __forceinline__ void fp_surf2DLayeredread(T *var, cudaSurfaceObject_t surf, int i, int j, int layer,
                                                     cudaSurfaceBoundaryMode mode = cudaBoundaryModeTrap)
{
    typedef barecuda::detail::fp_transport<T> tr;
    typename tr::type v;
    surf2DLayeredread(&v, surf, i * (int)sizeof(typename tr::type), j, layer, mode);
    *var = tr::unpack(v);
}
template <typename T>
__device__ __forceinline__ void fp_surf3Dread(T *var, cudaSurfaceObject_t surf, int i, int j, int k,
                                              cudaSurfaceBoundaryMode mode = cudaBoundaryModeTrap)
{
    typedef barecuda::detail::fp_transport<T> tr;
    typename tr::type v;
    surf3Dread(&v, surf, i * (int)sizeof(typename tr::type), j, k, mode);
    *var = tr::unpack(v);
}

}  // extern "C++"

#endif
