/* SPDX-License-Identifier: MIT */
/* Texture objects and surface objects: the modern replacement of PyCUDA's
 * texture references (removed in CUDA 12).
 *
 * A TextureObject reads an Array, linear device memory (from_linear) or pitched
 * 2D device memory (from_pitch2d); a SurfaceObject reads and writes an Array made
 * with SURFACE_LDST.  Both are passed to kernels as their 64-bit handle (int(t),
 * t.handle, or the object itself where argument packing knows it through
 * bc_texture_handle).
 *
 * Lifetime: each object holds its Context and the object it reads (`resource`).
 * Over an Array it also counts itself in the array's `users` until close(), so
 * Array.free() raises LogicError while it is open.  Device memory cannot be
 * guarded that way: the allocation object is kept alive, but freeing it
 * explicitly while a texture reads it is the caller's error (undefined reads).
 * close() is idempotent and drops the resource; afterwards every use raises
 * LogicError. */
#include "barecuda/array.h"
#include "barecuda/argparse.h"
#include "barecuda/error.h"
#include "barecuda/loader.h"
#include "barecuda/memory.h"

#include <strings.h>

typedef struct {
    PyObject_HEAD
    unsigned long long handle;
    bc_Context *ctx;
    PyObject *resource; /* the Array or device-memory object read (NULL after close) */
    bc_Array *array;    /* borrowed from resource when it is an Array counted in users */
    int surface;        /* 1 for a SurfaceObject */
    int closed;         /* 1 once closed; -1: a subclass's object before the base's __init__ */
    CUresourcetype restype;
    CUDA_TEXTURE_DESC tex;
    PyObject *weakreflist;
} bc_TexObject;

/* ------------------------------------------------------------ option parsing */

typedef struct {
    PyObject *address_mode, *filter_mode, *normalized_coords, *read_mode, *border_color, *srgb,
        *max_anisotropy, *flags;
} tex_options;

static const char *const address_names[] = {"wrap", "clamp", "mirror", "border"};
static const char *const filter_names[] = {"point", "linear"};

/* A named enum value: an int in [0, n) or one of `names` (any case). */
static int
named_value(PyObject *obj, const char *what, const char *const *names, int n, int *out)
{
    if (PyUnicode_Check(obj)) {
        const char *s = PyUnicode_AsUTF8(obj);
        if (s == NULL)
            return -1;
        for (int i = 0; i < n; i++)
            if (strcasecmp(s, names[i]) == 0) {
                *out = i;
                return 0;
            }
        PyErr_Format(PyExc_ValueError, "%s: unknown mode %R", what, obj);
        return -1;
    }
    long long v;
    if (bc_arg_long(obj, what, 0, n - 1, &v) < 0)
        return -1;
    *out = (int)v;
    return 0;
}

static int
parse_address_modes(PyObject *obj, CUaddress_mode out[3])
{
    const char *what = "address_mode";
    out[0] = out[1] = out[2] = CU_TR_ADDRESS_MODE_CLAMP;
    if (obj == NULL || obj == Py_None)
        return 0;
    int v;
    if (PyUnicode_Check(obj) || PyLong_Check(obj) || PyIndex_Check(obj)) {
        if (named_value(obj, what, address_names, 4, &v) < 0)
            return -1;
        out[0] = out[1] = out[2] = (CUaddress_mode)v;
        return 0;
    }
    PyObject *seq = PySequence_Fast(obj, "address_mode must be a mode or a sequence of 1 to 3 modes");
    if (seq == NULL)
        return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if (n < 1 || n > 3) {
        Py_DECREF(seq);
        PyErr_Format(PyExc_ValueError,
                     "address_mode: give 1 to 3 modes (x, y, z), got %zd", n);
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        if (named_value(PySequence_Fast_GET_ITEM(seq, i), what, address_names, 4, &v) < 0) {
            Py_DECREF(seq);
            return -1;
        }
        out[i] = (CUaddress_mode)v;
    }
    Py_DECREF(seq);
    return 0;
}

static int
parse_border(PyObject *obj, float out[4])
{
    out[0] = out[1] = out[2] = out[3] = 0.0f;
    if (obj == NULL || obj == Py_None)
        return 0;
    PyObject *seq = PySequence_Fast(obj, "border_color must be a sequence of 1 to 4 numbers");
    if (seq == NULL)
        return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if (n < 1 || n > 4) {
        Py_DECREF(seq);
        PyErr_Format(PyExc_ValueError, "border_color: give 1 to 4 numbers, got %zd", n);
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        double d = PyFloat_AsDouble(PySequence_Fast_GET_ITEM(seq, i));
        if (d == -1.0 && PyErr_Occurred()) {
            Py_DECREF(seq);
            return -1;
        }
        out[i] = (float)d;
    }
    Py_DECREF(seq);
    return 0;
}

static int
truth(PyObject *obj, int *out)
{
    *out = obj == NULL ? 0 : PyObject_IsTrue(obj);
    return *out < 0 ? -1 : 0;
}

#define TRSF_ALLOWED                                                                      \
    (CU_TRSF_READ_AS_INTEGER | CU_TRSF_NORMALIZED_COORDINATES | CU_TRSF_SRGB |              \
     CU_TRSF_DISABLE_TRILINEAR_OPTIMIZATION | CU_TRSF_SEAMLESS_CUBEMAP)

/* Fill `tex` from the options and check them against the data they will read. */
static int
fill_texture_desc(const tex_options *o, CUresourcetype restype, unsigned int format,
                  CUDA_TEXTURE_DESC *tex)
{
    memset(tex, 0, sizeof *tex);
    int filter = 0, normalized, srgb, as_integer = 1;
    unsigned int extra = 0;
    long long aniso = 0;
    if (parse_address_modes(o->address_mode, tex->addressMode) < 0 ||
        (o->filter_mode && o->filter_mode != Py_None &&
         named_value(o->filter_mode, "filter_mode", filter_names, 2, &filter) < 0) ||
        truth(o->normalized_coords, &normalized) < 0 || truth(o->srgb, &srgb) < 0 ||
        parse_border(o->border_color, tex->borderColor) < 0 ||
        (o->max_anisotropy && bc_arg_long(o->max_anisotropy, "max_anisotropy", 0, 16, &aniso) < 0) ||
        (o->flags && bc_arg_flags(o->flags, "flags", TRSF_ALLOWED, &extra) < 0))
        return -1;
    if (o->read_mode && o->read_mode != Py_None) {
        const char *s = PyUnicode_Check(o->read_mode) ? PyUnicode_AsUTF8(o->read_mode) : NULL;
        if (s != NULL && strcmp(s, "element") == 0)
            as_integer = 1;
        else if (s != NULL && strcmp(s, "normalized_float") == 0)
            as_integer = 0;
        else {
            if (!PyErr_Occurred())
                PyErr_Format(PyExc_ValueError,
                             "read_mode must be 'element' or 'normalized_float', not %R",
                             o->read_mode);
            return -1;
        }
        if (!as_integer && (extra & CU_TRSF_READ_AS_INTEGER)) {
            PyErr_SetString(PyExc_ValueError,
                            "read_mode='normalized_float' contradicts flags READ_AS_INTEGER");
            return -1;
        }
    }
    int is_float = format == CU_AD_FORMAT_FLOAT || format == CU_AD_FORMAT_HALF;
    int is_int32 = format == CU_AD_FORMAT_SIGNED_INT32 || format == CU_AD_FORMAT_UNSIGNED_INT32;
    if (!as_integer && is_float)
        as_integer = 1; /* the flag means nothing for float data: keep one spelling */
    if (!as_integer && is_int32) {
        PyErr_SetString(PyExc_ValueError,
                        "read_mode='normalized_float' is not available for 32-bit integer "
                        "formats (CUDA reads them as integers)");
        return -1;
    }
    if (restype == CU_RESOURCE_TYPE_LINEAR && (filter || normalized)) {
        PyErr_SetString(PyExc_ValueError,
                        "a linear-memory texture (from_linear) is read with tex1Dfetch: only "
                        "point filtering and integer indices; use an Array or from_pitch2d "
                        "for filtering or normalized coordinates");
        return -1;
    }
    if (filter == CU_TR_FILTER_MODE_LINEAR && !is_float && (as_integer || is_int32)) {
        PyErr_SetString(PyExc_ValueError,
                        "linear filtering of an integer format needs "
                        "read_mode='normalized_float' (8- and 16-bit formats only)");
        return -1;
    }
    if (!normalized && restype != CU_RESOURCE_TYPE_LINEAR) {
        for (int i = 0; i < 3; i++)
            if (tex->addressMode[i] == CU_TR_ADDRESS_MODE_WRAP ||
                tex->addressMode[i] == CU_TR_ADDRESS_MODE_MIRROR) {
                PyErr_Format(PyExc_ValueError,
                             "address_mode %s needs normalized_coords=True (CUDA supports "
                             "only clamp and border with unnormalized coordinates)",
                             address_names[tex->addressMode[i]]);
                return -1;
            }
    }
    tex->filterMode = (CUfilter_mode)filter;
    tex->flags = extra | (as_integer ? CU_TRSF_READ_AS_INTEGER : 0) |
                 (normalized ? CU_TRSF_NORMALIZED_COORDINATES : 0) | (srgb ? CU_TRSF_SRGB : 0);
    tex->maxAnisotropy = (unsigned int)aniso;
    return 0;
}

#define OPTION_KEYWORDS                                                                   \
    "address_mode", "filter_mode", "normalized_coords", "read_mode", "border_color", "srgb", \
        "max_anisotropy", "flags"
#define OPTION_FORMAT "$OOOOOOOO"
#define OPTION_POINTERS(o)                                                                \
    &(o).address_mode, &(o).filter_mode, &(o).normalized_coords, &(o).read_mode,            \
        &(o).border_color, &(o).srgb, &(o).max_anisotropy, &(o).flags

/* ------------------------------------------------------------- the objects */

static const char *
kind_name(bc_TexObject *t)
{
    return t->surface ? "SurfaceObject" : "TextureObject";
}

/* 0, or -1 with LogicError for a subclass's object whose __init__ never called
 * the base's. */
static int
texobj_ready(bc_State *st, bc_TexObject *t)
{
    if (t->closed >= 0)
        return 0;
    return bc_error_logic(st, "this %.100s was not initialised: its __init__ must call "
                              "%s.__init__(self, %s)", Py_TYPE(t)->tp_name, kind_name(t),
                          t->surface ? "array" : "resource, ...");
}

static int
texobj_usable(bc_State *st, bc_TexObject *t)
{
    if (t->closed)
        return t->closed < 0 ? texobj_ready(st, t)
                             : bc_error_logic(st, "this %s was closed", kind_name(t));
    return bc_context_check_alive(st, t->ctx, kind_name(t));
}

int
bc_texture_handle(bc_State *st, PyObject *obj, unsigned long long *out)
{
    PyTypeObject *tex = (PyTypeObject *)st->TextureObjectType;
    PyTypeObject *surf = (PyTypeObject *)st->SurfaceObjectType;
    /* exact types first, then subclasses */
    if (!PyObject_TypeCheck(obj, tex) && !PyObject_TypeCheck(obj, surf))
        return 0;
    bc_TexObject *t = (bc_TexObject *)obj;
    if (texobj_usable(st, t) < 0)
        return -1;
    *out = t->handle;
    return 1;
}

/* Destroy the handle (context entered) and stop counting as a user; the
 * driver's answer.  Drops nothing: the caller clears `resource`. */
static CUresult
texobj_release(bc_TexObject *t)
{
    if (t->closed)
        return CUDA_SUCCESS;
    t->closed = 1;
    if (t->array != NULL) {
        t->array->users--;
        t->array = NULL;
    }
    if (t->ctx == NULL || t->ctx->let_go || !bc_drv_ready)
        return CUDA_SUCCESS;
    int entered = bc_context_enter(t->ctx);
    if (entered < 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    CUresult rc = t->surface ? bc_drv.cuSurfObjectDestroy((CUsurfObject)t->handle)
                             : bc_drv.cuTexObjectDestroy((CUtexObject)t->handle);
    bc_context_leave(entered);
    return rc;
}

/* Create the handle with ctx entered: 0 with *handle, or -1. */
static int
texobj_handle_create(bc_State *st, int surface, bc_Context *ctx, const CUDA_RESOURCE_DESC *res,
                     const CUDA_TEXTURE_DESC *tex, unsigned long long *handle)
{
    int entered = bc_context_enter(ctx);
    if (entered < 0)
        return bc_error_logic(st, "could not make the resource's context current");
    CUresult rc;
    if (surface) {
        CUsurfObject h = 0;
        rc = bc_drv.cuSurfObjectCreate(&h, res);
        *handle = (unsigned long long)h;
    } else {
        CUtexObject h = 0;
        rc = bc_drv.cuTexObjectCreate(&h, res, tex, NULL);
        *handle = (unsigned long long)h;
    }
    bc_context_leave(entered);
    return bc_check(st, rc, surface ? "cuSurfObjectCreate" : "cuTexObjectCreate");
}

/* Set self over a new handle: new references to ctx and resource; counts itself
 * in array->users when array is given. */
static void
texobj_fill(bc_TexObject *self, int surface, unsigned long long handle, bc_Context *ctx,
            PyObject *resource, bc_Array *array, const CUDA_RESOURCE_DESC *res,
            const CUDA_TEXTURE_DESC *tex)
{
    self->handle = handle;
    self->ctx = (bc_Context *)Py_NewRef(ctx);
    self->resource = Py_NewRef(resource);
    self->array = array;
    if (array != NULL)
        array->users++;
    self->surface = surface;
    self->closed = 0;
    self->restype = res->resType;
    if (tex != NULL)
        self->tex = *tex;
}

/* Make an object of type tp (the base, or a subclass for from_linear/from_pitch2d
 * called on it: set up here, its __init__ not run, as Stream.from_handle):
 * create the handle with ctx entered; texobj_fill's references. */
static PyObject *
texobj_create(bc_State *st, PyTypeObject *tp, int surface, bc_Context *ctx, PyObject *resource,
              bc_Array *array, const CUDA_RESOURCE_DESC *res, const CUDA_TEXTURE_DESC *tex)
{
    unsigned long long handle = 0;
    if (texobj_handle_create(st, surface, ctx, res, tex, &handle) < 0)
        return NULL;
    /* tp_alloc: zeroed (a subclass's __slots__ and __dict__ too) and tracked */
    bc_TexObject *self = (bc_TexObject *)tp->tp_alloc(tp, 0);
    if (self == NULL) {
        int entered = bc_context_enter(ctx);
        if (surface)
            bc_drv.cuSurfObjectDestroy((CUsurfObject)handle);
        else
            bc_drv.cuTexObjectDestroy((CUtexObject)handle);
        bc_context_leave(entered);
        return NULL;
    }
    texobj_fill(self, surface, handle, ctx, resource, array, res, tex);
    return (PyObject *)self;
}

/* What TextureObject(resource, ...) and SurfaceObject(array) make, parsed and
 * checked: the handle is made in the array's context. */
typedef struct {
    PyObject *resource; /* borrowed from the arguments */
    bc_Array *array;
    CUDA_RESOURCE_DESC res;
    CUDA_TEXTURE_DESC tex;
} texobj_args;

/* An unset object of a subclass of TextureObject or SurfaceObject (closed -1):
 * the base's __init__ makes the handle. */
static PyObject *
texobj_alloc_unset(PyTypeObject *tp, int surface)
{
    bc_TexObject *self = (bc_TexObject *)tp->tp_alloc(tp, 0);
    if (self != NULL) {
        self->surface = surface;
        self->closed = -1;
    }
    return (PyObject *)self;
}

PyDoc_STRVAR(texture_doc,
"TextureObject(resource, *, address_mode='clamp', filter_mode='point', "
"normalized_coords=False, read_mode='element', border_color=(0, 0, 0, 0), srgb=False, "
"max_anisotropy=0, flags=0)\n--\n\n"
"A texture object (cuTexObjectCreate) reading the Array `resource`; see also\n"
"from_linear() and from_pitch2d() for device memory.  Pass it to a kernel taking\n"
"a cudaTextureObject_t (int(t) is the 64-bit handle).\n"
"\n"
"address_mode: one mode for every dimension or a sequence of 1-3 (x, y, z; the\n"
"  rest clamp); each an address_mode member, 0-3 or 'wrap'/'clamp'/'mirror'/\n"
"  'border'.  wrap and mirror need normalized_coords=True.\n"
"filter_mode: filter_mode.POINT/LINEAR or 'point'/'linear'.  Linear filtering of\n"
"  8/16-bit integer data needs read_mode='normalized_float'.\n"
"read_mode: 'element' (the element type: tex2D<int>, tex2D<float>...) or\n"
"  'normalized_float' (8/16-bit integers read as floats in [0, 1] or [-1, 1]).\n"
"border_color: 1-4 floats used by 'border' addressing.\n"
"flags: extra trsf_flags bits (DISABLE_TRILINEAR_OPTIMIZATION, SEAMLESS_CUBEMAP).\n"
"\n"
"The texture keeps `resource` alive, and Array.free() raises LogicError until the\n"
"texture is closed.  close() is idempotent; mipmapped arrays and resource views\n"
"are not supported.");

/* The resource of a texture or surface object over CUDA array `a` (given as `resource`). */
static void
args_over_array(texobj_args *out, PyObject *resource, bc_Array *a)
{
    out->resource = resource;
    out->array = a;
    memset(&out->res, 0, sizeof out->res);
    out->res.resType = CU_RESOURCE_TYPE_ARRAY;
    out->res.res.array.hArray = a->handle;
}

static int
texture_args(bc_State *st, PyObject *args, PyObject *kwargs, texobj_args *out)
{
    static char *kwlist[] = {"resource", OPTION_KEYWORDS, NULL};
    PyObject *resource;
    tex_options o = {0};
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|" OPTION_FORMAT ":TextureObject", kwlist,
                                     &resource, OPTION_POINTERS(o)))
        return -1;
    if (!PyObject_TypeCheck(resource, (PyTypeObject *)st->ArrayType)) {
        PyErr_Format(PyExc_TypeError,
                     "TextureObject() reads an Array, not %.100s; use "
                     "TextureObject.from_linear() or from_pitch2d() for device memory",
                     Py_TYPE(resource)->tp_name);
        return -1;
    }
    bc_Array *a = bc_array_convert(st, resource);
    if (a == NULL || fill_texture_desc(&o, CU_RESOURCE_TYPE_ARRAY, a->desc.Format, &out->tex) < 0)
        return -1;
    /* the options' __bool__/__index__ run Python code that may have freed the array */
    if (bc_array_convert(st, resource) == NULL)
        return -1;
    args_over_array(out, resource, a);
    return 0;
}

/* Device pointer and format arguments common to from_linear and from_pitch2d. */
static int
memory_args(bc_State *st, PyObject *mem, PyObject *fmt, PyObject *nc, const char *fn,
            CUdeviceptr *ptr, size_t *avail, unsigned int *format, unsigned int *channels)
{
    long long f, n = 1;
    if (bc_pointer_convert(st, mem, ptr, avail) < 0)
        return -1;
    if (bc_arg_long(fmt, "format", 0, 0xFFFFFFFFLL, &f) < 0 ||
        (nc && bc_arg_long(nc, "num_channels", 0, 0xFFFFFFFFLL, &n) < 0))
        return -1;
    *format = (unsigned int)f;
    *channels = (unsigned int)n;
    return bc_array_check_format(*format, *channels, fn);
}

/* The TextureObject over the device memory of `mem` that `res` describes (LINEAR or
 * PITCH2D) with options o, made in the current context; `mem` is kept alive. */
static PyObject *
memory_texture(bc_State *st, PyObject *cls, PyObject *mem, const tex_options *o,
               const CUDA_RESOURCE_DESC *res, unsigned int format)
{
    CUDA_TEXTURE_DESC tex;
    if (fill_texture_desc(o, res->resType, format, &tex) < 0)
        return NULL;
    bc_Context *ctx = bc_context_current(st);
    if (ctx == NULL)
        return NULL;
    PyObject *out = texobj_create(st, (PyTypeObject *)cls, 0, ctx, mem, NULL, res, &tex);
    Py_DECREF(ctx);
    return out;
}

PyDoc_STRVAR(from_linear_doc,
"from_linear($type, ptr, nbytes, format, num_channels=1, *, address_mode='clamp', filter_mode='point', "
"normalized_coords=False, read_mode='element', border_color=(0, 0, 0, 0), srgb=False, "
"max_anisotropy=0, flags=0)\n--\n\n"
"A TextureObject over `nbytes` of linear device memory at `ptr` (a\n"
"DeviceAllocation, GPUArray-like object or int pointer), read in kernels with\n"
"tex1Dfetch<T>(t, i).  Point sampling and integer indices only.  The object `ptr`\n"
"is kept alive; freeing it explicitly while the texture is open is an error of\n"
"the caller.  `ptr` must be aligned to the device's TEXTURE_ALIGNMENT.");

static PyObject *
texture_from_linear(PyObject *cls, PyObject *args, PyObject *kwargs)
{
    bc_State *st = (bc_State *)bc_state_of_type((PyTypeObject *)cls);
    static char *kwlist[] = {"ptr", "nbytes", "format", "num_channels", OPTION_KEYWORDS, NULL};
    PyObject *mem, *nbytes_obj, *fmt, *nc = NULL;
    tex_options o = {0};
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOO|O" OPTION_FORMAT ":from_linear", kwlist,
                                     &mem, &nbytes_obj, &fmt, &nc, OPTION_POINTERS(o)))
        return NULL;
    CUdeviceptr ptr;
    size_t avail, nbytes;
    unsigned int format, channels;
    if (memory_args(st, mem, fmt, nc, "from_linear()", &ptr, &avail, &format, &channels) < 0 ||
        bc_arg_size(nbytes_obj, "from_linear(): nbytes", &nbytes) < 0)
        return NULL;
    size_t elem = bc_array_format_size(format) * channels;
    if (nbytes == 0 || nbytes % elem != 0) {
        PyErr_Format(PyExc_ValueError,
                     "from_linear(): nbytes must be a positive multiple of the element size "
                     "(%zu), got %zu",
                     elem, nbytes);
        return NULL;
    }
    if (nbytes > avail) {
        PyErr_Format(PyExc_ValueError,
                     "from_linear(): nbytes %zu exceeds the %zu bytes of the memory", nbytes,
                     avail);
        return NULL;
    }
    CUDA_RESOURCE_DESC res;
    memset(&res, 0, sizeof res);
    res.resType = CU_RESOURCE_TYPE_LINEAR;
    res.res.linear.devPtr = ptr;
    res.res.linear.format = (CUarray_format)format;
    res.res.linear.numChannels = channels;
    res.res.linear.sizeInBytes = nbytes;
    return memory_texture(st, cls, mem, &o, &res, format);
}

PyDoc_STRVAR(from_pitch2d_doc,
"from_pitch2d($type, ptr, width, height, pitch, format, num_channels=1, *, address_mode='clamp', filter_mode='point', "
"normalized_coords=False, read_mode='element', border_color=(0, 0, 0, 0), srgb=False, "
"max_anisotropy=0, flags=0)\n--\n\n"
"A TextureObject over a 2D image in device memory: `height` rows of `width`\n"
"elements, `pitch` bytes apart (a multiple of the device's\n"
"TEXTURE_PITCH_ALIGNMENT), read with tex2D<T>(t, x, y).  Options as for\n"
"TextureObject().  The object `ptr` is kept alive.");

static PyObject *
texture_from_pitch2d(PyObject *cls, PyObject *args, PyObject *kwargs)
{
    bc_State *st = (bc_State *)bc_state_of_type((PyTypeObject *)cls);
    static char *kwlist[] = {"ptr", "width", "height", "pitch", "format", "num_channels",
                             OPTION_KEYWORDS, NULL};
    PyObject *mem, *w_obj, *h_obj, *p_obj, *fmt, *nc = NULL;
    tex_options o = {0};
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOOOO|O" OPTION_FORMAT ":from_pitch2d",
                                     kwlist, &mem, &w_obj, &h_obj, &p_obj, &fmt, &nc,
                                     OPTION_POINTERS(o)))
        return NULL;
    CUdeviceptr ptr;
    size_t avail, width, height, pitch, row, need;
    unsigned int format, channels;
    if (memory_args(st, mem, fmt, nc, "from_pitch2d()", &ptr, &avail, &format, &channels) < 0 ||
        bc_arg_size(w_obj, "from_pitch2d(): width", &width) < 0 ||
        bc_arg_size(h_obj, "from_pitch2d(): height", &height) < 0 ||
        bc_arg_size(p_obj, "from_pitch2d(): pitch", &pitch) < 0)
        return NULL;
    if (width == 0 || height == 0) {
        PyErr_SetString(PyExc_ValueError, "from_pitch2d(): width and height must be at least 1");
        return NULL;
    }
    if (__builtin_mul_overflow(width, bc_array_format_size(format) * channels, &row) ||
        pitch < row) {
        PyErr_Format(PyExc_ValueError,
                     "from_pitch2d(): pitch %zu is smaller than a row of %zu elements", pitch,
                     width);
        return NULL;
    }
    if (__builtin_mul_overflow(pitch, height - 1, &need) ||
        __builtin_add_overflow(need, row, &need) || need > avail) {
        PyErr_Format(PyExc_ValueError,
                     "from_pitch2d(): the image needs %zu bytes, the memory holds %zu", need,
                     avail);
        return NULL;
    }
    CUDA_RESOURCE_DESC res;
    memset(&res, 0, sizeof res);
    res.resType = CU_RESOURCE_TYPE_PITCH2D;
    res.res.pitch2D.devPtr = ptr;
    res.res.pitch2D.format = (CUarray_format)format;
    res.res.pitch2D.numChannels = channels;
    res.res.pitch2D.width = width;
    res.res.pitch2D.height = height;
    res.res.pitch2D.pitchInBytes = pitch;
    return memory_texture(st, cls, mem, &o, &res, format);
}

PyDoc_STRVAR(surface_doc,
"SurfaceObject(array)\n--\n\n"
"A surface object (cuSurfObjectCreate) over an Array made with\n"
"array3d_flags.SURFACE_LDST, for surf1Dread/surf2Dwrite/... in kernels taking a\n"
"cudaSurfaceObject_t (x offsets are in bytes).  Keeps the array alive, and\n"
"Array.free() raises LogicError until it is closed.");

static int
surface_args(bc_State *st, PyObject *args, PyObject *kwargs, texobj_args *out)
{
    static char *kwlist[] = {"array", NULL};
    PyObject *resource;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O:SurfaceObject", kwlist, &resource))
        return -1;
    bc_Array *a = bc_array_convert(st, resource);
    if (a == NULL)
        return -1;
    if (!(a->desc.Flags & CUDA_ARRAY3D_SURFACE_LDST)) {
        PyErr_SetString(PyExc_ValueError,
                        "SurfaceObject() needs an Array made with array3d_flags.SURFACE_LDST "
                        "(np_to_array(..., allow_surface_bind=True) makes one)");
        return -1;
    }
    args_over_array(out, resource, a);
    return 0;
}

/* __new__ of TextureObject (surface 0) and SurfaceObject (1): TextureObject(resource,
 * ...) and SurfaceObject(array) make the handle here.  A subclass (PyCUDA's classes
 * are built in __init__, so its own __init__ may take other arguments) gets an unset
 * object, and the base's __init__ (texobj_init) makes the handle. */
static PyObject *
texobj_new(PyTypeObject *tp, PyObject *args, PyObject *kwargs, int surface)
{
    bc_State *st = bc_state_of_type(tp);
    if (st == NULL)
        return NULL;
    if (tp != (PyTypeObject *)(surface ? st->SurfaceObjectType : st->TextureObjectType))
        return texobj_alloc_unset(tp, surface);
    texobj_args a;
    if ((surface ? surface_args : texture_args)(st, args, kwargs, &a) < 0)
        return NULL;
    return texobj_create(st, tp, surface, a.array->ctx, a.resource, a.array, &a.res,
                         surface ? NULL : &a.tex);
}

static PyObject *
texture_new(PyTypeObject *tp, PyObject *args, PyObject *kwargs)
{
    return texobj_new(tp, args, kwargs, 0);
}

static PyObject *
surface_new(PyTypeObject *tp, PyObject *args, PyObject *kwargs)
{
    return texobj_new(tp, args, kwargs, 1);
}

/* TextureObject.__init__ and SurfaceObject.__init__: a no-op for the base types,
 * the real construction for a subclass's object. */
static int
texobj_init(PyObject *self, PyObject *args, PyObject *kwargs)
{
    bc_State *st = bc_state_of(self);
    if (Py_IS_TYPE(self, (PyTypeObject *)st->TextureObjectType) ||
        Py_IS_TYPE(self, (PyTypeObject *)st->SurfaceObjectType))
        return 0; /* made by __new__ from the same arguments */
    bc_TexObject *t = (bc_TexObject *)self;
    if (t->closed >= 0) {
        PyErr_Format(PyExc_TypeError, "%s.__init__() called twice on this %.100s", kind_name(t),
                     Py_TYPE(self)->tp_name);
        return -1;
    }
    texobj_args a;
    if ((t->surface ? surface_args : texture_args)(st, args, kwargs, &a) < 0)
        return -1;
    const CUDA_TEXTURE_DESC *tex = t->surface ? NULL : &a.tex;
    unsigned long long handle = 0;
    if (texobj_handle_create(st, t->surface, a.array->ctx, &a.res, tex, &handle) < 0)
        return -1;
    texobj_fill(t, t->surface, handle, a.array->ctx, a.resource, a.array, &a.res, tex);
    return 0;
}

static void
texobj_dealloc(bc_TexObject *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    if (self->weakreflist != NULL)
        PyObject_ClearWeakRefs((PyObject *)self);
    if (!self->closed)
        bc_error_in_destructor(texobj_release(self),
                               self->surface ? "cuSurfObjectDestroy" : "cuTexObjectDestroy",
                               (PyObject *)self);
    Py_CLEAR(self->resource);
    Py_CLEAR(self->ctx);
    tp->tp_free(self);
    Py_DECREF(tp);
}

static int
texobj_traverse(bc_TexObject *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(self->ctx);
    Py_VISIT(self->resource);
    return 0;
}

PyDoc_STRVAR(close_doc,
"close($self)\n--\n\n"
"Destroy the handle now (idempotent) and stop holding the resource; later uses\n"
"raise LogicError.  Make sure no running kernel still uses it.");

static PyObject *
texobj_close(bc_TexObject *self, PyObject *Py_UNUSED(ignored))
{
    bc_State *st = bc_state_of((PyObject *)self);
    CUresult rc = texobj_release(self);
    Py_CLEAR(self->resource);
    if (bc_check(st, rc, self->surface ? "cuSurfObjectDestroy" : "cuTexObjectDestroy") < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *
texobj_enter(PyObject *self, PyObject *Py_UNUSED(ignored))
{
    return Py_NewRef(self);
}

static PyObject *
texobj_exit(bc_TexObject *self, PyObject *Py_UNUSED(args))
{
    return texobj_close(self, NULL);
}

static PyObject *
texobj_int(bc_TexObject *self)
{
    if (texobj_usable(bc_state_of((PyObject *)self), self) < 0)
        return NULL;
    return PyLong_FromUnsignedLongLong(self->handle);
}

static PyObject *
texobj_get_handle(bc_TexObject *self, void *Py_UNUSED(c))
{
    return texobj_int(self);
}

static PyObject *
texobj_get_resource(bc_TexObject *self, void *Py_UNUSED(c))
{
    return Py_NewRef(self->resource ? self->resource : Py_None);
}

static PyObject *
texobj_get_context(bc_TexObject *self, void *Py_UNUSED(c))
{
    return Py_NewRef(self->ctx ? (PyObject *)self->ctx : Py_None);
}

static PyObject *
texobj_get_closed(bc_TexObject *self, void *Py_UNUSED(c))
{
    return PyBool_FromLong(self->closed > 0);
}

static PyObject *
texture_get_address_mode(bc_TexObject *self, void *Py_UNUSED(c))
{
    bc_State *st = bc_state_of((PyObject *)self);
    if (texobj_ready(st, self) < 0)
        return NULL;
    PyObject *t = PyTuple_New(3);
    for (int i = 0; t && i < 3; i++) {
        PyObject *v = bc_driver_enum(st, "address_mode", (unsigned long)self->tex.addressMode[i]);
        if (v == NULL)
            Py_CLEAR(t);
        else
            PyTuple_SET_ITEM(t, i, v);
    }
    return t;
}

static PyObject *
texture_get_filter_mode(bc_TexObject *self, void *Py_UNUSED(c))
{
    if (texobj_ready(bc_state_of((PyObject *)self), self) < 0)
        return NULL;
    return bc_driver_enum(bc_state_of((PyObject *)self), "filter_mode",
                       (unsigned long)self->tex.filterMode);
}

static PyObject *
texture_get_normalized(bc_TexObject *self, void *Py_UNUSED(c))
{
    if (texobj_ready(bc_state_of((PyObject *)self), self) < 0)
        return NULL;
    return PyBool_FromLong((self->tex.flags & CU_TRSF_NORMALIZED_COORDINATES) != 0);
}

static PyObject *
texture_get_read_mode(bc_TexObject *self, void *Py_UNUSED(c))
{
    if (texobj_ready(bc_state_of((PyObject *)self), self) < 0)
        return NULL;
    return PyUnicode_FromString((self->tex.flags & CU_TRSF_READ_AS_INTEGER) ? "element"
                                                                            : "normalized_float");
}

static PyObject *
texture_get_flags(bc_TexObject *self, void *Py_UNUSED(c))
{
    if (texobj_ready(bc_state_of((PyObject *)self), self) < 0)
        return NULL;
    return bc_driver_enum(bc_state_of((PyObject *)self), "trsf_flags", self->tex.flags);
}

static PyObject *
texobj_repr(bc_TexObject *self)
{
    if (self->closed < 0)
        return PyUnicode_FromFormat("<barecuda.driver.%s (not initialised)>", kind_name(self));
    char buf[32]; /* PyUnicode_FromFormat has no %llx before Python 3.12 */
    snprintf(buf, sizeof buf, "0x%llx", self->handle);
    return PyUnicode_FromFormat("<barecuda.driver.%s %s%s>", kind_name(self), buf,
                                self->closed ? ", closed" : "");
}

static PyMethodDef texture_methods[] = {
    {"close", (PyCFunction)texobj_close, METH_NOARGS, close_doc},
    {"__enter__", texobj_enter, METH_NOARGS, "__enter__($self)\n--\n\nReturn self."},
    {"__exit__", (PyCFunction)texobj_exit, METH_VARARGS,
     "__exit__($self, *exc_info)\n--\n\nclose() the object."},
    {"from_linear", (PyCFunction)(void (*)(void))texture_from_linear,
     METH_VARARGS | METH_KEYWORDS | METH_CLASS, from_linear_doc},
    {"from_pitch2d", (PyCFunction)(void (*)(void))texture_from_pitch2d,
     METH_VARARGS | METH_KEYWORDS | METH_CLASS, from_pitch2d_doc},
    {NULL, NULL, 0, NULL},
};

static PyMethodDef surface_methods[] = {
    {"close", (PyCFunction)texobj_close, METH_NOARGS, close_doc},
    {"__enter__", texobj_enter, METH_NOARGS, "__enter__($self)\n--\n\nReturn self."},
    {"__exit__", (PyCFunction)texobj_exit, METH_VARARGS,
     "__exit__($self, *exc_info)\n--\n\nclose() the object."},
    {NULL, NULL, 0, NULL},
};

#define TEXOBJ_COMMON_GETSET                                                               \
    {"handle", (getter)texobj_get_handle, NULL, "The 64-bit handle (LogicError once closed).", \
     NULL},                                                                                \
    {"resource", (getter)texobj_get_resource, NULL,                                        \
     "The Array or memory object read (None once closed).", NULL},                         \
    {"context", (getter)texobj_get_context, NULL, "The Context of the object.", NULL},      \
    {"closed", (getter)texobj_get_closed, NULL, "Whether close() was called.", NULL},         \
    {"_kernel_arg_handle", (getter)texobj_get_handle, NULL,                                \
     "The handle, for kernel-argument packing.", NULL}

static PyGetSetDef texture_getset[] = {
    TEXOBJ_COMMON_GETSET,
    {"address_mode", (getter)texture_get_address_mode, NULL, "(x, y, z) address modes.", NULL},
    {"filter_mode", (getter)texture_get_filter_mode, NULL, "The filter mode.", NULL},
    {"normalized_coords", (getter)texture_get_normalized, NULL,
     "Whether coordinates are normalized to [0, 1).", NULL},
    {"read_mode", (getter)texture_get_read_mode, NULL,
     "'element' or 'normalized_float'.", NULL},
    {"flags", (getter)texture_get_flags, NULL, "The trsf_flags given to the driver.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyGetSetDef surface_getset[] = {
    TEXOBJ_COMMON_GETSET,
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMemberDef texobj_members[] = {
    {"__weaklistoffset__", T_PYSSIZET, offsetof(bc_TexObject, weakreflist), READONLY, NULL},
    {NULL, 0, 0, 0, NULL},
};

static PyType_Slot texture_slots[] = {
    {Py_tp_new, texture_new},
    {Py_tp_init, texobj_init},
    {Py_tp_dealloc, texobj_dealloc},
    {Py_tp_traverse, texobj_traverse},
    {Py_tp_repr, texobj_repr},
    {Py_nb_int, texobj_int},
    {Py_nb_index, texobj_int},
    {Py_tp_methods, texture_methods},
    {Py_tp_getset, texture_getset},
    {Py_tp_members, texobj_members},
    {Py_tp_doc, (void *)texture_doc},
    {0, NULL},
};

static PyType_Slot surface_slots[] = {
    {Py_tp_new, surface_new},
    {Py_tp_init, texobj_init},
    {Py_tp_dealloc, texobj_dealloc},
    {Py_tp_traverse, texobj_traverse},
    {Py_tp_repr, texobj_repr},
    {Py_nb_int, texobj_int},
    {Py_nb_index, texobj_int},
    {Py_tp_methods, surface_methods},
    {Py_tp_getset, surface_getset},
    {Py_tp_members, texobj_members},
    {Py_tp_doc, (void *)surface_doc},
    {0, NULL},
};

static PyType_Spec texture_spec = {
    .name = "barecuda.driver.TextureObject",
    .basicsize = sizeof(bc_TexObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE | Py_TPFLAGS_HAVE_GC |
             Py_TPFLAGS_BASETYPE,
    .slots = texture_slots,
};

static PyType_Spec surface_spec = {
    .name = "barecuda.driver.SurfaceObject",
    .basicsize = sizeof(bc_TexObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE | Py_TPFLAGS_HAVE_GC |
             Py_TPFLAGS_BASETYPE,
    .slots = surface_slots,
};

int
bc_texture_setup(PyObject *m, bc_State *st)
{
    if (bc_add_type(m, &texture_spec, NULL, &st->TextureObjectType) < 0)
        return -1;
    return bc_add_type(m, &surface_spec, NULL, &st->SurfaceObjectType);
}
