/* clockshift: an LD_PRELOAD shim under which a process's wall clock runs FRAY_BOX_CLOCK_OFFSET seconds off.
 *
 * Only the wall clock (CLOCK_REALTIME, gettimeofday, time): the monotonic clock, sleeps and timed waits stay
 * the kernel's, as on a machine whose clock is merely set wrong. libfaketime (0.9.10, Debian bookworm) cannot
 * do that for Python 3.11: with its monotonic clock faked a threading.Event.wait() never returns, and with
 * it left alone time.sleep() fails with EINVAL (its clock_nanosleep rewrites an absolute monotonic time).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <sys/time.h>
#include <time.h>

static double offset(void) {
    static int read = 0;
    static double value = 0.0;
    if (!read) {
        const char *text = getenv("FRAY_BOX_CLOCK_OFFSET");
        value = text ? strtod(text, NULL) : 0.0;
        read = 1;
    }
    return value;
}

static void shift(struct timespec *ts) {
    double off = offset();
    long long sec = (long long)off;
    long long nsec = (long long)((off - (double)sec) * 1e9);
    ts->tv_sec += sec;
    ts->tv_nsec += nsec;
    if (ts->tv_nsec >= 1000000000L) { ts->tv_sec += 1; ts->tv_nsec -= 1000000000L; }
    if (ts->tv_nsec < 0) { ts->tv_sec -= 1; ts->tv_nsec += 1000000000L; }
}

int clock_gettime(clockid_t clock, struct timespec *ts) {
    static int (*real)(clockid_t, struct timespec *) = NULL;
    if (!real) real = (int (*)(clockid_t, struct timespec *))dlsym(RTLD_NEXT, "clock_gettime");
    int rc = real(clock, ts);
    if (rc == 0 && (clock == CLOCK_REALTIME || clock == CLOCK_REALTIME_COARSE)) shift(ts);
    return rc;
}

int gettimeofday(struct timeval *restrict tv, void *restrict tz) {
    struct timespec ts;
    int rc = clock_gettime(CLOCK_REALTIME, &ts);
    struct timeval *out = tv;  /* glibc declares tv nonnull; callers may still pass NULL for tz only */
    if (rc == 0) { out->tv_sec = ts.tv_sec; out->tv_usec = ts.tv_nsec / 1000; }
    (void)tz;
    return rc;
}

time_t time(time_t *out) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    if (out) *out = ts.tv_sec;
    return ts.tv_sec;
}
