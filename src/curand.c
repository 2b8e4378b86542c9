/* SPDX-License-Identifier: MIT */
/* The host side of cuRAND that barecuda.curandom needs: its version and the
 * tables behind the Sobol generators (direction vectors, scramble constants).
 *
 * libcurand is not linked: it is found at first use by the loader's toolkit
 * search (src/loader.c) and only these four entry points are resolved.  No curand
 * header is needed at build time; the prototypes below are the library's, with
 * the enums as int.  The generators themselves run on cuRAND's device API
 * (curand_kernel.h), compiled with NVRTC by the Python layer. */
#include "barecuda/common.h"
#include "barecuda/loader.h"

#include <dlfcn.h>
#include <string.h>

/* Each table holds this many dimensions (curand's documentation: 20,000). */
#define BC_CURAND_DIMENSIONS 20000

typedef int (*version_fn)(int *);
typedef int (*vectors32_fn)(unsigned int (**)[32], int);
typedef int (*vectors64_fn)(unsigned long long (**)[64], int);
typedef int (*scramble32_fn)(unsigned int **);
typedef int (*scramble64_fn)(unsigned long long **);

static struct {
    version_fn get_version;
    vectors32_fn vectors32;
    vectors64_fn vectors64;
    scramble32_fn scramble32;
    scramble64_fn scramble64;
} curand;
static int curand_ready;
static char curand_path[4096];
static char curand_failure[8192];

static const char *const curand_sonames[] = {"libcurand.so.10", NULL};
static const char *const curand_wheel_dirs[] = {"/nvidia/cu13/lib", "/nvidia/curand/lib",
                                                NULL};
static const bc_libspec curand_spec = {
    .what = "cuRAND",
    .sonames = curand_sonames,
    .probe = "curandGetVersion",
    .wheel_dirs = curand_wheel_dirs,
    .env = "BARECUDA_LIBCURAND",
    .hint = "Install the CUDA toolkit or NVIDIA's cuRAND wheel (`pip install "
            "\"barecuda[cu13]\"`; for CUDA 12 `nvidia-curand-cu12`)",
};

/* 0 once libcurand is loaded, else -1 with barecuda.driver.Error set. */
static int
load_curand(bc_State *st)
{
    if (curand_ready)
        return 0;
    if (curand_failure[0] == '\0') {
        void *h = bc_loader_find_library(&curand_spec, curand_failure, sizeof curand_failure);
        if (h != NULL) {
            curand.get_version = (version_fn)dlsym(h, "curandGetVersion");
            curand.vectors32 = (vectors32_fn)dlsym(h, "curandGetDirectionVectors32");
            curand.vectors64 = (vectors64_fn)dlsym(h, "curandGetDirectionVectors64");
            curand.scramble32 = (scramble32_fn)dlsym(h, "curandGetScrambleConstants32");
            curand.scramble64 = (scramble64_fn)dlsym(h, "curandGetScrambleConstants64");
            Dl_info info;
            if (dladdr((void *)curand.get_version, &info) && info.dli_fname)
                snprintf(curand_path, sizeof curand_path, "%s", info.dli_fname);
            if (curand.vectors32 && curand.vectors64 && curand.scramble32 && curand.scramble64) {
                curand_ready = 1;
                return 0;
            }
            snprintf(curand_failure, sizeof curand_failure,
                     "%s is too old: it lacks curandGetDirectionVectors64 or "
                     "curandGetScrambleConstants32/64", curand_path);
            dlclose(h);
        }
    }
    PyErr_SetString(st->Error, curand_failure);
    return -1;
}

static int
curand_check(bc_State *st, int status, const char *routine)
{
    if (status == 0)
        return 0;
    PyErr_Format(st->RuntimeError, "%s failed: curandStatus_t %d", routine, status);
    return -1;
}

PyDoc_STRVAR(curand_version_doc,
"_curand_version()\n--\n\n"
"curandGetVersion() of the libcurand found at run time, as an int (10400 for\n"
"10.4.0).  Raises Error naming the places searched when there is none.");

static PyObject *
bc_curand_version(PyObject *m, PyObject *Py_UNUSED(ignored))
{
    bc_State *st = bc_state_from_module(m);
    if (load_curand(st) < 0)
        return NULL;
    int version = 0;
    if (curand_check(st, curand.get_version(&version), "curandGetVersion") < 0)
        return NULL;
    return PyLong_FromLong(version);
}

PyDoc_STRVAR(curand_info_doc,
"_curand_info()\n--\n\n"
"(path of the loaded libcurand or None, the failure message or None).  Loads nothing.");

static PyObject *
bc_curand_info(PyObject *m, PyObject *Py_UNUSED(ignored))
{
    BC_UNUSED(m);
    return Py_BuildValue("(zz)", curand_ready ? curand_path : NULL,
                         curand_failure[0] ? curand_failure : NULL);
}

/* A new (count, width) or (count,) array of `itemsize`-byte unsigned integers
 * whose row i is table row i % BC_CURAND_DIMENSIONS. */
static PyObject *
tile_table(const void *table, Py_ssize_t count, int width, int itemsize)
{
    npy_intp dims[2] = {count, width};
    int type = itemsize == 4 ? NPY_UINT32 : NPY_UINT64;
    PyObject *out = PyArray_SimpleNew(width ? 2 : 1, dims, type);
    if (out == NULL)
        return NULL;
    size_t row = (size_t)itemsize * (size_t)(width ? width : 1);
    char *dst = PyArray_BYTES((PyArrayObject *)out);
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t done = 0; done < count;) {
        Py_ssize_t n = count - done;
        if (n > BC_CURAND_DIMENSIONS)
            n = BC_CURAND_DIMENSIONS;
        memcpy(dst + (size_t)done * row, table, (size_t)n * row);
        done += n;
    }
    Py_END_ALLOW_THREADS
    return out;
}

static int
check_count(Py_ssize_t count)
{
    if (count < 0) {
        PyErr_Format(PyExc_ValueError, "count must be >= 0, got %zd", count);
        return -1;
    }
    return 0;
}

PyDoc_STRVAR(curand_direction_vectors_doc,
"_curand_direction_vectors(set, count)\n--\n\n"
"Sobol direction vectors of `set` (101..104, curandDirectionVectorSet_t) for\n"
"`count` dimensions: a new (count, 32) uint32 array for the 32-bit sets, (count, 64)\n"
"uint64 for the 64-bit ones.  libcurand has 20,000 dimensions; row i is its\n"
"dimension i % 20000.");

static PyObject *
bc_curand_direction_vectors(PyObject *m, PyObject *args)
{
    bc_State *st = bc_state_from_module(m);
    int set;
    Py_ssize_t count;
    if (!PyArg_ParseTuple(args, "in:_curand_direction_vectors", &set, &count))
        return NULL;
    if (set < 101 || set > 104) {
        PyErr_Format(PyExc_ValueError,
                     "unknown direction vector set %d (101 to 104: VECTOR_32, "
                     "SCRAMBLED_VECTOR_32, VECTOR_64, SCRAMBLED_VECTOR_64)", set);
        return NULL;
    }
    if (check_count(count) < 0 || load_curand(st) < 0)
        return NULL;
    if (set <= 102) {
        unsigned int(*table)[32] = NULL;
        if (curand_check(st, curand.vectors32(&table, set), "curandGetDirectionVectors32") < 0)
            return NULL;
        return tile_table(table, count, 32, 4);
    }
    unsigned long long(*table)[64] = NULL;
    if (curand_check(st, curand.vectors64(&table, set), "curandGetDirectionVectors64") < 0)
        return NULL;
    return tile_table(table, count, 64, 8);
}

PyDoc_STRVAR(curand_scramble_constants_doc,
"_curand_scramble_constants(bits, count)\n--\n\n"
"Scrambled Sobol constants for `count` dimensions: a new (count,) uint32 array\n"
"(bits=32) or uint64 array (bits=64); entry i is libcurand's constant i % 20000.");

static PyObject *
bc_curand_scramble_constants(PyObject *m, PyObject *args)
{
    bc_State *st = bc_state_from_module(m);
    int bits;
    Py_ssize_t count;
    if (!PyArg_ParseTuple(args, "in:_curand_scramble_constants", &bits, &count))
        return NULL;
    if (bits != 32 && bits != 64) {
        PyErr_Format(PyExc_ValueError, "bits must be 32 or 64, got %d", bits);
        return NULL;
    }
    if (check_count(count) < 0 || load_curand(st) < 0)
        return NULL;
    if (bits == 32) {
        unsigned int *table = NULL;
        if (curand_check(st, curand.scramble32(&table), "curandGetScrambleConstants32") < 0)
            return NULL;
        return tile_table(table, count, 0, 4);
    }
    unsigned long long *table = NULL;
    if (curand_check(st, curand.scramble64(&table), "curandGetScrambleConstants64") < 0)
        return NULL;
    return tile_table(table, count, 0, 8);
}

static PyMethodDef curand_methods[] = {
    {"_curand_version", bc_curand_version, METH_NOARGS, curand_version_doc},
    {"_curand_info", bc_curand_info, METH_NOARGS, curand_info_doc},
    {"_curand_direction_vectors", bc_curand_direction_vectors, METH_VARARGS,
     curand_direction_vectors_doc},
    {"_curand_scramble_constants", bc_curand_scramble_constants, METH_VARARGS,
     curand_scramble_constants_doc},
    {NULL, NULL, 0, NULL},
};

int
bc_curand_setup(PyObject *m, bc_State *st)
{
    BC_UNUSED(st);
    return PyModule_AddFunctions(m, curand_methods);
}
