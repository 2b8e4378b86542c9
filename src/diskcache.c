/* SPDX-License-Identifier: MIT */
/* The read side of the kernel cache's disk entries (barecuda/_diskcache.py
 * writes them), in C because a disk-cache hit in a new process is mostly the
 * interpreter's first, cold run of the code that finds it:
 *
 * - _cache_quick: the quick look-up whole: the quick key hashed from the
 *   compile's inputs and a few environment variables, its link's entry read
 *   and checked, the dependencies recorded with it compared with the
 *   filesystem;
 * - _cache_read: one entry read and checked (the look-up by full key);
 * - _cache_digest: the checksum an entry carries.
 *
 * An entry is HEAD_SIZE bytes of head (magic, digest, full key, metadata
 * length, image length, kind; the layout of _diskcache.HEAD), the metadata
 * (marshal) and the image.  The digest is a fast 128-bit hash of every byte
 * after it, against damage (a torn or truncated file, a flipped bit); the same
 * hash names the quick key's link.  The full key that names an entry is
 * BLAKE2b, made in Python. */
#include "barecuda/common.h"
#include "barecuda/state.h"

#include <errno.h>
#include <fcntl.h>
#include <marshal.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAGIC "BCKCACH3"
#define MAGIC_LEN 8
#define DIGEST_LEN 16
#define KEY_LEN 32
#define HEAD_SIZE 76 /* "<8s16s32sIQB7x" */
#define DIGEST_FROM (MAGIC_LEN + DIGEST_LEN)

/* ---- the checksum */

static inline uint64_t
rotl(uint64_t x, int r)
{
    return (x << r) | (x >> (64 - r));
}

/* SplitMix64's finalizer: every input bit reaches every output bit. */
static inline uint64_t
fold(uint64_t x)
{
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
    return x ^ (x >> 31);
}

static inline uint64_t
word(const unsigned char *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v; /* host order: a cache read on another byte order just misses */
}

#define LANE_MUL 0x9E3779B97F4A7C15ULL

/* Four independent lanes over 32-byte blocks (each step a bijection of the lane
 * for a given word, so no state collapses), the zero-padded tail as a last
 * block, then the lanes and the length folded into 16 bytes. */
typedef struct {
    uint64_t lane[4];
    unsigned char tail[32];
    size_t fill;    /* bytes in tail */
    uint64_t total; /* bytes seen */
} digest_state;

static void
digest_init(digest_state *d)
{
    *d = (digest_state){{0x243F6A8885A308D3ULL, 0x13198A2E03707344ULL, 0xA4093822299F31D0ULL,
                         0x082EFA98EC4E6C89ULL}, {0}, 0, 0};
}

static inline void
digest_block(digest_state *d, const unsigned char *p)
{
    for (int j = 0; j < 4; j++)
        d->lane[j] = (rotl(d->lane[j], 27) ^ word(p + 8 * j)) * LANE_MUL;
}

static void
digest_update(digest_state *d, const void *data, size_t n)
{
    const unsigned char *p = data;
    d->total += n;
    if (d->fill != 0) {
        size_t take = 32 - d->fill < n ? 32 - d->fill : n;
        memcpy(d->tail + d->fill, p, take);
        d->fill += take;
        p += take;
        n -= take;
        if (d->fill < 32)
            return;
        digest_block(d, d->tail);
        d->fill = 0;
    }
    for (; n >= 32; p += 32, n -= 32)
        digest_block(d, p);
    memcpy(d->tail, p, n);
    d->fill = n;
}

static void
digest_final(digest_state *d, unsigned char out[DIGEST_LEN])
{
    memset(d->tail + d->fill, 0, 32 - d->fill);
    digest_block(d, d->tail);
    uint64_t h0 = fold(d->lane[0] + rotl(d->lane[2], 17) + d->total);
    uint64_t h1 = fold(d->lane[1] + rotl(d->lane[3], 43) + h0);
    h0 = fold(h0 ^ h1);
    memcpy(out, &h0, 8);
    memcpy(out + 8, &h1, 8);
}

static void
entry_digest(const unsigned char *p, size_t n, unsigned char out[DIGEST_LEN])
{
    digest_state d;
    digest_init(&d);
    digest_update(&d, p, n);
    digest_final(&d, out);
}

PyDoc_STRVAR(cache_digest_doc,
"_cache_digest(data, /)\n--\n\n"
"Private, for barecuda._diskcache: the 16-byte checksum of a bytes-like object\n"
"that a disk entry of the kernel cache carries over everything after it.");

static PyObject *
bc_cache_digest(PyObject *Py_UNUSED(m), PyObject *arg)
{
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    unsigned char out[DIGEST_LEN];
    if (view.len > (1 << 20)) {
        Py_BEGIN_ALLOW_THREADS
        entry_digest(view.buf, (size_t)view.len, out);
        Py_END_ALLOW_THREADS
    } else {
        entry_digest(view.buf, (size_t)view.len, out);
    }
    PyBuffer_Release(&view);
    return PyBytes_FromStringAndSize((const char *)out, DIGEST_LEN);
}

/* ---- reading an entry */

/* The whole file into a new bytes object; NULL with *absent set when it
 * cannot be opened or read (no exception), NULL with an exception on
 * MemoryError. */
static PyObject *
read_file(const char *path, int *absent)
{
    int fd;
    struct stat st;
    Py_BEGIN_ALLOW_THREADS
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd >= 0 && fstat(fd, &st) != 0) {
        close(fd);
        fd = -1;
    }
    Py_END_ALLOW_THREADS
    *absent = 1;
    if (fd < 0)
        return NULL;
    if (st.st_size < HEAD_SIZE || (uint64_t)st.st_size > (uint64_t)PY_SSIZE_T_MAX) {
        close(fd);
        *absent = 0; /* there, but it cannot be an entry */
        return NULL;
    }
    PyObject *data = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)st.st_size);
    if (data == NULL) {
        close(fd);
        *absent = 0;
        return NULL;
    }
    char *buf = PyBytes_AS_STRING(data);
    size_t want = (size_t)st.st_size, got = 0;
    Py_BEGIN_ALLOW_THREADS
    while (got < want) {
        ssize_t r = read(fd, buf + got, want - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    close(fd);
    Py_END_ALLOW_THREADS
    if (got != want) { /* it shrank meanwhile: not a whole entry */
        Py_DECREF(data);
        *absent = 0;
        return NULL;
    }
    return data;
}

/* The entry at `path` (a new reference): (full key, kind index, metadata,
 * image); Py_None when the file cannot be read, Py_False when it is not an
 * intact entry; NULL with an exception only on MemoryError. */
static PyObject *
read_entry(const char *path)
{
    int absent;
    PyObject *data = read_file(path, &absent);
    if (data == NULL)
        return PyErr_Occurred() ? NULL : Py_NewRef(absent ? Py_None : Py_False);
    const unsigned char *d = (const unsigned char *)PyBytes_AS_STRING(data);
    size_t n = (size_t)PyBytes_GET_SIZE(data);
    uint32_t mlen;
    uint64_t ilen;
    memcpy(&mlen, d + DIGEST_FROM + KEY_LEN, 4);
    memcpy(&ilen, d + DIGEST_FROM + KEY_LEN + 4, 8);
    unsigned char digest[DIGEST_LEN];
    PyObject *out = Py_False, *meta = NULL;
    if (memcmp(d, MAGIC, MAGIC_LEN) != 0 || ilen > n || n - HEAD_SIZE != (uint64_t)mlen + ilen)
        goto done;
    entry_digest(d + DIGEST_FROM, n - DIGEST_FROM, digest);
    if (memcmp(digest, d + MAGIC_LEN, DIGEST_LEN) != 0)
        goto done;
    meta = PyMarshal_ReadObjectFromString((const char *)d + HEAD_SIZE, (Py_ssize_t)mlen);
    if (meta == NULL) { /* checked, so ours: a marshal format this Python cannot read */
        PyErr_Clear();
        goto done;
    }
    out = Py_BuildValue("(y#iNy#)", (const char *)d + DIGEST_FROM, (Py_ssize_t)KEY_LEN,
                        (int)d[DIGEST_FROM + KEY_LEN + 12], meta,
                        (const char *)d + HEAD_SIZE + mlen, (Py_ssize_t)ilen);
    Py_DECREF(data);
    return out;
done:
    Py_DECREF(data);
    return Py_NewRef(out);
}

PyDoc_STRVAR(cache_read_doc,
"_cache_read(path, /)\n--\n\n"
"Private, for barecuda._diskcache: the disk entry at `path` as (full key, kind\n"
"index, metadata, image), after checking its magic, lengths and checksum and\n"
"unmarshalling its metadata.  None when the file cannot be read (absent),\n"
"False when it is there but not an intact entry.");

static PyObject *
bc_cache_read(PyObject *Py_UNUSED(m), PyObject *arg)
{
    PyObject *path = NULL;
    if (!PyUnicode_FSConverter(arg, &path))
        return NULL;
    PyObject *out = read_entry(PyBytes_AS_STRING(path));
    Py_DECREF(path);
    return out;
}

/* ---- the recorded dependencies
 *
 * A record this code cannot read counts as changed (0): the compiler then works
 * out the full key and writes a new record, so nothing here raises. */

/* Whether `expected`, None or (inode, size, mtime_ns), describes `path` now. */
static int
sig_matches(const char *path, PyObject *expected)
{
    struct stat st;
    int there;
    Py_BEGIN_ALLOW_THREADS
    there = stat(path, &st) == 0;
    Py_END_ALLOW_THREADS
    if (expected == Py_None)
        return !there;
    if (!there || !PyTuple_Check(expected) || PyTuple_GET_SIZE(expected) != 3)
        return 0;
    unsigned long long ino = PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(expected, 0));
    long long size = PyLong_AsLongLong(PyTuple_GET_ITEM(expected, 1));
    long long mtime = PyLong_AsLongLong(PyTuple_GET_ITEM(expected, 2));
    if (PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    long long now = (long long)st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec;
    return ino == (unsigned long long)st.st_ino && size == (long long)st.st_size && mtime == now;
}

/* `path` (a str) in the filesystem's encoding, as os.stat encodes it; NULL
 * (no exception) when it cannot be. */
static PyObject *
fs_path(PyObject *path)
{
    PyObject *bytes = NULL;
    if (!PyUnicode_Check(path) || !PyUnicode_FSConverter(path, &bytes)) {
        PyErr_Clear();
        return NULL;
    }
    return bytes;
}

/* Whether sys.path's `entry` is searched for an `nvidia` directory: a str, not
 * empty, not one of `not_site`, not a zip archive. */
static int
site_entry(PyObject *entry, PyObject *not_site)
{
    if (!PyUnicode_Check(entry))
        return 0;
    Py_ssize_t n = PyUnicode_GET_LENGTH(entry);
    if (n == 0)
        return 0;
    if (n >= 4) {
        static const char zip[] = ".zip";
        int same = 1;
        for (Py_ssize_t i = 0; i < 4 && same; i++)
            same = PyUnicode_READ_CHAR(entry, n - 4 + i) == (Py_UCS4)zip[i];
        if (same)
            return 0;
    }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(not_site); i++) {
        PyObject *other = PyTuple_GET_ITEM(not_site, i);
        if (PyUnicode_Check(other) && PyUnicode_Compare(entry, other) == 0)
            return 0;
    }
    return 1;
}

/* Whether the `nvidia` directories on sys.path are those recorded, in order
 * (_diskcache.nvidia_dirs: each site entry joined with "nvidia" as
 * os.path.join does, kept where it exists). */
static int
nvidia_dirs_match(PyObject *recorded, PyObject *not_site)
{
    if (!PyTuple_Check(recorded))
        return 0;
    /* held, and its length read again at each step: the GIL is let go around
     * each stat, and another thread may change sys.path meanwhile */
    PyObject *syspath = PySys_GetObject("path"); /* borrowed */
    if (syspath == NULL || !PyList_Check(syspath))
        return PyTuple_GET_SIZE(recorded) == 0;
    Py_INCREF(syspath);
    Py_ssize_t next = 0, nrec = PyTuple_GET_SIZE(recorded);
    int r = 1;
    for (Py_ssize_t i = 0; r && i < PyList_GET_SIZE(syspath); i++) {
        PyObject *entry = PyList_GET_ITEM(syspath, i);
        if (!site_entry(entry, not_site))
            continue;
        PyObject *bytes = fs_path(entry);
        if (bytes == NULL) {
            r = 0;
            break;
        }
        Py_ssize_t len = PyBytes_GET_SIZE(bytes);
        const char *s = PyBytes_AS_STRING(bytes);
        char *joined = PyMem_Malloc((size_t)len + sizeof "/nvidia");
        if (joined == NULL) {
            Py_DECREF(bytes);
            r = 0;
            break;
        }
        memcpy(joined, s, (size_t)len);
        strcpy(joined + len, s[len - 1] == '/' ? "nvidia" : "/nvidia");
        Py_DECREF(bytes);
        struct stat st;
        int there;
        Py_BEGIN_ALLOW_THREADS
        there = stat(joined, &st) == 0;
        Py_END_ALLOW_THREADS
        if (there) { /* the next recorded one, with this signature */
            PyObject *rec = next < nrec ? PyTuple_GET_ITEM(recorded, next++) : NULL;
            PyObject *sig = rec != NULL && PyTuple_Check(rec) && PyTuple_GET_SIZE(rec) == 2
                                ? PyTuple_GET_ITEM(rec, 1) : NULL;
            r = sig != NULL && sig != Py_None && sig_matches(joined, sig);
        }
        PyMem_Free(joined);
    }
    Py_DECREF(syspath);
    return r && next == nrec;
}

/* Whether the dependency record `deps` of an entry, (files, nvidia
 * directories, header stamp), holds for its first two parts: each (path,
 * signature) of `files` as stat says now, and the `nvidia` directories on
 * sys.path as recorded.  Not for anything else (None for nvcc's entries). */
static int
deps_hold(PyObject *deps, PyObject *not_site)
{
    if (!PyTuple_Check(deps) || PyTuple_GET_SIZE(deps) != 3 ||
        !PyTuple_Check(PyTuple_GET_ITEM(deps, 0)))
        return 0;
    PyObject *files = PyTuple_GET_ITEM(deps, 0);
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(files); i++) {
        PyObject *dep = PyTuple_GET_ITEM(files, i), *bytes;
        if (!PyTuple_Check(dep) || PyTuple_GET_SIZE(dep) != 2 ||
            (bytes = fs_path(PyTuple_GET_ITEM(dep, 0))) == NULL)
            return 0;
        int r = sig_matches(PyBytes_AS_STRING(bytes), PyTuple_GET_ITEM(dep, 1));
        Py_DECREF(bytes);
        if (!r)
            return 0;
    }
    return nvidia_dirs_match(PyTuple_GET_ITEM(deps, 1), not_site);
}

/* Feed `text` (a str, UTF-8 with lone surrogates kept as bytes) and a
 * separator into the digest. */
static int
digest_str(digest_state *d, PyObject *text)
{
    if (!PyUnicode_Check(text)) {
        PyErr_Format(PyExc_TypeError, "the quick key's parts must be str, not %.100s",
                     Py_TYPE(text)->tp_name);
        return -1;
    }
    Py_ssize_t n;
    const char *u = PyUnicode_AsUTF8AndSize(text, &n);
    if (u != NULL) {
        digest_update(d, u, (size_t)n);
    } else {
        PyErr_Clear();
        PyObject *b = PyUnicode_AsEncodedString(text, "utf-8", "surrogateescape");
        if (b == NULL)
            return -1;
        digest_update(d, PyBytes_AS_STRING(b), (size_t)PyBytes_GET_SIZE(b));
        Py_DECREF(b);
    }
    digest_update(d, "\1", 1);
    return 0;
}

PyDoc_STRVAR(cache_quick_doc,
"_cache_quick(directory, parts, env_names, not_site, /)\n--\n\n"
"Private, for barecuda.compiler: the disk cache's quick look-up in one call.\n"
"The quick key is the 16-byte hash of `parts` (str) and the values of the\n"
"environment variables `env_names` (absent as empty); its link is\n"
"`directory`/<key in hex>.hit.  Returns (key, entry, current): `entry` as\n"
"_cache_read gives it for the link, and `current` True when the entry's\n"
"recorded files and `nvidia` directories on sys.path are unchanged (sys.path's\n"
"entries in the tuple `not_site`, and zip archives, are not searched).");

static PyObject *
bc_cache_quick(PyObject *Py_UNUSED(m), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4)
        return PyErr_Format(PyExc_TypeError,
                            "_cache_quick() takes 4 positional arguments (%zd given)", nargs);
    PyObject *parts = args[1], *names = args[2], *not_site = args[3];
    if (!PyTuple_Check(parts) || !PyTuple_Check(names) || !PyTuple_Check(not_site))
        return PyErr_Format(PyExc_TypeError, "parts, env_names and not_site must be tuples");
    digest_state d;
    digest_init(&d);
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(parts); i++)
        if (digest_str(&d, PyTuple_GET_ITEM(parts, i)) < 0)
            return NULL;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(names); i++) {
        PyObject *name = PyTuple_GET_ITEM(names, i);
        const char *u = PyUnicode_Check(name) ? PyUnicode_AsUTF8(name) : NULL;
        if (u == NULL) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_TypeError, "env_names must hold str");
            return NULL;
        }
        const char *v = getenv(u);
        if (v != NULL)
            digest_update(&d, v, strlen(v));
        digest_update(&d, "\1", 1);
    }
    unsigned char key[DIGEST_LEN];
    digest_final(&d, key);

    PyObject *dir = NULL, *entry = NULL;
    if (!PyUnicode_FSConverter(args[0], &dir))
        return NULL;
    static const char hex[] = "0123456789abcdef";
    size_t dlen = (size_t)PyBytes_GET_SIZE(dir);
    char *path = PyMem_Malloc(dlen + 1 + 2 * DIGEST_LEN + sizeof ".hit");
    if (path == NULL) {
        Py_DECREF(dir);
        return PyErr_NoMemory();
    }
    memcpy(path, PyBytes_AS_STRING(dir), dlen);
    Py_DECREF(dir);
    path[dlen] = '/';
    for (int i = 0; i < DIGEST_LEN; i++) {
        path[dlen + 1 + 2 * i] = hex[key[i] >> 4];
        path[dlen + 2 + 2 * i] = hex[key[i] & 15];
    }
    strcpy(path + dlen + 1 + 2 * DIGEST_LEN, ".hit");
    entry = read_entry(path);
    PyMem_Free(path);
    if (entry == NULL)
        return NULL;
    int current = 0;
    if (PyTuple_Check(entry)) {
        PyObject *meta = PyTuple_GET_ITEM(entry, 2);
        current = PyTuple_Check(meta) && PyTuple_GET_SIZE(meta) == 4 &&
                  deps_hold(PyTuple_GET_ITEM(meta, 3), not_site);
    }
    return Py_BuildValue("(y#NO)", (const char *)key, (Py_ssize_t)DIGEST_LEN, entry,
                         current ? Py_True : Py_False);
}

static PyMethodDef diskcache_methods[] = {
    {"_cache_digest", bc_cache_digest, METH_O, cache_digest_doc},
    {"_cache_read", bc_cache_read, METH_O, cache_read_doc},
    {"_cache_quick", (PyCFunction)(void (*)(void))bc_cache_quick, METH_FASTCALL, cache_quick_doc},
    {NULL, NULL, 0, NULL},
};

int
bc_diskcache_setup(PyObject *m, bc_State *Py_UNUSED(st))
{
    return PyModule_AddFunctions(m, diskcache_methods);
}
