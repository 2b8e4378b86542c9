/* SPDX-License-Identifier: MIT */
/* NVTX ranges and marks, for Nsight Systems and for barecuda's own trace().
 *
 * NVTX's v2 C API (nvtxRangePushA, nvtxRangePop, nvtxMarkA, nvtxRangeStartA,
 * nvtxRangeEnd, nvtxNameOsThreadA) is loaded at the first call, through the
 * loader's toolkit search (loader.c): $BARECUDA_NVTX, a library already loaded,
 * NVIDIA's nvidia-nvtx wheel (site-packages/nvidia/nvtx/lib), $CUDA_HOME,
 * /usr/local/cuda/lib64, the system loader; libnvToolsExt.so.1 first, else the
 * CUDA 12+ toolkit's libnvtx3interop.so.1, which exports the same functions.
 * When neither is found every function is a cheap no-op (nvtx_available() says
 * which).  While barecuda.tools.trace() records, ranges and marks also go into
 * its timeline as host spans. */
#include "barecuda/trace.h"
#include "barecuda/loader.h"

#include <dlfcn.h>
#include <sys/syscall.h>
#include <unistd.h>

typedef int (*push_fn)(const char *);
typedef int (*pop_fn)(void);
typedef void (*mark_fn)(const char *);
typedef uint64_t (*start_fn)(const char *);
typedef void (*end_fn)(uint64_t);
typedef void (*name_thread_fn)(uint32_t, const char *);

/* Filled once under the GIL, like the loader's tables. */
static struct {
    int state; /* 0: not looked for yet, 1: loaded, -1: not found */
    push_fn push;
    pop_fn pop;
    mark_fn mark;
    start_fn start;
    end_fn end;
    name_thread_fn name_thread;
    char failure[4096];
} nvtx;

static unsigned long long fallback_range_id;

static const char *const nvtx_sonames[] = {"libnvToolsExt.so.1", "libnvtx3interop.so.1", NULL};
static const char *const nvtx_wheel_dirs[] = {"/nvidia/nvtx/lib", "/nvidia/cu13/lib", NULL};
static const bc_libspec nvtx_spec = {
    .what = "NVTX",
    .sonames = nvtx_sonames,
    .probe = "nvtxRangePushA",
    .wheel_dirs = nvtx_wheel_dirs,
    .env = "BARECUDA_NVTX",
    .hint = "Install NVIDIA's NVTX wheel (`pip install nvidia-nvtx`) or the CUDA toolkit",
};

static int
nvtx_load(void)
{
    if (nvtx.state != 0)
        return nvtx.state > 0;
    void *h = bc_loader_find_library(&nvtx_spec, nvtx.failure, sizeof nvtx.failure);
    if (h != NULL) {
        nvtx.push = (push_fn)dlsym(h, "nvtxRangePushA");
        nvtx.pop = (pop_fn)dlsym(h, "nvtxRangePop");
        nvtx.mark = (mark_fn)dlsym(h, "nvtxMarkA");
        nvtx.start = (start_fn)dlsym(h, "nvtxRangeStartA");
        nvtx.end = (end_fn)dlsym(h, "nvtxRangeEnd");
        nvtx.name_thread = (name_thread_fn)dlsym(h, "nvtxNameOsThreadA");
    }
    if (h == NULL || !nvtx.push || !nvtx.pop || !nvtx.mark || !nvtx.start || !nvtx.end) {
        if (h != NULL)
            snprintf(nvtx.failure, sizeof nvtx.failure,
                     "the NVTX library found lacks part of the v2 C API");
        nvtx.state = -1;
        return 0;
    }
    nvtx.state = 1;
    return 1;
}

static const char *
text_arg(PyObject *arg, const char *fn)
{
    if (!PyUnicode_Check(arg)) {
        PyErr_Format(PyExc_TypeError, "%s(): the name must be a str, not %.100s", fn,
                     Py_TYPE(arg)->tp_name);
        return NULL;
    }
    return PyUnicode_AsUTF8(arg);
}

PyDoc_STRVAR(nvtx_available_doc,
"nvtx_available()\n--\n\n"
"True when an NVTX library was found (loading it on first call); otherwise the\n"
"nvtx_* functions are no-ops, apart from what they add to an active trace().");

static PyObject *
bc_nvtx_available(PyObject *m, PyObject *Py_UNUSED(ignored))
{
    BC_UNUSED(m);
    return PyBool_FromLong(nvtx_load());
}

PyDoc_STRVAR(nvtx_info_doc,
"nvtx_info()\n--\n\n"
"A dict: 'available' (bool) and 'error' (what was searched, when not found).");

static PyObject *
bc_nvtx_info(PyObject *m, PyObject *Py_UNUSED(ignored))
{
    BC_UNUSED(m);
    int ok = nvtx_load();
    return Py_BuildValue("{s:O,s:z}", "available", ok ? Py_True : Py_False, "error",
                         ok ? NULL : nvtx.failure);
}

PyDoc_STRVAR(nvtx_push_doc,
"nvtx_push(name)\n--\n\n"
"Open a nested NVTX range on this thread (nvtxRangePushA); close it with nvtx_pop().");

static PyObject *
bc_nvtx_push(PyObject *m, PyObject *arg)
{
    const char *name = text_arg(arg, "nvtx_push");
    if (name == NULL)
        return NULL;
    if (nvtx_load())
        nvtx.push(name);
    bc_State *st = bc_state_from_module(m);
    if (st->trace != NULL)
        bc_trace_range_open(st, name, PyThread_get_thread_ident(), 1);
    Py_RETURN_NONE;
}

PyDoc_STRVAR(nvtx_pop_doc,
"nvtx_pop()\n--\n\n"
"Close the innermost NVTX range this thread opened with nvtx_push() (nvtxRangePop).");

static PyObject *
bc_nvtx_pop(PyObject *m, PyObject *Py_UNUSED(ignored))
{
    if (nvtx_load())
        nvtx.pop();
    bc_State *st = bc_state_from_module(m);
    if (st->trace != NULL)
        bc_trace_range_close(st, PyThread_get_thread_ident(), 1);
    Py_RETURN_NONE;
}

PyDoc_STRVAR(nvtx_mark_doc,
"nvtx_mark(name)\n--\n\n"
"An instantaneous NVTX marker (nvtxMarkA).");

static PyObject *
bc_nvtx_mark(PyObject *m, PyObject *arg)
{
    const char *name = text_arg(arg, "nvtx_mark");
    if (name == NULL)
        return NULL;
    if (nvtx_load())
        nvtx.mark(name);
    bc_State *st = bc_state_from_module(m);
    if (st->trace != NULL)
        bc_trace_mark(st, name);
    Py_RETURN_NONE;
}

PyDoc_STRVAR(nvtx_range_start_doc,
"nvtx_range_start(name)\n--\n\n"
"Open an NVTX range that may end on another thread (nvtxRangeStartA); returns\n"
"its id for nvtx_range_end().");

static PyObject *
bc_nvtx_range_start(PyObject *m, PyObject *arg)
{
    const char *name = text_arg(arg, "nvtx_range_start");
    if (name == NULL)
        return NULL;
    unsigned long long id = nvtx_load() ? (unsigned long long)nvtx.start(name) : 0;
    if (id == 0) /* no NVTX tool attached or no library: ids of our own */
        id = ++fallback_range_id | (1ULL << 63);
    bc_State *st = bc_state_from_module(m);
    if (st->trace != NULL)
        bc_trace_range_open(st, name, id, 0);
    return PyLong_FromUnsignedLongLong(id);
}

PyDoc_STRVAR(nvtx_range_end_doc,
"nvtx_range_end(range_id)\n--\n\n"
"Close the range nvtx_range_start() returned `range_id` for (nvtxRangeEnd).");

static PyObject *
bc_nvtx_range_end(PyObject *m, PyObject *arg)
{
    unsigned long long id = PyLong_AsUnsignedLongLong(arg);
    if (id == (unsigned long long)-1 && PyErr_Occurred())
        return NULL;
    if (!(id >> 63) && nvtx_load())
        nvtx.end((uint64_t)id);
    bc_State *st = bc_state_from_module(m);
    if (st->trace != NULL)
        bc_trace_range_close(st, id, 0);
    Py_RETURN_NONE;
}

PyDoc_STRVAR(nvtx_name_thread_doc,
"nvtx_name_thread(name)\n--\n\n"
"Name the calling OS thread in NVTX tools (nvtxNameOsThreadA), when supported.");

static PyObject *
bc_nvtx_name_thread(PyObject *m, PyObject *arg)
{
    BC_UNUSED(m);
    const char *name = text_arg(arg, "nvtx_name_thread");
    if (name == NULL)
        return NULL;
    if (nvtx_load() && nvtx.name_thread)
        nvtx.name_thread((uint32_t)syscall(SYS_gettid), name);
    Py_RETURN_NONE;
}

static PyMethodDef nvtx_methods[] = {
    {"nvtx_available", bc_nvtx_available, METH_NOARGS, nvtx_available_doc},
    {"nvtx_info", bc_nvtx_info, METH_NOARGS, nvtx_info_doc},
    {"nvtx_push", bc_nvtx_push, METH_O, nvtx_push_doc},
    {"nvtx_pop", bc_nvtx_pop, METH_NOARGS, nvtx_pop_doc},
    {"nvtx_mark", bc_nvtx_mark, METH_O, nvtx_mark_doc},
    {"nvtx_range_start", bc_nvtx_range_start, METH_O, nvtx_range_start_doc},
    {"nvtx_range_end", bc_nvtx_range_end, METH_O, nvtx_range_end_doc},
    {"nvtx_name_thread", bc_nvtx_name_thread, METH_O, nvtx_name_thread_doc},
    {NULL, NULL, 0, NULL},
};

int
bc_nvtx_setup(PyObject *m, bc_State *st)
{
    BC_UNUSED(st);
    return PyModule_AddFunctions(m, nvtx_methods);
}
