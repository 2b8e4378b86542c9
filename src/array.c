/* SPDX-License-Identifier: MIT */
/* CUDA arrays: ArrayDescriptor, ArrayDescriptor3D, Array, and the copies between
 * host or device memory and an array (memcpy_htoa, memcpy_atoh, Array.set/get).
 *
 * Every Array is made with cuArray3DCreate (1D: height = depth = 0; 2D: depth 0;
 * 3D; 1D/2D layered with the LAYERED flag and depth = layers; cubemaps) and
 * holds the Context it was made in.  Descriptors are validated here, before the
 * driver is touched, so a wrong shape or format is a ValueError naming the
 * field.  free() is idempotent, but raises LogicError while a TextureObject or
 * SurfaceObject still reads the array (see `users` in array.h); collection of
 * an Array can never happen while one does, because they hold it strongly.
 *
 * Host layout used by Array.set()/get() and the Python helpers: C order,
 * (depth or layers, height, width, channels), each present axis only (a 1D
 * array is (width,), a 1D layered one (layers, width)), rows tightly packed. */
#include "barecuda/array.h"
#include "barecuda/argparse.h"
#include "barecuda/error.h"
#include "barecuda/trace.h"
#include "barecuda/loader.h"
#include "barecuda/memory.h"

/* ------------------------------------------------------------------ formats */

static const struct {
    unsigned int format;
    size_t size;
    int typenum;
    const char *name;
} formats[] = {
    {CU_AD_FORMAT_UNSIGNED_INT8, 1, NPY_UINT8, "UNSIGNED_INT8"},
    {CU_AD_FORMAT_UNSIGNED_INT16, 2, NPY_UINT16, "UNSIGNED_INT16"},
    {CU_AD_FORMAT_UNSIGNED_INT32, 4, NPY_UINT32, "UNSIGNED_INT32"},
    {CU_AD_FORMAT_SIGNED_INT8, 1, NPY_INT8, "SIGNED_INT8"},
    {CU_AD_FORMAT_SIGNED_INT16, 2, NPY_INT16, "SIGNED_INT16"},
    {CU_AD_FORMAT_SIGNED_INT32, 4, NPY_INT32, "SIGNED_INT32"},
    {CU_AD_FORMAT_HALF, 2, NPY_HALF, "HALF"},
    {CU_AD_FORMAT_FLOAT, 4, NPY_FLOAT32, "FLOAT"},
};

static int
format_index(unsigned int format)
{
    for (size_t i = 0; i < BC_COUNT(formats); i++)
        if (formats[i].format == format)
            return (int)i;
    return -1;
}

size_t
bc_array_format_size(unsigned int format)
{
    int i = format_index(format);
    return i < 0 ? 0 : formats[i].size;
}

int
bc_array_check_format(unsigned int format, unsigned int num_channels, const char *what)
{
    if (format_index(format) < 0) {
        PyErr_Format(PyExc_ValueError,
                     "%s: unsupported array format %u (use array_format.UNSIGNED_INT8/16/32, "
                     "SIGNED_INT8/16/32, HALF or FLOAT)",
                     what, format);
        return -1;
    }
    if (num_channels != 1 && num_channels != 2 && num_channels != 4) {
        PyErr_Format(PyExc_ValueError, "%s: num_channels must be 1, 2 or 4, got %u", what,
                     num_channels);
        return -1;
    }
    return 0;
}

/* Flags an Array may be made with here (the others need APIs barecuda lacks). */
#define ARRAY_FLAGS                                                                   \
    (CUDA_ARRAY3D_LAYERED | CUDA_ARRAY3D_SURFACE_LDST | CUDA_ARRAY3D_CUBEMAP |          \
     CUDA_ARRAY3D_TEXTURE_GATHER | CUDA_ARRAY3D_DEPTH_TEXTURE | CUDA_ARRAY3D_COLOR_ATTACHMENT)

/* The whole descriptor, as Array() will use it. */
static int
check_descriptor(const CUDA_ARRAY3D_DESCRIPTOR *d, const char *what)
{
    if (d->Format == 0) {
        PyErr_Format(PyExc_ValueError, "%s: format is not set (use an array_format member)", what);
        return -1;
    }
    if (bc_array_check_format(d->Format, d->NumChannels, what) < 0)
        return -1;
    if (d->Width == 0) {
        PyErr_Format(PyExc_ValueError, "%s: width must be at least 1", what);
        return -1;
    }
    if (d->Flags & ~(unsigned int)ARRAY_FLAGS) {
        PyErr_Format(PyExc_ValueError, "%s: unsupported flags 0x%x", what,
                     d->Flags & ~(unsigned int)ARRAY_FLAGS);
        return -1;
    }
    int layered = (d->Flags & CUDA_ARRAY3D_LAYERED) != 0;
    if (layered && d->Depth == 0) {
        PyErr_Format(PyExc_ValueError,
                     "%s: a LAYERED array needs depth >= 1 (depth is the number of layers)", what);
        return -1;
    }
    if (d->Flags & CUDA_ARRAY3D_CUBEMAP) {
        if (d->Width != d->Height || d->Depth == 0 || d->Depth % 6 != 0 ||
            (!layered && d->Depth != 6)) {
            PyErr_Format(PyExc_ValueError,
                         "%s: a CUBEMAP array needs width == height and depth 6 "
                         "(a multiple of 6 when LAYERED), got %zux%zux%zu",
                         what, d->Width, d->Height, d->Depth);
            return -1;
        }
    } else if (!layered && d->Depth > 0 && d->Height == 0) {
        PyErr_Format(PyExc_ValueError,
                     "%s: a 3D array needs height >= 1 when depth is set (got height 0, depth %zu)",
                     what, d->Depth);
        return -1;
    }
    return 0;
}

/* Bytes per row, rows per slice, slices, and the total; -1 on overflow. */
typedef struct {
    size_t elem, row, rows, slices, total;
} geometry;

static int
array_geometry(const CUDA_ARRAY3D_DESCRIPTOR *d, geometry *g)
{
    g->elem = bc_array_format_size(d->Format) * d->NumChannels;
    g->rows = d->Height ? d->Height : 1;
    g->slices = d->Depth ? d->Depth : 1;
    if (__builtin_mul_overflow(g->elem, d->Width, &g->row) ||
        __builtin_mul_overflow(g->row, g->rows, &g->total) ||
        __builtin_mul_overflow(g->total, g->slices, &g->total)) {
        PyErr_SetString(PyExc_ValueError, "array dimensions are too large");
        return -1;
    }
    return 0;
}

/* -------------------------------------------------------------- descriptors */

typedef struct {
    PyObject_HEAD
    CUDA_ARRAY3D_DESCRIPTOR d;
    int is3d;
    int ready; /* 0: a subclass's descriptor before ArrayDescriptor[3D].__init__ */
    PyObject *dict; /* instance attributes (PyCUDA's objects take them) */
} bc_ArrayDescriptor;

static void
descriptor_fill(bc_ArrayDescriptor *self, const CUDA_ARRAY3D_DESCRIPTOR *d, int is3d)
{
    self->d = *d;
    if (!is3d) {
        self->d.Depth = 0;
        self->d.Flags = 0;
    }
    self->is3d = is3d;
    self->ready = 1;
}

static PyObject *
descriptor_make(bc_State *st, const CUDA_ARRAY3D_DESCRIPTOR *d, int is3d)
{
    PyTypeObject *tp =
        (PyTypeObject *)(is3d ? st->ArrayDescriptor3DType : st->ArrayDescriptorType);
    bc_ArrayDescriptor *self = (bc_ArrayDescriptor *)tp->tp_alloc(tp, 0);
    if (self == NULL)
        return NULL;
    descriptor_fill(self, d, is3d);
    return (PyObject *)self;
}

static const char *
descriptor_base_name(const bc_ArrayDescriptor *self)
{
    return self->is3d ? "ArrayDescriptor3D" : "ArrayDescriptor";
}

/* 0, or -1 with LogicError for a subclass's descriptor whose __init__ never
 * called the base's. */
static int
descriptor_ready(PyObject *self)
{
    bc_ArrayDescriptor *s = (bc_ArrayDescriptor *)self;
    if (s->ready)
        return 0;
    return bc_error_logic(bc_state_of(self),
                          "this %.100s was not initialised: its __init__ must call "
                          "%s.__init__(self, ...)",
                          Py_TYPE(self)->tp_name, descriptor_base_name(s));
}

/* Whether obj is an ArrayDescriptor or ArrayDescriptor3D (or of a subclass). */
static int
is_descriptor(bc_State *st, PyObject *obj)
{
    return PyObject_TypeCheck(obj, (PyTypeObject *)st->ArrayDescriptorType) ||
           PyObject_TypeCheck(obj, (PyTypeObject *)st->ArrayDescriptor3DType);
}

static int
set_size_field(PyObject *value, const char *what, size_t *field)
{
    if (value == NULL) {
        PyErr_Format(PyExc_AttributeError, "cannot delete %s", what);
        return -1;
    }
    return bc_arg_size(value, what, field);
}

static int
set_format_field(PyObject *value, CUDA_ARRAY3D_DESCRIPTOR *d)
{
    if (value == NULL) {
        PyErr_SetString(PyExc_AttributeError, "cannot delete format");
        return -1;
    }
    if (value == Py_None) {
        d->Format = 0;
        return 0;
    }
    long long f;
    if (bc_arg_long(value, "format", 0, 0xFFFFFFFFLL, &f) < 0)
        return -1;
    if (format_index((unsigned int)f) < 0)
        return bc_array_check_format((unsigned int)f, 1, "format");
    d->Format = (CUarray_format)f;
    return 0;
}

static int
set_channels_field(PyObject *value, CUDA_ARRAY3D_DESCRIPTOR *d)
{
    if (value == NULL) {
        PyErr_SetString(PyExc_AttributeError, "cannot delete num_channels");
        return -1;
    }
    long long n;
    if (bc_arg_long(value, "num_channels", 0, 0xFFFFFFFFLL, &n) < 0)
        return -1;
    if (n != 1 && n != 2 && n != 4) {
        PyErr_Format(PyExc_ValueError, "num_channels must be 1, 2 or 4, got %lld", n);
        return -1;
    }
    d->NumChannels = (unsigned int)n;
    return 0;
}

static int
set_flags_field(PyObject *value, CUDA_ARRAY3D_DESCRIPTOR *d)
{
    if (value == NULL) {
        PyErr_SetString(PyExc_AttributeError, "cannot delete flags");
        return -1;
    }
    unsigned int f;
    if (bc_arg_flags(value, "flags", ARRAY_FLAGS, &f) < 0)
        return -1;
    d->Flags = f;
    return 0;
}

/* Parse the 2D or 3D constructor's arguments into *d: 0, or -1. */
static int
descriptor_parse(PyObject *args, PyObject *kwargs, int is3d, CUDA_ARRAY3D_DESCRIPTOR *d)
{
    static char *kw2[] = {"width", "height", "format", "num_channels", NULL};
    static char *kw3[] = {"width", "height", "depth", "format", "num_channels", "flags", NULL};
    PyObject *w = NULL, *h = NULL, *dep = NULL, *fmt = NULL, *nc = NULL, *fl = NULL;
    int ok = is3d ? PyArg_ParseTupleAndKeywords(args, kwargs, "|OOOOOO:ArrayDescriptor3D", kw3,
                                                &w, &h, &dep, &fmt, &nc, &fl)
                  : PyArg_ParseTupleAndKeywords(args, kwargs, "|OOOO:ArrayDescriptor", kw2, &w,
                                                &h, &fmt, &nc);
    if (!ok)
        return -1;
    memset(d, 0, sizeof *d);
    d->NumChannels = 1;
    if ((w && set_size_field(w, "width", &d->Width) < 0) ||
        (h && set_size_field(h, "height", &d->Height) < 0) ||
        (dep && set_size_field(dep, "depth", &d->Depth) < 0) ||
        (fmt && set_format_field(fmt, d) < 0) || (nc && set_channels_field(nc, d) < 0) ||
        (fl && set_flags_field(fl, d) < 0))
        return -1;
    return 0;
}

/* ArrayDescriptor(...) fills the descriptor in __new__.  A subclass (PyCUDA's
 * classes are built in __init__, so its own __init__ may take other arguments)
 * gets an unset one from __new__ and the base's __init__ fills it. */
static PyObject *
descriptor_new(PyTypeObject *tp, PyObject *args, PyObject *kwargs)
{
    bc_State *st = bc_state_of_type(tp);
    if (st == NULL)
        return NULL;
    if (tp != (PyTypeObject *)st->ArrayDescriptorType &&
        tp != (PyTypeObject *)st->ArrayDescriptor3DType) {
        bc_ArrayDescriptor *self = (bc_ArrayDescriptor *)tp->tp_alloc(tp, 0);
        if (self != NULL) /* ready 0 until __init__ */
            self->is3d = PyType_IsSubtype(tp, (PyTypeObject *)st->ArrayDescriptor3DType);
        return (PyObject *)self;
    }
    int is3d = tp == (PyTypeObject *)st->ArrayDescriptor3DType;
    CUDA_ARRAY3D_DESCRIPTOR d;
    if (descriptor_parse(args, kwargs, is3d, &d) < 0)
        return NULL;
    return descriptor_make(st, &d, is3d);
}

static int
descriptor_init(PyObject *self, PyObject *args, PyObject *kwargs)
{
    bc_State *st = bc_state_of(self);
    if (Py_IS_TYPE(self, (PyTypeObject *)st->ArrayDescriptorType) ||
        Py_IS_TYPE(self, (PyTypeObject *)st->ArrayDescriptor3DType))
        return 0; /* filled by __new__ from the same arguments */
    bc_ArrayDescriptor *s = (bc_ArrayDescriptor *)self;
    if (s->ready) {
        PyErr_Format(PyExc_TypeError, "%s.__init__() called twice on this %.100s",
                     descriptor_base_name(s), Py_TYPE(self)->tp_name);
        return -1;
    }
    CUDA_ARRAY3D_DESCRIPTOR d;
    if (descriptor_parse(args, kwargs, s->is3d, &d) < 0)
        return -1;
    descriptor_fill(s, &d, s->is3d);
    return 0;
}

static void
descriptor_dealloc(PyObject *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    Py_CLEAR(((bc_ArrayDescriptor *)self)->dict);
    tp->tp_free(self);
    Py_DECREF(tp);
}

static int
descriptor_traverse(PyObject *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(((bc_ArrayDescriptor *)self)->dict);
    return 0;
}

static int
descriptor_clear(PyObject *self)
{
    Py_CLEAR(((bc_ArrayDescriptor *)self)->dict);
    return 0;
}

static PyMemberDef descriptor_members[] = {
    {"__dictoffset__", T_PYSSIZET, offsetof(bc_ArrayDescriptor, dict), READONLY, NULL},
    {NULL, 0, 0, 0, NULL},
};

static PyObject *
descriptor_repr(bc_ArrayDescriptor *self)
{
    if (!self->ready)
        return PyUnicode_FromFormat("<%s (not initialised)>", Py_TYPE(self)->tp_name);
    int i = format_index(self->d.Format);
    const char *fname = i < 0 ? "None" : formats[i].name;
    const char *prefix = i < 0 ? "" : "array_format.";
    if (self->is3d)
        return PyUnicode_FromFormat(
            "ArrayDescriptor3D(width=%zu, height=%zu, depth=%zu, format=%s%s, "
            "num_channels=%u, flags=0x%x)",
            self->d.Width, self->d.Height, self->d.Depth, prefix, fname, self->d.NumChannels,
            self->d.Flags);
    return PyUnicode_FromFormat("ArrayDescriptor(width=%zu, height=%zu, format=%s%s, "
                                "num_channels=%u)",
                                self->d.Width, self->d.Height, prefix, fname,
                                self->d.NumChannels);
}

static PyObject *
descriptor_richcompare(PyObject *a, PyObject *b, int op)
{
    /* a subclass's descriptor equals the base's of the same fields; a 2D one never
     * equals a 3D one (NotImplemented both ways: identity decides) */
    if ((op != Py_EQ && op != Py_NE) || !is_descriptor(bc_state_of(a), b) ||
        ((bc_ArrayDescriptor *)a)->is3d != ((bc_ArrayDescriptor *)b)->is3d)
        Py_RETURN_NOTIMPLEMENTED;
    if (descriptor_ready(a) < 0 || descriptor_ready(b) < 0)
        return NULL;
    const CUDA_ARRAY3D_DESCRIPTOR *x = &((bc_ArrayDescriptor *)a)->d;
    const CUDA_ARRAY3D_DESCRIPTOR *y = &((bc_ArrayDescriptor *)b)->d;
    int eq = x->Width == y->Width && x->Height == y->Height && x->Depth == y->Depth &&
             x->Format == y->Format && x->NumChannels == y->NumChannels && x->Flags == y->Flags;
    return PyBool_FromLong(op == Py_EQ ? eq : !eq);
}

#define DESC(self) (&((bc_ArrayDescriptor *)(self))->d)

/* width, height and depth: size_t fields of the descriptor; a getset closure says
 * which (its name for messages and its offset). */
typedef struct {
    const char *name;
    size_t offset;
} size_field;

static size_field width_field = {"width", offsetof(CUDA_ARRAY3D_DESCRIPTOR, Width)};
static size_field height_field = {"height", offsetof(CUDA_ARRAY3D_DESCRIPTOR, Height)};
static size_field depth_field = {"depth", offsetof(CUDA_ARRAY3D_DESCRIPTOR, Depth)};

static size_t *
size_slot(PyObject *self, const size_field *f)
{
    return (size_t *)((char *)DESC(self) + f->offset);
}
static PyObject *
get_size(PyObject *self, void *closure)
{
    if (descriptor_ready(self) < 0)
        return NULL;
    return PyLong_FromSize_t(*size_slot(self, closure));
}
static int
put_size(PyObject *self, PyObject *v, void *closure)
{
    const size_field *f = closure;
    if (descriptor_ready(self) < 0)
        return -1;
    return set_size_field(v, f->name, size_slot(self, f));
}
static PyObject *
get_format(PyObject *self, void *Py_UNUSED(c))
{
    if (descriptor_ready(self) < 0)
        return NULL;
    if (DESC(self)->Format == 0)
        Py_RETURN_NONE;
    return bc_driver_enum(bc_state_of(self), "array_format", DESC(self)->Format);
}
static int
put_format(PyObject *self, PyObject *v, void *Py_UNUSED(c))
{
    if (descriptor_ready(self) < 0)
        return -1;
    return set_format_field(v, DESC(self));
}
static PyObject *
get_channels(PyObject *self, void *Py_UNUSED(c))
{
    if (descriptor_ready(self) < 0)
        return NULL;
    return PyLong_FromUnsignedLong(DESC(self)->NumChannels);
}
static int
put_channels(PyObject *self, PyObject *v, void *Py_UNUSED(c))
{
    if (descriptor_ready(self) < 0)
        return -1;
    return set_channels_field(v, DESC(self));
}
static PyObject *
get_flags(PyObject *self, void *Py_UNUSED(c))
{
    if (descriptor_ready(self) < 0)
        return NULL;
    return bc_driver_enum(bc_state_of(self), "array3d_flags", DESC(self)->Flags);
}
static int
put_flags(PyObject *self, PyObject *v, void *Py_UNUSED(c))
{
    if (descriptor_ready(self) < 0)
        return -1;
    return set_flags_field(v, DESC(self));
}

#define BC_DESC_FIELDS                                                                      \
    {"width", get_size, put_size, "Width in elements (>= 1).", &width_field},              \
    {"height", get_size, put_size, "Height in elements (0 for a 1D array).", &height_field}, \
    {"format", get_format, put_format, "An array_format member (None until set).", NULL},  \
    {"num_channels", get_channels, put_channels, "Channels per element: 1, 2 or 4.", NULL}

static PyGetSetDef descriptor_getset[] = {
    BC_DICT_GETSET,
    BC_DESC_FIELDS,
    {NULL, NULL, NULL, NULL, NULL},
};

static PyGetSetDef descriptor3d_getset[] = {
    BC_DICT_GETSET,
    BC_DESC_FIELDS,
    {"depth", get_size, put_size,
     "Depth in elements (0 for 1D/2D arrays; the number of layers when LAYERED).", &depth_field},
    {"flags", get_flags, put_flags,
     "array3d_flags: LAYERED, SURFACE_LDST, CUBEMAP, TEXTURE_GATHER.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyDoc_STRVAR(descriptor_doc,
"ArrayDescriptor(width=0, height=0, format=None, num_channels=1)\n--\n\n"
"Shape and element type of a 1D or 2D CUDA array (PyCUDA's fields).  Values are\n"
"checked when set: format must be one of the eight plain array_format members,\n"
"num_channels 1, 2 or 4.");

PyDoc_STRVAR(descriptor3d_doc,
"ArrayDescriptor3D(width=0, height=0, depth=0, format=None, num_channels=1, flags=0)\n--\n\n"
"Shape, element type and array3d_flags of any CUDA array: 1D (height = depth = 0),\n"
"2D (depth 0), 3D, layered (LAYERED, depth = number of layers), cubemap, and\n"
"surface-capable (SURFACE_LDST).");

static PyType_Slot descriptor_slots[] = {
    {Py_tp_new, descriptor_new},       {Py_tp_init, descriptor_init},
    {Py_tp_dealloc, descriptor_dealloc},
    {Py_tp_traverse, descriptor_traverse}, {Py_tp_clear, descriptor_clear},
    {Py_tp_members, descriptor_members},
    {Py_tp_repr, descriptor_repr},     {Py_tp_richcompare, descriptor_richcompare},
    {Py_tp_getset, descriptor_getset}, {Py_tp_doc, (void *)descriptor_doc},
    {Py_tp_hash, PyObject_HashNotImplemented},
    {0, NULL},
};

static PyType_Slot descriptor3d_slots[] = {
    {Py_tp_new, descriptor_new},         {Py_tp_init, descriptor_init},
    {Py_tp_dealloc, descriptor_dealloc},
    {Py_tp_traverse, descriptor_traverse}, {Py_tp_clear, descriptor_clear},
    {Py_tp_members, descriptor_members},
    {Py_tp_repr, descriptor_repr},       {Py_tp_richcompare, descriptor_richcompare},
    {Py_tp_getset, descriptor3d_getset}, {Py_tp_doc, (void *)descriptor3d_doc},
    {Py_tp_hash, PyObject_HashNotImplemented},
    {0, NULL},
};

static PyType_Spec descriptor_spec = {
    .name = "barecuda.driver.ArrayDescriptor",
    .basicsize = sizeof(bc_ArrayDescriptor),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE | Py_TPFLAGS_BASETYPE |
             Py_TPFLAGS_HAVE_GC,
    .slots = descriptor_slots,
};

static PyType_Spec descriptor3d_spec = {
    .name = "barecuda.driver.ArrayDescriptor3D",
    .basicsize = sizeof(bc_ArrayDescriptor),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE | Py_TPFLAGS_BASETYPE |
             Py_TPFLAGS_HAVE_GC,
    .slots = descriptor3d_slots,
};

/* -------------------------------------------------------------------- Array */

/* `freed` is -1 for a subclass's array whose __init__ has not called Array.__init__:
 * 0 for one that is set, else -1 with LogicError. */
static int
array_ready(bc_State *st, bc_Array *a)
{
    if (a->freed >= 0)
        return 0;
    return bc_error_logic(st, "this %.100s was not initialised: its __init__ must call "
                              "Array.__init__(self, descriptor)", Py_TYPE(a)->tp_name);
}

static int
array_usable(bc_State *st, bc_Array *a)
{
    if (a->freed)
        return a->freed < 0 ? array_ready(st, a) : bc_error_logic(st, "this Array was freed");
    return bc_context_check_alive(st, a->ctx, "this Array");
}

bc_Array *
bc_array_convert(bc_State *st, PyObject *obj)
{
    /* exact type first, then subclasses */
    if (!PyObject_TypeCheck(obj, (PyTypeObject *)st->ArrayType)) {
        PyErr_Format(PyExc_TypeError, "expected a barecuda.driver.Array, not %.100s",
                     Py_TYPE(obj)->tp_name);
        return NULL;
    }
    bc_Array *a = (bc_Array *)obj;
    return array_usable(st, a) < 0 ? NULL : a;
}

/* Parse Array's arguments and create the CUarray in the current context: 0 with
 * *handle, *d and a new reference *ctx, or -1. */
static int
array_create(bc_State *st, PyObject *args, PyObject *kwargs, CUarray *handle, bc_Context **ctx,
             CUDA_ARRAY3D_DESCRIPTOR *d)
{
    static char *kwlist[] = {"descriptor", NULL};
    PyObject *desc;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O:Array", kwlist, &desc))
        return -1;
    if (!is_descriptor(st, desc)) {
        PyErr_Format(PyExc_TypeError,
                     "Array() takes an ArrayDescriptor or ArrayDescriptor3D, not %.100s",
                     Py_TYPE(desc)->tp_name);
        return -1;
    }
    if (descriptor_ready(desc) < 0)
        return -1;
    *d = ((bc_ArrayDescriptor *)desc)->d;
    geometry g;
    if (check_descriptor(d, "Array()") < 0 || array_geometry(d, &g) < 0)
        return -1;
    *ctx = bc_context_current(st);
    if (*ctx == NULL)
        return -1;
    CUresult rc;
    *handle = NULL;
    Py_BEGIN_ALLOW_THREADS
    rc = bc_drv.cuArray3DCreate(handle, d);
    Py_END_ALLOW_THREADS
    if (bc_check(st, rc, "cuArray3DCreate") < 0) {
        Py_CLEAR(*ctx);
        return -1;
    }
    return 0;
}

/* Set self over a new CUarray; steals the reference to ctx. */
static void
array_fill(bc_Array *self, CUarray handle, bc_Context *ctx, const CUDA_ARRAY3D_DESCRIPTOR *d)
{
    self->handle = handle;
    self->ctx = ctx;
    self->desc = *d;
    self->freed = 0;
    bc_context_memory_made(ctx, &self->counted);
    self->users = 0;
}

/* Array(descriptor) creates the array in __new__.  A subclass (PyCUDA's classes
 * are built in __init__, so its own __init__ may take other arguments) gets an
 * unset array from __new__ (freed -1) and Array.__init__ creates it. */
static PyObject *
array_new(PyTypeObject *tp, PyObject *args, PyObject *kwargs)
{
    bc_State *st = bc_state_of_type(tp);
    if (st == NULL)
        return NULL;
    if (tp != (PyTypeObject *)st->ArrayType) {
        bc_Array *self = (bc_Array *)tp->tp_alloc(tp, 0);
        if (self != NULL)
            self->freed = -1;
        return (PyObject *)self;
    }
    CUarray handle;
    bc_Context *ctx;
    CUDA_ARRAY3D_DESCRIPTOR d;
    if (array_create(st, args, kwargs, &handle, &ctx, &d) < 0)
        return NULL;
    /* tp_alloc: zeroed (a subclass's __slots__ and __dict__ too) and tracked */
    bc_Array *self = (bc_Array *)tp->tp_alloc(tp, 0);
    if (self == NULL) {
        bc_drv.cuArrayDestroy(handle);
        Py_DECREF(ctx);
        return NULL;
    }
    array_fill(self, handle, ctx, &d);
    return (PyObject *)self;
}

static int
array_init(PyObject *self, PyObject *args, PyObject *kwargs)
{
    bc_State *st = bc_state_of(self);
    if (Py_IS_TYPE(self, (PyTypeObject *)st->ArrayType))
        return 0; /* created by __new__ from the same arguments */
    bc_Array *a = (bc_Array *)self;
    if (a->freed >= 0) {
        PyErr_Format(PyExc_TypeError, "Array.__init__() called twice on this %.100s",
                     Py_TYPE(self)->tp_name);
        return -1;
    }
    CUarray handle;
    bc_Context *ctx;
    CUDA_ARRAY3D_DESCRIPTOR d;
    if (array_create(st, args, kwargs, &handle, &ctx, &d) < 0)
        return -1;
    array_fill(a, handle, ctx, &d);
    return 0;
}

/* Destroy the array with its context current; the driver's answer. */
static CUresult
array_release(bc_Array *self)
{
    if (self->freed)
        return CUDA_SUCCESS;
    self->freed = 1;
    if (self->ctx == NULL || self->ctx->let_go || !bc_drv_ready)
        return CUDA_SUCCESS;
    int entered = bc_context_enter(self->ctx);
    if (entered < 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    CUresult rc = bc_drv.cuArrayDestroy(self->handle);
    bc_context_leave(entered);
    return rc;
}

static void
array_dealloc(bc_Array *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    if (self->weakreflist != NULL)
        PyObject_ClearWeakRefs((PyObject *)self);
    if (!self->freed)
        bc_error_in_destructor(array_release(self),
                               "cuArrayDestroy", (PyObject *)self);
    bc_context_memory_freed(self->ctx, &self->counted);
    Py_CLEAR(self->ctx);
    Py_CLEAR(self->dict);
    tp->tp_free(self);
    Py_DECREF(tp);
}

/* tp_clear: only the instance dict (the parents stay until dealloc). */
static int
array_clear(bc_Array *self)
{
    Py_CLEAR(self->dict);
    return 0;
}

static int
array_traverse(bc_Array *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(self->dict);
    Py_VISIT(self->ctx);
    return 0;
}

PyDoc_STRVAR(array_free_doc,
"free($self)\n--\n\n"
"Destroy the array now (idempotent); later uses raise LogicError.  Raises\n"
"LogicError, and frees nothing, while a TextureObject or SurfaceObject made over\n"
"this array is still open: close() those first (or drop them).");

static PyObject *
array_free(bc_Array *self, PyObject *Py_UNUSED(ignored))
{
    bc_State *st = bc_state_of((PyObject *)self);
    if (!self->freed && self->users > 0) {
        bc_error_logic(st,
                       "Array.free(): %zd TextureObject/SurfaceObject(s) still read this "
                       "array; close() them first",
                       self->users);
        return NULL;
    }
    CUresult rc;
    Py_BEGIN_ALLOW_THREADS
    rc = array_release(self);
    Py_END_ALLOW_THREADS
    bc_context_memory_freed(self->ctx, &self->counted);
    if (bc_check(st, rc, "cuArrayDestroy") < 0)
        return NULL;
    Py_RETURN_NONE;
}

PyDoc_STRVAR(array_get_descriptor_doc,
"get_descriptor($self)\n--\n\n"
"ArrayDescriptor of a 1D or 2D array (LogicError for 3D and layered arrays:\n"
"use get_descriptor_3d()).");

static PyObject *
array_get_descriptor(bc_Array *self, PyObject *Py_UNUSED(ignored))
{
    bc_State *st = bc_state_of((PyObject *)self);
    if (array_usable(st, self) < 0)
        return NULL;
    if (self->desc.Depth != 0) {
        bc_error_logic(st,
                       "get_descriptor(): this Array is 3D or layered (depth %zu); "
                       "use get_descriptor_3d()",
                       self->desc.Depth);
        return NULL;
    }
    return descriptor_make(st, &self->desc, 0);
}

PyDoc_STRVAR(array_get_descriptor_3d_doc,
"get_descriptor_3d($self)\n--\n\nArrayDescriptor3D of the array (any kind), flags included.");

static PyObject *
array_get_descriptor_3d(bc_Array *self, PyObject *Py_UNUSED(ignored))
{
    bc_State *st = bc_state_of((PyObject *)self);
    if (array_usable(st, self) < 0)
        return NULL;
    return descriptor_make(st, &self->desc, 1);
}

/* The NumPy shape of the array's host layout (see the top of the file). */
static PyObject *
array_shape_tuple(const CUDA_ARRAY3D_DESCRIPTOR *d, npy_intp *dims, int *nd)
{
    int n = 0;
    if (d->Depth)
        dims[n++] = (npy_intp)d->Depth;
    if (d->Height)
        dims[n++] = (npy_intp)d->Height;
    dims[n++] = (npy_intp)d->Width;
    if (d->NumChannels > 1)
        dims[n++] = (npy_intp)d->NumChannels;
    *nd = n;
    PyObject *t = PyTuple_New(n);
    for (int i = 0; t && i < n; i++) {
        PyObject *v = PyLong_FromSsize_t(dims[i]);
        if (v == NULL)
            Py_CLEAR(t);
        else
            PyTuple_SET_ITEM(t, i, v);
    }
    return t;
}

/* A full copy between the array and host (host != NULL) or device memory. */
static CUresult
array_copy(bc_Array *a, int to_array, void *host, CUdeviceptr dev, size_t pitch,
           const geometry *g)
{
    CUDA_MEMCPY3D c;
    memset(&c, 0, sizeof c);
    c.WidthInBytes = g->row;
    c.Height = g->rows;
    c.Depth = g->slices;
    CUmemorytype other = host ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE;
    if (to_array) {
        c.dstMemoryType = CU_MEMORYTYPE_ARRAY;
        c.dstArray = a->handle;
        c.srcMemoryType = other;
        c.srcHost = host;
        c.srcDevice = dev;
        c.srcPitch = pitch;
        c.srcHeight = g->rows;
    } else {
        c.srcMemoryType = CU_MEMORYTYPE_ARRAY;
        c.srcArray = a->handle;
        c.dstMemoryType = other;
        c.dstHost = host;
        c.dstDevice = dev;
        c.dstPitch = pitch;
        c.dstHeight = g->rows;
    }
    int entered = bc_context_enter(a->ctx);
    if (entered < 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    CUresult rc = bc_drv.cuMemcpy3D(&c);
    bc_context_leave(entered);
    return rc;
}

PyDoc_STRVAR(array_set_doc,
"set($self, src, pitch=None)\n--\n\n"
"Copy the whole array from `src` (cuMemcpy3D, GIL released).  `src` is either a\n"
"C-contiguous host buffer (a NumPy array, bytes, ...) holding exactly the array's\n"
"bytes in its host layout (see `shape`), or device memory (a DeviceAllocation,\n"
"an object with gpudata or __cuda_array_interface__, or an int pointer) whose rows\n"
"are `pitch` bytes apart (default: tightly packed).");

static PyObject *
array_set(bc_Array *self, PyObject *args, PyObject *kwargs)
{
    bc_State *st = bc_state_of((PyObject *)self);
    static char *kwlist[] = {"src", "pitch", NULL};
    PyObject *src, *pitch_obj = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|O:set", kwlist, &src, &pitch_obj))
        return NULL;
    if (array_usable(st, self) < 0)
        return NULL;
    geometry g;
    if (array_geometry(&self->desc, &g) < 0)
        return NULL;
    CUresult rc;
    if (PyObject_CheckBuffer(src)) {
        if (pitch_obj != Py_None) {
            PyErr_SetString(PyExc_TypeError, "Array.set(): pitch applies to device memory only");
            return NULL;
        }
        Py_buffer view;
        if (PyObject_GetBuffer(src, &view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) {
            PyErr_Clear();
            PyErr_SetString(PyExc_ValueError,
                            "Array.set(): the host buffer must be C-contiguous");
            return NULL;
        }
        if (bc_arg_plain_host(src, &view, "Array.set", "the host buffer") < 0) {
            PyBuffer_Release(&view);
            return NULL;
        }
        if ((size_t)view.len != g.total) {
            PyErr_Format(PyExc_ValueError,
                         "Array.set(): the source holds %zd bytes, the array %zu",
                         view.len, g.total);
            PyBuffer_Release(&view);
            return NULL;
        }
        bc_trace_tok tt = BC_TRACE_BEGIN(st, bc_trace_copy(st, BC_TRACE_HTOA, NULL, g.total));
        Py_BEGIN_ALLOW_THREADS
        rc = array_copy(self, 1, view.buf, 0, g.row, &g);
        Py_END_ALLOW_THREADS
        BC_TRACE_END(st, tt, rc);
        PyBuffer_Release(&view);
    } else {
        CUdeviceptr ptr;
        size_t avail, pitch = g.row, need;
        if (bc_pointer_convert(st, src, &ptr, &avail) < 0)
            return NULL;
        if (pitch_obj != Py_None && bc_arg_size(pitch_obj, "Array.set(): pitch", &pitch) < 0)
            return NULL;
        if (pitch < g.row) {
            PyErr_Format(PyExc_ValueError,
                         "Array.set(): pitch %zu is smaller than a row of the array (%zu bytes)",
                         pitch, g.row);
            return NULL;
        }
        if (__builtin_mul_overflow(pitch, g.rows * g.slices - 1, &need) ||
            __builtin_add_overflow(need, g.row, &need) || need > avail) {
            PyErr_Format(PyExc_ValueError,
                         "Array.set(): the device source holds %zu bytes, the copy needs %zu",
                         avail, need);
            return NULL;
        }
        bc_trace_tok tt = BC_TRACE_BEGIN(st, bc_trace_copy(st, BC_TRACE_DTOA, NULL, g.total));
        Py_BEGIN_ALLOW_THREADS
        rc = array_copy(self, 1, NULL, ptr, pitch, &g);
        Py_END_ALLOW_THREADS
        BC_TRACE_END(st, tt, rc);
    }
    if (bc_check(st, rc, "cuMemcpy3D") < 0)
        return NULL;
    Py_RETURN_NONE;
}

PyDoc_STRVAR(array_get_doc,
"get($self, out=None)\n--\n\n"
"Copy the whole array to the host and return it: a new NumPy array of `shape`\n"
"and `dtype`, or `out` (a writable C-contiguous buffer of exactly the array's\n"
"bytes) filled in place.");

static PyObject *
array_get(bc_Array *self, PyObject *args, PyObject *kwargs)
{
    bc_State *st = bc_state_of((PyObject *)self);
    static char *kwlist[] = {"out", NULL};
    PyObject *out = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|O:get", kwlist, &out))
        return NULL;
    if (array_usable(st, self) < 0)
        return NULL;
    geometry g;
    if (array_geometry(&self->desc, &g) < 0)
        return NULL;
    PyObject *result;
    if (out == Py_None) {
        npy_intp dims[4];
        int nd;
        PyObject *shape = array_shape_tuple(&self->desc, dims, &nd);
        if (shape == NULL)
            return NULL;
        Py_DECREF(shape);
        result = PyArray_SimpleNew(nd, dims, formats[format_index(self->desc.Format)].typenum);
    } else {
        result = Py_NewRef(out);
    }
    if (result == NULL)
        return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(result, &view, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE | PyBUF_FORMAT) < 0) {
        PyErr_Clear();
        PyErr_SetString(PyExc_ValueError, "Array.get(): out must be a writable C-contiguous buffer");
        Py_DECREF(result);
        return NULL;
    }
    if (bc_arg_plain_host(result, &view, "Array.get", "out") < 0) {
        PyBuffer_Release(&view);
        Py_DECREF(result);
        return NULL;
    }
    if ((size_t)view.len != g.total) {
        PyErr_Format(PyExc_ValueError, "Array.get(): out holds %zd bytes, the array %zu",
                     view.len, g.total);
        PyBuffer_Release(&view);
        Py_DECREF(result);
        return NULL;
    }
    CUresult rc;
    bc_trace_tok tt = BC_TRACE_BEGIN(st, bc_trace_copy(st, BC_TRACE_ATOH, NULL, g.total));
    Py_BEGIN_ALLOW_THREADS
    rc = array_copy(self, 0, view.buf, 0, g.row, &g);
    Py_END_ALLOW_THREADS
    BC_TRACE_END(st, tt, rc);
    PyBuffer_Release(&view);
    if (bc_check(st, rc, "cuMemcpy3D") < 0) {
        Py_DECREF(result);
        return NULL;
    }
    return result;
}

static PyObject *
array_enter(PyObject *self, PyObject *Py_UNUSED(ignored))
{
    return Py_NewRef(self);
}

static PyObject *
array_exit(bc_Array *self, PyObject *Py_UNUSED(args))
{
    return array_free(self, NULL);
}

static PyObject *
array_get_handle(bc_Array *self, void *Py_UNUSED(c))
{
    if (array_usable(bc_state_of((PyObject *)self), self) < 0)
        return NULL;
    return PyLong_FromVoidPtr((void *)self->handle);
}

static PyObject *
array_get_shape(bc_Array *self, void *Py_UNUSED(c))
{
    if (array_ready(bc_state_of((PyObject *)self), self) < 0)
        return NULL;
    npy_intp dims[4];
    int nd;
    return array_shape_tuple(&self->desc, dims, &nd);
}

static PyObject *
array_get_dtype(bc_Array *self, void *Py_UNUSED(c))
{
    if (array_ready(bc_state_of((PyObject *)self), self) < 0)
        return NULL; /* an unset array has no format */
    PyArray_Descr *d = PyArray_DescrFromType(formats[format_index(self->desc.Format)].typenum);
    return (PyObject *)d;
}

static PyObject *
array_get_nbytes(bc_Array *self, void *Py_UNUSED(c))
{
    if (array_ready(bc_state_of((PyObject *)self), self) < 0)
        return NULL;
    geometry g;
    if (array_geometry(&self->desc, &g) < 0)
        return NULL;
    return PyLong_FromSize_t(g.total);
}

static PyObject *
array_get_context(bc_Array *self, void *Py_UNUSED(c))
{
    return Py_NewRef(self->ctx ? (PyObject *)self->ctx : Py_None);
}

static PyObject *
array_get_freed(bc_Array *self, void *Py_UNUSED(c))
{
    return PyBool_FromLong(self->freed > 0);
}

static PyObject *
array_get_users(bc_Array *self, void *Py_UNUSED(c))
{
    return PyLong_FromSsize_t(self->users);
}

static PyObject *
array_repr(bc_Array *self)
{
    const CUDA_ARRAY3D_DESCRIPTOR *d = &self->desc;
    if (self->freed < 0)
        return PyUnicode_FromString("<barecuda.driver.Array (not initialised)>");
    return PyUnicode_FromFormat(
        "<barecuda.driver.Array %zux%zux%zu %s x%u flags=0x%x%s>", d->Width, d->Height,
        d->Depth, formats[format_index(d->Format)].name, d->NumChannels, d->Flags,
        self->freed ? ", freed" : "");
}

static PyMethodDef array_methods[] = {
    {"free", (PyCFunction)array_free, METH_NOARGS, array_free_doc},
    {"get_descriptor", (PyCFunction)array_get_descriptor, METH_NOARGS,
     array_get_descriptor_doc},
    {"get_descriptor_3d", (PyCFunction)array_get_descriptor_3d, METH_NOARGS,
     array_get_descriptor_3d_doc},
    {"set", (PyCFunction)(void (*)(void))array_set, METH_VARARGS | METH_KEYWORDS, array_set_doc},
    {"get", (PyCFunction)(void (*)(void))array_get, METH_VARARGS | METH_KEYWORDS, array_get_doc},
    {"__enter__", array_enter, METH_NOARGS, "__enter__($self)\n--\n\nReturn self."},
    {"__exit__", (PyCFunction)array_exit, METH_VARARGS,
     "__exit__($self, *exc_info)\n--\n\nRelease the object (as free()/close())."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef array_getset[] = {
    BC_DICT_GETSET,
    {"handle", (getter)array_get_handle, NULL, "The CUarray handle as an int.", NULL},
    {"shape", (getter)array_get_shape, NULL,
     "NumPy shape of the host layout: ([depth|layers,] [height,] width[, channels]).", NULL},
    {"dtype", (getter)array_get_dtype, NULL, "NumPy dtype of one channel.", NULL},
    {"nbytes", (getter)array_get_nbytes, NULL, "Bytes of the whole array.", NULL},
    {"context", (getter)array_get_context, NULL, "The Context owning the array.", NULL},
    {"freed", (getter)array_get_freed, NULL, "Whether free() was called.", NULL},
    {"users", (getter)array_get_users, NULL,
     "Number of open TextureObject/SurfaceObject objects reading this array.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMemberDef array_members[] = {
    {"__weaklistoffset__", T_PYSSIZET, offsetof(bc_Array, weakreflist), READONLY, NULL},
    {"__dictoffset__", T_PYSSIZET, offsetof(bc_Array, dict), READONLY, NULL},
    {NULL, 0, 0, 0, NULL},
};

PyDoc_STRVAR(array_doc,
"Array(descriptor)\n--\n\n"
"A CUDA array (cuArray3DCreate) in the current context, from an ArrayDescriptor\n"
"or ArrayDescriptor3D: 1D, 2D, 3D, layered, cubemap or surface-capable.  Fill it\n"
"with set(), np_to_array() or Memcpy2D/Memcpy3D; read it with get().");

static PyType_Slot array_slots[] = {
    {Py_tp_new, array_new},
    {Py_tp_init, array_init},
    {Py_tp_dealloc, array_dealloc},
    {Py_tp_traverse, array_traverse},
    {Py_tp_clear, array_clear},
    {Py_tp_repr, array_repr},
    {Py_tp_methods, array_methods},
    {Py_tp_getset, array_getset},
    {Py_tp_members, array_members},
    {Py_tp_doc, (void *)array_doc},
    {0, NULL},
};

static PyType_Spec array_spec = {
    .name = "barecuda.driver.Array",
    .basicsize = sizeof(bc_Array),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE | Py_TPFLAGS_HAVE_GC |
             Py_TPFLAGS_BASETYPE,
    .slots = array_slots,
};

/* ------------------------------------------------------- memcpy_htoa / atoh */

static int
linear_copy_args(bc_State *st, PyObject *ary, PyObject *index, const char *fn, bc_Array **a,
                 size_t *offset, size_t *total)
{
    geometry g;
    if ((*a = bc_array_convert(st, ary)) == NULL)
        return -1;
    if (bc_arg_size(index, fn, offset) < 0 || array_geometry(&(*a)->desc, &g) < 0)
        return -1;
    *total = g.total;
    return 0;
}

/* Replace the buffer protocol's error (TypeError, BufferError) by a clear TypeError. */
static PyObject *
buffer_error(const char *msg, PyObject *obj)
{
    if (PyErr_ExceptionMatches(PyExc_TypeError) || PyErr_ExceptionMatches(PyExc_BufferError)) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "%s, not %.100s", msg, Py_TYPE(obj)->tp_name);
    } else if (PyErr_ExceptionMatches(PyExc_ValueError)) {
        /* NumPy refuses a strided view with "ndarray is not contiguous" */
        PyErr_Clear();
        PyErr_Format(PyExc_ValueError, "%s; this %.100s is not contiguous (copy it with "
                     "numpy.ascontiguousarray)", msg, Py_TYPE(obj)->tp_name);
    }
    return NULL;
}

static CUresult
linear_copy(bc_Array *a, int to_array, size_t offset, void *buf, size_t n)
{
    int entered = bc_context_enter(a->ctx);
    if (entered < 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    CUresult rc = to_array ? bc_drv.cuMemcpyHtoA(a->handle, offset, buf, n)
                           : bc_drv.cuMemcpyAtoH(buf, a->handle, offset, n);
    bc_context_leave(entered);
    return rc;
}

/* memcpy_htoa(ary, index, src) and memcpy_atoh(dest, ary, index). */
static PyObject *
host_array_copy(PyObject *m, PyObject *const *args, Py_ssize_t nargs, int to_array)
{
    bc_State *st = bc_state_from_module(m);
    const char *name = to_array ? "memcpy_htoa" : "memcpy_atoh";
    if (nargs != 3) {
        PyErr_Format(PyExc_TypeError, "%s() takes 3 arguments (%zd given)", name, nargs);
        return NULL;
    }
    PyObject *host = args[to_array ? 2 : 0], *ary = args[to_array ? 0 : 1];
    char what[96];
    snprintf(what, sizeof what, "%s(): index", name);
    bc_Array *a;
    size_t offset, total;
    if (linear_copy_args(st, ary, args[to_array ? 1 : 2], what, &a, &offset, &total) < 0)
        return NULL;
    Py_buffer view;
    int flags = PyBUF_ANY_CONTIGUOUS | PyBUF_FORMAT | (to_array ? 0 : PyBUF_WRITABLE);
    if (PyObject_GetBuffer(host, &view, flags) < 0) {
        snprintf(what, sizeof what, "%s(): %s", name,
                 to_array ? "src must be a contiguous host buffer"
                          : "dest must be a writable contiguous host buffer");
        return buffer_error(what, host);
    }
    /* the index's __index__ or the buffer's exporter may have freed the Array */
    if (bc_arg_plain_host(host, &view, name, to_array ? "src" : "dest") < 0 ||
        array_usable(st, a) < 0) {
        PyBuffer_Release(&view);
        return NULL;
    }
    if (offset > total || (size_t)view.len > total - offset) {
        PyErr_Format(PyExc_ValueError,
                     "%s(): %zd bytes at offset %zu run past the array's %zu bytes", name,
                     view.len, offset, total);
        PyBuffer_Release(&view);
        return NULL;
    }
    CUresult rc = CUDA_SUCCESS;
    if (view.len > 0) {
        bc_trace_tok tt = BC_TRACE_BEGIN(st, bc_trace_copy(st, to_array ? BC_TRACE_HTOA : BC_TRACE_ATOH, NULL, (unsigned long long)view.len));
        Py_BEGIN_ALLOW_THREADS
        rc = linear_copy(a, to_array, offset, view.buf, (size_t)view.len);
        Py_END_ALLOW_THREADS
        BC_TRACE_END(st, tt, rc);
    }
    PyBuffer_Release(&view);
    if (bc_check(st, rc, to_array ? "cuMemcpyHtoA" : "cuMemcpyAtoH") < 0)
        return NULL;
    Py_RETURN_NONE;
}

PyDoc_STRVAR(memcpy_htoa_doc,
"memcpy_htoa(ary, index, src)\n--\n\n"
"Copy the contiguous host buffer `src` into Array `ary` starting `index` bytes\n"
"in (cuMemcpyHtoA: meant for 1D arrays).  ValueError when it would run past the end.");

static PyObject *
bc_memcpy_htoa(PyObject *m, PyObject *const *args, Py_ssize_t nargs)
{
    return host_array_copy(m, args, nargs, 1);
}

PyDoc_STRVAR(memcpy_atoh_doc,
"memcpy_atoh(dest, ary, index)\n--\n\n"
"Fill the writable contiguous host buffer `dest` from Array `ary`, starting\n"
"`index` bytes in (cuMemcpyAtoH: meant for 1D arrays).  ValueError when it would\n"
"run past the end.");

static PyObject *
bc_memcpy_atoh(PyObject *m, PyObject *const *args, Py_ssize_t nargs)
{
    return host_array_copy(m, args, nargs, 0);
}

/* ------------------------------------------ memcpy_dtoa / atod / atoa */

/* `len` bytes at byte `index` of Array `ary` must lie inside it. */
static int
array_span(bc_State *st, PyObject *ary, PyObject *index, size_t len, const char *fn,
           const char *side, bc_Array **a, size_t *offset)
{
    char what[96];
    size_t total;
    snprintf(what, sizeof what, "%s(): %s", fn, side);
    if (linear_copy_args(st, ary, index, what, a, offset, &total) < 0)
        return -1;
    if (*offset > total || len > total - *offset) {
        PyErr_Format(PyExc_ValueError, "%s(): %zu bytes at offset %zu run past the %s array's "
                     "%zu bytes", fn, len, *offset, side[0] == 'd' ? "destination" : "source",
                     total);
        return -1;
    }
    return 0;
}

/* `len` bytes of device memory `obj` must fit in what is known of it. */
static int
device_span(bc_State *st, PyObject *obj, size_t len, const char *fn, const char *what,
            CUdeviceptr *ptr)
{
    size_t known;
    if (bc_pointer_convert(st, obj, ptr, &known) < 0)
        return -1;
    if (len > known) {
        PyErr_Format(PyExc_ValueError, "%s(): copying %zu bytes, but the %s has only %zu bytes",
                     fn, len, what, known);
        return -1;
    }
    return 0;
}

enum { DTOA, ATOD, ATOA };

static const char *const array_copy_names[] = {"memcpy_dtoa", "memcpy_atod", "memcpy_atoa"};
static const char *const array_copy_routines[] = {"cuMemcpyDtoA", "cuMemcpyAtoD",
                                                  "cuMemcpyAtoA"};

/* memcpy_dtoa(ary, index, src, len), memcpy_atod(dest, ary, index, len) and
 * memcpy_atoa(dest, dest_index, src, src_index, len): synchronous copies run in
 * the context of the (destination) Array. */
static PyObject *
device_array_copy(PyObject *m, PyObject *const *args, Py_ssize_t nargs, int kind)
{
    bc_State *st = bc_state_from_module(m);
    const char *fn = array_copy_names[kind];
    Py_ssize_t want = kind == ATOA ? 5 : 4;
    if (nargs != want) {
        PyErr_Format(PyExc_TypeError, "%s() takes %zd arguments (%zd given)", fn, want, nargs);
        return NULL;
    }
    size_t len;
    char what[64];
    snprintf(what, sizeof what, "%s(): len", fn);
    if (bc_arg_size(args[want - 1], what, &len) < 0)
        return NULL;
    bc_Array *a = NULL, *b = NULL;
    size_t off_a = 0, off_b = 0;
    CUdeviceptr dev = 0;
    int bad;
    switch (kind) {
    case DTOA:
        bad = array_span(st, args[0], args[1], len, fn, "destination", &a, &off_a) < 0 ||
              device_span(st, args[2], len, fn, "source device memory", &dev) < 0;
        break;
    case ATOD:
        bad = device_span(st, args[0], len, fn, "destination device memory", &dev) < 0 ||
              array_span(st, args[1], args[2], len, fn, "source", &a, &off_a) < 0;
        break;
    default:
        bad = array_span(st, args[0], args[1], len, fn, "destination", &a, &off_a) < 0 ||
              array_span(st, args[2], args[3], len, fn, "source", &b, &off_b) < 0;
    }
    if (bad)
        return NULL;
    /* A later argument's conversion (__index__, __cuda_array_interface__) runs
     * Python code that may have freed an Array checked before it: check again. */
    if (array_usable(st, a) < 0 || (b != NULL && array_usable(st, b) < 0))
        return NULL;
    CUresult rc = CUDA_SUCCESS;
    if (len > 0) {
        bc_trace_tok tt = BC_TRACE_BEGIN(
            st, bc_trace_copy(st, kind == DTOA ? BC_TRACE_DTOA : kind == ATOD ? BC_TRACE_ATOD
                                                                              : BC_TRACE_ATOA,
                              NULL, len));
        Py_BEGIN_ALLOW_THREADS
        int entered = bc_context_enter(a->ctx);
        if (entered < 0)
            rc = CUDA_ERROR_INVALID_CONTEXT;
        else {
            if (kind == DTOA)
                rc = bc_drv.cuMemcpyDtoA(a->handle, off_a, dev, len);
            else if (kind == ATOD)
                rc = bc_drv.cuMemcpyAtoD(dev, a->handle, off_a, len);
            else
                rc = bc_drv.cuMemcpyAtoA(a->handle, off_a, b->handle, off_b, len);
            bc_context_leave(entered);
        }
        Py_END_ALLOW_THREADS
        BC_TRACE_END(st, tt, rc);
    }
    if (bc_check(st, rc, array_copy_routines[kind]) < 0)
        return NULL;
    Py_RETURN_NONE;
}

PyDoc_STRVAR(memcpy_dtoa_doc,
"memcpy_dtoa(ary, index, src, len)\n--\n\n"
"Copy `len` bytes from device memory `src` into Array `ary`, starting `index`\n"
"bytes in (cuMemcpyDtoA: meant for 1D arrays).  ValueError when either side is\n"
"too small.");

static PyObject *
bc_memcpy_dtoa(PyObject *m, PyObject *const *args, Py_ssize_t nargs)
{
    return device_array_copy(m, args, nargs, DTOA);
}

PyDoc_STRVAR(memcpy_atod_doc,
"memcpy_atod(dest, ary, index, len)\n--\n\n"
"Copy `len` bytes of Array `ary`, starting `index` bytes in, to device memory\n"
"`dest` (cuMemcpyAtoD: meant for 1D arrays).  ValueError when either side is too\n"
"small.");

static PyObject *
bc_memcpy_atod(PyObject *m, PyObject *const *args, Py_ssize_t nargs)
{
    return device_array_copy(m, args, nargs, ATOD);
}

PyDoc_STRVAR(memcpy_atoa_doc,
"memcpy_atoa(dest, dest_index, src, src_index, len)\n--\n\n"
"Copy `len` bytes from Array `src` (from byte `src_index`) to Array `dest` (from\n"
"byte `dest_index`) (cuMemcpyAtoA: meant for 1D arrays of one element size).\n"
"ValueError when either span runs past its array.");

static PyObject *
bc_memcpy_atoa(PyObject *m, PyObject *const *args, Py_ssize_t nargs)
{
    return device_array_copy(m, args, nargs, ATOA);
}

static PyMethodDef array_functions[] = {
    {"memcpy_htoa", (PyCFunction)(void (*)(void))bc_memcpy_htoa, METH_FASTCALL, memcpy_htoa_doc},
    {"memcpy_atoh", (PyCFunction)(void (*)(void))bc_memcpy_atoh, METH_FASTCALL, memcpy_atoh_doc},
    {"memcpy_dtoa", (PyCFunction)(void (*)(void))bc_memcpy_dtoa, METH_FASTCALL, memcpy_dtoa_doc},
    {"memcpy_atod", (PyCFunction)(void (*)(void))bc_memcpy_atod, METH_FASTCALL, memcpy_atod_doc},
    {"memcpy_atoa", (PyCFunction)(void (*)(void))bc_memcpy_atoa, METH_FASTCALL, memcpy_atoa_doc},
    {NULL, NULL, 0, NULL},
};

int
bc_array_setup(PyObject *m, bc_State *st)
{
    if (bc_add_type(m, &descriptor_spec, NULL, &st->ArrayDescriptorType) < 0 ||
        bc_add_type(m, &descriptor3d_spec, NULL, &st->ArrayDescriptor3DType) < 0 ||
        bc_add_type(m, &array_spec, NULL, &st->ArrayType) < 0)
        return -1;
    return PyModule_AddFunctions(m, array_functions);
}
