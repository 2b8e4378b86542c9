/* SPDX-License-Identifier: MIT */
/* Finding and loading libcuda and libnvrtc at first use.
 *
 * The extension links neither library: `import barecuda` works on a machine
 * without a GPU or driver.  The first call that needs the driver dlopens
 * libcuda.so.1 (or $BARECUDA_LIBCUDA), resolves every entry point of
 * BC_DRIVER_FUNCTIONS through cuGetProcAddress for the headers' CUDA_VERSION and
 * calls cuInit(0).  NVRTC is searched in the order docs/reference/environment.md
 * gives.  Both tables are filled once, under the GIL, and are read-only afterwards.
 *
 * NVRTC loads its builtins library (libnvrtc-builtins.so.<major>.<minor>) with
 * a dlopen by soname at its first compile, which finds it only through
 * libnvrtc's RPATH, LD_LIBRARY_PATH or the linker cache: the 13.0 pip wheel's
 * libnvrtc has no RPATH, so with the toolkit absent every compile failed.  The
 * loader therefore loads the builtins found next to the libnvrtc it loaded,
 * by full path, before NVRTC's first use; glibc then answers NVRTC's own dlopen
 * with the object already loaded (it matches loaded objects by soname). */
#include "barecuda/loader.h"

#include <dirent.h>
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

bc_driver_table bc_drv;
bc_nvrtc_table bc_nvrtc;
int bc_drv_ready;
int bc_nvrtc_ready;
int bc_forked_child;

static void *libcuda_handle;
static void *libnvrtc_handle;
static char libcuda_path[4096];
static char libnvrtc_path[4096];
static char builtins_path[4096];
/* What the last failed attempt searched, kept so every later call says the same. */
static char driver_failure[8192];
static char nvrtc_failure[8192];

/* Stand-in for an entry point the installed driver does not have.  Called through
 * a pointer of another prototype: the arguments are ignored, which is safe in the
 * C calling conventions of every platform CUDA supports. */
static CUresult
bc_missing_entry(void)
{
    return CUDA_ERROR_NOT_SUPPORTED;
}

static void
append(char *buf, size_t cap, const char *fmt, ...)
{
    size_t len = strlen(buf);
    if (len + 1 >= cap)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + len, cap - len, fmt, ap);
    va_end(ap);
}

/* CUDA cannot be used in a child forked after the parent initialised it; the
 * driver then answers every call with an error code that does not say why, so
 * remember the fork and let error.c say it. */
static void
mark_forked_child(void)
{
    bc_forked_child = 1;
}

static int
driver_error(bc_State *st)
{
    PyErr_SetString(st->Error, driver_failure);
    return -1;
}

int
bc_loader_load_driver(bc_State *st)
{
    if (bc_forked_child) {
        PyErr_SetString(st->RuntimeError,
                        "CUDA cannot be used in this process: it was forked after CUDA was "
                        "initialised in its parent.  Start workers with multiprocessing's "
                        "'spawn' or 'forkserver' method");
        return -1;
    }
    if (bc_drv_ready)
        return 0;
    if (driver_failure[0] != '\0')
        return driver_error(st);

    const char *override = getenv("BARECUDA_LIBCUDA");
    const char *name = (override && override[0]) ? override : "libcuda.so.1";
    void *h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) {
        const char *why = dlerror();
        snprintf(driver_failure, sizeof driver_failure,
                 "no CUDA driver could be loaded: dlopen(\"%s\") failed (%s); searched %s. "
                 "Install the NVIDIA driver, or set BARECUDA_LIBCUDA to the path of "
                 "libcuda.so.1",
                 name, why ? why : "unknown reason",
                 override ? "BARECUDA_LIBCUDA" : "the system library path (LD_LIBRARY_PATH, ldconfig)");
        return driver_error(st);
    }

    typedef CUresult (*get_proc_t)(const char *, void **, int, cuuint64_t,
                                   CUdriverProcAddressQueryResult *);
    typedef CUresult (*version_t)(int *);
    get_proc_t get_proc = (get_proc_t)dlsym(h, "cuGetProcAddress_v2");
    version_t get_version = (version_t)dlsym(h, "cuDriverGetVersion");
    if (get_proc == NULL || get_version == NULL) {
        snprintf(driver_failure, sizeof driver_failure,
                 "%s is not a usable CUDA driver: it lacks cuGetProcAddress_v2 or "
                 "cuDriverGetVersion (a CUDA 12 or newer driver is needed)", name);
        dlclose(h);
        return driver_error(st);
    }
    int version = 0;
    get_version(&version);
    if (version / 1000 < CUDA_VERSION / 1000) {
        snprintf(driver_failure, sizeof driver_failure,
                 "the CUDA driver in %s supports CUDA %d.%d, but barecuda was built with "
                 "CUDA %d.%d headers: update the driver or rebuild barecuda against an "
                 "older toolkit",
                 name, version / 1000, version % 1000 / 10, CUDA_VERSION / 1000,
                 CUDA_VERSION % 1000 / 10);
        dlclose(h);
        return driver_error(st);
    }

    /* Each entry is asked of cuGetProcAddress by its base name for the headers'
     * CUDA_VERSION, and checked against the exact symbol the header maps that name
     * to (cuMemAlloc -> cuMemAlloc_v2).  They can differ: for 13000 the driver
     * answers cuCtxGetDevice with cuCtxGetDevice_v2, whose prototype is not the
     * header's cuCtxGetDevice.  The header's own symbol wins, so every call uses
     * the ABI it was compiled against. */
    bc_driver_table table;
    CUdriverProcAddressQueryResult found;
#define BC_STR(x) #x
#define BC_XSTR(x) BC_STR(x)
#define BC_RESOLVE(fn)                                                                 \
    {                                                                                  \
        void *exact = dlsym(h, BC_XSTR(fn));                                           \
        void *proc = NULL;                                                             \
        if (get_proc(#fn, &proc, CUDA_VERSION, CU_GET_PROC_ADDRESS_LEGACY_STREAM,      \
                     &found) != CUDA_SUCCESS ||                                        \
            found != CU_GET_PROC_ADDRESS_SUCCESS)                                      \
            proc = NULL;                                                               \
        if (exact != NULL && proc != exact)                                            \
            proc = exact;                                                              \
        table.fn = proc ? (__typeof__(table.fn))proc                                   \
                        : (__typeof__(table.fn))(void (*)(void))bc_missing_entry;      \
    }
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations" /* see loader.h */
    BC_DRIVER_FUNCTIONS(BC_RESOLVE)
#pragma GCC diagnostic pop
#undef BC_RESOLVE

    CUresult rc = table.cuInit(0);
    if (rc != CUDA_SUCCESS) {
        const char *ename = NULL, *estr = NULL;
        table.cuGetErrorName(rc, &ename);
        table.cuGetErrorString(rc, &estr);
        snprintf(driver_failure, sizeof driver_failure,
                 "cuInit failed: %s: %s (driver %s loaded, but no usable GPU%s)",
                 ename ? ename : "CUDA_ERROR_UNKNOWN", estr ? estr : "unknown error", name,
                 rc == CUDA_ERROR_NO_DEVICE ? " is visible: check CUDA_VISIBLE_DEVICES" : "");
        dlclose(h);
        return driver_error(st);
    }
    Dl_info info;
    if (dladdr((void *)get_version, &info) && info.dli_fname)
        snprintf(libcuda_path, sizeof libcuda_path, "%s", info.dli_fname);
    else
        snprintf(libcuda_path, sizeof libcuda_path, "%s", name);
    bc_drv = table;
    libcuda_handle = h;
    bc_drv_ready = 1;
    pthread_atfork(NULL, NULL, mark_forked_child);
    return 0;
}

/* ---------------------------------------------------- toolkit libraries */

static void *
try_library(const char *path, const char *probe, int flags)
{
    void *h = dlopen(path, flags);
    if (h != NULL && dlsym(h, probe) == NULL) {
        dlclose(h);
        return NULL;
    }
    return h;
}

/* Visit dir+sub; a directory the visitor declines is listed in `searched`. */
static int
visit_dir(const char *dir, const char *sub, bc_dir_visitor visit, void *arg, char *searched,
          size_t cap)
{
    char path[4096];
    snprintf(path, sizeof path, "%s%s", dir, sub);
    if (visit(path, arg))
        return 1;
    append(searched, cap, "\n  %s", path);
    return 0;
}

int
bc_loader_search_toolkit(const char *const *wheel_dirs, bc_dir_visitor visit, void *arg,
                         char *searched, size_t cap)
{
    /* NVIDIA's pip wheels: <entry><wheel dir> for every sys.path entry holding nvidia/. */
    PyObject *path = PySys_GetObject("path"); /* borrowed */
    if (path != NULL && PyList_Check(path)) {
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(path); i++) {
            PyObject *entry = PyList_GET_ITEM(path, i);
            if (!PyUnicode_Check(entry))
                continue;
            const char *dir = PyUnicode_AsUTF8(entry);
            if (dir == NULL) {
                PyErr_Clear();
                continue;
            }
            char probe[4096];
            snprintf(probe, sizeof probe, "%s/nvidia", dir);
            if (access(probe, F_OK) != 0)
                continue;
            for (const char *const *sub = wheel_dirs; *sub; sub++)
                if (visit_dir(dir, *sub, visit, arg, searched, cap))
                    return 1;
        }
    }
    const char *envs[] = {"CUDA_HOME", "CUDA_PATH"};
    for (size_t i = 0; i < BC_COUNT(envs); i++) {
        const char *root = getenv(envs[i]);
        if (root && root[0] &&
            (visit_dir(root, "/lib64", visit, arg, searched, cap) ||
             visit_dir(root, "/lib", visit, arg, searched, cap)))
            return 1;
    }
    return visit_dir("/usr/local/cuda", "/lib64", visit, arg, searched, cap);
}

struct library_try {
    const bc_libspec *spec;
    void *handle;
};

/* Visitor: dlopen dir/<soname> for each of the spec's sonames. */
static int
try_library_dir(const char *dir, void *arg)
{
    struct library_try *t = arg;
    char path[4096 + 64];
    for (const char *const *so = t->spec->sonames; *so; so++) {
        snprintf(path, sizeof path, "%s/%s", dir, *so);
        t->handle = try_library(path, t->spec->probe, RTLD_NOW | RTLD_LOCAL);
        if (t->handle)
            return 1;
    }
    return 0;
}

void *
bc_loader_find_library(const bc_libspec *spec, char *failure, size_t cap)
{
    char searched[6144] = "";
    struct library_try t = {spec, NULL};
    const char *override = getenv(spec->env);
    if (override && override[0]) {
        t.handle = try_library(override, spec->probe, RTLD_NOW | RTLD_LOCAL);
        if (t.handle == NULL) {
            const char *why = dlerror();
            snprintf(failure, cap, "%s=%s could not be loaded as %s (%s)", spec->env, override,
                     spec->what, why ? why : "a needed symbol is missing");
        }
        return t.handle;
    }
    for (const char *const *so = spec->sonames; t.handle == NULL && *so; so++)
        t.handle = try_library(*so, spec->probe, RTLD_NOW | RTLD_NOLOAD);
    if (t.handle == NULL) {
        append(searched, sizeof searched, "\n  a %s already loaded in the process", spec->what);
        bc_loader_search_toolkit(spec->wheel_dirs, try_library_dir, &t, searched,
                                 sizeof searched);
    }
    for (const char *const *so = spec->sonames; t.handle == NULL && *so; so++)
        t.handle = try_library(*so, spec->probe, RTLD_NOW | RTLD_LOCAL);
    if (t.handle == NULL) {
        char names[256] = "";
        for (const char *const *so = spec->sonames; *so; so++)
            append(names, sizeof names, "%s%s", so == spec->sonames ? "" : ", ", *so);
        append(searched, sizeof searched, "\n  the system loader (%s)", names);
        snprintf(failure, cap, "%s (%s) was not found; searched:%s\n%s, or set %s to the "
                 "library's path", spec->what, names, searched, spec->hint, spec->env);
    }
    return t.handle;
}

/* ------------------------------------------------------------------ NVRTC */

static const char *const nvrtc_sonames[] = {"libnvrtc.so.13", "libnvrtc.so.12", NULL};
static const char *const nvrtc_wheel_dirs[] = {"/nvidia/cu13/lib", "/nvidia/cuda_nvrtc/lib",
                                               NULL};
static const bc_libspec nvrtc_spec = {
    .what = "NVRTC",
    .sonames = nvrtc_sonames,
    .probe = "nvrtcCompileProgram",
    .wheel_dirs = nvrtc_wheel_dirs,
    .env = "BARECUDA_NVRTC",
    .hint = "Install the CUDA toolkit or NVIDIA's NVRTC wheel (`pip install "
            "\"barecuda[cu13]\"`; for CUDA 12 `nvidia-cuda-nvrtc-cu12`)",
};

/* The file an already loaded object was loaded from (from its link map). */
static int
loaded_from(void *h, char *out, size_t cap)
{
    struct link_map *map = NULL;
    if (dlinfo(h, RTLD_DI_LINKMAP, &map) != 0 || map == NULL || map->l_name == NULL ||
        map->l_name[0] == '\0')
        return 0;
    snprintf(out, cap, "%s", map->l_name);
    return 1;
}

/* Keep the builtins library matching the loaded libnvrtc loaded (see the top of
 * the file).  Never fails: without it NVRTC's own search still runs, and its
 * compile error then names the file it could not open.  The handle is kept
 * for the life of the process, as libnvrtc's is. */
static void
load_nvrtc_builtins(bc_nvrtc_table *table)
{
    int major = 0, minor = 0;
    if (table->nvrtcVersion == NULL || table->nvrtcVersion(&major, &minor) != 0)
        return;
    char soname[64];
    snprintf(soname, sizeof soname, "libnvrtc-builtins.so.%d.%d", major, minor);
    void *b = dlopen(soname, RTLD_NOW | RTLD_NOLOAD);
    if (b != NULL) { /* loaded already (by NVRTC of another user, or the host) */
        if (!loaded_from(b, builtins_path, sizeof builtins_path))
            snprintf(builtins_path, sizeof builtins_path, "%s", soname);
        return;
    }
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", libnvrtc_path);
    char *slash = strrchr(dir, '/');
    if (slash == NULL)
        return; /* loaded by soname from the system loader's search: it finds builtins too */
    *slash = '\0';
    char path[4096 + 80];
    snprintf(path, sizeof path, "%s/%s", dir, soname);
    b = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (b == NULL) {
        /* Another naming (libnvrtc-builtins.so.13.0.88 only): any builtins of
         * this version in the directory, the .alt variant excluded. */
        DIR *d = opendir(dir);
        if (d == NULL)
            return;
        size_t n = strlen(soname);
        struct dirent *e;
        while (b == NULL && (e = readdir(d)) != NULL) {
            if (strncmp(e->d_name, soname, n) != 0 || (e->d_name[n] != '\0' &&
                                                      e->d_name[n] != '.'))
                continue;
            int len = snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            if (len < 0 || (size_t)len >= sizeof path)
                continue; /* a name that does not fit is not one of ours */
            b = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        }
        closedir(d);
        if (b == NULL)
            return;
    }
    int len = snprintf(builtins_path, sizeof builtins_path, "%s", path);
    if (len < 0 || (size_t)len >= sizeof builtins_path) /* for reports only: say so */
        snprintf(builtins_path, sizeof builtins_path, "%s (in a folder too long to show)",
                 soname);
}

int
bc_loader_load_nvrtc(bc_State *st)
{
    if (bc_nvrtc_ready)
        return 0;
    if (nvrtc_failure[0] != '\0') {
        PyErr_SetString(st->Error, nvrtc_failure);
        return -1;
    }
    void *h = bc_loader_find_library(&nvrtc_spec, nvrtc_failure, sizeof nvrtc_failure);
    if (h == NULL) {
        PyErr_SetString(st->Error, nvrtc_failure);
        return -1;
    }
    bc_nvrtc_table table;
#define BC_NVRTC_RESOLVE(fn) table.fn = (__typeof__(table.fn))dlsym(h, #fn);
    BC_NVRTC_FUNCTIONS(BC_NVRTC_RESOLVE)
#undef BC_NVRTC_RESOLVE
    Dl_info info;
    if (dladdr((void *)table.nvrtcCompileProgram, &info) && info.dli_fname)
        snprintf(libnvrtc_path, sizeof libnvrtc_path, "%s", info.dli_fname);
    if (table.nvrtcVersion == NULL || table.nvrtcCreateProgram == NULL ||
        table.nvrtcGetCUBIN == NULL || table.nvrtcGetLoweredName == NULL) {
        snprintf(nvrtc_failure, sizeof nvrtc_failure,
                 "%s is too old: NVRTC 12 or newer is needed", libnvrtc_path);
        PyErr_SetString(st->Error, nvrtc_failure);
        return -1;
    }
    load_nvrtc_builtins(&table);
    bc_nvrtc = table;
    libnvrtc_handle = h;
    bc_nvrtc_ready = 1;
    return 0;
}

/* ----------------------------------------------------------------- Python */

PyDoc_STRVAR(init_doc,
"init(flags=0)\n--\n\n"
"Load the CUDA driver and initialise it (cuInit).  Called implicitly by every\n"
"function that needs the driver; raises Error naming what was searched when no\n"
"driver can be loaded.  `flags` must be 0, as the driver requires.");

static PyObject *
bc_init(PyObject *m, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"flags", NULL};
    int flags = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|i:init", kwlist, &flags))
        return NULL;
    if (flags != 0) {
        PyErr_SetString(PyExc_ValueError, "init(): flags must be 0");
        return NULL;
    }
    BC_REQUIRE_DRIVER(bc_state_from_module(m), NULL);
    Py_RETURN_NONE;
}

PyDoc_STRVAR(nvrtc_version_doc,
"nvrtc_version()\n--\n\n"
"(major, minor) of the NVRTC that barecuda loaded (loading it if needed).");

static PyObject *
bc_nvrtc_version(PyObject *m, PyObject *Py_UNUSED(ignored))
{
    bc_State *st = bc_state_from_module(m);
    if (bc_loader_load_nvrtc(st) < 0)
        return NULL;
    int major = 0, minor = 0;
    bc_nvrtc.nvrtcVersion(&major, &minor);
    return Py_BuildValue("(ii)", major, minor);
}

PyDoc_STRVAR(loader_info_doc,
"loader_info()\n--\n\n"
"A dict saying what was loaded from where: 'libcuda', 'libnvrtc' and\n"
"'libnvrtc_builtins' (NVRTC's builtins library, loaded from libnvrtc's directory\n"
"with it; paths or None) and, for a failed load, 'libcuda_error' /\n"
"'libnvrtc_error'; 'header_version' is the CUDA_VERSION barecuda was built with.\n"
"Loads nothing.");

static PyObject *
bc_loader_info(PyObject *m, PyObject *Py_UNUSED(ignored))
{
    BC_UNUSED(m);
    return Py_BuildValue("{s:z,s:z,s:z,s:z,s:z,s:i}",
                         "libcuda", bc_drv_ready ? libcuda_path : NULL,
                         "libnvrtc", bc_nvrtc_ready ? libnvrtc_path : NULL,
                         "libnvrtc_builtins",
                         bc_nvrtc_ready && builtins_path[0] ? builtins_path : NULL,
                         "libcuda_error", driver_failure[0] ? driver_failure : NULL,
                         "libnvrtc_error", nvrtc_failure[0] ? nvrtc_failure : NULL,
                         "header_version", CUDA_VERSION);
}

static PyMethodDef loader_methods[] = {
    {"init", (PyCFunction)(void (*)(void))bc_init, METH_VARARGS | METH_KEYWORDS, init_doc},
    {"nvrtc_version", bc_nvrtc_version, METH_NOARGS, nvrtc_version_doc},
    {"loader_info", bc_loader_info, METH_NOARGS, loader_info_doc},
    {NULL, NULL, 0, NULL},
};

int
bc_loader_setup(PyObject *m, bc_State *st)
{
    BC_UNUSED(st);
    return PyModule_AddFunctions(m, loader_methods);
}
