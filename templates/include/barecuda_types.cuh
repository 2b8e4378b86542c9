// SPDX-License-Identifier: MIT
// Device helpers shared by barecuda's generated kernels: NumPy-style casts between every
// supported type (bool, integers, __half, float, double, barecuda::complex), warp
// shuffles of any trivially copyable type, and NumPy's floor division, remainder and
// integer power.  Define BC_HAVE_HALF after including <cuda_fp16.h> for float16 support.
#ifndef BARECUDA_TYPES_CUH
#define BARECUDA_TYPES_CUH

extern "C++" {  // usable inside an extern "C" { } block
namespace barecuda {

template <typename T> struct is_complex { static const bool value = false; };
template <typename T> struct is_complex<complex<T> > { static const bool value = true; };

// bc_cast<To>(x): NumPy's unsafe cast (complex -> real keeps the real part).
template <typename To, typename From> struct caster {
    static __device__ __forceinline__ To run(const From &x) { return (To)x; }
};
template <typename To, typename T> struct caster<To, complex<T> > {
    static __device__ __forceinline__ To run(const complex<T> &x) { return (To)x.re; }
};
template <typename T> struct caster<bool, complex<T> > {
    static __device__ __forceinline__ bool run(const complex<T> &x) { return x.re != T(0) || x.im != T(0); }
};
template <typename T, typename From> struct caster<complex<T>, From> {
    static __device__ __forceinline__ complex<T> run(const From &x) { return complex<T>((T)x, T(0)); }
};
template <typename T, typename U> struct caster<complex<T>, complex<U> > {
    static __device__ __forceinline__ complex<T> run(const complex<U> &x) { return complex<T>((T)x.re, (T)x.im); }
};
#ifdef BC_HAVE_HALF
template <typename From> struct caster<__half, From> {
    static __device__ __forceinline__ __half run(const From &x) { return __float2half_rn((float)x); }
};
template <> struct caster<__half, double> {
    static __device__ __forceinline__ __half run(const double &x) { return __double2half(x); }
};
template <> struct caster<__half, __half> {
    static __device__ __forceinline__ __half run(const __half &x) { return x; }
};
template <typename T> struct caster<__half, complex<T> > {
    static __device__ __forceinline__ __half run(const complex<T> &x) { return caster<__half, T>::run(x.re); }
};
template <typename To> struct caster<To, __half> {
    static __device__ __forceinline__ To run(const __half &x) { return (To)__half2float(x); }
};
template <> struct caster<bool, __half> {
    static __device__ __forceinline__ bool run(const __half &x) { return __half2float(x) != 0.0f; }
};
template <typename T> struct caster<complex<T>, __half> {
    static __device__ __forceinline__ complex<T> run(const __half &x) { return complex<T>((T)__half2float(x), T(0)); }
};
#endif
template <typename To, typename From> __device__ __forceinline__ To bc_cast(const From &x)
{
    return caster<To, From>::run(x);
}

// Warp shuffles of any trivially copyable type, 32 bits at a time.
template <typename T> __device__ __forceinline__ T shfl_down(const T &v, unsigned int delta)
{
    const int W = (sizeof(T) + 3) / 4;
    int w[W];
    w[W - 1] = 0;
    memcpy(w, &v, sizeof(T));
#pragma unroll
    for (int k = 0; k < W; k++)
        w[k] = __shfl_down_sync(0xffffffffu, w[k], delta);
    T r;
    memcpy(&r, w, sizeof(T));
    return r;
}
template <typename T> __device__ __forceinline__ T shfl_up(const T &v, unsigned int delta)
{
    const int W = (sizeof(T) + 3) / 4;
    int w[W];
    w[W - 1] = 0;
    memcpy(w, &v, sizeof(T));
#pragma unroll
    for (int k = 0; k < W; k++)
        w[k] = __shfl_up_sync(0xffffffffu, w[k], delta);
    T r;
    memcpy(&r, w, sizeof(T));
    return r;
}
template <typename T> __device__ __forceinline__ T shfl_idx(const T &v, int lane)
{
    const int W = (sizeof(T) + 3) / 4;
    int w[W];
    w[W - 1] = 0;
    memcpy(w, &v, sizeof(T));
#pragma unroll
    for (int k = 0; k < W; k++)
        w[k] = __shfl_sync(0xffffffffu, w[k], lane);
    T r;
    memcpy(&r, w, sizeof(T));
    return r;
}

// NumPy's floor division and remainder (sign of the divisor; 0 for integer division by 0).
template <typename T> __device__ __forceinline__ T floordiv_int(T a, T b)
{
    if (b == T(0))
        return T(0);
    if (T(-1) < T(0) && b == T(-1))
        return (T)(T(0) - a);
    T q = a / b;
    if (T(-1) < T(0) && (a % b != T(0)) && ((a < T(0)) != (b < T(0))))
        q -= T(1);
    return q;
}
template <typename T> __device__ __forceinline__ T mod_int(T a, T b)
{
    if (b == T(0) || (T(-1) < T(0) && b == T(-1)))
        return T(0);
    T r = a % b;
    if (T(-1) < T(0) && r != T(0) && ((r < T(0)) != (b < T(0))))
        r += b;
    return r;
}
template <typename T> __device__ __forceinline__ T mod_float(T a, T b)
{
    if (b == T(0))
        return ::fmod(a, b);
    T m = ::fmod(a, b);
    if (m != T(0)) {
        if ((b < T(0)) != (m < T(0)))
            m += b;
    } else {
        m = ::copysign(T(0), b);
    }
    return m;
}
template <typename T> __device__ __forceinline__ T floordiv_float(T a, T b)
{
    if (b == T(0))
        return a / b;
    T m = ::fmod(a, b);
    T div = (a - m) / b;
    if (m != T(0) && ((b < T(0)) != (m < T(0))))
        div -= T(1);
    T fl;
    if (div != T(0)) {
        fl = ::floor(div);
        if (div - fl > T(0.5))
            fl += T(1);
    } else {
        fl = ::copysign(T(0), a / b);
    }
    return fl;
}
template <typename T> __device__ __forceinline__ T pow_int(T a, T b)
{
    if (T(-1) < T(0) && b < T(0))
        return T(0);
    T r = T(1);
    while (b != T(0)) {
        if (b & T(1))
            r *= a;
        a *= a;
        b >>= 1;
    }
    return r;
}

}  // namespace barecuda
}  // extern "C++"

#endif
