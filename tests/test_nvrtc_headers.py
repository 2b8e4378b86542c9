# SPDX-License-Identifier: MIT
"""The C/C++ library headers barecuda gives NVRTC (templates/include/nvrtc), the
force-included prelude (uint, ushort, ulong), PyCUDA's <pycuda-complex.hpp> and
<pycuda-helpers.hpp>, and compiler's PyCUDA names (compile_plain,
preprocess_source, get_nvcc_version, DEFAULT_NVCC_FLAGS, CudaModule).

NVRTC runs on the CPU, so every header is compiled here, inside SourceModule's
extern "C" wrapper and without it, with static_asserts checking the values the
headers define; the GPU tests run pycuda::complex against NumPy and printf."""

import os
import shutil
import warnings

import numpy as np
import pytest
from conftest import need_curand_headers

from barecuda import compiler
from barecuda import driver as drv

ARCH = "sm_90"
WRAPS = [pytest.param(True, id="extern_c"), pytest.param(False, id="no_extern_c")]


def ptx(src, wrap=True, options=None):
    """PTX text of `src`, compiled on the CPU (no cache)."""
    image = compiler.compile(src, arch=ARCH, target="ptx", no_extern_c=not wrap,
                             cache_dir=False, options=options)
    return image.decode() if isinstance(image, bytes) else image


def kernel(includes, body, decls=""):
    return "\n".join(f"#include <{h}>" for h in includes) + f"""
{decls}
__global__ void k(float *y, double *d, long long *q)
{{
{body}
}}
"""


# One kernel per header: it includes the header, uses what the header declares and
# checks the values with static_assert, so a wrong constant fails on the CPU.
HEADERS = {
    "stdio.h": ("""
        printf("%d %s\\n", EOF, "x");
        int packed[2] = {1, 2};
        vprintf("%d %d\\n", (const char *)packed);
        FILE *f = NULL; (void)f;
        size_t n = BUFSIZ; y[0] = n + SEEK_END;""",
                "static_assert(EOF == -1, \"EOF\");"),
    "math.h": ("""
        y[0] = M_PI + M_E + M_SQRT2 + M_LN2 + M_PI_2 + M_1_PI + M_2_SQRTPI + M_PIf;
        y[1] = INFINITY + HUGE_VALF; d[0] = HUGE_VAL; y[2] = NAN;
        q[0] = fpclassify(y[3]) + fpclassify(d[1]) + isnormal(y[4]) + isnormal(d[2]);
        q[1] = isgreater(y[5], 1.0) + isgreaterequal(d[3], d[4]) + isless(y[6], y[7])
             + islessequal(d[5], 2.0f) + islessgreater(y[8], y[9]) + isunordered(y[10], d[6]);
        float_t ft = y[11]; double_t dt = d[7]; d[8] = ft + dt;""",
               """
        static_assert(M_PI > 3.14159265358979 && M_PI < 3.14159265358980, "M_PI");
        static_assert(M_E > 2.71828182845904 && M_E < 2.71828182845905, "M_E");
        static_assert(M_SQRT1_2 * M_SQRT2 > 0.999999999999 && M_SQRT1_2 * M_SQRT2 < 1.000000000001, "M_SQRT");
        static_assert(INFINITY > 3.4e38f && HUGE_VAL > 1.7e308, "infinities");
        static_assert(sizeof(INFINITY) == 4 && sizeof(NAN) == 4 && sizeof(HUGE_VAL) == 8, "types");
        static_assert(FP_NAN != FP_NORMAL && FP_ZERO != FP_SUBNORMAL, "FP_");
        __constant__ float c_inf = INFINITY;  // a constant expression
        """),
    "stdint.h": ("""
        int64_t a = INT64_MAX; uint32_t b = UINT32_MAX; int8_t c = INT8_MIN;
        uintptr_t p = (uintptr_t)y; intmax_t m = INTMAX_MIN; uint_fast16_t f = 3;
        int_least8_t l = INT_LEAST8_MAX;
        q[0] = a + b + c + p + m + f + l + UINT64_C(5) + INT32_C(-7) + (long long)SIZE_MAX;""",
                 """
        static_assert(sizeof(int8_t) == 1 && sizeof(int16_t) == 2 && sizeof(int32_t) == 4
                      && sizeof(int64_t) == 8 && sizeof(uintptr_t) == sizeof(void *), "widths");
        static_assert(INT8_MIN == -128 && INT16_MAX == 32767 && UINT16_MAX == 65535, "8/16");
        static_assert(INT32_MIN == -2147483647 - 1 && UINT32_MAX == 4294967295u, "32");
        static_assert(INT64_MAX == 9223372036854775807LL && UINT64_MAX == 18446744073709551615ULL, "64");
        static_assert((int64_t)-1 < 0 && (uint64_t)-1 > 0, "signedness");
        #if UINT64_C(1) != 1 || INT64_C(-1) >= 0
        #error the _C macros must work in #if
        #endif
        """),
    "inttypes.h": ("""
        int64_t a = q[0]; uint64_t b = q[1]; uint32_t c = 3;
        printf("%" PRId64 " %" PRIu64 " %" PRIx64 " %" PRIu32 " %" PRIiMAX "\\n", a, b, b, c, (intmax_t)a);
        q[2] = imaxabs(-a) + imaxdiv(a, 7).rem;""",
                   """
        __device__ constexpr bool same(const char *a, const char *b)
        { return *a == *b && (*a == 0 || same(a + 1, b + 1)); }
        static_assert(same(PRId64, "lld") && same(PRIu32, "u") && same(PRIx8, "hhx")
                      && same(SCNd16, "hd") && same(PRIdPTR, "lld"), "formats");
        """),
    "stddef.h": ("""
        ptrdiff_t d0 = y - (float *)NULL; q[0] = d0 + offsetof(S, b) + sizeof(max_align_t);""",
                 "struct S { char a; double b; };"),
    "stdlib.h": ("""
        float *p = (float *)malloc(8); free(p);
        q[0] = abs(-1) + labs(-2L) + llabs(-3LL) + EXIT_FAILURE + RAND_MAX;
        div_t r = div(7, -2); ldiv_t s = ldiv(-7L, 2L); lldiv_t t = lldiv(9LL, 4LL);
        q[1] = r.quot * 100 + r.rem * 10 + s.quot + s.rem + t.quot + t.rem;""",
                 "static_assert(EXIT_SUCCESS == 0 && EXIT_FAILURE == 1, \"exit\");"),
    "string.h": ("memcpy(y, y + 1, sizeof(float)); memset(d, 0, sizeof(double));", ""),
    "limits.h": ("q[0] = INT_MAX + (long long)CHAR_BIT + SHRT_MIN + UCHAR_MAX + CHAR_MIN + LLONG_MIN;",
                 """
        static_assert(CHAR_BIT == 8 && SCHAR_MIN == -128 && UCHAR_MAX == 255, "char");
        static_assert(CHAR_MIN == ((char)-1 < 0 ? SCHAR_MIN : 0), "char sign");
        static_assert(INT_MAX == 2147483647 && INT_MIN == -INT_MAX - 1 && UINT_MAX == 4294967295u, "int");
        static_assert(LONG_MAX == (sizeof(long) == 8 ? 9223372036854775807L : 2147483647L), "long");
        static_assert(LLONG_MAX == 9223372036854775807LL && ULLONG_MAX == 18446744073709551615ULL, "ll");
        """),
    "float.h": ("y[0] = FLT_EPSILON + FLT_MAX + FLT_MIN + FLT_TRUE_MIN; d[0] = DBL_EPSILON + DBL_MAX + DBL_MIN;",
                """
        static_assert(1.0f + FLT_EPSILON != 1.0f && 1.0f + FLT_EPSILON / 2 == 1.0f, "FLT_EPSILON");
        static_assert(1.0 + DBL_EPSILON != 1.0 && 1.0 + DBL_EPSILON / 2 == 1.0, "DBL_EPSILON");
        static_assert(FLT_MAX == 3.40282346638528859812e+38F && DBL_MAX == 1.79769313486231570815e+308, "MAX");
        static_assert(FLT_MIN == 1.17549435082228750797e-38F && DBL_MIN == 2.22507385850720138309e-308, "MIN");
        static_assert(FLT_MANT_DIG == 24 && DBL_MANT_DIG == 53 && FLT_RADIX == 2, "digits");
        static_assert(FLT_DIG == 6 && DBL_DIG == 15 && FLT_MAX_EXP == 128 && DBL_MIN_EXP == -1021, "exp");
        """),
    "assert.h": ("assert(y != NULL);", ""),
    "stdbool.h": ("bool b = true; y[0] = b + __bool_true_false_are_defined;", ""),
    "cstdio": ("std::printf(\"x\\n\"); std::size_t n = 0; y[0] = n;", ""),
    "cmath": ("""
        y[0] = std::sin(y[1]) + std::pow(y[2], 2.0f) + std::abs(-1.5f) + std::fabs(-2.0)
             + std::isnan(y[3]) + std::sqrtf(2.0f) + std::fpclassify(1.0) + std::isgreater(1.0f, y[4])
             + std::floor(d[0]) + std::fmaf(y[5], y[6], y[7]);
        std::float_t f = 1; y[8] = f;""",
              "static_assert(M_PI > 3.14, \"cmath brings math.h\");"),
    "cstdint": ("std::int64_t a = 1; std::uint8_t b = 2; int32_t c = 3; std::uintptr_t p = 0; q[0] = a + b + c + p;",
                "static_assert(sizeof(std::int64_t) == 8 && sizeof(std::uint16_t) == 2, \"std::\");"),
    "cstddef": ("std::size_t a = 1; std::ptrdiff_t b = 2; std::nullptr_t n = nullptr; (void)n;"
                " q[0] = a + b + sizeof(std::max_align_t);", ""),
    "cstdlib": ("q[0] = std::abs(-3) + std::div(7L, 2L).quot + std::div(9LL, 4LL).rem + std::div(5, 2).quot;"
                " void *p = std::malloc(4); std::free(p);", ""),
    "cstring": ("std::memcpy(y, y + 1, 4); std::memset(y, 0, 4);", ""),
    "climits": ("q[0] = INT_MAX;", "static_assert(SHRT_MAX == 32767, \"climits\");"),
    "cfloat": ("y[0] = FLT_EPSILON;", "static_assert(DBL_DIG == 15, \"cfloat\");"),
    "cassert": ("assert(y);", ""),
    "cinttypes": ("std::int64_t a = 1; printf(\"%\" PRId64 \"\\n\", a); q[0] = std::imaxabs(-2);", ""),
    "cstdbool": ("bool b = true; y[0] = b;", ""),
    "sys/types.h": ("uint a = 1; ushort b = 2; ulong c = 3; u_char e = 4; ssize_t f = 5; q[0] = a + b + c + e + f;",
                    "static_assert(sizeof(ulong) == sizeof(long) && sizeof(u_int) == 4, \"types\");"),
}


@pytest.mark.parametrize("wrap", WRAPS)
@pytest.mark.parametrize("header", sorted(HEADERS))
def test_header_compiles_and_declares(header, wrap):
    body, decls = HEADERS[header]
    # included twice: every header is guarded (assert.h redefines harmlessly)
    src = kernel([header, header], body, decls)
    assert ".entry" in ptx(src, wrap)


@pytest.mark.parametrize("wrap", WRAPS)
def test_all_headers_together(wrap):
    src = kernel(sorted(HEADERS), "y[0] = M_PI + INT_MAX + FLT_EPSILON; q[0] = INT64_MAX;")
    assert ".entry" in ptx(src, wrap)


def test_headers_in_cpp11_mode():
    src = kernel(sorted(HEADERS), "y[0] = INFINITY; q[0] = UINT64_C(3);")
    assert ".entry" in ptx(src, options=["-std=c++11"])


def test_std_headers_folder_is_last_and_not_for_nvcc(tmp_path):
    # a user header of the same name wins over barecuda's
    (tmp_path / "math.h").write_text("#define MY_OWN_MATH 1\n")
    src = "#include <math.h>\n__global__ void k(int *y) { y[0] = MY_OWN_MATH; }\n"
    assert ".entry" in ptx(src, options=["-I", str(tmp_path)])
    assert os.path.isfile(os.path.join(compiler.NVRTC_STD_INCLUDE_DIR, "cmath"))
    assert os.path.dirname(compiler.NVRTC_STD_INCLUDE_DIR) == compiler.INCLUDE_DIR


def test_header_digest_covers_files_without_suffix():
    # <cmath> has no suffix: a change to it must still change the cache key
    stamp = compiler._header_stamp([compiler.INCLUDE_DIR], every_file=True)
    names = {os.path.relpath(p, compiler.INCLUDE_DIR) for p, *_ in stamp}
    assert os.path.join("nvrtc", "cmath") in names
    assert os.path.join("nvrtc", "sys", "types.h") in names
    assert "pycuda-complex.hpp" in names


@pytest.mark.parametrize("wrap", WRAPS)
def test_prelude_declares_short_unsigned_names(wrap):
    # nvcc's host headers make these visible with no #include (PyCUDA's matrixmul_tiled)
    src = """__global__ void k(uint *y, ushort s, ulong l)
    {
        uint i = threadIdx.x;
        y[i] = s + (uint)l;
    }
    """
    assert ".entry" in ptx(src, wrap)
    # a user's own typedef of the same type is valid C++, so is a macro
    assert ".entry" in ptx("typedef unsigned int uint;\n" + src, wrap)
    assert ".entry" in ptx("#define uint unsigned int\n" + src, wrap)


def test_prelude_can_be_left_out():
    src = "typedef long long uint;\n__global__ void k(uint *y) { y[0] = sizeof(uint); }\n"
    with pytest.raises(compiler.CompileError):
        ptx(src)   # conflicts with the prelude's uint
    assert ".entry" in ptx(src, options=["-DBARECUDA_NO_PRELUDE"])


def test_assert_follows_ndebug():
    # assert.h has no include guard: NDEBUG is read at each inclusion
    src = """
    #define NDEBUG
    #include <assert.h>
    __global__ void k(int *y) { assert(no_such_name); y[0] = 1; }
    #undef NDEBUG
    #include <assert.h>
    __global__ void k2(int *y) { assert(y[0] == 1); }
    """
    text = ptx(src)
    assert text.count(".entry") == 2
    assert "__assertfail" in text
    with pytest.raises(compiler.CompileError, match="no_such_name"):
        ptx(src.replace("#define NDEBUG", ""))


def _cccl():
    """The CCCL directory on NVRTC's include path: the toolkit's, or that of NVIDIA's
    CCCL wheel (a driver-only install)."""
    found = compiler._find_header(compiler.CCCL_MARKER, compiler._toolkit_include_dirs())
    if found is None:
        pytest.skip("no CCCL headers: neither the CUDA toolkit's nor NVIDIA's CCCL wheel")
    return found


@pytest.mark.parametrize("order", ["ours_first", "cccl_first"])
def test_headers_mix_with_cccl(order):
    _cccl()      # a CCCL directory is on NVRTC's include path
    ours = ["stdint.h", "cstdint", "cinttypes", "limits.h", "math.h", "cmath"]
    theirs = ["cuda/std/cstdint", "cuda/std/climits", "cuda/std/cmath"]
    heads = ours + theirs if order == "ours_first" else theirs + ours
    src = kernel(heads, """
        int64_t a = INT64_MAX; cuda::std::int64_t b = a; std::int64_t c = b;
        q[0] = c + INT_MAX; y[0] = std::sin(y[1]) + cuda::std::sin(y[2]) + M_PI;""")
    assert ".entry" in ptx(src, wrap=False)


def test_toolkit_headers_with_ours():
    if compiler._toolkit_include() is None:
        pytest.skip("no CUDA toolkit headers")
    need_curand_headers()   # cuRAND's, and the CCCL that CUDA 13's includes
    src = kernel(["cuda_fp16.h", "curand_kernel.h", "cmath", "cstdint", "stdio.h"], """
        curandState s; curand_init(0, 0, 0, &s);
        __half h = __float2half(1.0f);
        y[0] = curand_uniform(&s) * M_PI + __half2float(h) + std::sin(1.0f);""")
    assert ".entry" in ptx(src, wrap=False)


# ------------------------------------------------------------ PyCUDA's headers

COMPLEX_API = r"""
    typedef pycuda::complex<float> cf;
    typedef pycuda::complex<double> cd;
    cf a(y[0], y[1]), b(y[2]), c;
    cd e(d[0], d[1]);
    cd w = a;                         // widening is implicit
    cf n = cf(e);                     // narrowing is explicit
    c = a + b; c = a - 2.0f; c = 2 * a; c = a / 3.0; c = 1.0f / a;
    c += 1; c *= a; c /= 2.0f; c -= cf(1, 1); n += e; w *= a;
    bool t = (a == b) || (a != 1.0f) || (0 == a) || (c != a);
    c = pycuda::exp(a) + pycuda::log(a) + pycuda::log10(a) + pycuda::sqrt(a)
      + pycuda::sin(a) + pycuda::cos(a) + pycuda::tan(a) + pycuda::sinh(a) + pycuda::cosh(a)
      + pycuda::tanh(a) + pycuda::pow(a, b) + pycuda::pow(a, 2) + pycuda::pow(a, 2.5)
      + pycuda::pow(2.0f, a) + pycuda::conj(a) + pycuda::polar(1.0f, 0.5f) + pycuda::polar(2.0f);
    e = exp(e) + pow(e, 3) + pow(e, w) + sqrt(e) * abs(e) + arg(e) + norm(e) + real(e) + imag(e);
    c.real(5.0f);
    c.imag(c.real() + c.imag());
    cf::value_type v = abs(a) + arg(a) + norm(a);
    y[0] = c.real() + v + t + n.imag() + e.real() + w.imag();
"""


@pytest.mark.parametrize("wrap", WRAPS)
def test_pycuda_complex_api(wrap):
    assert ".entry" in ptx(kernel(["pycuda-complex.hpp"], COMPLEX_API), wrap)


def test_pycuda_complex_is_barecuda_complex_and_zero_initialised():
    src = kernel(["pycuda-complex.hpp"], "pycuda::complex<float> z; y[0] = z.real() + c0[0].imag();", """
        static_assert(sizeof(pycuda::complex<float>) == 8 && alignof(pycuda::complex<double>) == 16, "layout");
        __constant__ pycuda::complex<float> c0[2];   // constant initialisation: allowed
        template <typename A, typename B> struct same { static const bool value = false; };
        template <typename A> struct same<A, A> { static const bool value = true; };
        static_assert(same<pycuda::complex<float>, barecuda::complex<float> >::value, "one type");
        static_assert(!__is_trivial(pycuda::complex<float>), "zero-initialising, as PyCUDA's");
        """)
    assert ".entry" in ptx(src, wrap=False)


def test_complex_stays_trivial_after_barecuda_header():
    # barecuda's own kernels include barecuda_complex.cuh first: __shared__ arrays of it
    src = kernel(["barecuda_complex.cuh", "pycuda-complex.hpp", "barecuda_types.cuh"], """
        __shared__ pycuda::complex<float> s[32];
        s[threadIdx.x] = pycuda::complex<float>(y[threadIdx.x]);
        __syncthreads();
        y[0] = s[31 - threadIdx.x].real();""",
                 "static_assert(__is_trivial(pycuda::complex<float>), \"trivial\");")
    for wrap in (True, False):
        assert ".entry" in ptx(src, wrap)


HELPERS_API = r"""
    cudaTextureObject_t t = 0; cudaSurfaceObject_t s = 0;
    double dv = fp_tex1Dfetch<double>(t, 0) + fp_tex2D<double>(t, 1, 2)
              + fp_tex2DLayered<double>(t, 1, 2, 3) + fp_tex3D<double>(t, 1, 2, 3);
    pycuda::complex<float> cf = fp_tex1Dfetch<pycuda::complex<float> >(t, 0)
                              + fp_tex2D<pycuda::complex<float> >(t, 0, 1);
    pycuda::complex<double> cd = fp_tex1Dfetch<pycuda::complex<double> >(t, 0)
                               + fp_tex3D<pycuda::complex<double> >(t, 0, 1, 2);
    float f = fp_tex1Dfetch<float>(t, 0) + fp_tex2D<int>(t, 0, 0);
    fp_surf3Dwrite(dv, s, 0, 1, 2, cudaBoundaryModeClamp);
    fp_surf3Dwrite(cf, s, 0, 1, 2);
    fp_surf3Dwrite(cd, s, 0, 1, 2);
    fp_surf3Dwrite(f, s, 0, 1, 2);
    fp_surf2DLayeredwrite(dv, s, 0, 1, 2);
    fp_surf2DLayeredwrite(cd, s, 0, 1, 2, cudaBoundaryModeZero);
    fp_surf3Dread(&dv, s, 0, 1, 2);
    fp_surf2DLayeredread(&cf, s, 0, 1, 2);
    fp_surf2DLayeredread(&f, s, 0, 1, 2, cudaBoundaryModeClamp);
    fp_tex_double a; fp_tex_cfloat b; fp_tex_cdouble c; fp_tex_float g = 0;
    y[0] = dv + cf.real() + cd.imag() + f + sizeof(a) + sizeof(b) + sizeof(c) + g;
"""


@pytest.mark.parametrize("wrap", WRAPS)
def test_pycuda_helpers_api(wrap):
    src = kernel(["pycuda-helpers.hpp"], HELPERS_API, """
        static_assert(sizeof(fp_tex_double) == 8 && sizeof(fp_tex_cfloat) == 8
                      && sizeof(fp_tex_cdouble) == 16, "transport types");""")
    text = ptx(src, wrap)
    assert "tex." in text and "sust." in text and "suld." in text


@pytest.mark.parametrize("wrap", WRAPS)
def test_missing_header_is_a_compile_error_with_the_log(wrap):
    src = "#include <stdio.h>\n#include <no_such_header.h>\n__global__ void k() {}\n"
    with pytest.raises(compiler.CompileError) as info:
        ptx(src, wrap)
    msg = str(info.value)
    assert "no_such_header.h" in msg and "cannot open source file" in msg
    assert "no_such_header.h" in info.value.log
    # the line is counted as the user wrote it, wrapper or not
    assert "kernel.cu(2)" in msg


def test_header_misuse_points_at_the_users_line():
    src = "#include <math.h>\n__global__ void k(float *y)\n{\n    y[0] = M_PIE;\n}\n"
    with pytest.raises(compiler.CompileError, match="M_PIE") as info:
        ptx(src)
    assert "> 4 |" in str(info.value)


# ------------------------------------------------------ compiler's PyCUDA names

def test_pycuda_names_are_exported():
    for name in ("compile_plain", "preprocess_source", "get_nvcc_version",
                 "DEFAULT_NVCC_FLAGS", "CudaModule"):
        assert name in compiler.__all__
        assert hasattr(compiler, name)
    assert isinstance(compiler.DEFAULT_NVCC_FLAGS, list)
    assert issubclass(compiler.SourceModule, compiler.CudaModule)


def test_default_nvcc_flags_apply_when_options_is_none(monkeypatch):
    src = "__global__ void k(int *y) { y[0] = SCALE; }\n"
    monkeypatch.setattr(compiler, "DEFAULT_NVCC_FLAGS", ["-DSCALE=17"])
    text = ptx(src)
    assert "17" in text
    # explicit options replace them
    with pytest.raises(compiler.CompileError, match="SCALE"):
        ptx(src, options=[])


def test_compile_plain_nvrtc_compiles_source_as_given():
    src = "#include <math.h>\n__global__ void plain(float *y) { y[0] = M_PI; }\n"
    image = compiler.compile_plain(src, ["-arch", "compute_80", "-O3"], False, "nvcc", False,
                                   target="ptx")
    text = image.decode()
    assert ".target sm_80" in text
    assert "_Z5plainPf" in text          # not wrapped in extern "C": a mangled name
    cubin = compiler.compile_plain('extern "C" __global__ void k() {}', ["-arch=sm_90"],
                                   False, "nvcc", False)
    assert cubin[:4] == b"\x7fELF"


def test_compile_plain_bad_input():
    with pytest.raises(ValueError, match="target"):
        compiler.compile_plain("__global__ void k() {}", [], False, "nvcc", False, target="elf")
    with pytest.raises(ValueError, match="-arch"):
        compiler.compile_plain("__global__ void k() {}", ["-arch"], False, "nvcc", False)
    with pytest.raises(TypeError):
        compiler.compile_plain("__global__ void k() {}", "-arch=sm_90", False, "nvcc", False)
    with pytest.raises(compiler.CompileError, match="undefined"):
        compiler.compile_plain("__global__ void k(int *y) { y[0] = nope; }", ["-arch=sm_90"],
                               False, "nvcc", False)


def test_nvcc_functions_without_nvcc():
    missing = "barecuda-no-such-nvcc"
    with pytest.raises(compiler.CompileError, match="get_nvcc_version needs nvcc"):
        compiler.get_nvcc_version(missing)
    with pytest.raises(compiler.CompileError, match="preprocess_source needs nvcc"):
        compiler.preprocess_source("int x;", [], missing)
    # a fatbin needs nvcc: NVRTC cannot make one
    with pytest.raises(compiler.CompileError, match=missing):
        compiler.compile_plain("__global__ void k() {}", ["-arch=sm_90"], False, missing, False,
                               target="fatbin")
    with pytest.raises(TypeError, match="nvcc"):
        compiler.get_nvcc_version(3)


def _nvcc():
    path = shutil.which("nvcc")
    if path is None:
        pytest.skip("nvcc is not on PATH")
    return path


def test_get_nvcc_version():
    text = compiler.get_nvcc_version(_nvcc())
    assert "Cuda compilation tools" in text or "nvcc" in text
    assert compiler.get_nvcc_version(_nvcc()) is text     # remembered


def test_preprocess_source():
    src = "#define SCALE 3\n#include <pycuda-complex.hpp>\n__global__ void k(int *y) { y[0] = SCALE * OFFSET; }\n"
    out = compiler.preprocess_source(src, ["-DOFFSET=5"], _nvcc())
    assert "y[0] = 3 * 5;" in out
    assert "namespace barecuda" in out        # barecuda's headers are on the path
    assert "barecuda-pp-" not in out          # the temporary file's name is removed
    with pytest.raises(compiler.CompileError, match="missing_header") as info:
        compiler.preprocess_source("#include <missing_header.h>\n", [], _nvcc())
    assert info.value.command_line and "missing_header" in info.value.stderr


def test_cuda_module_base():
    class Mine(compiler.CudaModule):
        pass

    m = Mine()
    with pytest.raises(drv.LogicError, match="no loaded module"):
        m.get_function("k")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        m._check_arch(None)
        m._check_arch("not-an-arch")     # left for the compiler to report
        m._check_arch("sm_50")           # no device is older; without one, nothing to compare


@pytest.mark.gpu
def test_cuda_module_check_arch_warns_for_a_newer_arch(ctx):
    with pytest.warns(UserWarning, match="newer than the current device"):
        compiler.CudaModule()._check_arch("sm_999")


# ------------------------------------------------------------------- GPU runs

COMPLEX_KERNEL = r"""
#include <pycuda-complex.hpp>

template <typename T>
__device__ void ops(pycuda::complex<T> *r, const pycuda::complex<T> *a_,
                    const pycuda::complex<T> *b_, int n)
{
    typedef pycuda::complex<T> C;
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    C a = a_[i], b = b_[i];
    T s = b.real(), sp = (s < 0 ? -s : s) + T(0.5);
    C z;                                  // zero, as PyCUDA's
    z += a;
    C *o = r + i;
    int k = 0;
    o[n * k++] = a * b;
    o[n * k++] = a / b;
    o[n * k++] = a + s;
    o[n * k++] = s - a;
    o[n * k++] = s / a;
    o[n * k++] = a * s;
    o[n * k++] = exp(a);
    o[n * k++] = log(a);
    o[n * k++] = log10(a);
    o[n * k++] = sqrt(a);
    o[n * k++] = pow(a, b);
    o[n * k++] = pow(a, s);
    o[n * k++] = pow(sp, a);
    o[n * k++] = pow(a, 3);
    o[n * k++] = sin(a);
    o[n * k++] = cos(a);
    o[n * k++] = tan(a);
    o[n * k++] = sinh(a);
    o[n * k++] = cosh(a);
    o[n * k++] = tanh(a);
    o[n * k++] = C(abs(a), arg(a));
    o[n * k++] = C(norm(a), real(a) + imag(b));
    o[n * k++] = conj(a);
    o[n * k++] = pycuda::polar(abs(a), arg(b));
    o[n * k++] = z;
    C m = a;
    m *= b; m -= s; m /= a; m += C(1, 2);
    o[n * k++] = m;
}

extern "C" __global__ void ops_f(pycuda::complex<float> *r, const pycuda::complex<float> *a,
                                 const pycuda::complex<float> *b, int n) { ops(r, a, b, n); }
extern "C" __global__ void ops_d(pycuda::complex<double> *r, const pycuda::complex<double> *a,
                                 const pycuda::complex<double> *b, int n) { ops(r, a, b, n); }
"""


def test_complex_and_printf_kernels_compile():
    # the GPU tests' kernels, compiled on the CPU
    assert ptx(COMPLEX_KERNEL, wrap=False).count(".entry") == 2
    assert ".entry" in ptx(PRINTF_KERNEL)


PRINTF_KERNEL = r"""
#include <stdio.h>
#include <inttypes.h>
#include <math.h>
__global__ void say(int64_t base)
{
    int64_t v = base + threadIdx.x;
    printf("bc-printf t=%d v=%" PRId64 " pi=%.3f\n", (int)threadIdx.x, v, M_PI);
}
"""


def _complex_reference(a, b):
    s = b.real
    sp = np.abs(s) + 0.5
    m = ((a * b - s) / a) + (1 + 2j)
    return [a * b, a / b, a + s, s - a, s / a, a * s, np.exp(a), np.log(a), np.log10(a),
            np.sqrt(a), a ** b, a ** s, sp ** a, a ** 3, np.sin(a), np.cos(a), np.tan(a),
            np.sinh(a), np.cosh(a), np.tanh(a), np.abs(a) + 1j * np.angle(a),
            np.abs(a) ** 2 + 1j * (a.real + b.imag), np.conj(a),
            np.abs(a) * np.exp(1j * np.angle(b)), a, m]


@pytest.mark.gpu
@pytest.mark.parametrize("dtype,kname,rtol", [(np.complex64, "ops_f", 2e-4),
                                               (np.complex128, "ops_d", 1e-10)])
def test_pycuda_complex_matches_numpy(ctx, rng, dtype, kname, rtol):
    mod = compiler.SourceModule(COMPLEX_KERNEL, no_extern_c=True, cache_dir=False)
    n = 1000
    # imaginary parts kept off the real axis (|im| >= 0.25): no branch cuts, no poles of tan
    a = (rng.uniform(-2, 2, n) + 1j * rng.choice([-1, 1], n) * rng.uniform(0.25, 2, n)).astype(dtype)
    b = (rng.uniform(-2, 2, n) + 1j * rng.uniform(-2, 2, n)).astype(dtype)
    expected = _complex_reference(a.astype(np.complex128), b.astype(np.complex128))
    out = np.zeros((len(expected), n), dtype)
    mod.get_function(kname)(drv.Out(out), drv.In(a), drv.In(b), np.int32(n),
                            block=(128, 1, 1), grid=((n + 127) // 128, 1))
    for k, ref in enumerate(expected):
        scale = np.maximum(np.abs(ref), 1.0)
        err = np.abs(out[k].astype(np.complex128) - ref) / scale
        assert err.max() < rtol, f"operation {k}: max relative error {err.max():.3g}"


@pytest.mark.gpu
def test_printf_and_inttypes_on_the_device(ctx, capfd):
    mod = compiler.SourceModule(PRINTF_KERNEL, cache_dir=False)
    mod.get_function("say")(np.int64(1 << 40), block=(4, 1, 1), grid=(1, 1))
    drv.Context.synchronize()
    out = capfd.readouterr().out
    lines = sorted(line for line in out.splitlines() if line.startswith("bc-printf"))
    assert lines == [f"bc-printf t={t} v={(1 << 40) + t} pi=3.142" for t in range(4)]


def test_missing_cccl_header_says_what_to_install(monkeypatch):
    """A kernel that includes a header of CCCL where no CCCL is on NVRTC's include
    path (a driver-only install without nvidia-cuda-cccl): the CompileError keeps
    NVRTC's log and adds what to install.  Where CCCL is there, a header it does
    not have gets NVRTC's log alone."""
    from barecuda._compile import toolkit
    monkeypatch.setattr(toolkit, "_toolkit_include_dirs", lambda: [])   # no toolkit, no wheels
    for header in ("nv/target", "cuda/std/complex", "cub/cub.cuh"):
        with pytest.raises(drv.CompileError) as info:
            ptx(kernel([header], "y[0] = 1.0f;"), wrap=False)
        msg = str(info.value)
        assert f'cannot open source file "{header}"' in msg
        assert f"hint: <{header}> is a header of CCCL" in msg
        assert "nvidia-cuda-cccl" in msg and "barecuda[cu13]" in msg
    monkeypatch.undo()
    if not any(os.path.isfile(os.path.join(d, compiler.CCCL_MARKER))
               for d in compiler._toolkit_include_dirs()):
        pytest.skip("no CCCL here: the second half needs one")
    with pytest.raises(drv.CompileError) as info:
        ptx(kernel(["cuda/std/no_such_header"], "y[0] = 1.0f;"), wrap=False)
    assert 'cannot open source file "cuda/std/no_such_header"' in str(info.value)
    assert "hint:" not in str(info.value)


def test_toolkit_include_dirs_are_looked_up_once(monkeypatch):
    """Every compile asks for the toolkit's include directories; sys.path is searched
    for NVIDIA's wheels once per process, and callers get a copy they may change."""
    from barecuda._compile import toolkit
    monkeypatch.delitem(toolkit._once, "toolkit_dirs", raising=False)
    calls = []
    real = toolkit._toolkit_dirs
    monkeypatch.setattr(toolkit, "_toolkit_dirs", lambda tk: calls.append(tk) or real(tk))
    first = toolkit._toolkit_include_dirs()
    first.append("/changed/by/a/caller")
    second = toolkit._toolkit_include_dirs()
    assert calls == [toolkit._toolkit_include()]
    assert "/changed/by/a/caller" not in second
    assert second == real(toolkit._toolkit_include())
