/* offpath wire: reduction operations and element types as coded on the wire (offpath/wire.h
 * includes every part; docs/wire.md). */
#ifndef OFFPATH_WIRE_RED_H
#define OFFPATH_WIRE_RED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "offpath/common.h"

/* Reduction operations and element types as coded on the wire (op_code,
 * oper_and_type). The numbering is the bit position in the capability maps. */
enum op_red_op {
    OP_RED_SUM = 0,
    OP_RED_PROD,
    OP_RED_MIN,
    OP_RED_MAX,
    OP_RED_LAND,
    OP_RED_LOR,
    OP_RED_LXOR,
    OP_RED_BAND,
    OP_RED_BOR,
    OP_RED_BXOR,
    OP_RED_OP_COUNT_
};

enum op_red_type {
    OP_RED_INT8 = 0,
    OP_RED_INT16,
    OP_RED_INT32,
    OP_RED_INT64,
    OP_RED_UINT8,
    OP_RED_UINT16,
    OP_RED_UINT32,
    OP_RED_UINT64,
    OP_RED_FLOAT32,
    OP_RED_FLOAT64,
    OP_RED_TYPE_COUNT_
};

OP_API size_t op_red_type_size(unsigned type); /* 0 for an unknown type */
OP_API const char *op_red_type_name(unsigned type); /* "int8" .. "float64", NULL if unknown */
OP_API const char *op_red_op_name(unsigned op);     /* "sum" .. "bxor", NULL if unknown */
OP_API int op_red_type_parse(const char *name);     /* -1 if unknown */
OP_API int op_red_op_parse(const char *name);       /* -1 if unknown */
/* Bitwise ops on floating point make no sense (MPI forbids them too). */
OP_API bool op_red_valid(unsigned op, unsigned type);

#endif
