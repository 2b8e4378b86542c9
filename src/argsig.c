/* SPDX-License-Identifier: MIT */
/* Function.prepare()'s signature: a struct-style string ("PPi", "3P2i", "16s")
 * or a list of dtypes, parsed into the Function's prepared layout (a bc_ArgSpec
 * per parameter: struct letter, size, alignment, offset and converter), checked
 * against the kernel's own parameter sizes and offsets when the driver tells
 * them.  src/argpack.c packs the prepared calls' arguments by that layout; this
 * file sits above it on the launch floor. */
#include "barecuda/argpack.h"

#include <string.h>

static int
code_info(char c, unsigned int *size, unsigned int *align)
{
    switch (c) {
    case 'b': case 'B': case '?': case 'c': *size = 1; break;
    case 'h': case 'H': case 'e': *size = 2; break;
    case 'i': case 'I': case 'f': *size = 4; break;
    case 'l': case 'L': *size = sizeof(long); break;
    case 'q': case 'Q': case 'd': case 'P': case 'n': case 'N': *size = 8; break;
    case 'F': *size = 8; *align = 8; return 0;
    case 'D': *size = 16; *align = 16; return 0;
    default: return -1;
    }
    *align = *size;
    return 0;
}

static int
add_spec(bc_ArgSpec **specs, Py_ssize_t *n, Py_ssize_t *cap, char code, unsigned int size,
         unsigned int align)
{
    if (*n == *cap) {
        Py_ssize_t nc = *cap ? 2 * *cap : 8;
        bc_ArgSpec *p = PyMem_Realloc(*specs, (size_t)nc * sizeof **specs);
        if (p == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        *specs = p;
        *cap = nc;
    }
    bc_ArgSpec *a = &(*specs)[(*n)++];
    a->code = code;
    a->size = size;
    a->align = (unsigned char)(align ? (align > 128 ? 128 : align) : 1);
    a->pad = 0;
    a->offset = 0;
    return 0;
}

/* "PPi", "3P2i", "16s" (a 16-byte blob) -> specs. */
static int
parse_format(const char *fmt, bc_ArgSpec **specs, Py_ssize_t *n, Py_ssize_t *cap)
{
    for (const char *p = fmt; *p;) {
        if (*p == ' ' || *p == '@' || *p == '=' || *p == '<') {
            p++;
            continue;
        }
        unsigned long count = 1;
        int has_count = 0;
        if (*p >= '0' && *p <= '9') {
            count = 0;
            while (*p >= '0' && *p <= '9' && count < 1000000)
                count = count * 10 + (unsigned long)(*p++ - '0');
            has_count = 1;
        }
        char c = *p++;
        if (c == 's' || c == 'x') {
            if (!has_count || count == 0) {
                PyErr_SetString(PyExc_ValueError, "prepare(): 's' needs a byte count, e.g. '16s'");
                return -1;
            }
            if (add_spec(specs, n, cap, c == 's' ? 'V' : 'x', (unsigned int)count, 1) < 0)
                return -1;
            continue;
        }
        unsigned int size, align;
        if (code_info(c, &size, &align) < 0) {
            PyErr_Format(PyExc_ValueError, "prepare(): unknown type letter '%c' in \"%s\"",
                         c ? c : '?', fmt);
            return -1;
        }
        if (c == 'n')
            c = 'q';
        if (c == 'N')
            c = 'Q';
        if (count > 65536) {
            PyErr_SetString(PyExc_ValueError, "prepare(): repeat count too large");
            return -1;
        }
        for (unsigned long k = 0; k < count; k++)
            if (add_spec(specs, n, cap, c, size, align) < 0)
                return -1;
    }
    return 0;
}

/* One dtype-like item of a list signature. */
static int
parse_dtype_item(PyObject *item, bc_ArgSpec **specs, Py_ssize_t *n, Py_ssize_t *cap)
{
    if (PyUnicode_Check(item)) {
        const char *s = PyUnicode_AsUTF8(item);
        if (s == NULL)
            return -1;
        if (strlen(s) == 1 && strchr("bBhHiIlLqQefdFDP?", s[0]))
            return parse_format(s, specs, n, cap);
    }
    PyArray_Descr *d = NULL;
    if (!PyArray_DescrConverter(item, &d))
        return -1;
    int rc = 0;
    unsigned int size, align;
    if (PyDataType_HASFIELDS(d) || d->type_num == NPY_VOID)
        rc = add_spec(specs, n, cap, 'V', (unsigned int)PyDataType_ELSIZE(d),
                      (unsigned int)PyDataType_ALIGNMENT(d));
    else if (d->type_num == NPY_LONGDOUBLE || d->type_num == NPY_CLONGDOUBLE ||
             code_info(d->type == 'p' ? 'q' : d->type, &size, &align) < 0) {
        PyErr_Format(PyExc_TypeError, "prepare(): dtype %R has no CUDA C type", (PyObject *)d);
        rc = -1;
    } else {
        char c = d->type;
        if (c == 'p')
            c = 'q';
        rc = add_spec(specs, n, cap, c, size, align);
    }
    Py_DECREF(d);
    return rc;
}


int
bc_args_prepare(bc_Function *self, PyObject *types)
{
    bc_ArgSpec *specs = NULL;
    Py_ssize_t n = 0, cap = 0;
    PyObject *fmt = NULL;
    if (PyUnicode_Check(types) || PyBytes_Check(types)) {
        fmt = PyUnicode_Check(types) ? Py_NewRef(types)
                                     : PyUnicode_FromEncodedObject(types, "ascii", "strict");
        const char *s = fmt ? PyUnicode_AsUTF8(fmt) : NULL;
        if (s == NULL || parse_format(s, &specs, &n, &cap) < 0)
            goto error;
    } else {
        PyObject *seq = PySequence_Fast(types, "prepare(): arg_types must be a struct-style "
                                               "string or a list of dtypes");
        if (seq == NULL)
            goto error;
        for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq); i++)
            if (parse_dtype_item(PySequence_Fast_ITEMS(seq)[i], &specs, &n, &cap) < 0) {
                Py_DECREF(seq);
                goto error;
            }
        Py_DECREF(seq);
        /* The equivalent format string, for `arg_format`. */
        PyObject *parts = PyList_New(0);
        for (Py_ssize_t i = 0; parts && i < n; i++) {
            PyObject *p = specs[i].code == 'V' ? PyUnicode_FromFormat("%us", specs[i].size)
                                               : PyUnicode_FromOrdinal((unsigned char)specs[i].code);
            if (p == NULL || PyList_Append(parts, p) < 0)
                Py_CLEAR(parts);
            Py_XDECREF(p);
        }
        PyObject *empty = parts ? PyUnicode_FromString("") : NULL;
        fmt = empty ? PyUnicode_Join(empty, parts) : NULL;
        Py_XDECREF(empty);
        Py_XDECREF(parts);
        if (fmt == NULL)
            goto error;
    }
    /* Drop 'x' padding entries: they only move the next offset. */
    size_t off = 0;
    Py_ssize_t k = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (specs[i].code == 'x') {
            off += specs[i].size;
            continue;
        }
        off = bc_align_up(off, specs[i].align);
        specs[k] = specs[i];
        specs[k].offset = (unsigned int)off;
        off += specs[i].size;
        k++;
    }
    n = k;
    if (self->nparams >= 0) {
        if (n != self->nparams) {
            PyErr_Format(PyExc_ValueError,
                         "prepare(): kernel %R takes %zd argument%s, the signature %R has %zd",
                         self->name, self->nparams, self->nparams == 1 ? "" : "s", fmt, n);
            goto error;
        }
        for (Py_ssize_t i = 0; i < n; i++) {
            if (specs[i].size != self->param_size[i]) {
                PyErr_Format(PyExc_ValueError,
                             "prepare(): parameter #%zd (0-based) of kernel %R is %u bytes, "
                             "the signature %R gives it %u",
                             i, self->name, self->param_size[i], fmt, specs[i].size);
                goto error;
            }
            specs[i].offset = self->param_offset[i];
        }
        off = self->param_bytes;
    }
    size_t sum = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        sum += specs[i].size;
        switch (specs[i].code) {
        case 'P': specs[i].conv = BC_CONV_PTR; break;
        case 'f': specs[i].conv = BC_CONV_F32; break;
        case 'd': specs[i].conv = BC_CONV_F64; break;
        case 'e': case 'F': case 'D': case 'V': specs[i].conv = BC_CONV_OTHER; break;
        default: specs[i].conv = BC_CONV_INT; break;
        }
    }
    self->prepared_gaps = sum != off;
    bc_args_memo_free(&self->prep_memo); /* packed to the old layout */
    PyMem_Free(self->prepared);
    self->prepared = specs;
    self->nprepared = n;
    self->prepared_bytes = off;
    Py_XSETREF(self->arg_format, fmt);
    return 0;
error:
    PyMem_Free(specs);
    Py_XDECREF(fmt);
    return -1;
}

