/* SPDX-License-Identifier: MIT */
/* A stand-in libcuda.so.1 for CPU tests and CPU-side timing of the launch path
 * (tests/test_launch_fakedriver.py; BARECUDA_LIBCUDA points barecuda at it).
 * Just enough entry points to retain a context, load PTX, allocate and launch:
 * cuFuncGetParamInfo answers from the .entry's .param list in the PTX, and
 * cuLaunchKernel runs nothing but records the launch (fake_last_launch), so a
 * test can read back the exact bytes barecuda handed to the driver.  Entry
 * points not listed answer CUDA_ERROR_NOT_SUPPORTED. */
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *image;
static CUresult ok(void) { return CUDA_SUCCESS; }
static CUresult unsupported(void) { return CUDA_ERROR_NOT_SUPPORTED; }

CUresult cuDriverGetVersion(int *v) { *v = CUDA_VERSION; return 0; }
static CUresult f_init(unsigned int f) { (void)f; return 0; }
static CUresult f_errname(CUresult r, const char **s) { (void)r; *s = "CUDA_ERROR_FAKE"; return 0; }
static CUresult f_count(int *n) { *n = 1; return 0; }
static CUresult f_devget(CUdevice *d, int o) { *d = o; return 0; }
static CUresult f_retain(CUcontext *c, CUdevice d) { (void)d; *c = (CUcontext)0x1000; return 0; }
static CUcontext current;
static CUresult f_setcur(CUcontext c) { current = c; return 0; }
static CUresult f_getcur(CUcontext *c) { *c = current; return 0; }
static CUresult f_pop(CUcontext *c) { if (c) *c = current; return 0; }
static CUresult f_ctxdev(CUdevice *d) { *d = 0; return 0; }
static CUresult f_devattr(int *v, CUdevice_attribute a, CUdevice d) {
    (void)d;
    switch (a) {
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *v = 9; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *v = 0; break;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *v = 1024; break;
    default: *v = 1;
    }
    return 0;
}
static CUresult f_load(CUmodule *m, const void *img) {
    free(image); image = strdup((const char *)img); *m = (CUmodule)0x2000; return 0;
}
static CUresult f_loadex(CUmodule *m, const void *img, unsigned n, CUjit_option *o, void **v) {
    (void)n; (void)o; (void)v; return f_load(m, img);
}
struct fn { char name[64]; size_t n, off[4096], size[4096]; };
static CUresult f_getfn(CUfunction *out, CUmodule m, const char *name) {
    (void)m;
    char pat[80];
    snprintf(pat, sizeof pat, ".entry %s(", name);
    char *p = image ? strstr(image, pat) : NULL;
    if (!p) return CUDA_ERROR_NOT_FOUND;
    struct fn *f = calloc(1, sizeof *f);
    snprintf(f->name, sizeof f->name, "%s", name);
    p += strlen(pat);
    char *end = strchr(p, ')');
    size_t off = 0;
    while (p && p < end && (p = strstr(p, ".param")) && p < end) {
        p += 6;
        size_t sz = strncmp(p, " .u64", 5) == 0 || strncmp(p, " .f64", 5) == 0 ? 8 : 4;
        off = (off + sz - 1) / sz * sz;
        f->off[f->n] = off; f->size[f->n] = sz; f->n++;
        off += sz;
    }
    *out = (CUfunction)f;
    return 0;
}
static CUresult f_paraminfo(CUfunction h, size_t i, size_t *off, size_t *size) {
    struct fn *f = (struct fn *)h;
    if (i >= f->n) return CUDA_ERROR_INVALID_VALUE;
    *off = f->off[i]; *size = f->size[i]; return 0;
}
static CUresult f_fnattr(int *v, CUfunction_attribute a, CUfunction f) { (void)a; (void)f; *v = 1024; return 0; }
static unsigned long long next_ptr = 0x7f0000000000ULL;
static CUresult f_alloc(CUdeviceptr *p, size_t n) { *p = next_ptr; next_ptr += (n + 255) / 256 * 256; return 0; }
static CUresult f_ptrattr(void *d, CUpointer_attribute a, CUdeviceptr p) { (void)d; (void)a; (void)p; return CUDA_ERROR_NOT_SUPPORTED; }
static CUresult f_streamcreate(CUstream *s, unsigned f) { (void)f; static long k = 0x3000; *s = (CUstream)(k++); return 0; }
static CUresult f_streamcreatep(CUstream *s, unsigned f, int p) { (void)p; return f_streamcreate(s, f); }
static struct {
    unsigned long long count;
    unsigned int dims[7];
    size_t size;
    unsigned char buf[4096];
} last;
static CUresult f_launch(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                         unsigned bz, unsigned sh, CUstream s, void **kp, void **extra) {
    (void)f; (void)s;
    if (kp != NULL)
        return CUDA_ERROR_NOT_SUPPORTED; /* barecuda always passes one buffer */
    last.count++;
    last.dims[0] = gx; last.dims[1] = gy; last.dims[2] = gz;
    last.dims[3] = bx; last.dims[4] = by; last.dims[5] = bz; last.dims[6] = sh;
    last.size = 0;
    if (extra != NULL) {
        if (extra[0] != CU_LAUNCH_PARAM_BUFFER_POINTER || extra[2] != CU_LAUNCH_PARAM_BUFFER_SIZE ||
            extra[4] != CU_LAUNCH_PARAM_END)
            return CUDA_ERROR_INVALID_VALUE;
        size_t n = *(size_t *)extra[3];
        if (n > sizeof last.buf)
            return CUDA_ERROR_INVALID_VALUE;
        last.size = n;
        memcpy(last.buf, extra[1], n); /* the cost of a small copy, as the driver's */
    }
    return 0;
}

/* Launches so far; the last one's grid, block and shared bytes (dims[7]) and
 * parameter bytes (into buf, up to cap; returns their count). */
unsigned long long fake_launch_count(void) { return last.count; }
size_t fake_last_launch(unsigned int dims[7], unsigned char *buf, size_t cap) {
    memcpy(dims, last.dims, sizeof last.dims);
    memcpy(buf, last.buf, last.size < cap ? last.size : cap);
    return last.size;
}
static CUresult f_eventcreate(CUevent *e, unsigned f) { (void)f; *e = (CUevent)0x4000; return 0; }
static CUresult f_elapsed(float *ms, CUevent a, CUevent b) { (void)a; (void)b; *ms = 0; return 0; }

static const struct { const char *name; void *fn; } table[] = {
    {"cuInit", f_init}, {"cuDriverGetVersion", cuDriverGetVersion},
    {"cuGetErrorName", f_errname}, {"cuGetErrorString", f_errname},
    {"cuDeviceGetCount", f_count}, {"cuDeviceGet", f_devget},
    {"cuDevicePrimaryCtxRetain", f_retain}, {"cuDevicePrimaryCtxRelease", ok},
    {"cuCtxSetCurrent", f_setcur}, {"cuCtxGetCurrent", f_getcur}, {"cuCtxPushCurrent", f_setcur},
    {"cuCtxPopCurrent", f_pop}, {"cuCtxGetDevice", f_ctxdev}, {"cuCtxSynchronize", ok},
    {"cuDeviceGetAttribute", f_devattr},
    {"cuModuleLoadData", f_load}, {"cuModuleLoadDataEx", f_loadex}, {"cuModuleUnload", ok},
    {"cuModuleGetFunction", f_getfn}, {"cuFuncGetParamInfo", f_paraminfo},
    {"cuFuncGetAttribute", f_fnattr}, {"cuMemAlloc", f_alloc}, {"cuMemFree", ok},
    {"cuPointerGetAttribute", f_ptrattr},
    {"cuStreamCreate", f_streamcreate},
    {"cuStreamCreateWithPriority", f_streamcreatep}, {"cuStreamWaitEvent", ok}, {"cuStreamDestroy", ok}, {"cuStreamSynchronize", ok},
    {"cuLaunchKernel", f_launch}, {"cuEventCreate", f_eventcreate}, {"cuEventRecord", ok},
    {"cuEventSynchronize", ok}, {"cuEventDestroy", ok}, {"cuEventElapsedTime", f_elapsed},
};

CUresult cuGetProcAddress_v2(const char *sym, void **pfn, int ver, cuuint64_t flags,
                             CUdriverProcAddressQueryResult *status) {
    (void)ver; (void)flags;
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (strcmp(table[i].name, sym) == 0) {
            *pfn = table[i].fn;
            if (status) *status = CU_GET_PROC_ADDRESS_SUCCESS;
            return 0;
        }
    if (getenv("FAKECUDA_VERBOSE")) fprintf(stderr, "fakecuda: stub %s\n", sym);
    *pfn = (void *)unsupported;
    if (status) *status = CU_GET_PROC_ADDRESS_SUCCESS;
    return 0;
}
