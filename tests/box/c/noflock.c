/* LD_PRELOAD shim: a file system without locks, as a Lustre client mounted without -o flock.
 *
 * flock(), lockf() and fcntl()'s lock commands fail with ENOSYS; everything else is passed to libc.
 * fcntl64 is the name glibc >= 2.28 gives fcntl in programs built with 64-bit file offsets (Python). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <sys/file.h>
#include <unistd.h>

typedef int (*fcntl_fn)(int, int, ...);

static int is_lock(int cmd) {
    switch (cmd) {
    case F_GETLK:
    case F_SETLK:
    case F_SETLKW:
    case F_OFD_GETLK:
    case F_OFD_SETLK:
    case F_OFD_SETLKW:
        return 1;
    default:
        return 0;
    }
}

static int pass(const char *name, int fd, int cmd, void *arg) {
    fcntl_fn real = (fcntl_fn)dlsym(RTLD_NEXT, name);
    if (real == NULL) {
        errno = ENOSYS;
        return -1;
    }
    return real(fd, cmd, arg);
}

int flock(int fd, int operation) {
    (void)fd;
    (void)operation;
    errno = ENOSYS;
    return -1;
}

int lockf(int fd, int cmd, off_t len) {
    (void)fd;
    (void)len;
    if (cmd == F_ULOCK) /* unlocking what could never be locked is harmless */
        return 0;
    errno = ENOSYS;
    return -1;
}

int lockf64(int fd, int cmd, off_t len) { return lockf(fd, cmd, len); }

/* Every fcntl argument is an int or a pointer: read as a pointer, it is passed on as it came. */
#define SHIM(name)                                                                                  \
    int name(int fd, int cmd, ...) {                                                                \
        va_list ap;                                                                                 \
        va_start(ap, cmd);                                                                          \
        void *arg = va_arg(ap, void *);                                                             \
        va_end(ap);                                                                                 \
        if (is_lock(cmd)) {                                                                         \
            errno = ENOSYS;                                                                         \
            return -1;                                                                              \
        }                                                                                           \
        return pass(#name, fd, cmd, arg);                                                           \
    }

SHIM(fcntl)
SHIM(fcntl64)
