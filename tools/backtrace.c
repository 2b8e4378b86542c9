/* SPDX-License-Identifier: MIT */
/* A C backtrace when a process crashes, for hunting a crash on a machine with no
 * debugger.  Built as a shared object and preloaded:
 *
 *     cc -O1 -g -shared -fPIC tools/backtrace.c -o /tmp/backtrace.so
 *     LD_PRELOAD=/tmp/backtrace.so python3 -m pytest ...
 *
 * (`BARECUDA_BACKTRACE=1 bash .ci/gpu` does both.)  On SIGSEGV, SIGBUS, SIGILL
 * or SIGFPE it writes to stderr the faulting thread's return addresses, named by
 * glibc's backtrace_symbols_fd as `object(+offset)`, then the executable
 * mappings of barecuda's extension and of the CUDA driver, so that an offset
 * can be read with `addr2line -e _driver....so OFFSET` against the build that
 * ran.  Then the signal is raised again with its default action, so the process
 * dies as it would have.  Python's faulthandler, enabled later by pytest, calls
 * the handler it replaced after printing the Python stack, so both appear.
 * Only async-signal-safe calls are made in the handler (backtrace() is loaded
 * once beforehand: its first call may allocate). */
#define _GNU_SOURCE
#include <execinfo.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

static void
say(const char *s, size_t n)
{
    while (n > 0) {
        ssize_t w = write(STDERR_FILENO, s, n);
        if (w <= 0)
            return;
        s += w;
        n -= (size_t)w;
    }
}

#define SAY(lit) say(lit, sizeof lit - 1)

/* The lines of /proc/self/maps that map code of the objects worth naming. */
static void
code_maps(void)
{
    int fd = open("/proc/self/maps", O_RDONLY);
    if (fd < 0)
        return;
    char buf[4096], line[1024];
    size_t len = 0;
    ssize_t got;
    while ((got = read(fd, buf, sizeof buf)) > 0) {
        for (ssize_t i = 0; i < got; i++) {
            if (len < sizeof line - 1)
                line[len++] = buf[i];
            if (buf[i] != '\n')
                continue;
            line[len] = '\0';
            if (strstr(line, " r-xp ") &&
                (strstr(line, "_driver") || strstr(line, "libcuda") || strstr(line, "libnvrtc")))
                say(line, len);
            len = 0;
        }
    }
    close(fd);
}

static void
on_fault(int sig)
{
    void *pcs[64];
    int n = backtrace(pcs, 64);
    SAY("\n=== tools/backtrace.c: fatal signal, C backtrace of the faulting thread\n");
    backtrace_symbols_fd(pcs, n, STDERR_FILENO);
    SAY("=== code mappings (start-end perms offset dev inode path)\n");
    code_maps();
    signal(sig, SIG_DFL);
    raise(sig);
}

__attribute__((constructor)) static void
install(void)
{
    void *warm[1];
    backtrace(warm, 1); /* loads libgcc_s now, not inside the handler */
    static const int sigs[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_fault;
        sa.sa_flags = SA_NODEFER | SA_RESETHAND;
        sigemptyset(&sa.sa_mask);
        sigaction(sigs[i], &sa, NULL);
    }
}
