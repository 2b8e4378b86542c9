/* SPDX-License-Identifier: MIT */
/* CUDA arrays (src/array.c), and texture/surface objects (src/texture.c). */
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
    int freed;
    PyObject *weakreflist;
} bc_Array;

/* The CUarray of an Array object (borrowed), or NULL with TypeError/LogicError set
 * (wrong type, freed array, detached context). */
bc_Array *bc_array_convert(bc_State *st, PyObject *obj);

#endif
