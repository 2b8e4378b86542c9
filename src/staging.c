/* SPDX-License-Identifier: MIT */
/* Staged copies between pageable host memory and the device, for GPUArray's
 * to_gpu/set/get and the synchronous memcpy_htod/memcpy_dtoh (src/memcpy.c,
 * through bc_staged_try; driver.to_device/from_device and the In/Out/InOut
 * argument handlers copy with those).
 *
 * The driver copies pageable memory through one internal bounce buffer with
 * one CPU thread, and a copy into freshly allocated memory also pays a page
 * fault per page on that thread: about 3 GB/s into a new NumPy array.  Here
 * the transfer is cut into `chunk`-byte pieces that up to `workers` threads
 * take in turn; each thread owns `depth` pinned buffers, round-robin with one
 * event each, and overlaps its host memcpy (where the page faults happen, now
 * in parallel) with the DMA of its other buffers.  A copy to the host whose
 * destination is not yet in memory (a new array) also starts `prefault` threads
 * that populate its pages (madvise MADV_POPULATE_WRITE, which never changes the
 * contents) ahead of the workers, so the workers mostly find their pages
 * present.  A copy to the host writes an array already in memory with
 * non-temporal stores (copy_nt).  The DMA runs in order on the caller's
 * stream, and the call returns when every byte has arrived, as
 * cuMemcpyHtoD/cuMemcpyDtoH do.
 *
 * The pinned buffers (workers * depth * chunk bytes, our own memory registered
 * portable on the first large copy, see stage_buffers) are shared by the
 * process behind a mutex: a copy that finds them busy, a small copy, host
 * memory the driver already knows (pinned, registered or managed), and any copy
 * while the buffers cannot be page-locked go straight to the driver
 * (bc_staged_try decides, for every caller).  GPUArray registers a large array the program keeps copying
 * (barecuda/_kept.py, with _host_register below), so that its copies run at
 * the pinned rate.  The worker threads are kept between copies (pool_run).
 *
 * Measured on the H100 machine (16 cores, 300 MiB of L3) and left out, slower:
 * non-temporal stores into the staging buffers (to_gpu 0.81 -> 0.70x pinned);
 * a stream per worker, made to wait for the caller's (to_gpu 0.84 -> 0.75x, get()
 * into an existing array 0.88 -> 0.80x); quarter-size pieces at both ends of a
 * copy (to_gpu 0.86 -> 0.84x, no change to get()); 4 MiB chunks (to_gpu 0.73x);
 * a ring of 8-16 MiB slots, each filled by several workers and sent as one DMA
 * (to_gpu 0.79 -> 0.53-0.69x: the copy engine waits for the slowest chunk of a
 * slot), although 128 DMAs of 2 MiB from pinned memory run at 0.93x the rate of
 * one 256 MiB DMA and 16 of 16 MiB at 0.99x.  What bounds to_gpu there is the
 * host's memory: a pinned DMA slows from 53 to 42 GB/s while 16 threads copy
 * host memory beside it.
 *
 * The settings come from the environment on first use (BARECUDA_STAGE_WORKERS,
 * _CHUNK_MIB, _DEPTH, _PREFAULT, _NT) and can be changed by
 * _staging_config(), so that variants can be compared in one process. */
#include "barecuda/argparse.h"
#include "barecuda/context.h"
#include "barecuda/error.h"
#include "barecuda/loader.h"
#include "barecuda/memory.h"
#include "barecuda/stream.h"
#include "barecuda/trace.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#if defined(__x86_64__)
#include <emmintrin.h> /* SSE2, in every x86-64 */
#define HAVE_COPY_NT 1
#else
#define HAVE_COPY_NT 0
#endif

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14; older kernels answer EINVAL */
#endif

#define MAX_WORKERS 16
#define MAX_DEPTH 4
#define MAX_CHUNK_MIB 64
#define PER_WORKER ((size_t)8 << 20)   /* bytes that justify one more thread */
#define MIN_STAGED ((size_t)1 << 20)   /* smaller copies go to the driver as they are */
#define MIN_PREFAULT ((size_t)16 << 20) /* smaller new destinations fault in the workers */
#define PAGE ((size_t)4096)

enum { TO_DEVICE, TO_HOST };

typedef struct {
    int workers, depth, prefault; /* prefault: threads, 0 none */
    int nt;                       /* copies to the host: non-temporal stores (x86-64) */
    size_t chunk;                 /* bytes */
} stage_config;

static pthread_mutex_t stage_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t config_once = PTHREAD_ONCE_INIT;
static stage_config cfg = {8, 2, 8, 1, (size_t)2 << 20}; /* stage_lock held to change */
static char *stage_mem;   /* cfg.workers * cfg.depth * cfg.chunk bytes (rounded up), ours,
                           * registered (see stage_buffers), or NULL */
static size_t stage_size; /* its size */

static long
env_long(const char *name, long dflt, long lo, long hi)
{
    const char *v = getenv(name);
    if (v == NULL || *v == '\0')
        return dflt;
    char *end;
    long x = strtol(v, &end, 10);
    if (*end != '\0')
        return dflt;
    return x < lo ? lo : x > hi ? hi : x;
}

static void
config_from_env(void)
{
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    /* One worker per core, up to MAX_WORKERS: on the H100 machine (16 cores) 16 workers
     * moved 256 MiB pageable at 33 GB/s against 24 GB/s with 8.  Populating helpers are
     * off by default: with 8 workers they made a copy into a new array slower (11.6 GB/s
     * against 13.9 without), the page faults of the copy itself being spread already. */
    if (cpus > 0)
        cfg.workers = (int)(cpus < MAX_WORKERS ? cpus : MAX_WORKERS);
    cfg.prefault = 0;
    cfg.workers = (int)env_long("BARECUDA_STAGE_WORKERS", cfg.workers, 1, MAX_WORKERS);
    cfg.depth = (int)env_long("BARECUDA_STAGE_DEPTH", cfg.depth, 2, MAX_DEPTH);
    cfg.prefault = (int)env_long("BARECUDA_STAGE_PREFAULT", cfg.prefault, 0, MAX_WORKERS);
    cfg.nt = (int)env_long("BARECUDA_STAGE_NT", cfg.nt, 0, 1) && HAVE_COPY_NT;
    cfg.chunk = (size_t)env_long("BARECUDA_STAGE_CHUNK_MIB", (long)(cfg.chunk >> 20), 1,
                                 MAX_CHUNK_MIB) << 20;
}

/* ---- populating a new destination ahead of the workers */

typedef struct {
    char *host;             /* the whole destination */
    size_t len, chunk;      /* its length, the workers' chunk size */
    atomic_size_t next;     /* the next chunk to populate */
    atomic_int stop;        /* the workers are done, or madvise refused */
} prefaulter;

/* Populate chunk after chunk, in the order the workers take them. */
static void *
prefault_run(void *arg)
{
    prefaulter *pf = arg;
    for (;;) {
        size_t start = atomic_fetch_add(&pf->next, 1) * pf->chunk;
        if (start >= pf->len || atomic_load(&pf->stop))
            break;
        size_t end = start + pf->chunk < pf->len ? start + pf->chunk : pf->len;
        uintptr_t lo = (uintptr_t)(pf->host + start) & ~(uintptr_t)(PAGE - 1);
        uintptr_t hi = ((uintptr_t)(pf->host + end) + PAGE - 1) & ~(uintptr_t)(PAGE - 1);
        if (madvise((void *)lo, hi - lo, MADV_POPULATE_WRITE) != 0)
            atomic_store(&pf->stop, 1); /* an old kernel, or odd memory: the workers fault */
    }
    return NULL;
}

/* Whether the page holding p is not in memory yet (a new array's). */
static int
page_missing(const char *p)
{
    unsigned char vec = 0;
    void *page = (void *)((uintptr_t)p & ~(uintptr_t)(PAGE - 1));
    return mincore(page, PAGE, &vec) == 0 && !(vec & 1);
}

/* ---- the host side of a chunk copied to the host
 *
 * A plain memcpy of a 2 MiB chunk into the program's array writes through the
 * cache: every destination line is first read from memory (read for
 * ownership), then written back, so the copy moves three times its size over
 * the memory bus.  Non-temporal stores write whole lines to memory without
 * reading them: two times the size.  glibc uses them only for copies larger
 * than a share of the last-level cache, above our chunk size.  Copies to the
 * device keep memcpy: their destination is a staging buffer the DMA reads next,
 * which it finds in the cache (measured on the H100 machine, 300 MiB of L3:
 * to_gpu 0.81x pinned with memcpy, 0.70x with non-temporal stores). */
#if HAVE_COPY_NT
static void
copy_nt(char *dst, const char *src, size_t n)
{
    size_t head = (size_t)(-(uintptr_t)dst & 15); /* to 16-byte alignment of dst */
    if (head > n)
        head = n;
    memcpy(dst, src, head);
    dst += head, src += head, n -= head;
    size_t body = n & ~(size_t)63;
    for (size_t i = 0; i < body; i += 64) {
        __m128i a = _mm_loadu_si128((const __m128i *)(const void *)(src + i));
        __m128i b = _mm_loadu_si128((const __m128i *)(const void *)(src + i + 16));
        __m128i c = _mm_loadu_si128((const __m128i *)(const void *)(src + i + 32));
        __m128i d = _mm_loadu_si128((const __m128i *)(const void *)(src + i + 48));
        _mm_stream_si128((__m128i *)(void *)(dst + i), a);
        _mm_stream_si128((__m128i *)(void *)(dst + i + 16), b);
        _mm_stream_si128((__m128i *)(void *)(dst + i + 32), c);
        _mm_stream_si128((__m128i *)(void *)(dst + i + 48), d);
    }
    _mm_sfence(); /* the stores are weakly ordered: all done before the caller reads */
    memcpy(dst + body, src + body, n - body);
}
#endif

static void
copy_out(char *dst, const char *src, size_t n, int nt)
{
#if HAVE_COPY_NT
    if (nt) {
        copy_nt(dst, src, n);
        return;
    }
#endif
    (void)nt;
    memcpy(dst, src, n);
}

/* ---- the workers */

typedef struct {
    int dir, depth, nt;
    CUcontext ctx;
    CUstream stream;
    CUdeviceptr dev;     /* the whole copy: */
    char *host;
    size_t len, chunk;
    atomic_size_t *next; /* the next chunk to take, shared by the copy's workers */
    char *buf[MAX_DEPTH];
    CUresult rc;
} worker;

/* Take the copy's chunks from w->next until none is left, w->depth in flight:
 * the host side of one chunk overlaps the DMA of the others.  Returns with no
 * DMA pending on its buffers. */
static void *
worker_run(void *arg)
{
    worker *w = arg;
    const int depth = w->depth;
    const size_t chunk = w->chunk, nchunks = (w->len + chunk - 1) / chunk;
    CUevent ev[MAX_DEPTH] = {NULL};
    size_t slot[MAX_DEPTH]; /* the chunk each buffer holds */
    int pending[MAX_DEPTH] = {0};
    CUresult rc = bc_drv.cuCtxSetCurrent(w->ctx);
    for (int k = 0; k < depth && rc == CUDA_SUCCESS; k++)
        rc = bc_drv.cuEventCreate(&ev[k], CU_EVENT_DISABLE_TIMING);
#define CHUNK_LEN(i) ((i) + 1 < nchunks ? chunk : w->len - (i) * chunk)
    if (w->dir == TO_DEVICE) {
        for (size_t j = 0; rc == CUDA_SUCCESS; j++) {
            size_t i = atomic_fetch_add(w->next, 1);
            if (i >= nchunks)
                break;
            int k = (int)(j % (size_t)depth);
            if (pending[k]) {
                pending[k] = 0;
                if ((rc = bc_drv.cuEventSynchronize(ev[k])) != CUDA_SUCCESS)
                    break;
            }
            memcpy(w->buf[k], w->host + i * chunk, CHUNK_LEN(i)); /* cached: the DMA reads it next */
            rc = bc_drv.cuMemcpyHtoDAsync(w->dev + i * chunk, w->buf[k], CHUNK_LEN(i), w->stream);
            if (rc == CUDA_SUCCESS && (rc = bc_drv.cuEventRecord(ev[k], w->stream)) == CUDA_SUCCESS)
                pending[k] = 1;
        }
    } else {
        /* up to depth chunks requested before the oldest is copied out */
        size_t issued = 0, done = 0;
        int more = 1;
        while (rc == CUDA_SUCCESS) {
            while (more && issued - done < (size_t)depth && rc == CUDA_SUCCESS) {
                size_t i = atomic_fetch_add(w->next, 1);
                if (i >= nchunks) {
                    more = 0;
                    break;
                }
                int k = (int)(issued % (size_t)depth);
                slot[k] = i;
                rc = bc_drv.cuMemcpyDtoHAsync(w->buf[k], w->dev + i * chunk, CHUNK_LEN(i), w->stream);
                if (rc == CUDA_SUCCESS && (rc = bc_drv.cuEventRecord(ev[k], w->stream)) == CUDA_SUCCESS)
                    pending[k] = 1;
                issued++;
            }
            if (rc != CUDA_SUCCESS || done == issued)
                break;
            int k = (int)(done % (size_t)depth);
            pending[k] = 0;
            if ((rc = bc_drv.cuEventSynchronize(ev[k])) == CUDA_SUCCESS)
                copy_out(w->host + slot[k] * chunk, w->buf[k], CHUNK_LEN(slot[k]), w->nt);
            done++;
        }
    }
#undef CHUNK_LEN
    for (int k = 0; k < depth; k++) {
        if (pending[k])
            bc_drv.cuEventSynchronize(ev[k]); /* the buffers are reused: drain even after an error */
        if (ev[k] != NULL)
            bc_drv.cuEventDestroy(ev[k]);
    }
    w->rc = rc;
    return NULL;
}

/* ---- kept worker threads
 *
 * Starting 15 threads and joining them again costs a large copy a few hundred
 * microseconds on the calling thread, before the first DMA.  So the workers are
 * threads kept from the first staged copy on, parked on a condition variable;
 * a copy hands them its parts (pool.jobs) and runs parts itself too, so it
 * never waits for a thread that could not be started.  Used by one copy at a
 * time (stage_lock).  A child process after fork() starts with none. */

static struct {
    pthread_mutex_t mu;
    pthread_cond_t go, done;
    int threads;          /* started and parked or working */
    unsigned long round;  /* bumped for every copy handed out */
    worker *jobs;         /* this round's parts */
    size_t njobs, next;   /* parts, the next one not taken */
    size_t unfinished;    /* parts taken or not, not finished */
} pool = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, PTHREAD_COND_INITIALIZER,
          0, 0, NULL, 0, 0, 0};

/* Run the parts not yet taken; pool.mu held on entry and on return. */
static void
pool_take(void)
{
    while (pool.next < pool.njobs) {
        worker *w = &pool.jobs[pool.next++];
        pthread_mutex_unlock(&pool.mu);
        worker_run(w);
        pthread_mutex_lock(&pool.mu);
        if (--pool.unfinished == 0)
            pthread_cond_signal(&pool.done);
    }
}

static void *
pool_thread(void *Py_UNUSED(arg))
{
    pthread_mutex_lock(&pool.mu);
    unsigned long seen = pool.round;
    for (;;) {
        while (pool.round == seen)
            pthread_cond_wait(&pool.go, &pool.mu);
        seen = pool.round;
        pool_take();
    }
    return NULL;
}

static void pool_forked_child(void);

static void
register_fork_handler(void)
{
    pthread_atfork(NULL, NULL, pool_forked_child);
}

static void
pool_forked_child(void)
{
    pthread_mutex_init(&pool.mu, NULL);
    pthread_cond_init(&pool.go, NULL);
    pthread_cond_init(&pool.done, NULL);
    pool.threads = 0;
    pool.jobs = NULL;
    pool.njobs = pool.next = pool.unfinished = 0;
    pthread_mutex_init(&stage_lock, NULL);
}

/* Run w[0..n-1] on the kept threads and this one; returns when all are done. */
static void
pool_run(worker *w, size_t n)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, register_fork_handler);
    pthread_mutex_lock(&pool.mu);
    while ((size_t)pool.threads + 1 < n) { /* this thread is the +1 */
        pthread_t t;
        pthread_attr_t attr;
        int ok = pthread_attr_init(&attr) == 0;
        ok = ok && pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED) == 0 &&
             pthread_create(&t, &attr, pool_thread, NULL) == 0;
        pthread_attr_destroy(&attr);
        if (!ok)
            break; /* fewer threads: this one takes more parts */
        pool.threads++;
    }
    pool.jobs = w;
    pool.njobs = n;
    pool.next = 0;
    pool.unfinished = n;
    pool.round++;
    pthread_cond_broadcast(&pool.go);
    pool_take();
    while (pool.unfinished > 0)
        pthread_cond_wait(&pool.done, &pool.mu);
    pool.jobs = NULL;
    pool.njobs = pool.next = 0;
    pthread_mutex_unlock(&pool.mu);
}

/* Whether the driver already knows this host memory (pinned, registered,
 * managed): then it is copied directly, at full speed. */
int
bc_host_is_known(void *p)
{
    unsigned int type = 0;
    return bc_drv.cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                        (CUdeviceptr)(uintptr_t)p) == CUDA_SUCCESS;
}

/* The staging buffers are our own memory, page-locked with cuMemHostRegister
 * (portable), not cuMemHostAlloc's: memory from cuMemHostAlloc is freed with
 * the context it was made in, and its address can then be handed out again by
 * a later allocation, so no check by address could tell that the buffers were
 * gone, and a copy would write past the new owner's end.  Our own memory stays
 * ours: when the registration ends with its context (cuPointerGetAttribute no
 * longer knows the address) the same memory is registered again. */
#define STAGE_ALIGN ((size_t)2 << 20)

/* stage_mem's registration, renewed if its context took it away; stage_lock held. */
static CUresult
stage_registered(void)
{
    if (bc_host_is_known(stage_mem))
        return CUDA_SUCCESS;
    CUresult rc = bc_drv.cuMemHostRegister(stage_mem, stage_size, CU_MEMHOSTREGISTER_PORTABLE);
    return rc == CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED ? CUDA_SUCCESS : rc;
}

/* The staging buffers, sized for the settings and registered; stage_lock held. */
static CUresult
stage_buffers(void)
{
    size_t want = (size_t)cfg.workers * (size_t)cfg.depth * cfg.chunk;
    want = (want + STAGE_ALIGN - 1) & ~(STAGE_ALIGN - 1);
    if (stage_mem != NULL && stage_size == want)
        return stage_registered();
    if (stage_mem != NULL) { /* the settings changed */
        if (bc_host_is_known(stage_mem))
            bc_drv.cuMemHostUnregister(stage_mem);
        free(stage_mem);
        stage_mem = NULL;
        stage_size = 0;
    }
    char *p = aligned_alloc(STAGE_ALIGN, want);
    if (p == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    /* huge pages where the kernel gives them (a hint), taken now: the buffers as
     * measured against cuMemHostAlloc's on the H100 machine, at the same speed */
    madvise(p, want, MADV_HUGEPAGE);
    memset(p, 0, want);
    CUresult rc = bc_drv.cuMemHostRegister(p, want, CU_MEMHOSTREGISTER_PORTABLE);
    if (rc != CUDA_SUCCESS) {
        free(p);
        return rc;
    }
    stage_mem = p;
    stage_size = want;
    return CUDA_SUCCESS;
}

static size_t
worker_count(size_t n, int most)
{
    size_t t = n / PER_WORKER;
    return t < 1 ? 1 : t > (size_t)most ? (size_t)most : t;
}

/* The staged copy, GIL released, when it is the better way: 1 when it was
 * made (*rc its result, *routine naming the call that failed), 0 when the
 * copy is left to the caller to make with the driver directly, nothing done:
 * a copy under MIN_STAGED bytes, host memory the driver knows (pinned,
 * registered, managed), staging buffers busy with another copy or not to be
 * had (cuMemHostRegister refused), no current context.  The one place where
 * this choice is made, for _htod_staged/_dtoh_staged and for the synchronous
 * memcpy_htod/memcpy_dtoh (src/memcpy.c). */
int
bc_staged_try(int to_host, CUdeviceptr dev, void *host_ptr, size_t n, CUstream s, CUresult *rc,
              const char **routine)
{
    const int dir = to_host ? TO_HOST : TO_DEVICE;
    char *host = host_ptr;
    if (n < MIN_STAGED)
        return 0;
    pthread_once(&config_once, config_from_env);
    CUcontext ctx = NULL;
    if (bc_drv.cuCtxGetCurrent(&ctx) != CUDA_SUCCESS || ctx == NULL || bc_host_is_known(host) ||
        pthread_mutex_trylock(&stage_lock) != 0)
        return 0;
    if (stage_buffers() != CUDA_SUCCESS) {
        pthread_mutex_unlock(&stage_lock);
        return 0; /* no page-locked memory to be had: the driver copies as it can */
    }
    const stage_config c = cfg;
    size_t nw = worker_count(n, c.workers), nchunks = (n + c.chunk - 1) / c.chunk;
    if (nw > nchunks)
        nw = nchunks;
    /* every worker takes the copy's next chunk, so a thread the host holds up
     * delays one chunk, not a fixed part of the copy: on the H100 machine, against
     * parts of n / workers bytes, get() into an existing array 0.84 -> 0.87x pinned,
     * into a new one 0.63 -> 0.72x, to_gpu the same (0.85x) with less spread */
    atomic_size_t next;
    atomic_init(&next, 0);
    worker w[MAX_WORKERS];
    pthread_t ptid[MAX_WORKERS];
    int pstarted[MAX_WORKERS] = {0};
    /* A new destination (its first page not in memory yet) is faulted in by the
     * copy: the kernel zeroes each page as it hands it over, so the page is in
     * the cache when memcpy writes it, and non-temporal stores would only push it
     * out (measured on the H100 machine: get() into a new array 0.56x pinned with
     * memcpy, 0.51x with non-temporal stores; into an existing one 0.81x with memcpy,
     * 0.86x with them). */
    int fresh = dir == TO_HOST && page_missing(host);
    for (size_t i = 0; i < nw; i++) {
        w[i] = (worker){.dir = dir, .depth = c.depth, .nt = c.nt && !fresh, .ctx = ctx, .stream = s,
                        .dev = dev, .host = host, .len = n, .chunk = c.chunk, .next = &next,
                        .rc = CUDA_SUCCESS};
        for (int k = 0; k < c.depth; k++)
            w[i].buf[k] = stage_mem + ((size_t)c.depth * i + (size_t)k) * c.chunk;
    }
    /* a new destination: its pages populated by helpers while the DMA starts */
    prefaulter pf = {.host = host, .len = n, .chunk = c.chunk};
    atomic_init(&pf.next, 0);
    atomic_init(&pf.stop, 0);
    int npf = fresh && n >= MIN_PREFAULT ? c.prefault : 0;
    for (int i = 0; i < npf; i++)
        pstarted[i] = pthread_create(&ptid[i], NULL, prefault_run, &pf) == 0;
    pool_run(w, nw);
    atomic_store(&pf.stop, 1);
    for (int i = 0; i < npf; i++)
        if (pstarted[i])
            pthread_join(ptid[i], NULL);
    pthread_mutex_unlock(&stage_lock);
    bc_drv.cuCtxSetCurrent(ctx); /* the calling thread ran a worker: keep its context */
    *routine = dir == TO_DEVICE ? "cuMemcpyHtoDAsync" : "cuMemcpyDtoHAsync";
    *rc = CUDA_SUCCESS;
    for (size_t i = 0; i < nw && *rc == CUDA_SUCCESS; i++)
        *rc = w[i].rc;
    return 1;
}

/* _htod_staged/_dtoh_staged's copy, GIL released: staged, or else the driver's
 * copy on `s`, waited for.  *routine names the call that failed. */
static CUresult
staged_copy(int dir, CUdeviceptr dev, char *host, size_t n, CUstream s, const char **routine)
{
    CUresult rc;
    if (bc_staged_try(dir == TO_HOST, dev, host, n, s, &rc, routine))
        return rc;
    *routine = dir == TO_DEVICE ? "cuMemcpyHtoDAsync" : "cuMemcpyDtoHAsync";
    rc = dir == TO_DEVICE ? bc_drv.cuMemcpyHtoDAsync(dev, host, n, s)
                          : bc_drv.cuMemcpyDtoHAsync(host, dev, n, s);
    if (rc == CUDA_SUCCESS) {
        *routine = "cuStreamSynchronize";
        rc = bc_drv.cuStreamSynchronize(s);
    }
    return rc;
}

static PyObject *
staged_entry(PyObject *m, PyObject *const *args, Py_ssize_t nargs, int dir, const char *fn)
{
    bc_State *st = bc_state_from_module(m);
    if (nargs < 2 || nargs > 3) {
        PyErr_Format(PyExc_TypeError, "%s() takes 2 or 3 arguments (%zd given)", fn, nargs);
        return NULL;
    }
    PyObject *dev_obj = dir == TO_DEVICE ? args[0] : args[1];
    PyObject *host_obj = dir == TO_DEVICE ? args[1] : args[0];
    CUdeviceptr dev;
    size_t dev_size;
    CUstream s = NULL;
    if (bc_pointer_convert(st, dev_obj, &dev, &dev_size) < 0 ||
        (nargs > 2 && bc_stream_convert(st, args[2], &s) < 0))
        return NULL;
    Py_buffer view;
    int flags = PyBUF_ANY_CONTIGUOUS | PyBUF_FORMAT | (dir == TO_HOST ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(host_obj, &view, flags) < 0) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "%s(): the host side must be a contiguous%s buffer, not %.100s",
                     fn, dir == TO_HOST ? ", writable" : "", Py_TYPE(host_obj)->tp_name);
        return NULL;
    }
    if (bc_arg_plain_host(host_obj, &view, fn, "the host side") < 0) {
        PyBuffer_Release(&view);
        return NULL;
    }
    size_t n = (size_t)view.len;
    PyObject *out = NULL;
    if (n > dev_size) {
        PyErr_Format(PyExc_ValueError, "%s(): copying %zu bytes, but the device memory has only %zu bytes",
                     fn, n, dev_size);
        goto done;
    }
    if (n == 0 || bc_context_require(st) < 0) {
        out = n == 0 ? Py_NewRef(Py_None) : NULL;
        goto done;
    }
    const char *routine = NULL;
    CUresult rc;
    bc_trace_tok tt = BC_TRACE_BEGIN(
        st, bc_trace_copy(st, dir == TO_DEVICE ? BC_TRACE_HTOD : BC_TRACE_DTOH, s, n));
    Py_BEGIN_ALLOW_THREADS
    rc = staged_copy(dir, dev, view.buf, n, s, &routine);
    Py_END_ALLOW_THREADS
    BC_TRACE_END(st, tt, rc);
    if (bc_check(st, rc, routine) == 0)
        out = Py_NewRef(Py_None);
done:
    PyBuffer_Release(&view);
    return out;
}

PyDoc_STRVAR(htod_staged_doc,
"_htod_staged(dest, src, stream=None)\n--\n\n"
"Copy the host buffer `src` to device memory `dest`, in order on `stream`, and\n"
"return when it has arrived.  Pageable memory of 1 MiB or more goes through\n"
"pinned buffers with several threads; other memory straight to the driver.");

static PyObject *
bc_htod_staged(PyObject *m, PyObject *const *args, Py_ssize_t nargs)
{
    return staged_entry(m, args, nargs, TO_DEVICE, "_htod_staged");
}

PyDoc_STRVAR(dtoh_staged_doc,
"_dtoh_staged(dest, src, stream=None)\n--\n\n"
"Copy device memory `src` into the writable host buffer `dest` (its length is\n"
"the byte count), in order on `stream`; returns when the data is there.  Staged\n"
"as _htod_staged, so the page faults of a new array are taken in parallel.");

static PyObject *
bc_dtoh_staged(PyObject *m, PyObject *const *args, Py_ssize_t nargs)
{
    return staged_entry(m, args, nargs, TO_HOST, "_dtoh_staged");
}

PyDoc_STRVAR(staging_config_doc,
"_staging_config(workers=None, chunk_mib=None, depth=None, prefault=None, nt=None)\n--\n\n"
"The settings of staged copies, changed where given: `workers` threads (1 to 16)\n"
"with `depth` pinned buffers (2 to 4) of `chunk_mib` MiB (1 to 64) each,\n"
"`prefault` threads (0 to 16) populating a new destination array of a copy to the\n"
"host, and `nt` (0 or 1) whether copies to the host write the destination with\n"
"non-temporal stores (x86-64; elsewhere always 0).  Returns them as a dict.  For\n"
"benchmarks; the defaults come from the environment (BARECUDA_STAGE_WORKERS,\n"
"_DEPTH, _CHUNK_MIB, _PREFAULT, _NT).");

static int
config_arg(PyObject *v, const char *name, long lo, long hi, int *out)
{
    if (v == NULL || v == Py_None)
        return 0;
    long long x;
    if (bc_arg_long(v, name, lo, hi, &x) < 0)
        return -1;
    *out = (int)x;
    return 0;
}

static PyObject *
bc_staging_config(PyObject *Py_UNUSED(m), PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"workers", "chunk_mib", "depth", "prefault", "nt", NULL};
    PyObject *ow = NULL, *oc = NULL, *od = NULL, *op = NULL, *on = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|OOOOO:_staging_config", kwlist, &ow, &oc,
                                     &od, &op, &on))
        return NULL;
    pthread_once(&config_once, config_from_env);
    stage_config c = cfg;
    int mib = (int)(c.chunk >> 20);
    if (config_arg(ow, "workers", 1, MAX_WORKERS, &c.workers) < 0 ||
        config_arg(oc, "chunk_mib", 1, MAX_CHUNK_MIB, &mib) < 0 ||
        config_arg(od, "depth", 2, MAX_DEPTH, &c.depth) < 0 ||
        config_arg(op, "prefault", 0, MAX_WORKERS, &c.prefault) < 0 ||
        config_arg(on, "nt", 0, 1, &c.nt) < 0)
        return NULL;
    c.nt = c.nt && HAVE_COPY_NT;
    c.chunk = (size_t)mib << 20;
    Py_BEGIN_ALLOW_THREADS
    pthread_mutex_lock(&stage_lock); /* no copy runs while the settings change */
    cfg = c;
    pthread_mutex_unlock(&stage_lock);
    Py_END_ALLOW_THREADS
    return Py_BuildValue("{sisisisisi}", "workers", c.workers, "chunk_mib", mib, "depth", c.depth,
                         "prefault", c.prefault, "nt", c.nt);
}

/* ---- host memory registered for barecuda._kept */

PyDoc_STRVAR(host_register_doc,
"_host_register(address, nbytes, /)\n--\n\n"
"Private, for barecuda._kept: page-lock `nbytes` of host memory at `address` in\n"
"place, for every context (cuMemHostRegister, portable), with the GIL released.\n"
"True when registered; False when the driver refused (memory it already knows,\n"
"no context, not enough lockable memory).  The caller keeps the memory alive\n"
"until _host_unregister().");

/* address (and nbytes, want == 2) from args; the driver loaded. */
static int
range_args(PyObject *m, PyObject *const *args, Py_ssize_t nargs, Py_ssize_t want, const char *fn,
           size_t *addr, size_t *nbytes)
{
    if (nargs != want) {
        PyErr_Format(PyExc_TypeError, "%s() takes %zd argument%s (%zd given)", fn, want,
                     want == 1 ? "" : "s", nargs);
        return -1;
    }
    if (bc_arg_size(args[0], "address", addr) < 0 || (want > 1 && bc_arg_size(args[1], "nbytes", nbytes) < 0))
        return -1;
    if (*addr == 0 || (want > 1 && *nbytes == 0)) {
        PyErr_Format(PyExc_ValueError, "%s(): address and nbytes must be positive", fn);
        return -1;
    }
    BC_REQUIRE_DRIVER(bc_state_from_module(m), -1);
    return 0;
}

static PyObject *
bc_host_register(PyObject *m, PyObject *const *args, Py_ssize_t nargs)
{
    size_t addr, nbytes;
    if (range_args(m, args, nargs, 2, "_host_register", &addr, &nbytes) < 0 ||
        bc_context_require(bc_state_from_module(m)) < 0)
        return NULL;
    CUresult rc;
    Py_BEGIN_ALLOW_THREADS
    rc = bc_drv.cuMemHostRegister((void *)(uintptr_t)addr, nbytes, CU_MEMHOSTREGISTER_PORTABLE);
    Py_END_ALLOW_THREADS
    return PyBool_FromLong(rc == CUDA_SUCCESS);
}

PyDoc_STRVAR(host_unregister_doc,
"_host_unregister(address, /)\n--\n\n"
"Private, for barecuda._kept: undo _host_register() (cuMemHostUnregister), with\n"
"the GIL released.  True when done, False when the driver no longer knew it (its\n"
"registration went with a destroyed context) or refused.");

static PyObject *
bc_host_unregister(PyObject *m, PyObject *const *args, Py_ssize_t nargs)
{
    size_t addr, unused = 0;
    if (range_args(m, args, nargs, 1, "_host_unregister", &addr, &unused) < 0)
        return NULL;
    CUresult rc;
    Py_BEGIN_ALLOW_THREADS
    rc = bc_drv.cuMemHostUnregister((void *)(uintptr_t)addr);
    Py_END_ALLOW_THREADS
    return PyBool_FromLong(rc == CUDA_SUCCESS);
}

PyDoc_STRVAR(host_known_doc,
"_host_known(address, /)\n--\n\n"
"Private: whether the driver knows the host memory at `address` (pinned,\n"
"registered or managed), so that copies of it go straight to the DMA.");

static PyObject *
bc_host_known(PyObject *m, PyObject *const *args, Py_ssize_t nargs)
{
    size_t addr, unused = 0;
    if (range_args(m, args, nargs, 1, "_host_known", &addr, &unused) < 0)
        return NULL;
    return PyBool_FromLong(bc_host_is_known((void *)(uintptr_t)addr));
}

static PyMethodDef staging_methods[] = {
    {"_host_register", (PyCFunction)(void (*)(void))bc_host_register, METH_FASTCALL,
     host_register_doc},
    {"_host_unregister", (PyCFunction)(void (*)(void))bc_host_unregister, METH_FASTCALL,
     host_unregister_doc},
    {"_host_known", (PyCFunction)(void (*)(void))bc_host_known, METH_FASTCALL, host_known_doc},
    {"_staging_config", (PyCFunction)(void (*)(void))bc_staging_config,
     METH_VARARGS | METH_KEYWORDS, staging_config_doc},
    {"_htod_staged", (PyCFunction)(void (*)(void))bc_htod_staged, METH_FASTCALL, htod_staged_doc},
    {"_dtoh_staged", (PyCFunction)(void (*)(void))bc_dtoh_staged, METH_FASTCALL, dtoh_staged_doc},
    {NULL, NULL, 0, NULL},
};

int
bc_staging_setup(PyObject *m, bc_State *Py_UNUSED(st))
{
    return PyModule_AddFunctions(m, staging_methods);
}
