/* Strict whole-string parsers for command lines and configuration.
 * Syntax errors return OP_ERR_MALFORMED, values outside [min, max]
 * OP_ERR_INVAL; the output is written only on success. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "offpath/common.h"

static int is_digit(char c)
{
    return c >= '0' && c <= '9';
}

/* Decimal digits [s, end) into *out; no sign, no space, no overflow. */
static op_status_t digits_u64(const char *s, const char *end, uint64_t *out)
{
    uint64_t v = 0;

    if (s == end)
        return OP_ERR_MALFORMED;
    for (; s < end; s++) {
        if (!is_digit(*s))
            return OP_ERR_MALFORMED;
        unsigned d = (unsigned)(*s - '0');
        if (v > (UINT64_MAX - d) / 10)
            return OP_ERR_INVAL;
        v = v * 10 + d;
    }
    *out = v;
    return OP_OK;
}

op_status_t op_parse_u64(const char *text, uint64_t min, uint64_t max, uint64_t *out)
{
    uint64_t v;

    if (text == NULL || out == NULL)
        return OP_ERR_INVAL;
    op_status_t st = digits_u64(text, text + strlen(text), &v);
    if (st != OP_OK)
        return st;
    if (v < min || v > max)
        return OP_ERR_INVAL;
    *out = v;
    return OP_OK;
}

op_status_t op_parse_double(const char *text, double min, double max, double *out)
{
    char *end;

    if (text == NULL || out == NULL)
        return OP_ERR_INVAL;
    /* strtod would skip leading space and take hex, inf and nan: refuse them. */
    if (text[0] == '\0' || strchr(" \t\n\v\f\r", text[0]) != NULL || strpbrk(text, "xX") != NULL)
        return OP_ERR_MALFORMED;
    errno = 0;
    double v = strtod(text, &end);
    if (end == text || *end != '\0')
        return OP_ERR_MALFORMED;
    if (!isfinite(v))
        return isnan(v) ? OP_ERR_MALFORMED : OP_ERR_INVAL;
    if (errno == ERANGE && fabs(v) > 1.0)
        return OP_ERR_INVAL; /* overflow; underflow to a tiny value is accepted */
    if (!(v >= min && v <= max))
        return OP_ERR_INVAL;
    *out = v;
    return OP_OK;
}

/* One octet: 1-3 digits, no leading zero (so "010" is not read as octal or
 * decimal by surprise), value 0..255. */
static op_status_t parse_octet(const char *s, const char *end, uint32_t *out)
{
    uint64_t v;

    if (end - s > 3 || (end - s > 1 && s[0] == '0'))
        return OP_ERR_MALFORMED;
    op_status_t st = digits_u64(s, end, &v);
    if (st != OP_OK)
        return st;
    if (v > 255)
        return OP_ERR_INVAL;
    *out = (uint32_t)v;
    return OP_OK;
}

op_status_t op_parse_ipv4(const char *text, uint32_t *addr, uint16_t *port)
{
    uint32_t a = 0, octet;
    uint64_t p = 0;
    const char *s = text;

    if (text == NULL || addr == NULL)
        return OP_ERR_INVAL;
    const char *colon = strchr(text, ':');
    const char *end = colon != NULL ? colon : text + strlen(text);
    for (int i = 0; i < 4; i++) {
        const char *dot = i < 3 ? memchr(s, '.', (size_t)(end - s)) : end;
        if (dot == NULL)
            return OP_ERR_MALFORMED;
        op_status_t st = parse_octet(s, dot, &octet);
        if (st != OP_OK)
            return st;
        a = a << 8 | octet;
        s = dot + 1;
    }
    if (colon != NULL) {
        if (port == NULL)
            return OP_ERR_INVAL;
        op_status_t st = digits_u64(colon + 1, colon + 1 + strlen(colon + 1), &p);
        if (st != OP_OK)
            return st;
        if (p < 1 || p > 65535)
            return OP_ERR_INVAL;
        *port = (uint16_t)p;
    }
    *addr = a;
    return OP_OK;
}

void op_format_ipv4(uint32_t addr, char out[16])
{
    snprintf(out, 16, "%u.%u.%u.%u", addr >> 24, (addr >> 16) & 0xff, (addr >> 8) & 0xff,
             addr & 0xff);
}

int op_hex_digit(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}
