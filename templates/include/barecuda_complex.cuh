// SPDX-License-Identifier: MIT
// barecuda::complex<T>: complex arithmetic for NumPy's complex64 (complex<float>) and
// complex128 (complex<double>), laid out as NumPy stores them (real, imaginary; aligned
// to twice the component size).  `pycuda::complex` is an alias for code written for PyCUDA.
#ifndef BARECUDA_COMPLEX_CUH
#define BARECUDA_COMPLEX_CUH

namespace barecuda {

template <typename T>
struct alignas(2 * sizeof(T)) complex {
    T re, im;
    complex() = default;
    __host__ __device__ constexpr complex(T r, T i = T(0)) : re(r), im(i) {}
    template <typename U>
    __host__ __device__ explicit constexpr complex(const complex<U> &o) : re(T(o.re)), im(T(o.im)) {}
    __host__ __device__ constexpr T real() const { return re; }
    __host__ __device__ constexpr T imag() const { return im; }
    __device__ complex &operator+=(const complex &o) { re += o.re; im += o.im; return *this; }
    __device__ complex &operator-=(const complex &o) { re -= o.re; im -= o.im; return *this; }
    __device__ complex &operator*=(const complex &o) { *this = *this * o; return *this; }
    __device__ complex &operator/=(const complex &o) { *this = *this / o; return *this; }
    friend __device__ __forceinline__ complex operator+(const complex &a, const complex &b) { return complex(a.re + b.re, a.im + b.im); }
    friend __device__ __forceinline__ complex operator-(const complex &a, const complex &b) { return complex(a.re - b.re, a.im - b.im); }
    friend __device__ __forceinline__ complex operator-(const complex &a) { return complex(-a.re, -a.im); }
    friend __device__ __forceinline__ complex operator+(const complex &a) { return a; }
    friend __device__ __forceinline__ complex operator*(const complex &a, const complex &b)
    {
        return complex(a.re * b.re - a.im * b.im, a.re * b.im + a.im * b.re);
    }
    // Smith's algorithm, as NumPy divides.
    friend __device__ __forceinline__ complex operator/(const complex &a, const complex &b)
    {
        T abr = b.re < T(0) ? -b.re : b.re, abi = b.im < T(0) ? -b.im : b.im;
        if (abr >= abi) {
            if (abr == T(0) && abi == T(0))
                return complex(a.re / abr, a.im / abi);
            T rat = b.im / b.re, scl = T(1) / (b.re + b.im * rat);
            return complex((a.re + a.im * rat) * scl, (a.im - a.re * rat) * scl);
        }
        T rat = b.re / b.im, scl = T(1) / (b.im + b.re * rat);
        return complex((a.re * rat + a.im) * scl, (a.im * rat - a.re) * scl);
    }
    friend __device__ __forceinline__ bool operator==(const complex &a, const complex &b) { return a.re == b.re && a.im == b.im; }
    friend __device__ __forceinline__ bool operator!=(const complex &a, const complex &b) { return !(a == b); }
    // NumPy orders complex numbers lexicographically.
    friend __device__ __forceinline__ bool operator<(const complex &a, const complex &b) { return a.re < b.re || (a.re == b.re && a.im < b.im); }
    friend __device__ __forceinline__ bool operator>(const complex &a, const complex &b) { return b < a; }
    friend __device__ __forceinline__ bool operator<=(const complex &a, const complex &b) { return a.re < b.re || (a.re == b.re && a.im <= b.im); }
    friend __device__ __forceinline__ bool operator>=(const complex &a, const complex &b) { return b <= a; }
};

// Real numbers are their own conjugates (NumPy's conjugate accepts them).
template <typename T> __device__ __forceinline__ T conj(const T &x) { return x; }
template <typename T> __device__ __forceinline__ T real(const complex<T> &z) { return z.re; }
template <typename T> __device__ __forceinline__ T imag(const complex<T> &z) { return z.im; }
template <typename T> __device__ __forceinline__ complex<T> conj(const complex<T> &z) { return complex<T>(z.re, -z.im); }
template <typename T> __device__ __forceinline__ T norm(const complex<T> &z) { return z.re * z.re + z.im * z.im; }
__device__ __forceinline__ float abs(const complex<float> &z) { return hypotf(z.re, z.im); }
__device__ __forceinline__ double abs(const complex<double> &z) { return hypot(z.re, z.im); }
__device__ __forceinline__ float arg(const complex<float> &z) { return atan2f(z.im, z.re); }
__device__ __forceinline__ double arg(const complex<double> &z) { return atan2(z.im, z.re); }

__device__ __forceinline__ complex<float> exp(const complex<float> &z)
{
    float s, c, e = expf(z.re);
    sincosf(z.im, &s, &c);
    return complex<float>(e * c, e * s);
}
__device__ __forceinline__ complex<double> exp(const complex<double> &z)
{
    double s, c, e = ::exp(z.re);
    sincos(z.im, &s, &c);
    return complex<double>(e * c, e * s);
}
__device__ __forceinline__ complex<float> log(const complex<float> &z) { return complex<float>(logf(abs(z)), arg(z)); }
__device__ __forceinline__ complex<double> log(const complex<double> &z) { return complex<double>(::log(abs(z)), arg(z)); }
template <typename T> __device__ __forceinline__ complex<T> log10(const complex<T> &z)
{
    complex<T> l = log(z);
    const T inv_ln10 = T(0.43429448190325182765);
    return complex<T>(l.re * inv_ln10, l.im * inv_ln10);
}
template <typename T> __device__ __forceinline__ complex<T> sqrt(const complex<T> &z)
{
    // Principal root, computed without cancellation.
    T a = abs(z);
    if (a == T(0))
        return complex<T>(T(0), z.im);
    T t = ::sqrt((a + (z.re < T(0) ? -z.re : z.re)) * T(0.5));
    if (z.re >= T(0))
        return complex<T>(t, z.im / (T(2) * t));
    return complex<T>((z.im < T(0) ? -z.im : z.im) / (T(2) * t), z.im < T(0) ? -t : t);
}
template <typename T> __device__ __forceinline__ complex<T> sin(const complex<T> &z)
{
    return complex<T>(::sin(z.re) * ::cosh(z.im), ::cos(z.re) * ::sinh(z.im));
}
template <typename T> __device__ __forceinline__ complex<T> cos(const complex<T> &z)
{
    return complex<T>(::cos(z.re) * ::cosh(z.im), -::sin(z.re) * ::sinh(z.im));
}
template <typename T> __device__ __forceinline__ complex<T> sinh(const complex<T> &z)
{
    return complex<T>(::sinh(z.re) * ::cos(z.im), ::cosh(z.re) * ::sin(z.im));
}
template <typename T> __device__ __forceinline__ complex<T> cosh(const complex<T> &z)
{
    return complex<T>(::cosh(z.re) * ::cos(z.im), ::sinh(z.re) * ::sin(z.im));
}
template <typename T> __device__ __forceinline__ complex<T> tanh(const complex<T> &z)
{
    // tanh(x+iy) = (sinh 2x + i sin 2y) / (cosh 2x + cos 2y), with the large-|x| limit.
    if ((z.re < T(0) ? -z.re : z.re) > T(20))
        return complex<T>(z.re > T(0) ? T(1) : T(-1), T(0) * ::sin(T(2) * z.im));
    T d = ::cosh(T(2) * z.re) + ::cos(T(2) * z.im);
    return complex<T>(::sinh(T(2) * z.re) / d, ::sin(T(2) * z.im) / d);
}
template <typename T> __device__ __forceinline__ complex<T> tan(const complex<T> &z)
{
    // tan(z) = -i tanh(i z)
    complex<T> t = tanh(complex<T>(-z.im, z.re));
    return complex<T>(t.im, -t.re);
}
template <typename T> __device__ __forceinline__ complex<T> pow(const complex<T> &a, const complex<T> &b)
{
    if (a.re == T(0) && a.im == T(0))
        return (b.re == T(0) && b.im == T(0)) ? complex<T>(T(1), T(0)) : complex<T>(T(0), T(0));
    return exp(b * log(a));
}

}  // namespace barecuda

namespace pycuda = barecuda;

#endif
