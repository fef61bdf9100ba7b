/* Logger: DOCA's line shape, one fwrite per line so lines from several
 * processes sharing a stream do not interleave mid-line.
 *   [HH:MM:SS:usec][pid][source][INF] message
 * and for the tools standing in for DOCA's (op_log.doca), DOCA's own:
 *   [HH:MM:SS:usec][pid][DOCA][INF][file.c:line][source] message */
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "offpath/common.h"

#define LOG_LINE_MAX 1024

static const char *level_tag(int level)
{
    if (level <= OP_LOG_CRIT)
        return "CRT";
    if (level <= OP_LOG_ERROR)
        return "ERR";
    if (level <= OP_LOG_WARNING)
        return "WRN";
    if (level <= OP_LOG_INFO)
        return "INF";
    if (level <= OP_LOG_DEBUG)
        return "DBG";
    return "TRC";
}

void op_log_init(struct op_log *log, const char *source, int level)
{
    log->level = level;
    log->source = source != NULL ? source : "offpath";
    log->stream = NULL;
    log->doca = false;
}

static int format_prefix(char *buf, size_t cap, const struct op_log *log, int level,
                         const char *file, int line)
{
    struct timespec ts;
    struct tm tm;
    const char *source = log->source != NULL ? log->source : "offpath";

    clock_gettime(CLOCK_REALTIME, &ts);
    localtime_r(&ts.tv_sec, &tm);
    int n = snprintf(buf, cap, "[%02d:%02d:%02d:%06ld][%ld]", tm.tm_hour, tm.tm_min, tm.tm_sec,
                     ts.tv_nsec / 1000, (long)getpid());
    if (n < 0 || (size_t)n >= cap)
        return n;
    if (!log->doca)
        return n + snprintf(buf + n, cap - (size_t)n, "[%s][%s] ", source, level_tag(level));
    const char *base = file != NULL && strrchr(file, '/') ? strrchr(file, '/') + 1 : file;
    return n + snprintf(buf + n, cap - (size_t)n, "[DOCA][%s][%s:%d][%s] ", level_tag(level),
                        base != NULL ? base : "?", line, source);
}

/* Formats prefix + message + '\n' into buf (or a heap buffer when the line is
 * longer) and writes it with a single fwrite. */
static void write_line(const struct op_log *log, int level, const char *file, int line_no,
                       const char *fmt, va_list args)
{
    char stack[LOG_LINE_MAX];
    char *line = stack;
    va_list ap;

    if (log == NULL || level <= OP_LOG_DISABLE || level > log->level)
        return;
    int pre = format_prefix(stack, sizeof stack, log, level, file, line_no);
    if (pre < 0 || (size_t)pre >= sizeof stack)
        return;
    va_copy(ap, args);
    int len = vsnprintf(stack + pre, sizeof stack - (size_t)pre, fmt, ap);
    va_end(ap);
    if (len < 0)
        return;
    size_t total = (size_t)pre + (size_t)len;
    if (total + 2 > sizeof stack) {
        line = malloc(total + 2);
        if (line == NULL) {
            line = stack; /* keep the truncated line rather than nothing */
            total = sizeof stack - 2;
        } else {
            memcpy(line, stack, (size_t)pre);
            va_copy(ap, args);
            vsnprintf(line + pre, (size_t)len + 1, fmt, ap);
            va_end(ap);
        }
    }
    if (total > (size_t)pre && line[total - 1] == '\n')
        total--; /* callers need not end messages with a newline */
    line[total++] = '\n';
    fwrite(line, 1, total, log->stream != NULL ? log->stream : stderr);
    if (line != stack)
        free(line);
}

void op_log_write(const struct op_log *log, int level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    write_line(log, level, NULL, 0, fmt, ap);
    va_end(ap);
}

void op_log_write_at(const struct op_log *log, int level, const char *file, int line,
                     const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    write_line(log, level, file, line, fmt, ap);
    va_end(ap);
}

static const struct {
    const char *name;
    int level;
} level_names[] = {
    {"disable", OP_LOG_DISABLE}, {"critical", OP_LOG_CRIT}, {"crit", OP_LOG_CRIT},
    {"error", OP_LOG_ERROR},     {"warning", OP_LOG_WARNING}, {"warn", OP_LOG_WARNING},
    {"info", OP_LOG_INFO},       {"debug", OP_LOG_DEBUG},     {"trace", OP_LOG_TRACE},
};

int op_log_level_parse(const char *text)
{
    uint64_t v;

    if (text == NULL)
        return -1;
    if (op_parse_u64(text, OP_LOG_DISABLE, OP_LOG_TRACE, &v) == OP_OK)
        return (int)v;
    for (size_t i = 0; i < sizeof level_names / sizeof level_names[0]; i++)
        if (strcasecmp(text, level_names[i].name) == 0)
            return level_names[i].level;
    return -1;
}
