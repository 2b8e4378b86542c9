/* SPDX-License-Identifier: MIT */
/* Module: code loaded into a context (cuModuleLoadDataEx) from PTX text, CUBIN or
 * fatbin bytes, and what can be looked up in it.
 *
 * The JIT's info and error logs are always collected: a failed load raises with
 * the error log in its message, a successful one hands both logs to the caller's
 * message_handler(compile_success, info_log, error_log) as PyCUDA does.  Loading
 * and unloading run with the GIL released.  A Module holds its Context; every
 * Function and global pointer taken from it holds the Module.
 *
 * Function (src/function.c, with the launch machinery on a floor above) holds
 * its Module; get_function() makes one through the constructor function.c
 * registers here at module init (bc_module_set_function_maker), so this file
 * never calls up. */
#include "barecuda/module.h"
#include "barecuda/argparse.h"
#include "barecuda/error.h"
#include "barecuda/loader.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>

#define LOG_BYTES BC_JIT_LOG_BYTES
#define MAX_JIT_OPTIONS BC_JIT_MAX_OPTIONS

/* A pointer to a __device__ / __constant__ variable of a module: int-like, usable
 * wherever a device pointer is (kernel arguments, copies), never freed by us. */
typedef struct {
    PyObject_HEAD
    CUdeviceptr ptr;
    size_t size;
    PyObject *module;
} bc_ModuleGlobal;

int
bc_module_usable(bc_State *st, bc_Module *m)
{
    if (m->handle == NULL)
        return bc_error_logic(st, "this Module was unloaded");
    return bc_context_check_alive(st, m->ctx, "this Module");
}

/* ------------------------------------------------------------ loading */

/* The JIT options of the caller plus the log buffers we always ask for
 * (bc_jit_options, module.h: src/linker.c shares them). */
typedef bc_jit_options jit_options;

static int
jit_options_fill(bc_State *st, PyObject *options, jit_options *o)
{
    BC_UNUSED(st);
    o->n = 0;
    o->info_log = o->error_log = NULL;
    if (options != NULL && options != Py_None) {
        PyObject *seq = PySequence_Fast(options, "options must be a list of (jit_option, value) pairs");
        if (seq == NULL)
            return -1;
        Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
        if (n > MAX_JIT_OPTIONS) {
            Py_DECREF(seq);
            PyErr_Format(PyExc_ValueError, "at most %d JIT options, got %zd", MAX_JIT_OPTIONS, n);
            return -1;
        }
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *pair = PySequence_Fast_ITEMS(seq)[i];
            if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2) {
                Py_DECREF(seq);
                PyErr_Format(PyExc_TypeError,
                             "options[%zd] must be a (jit_option, value) tuple, not %.100s", i,
                             Py_TYPE(pair)->tp_name);
                return -1;
            }
            long long key;
            if (bc_arg_long(PyTuple_GET_ITEM(pair, 0), "JIT option", 0, CU_JIT_NUM_OPTIONS - 1,
                            &key) < 0) {
                Py_DECREF(seq);
                return -1;
            }
            if (key == CU_JIT_INFO_LOG_BUFFER || key == CU_JIT_ERROR_LOG_BUFFER ||
                key == CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES ||
                key == CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES) {
                Py_DECREF(seq);
                PyErr_SetString(PyExc_ValueError,
                                "the JIT log buffers are managed by barecuda: pass a "
                                "message_handler to see the logs");
                return -1;
            }
            PyObject *v = PyTuple_GET_ITEM(pair, 1);
            void *value;
            if (PyFloat_Check(v)) {
                float f = (float)PyFloat_AS_DOUBLE(v);
                uintptr_t bits = 0;
                memcpy(&bits, &f, sizeof f);
                value = (void *)bits;
            } else {
                long long iv;
                if (bc_arg_long(v, "JIT option value", LLONG_MIN, LLONG_MAX, &iv) < 0) {
                    Py_DECREF(seq);
                    return -1;
                }
                value = (void *)(uintptr_t)iv;
            }
            o->keys[o->n] = (CUjit_option)key;
            o->values[o->n] = value;
            o->n++;
        }
        Py_DECREF(seq);
    }
    o->info_log = PyMem_RawCalloc(1, LOG_BYTES);
    o->error_log = PyMem_RawCalloc(1, LOG_BYTES);
    if (o->info_log == NULL || o->error_log == NULL) {
        PyMem_RawFree(o->info_log);
        PyMem_RawFree(o->error_log);
        PyErr_NoMemory();
        return -1;
    }
    o->keys[o->n] = CU_JIT_INFO_LOG_BUFFER;
    o->values[o->n++] = o->info_log;
    o->keys[o->n] = CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES;
    o->values[o->n++] = (void *)(uintptr_t)(LOG_BYTES - 1);
    o->keys[o->n] = CU_JIT_ERROR_LOG_BUFFER;
    o->values[o->n++] = o->error_log;
    o->keys[o->n] = CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES;
    o->values[o->n++] = (void *)(uintptr_t)(LOG_BYTES - 1);
    return 0;
}

static void
jit_options_free(jit_options *o)
{
    PyMem_RawFree(o->info_log);
    PyMem_RawFree(o->error_log);
    o->info_log = o->error_log = NULL;
}

static PyObject *
log_str(const char *s)
{
    return PyUnicode_DecodeUTF8(s, (Py_ssize_t)strnlen(s, LOG_BYTES - 1), "replace");
}

/* Append the JIT error log to the message of the exception being raised. */
static void
attach_error_log(const char *log)
{
    if (log == NULL || log[0] == '\0')
        return;
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    if (value != NULL) {
        PyObject *text = log_str(log);
        PyObject *old = PyObject_Str(value);
        PyObject *msg = text && old ? PyUnicode_FromFormat("%U\nJIT error log:\n%U", old, text)
                                    : NULL;
        PyObject *args = msg ? PyTuple_Pack(1, msg) : NULL;
        if (args == NULL || PyObject_SetAttrString(value, "args", args) < 0 ||
            (text && PyObject_SetAttrString(value, "log", text) < 0))
            PyErr_Clear();
        Py_XDECREF(args);
        Py_XDECREF(msg);
        Py_XDECREF(old);
        Py_XDECREF(text);
    }
    PyErr_Restore(type, value, tb);
}

static PyObject *
module_wrap(bc_State *st, CUmodule handle, bc_Context *ctx)
{
    bc_Module *self = PyObject_GC_New(bc_Module, (PyTypeObject *)st->ModuleType);
    if (self == NULL)
        return NULL;
    self->handle = handle;
    self->ctx = (bc_Context *)Py_NewRef(ctx);
    self->weakreflist = NULL;
    self->dict = NULL;
    PyObject_GC_Track(self);
    return (PyObject *)self;
}

/* Load `image` (NUL-terminated when it is text) into the current context. */
static PyObject *
load_image(bc_State *st, const void *image, PyObject *options, PyObject *handler)
{
    if (handler != NULL && handler != Py_None && !PyCallable_Check(handler)) {
        PyErr_SetString(PyExc_TypeError, "message_handler must be callable or None");
        return NULL;
    }
    jit_options o;
    if (jit_options_fill(st, options, &o) < 0)
        return NULL;
    bc_Context *ctx = bc_context_current(st);
    if (ctx == NULL) {
        jit_options_free(&o);
        return NULL;
    }
    CUmodule handle = NULL;
    CUresult rc;
    Py_BEGIN_ALLOW_THREADS
    rc = bc_drv.cuModuleLoadDataEx(&handle, image, o.n, o.keys, o.values);
    Py_END_ALLOW_THREADS
    PyObject *out = NULL;
    if (rc != CUDA_SUCCESS) {
        bc_error_raise(st, rc, "cuModuleLoadDataEx");
        attach_error_log(o.error_log);
        goto done;
    }
    out = module_wrap(st, handle, ctx);
    if (out == NULL) {
        bc_drv.cuModuleUnload(handle);
        goto done;
    }
    if (handler != NULL && handler != Py_None) {
        PyObject *info = log_str(o.info_log), *err = log_str(o.error_log);
        PyObject *res = info && err ? PyObject_CallFunction(handler, "OOO", Py_True, info, err)
                                    : NULL;
        Py_XDECREF(info);
        Py_XDECREF(err);
        if (res == NULL)
            Py_CLEAR(out);
        Py_XDECREF(res);
    }
done:
    Py_DECREF(ctx);
    jit_options_free(&o);
    return out;
}

/* A NUL-terminated copy of bytes-like or str data (the JIT reads PTX up to NUL;
 * CUBIN and fatbin images carry their own sizes, so the extra byte is harmless). */
static char *
image_copy(PyObject *data, Py_ssize_t *len_out)
{
    const char *src;
    Py_ssize_t len;
    Py_buffer view = {0};
    if (PyUnicode_Check(data)) {
        src = PyUnicode_AsUTF8AndSize(data, &len);
        if (src == NULL)
            return NULL;
    } else {
        if (PyObject_GetBuffer(data, &view, PyBUF_CONTIG_RO) < 0) {
            PyErr_Format(PyExc_TypeError,
                         "module data must be PTX text (str or bytes) or CUBIN/fatbin bytes, "
                         "not %.100s", Py_TYPE(data)->tp_name);
            return NULL;
        }
        src = view.buf;
        len = view.len;
    }
    char *copy = NULL;
    if (len == 0)
        PyErr_SetString(PyExc_ValueError, "module data is empty");
    else if ((copy = PyMem_RawMalloc((size_t)len + 1)) == NULL)
        PyErr_NoMemory();
    else {
        memcpy(copy, src, (size_t)len);
        copy[len] = '\0';
    }
    if (view.obj != NULL)
        PyBuffer_Release(&view);
    *len_out = len;
    return copy;
}

PyDoc_STRVAR(module_from_buffer_doc,
"module_from_buffer(buffer, options=None, message_handler=None)\n--\n\n"
"Load PTX text (str or bytes), a CUBIN or a fatbin into the current context.\n"
"`options` is a list of (jit_option, value) pairs.  On failure the exception\n"
"message carries the JIT error log; on success message_handler(True, info_log,\n"
"error_log) is called when given.  Returns a Module.");

static PyObject *
bc_module_from_buffer(PyObject *m, PyObject *args, PyObject *kwargs)
{
    bc_State *st = bc_state_from_module(m);
    static char *kwlist[] = {"buffer", "options", "message_handler", NULL}; /* PyCUDA's */
    PyObject *data, *options = NULL, *handler = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|OO:module_from_buffer", kwlist, &data,
                                     &options, &handler))
        return NULL;
    Py_ssize_t len;
    char *image = image_copy(data, &len);
    if (image == NULL)
        return NULL;
    PyObject *out = load_image(st, image, options, handler);
    PyMem_RawFree(image);
    return out;
}

PyDoc_STRVAR(module_from_file_doc,
"module_from_file(filename, options=None, message_handler=None)\n--\n\n"
"Load a .ptx, .cubin or .fatbin file into the current context (see module_from_buffer).");

static PyObject *
bc_module_from_file(PyObject *m, PyObject *args, PyObject *kwargs)
{
    bc_State *st = bc_state_from_module(m);
    static char *kwlist[] = {"filename", "options", "message_handler", NULL}; /* PyCUDA's */
    PyObject *path = NULL, *options = NULL, *handler = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O&|OO:module_from_file", kwlist,
                                     PyUnicode_FSConverter, &path, &options, &handler))
        return NULL;
    char *image = NULL;
    long len = -1;
    int err = 0;
    Py_BEGIN_ALLOW_THREADS
    FILE *f = fopen(PyBytes_AS_STRING(path), "rb");
    if (f == NULL)
        err = errno;
    else {
        if (fseek(f, 0, SEEK_END) == 0 && (len = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0 &&
            (image = PyMem_RawMalloc((size_t)len + 1)) != NULL) {
            if (fread(image, 1, (size_t)len, f) != (size_t)len) {
                err = errno ? errno : EIO;
                PyMem_RawFree(image);
                image = NULL;
            } else
                image[len] = '\0';
        } else
            err = errno ? errno : ENOMEM;
        fclose(f);
    }
    Py_END_ALLOW_THREADS
    PyObject *out = NULL;
    if (image == NULL) {
        errno = err;
        PyErr_SetFromErrnoWithFilenameObject(PyExc_OSError, path);
    } else if (len == 0)
        PyErr_Format(PyExc_ValueError, "module file %R is empty", path);
    else
        out = load_image(st, image, options, handler);
    PyMem_RawFree(image);
    Py_DECREF(path);
    return out;
}

/* ------------------------------------------------------------ Module */

static CUresult
module_release(bc_Module *self)
{
    CUresult rc = CUDA_SUCCESS;
    CUmodule h = self->handle;
    self->handle = NULL;
    if (h == NULL || self->ctx == NULL || self->ctx->let_go || !bc_drv_ready)
        return rc;
    int entered = bc_context_enter(self->ctx);
    if (entered < 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    rc = bc_drv.cuModuleUnload(h);
    bc_context_leave(entered);
    return rc;
}

/* tp_clear: only the instance dict (the parents stay until dealloc). */
static int
module_clear(bc_Module *self)
{
    Py_CLEAR(self->dict);
    return 0;
}

static int
module_traverse(bc_Module *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(self->dict);
    Py_VISIT(self->ctx);
    return 0;
}

static void
module_dealloc(bc_Module *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    if (self->weakreflist != NULL)
        PyObject_ClearWeakRefs((PyObject *)self);
    if (self->handle != NULL)
        bc_error_in_destructor(module_release(self),
                               "cuModuleUnload", (PyObject *)self);
    Py_CLEAR(self->ctx);
    Py_CLEAR(self->dict);
    tp->tp_free(self);
    Py_DECREF(tp);
}

PyDoc_STRVAR(get_function_doc,
"get_function($self, name)\n--\n\n"
"The kernel `name` of this module as a Function (LogicError naming it when missing).");

static bc_function_maker function_maker;

void
bc_module_set_function_maker(bc_function_maker fn)
{
    function_maker = fn;
}

static PyObject *
module_get_function(bc_Module *self, PyObject *name)
{
    bc_State *st = bc_state_of((PyObject *)self);
    if (!PyUnicode_Check(name)) {
        PyErr_Format(PyExc_TypeError, "get_function(): name must be a str, not %.100s",
                     Py_TYPE(name)->tp_name);
        return NULL;
    }
    if (bc_module_usable(st, self) < 0)
        return NULL;
    if (function_maker == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "get_function(): functions are not set up");
        return NULL;
    }
    return function_maker(st, self, name);
}

PyDoc_STRVAR(get_global_doc,
"get_global($self, name)\n--\n\n"
"(pointer, size_in_bytes) of the __device__ or __constant__ variable `name`.\n"
"The pointer is int-like and works as a kernel or copy argument; the module\n"
"owns the memory (it is never freed by the pointer).");

static PyObject *
module_get_global(bc_Module *self, PyObject *name)
{
    bc_State *st = bc_state_of((PyObject *)self);
    if (!PyUnicode_Check(name)) {
        PyErr_Format(PyExc_TypeError, "get_global(): name must be a str, not %.100s",
                     Py_TYPE(name)->tp_name);
        return NULL;
    }
    if (bc_module_usable(st, self) < 0)
        return NULL;
    const char *cname = PyUnicode_AsUTF8(name);
    if (cname == NULL)
        return NULL;
    CUdeviceptr ptr;
    size_t size;
    CUresult rc = bc_drv.cuModuleGetGlobal(&ptr, &size, self->handle, cname);
    if (rc == CUDA_ERROR_NOT_FOUND) {
        bc_error_logic(st, "module has no global named %R", name);
        return NULL;
    }
    if (bc_check(st, rc, "cuModuleGetGlobal") < 0)
        return NULL;
    bc_ModuleGlobal *g = PyObject_GC_New(bc_ModuleGlobal, (PyTypeObject *)st->ModuleGlobalType);
    if (g == NULL)
        return NULL;
    g->ptr = ptr;
    g->size = size;
    g->module = Py_NewRef(self);
    PyObject_GC_Track(g);
    PyObject *out = Py_BuildValue("(Nn)", (PyObject *)g, (Py_ssize_t)size);
    return out;
}

PyDoc_STRVAR(unload_doc,
"unload($self)\n--\n\nUnload the module now (idempotent); its Functions raise LogicError afterwards.");

static PyObject *
module_unload(bc_Module *self, PyObject *Py_UNUSED(ignored))
{
    bc_State *st = bc_state_of((PyObject *)self);
    CUresult rc;
    Py_BEGIN_ALLOW_THREADS
    rc = module_release(self);
    Py_END_ALLOW_THREADS
    if (bc_check(st, rc, "cuModuleUnload") < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *
module_enter(PyObject *self, PyObject *Py_UNUSED(ignored))
{
    return Py_NewRef(self);
}

static PyObject *
module_exit(bc_Module *self, PyObject *Py_UNUSED(args))
{
    return module_unload(self, NULL);
}

static PyObject *
module_get_handle(bc_Module *self, void *Py_UNUSED(closure))
{
    return PyLong_FromVoidPtr((void *)self->handle);
}

static PyObject *
module_get_context(bc_Module *self, void *Py_UNUSED(closure))
{
    return Py_NewRef(self->ctx ? (PyObject *)self->ctx : Py_None);
}

static PyObject *
module_repr(bc_Module *self)
{
    return PyUnicode_FromFormat("<barecuda.driver.Module %p%s>", (void *)self->handle,
                                self->handle ? "" : " (unloaded)");
}

static PyMethodDef module_methods[] = {
    {"get_function", (PyCFunction)module_get_function, METH_O, get_function_doc},
    {"get_global", (PyCFunction)module_get_global, METH_O, get_global_doc},
    {"unload", (PyCFunction)module_unload, METH_NOARGS, unload_doc},
    {"close", (PyCFunction)module_unload, METH_NOARGS,
     "close($self)\n--\n\nSame as unload()."},
    {"__enter__", module_enter, METH_NOARGS, "__enter__($self)\n--\n\nReturn self."},
    {"__exit__", (PyCFunction)module_exit, METH_VARARGS,
     "__exit__($self, *exc_info)\n--\n\nRelease the object (as free()/close())."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef module_getset[] = {
    BC_DICT_GETSET,
    {"handle", (getter)module_get_handle, NULL, "The CUmodule as an int (0 once unloaded).", NULL},
    {"context", (getter)module_get_context, NULL, "The Context the module is loaded in.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMemberDef module_members[] = {
    {"__weaklistoffset__", T_PYSSIZET, offsetof(bc_Module, weakreflist), READONLY, NULL},
    {"__dictoffset__", T_PYSSIZET, offsetof(bc_Module, dict), READONLY, NULL},
    {NULL, 0, 0, 0, NULL},
};

PyDoc_STRVAR(module_doc,
"Code loaded into a context: made by module_from_buffer(), module_from_file()\n"
"or compiler.SourceModule.");

static PyType_Slot module_slots[] = {
    {Py_tp_dealloc, module_dealloc},
    {Py_tp_traverse, module_traverse},
    {Py_tp_clear, module_clear},
    {Py_tp_repr, module_repr},
    {Py_tp_methods, module_methods},
    {Py_tp_getset, module_getset},
    {Py_tp_members, module_members},
    {Py_tp_doc, (void *)module_doc},
    {0, NULL},
};

static PyType_Spec module_spec = {
    .name = "barecuda.driver.Module",
    .basicsize = sizeof(bc_Module),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_IMMUTABLETYPE | Py_TPFLAGS_HAVE_GC |
             Py_TPFLAGS_DISALLOW_INSTANTIATION,
    .slots = module_slots,
};

/* ------------------------------------------------------------ ModuleGlobal */

static int
global_traverse(bc_ModuleGlobal *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(self->module);
    return 0;
}

static int
global_clear(bc_ModuleGlobal *self)
{
    Py_CLEAR(self->module);
    return 0;
}

static void
global_dealloc(bc_ModuleGlobal *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    global_clear(self);
    tp->tp_free(self);
    Py_DECREF(tp);
}

static PyObject *
global_int(bc_ModuleGlobal *self)
{
    bc_Module *m = (bc_Module *)self->module;
    if (m != NULL && bc_module_usable(bc_state_of((PyObject *)self), m) < 0)
        return NULL;
    return PyLong_FromUnsignedLongLong((unsigned long long)self->ptr);
}

static PyObject *
global_get_gpudata(bc_ModuleGlobal *self, void *Py_UNUSED(closure))
{
    return global_int(self);
}

static PyObject *
global_get_size(bc_ModuleGlobal *self, void *Py_UNUSED(closure))
{
    return PyLong_FromSize_t(self->size);
}

static PyObject *
global_get_module(bc_ModuleGlobal *self, void *Py_UNUSED(closure))
{
    return Py_NewRef(self->module ? self->module : Py_None);
}

static PyObject *
global_repr(bc_ModuleGlobal *self)
{
    return PyUnicode_FromFormat("<barecuda.driver.ModuleGlobal 0x%llx, %zu bytes>",
                                (unsigned long long)self->ptr, self->size);
}

static PyGetSetDef global_getset[] = {
    {"size", (getter)global_get_size, NULL, "Size of the variable in bytes.", NULL},
    {"gpudata", (getter)global_get_gpudata, NULL, "The device pointer as an int.", NULL},
    {"module", (getter)global_get_module, NULL, "The Module that owns the memory.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyDoc_STRVAR(global_doc,
"A module variable's device pointer (from Module.get_global): int(g) is the\n"
"address; it works as a kernel or copy argument and keeps its Module loaded.");

static PyType_Slot global_slots[] = {
    {Py_tp_dealloc, global_dealloc},
    {Py_tp_traverse, global_traverse},
    {Py_tp_clear, global_clear},
    {Py_tp_repr, global_repr},
    {Py_nb_int, global_int},
    {Py_nb_index, global_int},
    {Py_tp_getset, global_getset},
    {Py_tp_doc, (void *)global_doc},
    {0, NULL},
};

static PyType_Spec global_spec = {
    .name = "barecuda.driver.ModuleGlobal",
    .basicsize = sizeof(bc_ModuleGlobal),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_IMMUTABLETYPE | Py_TPFLAGS_HAVE_GC |
             Py_TPFLAGS_DISALLOW_INSTANTIATION,
    .slots = global_slots,
};

/* ------------------------------------------------ shared with src/linker.c */

int
bc_jit_options_fill(bc_State *st, PyObject *options, bc_jit_options *o)
{
    return jit_options_fill(st, options, o);
}

void
bc_jit_options_free(bc_jit_options *o)
{
    jit_options_free(o);
}

PyObject *
bc_jit_log_str(const char *log)
{
    return log_str(log);
}

void
bc_jit_attach_error_log(const char *log)
{
    attach_error_log(log);
}

PyObject *
bc_module_load_image(bc_State *st, const void *image, PyObject *options, PyObject *handler)
{
    return load_image(st, image, options, handler);
}

static PyMethodDef cumodule_functions[] = {
    {"module_from_buffer", (PyCFunction)(void (*)(void))bc_module_from_buffer,
     METH_VARARGS | METH_KEYWORDS, module_from_buffer_doc},
    {"module_from_file", (PyCFunction)(void (*)(void))bc_module_from_file,
     METH_VARARGS | METH_KEYWORDS, module_from_file_doc},
    {NULL, NULL, 0, NULL},
};

int
bc_cumodule_setup(PyObject *m, bc_State *st)
{
    if (bc_add_type(m, &module_spec, NULL, &st->ModuleType) < 0 ||
        bc_add_type(m, &global_spec, NULL, &st->ModuleGlobalType) < 0)
        return -1;
    return PyModule_AddFunctions(m, cumodule_functions);
}
