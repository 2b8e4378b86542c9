# SPDX-License-Identifier: MIT
"""Structs whose alignment is written after the closing brace (GCC's reading, which nvcc
follows and NVRTC does not by itself): their layout on the device must be NumPy's.

NVRTC runs on the CPU, so the sizes are checked with static_asserts at
compile time; a GPU test reads them back from a kernel for NumPy dtypes with
align=True, nested structs and explicit itemsizes (the way grunnur writes them)."""

import numpy as np
import pytest

from barecuda import compiler
from barecuda._compile.nvcc_compat import gnu_type_attributes

ARCH = "sm_90"


def compiles(src, wrap=False):
    compiler.compile(src, arch=ARCH, target="ptx", no_extern_c=not wrap, cache_dir=False)


ALIGNED = """
#define ALIGN(bytes) __align__(bytes)
typedef struct _pair_ { int val1; char pad; } ALIGN(16) pair;
typedef struct _outer_ { int val1; short val2; pair nested; } ALIGN(64) outer;
struct tagged { char c; } __attribute__((aligned(32)));
typedef union { int i; char c; } __align__(8) both;
static_assert(sizeof(pair) == 16 && alignof(pair) == 16, "pair");
static_assert(sizeof(outer) == 64 && alignof(outer) == 64, "outer");
static_assert(sizeof(((outer *)0)->nested) == 16, "nested");
static_assert(sizeof(struct tagged) == 32, "tagged");
static_assert(sizeof(both) == 8, "union");
"""


@pytest.mark.parametrize("wrap", [True, False], ids=["extern_c", "no_extern_c"])
def test_attribute_after_brace_applies_to_type(wrap):
    compiles(ALIGNED + "__global__ void k(int *d) { d[0] = sizeof(outer); }\n", wrap)


def test_nvcc_backend_gets_source_unchanged(tmp_path):
    # only NVRTC's text is rewritten; what nvcc gets is what the user wrote
    src = "typedef struct { int a; } __align__(8) s;\n"
    assert gnu_type_attributes(src) != src
    assert gnu_type_attributes(gnu_type_attributes(src)) == gnu_type_attributes(src)


@pytest.mark.parametrize("src", [
    "__global__ void k(float *y) { y[0] = 1; }\n",
    "struct s { int a; };\nstruct __align__(8) t { int a; };\n",
    "void f() { } int x __attribute__((unused));\n",     # a function body, not a type
    'const char *s = "} __align__(2)";\n// } __align__(4) x;\n/* } __align__(8) */\n',
])
def test_other_source_unchanged(src):
    assert gnu_type_attributes(src) == src


def test_lines_and_text_kept():
    src = ("typedef struct _a_ {\n  int a; // } __align__(4)\n  char b;\n} __align__(16) A;\n"
           "int after;\n")
    out = gnu_type_attributes(src)
    assert out.count("\n") == src.count("\n")
    assert out.splitlines()[0] == "typedef struct __align__(16) _a_ {"
    assert out.splitlines()[3] == "}  A;"
    assert out.splitlines()[1] == src.splitlines()[1]


def test_nested_definitions_each_moved():
    src = ("struct o { struct { int q; } __attribute__((aligned(8))) in;"
           " char c; } __align__(32) x;")
    assert gnu_type_attributes(src) == (
        "struct __align__(32) o { struct __attribute__((aligned(8))) { int q; }  in;"
        " char c; }  x;")


def test_compile_error_points_at_user_line():
    src = ("typedef struct { int a; char b; } __align__(16) s;\n"
           "static_assert(sizeof(s) == 8, \"still eight?\");\n")
    with pytest.raises(compiler.CompileError) as info:
        compiles(src)
    assert "still eight?" in str(info.value)
    assert "> 2 |" in str(info.value) or ">  2 |" in str(info.value)


def cases():
    """(NumPy dtype, C declaration of the same struct, its C name): the C written the
    way PyCUDA-era code generators write it, ALIGN(n) after the closing brace."""
    nested = np.dtype(dict(names=["val1", "pad"], formats=[np.int32, np.int8],
                           offsets=[0, 4], itemsize=16, aligned=True))
    return [
        (np.dtype(dict(names=["val1", "pad"], formats=[np.int32, np.int8], offsets=[0, 4],
                       itemsize=8, aligned=True)),
         "typedef struct _r1_ { int val1; char pad; } ALIGN(8) r1;", "r1"),
        (np.dtype(dict(names=["val1", "val2", "nested"], formats=[np.int32, np.int16, nested],
                       offsets=[0, 4, 16], itemsize=64, aligned=True)),
         "typedef struct _n16_ { int val1; char pad; } ALIGN(16) n16;\n"
         "typedef struct _r2_ { int val1; short val2; n16 nested; } ALIGN(64) r2;", "r2"),
        (np.dtype(dict(names=["x", "y", "z"], formats=[np.int8, np.int16, np.int32],
                       offsets=[0, 4, 16], itemsize=32, aligned=True)),
         "typedef struct _r3_ { char x; ALIGN(4) short y; ALIGN(16) int z; } ALIGN(32) r3;",
         "r3"),
        (np.dtype(dict(names=["a", "b"], formats=[(np.int8, 3), np.float64], offsets=[0, 8],
                       itemsize=16, aligned=True)),
         "typedef struct _r4_ { char a[3]; double b; } ALIGN(16) r4;", "r4"),
    ]


CASE_IDS = ["plain", "nested", "custom_itemsize", "array_field"]
DEFINE = "#define ALIGN(bytes) __align__(bytes)\n"


@pytest.mark.parametrize("dtype, decls, tname", cases(), ids=CASE_IDS)
def test_numpy_layout_at_compile_time(dtype, decls, tname):
    # NVRTC has no constant offsetof (no __builtin_offsetof): sizes and alignments
    # here, the offsets on the device below
    checks = [f'static_assert(sizeof({tname}) == {dtype.itemsize}, "size");',
              f'static_assert(alignof({tname}) >= {dtype.alignment}, "alignment");']
    compiles(DEFINE + decls + "\n" + "\n".join(checks) + "\n")


@pytest.mark.gpu
@pytest.mark.parametrize("dtype, decls, tname", cases(), ids=CASE_IDS)
def test_numpy_layout_on_device(dtype, decls, tname, ctx):
    import barecuda.driver as drv
    from barecuda.compiler import SourceModule

    first = dtype.names[0]
    is_array = dtype.fields[first][0].subdtype is not None
    lines = [f"dest[{i}] = (int)((char *)&r.{f} - (char *)&r);"
             for i, f in enumerate(dtype.names)]
    src = (DEFINE + decls + f"\nextern \"C\" __global__ void layout(int *dest, {tname} *recs, "
           f"double *firsts) {{\n {tname} r;\n" + "\n".join(lines) +
           f"\n dest[{len(dtype.names)}] = sizeof({tname});\n"
           f" firsts[threadIdx.x] = recs[threadIdx.x].{first}{'[2]' if is_array else ''}; }}\n")
    mod = SourceModule(src, no_extern_c=True)
    got = np.zeros(len(dtype.names) + 1, np.int32)
    rng = np.random.default_rng(7)
    recs = np.zeros(32, dtype)
    recs[first] = rng.integers(-100, 100, size=recs[first].shape)
    firsts = np.zeros(32, np.float64)
    mod.get_function("layout")(drv.Out(got), drv.In(recs), drv.Out(firsts), block=(32, 1, 1))
    assert list(got[:-1]) == [dtype.fields[f][1] for f in dtype.names]
    assert got[-1] == dtype.itemsize
    expect = recs[first][:, 2] if is_array else recs[first]
    np.testing.assert_array_equal(firsts, expect.astype(np.float64))
