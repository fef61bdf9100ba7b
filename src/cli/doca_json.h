/* DOCA's flag files, read by the tools that take DOCA's command line
 * (`offpath secure_channel -j FILE`): the one place jansson is linked, so
 * the libraries below cli (the preloaded MPI library above all) carry no
 * JSON parser. */
#ifndef OFFPATH_CLI_DOCA_JSON_H
#define OFFPATH_CLI_DOCA_JSON_H

#include <stdbool.h>
#include <stddef.h>

#include "offpath/common.h"

/* Reads {"doca_general_flags": {...}, "doca_program_flags": {...}} (`//`
 * comments and trailing commas allowed, as DOCA's files have them) and calls
 * apply(flag, value-as-text, ctx) for each member, in file order; apply
 * returns false to stop (the caller reports the flag). Strings are passed
 * without quotes, integers in decimal, booleans as "true"/"false". A syntax
 * error gives OP_ERR_MALFORMED and why[] with line and column. */
op_status_t cli_doca_json_flags(const char *text, size_t len,
                                bool (*apply)(const char *flag, const char *value, void *ctx),
                                void *ctx, char why[256]);

#endif
