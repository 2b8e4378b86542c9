/* SPDX-License-Identifier: MIT */
/* A stand-in for libcuda.so.1 with no GPU behind it, for CPU tests of the order
 * in which barecuda makes driver calls (tests/test_teardown_order.py).  Loaded
 * through BARECUDA_LIBCUDA.  One device, a primary context, a context stack per
 * thread, a context of make_context, streams, pools and plain allocations that
 * hand out made-up handles, page-locked host memory that is plain malloc memory; the calls that matter
 * to the tests are appended, one line each, to the file named by $FAKE_CUDA_LOG
 * (a stream by its number: 1 for the first made, none for the legacy stream).
 * Every other entry point answers CUDA_SUCCESS and writes nothing.  Not a driver:
 * no memory exists at the addresses it returns, so nothing may be copied or run. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
typedef void *CUcontext;
typedef uint64_t CUdeviceptr;

static char primary_ctx, owned_ctx, pool_objects[64];
static int npools;
static CUdeviceptr next_ptr = 0x100000000ull;
static __thread CUcontext stack[16];
static __thread int depth;

static char stream_objects[64];
static int nstreams;

static void
note2(const char *fmt, unsigned long long a, unsigned long long b)
{
    const char *path = getenv("FAKE_CUDA_LOG");
    FILE *f = path ? fopen(path, "a") : NULL;
    if (f == NULL)
        return;
    fprintf(f, fmt, a, b);
    fputc('\n', f);
    fclose(f);
}

static void
note(const char *fmt, unsigned long long a)
{
    note2(fmt, a, 0);
}

/* A stream's number in the log: 1 for the first made, 0 for the legacy stream. */
static unsigned long long
stream_no(void *stream)
{
    char *p = stream;
    if (p < stream_objects || p >= stream_objects + 64)
        return 0;
    return (unsigned long long)(p - stream_objects) + 1;
}

static CUresult ok(void) { return 0; }
CUresult cuDriverGetVersion(int *v) { *v = 13000; return 0; }
static CUresult init(unsigned flags) { (void)flags; return 0; }
static CUresult device_get_count(int *n) { *n = 1; return 0; }
static CUresult device_get(int *d, int ordinal) { *d = ordinal; return ordinal == 0 ? 0 : 101; }
static CUresult primary_retain(CUcontext *c, int dev)
{
    (void)dev;
    *c = &primary_ctx;
    note("cuDevicePrimaryCtxRetain", 0);
    return 0;
}
CUresult cuDevicePrimaryCtxRelease_v2(int dev) { note("cuDevicePrimaryCtxRelease %llu", (unsigned)dev); return 0; }
static CUresult primary_state(int dev, unsigned *flags, int *active)
{
    (void)dev;
    *flags = 0;
    *active = 1;
    return 0;
}
static CUresult ctx_get_current(CUcontext *c) { *c = depth ? stack[depth - 1] : NULL; return 0; }
static CUresult ctx_set_current(CUcontext c)
{
    if (depth == 0 && c != NULL)
        depth = 1;
    if (depth)
        stack[depth - 1] = c;
    if (c == NULL)
        depth = 0;
    return 0;
}
CUresult cuCtxPushCurrent_v2(CUcontext c) { if (depth < 16) stack[depth++] = c; return 0; }
CUresult cuCtxPopCurrent_v2(CUcontext *c)
{
    if (depth == 0)
        return 201; /* CUDA_ERROR_INVALID_CONTEXT */
    CUcontext top = stack[--depth];
    if (c)
        *c = top;
    return 0;
}
/* cuCtxCreate: the first argument is the handle in every version; it is pushed. */
static CUresult ctx_create(CUcontext *c)
{
    *c = &owned_ctx;
    note("cuCtxCreate", 0);
    return cuCtxPushCurrent_v2(*c);
}
CUresult cuCtxDestroy_v2(CUcontext c)
{
    if (depth && stack[depth - 1] == c)
        depth--;
    note("cuCtxDestroy", 0);
    return 0;
}
static CUresult ctx_get_device(int *d) { *d = 0; return 0; }
static CUresult ctx_synchronize(void) { note("cuCtxSynchronize", 0); return 0; }
static CUresult pool_create(void **pool, const void *props)
{
    (void)props;
    *pool = &pool_objects[npools++ % 64];
    note("cuMemPoolCreate", 0);
    return 0;
}
static CUresult pool_set_attribute(void *pool, int attr, void *value)
{
    (void)pool;
    if (attr == 4) /* CU_MEMPOOL_ATTR_RELEASE_THRESHOLD */
        note("cuMemPoolSetAttribute release threshold %#llx", *(unsigned long long *)value);
    return 0;
}
static CUresult pool_trim_to(void *pool, size_t keep) { (void)pool; note("cuMemPoolTrimTo %llu", keep); return 0; }
static CUresult pool_destroy(void *pool) { (void)pool; note("cuMemPoolDestroy", 0); return 0; }
static CUresult alloc_from_pool(CUdeviceptr *p, size_t n, void *pool, void *stream)
{
    (void)pool;
    *p = next_ptr;
    next_ptr += (n + 0xfffff) & ~(size_t)0xfffff;
    if (stream_no(stream))
        note2("cuMemAllocFromPoolAsync %#llx on stream %llu", *p, stream_no(stream));
    else
        note("cuMemAllocFromPoolAsync %#llx", *p);
    return 0;
}
static CUresult free_async(CUdeviceptr p, void *stream)
{
    if (stream_no(stream))
        note2("cuMemFreeAsync %#llx on stream %llu", p, stream_no(stream));
    else
        note("cuMemFreeAsync %#llx", p);
    return 0;
}
static CUresult mem_alloc(CUdeviceptr *p, size_t n)
{
    *p = next_ptr;
    next_ptr += (n + 0xfffff) & ~(size_t)0xfffff;
    note("cuMemAlloc %#llx", *p);
    return 0;
}
CUresult cuMemFree_v2(CUdeviceptr p) { note("cuMemFree %#llx", p); return 0; }
/* Page-locked host memory is real memory here: NumPy arrays are made over it. */
static CUresult host_alloc(void **p, size_t n, unsigned flags)
{
    (void)flags;
    *p = malloc(n ? n : 1);
    note("cuMemHostAlloc", 0);
    return *p ? 0 : 2; /* CUDA_ERROR_OUT_OF_MEMORY */
}
static CUresult host_free(void *p) { free(p); note("cuMemFreeHost", 0); return 0; }
static CUresult host_register(void *p, size_t n, unsigned flags)
{
    (void)p;
    (void)flags;
    note("cuMemHostRegister %llu bytes", n);
    return 0;
}
static CUresult host_unregister(void *p) { (void)p; note("cuMemHostUnregister", 0); return 0; }
static CUresult stream_create(void **s, unsigned flags, int priority)
{
    (void)flags;
    (void)priority;
    *s = &stream_objects[nstreams++ % 64];
    note("cuStreamCreate %llu", stream_no(*s));
    return 0;
}
CUresult cuStreamDestroy_v2(void *s) { note("cuStreamDestroy %llu", stream_no(s)); return 0; }
static CUresult stream_is_capturing(void *s, int *status) { (void)s; *status = 0; return 0; }
static CUresult stream_synchronize(void *s) { note("cuStreamSynchronize %llu", stream_no(s)); return 0; }
static CUresult error_name(CUresult rc, const char **s) { (void)rc; *s = "CUDA_ERROR_FAKE"; return 0; }

static const struct { const char *name; void *fn; } entries[] = {
    {"cuInit", (void *)init},
    {"cuDeviceGetCount", (void *)device_get_count},
    {"cuDeviceGet", (void *)device_get},
    {"cuDevicePrimaryCtxRetain", (void *)primary_retain},
    {"cuDevicePrimaryCtxRelease", (void *)cuDevicePrimaryCtxRelease_v2},
    {"cuDevicePrimaryCtxGetState", (void *)primary_state},
    {"cuCtxGetCurrent", (void *)ctx_get_current},
    {"cuCtxSetCurrent", (void *)ctx_set_current},
    {"cuCtxPushCurrent", (void *)cuCtxPushCurrent_v2},
    {"cuCtxPopCurrent", (void *)cuCtxPopCurrent_v2},
    {"cuCtxGetDevice", (void *)ctx_get_device},
    {"cuCtxCreate", (void *)ctx_create},
    {"cuCtxDestroy", (void *)cuCtxDestroy_v2},
    {"cuCtxSynchronize", (void *)ctx_synchronize},
    {"cuMemPoolCreate", (void *)pool_create},
    {"cuMemPoolDestroy", (void *)pool_destroy},
    {"cuMemPoolSetAttribute", (void *)pool_set_attribute},
    {"cuMemPoolTrimTo", (void *)pool_trim_to},
    {"cuMemAllocFromPoolAsync", (void *)alloc_from_pool},
    {"cuMemFreeAsync", (void *)free_async},
    {"cuMemAlloc", (void *)mem_alloc},
    {"cuMemFree", (void *)cuMemFree_v2},
    {"cuMemHostAlloc", (void *)host_alloc},
    {"cuMemFreeHost", (void *)host_free},
    {"cuMemHostRegister", (void *)host_register},
    {"cuMemHostUnregister", (void *)host_unregister},
    {"cuStreamCreateWithPriority", (void *)stream_create},
    {"cuStreamDestroy", (void *)cuStreamDestroy_v2},
    {"cuStreamIsCapturing", (void *)stream_is_capturing},
    {"cuStreamSynchronize", (void *)stream_synchronize},
    {"cuGetErrorName", (void *)error_name},
    {"cuGetErrorString", (void *)error_name},
};

CUresult
cuGetProcAddress_v2(const char *symbol, void **pfn, int version, uint64_t flags, int *status)
{
    (void)version;
    (void)flags;
    *pfn = (void *)ok;
    for (size_t i = 0; i < sizeof entries / sizeof entries[0]; i++)
        if (strcmp(symbol, entries[i].name) == 0)
            *pfn = entries[i].fn;
    if (status)
        *status = 0; /* CU_GET_PROC_ADDRESS_SUCCESS */
    return 0;
}
