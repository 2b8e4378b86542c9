// SPDX-License-Identifier: MIT
// barecuda::complex<T>: complex arithmetic for NumPy's complex64 (complex<float>) and
// complex128 (complex<double>), laid out as NumPy stores them (real, imaginary; aligned
// to twice the component size).  `pycuda::complex` is the same type under PyCUDA's
// name (<pycuda-complex.hpp> includes this header), with PyCUDA's API: arithmetic with
// complex and real operands, ==/!= against both, real()/imag() to read and to set,
// widening conversion (complex<float> -> complex<double>) implicit and narrowing
// explicit, and real, imag, abs, arg, norm, conj, polar, exp, log, log10, pow, sqrt,
// sin, cos, tan, sinh, cosh, tanh.
//
// A default-constructed complex is left uninitialised (the type stays trivial, so it
// may sit in __shared__ memory and in unions), unless BARECUDA_COMPLEX_ZERO_INIT is
// defined before the first inclusion: then it is zero, as PyCUDA's is.
// <pycuda-complex.hpp> defines that macro.
//
// Everything sits in an extern "C++" block, so the header may be included inside
// SourceModule's extern "C" { } wrapper.
#ifndef BARECUDA_COMPLEX_CUH
#define BARECUDA_COMPLEX_CUH

extern "C++" {
namespace barecuda {

namespace detail {
template <bool C, typename R = void> struct enable_if {};
template <typename R> struct enable_if<true, R> { typedef R type; };
}  // namespace detail

template <typename T>
struct alignas(2 * sizeof(T)) complex {
    typedef T value_type;
    T re, im;
#ifdef BARECUDA_COMPLEX_ZERO_INIT
    __host__ __device__ constexpr complex() : re(T(0)), im(T(0)) {}
#else
    complex() = default;
#endif
    __host__ __device__ constexpr complex(T r, T i = T(0)) : re(r), im(i) {}
    // From complex<U>: implicit where no precision is lost (float -> double), explicit
    // where it may be.
    template <typename U, typename detail::enable_if<(sizeof(U) < sizeof(T)), int>::type = 0>
    __host__ __device__ constexpr complex(const complex<U> &o) : re(T(o.re)), im(T(o.im)) {}
    template <typename U, typename detail::enable_if<(sizeof(U) >= sizeof(T)), long>::type = 0>
    __host__ __device__ explicit constexpr complex(const complex<U> &o) : re(T(o.re)), im(T(o.im)) {}
    __host__ __device__ constexpr T real() const { return re; }
    __host__ __device__ constexpr T imag() const { return im; }
    __host__ __device__ void real(T v) { re = v; }
    __host__ __device__ void imag(T v) { im = v; }

    __device__ complex &operator=(T x) { re = x; im = T(0); return *this; }
    __device__ complex &operator+=(const complex &o) { re += o.re; im += o.im; return *this; }
    __device__ complex &operator-=(const complex &o) { re -= o.re; im -= o.im; return *this; }
    __device__ complex &operator*=(const complex &o) { *this = *this * o; return *this; }
    __device__ complex &operator/=(const complex &o) { *this = *this / o; return *this; }
    __device__ complex &operator+=(T x) { re += x; return *this; }
    __device__ complex &operator-=(T x) { re -= x; return *this; }
    __device__ complex &operator*=(T x) { re *= x; im *= x; return *this; }
    __device__ complex &operator/=(T x) { re /= x; im /= x; return *this; }
    template <typename U> __device__ complex &operator+=(const complex<U> &o) { return *this += complex(T(o.re), T(o.im)); }
    template <typename U> __device__ complex &operator-=(const complex<U> &o) { return *this -= complex(T(o.re), T(o.im)); }
    template <typename U> __device__ complex &operator*=(const complex<U> &o) { return *this *= complex(T(o.re), T(o.im)); }
    template <typename U> __device__ complex &operator/=(const complex<U> &o) { return *this /= complex(T(o.re), T(o.im)); }

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
    // With a real operand: component by component (no 0 * inf from a zero imaginary part).
    friend __device__ __forceinline__ complex operator+(const complex &a, T x) { return complex(a.re + x, a.im); }
    friend __device__ __forceinline__ complex operator+(T x, const complex &a) { return complex(x + a.re, a.im); }
    friend __device__ __forceinline__ complex operator-(const complex &a, T x) { return complex(a.re - x, a.im); }
    friend __device__ __forceinline__ complex operator-(T x, const complex &a) { return complex(x - a.re, -a.im); }
    friend __device__ __forceinline__ complex operator*(const complex &a, T x) { return complex(a.re * x, a.im * x); }
    friend __device__ __forceinline__ complex operator*(T x, const complex &a) { return complex(x * a.re, x * a.im); }
    friend __device__ __forceinline__ complex operator/(const complex &a, T x) { return complex(a.re / x, a.im / x); }
    friend __device__ __forceinline__ complex operator/(T x, const complex &a) { return complex(x, T(0)) / a; }
    friend __device__ __forceinline__ bool operator==(const complex &a, const complex &b) { return a.re == b.re && a.im == b.im; }
    friend __device__ __forceinline__ bool operator!=(const complex &a, const complex &b) { return !(a == b); }
    friend __device__ __forceinline__ bool operator==(const complex &a, T x) { return a.re == x && a.im == T(0); }
    friend __device__ __forceinline__ bool operator==(T x, const complex &a) { return a == x; }
    friend __device__ __forceinline__ bool operator!=(const complex &a, T x) { return !(a == x); }
    friend __device__ __forceinline__ bool operator!=(T x, const complex &a) { return !(a == x); }
    // NumPy orders complex numbers lexicographically.
    friend __device__ __forceinline__ bool operator<(const complex &a, const complex &b) { return a.re < b.re || (a.re == b.re && a.im < b.im); }
    friend __device__ __forceinline__ bool operator>(const complex &a, const complex &b) { return b < a; }
    friend __device__ __forceinline__ bool operator<=(const complex &a, const complex &b) { return a.re < b.re || (a.re == b.re && a.im <= b.im); }
    friend __device__ __forceinline__ bool operator>=(const complex &a, const complex &b) { return b <= a; }
};

namespace detail {
template <typename S> struct is_complex { static const bool value = false; };
template <typename T> struct is_complex<complex<T> > { static const bool value = true; };
}  // namespace detail

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
namespace detail {
// a ** n for an integer n with |n| < 100, by squaring, as NumPy does it: exact where the
// products are (so (1+1j) ** 2 is 2j, not 2j plus a rounding error in the real part).
template <typename T> __device__ __forceinline__ complex<T> pow_int(complex<T> a, int n)
{
    unsigned m = n < 0 ? unsigned(-n) : unsigned(n);
    complex<T> r(T(1), T(0));
    for (; m; m >>= 1) {
        if (m & 1u)
            r = r * a;
        a = a * a;
    }
    return n < 0 ? complex<T>(T(1), T(0)) / r : r;
}
// NumPy's rule for the exponents that need no logarithm: z ** 0 is 1 (even for a NaN z);
// 0 ** w is 0 when Re w > 0 and NaN + NaN i otherwise (0 to a negative or an imaginary
// power has no value); a small integer power goes by squaring.  Returns whether *r was set.
template <typename T> __device__ __forceinline__ bool pow_special(const complex<T> &a, T bre, T bim, complex<T> *r)
{
    if (bre == T(0) && bim == T(0)) {
        *r = complex<T>(T(1), T(0));
        return true;
    }
    if (a.re == T(0) && a.im == T(0)) {
        *r = bre > T(0) ? complex<T>(T(0), T(0)) : complex<T>(T(::nan("")), T(::nan("")));
        return true;
    }
    if (bim == T(0) && bre > T(-100) && bre < T(100) && bre == T(int(bre))) {
        *r = pow_int(a, int(bre));
        return true;
    }
    return false;
}
}  // namespace detail

template <typename T> __device__ __forceinline__ complex<T> pow(const complex<T> &a, const complex<T> &b)
{
    complex<T> r;
    if (detail::pow_special(a, b.re, b.im, &r))
        return r;
    return exp(b * log(a));
}

// rho * (cos theta + i sin theta)
template <typename T> __device__ __forceinline__ complex<T> polar(const T &rho, const T &theta = T(0))
{
    return complex<T>(rho * ::cos(theta), rho * ::sin(theta));
}
// complex ** real: in polar form, |a|^b at angle b * arg(a).
template <typename T, typename S, typename detail::enable_if<!detail::is_complex<S>::value, int>::type = 0>
__device__ __forceinline__ complex<T> pow(const complex<T> &a, const S &b)
{
    const T e = T(b);
    complex<T> r;
    if (detail::pow_special(a, e, T(0), &r))
        return r;
    return polar(T(::pow(abs(a), e)), e * arg(a));
}
// real ** complex: a^b = exp(b ln a), with ln a real for a > 0.
template <typename T, typename S, typename detail::enable_if<!detail::is_complex<S>::value, int>::type = 0>
__device__ __forceinline__ complex<T> pow(const S &a, const complex<T> &b)
{
    const T x = T(a);
    if (x > T(0))
        return polar(T(::pow(x, b.re)), b.im * T(::log(x)));
    return pow(complex<T>(x, T(0)), b);
}

}  // namespace barecuda

namespace pycuda = barecuda;
}  // extern "C++"

#endif
