/* SPDX-License-Identifier: MIT */
/* Modules and kernels: Module (src/cumodule.c) and Function (src/function.c). */
#ifndef BC_MODULE_H
#define BC_MODULE_H

#include "common.h"
#include "state.h"
#include "context.h"

typedef struct {
    PyObject_HEAD
    CUmodule handle; /* NULL once unloaded */
    bc_Context *ctx;
    PyObject *dict;        /* instance attributes (PyCUDA's objects take them) */
    PyObject *weakreflist;
} bc_Module;

/* JIT options as the driver takes them: the caller's (jit_option, value) pairs
 * followed by the info and error log buffers barecuda always asks for
 * (src/cumodule.c fills them; src/linker.c keeps one set for a link's life). */
#define BC_JIT_MAX_OPTIONS 32
#define BC_JIT_LOG_BYTES (64 * 1024)
typedef struct {
    CUjit_option keys[BC_JIT_MAX_OPTIONS + 8];
    void *values[BC_JIT_MAX_OPTIONS + 8];
    unsigned int n;
    char *info_log;  /* BC_JIT_LOG_BYTES, zeroed */
    char *error_log; /* BC_JIT_LOG_BYTES, zeroed */
} bc_jit_options;

/* Parse a list of (jit_option, value) pairs into o and add the log buffers;
 * 0, or -1 with TypeError/ValueError/MemoryError (nothing to free then). */
int bc_jit_options_fill(bc_State *st, PyObject *options, bc_jit_options *o);
void bc_jit_options_free(bc_jit_options *o);
/* A log buffer as str (undecodable bytes replaced). */
PyObject *bc_jit_log_str(const char *log);
/* Append "JIT error log: ..." to the message of the exception being raised and
 * set its .log attribute (nothing when the log is empty). */
void bc_jit_attach_error_log(const char *log);
/* Load a PTX (NUL-terminated), CUBIN or fatbin image into the current context as
 * a Module, as module_from_buffer does. */
PyObject *bc_module_load_image(bc_State *st, const void *image, PyObject *options,
                               PyObject *handler);

/* One kernel parameter as Function.prepare() or the kernel itself describes it. */
typedef struct {
    char code;           /* struct-module letter: b B h H i I l L q Q e f d F D ? P, or V */
    unsigned char align; /* alignment in the packed buffer */
    unsigned char conv;  /* how argpack.c converts it (BC_CONV_*, argpack.h) */
    unsigned char pad;
    unsigned int size;   /* bytes */
    unsigned int offset; /* where it goes in the packed buffer */
} bc_ArgSpec;

#define BC_ARGS_STACK 4096 /* bytes packed on the stack; more goes to the heap */

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    CUfunction handle;
    bc_Module *module;      /* strong: the code lives as long as any Function of it */
    PyObject *name;         /* str */
    int max_threads;        /* CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, cached */
    /* What the kernel says about its parameters (cuFuncGetParamInfo), or
     * nparams == -1 when the driver cannot tell. */
    Py_ssize_t nparams;
    unsigned int *param_offset;
    unsigned int *param_size;
    size_t param_bytes;     /* the packed buffer: end of the furthest parameter */
    int param_gaps;         /* padding between parameters (zeroed before packing) */
    /* prepare(): the signature and its packed layout. */
    Py_ssize_t nprepared;   /* -1 when not prepared */
    bc_ArgSpec *prepared;
    size_t prepared_bytes;  /* total size of the packed buffer */
    PyObject *arg_format;   /* the format string, for PyCUDA's `arg_format` */
    int prepared_gaps;      /* padding in the prepared layout */
    /* The last grid and block objects seen (tuples of exact ints, immutable) and
     * what they parsed to under max_threads == dims_max_threads (argpack.c). */
    PyObject *dims_grid, *dims_block;
    unsigned int dims_g[3], dims_b[3];
    int dims_max_threads;
    /* The last arguments of __call__ and of the prepared calls, slot by slot, and
     * the bytes they packed to (argpack.c); NULL until the first launch. */
    struct bc_ArgMemo *call_memo, *prep_memo;
    PyObject *dict;        /* instance attributes (PyCUDA's objects take them) */
    PyObject *weakreflist;
} bc_Function;

/* New Function of `module` for kernel `name` (LogicError naming it when missing;
 * src/function.c). */
PyObject *bc_function_new(bc_State *st, bc_Module *module, PyObject *name);

/* Module.get_function() makes its Function with the constructor that
 * src/function.c (a floor above) registers at module init: bc_function_new. */
typedef PyObject *(*bc_function_maker)(bc_State *st, bc_Module *module, PyObject *name);
void bc_module_set_function_maker(bc_function_maker fn);

/* LogicError when the module was unloaded or its context detached. */
BC_COLD int bc_module_usable(bc_State *st, bc_Module *m);

/* cuLaunchKernel of f with a buffer packed to its prepare()d layout, as
 * prepared_async_call does it (the GIL as the launch knob says, one retry in f's
 * context).  The driver's result; no exception set. */
CUresult bc_function_launch(bc_Function *f, const unsigned int g[3], const unsigned int b[3],
                            unsigned int shared, CUstream s, void *buf, size_t size);

/* Store the integer (neg ? v : u, where neg means v < 0) as struct code `code`
 * (? b B h H i I l L q Q P) at dst: 0 done, 1 out of the code's range, -1 not an
 * integer code.  No exception set. */
int bc_pack_integer(char code, int neg, long long v, unsigned long long u, void *dst);

#endif
