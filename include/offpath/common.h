/* offpath common services: status codes, logging, clock, statistics.
 * Everything else in offpath depends on this header; it depends on nothing. */
#ifndef OFFPATH_COMMON_H
#define OFFPATH_COMMON_H

#include <stdarg.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#if defined(__GNUC__)
#define OP_API __attribute__((visibility("default")))
#define OP_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define OP_API
#define OP_PRINTF(f, a)
#endif

/* One status type for the project (as UCX's ucs_status_t): 0 is success,
 * positive values mean "still in progress", negative values are errors:
 * the project's own from -1, and below OP_ERR_ERRNO_BASE a failed system
 * call's errno (as Knot's -errno, moved clear of the project's codes), so a
 * caller can tell EADDRINUSE from ENOENT and op_status_str names it.
 * OP_ERR_IO is left for I/O failures with no errno (a peer that went away). */
typedef enum op_status {
    OP_OK = 0,
    OP_INPROGRESS = 1,
    OP_ERR_INVAL = -1,       /* a parameter is out of range */
    OP_ERR_NOMEM = -2,
    OP_ERR_IO = -3,          /* a system call failed */
    OP_ERR_TRUNCATED = -4,   /* a buffer ended before the structure did */
    OP_ERR_MALFORMED = -5,   /* a field holds a value the format forbids */
    OP_ERR_TIMEOUT = -6,     /* a deadline expired */
    OP_ERR_REFUSED = -7,     /* a switch refused (see the reason code) */
    OP_ERR_UNSUPPORTED = -8, /* op, type or size the path cannot do */
    OP_ERR_BUSY = -9,        /* an operation is already running */
    OP_ERR_STATE = -10,      /* call not valid in the current state */
    OP_ERR_NOSPACE = -11,    /* an output buffer is too small */
    OP_ERR_ERRNO_BASE = -1000, /* OP_ERR_ERRNO_BASE - errno: a system call failed */
    OP_ERR_ERRNO_LAST = -1000 - 4095, /* errno is at most 4095 (Linux's MAX_ERRNO) */
} op_status_t;

/* "I/O: <strerror>" for the errno range; thread-safe. */
OP_API const char *op_status_str(op_status_t st);

/* The status of a failed system call; e <= 0 (errno lost) gives EIO's. */
static inline op_status_t op_status_from_errno(int e)
{
    return (op_status_t)(OP_ERR_ERRNO_BASE - (e > 0 && e <= 4095 ? e : 5 /* EIO */));
}
/* The errno a status carries; 0 for any other status. */
static inline int op_status_errno(op_status_t st)
{
    return (int)st < OP_ERR_ERRNO_BASE && (int)st >= OP_ERR_ERRNO_LAST ? OP_ERR_ERRNO_BASE - (int)st
                                                                       : 0;
}

/* Log levels follow DOCA's numbering so a user's --log-level habits carry over. */
enum op_log_level {
    OP_LOG_DISABLE = 10,
    OP_LOG_CRIT = 20,
    OP_LOG_ERROR = 30,
    OP_LOG_WARNING = 40,
    OP_LOG_INFO = 50,
    OP_LOG_DEBUG = 60,
    OP_LOG_TRACE = 70,
};

/* A logger is a value, not a global: each component carries its own. */
struct op_log {
    int level;
    const char *source; /* printed in each line, e.g. "switch" */
    FILE *stream;       /* NULL means stderr */
    /* DOCA's whole line shape, for the tools that stand in for DOCA's:
     * [time][pid][DOCA][LVL][file.c:line][source] message */
    bool doca;
};

OP_API void op_log_init(struct op_log *log, const char *source, int level);
OP_API void op_log_write(const struct op_log *log, int level, const char *fmt, ...) OP_PRINTF(3, 4);
/* op_log_write from a place in the source (the [file:line] of DOCA's lines) */
OP_API void op_log_write_at(const struct op_log *log, int level, const char *file, int line,
                            const char *fmt, ...) OP_PRINTF(5, 6);
OP_API int op_log_level_parse(const char *text); /* name or number; -1 if neither */

#define OP_LOG(log, lvl, ...)                                                                      \
    do {                                                                                           \
        if ((log) != NULL && (lvl) <= (log)->level)                                                \
            op_log_write_at((log), (lvl), __FILE__, __LINE__, __VA_ARGS__);                        \
    } while (0)
#define OP_ERROR(log, ...) OP_LOG(log, OP_LOG_ERROR, __VA_ARGS__)

/* For setup steps that explain a refusal in a caller's buffer (err,
 * errlen): when cond holds, the message goes there (snprintf, so the user
 * includes stdio.h) and the function returns OP_ERR_INVAL. */
#define OP_FAIL_IF(cond, err, errlen, ...)                                                         \
    do {                                                                                           \
        if (cond) {                                                                                \
            snprintf(err, errlen, __VA_ARGS__);                                                    \
            return OP_ERR_INVAL;                                                                   \
        }                                                                                          \
    } while (0)
#define OP_WARN(log, ...) OP_LOG(log, OP_LOG_WARNING, __VA_ARGS__)
#define OP_INFO(log, ...) OP_LOG(log, OP_LOG_INFO, __VA_ARGS__)
#define OP_DEBUG(log, ...) OP_LOG(log, OP_LOG_DEBUG, __VA_ARGS__)

/* Monotonic nanoseconds. Engines never call this: drivers pass "now" in. */
OP_API uint64_t op_now_ns(void);

#define OP_NS_PER_US 1000ull
#define OP_NS_PER_MS 1000000ull
#define OP_NS_PER_S 1000000000ull

/* Deterministic pseudo-random numbers (xorshift64*), a value per user. */
struct op_rng {
    uint64_t s;
};
OP_API void op_rng_seed(struct op_rng *r, uint64_t seed);
OP_API uint64_t op_rng_next(struct op_rng *r);
OP_API double op_rng_unit(struct op_rng *r); /* uniform in [0, 1) */

/* Sample statistics (latencies): keeps every sample, sorts on demand. */
struct op_samples {
    double *v;
    size_t n, cap;
    int sorted;
};
OP_API void op_samples_init(struct op_samples *s);
OP_API void op_samples_free(struct op_samples *s);
OP_API op_status_t op_samples_add(struct op_samples *s, double x);
OP_API double op_samples_percentile(struct op_samples *s, double p); /* p in [0,100] */
OP_API double op_samples_mean(const struct op_samples *s);
OP_API double op_samples_stdev(const struct op_samples *s);

/* Parsing helpers for command lines and config: strict, whole-string. */
OP_API op_status_t op_parse_u64(const char *text, uint64_t min, uint64_t max, uint64_t *out);
OP_API op_status_t op_parse_double(const char *text, double min, double max, double *out);
/* "a.b.c.d" or "a.b.c.d:port" into host-order address and port (port left alone if absent). */
OP_API op_status_t op_parse_ipv4(const char *text, uint32_t *addr, uint16_t *port);
OP_API void op_format_ipv4(uint32_t addr, char out[16]);
/* A hex digit's value (either case), or -1. */
OP_API int op_hex_digit(char c);

/* A counter list's name table: OP_COUNTER_NAME turns X(n) into "n", so
 *   static const char *const names[] = {LIST(OP_COUNTER_NAME)};
 * and op_counter_name(names, COUNT_, c) looks one up (NULL past the end). */
#define OP_COUNTER_NAME(n) #n,
static inline const char *op_counter_name(const char *const *names, unsigned n, unsigned c)
{
    return c < n ? names[c] : NULL;
}

/* Counter lists: names[i] counts vals[i]. TABLE: one "  name value" line
 * each (names padded to 20); LINE: " name value, name value" with no newline;
 * KV: " name=value name=value" with no newline (a log line's tail); JSON:
 * "name": value members joined by ", ", no braces, so a caller puts them in
 * an object among its own members. */
enum op_counters_format {
    OP_COUNTERS_TABLE,
    OP_COUNTERS_LINE,
    OP_COUNTERS_JSON,
    OP_COUNTERS_KV,
};
OP_API void op_counters_print(FILE *out, const char *const *names, const uint64_t *vals, int n,
                              enum op_counters_format fmt);

/* The counter-set descriptor every module exports for its counters: the
 * names (spelt once, by the module's X-macro list), their values (a snapshot
 * the caller owns or the module's live array) and how many. */
struct op_counter_set {
    const char *const *names;
    const uint64_t *vals;
    unsigned n;
};
OP_API void op_counter_set_print(FILE *out, const struct op_counter_set *s,
                                 enum op_counters_format fmt);
/* The same into buf (NUL-terminated, cut short at cap); returns buf. */
OP_API char *op_counter_set_format(const struct op_counter_set *s, enum op_counters_format fmt,
                                   char *buf, size_t cap);
/* A summary line in words with counters in it: each {name} of text becomes
 * that counter's value. False (and "{name?}" printed) when a name is not in
 * the set, so a test of the summary catches a counter renamed under it. */
OP_API bool op_counter_set_render(FILE *out, const struct op_counter_set *s, const char *text);
/* A set's values to another process of the same program (a forked switch
 * to its launcher) through a pipe: the count, then the values, host order.
 * Write: OP_OK or the errno. Read: into vals (cap of them) when exactly
 * cap values came; OP_ERR_MALFORMED for another count, OP_ERR_TRUNCATED
 * for fewer bytes (the writer died), the errno otherwise. */
OP_API op_status_t op_counter_set_write(int fd, const struct op_counter_set *s);
OP_API op_status_t op_counter_set_read(int fd, uint64_t *vals, unsigned cap);

/* name in the first of dirs[0..n_dirs) where access(2) grants amode: a dir
 * starting with '/' as it is, any other relative to the folder of exe (the
 * running binary), so an installed offpath finds ../lib, ../libexec/offpath
 * and ../share/offpath of its own prefix (exe NULL: the absolute dirs
 * alone). The path goes to out; false (and out empty) when no dir has it
 * or a path does not fit. */
OP_API bool op_path_find(const char *exe, const char *const *dirs, size_t n_dirs, const char *name,
                         int amode, char *out, size_t len);

#endif
