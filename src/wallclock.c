/*
 * lockaudit's wall clock for external adapters: an LD_PRELOAD library that adds an offset,
 * read from a file, to the wall clock (clock_gettime on the CLOCK_REALTIME clocks,
 * gettimeofday, time, timespec_get) and to nothing else. Monotonic clocks, sleeps, timers
 * and waits go to libc untouched, as after a real clock step.
 *
 * Why not libfaketime: Debian 12's libfaketime 0.9.10 also rewrites clock_nanosleep, and
 * with FAKETIME_DONT_FAKE_MONOTONIC=1 it turns a TIMER_ABSTIME deadline on CLOCK_MONOTONIC
 * into a negative time (libfaketime issue #426). Python 3.11's time.sleep makes exactly that
 * call, so every sleep of a Python adapter failed with EINVAL.
 *
 * The file is $LOCKAUDIT_WALL_CLOCK_FILE as lockaudit's FakeClock writes it: seconds with a
 * sign and a fraction ("+20.000", "-0.250"), replaced whole by a rename. It is read on every
 * call (open, read, close), so a new offset applies from the next clock read after the
 * rename; a file that cannot be read keeps the offset last read (0 before any).
 *
 * Built by lockaudit's build.rs with the machine's C compiler and embedded in the binary.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/syscall.h>
/* struct timeval without <sys/time.h>, whose gettimeofday may not be given a null tv. */
#include <sys/select.h>
#include <time.h>
#include <unistd.h>

typedef int (*clock_gettime_fn)(clockid_t, struct timespec *);

static clock_gettime_fn real_clock_gettime;
static const char *offset_file;
static int64_t last_offset_ns;

/* The real function, found once the library is loaded. Before that (a clock read from
 * another library's constructor, or from inside dlsym) the system call does it. */
__attribute__((constructor)) static void init(void) {
    offset_file = getenv("LOCKAUDIT_WALL_CLOCK_FILE");
    __atomic_store_n(&real_clock_gettime,
                     (clock_gettime_fn)dlsym(RTLD_NEXT, "clock_gettime"),
                     __ATOMIC_RELEASE);
}

static int true_clock_gettime(clockid_t clock, struct timespec *ts) {
    clock_gettime_fn real = __atomic_load_n(&real_clock_gettime, __ATOMIC_ACQUIRE);
    if (real)
        return real(clock, ts);
    return (int)syscall(SYS_clock_gettime, clock, ts);
}

/* "+20.000" → 20 000 000 000 ns; -1 on anything else. */
static int parse_offset(const char *text, ssize_t len, int64_t *out) {
    ssize_t i = 0;
    int negative = 0;
    if (i < len && (text[i] == '+' || text[i] == '-'))
        negative = text[i++] == '-';
    int64_t secs = 0, nanos = 0, scale = 100000000;
    int digits = 0;
    for (; i < len && text[i] >= '0' && text[i] <= '9'; i++, digits++) {
        if (secs > (INT64_MAX / 1000000000 - 10) / 10)
            return -1;
        secs = secs * 10 + (text[i] - '0');
    }
    if (i < len && text[i] == '.') {
        for (i++; i < len && text[i] >= '0' && text[i] <= '9'; i++, digits++) {
            nanos += (text[i] - '0') * scale;
            scale /= 10;
        }
    }
    if (digits == 0)
        return -1;
    for (; i < len; i++)
        if (text[i] != '\n' && text[i] != ' ' && text[i] != '\r')
            return -1;
    int64_t total = secs * 1000000000 + nanos;
    *out = negative ? -total : total;
    return 0;
}

static int64_t offset_ns(void) {
    if (offset_file) {
        int fd = open(offset_file, O_RDONLY | O_CLOEXEC);
        if (fd >= 0) {
            char buf[64];
            ssize_t n = read(fd, buf, sizeof buf);
            close(fd);
            int64_t parsed;
            if (n > 0 && parse_offset(buf, n, &parsed) == 0) {
                __atomic_store_n(&last_offset_ns, parsed, __ATOMIC_RELAXED);
                return parsed;
            }
        }
    }
    return __atomic_load_n(&last_offset_ns, __ATOMIC_RELAXED);
}

static void shift(struct timespec *ts, int64_t by_ns) {
    int64_t nanos = (int64_t)ts->tv_nsec + by_ns % 1000000000;
    int64_t secs = (int64_t)ts->tv_sec + by_ns / 1000000000;
    if (nanos < 0) {
        nanos += 1000000000;
        secs -= 1;
    } else if (nanos >= 1000000000) {
        nanos -= 1000000000;
        secs += 1;
    }
    ts->tv_sec = (time_t)secs;
    ts->tv_nsec = (long)nanos;
}

static int is_wall_clock(clockid_t clock) {
    return clock == CLOCK_REALTIME || clock == CLOCK_REALTIME_COARSE ||
           clock == CLOCK_REALTIME_ALARM || clock == CLOCK_TAI;
}

int clock_gettime(clockid_t clock, struct timespec *ts) {
    int result = true_clock_gettime(clock, ts);
    if (result == 0 && is_wall_clock(clock))
        shift(ts, offset_ns());
    return result;
}

int gettimeofday(struct timeval *restrict tv, void *restrict tz) {
    if (tz) {
        /* The obsolete time zone: the kernel's, as libc would give it. */
        if (syscall(SYS_gettimeofday, NULL, tz) != 0)
            return -1;
    }
    if (!tv)
        return 0;
    struct timespec ts;
    if (clock_gettime(CLOCK_REALTIME, &ts) != 0)
        return -1;
    tv->tv_sec = ts.tv_sec;
    tv->tv_usec = ts.tv_nsec / 1000;
    return 0;
}

time_t time(time_t *out) {
    struct timespec ts;
    if (clock_gettime(CLOCK_REALTIME_COARSE, &ts) != 0)
        return (time_t)-1;
    if (out)
        *out = ts.tv_sec;
    return ts.tv_sec;
}

int timespec_get(struct timespec *ts, int base) {
    if (base != TIME_UTC || clock_gettime(CLOCK_REALTIME, ts) != 0)
        return 0;
    return base;
}
