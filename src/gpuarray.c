/* SPDX-License-Identifier: MIT */
/* The C core of the array layer (python/barecuda/gpuarray.py).
 *
 * _ArrayBase holds GPUArray's fields, so C can make a result array without
 * running Python code; GPUArray subclasses it and adds every method.
 *
 * HotEntry remembers the compiled Functions a kernel generator last ran in a
 * context, weakly (the context's kernel cache owns them, DESIGN rule 5), with the
 * launch shape they need; for a one-launch reduction also its workspace on the
 * legacy default stream (ticket counter + partials, see python/barecuda/reduction.py),
 * weakly as well.
 *
 * _OpTable is the small-op fast path of one operator (`a + b`, `a * 2.0`, `-a`,
 * `a.sum()`).  For operand dtypes it has seen, it checks the operands, takes the
 * result's memory from the context's block cache and launches the kernel, all in
 * one C call.  Whenever anything is unusual (another context, an allocator, a
 * layout it does not copy, a size past 2^30, a scalar that needs NumPy's rules)
 * it answers None and gpuarray.py takes the general path, which also refreshes
 * the table.  An elementwise entry may also hold the kernel for 1-d strided views
 * (x[::2] + y[::2], x[::-1] * 2.0: python/barecuda/_strided.py), which takes each
 * array operand's element stride as an int after the pointers and the scalar.  So the table can be wrong only by being slow, never by computing
 * something the general path would not. */
#include "barecuda/blockcache.h"
#include "barecuda/error.h"
#include "barecuda/loader.h"
#include "barecuda/memory.h"
#include "barecuda/module.h"
#include "barecuda/stream.h"

#include <float.h>
#include <math.h>

/* ------------------------------------------------------------ _ArrayBase */

typedef struct {
    PyObject_HEAD
    PyObject *shape, *dtype, *size, *strides, *gpudata, *ptr, *base, *allocator;
    PyObject *c, *f, *mem; /* _c, _f: C/F contiguity (bools); _mem: memory kept alive */
    PyObject *weakreflist;
} bc_ArrayBase;

#define ARRAY_FIELDS(X)                                                                    \
    X(shape) X(dtype) X(size) X(strides) X(gpudata) X(ptr) X(base) X(allocator) X(c) X(f) \
    X(mem)

static int
arraybase_traverse(PyObject *self, visitproc visit, void *arg)
{
    bc_ArrayBase *a = (bc_ArrayBase *)self;
    Py_VISIT(Py_TYPE(self));
#define VISIT(name) Py_VISIT(a->name);
    ARRAY_FIELDS(VISIT)
#undef VISIT
    return 0;
}

static int
arraybase_clear(PyObject *self)
{
    bc_ArrayBase *a = (bc_ArrayBase *)self;
#define CLEAR(name) Py_CLEAR(a->name);
    ARRAY_FIELDS(CLEAR)
#undef CLEAR
    return 0;
}

static void
arraybase_dealloc(PyObject *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    if (((bc_ArrayBase *)self)->weakreflist != NULL)
        PyObject_ClearWeakRefs(self);
    arraybase_clear(self);
    tp->tp_free(self);
    Py_DECREF(tp);
}

static PyObject *
arraybase_new(PyTypeObject *type, PyObject *Py_UNUSED(args), PyObject *Py_UNUSED(kwargs))
{
    return type->tp_alloc(type, 0); /* the subclass's __init__ fills the fields */
}

static PyMemberDef arraybase_members[] = {
    {"shape", T_OBJECT_EX, offsetof(bc_ArrayBase, shape), 0, NULL},
    {"dtype", T_OBJECT_EX, offsetof(bc_ArrayBase, dtype), 0, NULL},
    {"size", T_OBJECT_EX, offsetof(bc_ArrayBase, size), 0, NULL},
    {"strides", T_OBJECT_EX, offsetof(bc_ArrayBase, strides), 0, NULL},
    {"ptr", T_OBJECT_EX, offsetof(bc_ArrayBase, ptr), 0, NULL},
    {"base", T_OBJECT_EX, offsetof(bc_ArrayBase, base), 0, NULL},
    {"allocator", T_OBJECT_EX, offsetof(bc_ArrayBase, allocator), 0, NULL},
    {"_c", T_OBJECT_EX, offsetof(bc_ArrayBase, c), 0, NULL},
    {"_f", T_OBJECT_EX, offsetof(bc_ArrayBase, f), 0, NULL},
    {"_mem", T_OBJECT_EX, offsetof(bc_ArrayBase, mem), 0, NULL},
    {"__weaklistoffset__", T_PYSSIZET, offsetof(bc_ArrayBase, weakreflist), READONLY, NULL},
    {NULL, 0, 0, 0, NULL},
};

/* gpudata, as PyCUDA has it: whatever holds the memory (a DeviceAllocation, an
 * int, any object with __int__, or None when empty), assignable by subclasses
 * (`self.gpudata = int(base) + offset`).  Assigning it sets ptr, the address the
 * fast paths read, and an object (not an int) also becomes the memory kept alive. */
static PyObject *
arraybase_get_gpudata(PyObject *self, void *Py_UNUSED(closure))
{
    bc_ArrayBase *a = (bc_ArrayBase *)self;
    if (a->gpudata == NULL)
        return PyErr_Format(PyExc_AttributeError, "'%.100s' object has no attribute 'gpudata'",
                            Py_TYPE(self)->tp_name);
    return Py_NewRef(a->gpudata);
}

static int
address_of(bc_State *st, PyObject *value, CUdeviceptr *out)
{
    *out = 0;
    if (value == Py_None)
        return 0;
    if (bc_pointer_convert(st, value, out, NULL) == 0)
        return 0;
    PyTypeObject *tp = Py_TYPE(value);
    if (!PyErr_ExceptionMatches(PyExc_TypeError) || PyFloat_Check(value) ||
        tp->tp_as_number == NULL || tp->tp_as_number->nb_int == NULL)
        return -1;
    PyErr_Clear(); /* an object with only __int__, as PyCUDA takes */
    PyObject *v = PyNumber_Long(value);
    if (v == NULL)
        return -1;
    unsigned long long p = PyLong_AsUnsignedLongLong(v);
    Py_DECREF(v);
    if (p == (unsigned long long)-1 && PyErr_Occurred()) {
        PyErr_Format(PyExc_ValueError, "gpudata: int(%.100s) is not a device address",
                     tp->tp_name);
        return -1;
    }
    *out = (CUdeviceptr)p;
    return 0;
}

static int
arraybase_set_gpudata(PyObject *self, PyObject *value, void *Py_UNUSED(closure))
{
    bc_ArrayBase *a = (bc_ArrayBase *)self;
    if (value == NULL) {
        PyErr_SetString(PyExc_AttributeError, "gpudata cannot be deleted");
        return -1;
    }
    CUdeviceptr p;
    if (address_of(bc_state_of(self), value, &p) < 0)
        return -1;
    PyObject *ptr = PyLong_FromUnsignedLongLong((unsigned long long)p);
    if (ptr == NULL)
        return -1;
    Py_XSETREF(a->ptr, ptr);
    if (value != Py_None && !PyLong_Check(value))
        Py_XSETREF(a->mem, Py_NewRef(value));
    Py_XSETREF(a->gpudata, Py_NewRef(value));
    return 0;
}

static PyGetSetDef arraybase_getset[] = {
    {"gpudata", arraybase_get_gpudata, arraybase_set_gpudata,
     "the memory: a DeviceAllocation, an int address, an object with __int__, or None", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyDoc_STRVAR(arraybase_doc,
"The fields of a GPUArray, kept in C so the array layer's fast paths can make\n"
"results without running Python code.  Not used on its own: GPUArray subclasses it.");

static PyType_Slot arraybase_slots[] = {
    {Py_tp_new, arraybase_new},
    {Py_tp_dealloc, arraybase_dealloc},
    {Py_tp_traverse, arraybase_traverse},
    {Py_tp_clear, arraybase_clear},
    {Py_tp_members, arraybase_members},
    {Py_tp_getset, arraybase_getset},
    {Py_tp_doc, (void *)arraybase_doc},
    {0, NULL},
};

static PyType_Spec arraybase_spec = {
    .name = "barecuda._driver._ArrayBase",
    .basicsize = sizeof(bc_ArrayBase),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .slots = arraybase_slots,
};

/* ------------------------------------------------------------ HotEntry */

typedef struct {
    PyObject_HEAD
    PyObject *ctx;    /* weakref to the Context */
    PyObject *first;  /* weakref to the Function launched first */
    PyObject *other;  /* weakref to a second Function (reductions), or NULL */
    PyObject *ws;     /* weakref to a one-launch reduction's DeviceAllocation
                         workspace on stream 0, or NULL (two launches) */
    Py_ssize_t extra; /* the largest grid worth launching */
    Py_ssize_t block; /* threads per block */
    Py_ssize_t per;   /* elements one block covers per grid-stride step */
} bc_HotEntry;

static void
hot_dealloc(PyObject *self)
{
    bc_HotEntry *h = (bc_HotEntry *)self;
    PyTypeObject *tp = Py_TYPE(self);
    Py_XDECREF(h->ctx);
    Py_XDECREF(h->first);
    Py_XDECREF(h->other);
    Py_XDECREF(h->ws);
    tp->tp_free(self);
    Py_DECREF(tp);
}

static PyObject *
hot_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    bc_State *st = bc_state_of_type(type);
    static char *kwlist[] = {"ctx", "first", "other", "extra", "block", "per", "workspace", NULL};
    PyObject *ctx, *first, *other, *ws = Py_None;
    Py_ssize_t extra, block, per;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOOnnn|$O:_HotEntry", kwlist, &ctx, &first,
                                     &other, &extra, &block, &per, &ws))
        return NULL;
    if (Py_TYPE(ctx) != (PyTypeObject *)st->ContextType)
        return PyErr_Format(PyExc_TypeError, "_HotEntry(): ctx must be a Context, not %.100s",
                            Py_TYPE(ctx)->tp_name);
    if (Py_TYPE(first) != (PyTypeObject *)st->FunctionType ||
        (other != Py_None && Py_TYPE(other) != (PyTypeObject *)st->FunctionType))
        return PyErr_Format(PyExc_TypeError,
                            "_HotEntry(): first must be a Function and other a Function or None");
    if (ws != Py_None && Py_TYPE(ws) != (PyTypeObject *)st->DeviceAllocationType)
        return PyErr_Format(PyExc_TypeError,
                            "_HotEntry(): workspace must be a DeviceAllocation or None, not %.100s",
                            Py_TYPE(ws)->tp_name);
    if (extra < 1 || block < 1 || block > 1024 || per < block)
        return PyErr_Format(PyExc_ValueError,
                            "_HotEntry(): need extra >= 1, 1 <= block <= 1024 and per >= block "
                            "(got %zd, %zd, %zd)", extra, block, per);
    bc_HotEntry *h = (bc_HotEntry *)type->tp_alloc(type, 0);
    if (h == NULL)
        return NULL;
    h->extra = extra;
    h->block = block;
    h->per = per;
    if ((h->ctx = PyWeakref_NewRef(ctx, NULL)) == NULL ||
        (h->first = PyWeakref_NewRef(first, NULL)) == NULL ||
        (other != Py_None && (h->other = PyWeakref_NewRef(other, NULL)) == NULL) ||
        (ws != Py_None && (h->ws = PyWeakref_NewRef(ws, NULL)) == NULL)) {
        Py_DECREF(h);
        return NULL;
    }
    return (PyObject *)h;
}

PyDoc_STRVAR(hot_get_doc,
"get($self, ctx)\n--\n\n"
"The first Function while `ctx` is the context this entry was made in and both\n"
"are alive; None otherwise (also for ctx None).");

static PyObject *
hot_get(PyObject *self, PyObject *ctx)
{
    bc_HotEntry *h = (bc_HotEntry *)self;
    PyObject *mine = bc_weakref_get(h->ctx);
    Py_XDECREF(mine); /* only its identity is compared */
    if (ctx == Py_None || mine != ctx)
        Py_RETURN_NONE;
    PyObject *f = bc_weakref_get(h->first);
    return f != NULL ? f : Py_NewRef(Py_None);
}

PyDoc_STRVAR(hot_second_doc,
"second($self)\n--\n\n"
"The second Function (a reduction's final stage), or None when there is none or\n"
"it is gone.");

static PyObject *
hot_second(PyObject *self, PyObject *Py_UNUSED(ignored))
{
    bc_HotEntry *h = (bc_HotEntry *)self;
    PyObject *f = h->other != NULL ? bc_weakref_get(h->other) : NULL;
    return f != NULL ? f : Py_NewRef(Py_None);
}

/* The workspace DeviceAllocation (new reference) while it is alive and not freed,
 * else NULL (no exception). */
static bc_DeviceAllocation *
hot_ws(bc_HotEntry *h)
{
    bc_DeviceAllocation *w = h->ws != NULL ? (bc_DeviceAllocation *)bc_weakref_get(h->ws) : NULL;
    if (w != NULL && w->freed)
        Py_CLEAR(w);
    return w;
}

PyDoc_STRVAR(hot_workspace_doc,
"workspace($self)\n--\n\n"
"A one-launch reduction's workspace on the legacy default stream (a\n"
"DeviceAllocation), or None when there is none (two launches) or it is gone.");

static PyObject *
hot_workspace(PyObject *self, PyObject *Py_UNUSED(ignored))
{
    PyObject *w = (PyObject *)hot_ws((bc_HotEntry *)self);
    return w != NULL ? w : Py_NewRef(Py_None);
}

static PyMethodDef hot_methods[] = {
    {"get", hot_get, METH_O, hot_get_doc},
    {"second", hot_second, METH_NOARGS, hot_second_doc},
    {"workspace", hot_workspace, METH_NOARGS, hot_workspace_doc},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef hot_members[] = {
    {"extra", T_PYSSIZET, offsetof(bc_HotEntry, extra), READONLY, "the largest grid"},
    {"block", T_PYSSIZET, offsetof(bc_HotEntry, block), READONLY, "threads per block"},
    {"per", T_PYSSIZET, offsetof(bc_HotEntry, per), READONLY,
     "elements one block covers per grid-stride step"},
    {NULL, 0, 0, 0, NULL},
};

PyDoc_STRVAR(hot_doc,
"_HotEntry(ctx, first, other, extra, block, per, *, workspace=None)\n--\n\n"
"The Functions a kernel generator last ran in context `ctx` (`other` is a\n"
"reduction's second stage, or None), held weakly so that a kernel object never\n"
"keeps a context alive, and how it launches them: at most `extra` blocks of\n"
"`block` threads, each block covering `per` elements per grid-stride step.  A\n"
"reduction given a `workspace` (DeviceAllocation, held weakly) runs in one launch:\n"
"its first Function takes (out, partials, ticket, x, n).");

static PyType_Slot hot_slots[] = {
    {Py_tp_new, hot_new},
    {Py_tp_dealloc, hot_dealloc},
    {Py_tp_methods, hot_methods},
    {Py_tp_members, hot_members},
    {Py_tp_doc, (void *)hot_doc},
    {0, NULL},
};

static PyType_Spec hot_spec = {
    .name = "barecuda._driver._HotEntry",
    .basicsize = sizeof(bc_HotEntry),
    .flags = Py_TPFLAGS_DEFAULT,
    .slots = hot_slots,
};

/* h's context (new reference) when it is alive and current on this thread, else
 * NULL (no exception). */
static bc_Context *
hot_context(bc_HotEntry *h)
{
    bc_Context *ctx = (bc_Context *)bc_weakref_get(h->ctx);
    CUcontext cur = NULL;
    if (ctx != NULL && (ctx->released || bc_drv.cuCtxGetCurrent(&cur) != CUDA_SUCCESS ||
                        cur != ctx->handle))
        Py_CLEAR(ctx);
    return ctx;
}

/* The Function behind weakref `ref` (new reference) while it is alive and its
 * module loaded, else NULL (no exception). */
static bc_Function *
hot_function(PyObject *ref)
{
    bc_Function *f = ref != NULL ? (bc_Function *)bc_weakref_get(ref) : NULL;
    if (f != NULL && (f->module->handle == NULL || f->module->ctx == NULL ||
                      f->module->ctx->released))
        Py_CLEAR(f);
    return f;
}

/* ------------------------------------------------------------ _OpTable */

enum op_kind { OP_ELEMENTWISE, OP_UNARY, OP_REDUCE };
static const char *const op_kinds[] = {"elementwise", "unary", "reduce"};

#define OP_SLOTS 32
#define OP_MAX_N ((Py_ssize_t)1 << 30) /* the hot kernels index with 32 bits */

typedef struct {
    PyObject *xdt;  /* x's dtype */
    PyObject *key;  /* y's dtype (an array y), its type (a scalar y), or NULL */
    PyObject *res;  /* the result's dtype */
    PyObject *hot;  /* the kernel's HotEntry (contiguous operands), or NULL */
    PyObject *shot; /* the 1-d strided kernel's HotEntry, or NULL */
    size_t itemsize; /* the result's */
} op_entry;

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    int kind;
    int count, next;       /* entries in use; the slot replaced when full */
    PyObject *cls;         /* the GPUArray class results are made of */
    PyObject *name;        /* str, for messages */
    op_entry entries[OP_SLOTS];
} bc_OpTable;

static int
optable_traverse(PyObject *self, visitproc visit, void *arg)
{
    bc_OpTable *t = (bc_OpTable *)self;
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(t->cls);
    for (int i = 0; i < t->count; i++) {
        Py_VISIT(t->entries[i].xdt);
        Py_VISIT(t->entries[i].key);
        Py_VISIT(t->entries[i].res);
        Py_VISIT(t->entries[i].hot);
        Py_VISIT(t->entries[i].shot);
    }
    return 0;
}

static void
entry_clear(op_entry *e)
{
    Py_CLEAR(e->xdt);
    Py_CLEAR(e->key);
    Py_CLEAR(e->res);
    Py_CLEAR(e->hot);
    Py_CLEAR(e->shot);
}

static int
optable_clear(PyObject *self)
{
    bc_OpTable *t = (bc_OpTable *)self;
    for (int i = 0; i < t->count; i++)
        entry_clear(&t->entries[i]);
    t->count = t->next = 0;
    Py_CLEAR(t->cls);
    return 0;
}

static void
optable_dealloc(PyObject *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    optable_clear(self);
    Py_CLEAR(((bc_OpTable *)self)->name);
    tp->tp_free(self);
    Py_DECREF(tp);
}

static PyObject *optable_vectorcall(PyObject *, PyObject *const *, size_t, PyObject *);

static PyObject *
optable_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    bc_State *st = bc_state_of_type(type);
    static char *kwlist[] = {"cls", "kind", "name", NULL};
    PyObject *cls, *name;
    const char *kind;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OsU:_OpTable", kwlist, &cls, &kind, &name))
        return NULL;
    if (!PyType_Check(cls) ||
        !PyType_IsSubtype((PyTypeObject *)cls, (PyTypeObject *)st->ArrayBaseType))
        return PyErr_Format(PyExc_TypeError, "_OpTable(): cls must be a subclass of _ArrayBase");
    int k = -1;
    for (int i = 0; i < (int)BC_COUNT(op_kinds); i++)
        if (strcmp(kind, op_kinds[i]) == 0)
            k = i;
    if (k < 0)
        return PyErr_Format(PyExc_ValueError,
                            "_OpTable(): kind must be 'elementwise', 'unary' or 'reduce', "
                            "not '%s'", kind);
    bc_OpTable *t = (bc_OpTable *)type->tp_alloc(type, 0);
    if (t == NULL)
        return NULL;
    t->vectorcall = optable_vectorcall;
    t->kind = k;
    t->cls = Py_NewRef(cls);
    t->name = Py_NewRef(name);
    return (PyObject *)t;
}

static op_entry *
optable_find(bc_OpTable *t, PyObject *xdt, PyObject *key)
{
    for (int i = 0; i < t->count; i++)
        if (t->entries[i].xdt == xdt && t->entries[i].key == key)
            return &t->entries[i];
    return NULL;
}

PyDoc_STRVAR(optable_put_doc,
"put($self, xdtype, key, res, hot, strided=False)\n--\n\n"
"Remember that x of `xdtype` with `key` (an elementwise table: the other operand's\n"
"dtype when it is an array, its Python type when it is a scalar; None for the\n"
"other kinds) gives a `res` result, computed by the kernel whose HotEntry is\n"
"`hot`.  strided=True (elementwise tables): `hot` is the kernel for 1-d strided\n"
"operands (z, x, y or scalar, then x's and y's element strides as ints, then n),\n"
"kept beside the contiguous one.  A result of another itemsize than x's is laid\n"
"out densely in x's order.  A full table forgets its oldest entry.");

static PyObject *
optable_put(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    bc_OpTable *t = (bc_OpTable *)self;
    bc_State *st = bc_state_of(self);
    if (nargs != 4 && nargs != 5)
        return PyErr_Format(PyExc_TypeError, "put() takes 4 or 5 arguments (%zd given)", nargs);
    PyObject *xdt = args[0], *key = args[1], *res = args[2], *hot = args[3];
    int keyed = t->kind == OP_ELEMENTWISE;
    int strided = 0;
    if (nargs == 5) {
        if (!PyBool_Check(args[4]))
            return PyErr_Format(PyExc_TypeError, "put(): strided must be a bool, not %.100s",
                                Py_TYPE(args[4])->tp_name);
        strided = args[4] == Py_True;
        if (strided && !keyed)
            return PyErr_Format(PyExc_ValueError,
                                "put(): only elementwise tables take strided kernels");
    }
    if (!PyArray_DescrCheck(xdt) || !PyArray_DescrCheck(res))
        return PyErr_Format(PyExc_TypeError, "put(): xdtype and res must be numpy dtypes");
    if (keyed ? !(PyArray_DescrCheck(key) || PyType_Check(key)) : key != Py_None)
        return PyErr_Format(PyExc_TypeError, "put(): key must be %s for a%s %s table",
                            keyed ? "a numpy dtype or a type" : "None",
                            keyed ? "n" : "", op_kinds[t->kind]);
    if (Py_TYPE(hot) != (PyTypeObject *)st->HotEntryType)
        return PyErr_Format(PyExc_TypeError, "put(): hot must be a HotEntry, not %.100s",
                            Py_TYPE(hot)->tp_name);
    size_t itemsize = (size_t)PyDataType_ELSIZE((PyArray_Descr *)res);
    if (itemsize == 0)
        return PyErr_Format(PyExc_ValueError, "put(): res must have a nonzero itemsize");
    if (!keyed)
        key = NULL;
    op_entry *e = optable_find(t, xdt, key);
    int found = e != NULL;
    if (e == NULL) {
        if (t->count < OP_SLOTS)
            e = &t->entries[t->count++];
        else {
            e = &t->entries[t->next];
            t->next = (t->next + 1) % OP_SLOTS;
        }
    }
    if (!found || e->res != res)
        entry_clear(e); /* a slot reused, or another result: nothing of it belongs */
    PyObject *keep; /* the other kernel of these operands, kept */
    if (strided) {
        keep = e->hot;
        e->hot = NULL;
    } else {
        keep = e->shot;
        e->shot = NULL;
    }
    entry_clear(e);
    e->xdt = Py_NewRef(xdt);
    e->key = Py_XNewRef(key);
    e->res = Py_NewRef(res);
    e->hot = strided ? keep : Py_NewRef(hot);
    e->shot = strided ? Py_NewRef(hot) : keep;
    e->itemsize = itemsize;
    Py_RETURN_NONE;
}

static Py_ssize_t
optable_len(PyObject *self)
{
    return ((bc_OpTable *)self)->count;
}

/* ---- one call of a table */

/* What a call works from.  Everything borrowed from the operands or the entry is
 * held here by a new reference first: allocating may run the garbage collector,
 * and with it arbitrary code that could change them. */
typedef struct {
    PyObject *res, *hot;                        /* the entry's */
    size_t itemsize;                            /* the result's */
    PyObject *shape, *size, *strides, *c, *f;   /* x's */
    Py_ssize_t n;
    CUdeviceptr ptrs[3];                        /* result, x, y */
    int nptrs;
    PyObject *scalar;                           /* packed after the pointers, or NULL */
    int32_t steps[2];                           /* x's and y's element strides (strided) */
    int nsteps;                                 /* packed after the scalar: 0 (dense), 1, 2 */
    PyObject *stream;
    CUstream s;
} op_call;

static void
op_call_release(op_call *c)
{
    Py_XDECREF(c->res);
    Py_XDECREF(c->hot);
    Py_XDECREF(c->shape);
    Py_XDECREF(c->size);
    Py_XDECREF(c->strides);
    Py_XDECREF(c->c);
    Py_XDECREF(c->f);
    Py_XDECREF(c->scalar);
}

/* Pack a Python scalar as struct code `c`: 1 done, 0 when it needs NumPy's rules
 * (a value out of the type's range, an unusual code), which the general path
 * applies. */
static int
pack_scalar(char c, PyObject *v, char *dst)
{
    if (c == 'f' || c == 'd') {
        double d;
        if (PyFloat_CheckExact(v))
            d = PyFloat_AS_DOUBLE(v);
        else if (PyLong_CheckExact(v)) {
            d = PyLong_AsDouble(v);
            if (d == -1.0 && PyErr_Occurred())
                return PyErr_Clear(), 0;
        } else
            return 0;
        if (c == 'd')
            return memcpy(dst, &d, sizeof d), 1;
        if (isfinite(d) && fabs(d) > FLT_MAX)
            return 0; /* overflows float32 */
        float f = (float)d;
        return memcpy(dst, &f, sizeof f), 1;
    }
    if (c == 'F' || c == 'D') {
        if (!PyComplex_CheckExact(v) && !PyFloat_CheckExact(v))
            return 0;
        Py_complex z = PyComplex_AsCComplex(v);
        if (c == 'D')
            return memcpy(dst, &z, sizeof z), 1;
        if ((isfinite(z.real) && fabs(z.real) > FLT_MAX) ||
            (isfinite(z.imag) && fabs(z.imag) > FLT_MAX))
            return 0;
        float zf[2] = {(float)z.real, (float)z.imag};
        return memcpy(dst, zf, sizeof zf), 1;
    }
    if (strchr("bBhHiIqQ", c) == NULL || !PyLong_CheckExact(v))
        return 0; /* bool and float16 scalars, a float for an integer */
    int overflow;
    long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (overflow || (x == -1 && PyErr_Occurred()))
        return PyErr_Clear(), 0;
    return bc_pack_integer(c, x < 0, x, (unsigned long long)x, dst) == 0;
}

/* Pack the arguments for f: 1 done, 0 when f's prepared layout is not pointers,
 * then the scalar if any, then `nsteps` int32 strides, then an int32 count (or
 * the scalar cannot be packed). */
static int
op_pack(bc_Function *f, const CUdeviceptr *ptrs, int nptrs, PyObject *scalar,
        const int32_t *steps, int nsteps, Py_ssize_t n, uint64_t *buf, size_t bufsize)
{
    int nscalar = scalar != NULL;
    int want = nptrs + nscalar + nsteps + 1;
    if (f->nprepared != want || f->prepared_bytes > bufsize)
        return 0;
    char *p = (char *)buf;
    for (int i = 0; i < want; i++) {
        const bc_ArgSpec *spec = &f->prepared[i];
        char *dst = p + spec->offset;
        if (i < nptrs) {
            if (spec->code != 'P')
                return 0;
            memcpy(dst, &ptrs[i], sizeof(CUdeviceptr));
        } else if (i < nptrs + nscalar) {
            if (!pack_scalar(spec->code, scalar, dst))
                return 0;
        } else if (i < want - 1) {
            if (spec->code != 'i')
                return 0;
            memcpy(dst, &steps[i - nptrs - nscalar], sizeof(int32_t));
        } else {
            if (spec->code != 'i')
                return 0;
            int32_t count = (int32_t)n;
            memcpy(dst, &count, sizeof count);
        }
    }
    return 1;
}

static int
op_launch(bc_State *st, bc_Function *f, Py_ssize_t grid, Py_ssize_t block, CUstream s,
          uint64_t *buf)
{
    unsigned int g[3] = {(unsigned int)grid, 1, 1}, b[3] = {(unsigned int)block, 1, 1};
    return bc_check(st, bc_function_launch(f, g, b, 0, s, buf, f->prepared_bytes),
                    "cuLaunchKernel");
}

/* A new array of t's class with the given fields (new references taken). */
static PyObject *
op_result(bc_OpTable *t, op_call *c, PyObject *mem)
{
    PyTypeObject *cls = (PyTypeObject *)t->cls;
    PyObject *ptr = PyLong_FromUnsignedLongLong(((bc_DeviceAllocation *)mem)->ptr);
    if (ptr == NULL)
        return NULL;
    bc_ArrayBase *z = (bc_ArrayBase *)cls->tp_alloc(cls, 0);
    if (z == NULL)
        return Py_DECREF(ptr), NULL;
    z->shape = Py_NewRef(c->shape);
    z->dtype = Py_NewRef(c->res);
    z->size = Py_NewRef(c->size);
    z->strides = Py_NewRef(c->strides);
    z->gpudata = Py_NewRef(mem);
    z->mem = Py_NewRef(mem);
    z->ptr = ptr;
    z->base = Py_NewRef(Py_None);
    z->allocator = Py_NewRef(Py_None);
    z->c = Py_NewRef(c->c);
    z->f = Py_NewRef(c->f);
    return (PyObject *)z;
}

/* z = op(x[, y]): one launch of the hot Function over n elements. */
static PyObject *
op_elementwise(bc_State *st, bc_OpTable *t, op_call *c, bc_Context *ctx)
{
    bc_HotEntry *h = (bc_HotEntry *)c->hot;
    bc_Function *f = hot_function(h->first);
    uint64_t buf[16];
    if (f == NULL || !op_pack(f, c->ptrs, c->nptrs, c->scalar, c->steps, c->nsteps, c->n, buf,
                              sizeof buf)) {
        Py_XDECREF(f);
        Py_RETURN_NONE;
    }
    PyObject *out = NULL;
    PyObject *mem = bc_array_alloc_in(st, ctx, (size_t)c->n * c->itemsize, c->stream, c->s);
    if (mem != NULL) {
        CUdeviceptr z = ((bc_DeviceAllocation *)mem)->ptr;
        memcpy((char *)buf + f->prepared[0].offset, &z, sizeof z);
        Py_ssize_t grid = (c->n + h->per - 1) / h->per;
        if (op_launch(st, f, grid < h->extra ? grid : h->extra, h->block, c->s, buf) == 0)
            out = op_result(t, c, mem);
        Py_DECREF(mem);
    }
    Py_DECREF(f);
    return out;
}

#define WS_HEAD 256 /* workspace bytes before the partials: reduction.py's WS_HEAD */

/* A 0-d reduction of x, stage1(out, partials, ticket, x, n): one block writing
 * out[0]; or one launch whose last block combines the partials (a workspace: the
 * shared one on stream 0, else one of this launch's own with its ticket zeroed);
 * or, with no workspace in the entry, partials and a second one-block launch. */
static PyObject *
op_reduce(bc_State *st, bc_OpTable *t, op_call *c, bc_Context *ctx)
{
    bc_HotEntry *h = (bc_HotEntry *)c->hot;
    Py_ssize_t grid = (c->n + h->per - 1) / h->per;
    if (grid > h->extra) { /* spread the steps evenly over at most `extra` blocks */
        Py_ssize_t rounds = (grid + h->extra - 1) / h->extra;
        grid = (grid + rounds - 1) / rounds;
    }
    int onepass = h->ws != NULL;
    bc_Function *f1 = hot_function(h->first);
    bc_Function *f2 = grid > 1 && !onepass ? hot_function(h->other) : NULL;
    bc_DeviceAllocation *ws = grid > 1 && onepass && c->stream == Py_None ? hot_ws(h) : NULL;
    uint64_t buf1[16], buf2[16];
    CUdeviceptr p1[4] = {0, 0, 0, c->ptrs[1]}, p2[2] = {0, 0};
    PyObject *out = NULL, *mem = NULL, *partials = NULL;
    if (f1 == NULL || (f2 == NULL && grid > 1 && !onepass) ||
        (ws == NULL && grid > 1 && onepass && c->stream == Py_None) ||
        !op_pack(f1, p1, 4, NULL, NULL, 0, c->n, buf1, sizeof buf1) ||
        (f2 != NULL && !op_pack(f2, p2, 2, NULL, NULL, 0, grid, buf2, sizeof buf2))) {
        out = Py_NewRef(Py_None);
        goto done;
    }
    if ((mem = bc_array_alloc_in(st, ctx, c->itemsize, c->stream, c->s)) == NULL)
        goto done;
    CUdeviceptr z = ((bc_DeviceAllocation *)mem)->ptr, part = 0, ticket = 0;
    if (grid > 1 && ws != NULL) {
        ticket = ws->ptr;
        part = ws->ptr + WS_HEAD;
    } else if (grid > 1) {
        size_t head = onepass ? WS_HEAD : 0;
        partials = bc_array_alloc_in(st, ctx, head + (size_t)grid * c->itemsize, c->stream, c->s);
        if (partials == NULL)
            goto done;
        CUdeviceptr p = ((bc_DeviceAllocation *)partials)->ptr;
        part = p + head;
        if (onepass) {
            ticket = p;
            if (bc_check(st, bc_drv.cuMemsetD32Async(ticket, 0, 1, c->s), "cuMemsetD32Async") < 0)
                goto done;
        }
    }
    memcpy((char *)buf1 + f1->prepared[0].offset, &z, sizeof z);
    memcpy((char *)buf1 + f1->prepared[1].offset, &part, sizeof part);
    memcpy((char *)buf1 + f1->prepared[2].offset, &ticket, sizeof ticket);
    if (op_launch(st, f1, grid, h->block, c->s, buf1) < 0)
        goto done;
    if (f2 != NULL) {
        memcpy((char *)buf2 + f2->prepared[0].offset, &z, sizeof z);
        memcpy((char *)buf2 + f2->prepared[1].offset, &part, sizeof part);
        if (op_launch(st, f2, 1, h->block, c->s, buf2) < 0)
            goto done;
    }
    out = op_result(t, c, mem);
done:
    Py_XDECREF(partials);
    Py_XDECREF(mem);
    Py_XDECREF(ws);
    Py_XDECREF(f1);
    Py_XDECREF(f2);
    return out;
}

static int
same(PyObject *a, PyObject *b)
{
    if (a == b)
        return 1;
    int r = PyObject_RichCompareBool(a, b, Py_EQ);
    if (r < 0)
        PyErr_Clear();
    return r > 0;
}

/* The device pointer in an array's `ptr` field, or 0 (no exception) if unusual. */
static CUdeviceptr
array_ptr(bc_ArrayBase *a)
{
    if (a->ptr == NULL || !PyLong_CheckExact(a->ptr))
        return 0;
    unsigned long long p = PyLong_AsUnsignedLongLong(a->ptr);
    if (p == (unsigned long long)-1 && PyErr_Occurred())
        return PyErr_Clear(), 0;
    return (CUdeviceptr)p;
}

/* Whether x can be an operand of the fast path at all; fills c->n and x's pointer. */
static int
op_operand(bc_ArrayBase *a, op_call *c)
{
    if (a->dtype == NULL || a->size == NULL || a->shape == NULL || a->strides == NULL ||
        a->allocator != Py_None)
        return 0; /* an allocator, or fields never set (__new__ alone) */
    c->n = PyLong_CheckExact(a->size) ? PyLong_AsSsize_t(a->size) : -1;
    if (c->n == -1 && PyErr_Occurred())
        PyErr_Clear();
    return c->n > 0 && c->n <= OP_MAX_N && (c->ptrs[1] = array_ptr(a)) != 0;
}

/* Whether the dense kernel applies: x contiguous, y (if any) of x's shape and
 * contiguous in the same order (their itemsizes may differ: one flat index walks
 * both). */
static int
op_dense(bc_ArrayBase *a, bc_ArrayBase *b, op_call *c)
{
    if (a->c != Py_True && a->f != Py_True)
        return 0;
    if (b != NULL)
        return b->shape != NULL && b->strides != NULL && same(a->shape, b->shape) &&
               ((a->c == Py_True && b->c == Py_True) || (a->f == Py_True && b->f == Py_True)) &&
               (c->ptrs[2] = array_ptr(b)) != 0;
    return 1;
}

/* The element stride of 1-d array a holding n elements, when every offset it
 * reaches fits an int32: 1 and *step set, else 0 (no exception). */
static int
op_step(bc_ArrayBase *a, Py_ssize_t n, int32_t *step)
{
    if (!PyTuple_CheckExact(a->shape) || PyTuple_GET_SIZE(a->shape) != 1 ||
        !PyTuple_CheckExact(a->strides) || PyTuple_GET_SIZE(a->strides) != 1 ||
        !PyArray_DescrCheck(a->dtype))
        return 0;
    PyObject *o = PyTuple_GET_ITEM(a->strides, 0);
    long long bytes = PyLong_CheckExact(o) ? PyLong_AsLongLong(o) : -1;
    if (bytes == -1 && PyErr_Occurred())
        return PyErr_Clear(), 0;
    long long item = (long long)PyDataType_ELSIZE((PyArray_Descr *)a->dtype);
    if (item <= 0 || bytes % item != 0)
        return 0;
    long long e = bytes / item;
    if (e > INT32_MAX || e < -INT32_MAX || (e != 0 && (n - 1) > INT32_MAX / (e < 0 ? -e : e)))
        return 0;
    *step = (int32_t)e;
    return 1;
}

/* Whether the 1-d strided kernel applies: x 1-d, y (if an array) 1-d of x's length;
 * fills the element strides. */
static int
op_strided(bc_ArrayBase *a, bc_ArrayBase *b, op_call *c)
{
    c->nsteps = b != NULL ? 2 : 1;
    if (!op_step(a, c->n, &c->steps[0]))
        return 0;
    if (b != NULL)
        return b->shape != NULL && b->strides != NULL && b->dtype != NULL &&
               same(a->shape, b->shape) && op_step(b, c->n, &c->steps[1]) &&
               (c->ptrs[2] = array_ptr(b)) != 0;
    return 1;
}

/* The byte strides (new tuple) of a dense array of `shape` with items of
 * `itemsize`, C order or (fortran) F order; NULL with an exception on failure. */
static PyObject *
dense_strides(PyObject *shape, size_t itemsize, int fortran)
{
    if (!PyTuple_CheckExact(shape))
        return PyErr_Format(PyExc_TypeError, "shape must be a tuple");
    Py_ssize_t nd = PyTuple_GET_SIZE(shape);
    PyObject *out = PyTuple_New(nd);
    if (out == NULL)
        return NULL;
    long long step = (long long)itemsize;
    for (Py_ssize_t k = 0; k < nd; k++) {
        Py_ssize_t d = fortran ? k : nd - 1 - k;
        PyObject *v = PyLong_FromLongLong(step);
        if (v == NULL)
            return Py_DECREF(out), NULL;
        PyTuple_SET_ITEM(out, d, v);
        long long len = PyLong_AsLongLong(PyTuple_GET_ITEM(shape, d));
        if (len == -1 && PyErr_Occurred())
            return Py_DECREF(out), NULL;
        step *= len > 0 ? len : 1;
    }
    return out;
}

static PyObject *
optable_vectorcall(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    bc_OpTable *t = (bc_OpTable *)self;
    bc_State *st = bc_state_of(self);
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    Py_ssize_t want = t->kind == OP_ELEMENTWISE ? 3 : 2;
    if (kwnames != NULL || nargs != want)
        return PyErr_Format(PyExc_TypeError, "%U takes %zd positional arguments (%s, stream)",
                            t->name, want, want == 3 ? "x, y" : "x");
    PyObject *x = args[0], *y = want == 3 ? args[1] : NULL;
    PyTypeObject *cls = (PyTypeObject *)t->cls;
    if (Py_TYPE(x) != cls)
        Py_RETURN_NONE;
    /* y: another array (its dtype is the key), a scalar (its type is), or none */
    bc_ArrayBase *a = (bc_ArrayBase *)x;
    bc_ArrayBase *b = y != NULL && Py_TYPE(y) == cls ? (bc_ArrayBase *)y : NULL;
    PyObject *key = b != NULL ? b->dtype : y != NULL ? (PyObject *)Py_TYPE(y) : NULL;
    op_entry *e = optable_find(t, a->dtype, key);
    op_call c = {.nptrs = b != NULL ? 3 : 2, .stream = args[want - 1]};
    if (e == NULL || (y != NULL && key == NULL) || !op_operand(a, &c))
        Py_RETURN_NONE;
    PyObject *hot = NULL;
    if (e->hot != NULL && op_dense(a, b, &c))
        hot = e->hot;
    else if (e->shot != NULL && op_strided(a, b, &c))
        hot = e->shot;
    else
        Py_RETURN_NONE;
    int strided = hot == e->shot;
    if (!strided)
        c.nsteps = 0;
    bc_Context *ctx = hot_context((bc_HotEntry *)hot);
    if (ctx == NULL)
        Py_RETURN_NONE;
    c.res = Py_NewRef(e->res);
    c.hot = Py_NewRef(hot);
    c.itemsize = e->itemsize;
    if (t->kind == OP_REDUCE) { /* a 0-d result */
        c.shape = PyTuple_New(0);
        c.size = PyLong_FromLong(1);
        c.strides = Py_XNewRef(c.shape);
        c.c = Py_NewRef(Py_True);
        c.f = Py_NewRef(Py_True);
    } else {
        c.shape = Py_NewRef(a->shape);
        c.size = Py_NewRef(a->size);
        if (strided) { /* a dense 1-d result */
            c.strides = dense_strides(c.shape, c.itemsize, 0);
            c.c = Py_NewRef(Py_True);
            c.f = Py_NewRef(Py_True);
        } else {
            /* a result of x's itemsize shares x's strides, else is dense in x's order
               (its contiguity flags are x's: for a given shape they depend on the
               order alone) */
            c.strides = c.itemsize == (size_t)PyDataType_ELSIZE((PyArray_Descr *)a->dtype)
                            ? Py_NewRef(a->strides)
                            : dense_strides(c.shape, c.itemsize, a->c != Py_True);
            c.c = Py_NewRef(a->c);
            c.f = Py_NewRef(a->f);
        }
    }
    c.scalar = y != NULL && b == NULL ? Py_NewRef(y) : NULL;
    PyObject *out = NULL;
    if (c.shape != NULL && c.size != NULL && c.strides != NULL &&
        /* else out of memory, the exception set */
        (c.stream == Py_None || bc_stream_convert(st, c.stream, &c.s) == 0))
        out = t->kind == OP_REDUCE ? op_reduce(st, t, &c, ctx) : op_elementwise(st, t, &c, ctx);
    Py_DECREF(ctx);
    op_call_release(&c);
    return out;
}

static PyMethodDef optable_methods[] = {
    {"put", (PyCFunction)(void (*)(void))optable_put, METH_FASTCALL, optable_put_doc},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef optable_members[] = {
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(bc_OpTable, vectorcall), READONLY, NULL},
    {"name", T_OBJECT, offsetof(bc_OpTable, name), READONLY, "the operator's name"},
    {NULL, 0, 0, 0, NULL},
};

PyDoc_STRVAR(optable_doc,
"_OpTable(cls, kind, name)\n--\n\n"
"The small-op fast path of one operator of the array layer.  `kind` is\n"
"'elementwise' (table(x, y, stream): y an array of x's shape and strides, or a\n"
"Python scalar), 'unary' (table(x, stream)) or 'reduce' (table(x, stream): a 0-d\n"
"result).  x must be a `cls` (exactly); the result is a new `cls` on the block\n"
"cache, or None whenever the general path must decide.  Errors raised are the\n"
"stream's (TypeError) and the driver's (allocation, launch).");

static PyType_Slot optable_slots[] = {
    {Py_tp_new, optable_new},
    {Py_tp_dealloc, optable_dealloc},
    {Py_tp_traverse, optable_traverse},
    {Py_tp_clear, optable_clear},
    {Py_tp_call, PyVectorcall_Call},
    {Py_tp_methods, optable_methods},
    {Py_tp_members, optable_members},
    {Py_mp_length, optable_len},
    {Py_tp_doc, (void *)optable_doc},
    {0, NULL},
};

static PyType_Spec optable_spec = {
    .name = "barecuda._driver._OpTable",
    .basicsize = sizeof(bc_OpTable),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .slots = optable_slots,
};

int
bc_gpuarray_setup(PyObject *m, bc_State *st)
{
    if (bc_add_type(m, &arraybase_spec, NULL, &st->ArrayBaseType) < 0 ||
        bc_add_type(m, &hot_spec, NULL, &st->HotEntryType) < 0 ||
        bc_add_type(m, &optable_spec, NULL, &st->OpTableType) < 0)
        return -1;
    return 0;
}
