/* SPDX-License-Identifier: MIT */
/* CUresult -> Python exception (src/error.c). */
#ifndef BC_ERROR_H
#define BC_ERROR_H

#include "common.h"
#include "state.h"

/* Raise the exception for a failed driver call; always returns -1.
 * Message: "cuMemAlloc failed: CUDA_ERROR_OUT_OF_MEMORY: out of memory". */
BC_COLD int bc_error_raise(bc_State *st, CUresult code, const char *routine);

/* 0 on success, else raise and return -1. */
static inline int
bc_check(bc_State *st, CUresult code, const char *routine)
{
    return code == CUDA_SUCCESS ? 0 : bc_error_raise(st, code, routine);
}

/* Raise barecuda.driver.LogicError with a formatted message; returns -1. */
BC_COLD int bc_error_logic(bc_State *st, const char *fmt, ...);

/* The exception class a CUresult maps to (borrowed). */
PyObject *bc_error_class(bc_State *st, CUresult code);

/* In a destructor: report a failed release as an unraisable warning, never raise.
 * Codes meaning the driver or context is already gone are ignored quietly. */
void bc_error_in_destructor(CUresult code, const char *routine, PyObject *obj);

#endif
