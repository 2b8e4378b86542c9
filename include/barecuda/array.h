/* SPDX-License-Identifier: MIT */
/* CUDA arrays (src/array.c), and texture/surface objects (src/texture.c).
 *
 * Lifetime: a TextureObject or SurfaceObject made over an Array holds a strong
 * reference to it and counts itself in `users` for as long as its own handle is
 * alive.  Array.free() raises LogicError while users > 0, so the memory a live
 * texture reads can never be released under it; closing (or dropping) the last
 * texture/surface object makes free() legal again. */
#ifndef BC_ARRAY_H
#define BC_ARRAY_H

#include "common.h"
#include "state.h"
#include "context.h"

typedef struct {
    PyObject_HEAD
    CUarray handle;
    bc_Context *ctx;
    CUDA_ARRAY3D_DESCRIPTOR desc; /* Depth 0 for 1D/2D arrays */
    int freed;        /* 1 once destroyed; -1: a subclass's array before Array.__init__ */
    int counted;      /* in ctx->live_memory until it is destroyed */
    Py_ssize_t users; /* live TextureObject/SurfaceObject handles reading this array */
    PyObject *dict;        /* instance attributes (PyCUDA's objects take them) */
    PyObject *weakreflist;
} bc_Array;

/* The Array object obj (borrowed; an instance of a subclass too), or NULL with
 * TypeError/LogicError set (wrong type, freed or unset array, detached context). */
bc_Array *bc_array_convert(bc_State *st, PyObject *obj);

/* Bytes of one channel of a supported array format (the eight plain formats:
 * 8/16/32-bit signed and unsigned ints, HALF, FLOAT), or 0 when unsupported. */
size_t bc_array_format_size(unsigned int format);

/* Validate (format, num_channels) for arrays and textures: ValueError naming
 * `what` when the format is unknown or num_channels is not 1, 2 or 4. */
int bc_array_check_format(unsigned int format, unsigned int num_channels, const char *what);

/* The handle of a TextureObject or SurfaceObject, for kernel-argument packing:
 * 1 with *out set when obj is one, 0 (no exception) when it is not,
 * -1 with LogicError set when it was closed.  (src/texture.c) */
int bc_texture_handle(bc_State *st, PyObject *obj, unsigned long long *out);

#endif
