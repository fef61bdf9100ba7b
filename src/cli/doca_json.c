/* DOCA's JSON configuration: {"doca_general_flags": {...},
 * "doca_program_flags": {...}}, members named after the long flags. DOCA's
 * own files carry // comments and trailing commas, which strict JSON (and
 * jansson) refuse, so they are blanked out first with every other byte kept
 * in place: jansson's line and column then point into the user's file. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "doca_json.h"

static size_t skip_string(char *s, size_t len, size_t i)
{
    for (i++; i < len; i++) {
        if (s[i] == '\\')
            i++;
        else if (s[i] == '"')
            return i + 1;
    }
    return len;
}

/* Blanks a comment from i; returns where it ends. Newlines stay so line
 * numbers do not move. */
static size_t blank_comment(char *s, size_t len, size_t i, bool *closed)
{
    bool block = s[i + 1] == '*';
    size_t j = i;
    *closed = !block; /* a // comment may end the file */
    for (; j < len; j++) {
        if (!block && s[j] == '\n')
            return j;
        if (block && j > i + 1 && s[j] == '*' && j + 1 < len && s[j + 1] == '/') {
            s[j] = s[j + 1] = ' ';
            *closed = true;
            return j + 2;
        }
        if (s[j] != '\n')
            s[j] = ' ';
    }
    return j;
}

/* A comma whose next meaningful byte closes an object or array. */
static bool trailing_comma(const char *s, size_t len, size_t i)
{
    for (size_t j = i + 1; j < len; j++) {
        if (s[j] == ' ' || s[j] == '\t' || s[j] == '\r' || s[j] == '\n')
            continue;
        return s[j] == '}' || s[j] == ']';
    }
    return false;
}

/* Returns the line of a block comment left open, 0 when there is none. */
static int relax(char *s, size_t len)
{
    size_t i = 0;
    int line = 1, open_line = 0;
    /* Comments first, so a comment between a comma and '}' is already blank. */
    while (i < len) {
        if (s[i] == '"') {
            i = skip_string(s, len, i);
        } else if (s[i] == '/' && i + 1 < len && (s[i + 1] == '/' || s[i + 1] == '*')) {
            bool closed;
            size_t end = blank_comment(s, len, i, &closed);
            if (!closed)
                open_line = line;
            for (size_t j = i; j < end; j++)
                line += s[j] == '\n';
            i = end;
        } else {
            line += s[i] == '\n';
            i++;
        }
    }
    if (open_line != 0)
        return open_line;
    for (i = 0; i < len;) {
        if (s[i] == '"') {
            i = skip_string(s, len, i);
            continue;
        }
        if (s[i] == ',' && trailing_comma(s, len, i))
            s[i] = ' ';
        i++;
    }
    return 0;
}

static bool value_text(json_t *v, char *out, size_t cap)
{
    if (json_is_integer(v))
        snprintf(out, cap, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
    else if (json_is_string(v) && json_string_length(v) < cap)
        memcpy(out, json_string_value(v), json_string_length(v) + 1);
    else if (json_is_true(v) || json_is_false(v))
        snprintf(out, cap, "%s", json_is_true(v) ? "true" : "false");
    else
        return false;
    return true;
}

static op_status_t apply_section(json_t *sec, const char *name,
                                 bool (*apply)(const char *, const char *, void *), void *ctx,
                                 char why[256])
{
    const char *flag;
    json_t *v;
    char text[1024];

    if (!json_is_object(sec)) {
        snprintf(why, 256, "\"%s\" must be an object", name);
        return OP_ERR_MALFORMED;
    }
    json_object_foreach(sec, flag, v) {
        if (!value_text(v, text, sizeof text)) {
            snprintf(why, 256, "value of \"%s\" must be a number, a string (under %zu bytes) or "
                               "a boolean", flag, sizeof text);
            return OP_ERR_MALFORMED;
        }
        if (!apply(flag, text, ctx)) {
            snprintf(why, 256, "param \"%s\"", flag);
            return OP_ERR_INVAL;
        }
    }
    return OP_OK;
}

op_status_t cli_doca_json_flags(const char *text, size_t len,
                                bool (*apply)(const char *flag, const char *value, void *ctx),
                                void *ctx, char why[256])
{
    json_error_t err;
    const char *key;
    json_t *v;
    op_status_t st = OP_OK;

    char *copy = malloc(len + 1);
    if (copy == NULL)
        return OP_ERR_NOMEM;
    memcpy(copy, text, len);
    copy[len] = '\0';
    int open_line = relax(copy, len);
    if (open_line != 0) {
        free(copy);
        snprintf(why, 256, "line %d: a /* comment is never closed", open_line);
        return OP_ERR_MALFORMED;
    }
    json_t *root = json_loadb(copy, len, JSON_REJECT_DUPLICATES, &err);
    free(copy);
    if (root == NULL) {
        snprintf(why, 256, "line %d, column %d: %s", err.line, err.column, err.text);
        return OP_ERR_MALFORMED;
    }
    if (!json_is_object(root)) {
        snprintf(why, 256, "the top level must be an object");
        st = OP_ERR_MALFORMED;
    }
    json_object_foreach(st == OP_OK ? root : NULL, key, v) {
        if (strcmp(key, "doca_general_flags") != 0 && strcmp(key, "doca_program_flags") != 0) {
            snprintf(why, 256, "unknown section \"%s\" (expected doca_general_flags or "
                               "doca_program_flags)", key);
            st = OP_ERR_MALFORMED;
            break;
        }
        st = apply_section(v, key, apply, ctx, why);
        if (st != OP_OK)
            break;
    }
    json_decref(root);
    return st;
}
