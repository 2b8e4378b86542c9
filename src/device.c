/* SPDX-License-Identifier: MIT */
/* Device: one CUdevice, found by ordinal or PCI bus id; and the driver's version
 * (get_driver_version).  Above src/context.c on its floor: a Device makes and
 * resets contexts, while a Context names its device through the inline
 * bc_device_new of context.h.
 *
 * Attributes are read with get_attribute(device_attribute.X), all at once with
 * get_attributes(), or as lower-case shortcuts (dev.multiprocessor_count) that
 * fall back to the header's CU_DEVICE_ATTRIBUTE_* table. */
#include "barecuda/context.h"
#include "barecuda/argparse.h"
#include "barecuda/error.h"
#include "barecuda/loader.h"
#include "bc_tables.h"

#include <ctype.h>

int
bc_device_of(bc_State *st, PyObject *obj, CUdevice *out)
{
    if (obj == NULL || obj == Py_None) {
        bc_Context *ctx = bc_context_current(st);
        if (ctx == NULL)
            return -1;
        *out = ctx->device;
        Py_DECREF(ctx);
        return 0;
    }
    if (PyObject_TypeCheck(obj, (PyTypeObject *)st->DeviceType)) {
        *out = ((bc_Device *)obj)->handle;
        return 0;
    }
    long long ordinal;
    if (bc_arg_long(obj, "device", 0, 1 << 20, &ordinal) < 0)
        return -1;
    BC_REQUIRE_DRIVER(st, -1);
    return bc_check(st, bc_drv.cuDeviceGet(out, (int)ordinal), "cuDeviceGet");
}

/* The CUdevice that Device(ordinal) names (0), or -1 with an exception. */
static int
device_resolve(bc_State *st, PyObject *args, PyObject *kwargs, CUdevice *out)
{
    PyObject *which;
    static char *kwlist[] = {"ordinal", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O:Device", kwlist, &which))
        return -1;
    BC_REQUIRE_DRIVER(st, -1);
    CUdevice dev;
    if (PyUnicode_Check(which)) {
        const char *bus = PyUnicode_AsUTF8(which);
        if (bus == NULL)
            return -1;
        CUresult rc = bc_drv.cuDeviceGetByPCIBusId(&dev, bus);
        if (rc != CUDA_SUCCESS) {
            if (rc == CUDA_ERROR_INVALID_VALUE || rc == CUDA_ERROR_INVALID_DEVICE)
                return bc_error_logic(st, "Device(%R): no device has this PCI bus id", which),
                       -1;
            return bc_error_raise(st, rc, "cuDeviceGetByPCIBusId"), -1;
        }
        *out = dev;
        return 0;
    }
    if (!PyLong_Check(which) || PyBool_Check(which)) {
        PyErr_Format(PyExc_TypeError,
                     "Device() takes an int ordinal or a PCI bus id string, not %.100s",
                     Py_TYPE(which)->tp_name);
        return -1;
    }
    int count = 0;
    if (bc_check(st, bc_drv.cuDeviceGetCount(&count), "cuDeviceGetCount") < 0)
        return -1;
    int overflow = 0;
    long ordinal = PyLong_AsLongAndOverflow(which, &overflow);
    if (ordinal == -1 && PyErr_Occurred())
        return -1;
    if (overflow || ordinal < 0 || ordinal >= count)
        return bc_error_logic(st, "Device(%R): ordinal out of range (%d device%s present)",
                              which, count, count == 1 ? "" : "s"),
               -1;
    if (bc_check(st, bc_drv.cuDeviceGet(&dev, (int)ordinal), "cuDeviceGet") < 0)
        return -1;
    *out = dev;
    return 0;
}

/* Device(ordinal) builds the device in __new__.  A subclass (PyCUDA's classes
 * are Boost.Python ones, built in __init__, so a subclass's own __init__ may take
 * other arguments and call Device.__init__(self, ordinal)) gets an unset device
 * from __new__, whatever the arguments, and Device.__init__ sets it. */
static PyObject *
device_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    bc_State *st = bc_state_of_type(type);
    if (st == NULL)
        return NULL;
    if (type != (PyTypeObject *)st->DeviceType) {
        bc_Device *self = (bc_Device *)type->tp_alloc(type, 0);
        if (self != NULL)
            self->handle = BC_DEVICE_UNSET;
        return (PyObject *)self;
    }
    CUdevice dev;
    if (device_resolve(st, args, kwargs, &dev) < 0)
        return NULL;
    return bc_device_new(st, dev);
}

static int
device_init(PyObject *self, PyObject *args, PyObject *kwargs)
{
    bc_State *st = bc_state_of(self);
    if (Py_IS_TYPE(self, (PyTypeObject *)st->DeviceType))
        return 0; /* built by __new__ from the same arguments */
    bc_Device *d = (bc_Device *)self;
    if (d->handle != BC_DEVICE_UNSET) {
        PyErr_Format(PyExc_TypeError, "Device.__init__() called twice on this %.100s",
                     Py_TYPE(self)->tp_name);
        return -1;
    }
    return device_resolve(st, args, kwargs, &d->handle);
}

/* 0, or -1 with LogicError for a subclass's device whose __init__ never called
 * Device.__init__. */
static int
device_ready(bc_State *st, bc_Device *self)
{
    if (self->handle != BC_DEVICE_UNSET)
        return 0;
    bc_error_logic(st, "this %.100s was not initialised: its __init__ must call "
                       "Device.__init__(self, ordinal)", Py_TYPE(self)->tp_name);
    return -1;
}

static void
device_dealloc(bc_Device *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    Py_CLEAR(self->dict);
    tp->tp_free(self);
    Py_DECREF(tp);
}

static int
device_traverse(bc_Device *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(self->dict);
    return 0;
}

static int
device_clear(bc_Device *self)
{
    Py_CLEAR(self->dict);
    return 0;
}

static PyMemberDef device_members[] = {
    {"__dictoffset__", T_PYSSIZET, offsetof(bc_Device, dict), READONLY, NULL},
    {NULL, 0, 0, 0, NULL},
};

static PyObject *
device_repr(bc_Device *self)
{
    char name[256] = "?";
    if (bc_drv_ready && bc_drv.cuDeviceGetName(name, sizeof name, self->handle) != CUDA_SUCCESS)
        strcpy(name, "?");
    return PyUnicode_FromFormat("<barecuda.driver.Device %d '%s'>", (int)self->handle, name);
}

static Py_hash_t
device_hash(bc_Device *self)
{
    return (Py_hash_t)self->handle + 0x5bd1e995;
}

static PyObject *
device_richcompare(PyObject *a, PyObject *b, int op)
{
    /* PyCUDA compares handles: a subclass's device equals the base's */
    bc_State *st = bc_state_of(a);
    if (!PyObject_TypeCheck(b, (PyTypeObject *)st->DeviceType) || (op != Py_EQ && op != Py_NE))
        Py_RETURN_NOTIMPLEMENTED;
    int eq = ((bc_Device *)a)->handle == ((bc_Device *)b)->handle;
    return PyBool_FromLong(op == Py_EQ ? eq : !eq);
}

static int
get_attribute(bc_State *st, bc_Device *self, int attr, int *value)
{
    if (device_ready(st, self) < 0)
        return -1;
    return bc_check(st, bc_drv.cuDeviceGetAttribute(value, (CUdevice_attribute)attr, self->handle),
                    "cuDeviceGetAttribute");
}

PyDoc_STRVAR(count_doc,
"count($type)\n--\n\n"
"Number of CUDA devices visible to this process (0 raises nothing: it returns 0\n"
"only when the driver loads and reports no device).");

static PyObject *
device_count(PyObject *type, PyObject *Py_UNUSED(ignored))
{
    bc_State *st = bc_state_of_type((PyTypeObject *)type);
    BC_REQUIRE_DRIVER(st, NULL);
    int n = 0;
    if (bc_check(st, bc_drv.cuDeviceGetCount(&n), "cuDeviceGetCount") < 0)
        return NULL;
    return PyLong_FromLong(n);
}

PyDoc_STRVAR(name_doc, "name($self)\n--\n\nThe device's marketing name.");

static PyObject *
device_name(bc_Device *self, PyObject *Py_UNUSED(ignored))
{
    bc_State *st = bc_state_of((PyObject *)self);
    if (device_ready(st, self) < 0)
        return NULL;
    char name[256];
    if (bc_check(st, bc_drv.cuDeviceGetName(name, sizeof name, self->handle), "cuDeviceGetName") < 0)
        return NULL;
    return PyUnicode_FromString(name);
}

PyDoc_STRVAR(cc_doc, "compute_capability($self)\n--\n\n(major, minor), e.g. (9, 0) for Hopper.");

static PyObject *
device_compute_capability(bc_Device *self, PyObject *Py_UNUSED(ignored))
{
    bc_State *st = bc_state_of((PyObject *)self);
    if (device_ready(st, self) < 0)
        return NULL;
    int major, minor;
    if (get_attribute(st, self, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, &major) < 0 ||
        get_attribute(st, self, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, &minor) < 0)
        return NULL;
    return Py_BuildValue("(ii)", major, minor);
}

PyDoc_STRVAR(total_memory_doc, "total_memory($self)\n--\n\nGlobal memory size in bytes.");

static PyObject *
device_total_memory(bc_Device *self, PyObject *Py_UNUSED(ignored))
{
    bc_State *st = bc_state_of((PyObject *)self);
    if (device_ready(st, self) < 0)
        return NULL;
    size_t bytes;
    if (bc_check(st, bc_drv.cuDeviceTotalMem(&bytes, self->handle), "cuDeviceTotalMem") < 0)
        return NULL;
    return PyLong_FromSize_t(bytes);
}

PyDoc_STRVAR(pci_bus_id_doc, "pci_bus_id($self)\n--\n\nPCI id as 'domain:bus:device.function'.");

static PyObject *
device_pci_bus_id(bc_Device *self, PyObject *Py_UNUSED(ignored))
{
    bc_State *st = bc_state_of((PyObject *)self);
    if (device_ready(st, self) < 0)
        return NULL;
    char bus[64];
    if (bc_check(st, bc_drv.cuDeviceGetPCIBusId(bus, sizeof bus, self->handle),
                 "cuDeviceGetPCIBusId") < 0)
        return NULL;
    return PyUnicode_FromString(bus);
}

static PyObject *
device_uuid(bc_Device *self, void *Py_UNUSED(closure))
{
    bc_State *st = bc_state_of((PyObject *)self);
    if (device_ready(st, self) < 0)
        return NULL;
    CUuuid id;
    if (bc_check(st, bc_drv.cuDeviceGetUuid(&id, self->handle), "cuDeviceGetUuid") < 0)
        return NULL;
    PyObject *uuid_mod = PyImport_ImportModule("uuid");
    if (uuid_mod == NULL)
        return NULL;
    PyObject *bytes = PyBytes_FromStringAndSize(id.bytes, sizeof id.bytes);
    PyObject *out = NULL;
    if (bytes != NULL) {
        PyObject *cls = PyObject_GetAttrString(uuid_mod, "UUID");
        if (cls != NULL) {
            PyObject *kw = Py_BuildValue("{s:O}", "bytes", bytes);
            PyObject *noargs = PyTuple_New(0);
            if (kw && noargs)
                out = PyObject_Call(cls, noargs, kw);
            Py_XDECREF(kw);
            Py_XDECREF(noargs);
            Py_DECREF(cls);
        }
        Py_DECREF(bytes);
    }
    Py_DECREF(uuid_mod);
    return out;
}

static PyObject *
device_handle(bc_Device *self, void *Py_UNUSED(closure))
{
    return PyLong_FromLong((long)self->handle);
}

static int
attribute_arg(PyObject *arg, int *attr)
{
    if (!PyLong_Check(arg)) {
        PyErr_Format(PyExc_TypeError, "attribute must be a device_attribute (int), not %.100s",
                     Py_TYPE(arg)->tp_name);
        return -1;
    }
    int overflow = 0;
    long v = PyLong_AsLongAndOverflow(arg, &overflow);
    if (v == -1 && PyErr_Occurred())
        return -1;
    for (const bc_enum_member *e = bc_enum_device_attribute; e->name && !overflow; e++)
        if (e->value == v && strcmp(e->name, "MAX") != 0) {
            *attr = (int)v;
            return 0;
        }
    PyErr_Format(PyExc_ValueError, "%R is not a device_attribute", arg);
    return -1;
}

PyDoc_STRVAR(get_attribute_doc,
"get_attribute($self, attr)\n--\n\n"
"Value of device_attribute `attr` (an int).  ValueError for an unknown attribute.");

static PyObject *
device_get_attribute(bc_Device *self, PyObject *arg)
{
    bc_State *st = bc_state_of((PyObject *)self);
    if (device_ready(st, self) < 0)
        return NULL;
    int attr, value;
    if (attribute_arg(arg, &attr) < 0 || get_attribute(st, self, attr, &value) < 0)
        return NULL;
    return PyLong_FromLong(value);
}

PyDoc_STRVAR(get_attributes_doc,
"get_attributes($self)\n--\n\n"
"{device_attribute: value} for every attribute this driver reports for the device\n"
"(attributes of the headers that the driver rejects are left out).");

static PyObject *
device_get_attributes(bc_Device *self, PyObject *Py_UNUSED(ignored))
{
    bc_State *st = bc_state_of((PyObject *)self);
    if (device_ready(st, self) < 0)
        return NULL;
    /* Keys are device_attribute members when barecuda.driver registered its enum
     * factory (PyCUDA's keys, whose str() is the name), plain ints otherwise. */
    PyObject *enum_cls = bc_enum_class(st, "device_attribute");
    if (enum_cls == NULL && PyErr_Occurred())
        return NULL;
    PyObject *out = PyDict_New();
    for (const bc_enum_member *e = bc_enum_device_attribute; out && e->name; e++) {
        int value;
        if (strcmp(e->name, "MAX") == 0 ||
            bc_drv.cuDeviceGetAttribute(&value, (CUdevice_attribute)e->value, self->handle) !=
                CUDA_SUCCESS)
            continue;
        PyObject *key = enum_cls ? PyObject_CallFunction(enum_cls, "L", e->value)
                                 : PyLong_FromLongLong(e->value);
        PyObject *val = PyLong_FromLong(value);
        if (key == NULL || val == NULL || PyDict_SetItem(out, key, val) < 0)
            Py_CLEAR(out);
        Py_XDECREF(key);
        Py_XDECREF(val);
    }
    Py_XDECREF(enum_cls);
    return out;
}

PyDoc_STRVAR(can_access_peer_doc,
"can_access_peer($self, other)\n--\n\nWhether contexts on this device can map memory of `other`.");

static PyObject *
device_can_access_peer(bc_Device *self, PyObject *other)
{
    bc_State *st = bc_state_of((PyObject *)self);
    if (device_ready(st, self) < 0)
        return NULL;
    if (device_ready(st, self) < 0)
        return NULL;
    if (!PyObject_TypeCheck(other, (PyTypeObject *)st->DeviceType) ||
        device_ready(st, (bc_Device *)other) < 0) {
        PyErr_Format(PyExc_TypeError, "can_access_peer() takes a Device, not %.100s",
                     Py_TYPE(other)->tp_name);
        return NULL;
    }
    int can = 0;
    if (bc_check(st, bc_drv.cuDeviceCanAccessPeer(&can, self->handle, ((bc_Device *)other)->handle),
                 "cuDeviceCanAccessPeer") < 0)
        return NULL;
    return PyBool_FromLong(can);
}

PyDoc_STRVAR(retain_primary_context_doc,
"retain_primary_context($self)\n--\n\n"
"The device's primary context (the one the runtime API, CuPy and PyTorch use),\n"
"retained until the Context is detached or collected.  It is not made current:\n"
"use `with ctx:` or ctx.push().");

static PyObject *
device_retain_primary_context(bc_Device *self, PyObject *Py_UNUSED(ignored))
{
    bc_State *st = bc_state_of((PyObject *)self);
    if (device_ready(st, self) < 0)
        return NULL;
    return bc_context_retain_primary(st, self->handle);
}

PyDoc_STRVAR(reset_primary_context_doc,
"reset_primary_context($self)\n--\n\n"
"Destroy the device's primary context with all its memory, modules and streams\n"
"(cuDevicePrimaryCtxReset), e.g. to start over with a clean device.  Every barecuda\n"
"object of that context is released first: using one afterwards raises LogicError.\n"
"The next call that needs a context gets a fresh primary context.  Other libraries\n"
"using the same context (CuPy, PyTorch) lose their state too.  It does not undo a\n"
"sticky fault (illegal address, ...): the driver then needs a new process.");

static PyObject *
device_reset_primary_context(bc_Device *self, PyObject *Py_UNUSED(ignored))
{
    bc_State *st = bc_state_of((PyObject *)self);
    if (device_ready(st, self) < 0)
        return NULL;
    return bc_context_reset_primary(st, self->handle);
}

PyDoc_STRVAR(make_context_doc,
"make_context($self, flags=0)\n--\n\n"
"Create a new context on the device (ctx_flags) and push it on this thread's\n"
"stack, as PyCUDA does.  Prefer retain_primary_context() unless you need a\n"
"context of your own.");

static PyObject *
device_make_context(bc_Device *self, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"flags", NULL};
    unsigned int flags = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|I:make_context", kwlist, &flags))
        return NULL;
    bc_State *st = bc_state_of((PyObject *)self);
    if (device_ready(st, self) < 0)
        return NULL;
    return bc_context_create(st, self->handle, flags);
}

/* dev.multiprocessor_count -> cuDeviceGetAttribute(MULTIPROCESSOR_COUNT). */
static PyObject *
device_getattro(PyObject *self, PyObject *name)
{
    PyObject *found = PyObject_GenericGetAttr(self, name);
    if (found != NULL || !PyErr_ExceptionMatches(PyExc_AttributeError) ||
        !PyUnicode_Check(name))
        return found;
    const char *s = PyUnicode_AsUTF8(name);
    if (s == NULL)
        return NULL;
    char upper[128];
    size_t n = strlen(s);
    if (n == 0 || n >= sizeof upper || s[0] == '_')
        return NULL;
    for (size_t i = 0; i <= n; i++) {
        if (isupper((unsigned char)s[i]))
            return NULL; /* shortcuts are lower case only */
        upper[i] = (char)toupper((unsigned char)s[i]);
    }
    for (const bc_enum_member *e = bc_enum_device_attribute; e->name; e++) {
        if (strcmp(e->name, upper) == 0 && strcmp(upper, "MAX") != 0) {
            PyErr_Clear();
            bc_State *st = bc_state_of(self);
            int value;
            if (get_attribute(st, (bc_Device *)self, (int)e->value, &value) < 0)
                return NULL;
            return PyLong_FromLong(value);
        }
    }
    return NULL;
}

static PyMethodDef device_methods[] = {
    {"count", (PyCFunction)device_count, METH_NOARGS | METH_CLASS, count_doc},
    {"name", (PyCFunction)device_name, METH_NOARGS, name_doc},
    {"compute_capability", (PyCFunction)device_compute_capability, METH_NOARGS, cc_doc},
    {"total_memory", (PyCFunction)device_total_memory, METH_NOARGS, total_memory_doc},
    {"pci_bus_id", (PyCFunction)device_pci_bus_id, METH_NOARGS, pci_bus_id_doc},
    {"get_attribute", (PyCFunction)device_get_attribute, METH_O, get_attribute_doc},
    {"get_attributes", (PyCFunction)device_get_attributes, METH_NOARGS, get_attributes_doc},
    {"can_access_peer", (PyCFunction)device_can_access_peer, METH_O, can_access_peer_doc},
    {"retain_primary_context", (PyCFunction)device_retain_primary_context, METH_NOARGS,
     retain_primary_context_doc},
    {"reset_primary_context", (PyCFunction)device_reset_primary_context, METH_NOARGS,
     reset_primary_context_doc},
    {"make_context", (PyCFunction)(void (*)(void))device_make_context,
     METH_VARARGS | METH_KEYWORDS, make_context_doc},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef device_getset[] = {
    BC_DICT_GETSET,
    {"uuid", (getter)device_uuid, NULL, "The device's UUID (uuid.UUID).", NULL},
    {"handle", (getter)device_handle, NULL, "The CUdevice value (the ordinal).", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyDoc_STRVAR(device_doc,
"Device(ordinal)\n--\n\n"
"A CUDA device, by ordinal (0 .. Device.count()-1) or PCI bus id string.\n"
"Equal devices compare and hash equal.  Lower-case attribute shortcuts read\n"
"device attributes: dev.multiprocessor_count, dev.max_threads_per_block, ...");

static PyType_Slot device_slots[] = {
    {Py_tp_new, device_new},
    {Py_tp_init, device_init},
    {Py_tp_dealloc, device_dealloc},
    {Py_tp_traverse, device_traverse},
    {Py_tp_clear, device_clear},
    {Py_tp_members, device_members},
    {Py_tp_repr, device_repr},
    {Py_tp_hash, device_hash},
    {Py_tp_richcompare, device_richcompare},
    {Py_tp_getattro, device_getattro},
    {Py_tp_methods, device_methods},
    {Py_tp_getset, device_getset},
    {Py_tp_doc, (void *)device_doc},
    {0, NULL},
};

static PyType_Spec device_spec = {
    .name = "barecuda.driver.Device",
    .basicsize = sizeof(bc_Device),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE | Py_TPFLAGS_BASETYPE |
             Py_TPFLAGS_HAVE_GC,
    .slots = device_slots,
};

PyDoc_STRVAR(get_driver_version_doc,
"get_driver_version()\n--\n\n"
"The CUDA version the installed driver supports, as an int (13000 for 13.0).");

static PyObject *
bc_get_driver_version(PyObject *m, PyObject *Py_UNUSED(ignored))
{
    bc_State *st = bc_state_from_module(m);
    BC_REQUIRE_DRIVER(st, NULL);
    int v = 0;
    if (bc_check(st, bc_drv.cuDriverGetVersion(&v), "cuDriverGetVersion") < 0)
        return NULL;
    return PyLong_FromLong(v);
}

static PyMethodDef device_functions[] = {
    {"get_driver_version", bc_get_driver_version, METH_NOARGS, get_driver_version_doc},
    {NULL, NULL, 0, NULL},
};

int
bc_device_setup(PyObject *m, bc_State *st)
{
    if (bc_add_type(m, &device_spec, NULL, &st->DeviceType) < 0)
        return -1;
    return PyModule_AddFunctions(m, device_functions);
}
