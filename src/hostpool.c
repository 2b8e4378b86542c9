/* SPDX-License-Identifier: MIT */
/* Host pool: the memory of the large NumPy arrays barecuda makes itself (the
 * array GPUArray.get() returns when given none), kept for the next one.
 *
 * Why: a copy into a new array is a copy into memory the kernel has not yet
 * given the process, so every page faults and is zeroed on the way; on the H100
 * machine that made a 256 MiB get() into a new array take 10-12 ms against 6 ms
 * into an existing one and 4.9 ms into pinned memory.  Programs that call get()
 * in a loop drop the last result as they make the next one, so the memory of
 * the last-but-one result is free again when the next is made: kept here, it is
 * handed out again without a fault, and once handed out a second time it is also
 * page-locked (cuMemHostRegister, portable), so the next copies into it go
 * straight to the DMA at the pinned rate.
 *
 * How: _host_empty() makes its array with a NumPy memory handler (NumPy >= 1.22)
 * set only around that allocation.  The array owns its memory as any NumPy
 * array does (base None, OWNDATA, resize() works); NumPy returns the memory
 * through the handler's free, which puts it back here.  Buffers are anonymous
 * mappings aligned to 2 MiB with huge pages advised.  Free buffers past the
 * budget (BARECUDA_HOST_POOL_MIB, default a sixteenth of the memory, at most
 * 2 GiB; 0 turns the pool off) are unregistered and unmapped, least recently
 * freed first; registered bytes are held to the same budget.  A registration
 * that ended with its context is made again on the next hand-out (the memory
 * stays ours, so its address cannot be anybody else's meanwhile).  Async
 * copies keep NumPy's pageable arrays (gpuarray.py): page-locked memory would
 * make them truly asynchronous.  register_host_memory() on a pool array ends
 * the pool's registration (release_registration, the hook the pool registers
 * with src/hostmem.c) and makes the program's. */
#include "barecuda/argparse.h"
#include "barecuda/context.h"
#include "barecuda/error.h"
#include "barecuda/loader.h"
#include "barecuda/memory.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define HUGE_PAGE ((size_t)2 << 20)
#define POOL_MIN ((size_t)8 << 20)   /* smaller arrays come from NumPy's own allocator */
#define BUDGET_MAX ((size_t)2 << 30)

typedef struct {
    char *p;
    size_t cap;         /* mapped bytes, a multiple of HUGE_PAGE */
    unsigned long uses; /* times handed out */
    int in_use;
    int registered;     /* counted in pool.registered (the driver may have dropped it) */
    unsigned long long freed_at;
} buffer;

static struct {
    pthread_mutex_t mu;
    buffer *bufs;
    size_t n, room;
    size_t free_bytes, registered;
    size_t budget;
    unsigned long long clock; /* counts frees: the age of a free buffer */
    unsigned long long hits, misses, registrations, evictions;
} pool = {.mu = PTHREAD_MUTEX_INITIALIZER};

static pthread_once_t budget_once = PTHREAD_ONCE_INIT;
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

/* A child forked while another thread held the lock must not wait for it. */
static void
pool_after_fork(void)
{
    pthread_mutex_init(&pool.mu, NULL);
}

static void
register_atfork(void)
{
    pthread_atfork(NULL, NULL, pool_after_fork);
}

static void
budget_from_env(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
    size_t ram = pages > 0 && page > 0 ? (size_t)pages * (size_t)page : (size_t)8 << 30;
    size_t b = ram / 16 < BUDGET_MAX ? ram / 16 : BUDGET_MAX;
    const char *v = getenv("BARECUDA_HOST_POOL_MIB");
    if (v != NULL && *v != '\0') {
        char *end;
        long long mib = strtoll(v, &end, 10);
        if (*end == '\0' && mib >= 0 && mib <= (1LL << 30))
            b = (size_t)mib << 20;
    }
    pool.budget = b;
}

/* ------------------------------------------------------------ buffers */

static buffer *
find(const void *p)
{
    for (size_t i = 0; i < pool.n; i++)
        if (pool.bufs[i].p == p)
            return &pool.bufs[i];
    return NULL;
}

/* A 2 MiB-aligned anonymous mapping of `cap` bytes with huge pages advised. */
static char *
map_buffer(size_t cap)
{
    size_t span = cap + HUGE_PAGE;
    char *raw = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED)
        return NULL;
    char *p = (char *)(((uintptr_t)raw + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1));
    if (p > raw)
        munmap(raw, (size_t)(p - raw));
    if (p + cap < raw + span)
        munmap(p + cap, (size_t)(raw + span - (p + cap)));
    madvise(p, cap, MADV_HUGEPAGE);
    return p;
}

/* The driver lets go of a buffer's pages and the mapping goes; no lock held. */
static void
drop_buffer(buffer b)
{
    if (b.registered && bc_drv_ready && !bc_forked_child && bc_host_is_known(b.p))
        bc_drv.cuMemHostUnregister(b.p);
    munmap(b.p, b.cap);
}

/* Move the free buffers past `keep` bytes (oldest first) into out[]; lock held.
 * Returns how many. */
static size_t
evict_locked(size_t keep, buffer *out, size_t most)
{
    size_t k = 0;
    while (pool.free_bytes > keep && k < most) {
        size_t oldest = pool.n;
        for (size_t i = 0; i < pool.n; i++)
            if (!pool.bufs[i].in_use &&
                (oldest == pool.n || pool.bufs[i].freed_at < pool.bufs[oldest].freed_at))
                oldest = i;
        if (oldest == pool.n)
            break;
        buffer b = pool.bufs[oldest];
        pool.free_bytes -= b.cap;
        if (b.registered)
            pool.registered -= b.cap;
        pool.bufs[oldest] = pool.bufs[--pool.n];
        pool.evictions++;
        out[k++] = b;
    }
    return k;
}

/* Evict down to `keep` free bytes; takes the lock. */
static void
trim(size_t keep)
{
    buffer victims[16];
    size_t k;
    do {
        pthread_mutex_lock(&pool.mu);
        k = evict_locked(keep, victims, BC_COUNT(victims));
        pthread_mutex_unlock(&pool.mu);
        for (size_t i = 0; i < k; i++)
            drop_buffer(victims[i]);
    } while (k == BC_COUNT(victims));
}

/* A buffer of at least `size` bytes: a free one not much larger (no fault, no
 * zeroing), else a new mapping.  *reused says which. */
static void *
pool_take(size_t size, int *reused)
{
    if (size == 0 || size > (size_t)PY_SSIZE_T_MAX - HUGE_PAGE)
        return NULL;
    size_t cap = (size + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1);
    size_t most = cap + cap / 4;
    pthread_mutex_lock(&pool.mu);
    buffer *best = NULL;
    for (size_t i = 0; i < pool.n; i++) {
        buffer *b = &pool.bufs[i];
        if (!b->in_use && b->cap >= cap && b->cap <= most &&
            (best == NULL || b->cap < best->cap ||
             (b->cap == best->cap && b->freed_at > best->freed_at)))
            best = b;
    }
    if (best != NULL) {
        best->in_use = 1;
        best->uses++;
        pool.free_bytes -= best->cap;
        pool.hits++;
        char *p = best->p;
        pthread_mutex_unlock(&pool.mu);
        *reused = 1;
        return p;
    }
    pool.misses++;
    pthread_mutex_unlock(&pool.mu);
    char *p = map_buffer(cap);
    if (p == NULL)
        return NULL;
    pthread_mutex_lock(&pool.mu);
    if (pool.n == pool.room) {
        size_t room = pool.room ? 2 * pool.room : 8;
        buffer *grown = realloc(pool.bufs, room * sizeof *grown);
        if (grown == NULL) {
            pthread_mutex_unlock(&pool.mu);
            munmap(p, cap);
            return NULL;
        }
        pool.bufs = grown;
        pool.room = room;
    }
    pool.bufs[pool.n++] = (buffer){.p = p, .cap = cap, .uses = 1, .in_use = 1};
    pthread_mutex_unlock(&pool.mu);
    *reused = 0;
    return p;
}

/* Memory back from NumPy (or from a failed allocation): kept while the free
 * buffers fit the budget.  Memory that is not ours came from malloc. */
static void
pool_give(void *p)
{
    if (p == NULL)
        return;
    pthread_mutex_lock(&pool.mu);
    buffer *b = find(p);
    if (b == NULL) {
        pthread_mutex_unlock(&pool.mu);
        free(p);
        return;
    }
    b->in_use = 0;
    b->freed_at = ++pool.clock;
    pool.free_bytes += b->cap;
    size_t budget = pool.budget;
    pthread_mutex_unlock(&pool.mu);
    trim(budget);
}

/* ------------------------------------------------------------ the NumPy handler */

static void *
h_malloc(void *ctx, size_t size)
{
    BC_UNUSED(ctx);
    int reused;
    return size < POOL_MIN ? malloc(size ? size : 1) : pool_take(size, &reused);
}

static void *
h_calloc(void *ctx, size_t nelem, size_t elsize)
{
    BC_UNUSED(ctx);
    size_t size;
    if (__builtin_mul_overflow(nelem, elsize, &size))
        return NULL;
    if (size < POOL_MIN)
        return calloc(nelem ? nelem : 1, elsize ? elsize : 1);
    int reused = 0;
    void *p = pool_take(size, &reused);
    if (p != NULL && reused) /* a new mapping is zero already */
        memset(p, 0, size);
    return p;
}

static void *
h_realloc(void *ctx, void *p, size_t size)
{
    pthread_mutex_lock(&pool.mu);
    buffer *b = p ? find(p) : NULL;
    size_t cap = b ? b->cap : 0;
    pthread_mutex_unlock(&pool.mu);
    if (b == NULL) /* malloc's memory stays malloc's */
        return realloc(p, size ? size : 1);
    if (size <= cap && size >= cap / 2)
        return p; /* fits, and not mostly wasted */
    void *q = h_malloc(ctx, size);
    if (q == NULL)
        return NULL;
    memcpy(q, p, cap < size ? cap : size);
    pool_give(p);
    return q;
}

static void
h_free(void *ctx, void *p, size_t size)
{
    BC_UNUSED(ctx);
    BC_UNUSED(size);
    pool_give(p);
}

static PyDataMem_Handler pool_handler = {
    "barecuda_host_pool",
    1,
    {NULL, h_malloc, h_calloc, h_realloc, h_free},
};

/* ------------------------------------------------------------ Python side */

/* Page-lock a buffer handed out a second time (the program repeats), unless the
 * driver knows it already or the budget is spent.  Failures leave it pageable:
 * copies into it are staged as for any array. */
static void
maybe_register(char *p)
{
    pthread_mutex_lock(&pool.mu);
    buffer *b = find(p);
    int want = b != NULL && b->uses >= 2 && (b->registered || pool.registered + b->cap <= pool.budget);
    size_t cap = b ? b->cap : 0;
    int counted = b ? b->registered : 0;
    pthread_mutex_unlock(&pool.mu);
    CUcontext ctx = NULL;
    if (!want || !bc_drv_ready || bc_forked_child || bc_host_is_known(p) ||
        bc_drv.cuCtxGetCurrent(&ctx) != CUDA_SUCCESS || ctx == NULL)
        return;
    CUresult rc;
    Py_BEGIN_ALLOW_THREADS
    rc = bc_drv.cuMemHostRegister(p, cap, CU_MEMHOSTREGISTER_PORTABLE);
    Py_END_ALLOW_THREADS
    if (rc != CUDA_SUCCESS)
        return;
    pthread_mutex_lock(&pool.mu);
    pool.registrations++;
    if ((b = find(p)) != NULL && !counted) {
        b->registered = 1;
        pool.registered += cap;
    }
    pthread_mutex_unlock(&pool.mu);
}

/* If p lies in host-pool memory the pool page-locked, end that registration, so
 * that the program can register the memory itself (register_host_memory, through
 * the hook registered with src/hostmem.c); 1 when one ended. */
static int
release_registration(const void *p)
{
    pthread_mutex_lock(&pool.mu);
    char *start = NULL;
    for (size_t i = 0; i < pool.n; i++) {
        buffer *b = &pool.bufs[i];
        if (b->registered && (const char *)p >= b->p && (const char *)p < b->p + b->cap) {
            start = b->p;
            b->registered = 0;
            pool.registered -= b->cap;
            break;
        }
    }
    pthread_mutex_unlock(&pool.mu);
    return start != NULL && bc_drv_ready && !bc_forked_child &&
           bc_drv.cuMemHostUnregister(start) == CUDA_SUCCESS;
}

PyDoc_STRVAR(host_empty_doc,
"_host_empty(shape, dtype=None, order='C')\n--\n\n"
"Private, for GPUArray.get(): numpy.empty(shape, dtype, order), whose memory\n"
"comes from barecuda's host pool when it is 8 MiB or more (and the pool is on):\n"
"kept when the array is collected, handed out again without page faults, and\n"
"page-locked from its second use so that copies into it run at the pinned rate.");

static PyObject *
bc_host_empty(PyObject *m, PyObject *args, PyObject *kwargs)
{
    BC_UNUSED(m);
    static char *kwlist[] = {"shape", "dtype", "order", NULL};
    PyObject *shape, *dtype = NULL, *order = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|OO:_host_empty", kwlist, &shape, &dtype,
                                     &order))
        return NULL;
    bc_ArraySpec s;
    if (bc_array_spec_parse("_host_empty", shape, dtype, order, &s) < 0)
        return NULL;
    pthread_once(&budget_once, budget_from_env);
    pthread_mutex_lock(&pool.mu);
    int pooled = s.nbytes >= POOL_MIN && pool.budget > 0;
    pthread_mutex_unlock(&pool.mu);
    PyObject *old = NULL, *capsule = NULL, *arr = NULL;
    if (pooled) {
        if ((capsule = PyCapsule_New(&pool_handler, "mem_handler", NULL)) == NULL ||
            (old = PyDataMem_SetHandler(capsule)) == NULL)
            goto done;
    }
    PyArray_Descr *descr = s.descr;
    s.descr = NULL; /* PyArray_Empty steals it */
    arr = PyArray_Empty(s.dims.len, s.dims.ptr, descr, s.fortran);
    if (pooled) {
        PyObject *back = PyDataMem_SetHandler(old);
        if (back == NULL)
            Py_CLEAR(arr);
        Py_XDECREF(back);
        if (arr != NULL)
            maybe_register(PyArray_DATA((PyArrayObject *)arr));
    }
done:
    Py_XDECREF(old);
    Py_XDECREF(capsule);
    bc_array_spec_clear(&s);
    return arr;
}

static PyObject *
pool_info(void)
{
    pthread_mutex_lock(&pool.mu);
    size_t in_use = 0;
    for (size_t i = 0; i < pool.n; i++)
        in_use += pool.bufs[i].in_use;
    PyObject *d = Py_BuildValue(
        "{snsnsnsnsnsKsKsKsK}", "buffers", (Py_ssize_t)pool.n, "in_use", (Py_ssize_t)in_use,
        "free_bytes", (Py_ssize_t)pool.free_bytes, "registered_bytes", (Py_ssize_t)pool.registered,
        "budget", (Py_ssize_t)pool.budget, "hits", pool.hits, "misses", pool.misses,
        "registrations", pool.registrations, "evictions", pool.evictions);
    pthread_mutex_unlock(&pool.mu);
    return d;
}

PyDoc_STRVAR(host_pool_doc,
"_host_pool(budget_mib=None)\n--\n\n"
"Private: the host pool's counts as a dict (buffers, in_use, free_bytes,\n"
"registered_bytes, budget, hits, misses, registrations, evictions).  With\n"
"`budget_mib`, first sets the budget (0 turns the pool off) and lets go of the\n"
"free buffers past it.");

static PyObject *
bc_host_pool(PyObject *m, PyObject *args, PyObject *kwargs)
{
    BC_UNUSED(m);
    static char *kwlist[] = {"budget_mib", NULL};
    PyObject *mib = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|O:_host_pool", kwlist, &mib))
        return NULL;
    pthread_once(&budget_once, budget_from_env);
    if (mib != Py_None) {
        long long v;
        if (bc_arg_long(mib, "budget_mib", 0, 1LL << 30, &v) < 0)
            return NULL;
        pthread_mutex_lock(&pool.mu);
        pool.budget = (size_t)v << 20;
        pthread_mutex_unlock(&pool.mu);
        Py_BEGIN_ALLOW_THREADS
        trim((size_t)v << 20);
        Py_END_ALLOW_THREADS
    }
    return pool_info();
}

static PyMethodDef hostpool_methods[] = {
    {"_host_empty", (PyCFunction)(void (*)(void))bc_host_empty, METH_VARARGS | METH_KEYWORDS,
     host_empty_doc},
    {"_host_pool", (PyCFunction)(void (*)(void))bc_host_pool, METH_VARARGS | METH_KEYWORDS,
     host_pool_doc},
    {NULL, NULL, 0, NULL},
};

int
bc_hostpool_setup(PyObject *m, bc_State *Py_UNUSED(st))
{
    pthread_once(&atfork_once, register_atfork);
    bc_hostmem_on_register_clash(release_registration);
    if (PyModule_AddIntConstant(m, "_HOST_POOL_MIN", (long)POOL_MIN) < 0)
        return -1;
    return PyModule_AddFunctions(m, hostpool_methods);
}
