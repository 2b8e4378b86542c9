/* SPDX-License-Identifier: MIT */
/* A stand-in libcuda.so.1 for CPU tests and CPU-side timing of the launch path
 * (tests/test_launch_fakedriver.py; BARECUDA_LIBCUDA points barecuda at it).
 * Just enough entry points to retain a context, load PTX, allocate and launch:
 * cuFuncGetParamInfo answers from the .entry's .param list in the PTX, and
 * cuLaunchKernel runs nothing but records the launch (fake_last_launch), so a
 * test can read back the exact bytes barecuda handed to the driver.  Device
 * memory is host memory here, so copies (cuMemcpyHtoD/DtoH and their Async
 * forms, which run at once) really move the bytes, and fake_copy_counts tells
 * a test which of them barecuda used and on which stream (tests/
 * test_memcpy_fakedriver.py); page-locked and registered host memory is known to
 * cuPointerGetAttribute(MEMORY_TYPE) as the driver's would be.  CUDA arrays are
 * host bytes too (2D/3D copies move them), texture, surface and IPC handles are
 * tokens, and the JIT linker "links" by handing back its last input (PTX that
 * cuModuleLoadData then reads).  Entry points not listed answer
 * CUDA_ERROR_NOT_SUPPORTED. */
#include <cuda.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
static CUresult f_alloc(CUdeviceptr *p, size_t n) {
    void *m = aligned_alloc(256, n ? (n + 255) / 256 * 256 : 256);
    if (!m) return CUDA_ERROR_OUT_OF_MEMORY;
    *p = (CUdeviceptr)(uintptr_t)m;
    return 0;
}
static CUresult f_free(CUdeviceptr p) { free((void *)(uintptr_t)p); return 0; }

/* host memory the driver knows: cuMemHostAlloc's and cuMemHostRegister's */
static pthread_mutex_t known_mu = PTHREAD_MUTEX_INITIALIZER;
static struct { char *p; size_t n; } known[256];
static int known_find(const void *p) { /* known_mu held */
    for (int i = 0; i < 256; i++)
        if (known[i].p && (const char *)p >= known[i].p && (const char *)p < known[i].p + known[i].n)
            return i;
    return -1;
}
static CUresult f_register(void *p, size_t n, unsigned f) {
    (void)f;
    CUresult rc = CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&known_mu);
    if (known_find(p) >= 0 || known_find((char *)p + n - 1) >= 0)
        rc = CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
    else
        for (int i = 0; i < 256; i++)
            if (!known[i].p) { known[i].p = p; known[i].n = n; rc = CUDA_SUCCESS; break; }
    pthread_mutex_unlock(&known_mu);
    return rc;
}
static CUresult f_unregister(void *p) {
    CUresult rc = CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
    pthread_mutex_lock(&known_mu);
    int i = known_find(p);
    if (i >= 0 && known[i].p == p) { known[i].p = NULL; rc = CUDA_SUCCESS; }
    pthread_mutex_unlock(&known_mu);
    return rc;
}
static CUresult f_hostalloc(void **pp, size_t n, unsigned f) {
    if (!(*pp = aligned_alloc(4096, (n + 4095) / 4096 * 4096))) return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult rc = f_register(*pp, n, f);
    if (rc) free(*pp);
    return rc;
}
static CUresult f_freehost(void *p) { CUresult rc = f_unregister(p); if (!rc) free(p); return rc; }
static CUresult f_hostdevptr(CUdeviceptr *d, void *p, unsigned f) { (void)f; *d = (CUdeviceptr)(uintptr_t)p; return 0; }
static CUresult f_ptrattr(void *d, CUpointer_attribute a, CUdeviceptr p) {
    if (a != CU_POINTER_ATTRIBUTE_MEMORY_TYPE) return CUDA_ERROR_NOT_SUPPORTED;
    pthread_mutex_lock(&known_mu);
    int i = known_find((void *)(uintptr_t)p);
    pthread_mutex_unlock(&known_mu);
    if (i < 0) return CUDA_ERROR_INVALID_VALUE; /* as the driver answers for plain memory */
    *(unsigned int *)d = CU_MEMORYTYPE_HOST;
    return 0;
}

/* copies: counted by kind, the Async ones by stream too */
enum { C_HTOD, C_DTOH, C_HTOD_ASYNC, C_DTOH_ASYNC, C_ON_STREAM, C_ASYNC_BYTES, C_NKINDS };
static unsigned long long copies[C_NKINDS];
static unsigned copy_delay_us;
static void count(int kind, unsigned long long v) { __atomic_fetch_add(&copies[kind], v, __ATOMIC_SEQ_CST); }
static CUresult f_htod(CUdeviceptr d, const void *h, size_t n) {
    memcpy((void *)(uintptr_t)d, h, n); count(C_HTOD, 1); return 0;
}
static CUresult f_dtoh(void *h, CUdeviceptr d, size_t n) {
    memcpy(h, (const void *)(uintptr_t)d, n); count(C_DTOH, 1); return 0;
}
static void async_note(int kind, size_t n, CUstream s) {
    count(kind, 1); count(C_ASYNC_BYTES, n);
    if (s != NULL) count(C_ON_STREAM, 1);
    if (copy_delay_us) usleep(copy_delay_us);
}
static CUresult f_htod_async(CUdeviceptr d, const void *h, size_t n, CUstream s) {
    memcpy((void *)(uintptr_t)d, h, n); async_note(C_HTOD_ASYNC, n, s); return 0;
}
static CUresult f_dtoh_async(void *h, CUdeviceptr d, size_t n, CUstream s) {
    memcpy(h, (const void *)(uintptr_t)d, n); async_note(C_DTOH_ASYNC, n, s); return 0;
}
/* cuMemcpyHtoD, cuMemcpyDtoH, their Async calls, Async calls on a stream other
 * than the legacy one, bytes copied by Async calls; then zeroed. */
void fake_copy_counts(unsigned long long out[C_NKINDS]) {
    for (int i = 0; i < C_NKINDS; i++) out[i] = __atomic_exchange_n(&copies[i], 0, __ATOMIC_SEQ_CST);
}
/* Microseconds every Async copy takes from now on (a staged copy held busy). */
void fake_set_copy_delay_us(unsigned us) { copy_delay_us = us; }
static CUresult f_streamcreate(CUstream *s, unsigned f) { (void)f; static long k = 0x3000; *s = (CUstream)(k++); return 0; }
static CUresult f_streamcreate_prio(CUstream *s, unsigned f, int p) { (void)p; return f_streamcreate(s, f); }
/* Stream callbacks (cuStreamAddCallback) wait here until a test fires them with
 * fake_fire_callbacks(stream, status, n): the first n queued on `stream` (0: on
 * any), in the order queued, each called on a thread of its own as the driver's
 * callback thread would; fake_pending_callbacks() counts those still queued. */
struct fake_cb { CUstream s; CUstreamCallback fn; void *data; unsigned long long seq; struct fake_cb *next; };
static struct fake_cb *cbs;
static unsigned long long cb_seq; /* callbacks queued so far */
static pthread_mutex_t cb_lock = PTHREAD_MUTEX_INITIALIZER;
/* A stream made to wait for an event recorded on another stream works, for the
 * stand-in, on behalf of that one (its origin): the callbacks and events queued on
 * it are counted as the origin's, so that firing a stream's callbacks fires those
 * of the side streams that wait for it.  A stream's origin is itself until it
 * waits for an event. */
static struct { CUstream s, origin; } origins[4096];
static CUstream origin_of(CUstream s) {   /* cb_lock held */
    for (int i = 0; i < 4096 && origins[i].s; i++)
        if (origins[i].s == s) return origins[i].origin;
    return s;
}
static void set_origin(CUstream s, CUstream origin) {   /* cb_lock held */
    int i = 0;
    while (i < 4095 && origins[i].s && origins[i].s != s) i++;
    origins[i].s = s;
    origins[i].origin = origin;
}
static CUresult f_addcallback(CUstream s, CUstreamCallback fn, void *data, unsigned f) {
    if (f) return CUDA_ERROR_INVALID_VALUE;
    struct fake_cb *c = malloc(sizeof *c), **p;
    c->fn = fn; c->data = data; c->next = NULL;
    pthread_mutex_lock(&cb_lock);
    c->s = origin_of(s);
    c->seq = ++cb_seq;
    for (p = &cbs; *p; p = &(*p)->next) {}
    *p = c;
    pthread_mutex_unlock(&cb_lock);
    return 0;
}
struct fake_fire { struct fake_cb *list; CUresult status; };
static void *fire_thread(void *arg) {
    struct fake_fire *f = arg;
    while (f->list) {
        struct fake_cb *c = f->list;
        f->list = c->next;
        c->fn(c->s, f->status, c->data);
        free(c);
    }
    return NULL;
}
int fake_fire_callbacks(unsigned long long stream, int status, int n) {
    struct fake_fire f = {NULL, (CUresult)status};
    struct fake_cb **tail = &f.list, **p;
    int k = 0;
    pthread_mutex_lock(&cb_lock);
    for (p = &cbs; *p && (n <= 0 || k < n);) {
        if (stream == 0 || (unsigned long long)(uintptr_t)(*p)->s == stream) {
            struct fake_cb *c = *p;
            *p = c->next;
            c->next = NULL;
            *tail = c; tail = &c->next;
            k++;
        } else {
            p = &(*p)->next;
        }
    }
    pthread_mutex_unlock(&cb_lock);
    pthread_t t;
    pthread_create(&t, NULL, fire_thread, &f);
    pthread_join(t, NULL);
    return k;
}
int fake_fire_nth(int i, int status) {   /* only the i-th queued (from 0): 1, or 0 */
    struct fake_fire f = {NULL, (CUresult)status};
    struct fake_cb **p;
    pthread_mutex_lock(&cb_lock);
    for (p = &cbs; *p && i > 0; p = &(*p)->next, i--) {}
    if ((f.list = *p) != NULL) {
        *p = f.list->next;
        f.list->next = NULL;
    }
    pthread_mutex_unlock(&cb_lock);
    if (f.list == NULL) return 0;
    pthread_t t;
    pthread_create(&t, NULL, fire_thread, &f);
    pthread_join(t, NULL);
    return 1;
}
unsigned long long fake_callback_stream(int i) {   /* the stream (origin) of the i-th queued */
    unsigned long long s = 0;
    pthread_mutex_lock(&cb_lock);
    struct fake_cb *c = cbs;
    for (; c && i > 0; i--) c = c->next;
    if (c) s = (unsigned long long)(uintptr_t)c->s;
    pthread_mutex_unlock(&cb_lock);
    return s;
}
int fake_pending_callbacks(void) {
    int k = 0;
    pthread_mutex_lock(&cb_lock);
    for (struct fake_cb *c = cbs; c; c = c->next) k++;
    pthread_mutex_unlock(&cb_lock);
    return k;
}
/* cuStreamQuery: busy while callbacks are queued on the stream, idle after, unless
 * fake_query_answer(stream, rc) said otherwise (rc < 0: back to that rule), e.g. a
 * stream the GPU is done with whose callback the driver has not run yet. */
static struct { int used; unsigned long long s; int rc; } query_answers[16];
int fake_query_answer(unsigned long long stream, int rc) {
    pthread_mutex_lock(&cb_lock);
    int free_slot = -1, i;
    for (i = 0; i < 16 && !(query_answers[i].used && query_answers[i].s == stream); i++)
        if (!query_answers[i].used && free_slot < 0) free_slot = i;
    if (i == 16) i = free_slot;
    if (i >= 0) {
        query_answers[i].used = rc >= 0;
        query_answers[i].s = stream;
        query_answers[i].rc = rc;
    }
    pthread_mutex_unlock(&cb_lock);
    return i >= 0 ? 0 : -1;
}
/* Busy while a callback queued on s up to number `upto` is still queued. */
static CUresult query_upto(CUstream s, unsigned long long upto) {
    CUresult rc = CUDA_SUCCESS;
    pthread_mutex_lock(&cb_lock);
    s = origin_of(s);
    unsigned long long h = (unsigned long long)(uintptr_t)s;
    for (struct fake_cb *c = cbs; c; c = c->next)
        if (c->s == s && c->seq <= upto) rc = CUDA_ERROR_NOT_READY;
    for (int i = 0; i < 16; i++)
        if (query_answers[i].used && query_answers[i].s == h) rc = (CUresult)query_answers[i].rc;
    pthread_mutex_unlock(&cb_lock);
    return rc;
}
static CUresult f_streamquery(CUstream s) { return query_upto(s, ~0ULL); }

/* Events: one recorded on a stream is done once the callbacks queued on its origin
 * before the record and the first one queued after it have fired (a watch records
 * its mark, then queues its callback: the stand-in's stream work is its callbacks).
 * fake_query_answer() overrides them as it does their stream. */
struct fake_event { CUstream s; unsigned long long upto; };
static CUresult f_eventcreate(CUevent *e, unsigned f) {
    (void)f;
    struct fake_event *ev = calloc(1, sizeof *ev);
    if (!ev) return CUDA_ERROR_OUT_OF_MEMORY;
    *e = (CUevent)ev;
    return 0;
}
static CUresult f_eventrecord(CUevent e, CUstream s) {
    struct fake_event *ev = (struct fake_event *)e;
    pthread_mutex_lock(&cb_lock);
    ev->s = origin_of(s);
    ev->upto = cb_seq + 1;
    pthread_mutex_unlock(&cb_lock);
    return 0;
}
static CUresult f_eventquery(CUevent e) {
    struct fake_event *ev = (struct fake_event *)e;
    return ev->upto ? query_upto(ev->s, ev->upto) : CUDA_SUCCESS;
}
static CUresult f_eventdestroy(CUevent e) { free(e); return 0; }
static CUresult f_streamwaitevent(CUstream s, CUevent e, unsigned f) {
    struct fake_event *ev = (struct fake_event *)e;
    if (f) return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&cb_lock);
    set_origin(s, ev->upto ? ev->s : s);
    pthread_mutex_unlock(&cb_lock);
    return 0;
}
static CUresult f_streamgetctx(CUstream s, CUcontext *c) { (void)s; *c = current; return current ? 0 : CUDA_ERROR_INVALID_CONTEXT; }
static CUresult f_iscapturing(CUstream s, CUstreamCaptureStatus *st) { (void)s; *st = CU_STREAM_CAPTURE_STATUS_NONE; return 0; }

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
static CUresult f_elapsed(float *ms, CUevent a, CUevent b) { (void)a; (void)b; *ms = 0; return 0; }

/* CUDA arrays: the descriptor and the bytes, rows tightly packed */
struct fake_array { size_t row, rows; unsigned char *data; };
static size_t format_bytes(CUarray_format f) {
    switch (f) {
    case CU_AD_FORMAT_UNSIGNED_INT8: case CU_AD_FORMAT_SIGNED_INT8: return 1;
    case CU_AD_FORMAT_UNSIGNED_INT16: case CU_AD_FORMAT_SIGNED_INT16: case CU_AD_FORMAT_HALF: return 2;
    default: return 4;
    }
}
static CUresult f_array3dcreate(CUarray *out, const CUDA_ARRAY3D_DESCRIPTOR *d) {
    struct fake_array *a = calloc(1, sizeof *a);
    if (!a) return CUDA_ERROR_OUT_OF_MEMORY;
    a->row = format_bytes(d->Format) * d->NumChannels * d->Width;
    a->rows = d->Height ? d->Height : 1;
    if (!(a->data = calloc(a->row * a->rows * (d->Depth ? d->Depth : 1), 1))) {
        free(a);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *out = (CUarray)a;
    return 0;
}
static CUresult f_arraydestroy(CUarray h) {
    struct fake_array *a = (struct fake_array *)h;
    free(a->data);
    free(a);
    return 0;
}

/* 2D and 3D copies between host, device (host memory here) and array ends */
struct end { CUmemorytype type; const void *host; CUdeviceptr dev; CUarray arr; size_t x, y, z, pitch, height; };
#define END3(c, p) ((struct end){(c)->p##MemoryType, (c)->p##Host, (c)->p##Device, (c)->p##Array, \
                                 (c)->p##XInBytes, (c)->p##Y, (c)->p##Z, (c)->p##Pitch, (c)->p##Height})
#define END2(c, p) ((struct end){(c)->p##MemoryType, (c)->p##Host, (c)->p##Device, (c)->p##Array, \
                                 (c)->p##XInBytes, (c)->p##Y, 0, (c)->p##Pitch, 1})
static unsigned char *end_base(const struct end *e, size_t *pitch, size_t *height) {
    if (e->type == CU_MEMORYTYPE_ARRAY) {
        struct fake_array *a = (struct fake_array *)e->arr;
        *pitch = a->row; *height = a->rows;
        return a->data;
    }
    *pitch = e->pitch; *height = e->height;
    return e->type == CU_MEMORYTYPE_HOST ? (unsigned char *)e->host : (unsigned char *)(uintptr_t)e->dev;
}
static CUresult copy3d(struct end s, struct end d, size_t w, size_t h, size_t depth) {
    size_t sp, sh, dp, dh;
    unsigned char *sb = end_base(&s, &sp, &sh), *db = end_base(&d, &dp, &dh);
    if (!sb || !db) return CUDA_ERROR_INVALID_VALUE;
    for (size_t z = 0; z < depth; z++)
        for (size_t y = 0; y < h; y++)
            memmove(db + ((d.z + z) * dh + d.y + y) * dp + d.x, sb + ((s.z + z) * sh + s.y + y) * sp + s.x, w);
    return 0;
}
static CUresult f_memcpy2d(const CUDA_MEMCPY2D *c) { return copy3d(END2(c, src), END2(c, dst), c->WidthInBytes, c->Height, 1); }
static CUresult f_memcpy2d_async(const CUDA_MEMCPY2D *c, CUstream s) { (void)s; return f_memcpy2d(c); }
static CUresult f_memcpy3d(const CUDA_MEMCPY3D *c) { return copy3d(END3(c, src), END3(c, dst), c->WidthInBytes, c->Height, c->Depth); }
static CUresult f_memcpy3d_async(const CUDA_MEMCPY3D *c, CUstream s) { (void)s; return f_memcpy3d(c); }
static CUresult f_memcpy3dpeer(const CUDA_MEMCPY3D_PEER *c) { return copy3d(END3(c, src), END3(c, dst), c->WidthInBytes, c->Height, c->Depth); }
static CUresult f_memcpy3dpeer_async(const CUDA_MEMCPY3D_PEER *c, CUstream s) { (void)s; return f_memcpy3dpeer(c); }

/* texture and surface objects: tokens */
static CUresult f_texcreate(CUtexObject *t, const CUDA_RESOURCE_DESC *r, const CUDA_TEXTURE_DESC *d,
                            const CUDA_RESOURCE_VIEW_DESC *v) {
    (void)r; (void)d; (void)v;
    static CUtexObject k = 0x5000;
    *t = __atomic_add_fetch(&k, 1, __ATOMIC_SEQ_CST);
    return 0;
}
static CUresult f_surfcreate(CUsurfObject *t, const CUDA_RESOURCE_DESC *r) {
    (void)r;
    static CUsurfObject k = 0x6000;
    *t = __atomic_add_fetch(&k, 1, __ATOMIC_SEQ_CST);
    return 0;
}

/* the JIT linker: its image is its last input */
struct fake_link { char *data; };
static CUresult f_linkcreate(unsigned n, CUjit_option *o, void **v, CUlinkState *out) {
    (void)n; (void)o; (void)v;
    return (*out = calloc(1, sizeof(struct fake_link))) ? 0 : CUDA_ERROR_OUT_OF_MEMORY;
}
static CUresult f_linkadddata(CUlinkState st, CUjitInputType t, void *data, size_t size, const char *name,
                              unsigned n, CUjit_option *o, void **v) {
    (void)t; (void)name; (void)n; (void)o; (void)v;
    struct fake_link *l = (struct fake_link *)st;
    char *copy = malloc(size + 1);
    if (!copy) return CUDA_ERROR_OUT_OF_MEMORY;
    memcpy(copy, data, size);
    copy[size] = '\0';
    free(l->data);
    l->data = copy;
    return 0;
}
static CUresult f_linkcomplete(CUlinkState st, void **image, size_t *size) {
    struct fake_link *l = (struct fake_link *)st;
    if (!l->data) return CUDA_ERROR_INVALID_VALUE;
    *image = l->data; *size = strlen(l->data) + 1;
    return 0;
}
static CUresult f_linkdestroy(CUlinkState st) {
    struct fake_link *l = (struct fake_link *)st;
    free(l->data);
    free(l);
    return 0;
}

/* IPC: a handle's first 8 bytes are the pointer it opens */
static CUresult f_ipcopen(CUdeviceptr *p, CUipcMemHandle h, unsigned f) {
    (void)f;
    memcpy(p, h.reserved, sizeof *p);
    return 0;
}

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
    {"cuFuncGetAttribute", f_fnattr}, {"cuMemAlloc", f_alloc}, {"cuMemFree", f_free},
    {"cuPointerGetAttribute", f_ptrattr},
    {"cuMemHostRegister", f_register}, {"cuMemHostUnregister", f_unregister},
    {"cuMemHostAlloc", f_hostalloc}, {"cuMemFreeHost", f_freehost},
    {"cuMemHostGetDevicePointer", f_hostdevptr},
    {"cuMemcpyHtoD", f_htod}, {"cuMemcpyDtoH", f_dtoh},
    {"cuMemcpyHtoDAsync", f_htod_async}, {"cuMemcpyDtoHAsync", f_dtoh_async},
    {"cuStreamCreate", f_streamcreate}, {"cuStreamCreateWithPriority", f_streamcreate_prio}, {"cuStreamDestroy", ok}, {"cuStreamSynchronize", ok},
    {"cuStreamQuery", f_streamquery}, {"cuStreamWaitEvent", f_streamwaitevent}, {"cuStreamAddCallback", f_addcallback},
    {"cuStreamGetCtx", f_streamgetctx}, {"cuStreamIsCapturing", f_iscapturing},
    {"cuLaunchKernel", f_launch}, {"cuEventCreate", f_eventcreate}, {"cuEventRecord", f_eventrecord},
    {"cuEventSynchronize", ok}, {"cuEventDestroy", f_eventdestroy}, {"cuEventQuery", f_eventquery}, {"cuEventElapsedTime", f_elapsed},
    {"cuArray3DCreate", f_array3dcreate}, {"cuArrayDestroy", f_arraydestroy},
    {"cuMemcpy2D", f_memcpy2d}, {"cuMemcpy2DUnaligned", f_memcpy2d}, {"cuMemcpy2DAsync", f_memcpy2d_async},
    {"cuMemcpy3D", f_memcpy3d}, {"cuMemcpy3DAsync", f_memcpy3d_async},
    {"cuMemcpy3DPeer", f_memcpy3dpeer}, {"cuMemcpy3DPeerAsync", f_memcpy3dpeer_async},
    {"cuTexObjectCreate", f_texcreate}, {"cuTexObjectDestroy", ok},
    {"cuSurfObjectCreate", f_surfcreate}, {"cuSurfObjectDestroy", ok},
    {"cuLinkCreate", f_linkcreate}, {"cuLinkAddData", f_linkadddata},
    {"cuLinkComplete", f_linkcomplete}, {"cuLinkDestroy", f_linkdestroy},
    {"cuIpcOpenMemHandle", f_ipcopen}, {"cuIpcCloseMemHandle", ok},
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
