/* SPDX-License-Identifier: MIT */
/* Waker: how an asyncio loop learns that the GPU is done (the Python half is
 * barecuda/_core/aio.py).
 *
 * watch(stream, token, keep, spin) records an Event, the watch's mark, on the
 * stream and queues a stream callback after it; watch(event, ...) takes the event
 * as the mark and queues the callback on a side stream of ours (pooled per
 * context) that waits for it, so that awaits on events wake in the order the
 * events complete and nothing is queued on the user's streams.
 * cuStreamAddCallback is used, not cuLaunchHostFunc, because it still runs (once,
 * with the error) after a device fault, so a failed kernel reaches every awaiting
 * task.  On the driver's callback thread no Python runs and
 * no CUDA call is made: the callback moves its watch onto its Waker's done list
 * under one process-wide mutex and, when nothing was signalled yet, writes the
 * Waker's eventfd (a pipe where there is none), which the loop watches with
 * add_reader.  drain(), on the loop's thread, reads the fd and answers (token,
 * None or the exception) for each watch done, and only then lets go of what the
 * watch kept alive (the stream, the buffers of a copy, the mark) and gives its
 * side stream back to the pool.
 *
 * The driver's callback thread is slow to wake, and so is a loop asleep in epoll:
 * on the H200 lent to us an await woken that way took a median 150 to 190 us,
 * against 5 to 9 for a spinning synchronize().  So a watch may also be given a
 * spin window: for its first `spin` seconds it is asked about from the loop, one
 * event query (no system call) per pass.  watch() then returns the mark, which a
 * task awaiting it directly asks each time it runs, through the iterator
 * awaiting() returns (aio.py's GPUFuture.__await__: no Python runs per step), and
 * resumes in the pass that finds it done; poll(), which the loop calls on each of
 * its passes while futures awaited in other ways are in their window, asks the
 * marks of every watch in its window and answers at once those that are done
 * (the callback, when it comes, then only lets go of what they kept).  A mark
 * says when the watched work is done, not the work queued after it, so awaits on
 * several streams wake in the order their work completes (to within one pass of
 * the loop).
 * A watch still busy when its window ends, or whose mark reports an error, is left
 * to its callback (which brings the error).  A watch answered before its callback
 * still has that callback queued on the stream: work queued there next starts
 * once the driver has run it (the price of the callback on the stream; an event's
 * watch puts it on a side stream).
 *
 * A stream closed or a context let go while watched cannot be counted on to call
 * back: their hooks (registered with stream.c and context.c) answer the watches
 * on them at once with a LogicError, and the context's hook destroys the side
 * streams made in it; the callback that may still come later only lets go of
 * what its watch kept.  A Waker closed (its loop gone) while watches are pending
 * stays in C until the last of them has called back; what they kept is then let
 * go of from a Python thread through Py_AddPendingCall. */
#include "barecuda/argparse.h"
#include "barecuda/context.h"
#include "barecuda/error.h"
#include "barecuda/loader.h"
#include "barecuda/stream.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/eventfd.h>
#endif

/* Why a watch was answered before its callback came. */
enum { WK_STREAM_CLOSED = 1, WK_CONTEXT_GONE = 2 };

typedef struct wk_core wk_core;

/* A side stream of ours: in the pool, or a watch's. */
typedef struct wk_side {
    CUcontext ctx;
    CUstream stream;
    struct wk_side *next;
} wk_side;

typedef struct wk_watch {
    wk_core *core;
    unsigned long long token;
    CUcontext ctx;
    CUstream stream;               /* the watched stream (NULL for an event: none) */
    struct wk_side *side;          /* for an event: ours, waiting for it; NULL once given back */
    PyObject *mark;                /* an Event, done with the watched work; let go of with keep */
    int64_t spin_until;            /* poll() asks about it until then (monotonic ns); 0: never */
    struct wk_watch *lprev, *lnext;/* the process's list of every watch, until freed */
    PyObject *keep;                /* let go of with the GIL, after the callback */
    CUresult status;               /* what the callback was given */
    int answered;                  /* a hook or poll() answered it already */
    struct wk_watch *prev, *next;  /* the process's pending list, until called back */
    struct wk_watch *done_next;    /* its core's done list, after */
} wk_watch;

typedef struct wk_answer {         /* an answer a hook gave before the callback */
    unsigned long long token;
    int why;
    struct wk_answer *next;
} wk_answer;

struct wk_core {
    int rfd, wfd;                  /* eventfd: the same fd twice; -1 once closed */
    int closed;                    /* the Waker was closed: nobody drains any more */
    int signalled;                 /* written to since the last drain */
    int release_queued;            /* a Py_AddPendingCall for a closed core is queued */
    Py_ssize_t refs;               /* the Waker object, and each watch not yet freed */
    Py_ssize_t pending;            /* watches not yet called back */
    Py_ssize_t spinning;           /* of those, the ones poll() still asks about */
    wk_watch *done;
    wk_answer *answers;
};

/* One lock for every core and the pending list: the callback thread takes it
 * without the GIL, and nothing that needs the GIL is done while holding it; nor
 * any CUDA call (the driver's callback thread, blocked on this lock in a
 * callback, may hold what such a call waits for). */
static pthread_mutex_t wk_lock = PTHREAD_MUTEX_INITIALIZER;
static wk_watch wk_pending = {.prev = &wk_pending, .next = &wk_pending};
static wk_watch wk_live = {.lprev = &wk_live, .lnext = &wk_live};

/* Side streams not in use, each with its context (a node goes with its stream:
 * given back to the pool, nothing is allocated). */
static wk_side *wk_idle_sides;
static Py_ssize_t wk_live_cores, wk_live_watches;

typedef struct {
    PyObject_HEAD
    wk_core *core;                 /* NULL once closed */
    PyObject *dict;
    PyObject *weakreflist;
} bc_Waker;

/* ---------------------------------------------------------------- the fd */

static int
open_fds(wk_core *c)
{
#ifdef __linux__
    c->rfd = c->wfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    return c->rfd < 0 ? -1 : 0;
#else
    int p[2];
    if (pipe(p) < 0)
        return -1;
    for (int i = 0; i < 2; i++) {
        fcntl(p[i], F_SETFL, fcntl(p[i], F_GETFL) | O_NONBLOCK);
        fcntl(p[i], F_SETFD, FD_CLOEXEC);
    }
    c->rfd = p[0];
    c->wfd = p[1];
    return 0;
#endif
}

static void
close_fds(wk_core *c)
{
    if (c->rfd >= 0)
        close(c->rfd);
    if (c->wfd >= 0 && c->wfd != c->rfd)
        close(c->wfd);
    c->rfd = c->wfd = -1;
}

/* Lock held.  One write per drain: the loop reads whatever came in between. */
static void
signal_core(wk_core *c)
{
    if (c->closed || c->signalled)
        return;
    unsigned long long one = 1;
    ssize_t n;
    do
        n = write(c->wfd, &one, sizeof one);
    while (n < 0 && errno == EINTR);
    c->signalled = 1;
}

/* Lock held.  Read the fd empty and take what is done off the core. */
static void
take_done(wk_core *c, wk_watch **done, wk_answer **answers)
{
    if (c->rfd >= 0) {
        unsigned long long buf[8];
        ssize_t n;
        do
            n = read(c->rfd, buf, sizeof buf);
        while (n > 0 || (n < 0 && errno == EINTR));
    }
    c->signalled = 0;
    *done = c->done;
    *answers = c->answers;
    c->done = NULL;
    c->answers = NULL;
}

/* Lock held: poll() asks no more about w. */
static void
stop_spinning(wk_watch *w)
{
    if (w->spin_until != 0) {
        w->spin_until = 0;
        w->core->spinning--;
    }
}

static void CUDA_CB watch_done(CUstream hstream, CUresult status, void *data);

/* Lock not held.  A side stream of ctx (current): one from the pool, or a new
 * one; NULL with *rc set when none can be had. */
static wk_side *
take_side(CUcontext ctx, CUresult *rc)
{
    pthread_mutex_lock(&wk_lock);
    wk_side **p = &wk_idle_sides;
    while (*p != NULL && (*p)->ctx != ctx)
        p = &(*p)->next;
    wk_side *found = *p;
    if (found != NULL)
        *p = found->next;
    pthread_mutex_unlock(&wk_lock);
    *rc = CUDA_SUCCESS;
    if (found != NULL)
        return found;
    if ((found = PyMem_RawMalloc(sizeof *found)) == NULL) {
        *rc = CUDA_ERROR_OUT_OF_MEMORY;
        return NULL;
    }
    found->ctx = ctx;
    if ((*rc = bc_drv.cuStreamCreate(&found->stream, CU_STREAM_NON_BLOCKING)) != CUDA_SUCCESS) {
        PyMem_RawFree(found);
        return NULL;
    }
    return found;
}

/* Lock not held: destroy a list of side streams and their nodes. */
static void
destroy_sides(wk_side *doomed)
{
    while (doomed != NULL) {
        wk_side *next = doomed->next;
        if (!bc_forked_child)
            bc_drv.cuStreamDestroy(doomed->stream);
        PyMem_RawFree(doomed);
        doomed = next;
    }
}

/* GIL held, lock not held.  In w's context: for a stream, a new Event recorded
 * on it as the mark, then the callback after it; for `event`, the event is the
 * mark, and the callback goes on a side stream from the pool after a wait for it.
 * 0, or -1 raised (what was made stays on w for disarm() and free_taken()). */
static int
arm(bc_State *st, wk_watch *w, PyObject *event)
{
    int entered = bc_context_enter_handle(w->ctx);
    if (entered < 0)
        return bc_error_raise(st, CUDA_ERROR_INVALID_CONTEXT, "cuCtxPushCurrent");
    CUresult rc = CUDA_SUCCESS;
    const char *what = NULL;
    CUstream on = w->stream;
    if (event != NULL) {
        w->mark = Py_NewRef(event);
        what = "cuStreamCreate";
        if ((w->side = take_side(w->ctx, &rc)) == NULL)
            goto out;
        on = w->side->stream;
        what = "cuStreamWaitEvent";
        if ((rc = bc_drv.cuStreamWaitEvent(on, ((bc_Event *)event)->handle, 0)) != CUDA_SUCCESS)
            goto out;
    } else {
        /* an Event made here is made in w's context, current now */
        w->mark = PyObject_CallFunction(st->EventType, "i", (int)CU_EVENT_DISABLE_TIMING);
        if (w->mark == NULL)
            goto out;
        what = "cuEventRecord";
        if ((rc = bc_drv.cuEventRecord(((bc_Event *)w->mark)->handle, on)) != CUDA_SUCCESS)
            goto out;
    }
    what = "cuStreamAddCallback";
    rc = bc_drv.cuStreamAddCallback(on, watch_done, w, 0);
out:
    bc_context_leave(entered);
    if (rc != CUDA_SUCCESS)
        return bc_error_raise(st, rc, what);
    return PyErr_Occurred() ? -1 : 0;
}

/* Lock held, w's callback queued no more (it came, or was never queued) unless
 * `doomed`: poll() asks no more about w, and its side stream goes back to the
 * pool, or onto *doomed when given (its context is going: the caller destroys
 * them after the lock; the driver lets go of one once the work on it is done).
 * Its mark is let go of with what it keeps, without the lock. */
static void
disarm(wk_watch *w, wk_side **doomed)
{
    stop_spinning(w);
    wk_side *side = w->side;
    if (side == NULL)
        return;
    w->side = NULL;
    wk_side **list = doomed != NULL ? doomed : &wk_idle_sides;
    side->next = *list;
    *list = side;
}

/* ------------------------------------------------------- the callback side */

static int release_closed(void *arg);

/* Runs on the driver's callback thread: no Python. */
static void CUDA_CB
watch_done(CUstream Py_UNUSED(hstream), CUresult status, void *data)
{
    wk_watch *w = data;
    wk_core *c = w->core;
    pthread_mutex_lock(&wk_lock);
    w->status = status;
    w->prev->next = w->next;
    w->next->prev = w->prev;
    w->prev = w->next = NULL;
    c->pending--;
    stop_spinning(w);
    w->done_next = c->done;
    c->done = w;
    if (!c->closed)
        signal_core(c);
    else if (!c->release_queued && !bc_is_finalizing() &&
             Py_AddPendingCall(release_closed, c) == 0)
        c->release_queued = 1;
    pthread_mutex_unlock(&wk_lock);
}

/* GIL held, lock not held: let go of a list of done watches and answers taken
 * off a core.  Returns how many watches were freed (each held a core ref). */
static Py_ssize_t
free_taken(wk_watch *done, wk_answer *answers)
{
    Py_ssize_t n = 0;
    pthread_mutex_lock(&wk_lock);
    for (wk_watch *w = done; w != NULL; w = w->done_next) {
        disarm(w, NULL);
        w->lprev->lnext = w->lnext;
        w->lnext->lprev = w->lprev;
    }
    pthread_mutex_unlock(&wk_lock);
    while (done != NULL) {
        wk_watch *w = done;
        done = w->done_next;
        Py_XDECREF(w->keep);
        Py_XDECREF(w->mark);
        PyMem_RawFree(w);
        n++;
    }
    while (answers != NULL) {
        wk_answer *a = answers;
        answers = a->next;
        PyMem_RawFree(a);
    }
    return n;
}

/* Lock held: drop n refs of c, freeing it at none. */
static void
core_decref(wk_core *c, Py_ssize_t n)
{
    c->refs -= n;
    wk_live_watches -= n;
    if (c->refs == 0) {
        close_fds(c);
        PyMem_RawFree(c);
        wk_live_cores--;
    }
}

/* A Py_AddPendingCall from watch_done: lets go of what the watches of a closed
 * core kept, on a Python thread with the GIL. */
static int
release_closed(void *arg)
{
    wk_core *c = arg;
    wk_watch *done;
    wk_answer *answers;
    pthread_mutex_lock(&wk_lock);
    take_done(c, &done, &answers);
    c->release_queued = 0;
    pthread_mutex_unlock(&wk_lock);
    Py_ssize_t n = free_taken(done, answers);
    pthread_mutex_lock(&wk_lock);
    core_decref(c, n);
    pthread_mutex_unlock(&wk_lock);
    return 0;
}

/* ------------------------------------------------------------ the hooks */

/* GIL held; never raises.  Answer every pending, unanswered watch that `match`
 * picks with `why` (the callback still comes later, or never). */
static void
answer_pending(int (*match)(wk_watch *, void *), void *arg, int why)
{
    pthread_mutex_lock(&wk_lock);
    for (wk_watch *w = wk_pending.next; w != &wk_pending; w = w->next) {
        if (w->answered || w->core->closed || !match(w, arg))
            continue;
        wk_answer *a = PyMem_RawMalloc(sizeof *a);
        if (a == NULL)
            continue; /* its callback will answer it, if it comes */
        a->token = w->token;
        a->why = why;
        a->next = w->core->answers;
        w->core->answers = a;
        w->answered = 1;
        stop_spinning(w);
        signal_core(w->core);
    }
    pthread_mutex_unlock(&wk_lock);
}

static int
match_stream(wk_watch *w, void *arg)
{
    return w->stream == (CUstream)arg;
}

static int
match_context(wk_watch *w, void *arg)
{
    return w->ctx == (CUcontext)arg;
}

/* stream.c calls this before it destroys a stream of ours. */
static void
on_stream_closing(CUstream handle)
{
    answer_pending(match_stream, (void *)handle, WK_STREAM_CLOSED);
}

/* context.c calls this when detach() begins (before the streams that keep
 * buffers are synchronized: the awaits learn of the detach, not of the work
 * finishing under it) and again before it gives the handle up. */
static void
on_context_going(bc_Context *ctx, int Py_UNUSED(arg))
{
    answer_pending(match_context, (void *)ctx->handle, WK_CONTEXT_GONE);
    wk_side *doomed = NULL;
    pthread_mutex_lock(&wk_lock);
    for (wk_watch *w = wk_live.lnext; w != &wk_live; w = w->lnext)
        if (w->ctx == ctx->handle)
            disarm(w, &doomed);
    for (wk_side **p = &wk_idle_sides; *p != NULL;) {
        wk_side *idle = *p;
        if (idle->ctx != ctx->handle) {
            p = &idle->next;
            continue;
        }
        *p = idle->next;
        idle->next = doomed;
        doomed = idle;
    }
    pthread_mutex_unlock(&wk_lock);
    int entered = bc_context_enter(ctx);
    destroy_sides(doomed);
    bc_context_leave(entered);
}

/* ------------------------------------------------------------ the type */

static wk_core *
waker_core(bc_State *st, bc_Waker *self, const char *fn)
{
    if (self->core == NULL)
        bc_error_logic(st, "%s: this Waker was closed", fn);
    return self->core;
}

static PyObject *
waker_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    if (PyTuple_GET_SIZE(args) != 0 || (kwargs != NULL && PyDict_GET_SIZE(kwargs) != 0)) {
        PyErr_SetString(PyExc_TypeError, "_Waker() takes no arguments");
        return NULL;
    }
    wk_core *c = PyMem_RawCalloc(1, sizeof *c);
    if (c == NULL)
        return PyErr_NoMemory();
    if (open_fds(c) < 0) {
        PyErr_SetFromErrno(PyExc_OSError);
        PyMem_RawFree(c);
        return NULL;
    }
    bc_Waker *self = (bc_Waker *)type->tp_alloc(type, 0);
    if (self == NULL) {
        close_fds(c);
        PyMem_RawFree(c);
        return NULL;
    }
    c->refs = 1;
    pthread_mutex_lock(&wk_lock);
    wk_live_cores++;
    pthread_mutex_unlock(&wk_lock);
    self->core = c;
    return (PyObject *)self;
}

PyDoc_STRVAR(fileno_doc,
"fileno($self)\n--\n\nThe fd that becomes readable when watches are done (for add_reader).");

static PyObject *
waker_fileno(bc_Waker *self, PyObject *Py_UNUSED(ignored))
{
    wk_core *c = waker_core(bc_state_of((PyObject *)self), self, "fileno()");
    return c ? PyLong_FromLong(c->rfd) : NULL;
}

PyDoc_STRVAR(watch_doc,
"watch($self, target, token, keep=None, spin=0.0)\n--\n\n"
"Answer `token` from drain() once the work queued so far on `target` (a Stream,\n"
"None for the legacy default stream, a handle or an object with __cuda_stream__)\n"
"or the work before an Event's last record is done; `keep` stays alive until the\n"
"GPU is past that work.  For its first `spin` seconds poll() asks about it too;\n"
"it then returns the mark (the Event that poll() queries), else None.");

static int watched_stream_context(bc_State *st, CUstream handle, CUcontext *ctx);

static PyObject *
waker_watch(bc_Waker *self, PyObject *args, PyObject *kwargs)
{
    bc_State *st = bc_state_of((PyObject *)self);
    static char *kwlist[] = {"target", "token", "keep", "spin", NULL};
    PyObject *target, *token_obj, *keep = Py_None;
    double spin = 0.0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO|Od:watch", kwlist, &target, &token_obj,
                                     &keep, &spin))
        return NULL;
    if (!(spin >= 0.0 && spin <= 3600.0)) {
        PyErr_SetString(PyExc_ValueError, "watch(): spin must be a number of seconds from 0 "
                                          "to 3600");
        return NULL;
    }
    wk_core *c = waker_core(st, self, "watch()");
    if (c == NULL)
        return NULL;
    CUstream handle = NULL;
    bc_Event *event = NULL;
    if (PyObject_TypeCheck(target, (PyTypeObject *)st->EventType)) {
        if ((event = bc_event_check(st, target, "target")) == NULL)
            return NULL;
    } else if (bc_stream_convert(st, target, &handle) < 0)
        return NULL;
    if (!PyLong_Check(token_obj)) {
        PyErr_Format(PyExc_TypeError, "watch(): token must be an int, not %.100s",
                     Py_TYPE(token_obj)->tp_name);
        return NULL;
    }
    unsigned long long token = PyLong_AsUnsignedLongLong(token_obj);
    if (token == (unsigned long long)-1 && PyErr_Occurred())
        return NULL;
    if (bc_context_require(st) < 0)
        return NULL;
    CUcontext ctx = NULL;
    if (event != NULL && event->ctx != NULL)
        ctx = event->ctx->handle;
    else if (event != NULL) {
        if (bc_check(st, bc_drv.cuCtxGetCurrent(&ctx), "cuCtxGetCurrent") < 0)
            return NULL;
    } else if (watched_stream_context(st, handle, &ctx) < 0)
        return NULL;

    wk_watch *w = PyMem_RawCalloc(1, sizeof *w);
    if (w == NULL)
        return PyErr_NoMemory();
    w->core = c;
    w->token = token;
    w->ctx = ctx;
    w->stream = handle;
    w->keep = Py_NewRef(keep);
    pthread_mutex_lock(&wk_lock);
    w->next = &wk_pending;
    w->prev = wk_pending.prev;
    wk_pending.prev->next = w;
    wk_pending.prev = w;
    w->lnext = &wk_live;
    w->lprev = wk_live.lprev;
    wk_live.lprev->lnext = w;
    wk_live.lprev = w;
    c->refs++;
    c->pending++;
    wk_live_watches++;
    pthread_mutex_unlock(&wk_lock);

    int rc = arm(st, w, (PyObject *)event);
    pthread_mutex_lock(&wk_lock);
    if (rc < 0) {
        /* no callback was queued: nothing else knows of w */
        w->prev->next = w->next;
        w->next->prev = w->prev;
        w->lprev->lnext = w->lnext;
        w->lnext->lprev = w->lprev;
        c->pending--;
        disarm(w, NULL);
        core_decref(c, 1);
        pthread_mutex_unlock(&wk_lock);
        Py_DECREF(w->keep);
        Py_XDECREF(w->mark);
        PyMem_RawFree(w);
        return NULL;
    }
    /* (its callback may have come already: then it is no longer pending) */
    if (spin > 0.0 && w->prev != NULL) {
        w->spin_until = bc_monotonic_ns() + (int64_t)(spin * 1e9) + 1;
        c->spinning++;
    }
    PyObject *mark = w->spin_until != 0 ? w->mark : Py_None;
    Py_INCREF(mark);   /* (w is not freed before this thread drains: the GIL is held) */
    pthread_mutex_unlock(&wk_lock);
    return mark;
}

/* The context of a stream to watch, into *ctx; refused while it captures a graph
 * (nothing queued on it runs until the graph is launched).  0, or -1 raised. */
static int
watched_stream_context(bc_State *st, CUstream handle, CUcontext *ctx)
{
    if (bc_check(st, bc_drv.cuStreamGetCtx(handle, ctx), "cuStreamGetCtx") < 0)
        return -1;
    CUstreamCaptureStatus capturing = CU_STREAM_CAPTURE_STATUS_NONE;
    if (bc_check(st, bc_drv.cuStreamIsCapturing(handle, &capturing), "cuStreamIsCapturing") < 0)
        return -1;
    if (capturing != CU_STREAM_CAPTURE_STATUS_NONE)
        return bc_error_logic(st, "watch(): the stream is capturing a graph: nothing queued on "
                                  "it runs until the graph is launched, so there is nothing "
                                  "to await");
    return 0;
}

/* The exception a watch answers with: the CUDA error its callback was given,
 * or the LogicError of a hook; NULL (exception set) when it cannot be made. */
static PyObject *
answer_exception(bc_State *st, CUresult status, int why)
{
    if (why == WK_STREAM_CLOSED)
        bc_error_logic(st, "the Stream was closed while its work was awaited");
    else if (why == WK_CONTEXT_GONE)
        bc_error_logic(st, "the Context was detached or destroyed while its work was awaited");
    else
        bc_error_raise(st, status, "the awaited stream work (stream callback)");
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    if (tb != NULL)
        PyException_SetTraceback(value, tb);
    Py_XDECREF(type);
    Py_XDECREF(tb);
    return value;
}

static int
append_answer(PyObject *list, unsigned long long token, PyObject *exc)
{
    PyObject *item = Py_BuildValue("(KO)", token, exc ? exc : Py_None);
    int rc = item ? PyList_Append(list, item) : -1;
    Py_XDECREF(item);
    return rc;
}

PyDoc_STRVAR(drain_doc,
"drain($self)\n--\n\n"
"[(token, None or exception), ...] for the watches done since the last drain\n"
"(a token answered early, by a stream closed or a context let go, comes once).");

static PyObject *
waker_drain(bc_Waker *self, PyObject *Py_UNUSED(ignored))
{
    bc_State *st = bc_state_of((PyObject *)self);
    wk_core *c = waker_core(st, self, "drain()");
    if (c == NULL)
        return NULL;
    wk_watch *done;
    wk_answer *answers;
    pthread_mutex_lock(&wk_lock);
    take_done(c, &done, &answers);
    pthread_mutex_unlock(&wk_lock);

    PyObject *out = PyList_New(0);
    for (wk_answer *a = answers; out != NULL && a != NULL; a = a->next) {
        PyObject *exc = answer_exception(st, CUDA_SUCCESS, a->why);
        if (exc == NULL || append_answer(out, a->token, exc) < 0)
            Py_CLEAR(out);
        Py_XDECREF(exc);
    }
    /* oldest first: the list was pushed newest first */
    wk_watch *order = NULL;
    while (done != NULL) {
        wk_watch *w = done;
        done = w->done_next;
        w->done_next = order;
        order = w;
    }
    for (wk_watch *w = order; out != NULL && w != NULL; w = w->done_next) {
        if (w->answered)
            continue;
        PyObject *exc = w->status == CUDA_SUCCESS ? NULL : answer_exception(st, w->status, 0);
        if ((w->status != CUDA_SUCCESS && exc == NULL) || append_answer(out, w->token, exc) < 0)
            Py_CLEAR(out);
        Py_XDECREF(exc);
    }
    Py_ssize_t n = free_taken(order, answers);
    pthread_mutex_lock(&wk_lock);
    core_decref(c, n);
    pthread_mutex_unlock(&wk_lock);
    return out;
}

/* GIL held, lock not held: poll() asks no more about the watch of `token`. */
static void
unpoll_token(wk_core *c, unsigned long long token)
{
    pthread_mutex_lock(&wk_lock);
    for (wk_watch *w = wk_pending.next; w != &wk_pending; w = w->next)
        if (w->core == c && w->token == token) {
            stop_spinning(w);
            break;
        }
    pthread_mutex_unlock(&wk_lock);
}

/* ------------------------------------------------------ a direct await, in C */

/* What `await fut` runs while fut (aio.py's GPUFuture) is in its spin window: each
 * time its task runs, one query of the await's mark; done, it sets the future's
 * result; then, or once the window is over, the mark reports an error or the
 * future is done some other way, it hands over to the future's own iterator (the
 * task then waits for the future's done-callback).  The steps a Python generator
 * took, less the interpreter's cost per step: on the lent H200s that cost was 10
 * to 15 us of a wake-up whose floor (synchronize) is 6 to 9.
 *
 * (A longer ask that held an idle loop in C, looking at its selector every few
 * microseconds, was tried: on the lent H200s it woke later than one query per
 * pass in the benchmark, twice, and it kept the GIL from the process's other
 * threads.) */
typedef struct {
    PyObject_HEAD
    PyObject *waker;           /* the _Waker */
    PyObject *fut;
    PyObject *mark;            /* an Event */
    PyObject *result;          /* what the future is given */
    PyObject *inner;           /* once handed over: the future's own iterator */
    int64_t until_ns;          /* the window's end (monotonic) */
} bc_WakerAwait;

enum { AW_YIELD, AW_HAND_OVER, AW_ERROR };

/* One step of the task: the GPU is still busy (AW_YIELD), the future is answered
 * or must be left to its callback (AW_HAND_OVER), or an error was raised. */
static int
await_ask(bc_WakerAwait *it)
{
    bc_State *st = bc_state_of(it->waker);
    PyObject *done = PyObject_CallMethodNoArgs(it->fut, st->str_done);
    int is_done = done != NULL ? PyObject_IsTrue(done) : -1;
    Py_XDECREF(done);
    if (is_done != 0)
        return is_done < 0 ? AW_ERROR : AW_HAND_OVER;
    if (bc_monotonic_ns() >= it->until_ns || ((bc_Waker *)it->waker)->core == NULL)
        return AW_HAND_OVER;
    bc_Event *mark = bc_event_check(st, it->mark, "mark");
    if (mark == NULL) {             /* closed by its owner, or its context gone */
        PyErr_Clear();
        return AW_HAND_OVER;        /* the callback or a hook answers */
    }
    CUresult rc = bc_drv.cuEventQuery(mark->handle);
    if (rc == CUDA_ERROR_NOT_READY)
        return AW_YIELD;
    if (rc == CUDA_SUCCESS) {       /* done: the future's own iterator returns it */
        PyObject *r = PyObject_CallMethodOneArg(it->fut, st->str_set_result, it->result);
        if (r == NULL)
            PyErr_Clear();          /* done meanwhile (cancelled): it says so */
        Py_XDECREF(r);
    }
    return AW_HAND_OVER;            /* or a fault: the callback brings the error */
}

static PyObject *
await_iternext(bc_WakerAwait *it)
{
    if (it->inner == NULL) {
        int step = await_ask(it);
        if (step == AW_YIELD)
            Py_RETURN_NONE;         /* a bare yield: the task runs again next pass */
        if (step == AW_ERROR)
            return NULL;
        /* GPUFuture's base (asyncio's Future); a plain future's own type */
        PyTypeObject *type = Py_TYPE(it->fut);
        if (type->tp_base != NULL && type->tp_base != &PyBaseObject_Type)
            type = type->tp_base;
        PyObject *base = PyObject_GetAttr((PyObject *)type, bc_state_of(it->waker)->str_await);
        it->inner = base != NULL ? PyObject_CallOneArg(base, it->fut) : NULL;
        Py_XDECREF(base);
        if (it->inner == NULL)
            return NULL;
    }
    return Py_TYPE(it->inner)->tp_iternext(it->inner);
}

static PyObject *
await_send(bc_WakerAwait *it, PyObject *value)
{
    if (it->inner != NULL)
        return PyObject_CallMethod(it->inner, "send", "O", value);
    return await_iternext(it);      /* the task sends None */
}

/* The task was cancelled (or anything else thrown in): while asking, so is the
 * future (the GPU work goes on), and the exception goes back up. */
static PyObject *
await_throw(bc_WakerAwait *it, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs < 1 || nargs > 3) {
        PyErr_SetString(PyExc_TypeError, "throw() takes from 1 to 3 arguments");
        return NULL;
    }
    if (it->inner != NULL) {
        PyObject *throw = PyObject_GetAttrString(it->inner, "throw");
        PyObject *r = throw != NULL ? PyObject_Vectorcall(throw, args, (size_t)nargs, NULL)
                                    : NULL;
        Py_XDECREF(throw);
        return r;
    }
    PyObject *r = PyObject_CallMethod(it->fut, "cancel", NULL);
    if (r == NULL)
        return NULL;
    Py_DECREF(r);
    PyObject *typ = args[0], *val = nargs > 1 && args[1] != Py_None ? args[1] : NULL;
    if (PyExceptionInstance_Check(typ))
        PyErr_SetObject((PyObject *)Py_TYPE(typ), typ);
    else if (PyExceptionClass_Check(typ))
        PyErr_SetObject(typ, val);
    else
        PyErr_Format(PyExc_TypeError, "exceptions must derive from BaseException, not %.100s",
                     Py_TYPE(typ)->tp_name);
    return NULL;
}

static PyObject *
await_close(bc_WakerAwait *it, PyObject *Py_UNUSED(ignored))
{
    if (it->inner != NULL && PyObject_HasAttrString(it->inner, "close"))
        return PyObject_CallMethod(it->inner, "close", NULL);
    Py_RETURN_NONE;
}

static int
await_traverse(bc_WakerAwait *it, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(it));
    Py_VISIT(it->waker);
    Py_VISIT(it->fut);
    Py_VISIT(it->mark);
    Py_VISIT(it->result);
    Py_VISIT(it->inner);
    return 0;
}

static int
await_clear(bc_WakerAwait *it)
{
    Py_CLEAR(it->waker);
    Py_CLEAR(it->fut);
    Py_CLEAR(it->mark);
    Py_CLEAR(it->result);
    Py_CLEAR(it->inner);
    return 0;
}

static void
await_dealloc(bc_WakerAwait *it)
{
    PyTypeObject *tp = Py_TYPE(it);
    PyObject_GC_UnTrack(it);
    await_clear(it);
    tp->tp_free(it);
    Py_DECREF(tp);
}

PyDoc_STRVAR(await_send_doc,
"send($self, value, /)\n--\n\n"
"The task's step: ask (value is None), or pass it on once handed over.");
PyDoc_STRVAR(await_throw_doc,
"throw($self, typ, val=None, tb=None, /)\n--\n\n"
"Cancel the future while asking, and raise what was thrown; pass it on once handed over.");
PyDoc_STRVAR(await_close_doc, "close($self, /)\n--\n\nClose the future's own iterator, if any.");

static PyMethodDef await_methods[] = {
    {"send", (PyCFunction)await_send, METH_O, await_send_doc},
    {"throw", (PyCFunction)(void (*)(void))await_throw, METH_FASTCALL, await_throw_doc},
    {"close", (PyCFunction)await_close, METH_NOARGS, await_close_doc},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot await_slots[] = {
    {Py_tp_dealloc, await_dealloc},
    {Py_tp_traverse, await_traverse},
    {Py_tp_clear, await_clear},
    {Py_tp_iter, PyObject_SelfIter},
    {Py_tp_iternext, await_iternext},
    {Py_tp_methods, await_methods},
    {Py_tp_doc, (void *)"What `await` runs for a GPU future in its spin window "
                        "(_Waker.awaiting)."},
    {0, NULL},
};

static PyType_Spec await_spec = {
    .name = "barecuda._driver._WakerAwait",
    .basicsize = sizeof(bc_WakerAwait),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE | Py_TPFLAGS_HAVE_GC |
             Py_TPFLAGS_DISALLOW_INSTANTIATION,
    .slots = await_slots,
};

PyDoc_STRVAR(awaiting_doc,
"awaiting($self, fut, mark, result, spin_until, token, loop)\n--\n\n"
"What `await fut` runs (aio.py's GPUFuture.__await__): until spin_until (in the\n"
"time of `loop`, fut's loop) it queries `mark` (an Event) each time its task\n"
"runs, sets fut's result to `result` when the mark is done, then hands over to\n"
"fut's own iterator.  The watch of `token` is no longer asked by poll().");

static PyObject *
waker_awaiting(bc_Waker *self, PyObject *const *args, Py_ssize_t nargs)
{
    bc_State *st = bc_state_of((PyObject *)self);
    if (nargs != 6) {
        PyErr_Format(PyExc_TypeError, "awaiting() takes 6 arguments (%zd given)", nargs);
        return NULL;
    }
    wk_core *c = waker_core(st, self, "awaiting()");
    if (c == NULL)
        return NULL;
    if (!PyObject_TypeCheck(args[1], (PyTypeObject *)st->EventType)) {
        /* (a mark closed, or of a context gone, is fine: the first step hands over) */
        PyErr_Format(PyExc_TypeError, "awaiting(): mark must be an Event, not %.100s",
                     Py_TYPE(args[1])->tp_name);
        return NULL;
    }
    double spin_until = PyFloat_AsDouble(args[3]);
    unsigned long long token = PyLong_AsUnsignedLongLong(args[4]);
    if (PyErr_Occurred())
        return NULL;
    PyObject *now = PyObject_CallMethodNoArgs(args[5], st->str_time);
    double loop_now = now != NULL ? PyFloat_AsDouble(now) : -1.0;
    Py_XDECREF(now);
    if (loop_now == -1.0 && PyErr_Occurred())
        return NULL;
    bc_WakerAwait *it = PyObject_GC_New(bc_WakerAwait, (PyTypeObject *)st->WakerAwaitType);
    if (it == NULL)
        return NULL;
    it->waker = Py_NewRef((PyObject *)self);
    it->fut = Py_NewRef(args[0]);
    it->mark = Py_NewRef(args[1]);
    it->result = Py_NewRef(args[2]);
    it->inner = NULL;
    it->until_ns = bc_monotonic_ns() + (int64_t)((spin_until - loop_now) * 1e9);
    PyObject_GC_Track(it);
    unpoll_token(c, token);     /* asked here: poll() (for futures awaited other ways) need not */
    return (PyObject *)it;
}

PyDoc_STRVAR(poll_doc,
"poll($self)\n--\n\n"
"Ask the GPU about the watches still in their spin window: ([token, ...] of those\n"
"whose work is done, answered now and not again by drain(); how many are still\n"
"in their window).  An event query each: no system call.");

static PyObject *
waker_poll(bc_Waker *self, PyObject *Py_UNUSED(ignored))
{
    bc_State *st = bc_state_of((PyObject *)self);
    wk_core *c = waker_core(st, self, "poll()");
    if (c == NULL)
        return NULL;
    /* Three steps: under the lock, the marks to ask (their handles); without it,
     * the queries (no CUDA call is made under the lock: see wk_lock); under it
     * again, the answers, for the watches still asked about (the callback may
     * have come meanwhile: then it answers).  The watches are not freed in
     * between: only a thread holding the GIL frees them.  The tokens become
     * Python objects after the lock: an allocation may run the garbage
     * collector, and so any Python. */
    typedef struct { wk_watch *w; CUevent mark; CUresult rc; } asked;
    asked *ask = NULL;
    unsigned long long *idle = NULL;
    Py_ssize_t n_ask = 0, n_idle = 0, spinning;
    int64_t now = bc_monotonic_ns();
    pthread_mutex_lock(&wk_lock);
    Py_ssize_t cap = c->spinning;
    if (cap > 0) {
        ask = PyMem_RawMalloc((size_t)cap * sizeof *ask);
        idle = PyMem_RawMalloc((size_t)cap * sizeof *idle);
    }
    int no_memory = cap > 0 && (ask == NULL || idle == NULL);
    for (wk_watch *w = wk_pending.next; !no_memory && w != &wk_pending; w = w->next) {
        if (w->core != c || w->spin_until == 0)
            continue;
        CUevent mark = ((bc_Event *)w->mark)->handle;   /* NULL: closed by its owner */
        if (now > w->spin_until || mark == NULL)
            stop_spinning(w);   /* the callback answers it */
        else
            ask[n_ask++] = (asked){w, mark, CUDA_ERROR_NOT_READY};
    }
    pthread_mutex_unlock(&wk_lock);
    for (Py_ssize_t i = 0; i < n_ask; i++)
        ask[i].rc = bc_drv.cuEventQuery(ask[i].mark);
    pthread_mutex_lock(&wk_lock);
    for (Py_ssize_t i = 0; i < n_ask; i++) {
        wk_watch *w = ask[i].w;
        /* busy: ask again next time; an error: the callback brings it */
        if (ask[i].rc == CUDA_ERROR_NOT_READY || w->spin_until == 0)
            continue;
        stop_spinning(w);
        if (ask[i].rc == CUDA_SUCCESS && !w->answered) {
            w->answered = 1;
            idle[n_idle++] = w->token;
        }
    }
    spinning = c->spinning;
    pthread_mutex_unlock(&wk_lock);
    PyMem_RawFree(ask);
    if (no_memory) {
        PyMem_RawFree(idle);
        return PyErr_NoMemory();
    }

    PyObject *tokens = PyList_New(n_idle);
    for (Py_ssize_t i = 0; tokens != NULL && i < n_idle; i++) {
        PyObject *t = PyLong_FromUnsignedLongLong(idle[i]);
        if (t == NULL)
            Py_CLEAR(tokens);
        else
            PyList_SET_ITEM(tokens, i, t);
    }
    PyMem_RawFree(idle);
    if (tokens == NULL)
        return NULL;
    return Py_BuildValue("(Nn)", tokens, spinning);
}

/* GIL held; never raises.  What is done goes now; the core stays in C while
 * watches are pending (release_closed frees it after the last). */
static void
waker_release(bc_Waker *self)
{
    wk_core *c = self->core;
    if (c == NULL)
        return;
    self->core = NULL;
    wk_watch *done;
    wk_answer *answers;
    pthread_mutex_lock(&wk_lock);
    c->closed = 1;
    take_done(c, &done, &answers);
    close_fds(c);
    pthread_mutex_unlock(&wk_lock);
    Py_ssize_t n = free_taken(done, answers);
    pthread_mutex_lock(&wk_lock);
    c->refs -= 1; /* the Waker's own (not a watch: not counted in wk_live_watches) */
    core_decref(c, n);
    pthread_mutex_unlock(&wk_lock);
}

PyDoc_STRVAR(close_doc,
"close($self)\n--\n\n"
"Close the fd and stop answering (idempotent).  Watches still pending let go of\n"
"what they keep when the GPU is past their work.");

static PyObject *
waker_close(bc_Waker *self, PyObject *Py_UNUSED(ignored))
{
    waker_release(self);
    Py_RETURN_NONE;
}

PyDoc_STRVAR(stats_doc,
"_stats($type)\n--\n\n"
"Private, for leak tests: (Wakers alive in C, watches alive) in this process.");

static PyObject *
waker_stats(PyObject *Py_UNUSED(cls), PyObject *Py_UNUSED(ignored))
{
    pthread_mutex_lock(&wk_lock);
    Py_ssize_t cores = wk_live_cores, watches = wk_live_watches;
    pthread_mutex_unlock(&wk_lock);
    return Py_BuildValue("(nn)", cores, watches);
}

static PyObject *
waker_get_pending(bc_Waker *self, void *Py_UNUSED(closure))
{
    pthread_mutex_lock(&wk_lock);
    Py_ssize_t n = self->core ? self->core->pending : 0;
    pthread_mutex_unlock(&wk_lock);
    return PyLong_FromSsize_t(n);
}

static PyObject *
waker_get_closed(bc_Waker *self, void *Py_UNUSED(closure))
{
    return PyBool_FromLong(self->core == NULL);
}

static int
waker_traverse(bc_Waker *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(self->dict);
    return 0;
}

static int
waker_clear(bc_Waker *self)
{
    Py_CLEAR(self->dict);
    return 0;
}

static void
waker_dealloc(bc_Waker *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    if (self->weakreflist != NULL)
        PyObject_ClearWeakRefs((PyObject *)self);
    waker_release(self);
    waker_clear(self);
    tp->tp_free(self);
    Py_DECREF(tp);
}

static PyMethodDef waker_methods[] = {
    {"fileno", (PyCFunction)waker_fileno, METH_NOARGS, fileno_doc},
    {"watch", (PyCFunction)(void (*)(void))waker_watch, METH_VARARGS | METH_KEYWORDS, watch_doc},
    {"drain", (PyCFunction)waker_drain, METH_NOARGS, drain_doc},
    {"awaiting", (PyCFunction)(void (*)(void))waker_awaiting, METH_FASTCALL, awaiting_doc},
    {"poll", (PyCFunction)waker_poll, METH_NOARGS, poll_doc},
    {"close", (PyCFunction)waker_close, METH_NOARGS, close_doc},
    {"_stats", (PyCFunction)waker_stats, METH_NOARGS | METH_CLASS, stats_doc},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef waker_getset[] = {
    BC_DICT_GETSET,
    {"pending", (getter)waker_get_pending, NULL, "Watches not yet called back.", NULL},
    {"closed", (getter)waker_get_closed, NULL, "True once close() was called.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMemberDef waker_members[] = {
    {"__weaklistoffset__", T_PYSSIZET, offsetof(bc_Waker, weakreflist), READONLY, NULL},
    {"__dictoffset__", T_PYSSIZET, offsetof(bc_Waker, dict), READONLY, NULL},
    {NULL, 0, 0, 0, NULL},
};

PyDoc_STRVAR(waker_doc,
"_Waker()\n--\n\n"
"An fd an event loop watches, written when stream work it watches is done\n"
"(the machinery of `await stream` and `await event`: barecuda/_core/aio.py).");

static PyType_Slot waker_slots[] = {
    {Py_tp_new, waker_new},
    {Py_tp_dealloc, waker_dealloc},
    {Py_tp_traverse, waker_traverse},
    {Py_tp_clear, waker_clear},
    {Py_tp_methods, waker_methods},
    {Py_tp_getset, waker_getset},
    {Py_tp_members, waker_members},
    {Py_tp_doc, (void *)waker_doc},
    {0, NULL},
};

static PyType_Spec waker_spec = {
    .name = "barecuda._driver._Waker",
    .basicsize = sizeof(bc_Waker),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE | Py_TPFLAGS_HAVE_GC,
    .slots = waker_slots,
};

int
bc_waker_setup(PyObject *m, bc_State *st)
{
    bc_stream_on_close(on_stream_closing);
    if (bc_context_on(BC_CTX_DETACHING, on_context_going) < 0 ||
        bc_context_on(BC_CTX_LETTING_GO, on_context_going) < 0)
        return -1;
    if (bc_add_type(m, &waker_spec, NULL, &st->WakerType) < 0)
        return -1;
    return bc_add_type(m, &await_spec, NULL, &st->WakerAwaitType);
}
