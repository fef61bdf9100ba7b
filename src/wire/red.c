/* Reduction operations and element types: sizes, names, validity. */
#include <string.h>

#include "offpath/wire.h"

#define COUNT_OF(a) (sizeof(a) / sizeof((a)[0]))

static const struct {
    const char *name;
    size_t size;
} red_types[OP_RED_TYPE_COUNT_] = {
    [OP_RED_INT8] = {"int8", 1},       [OP_RED_INT16] = {"int16", 2},
    [OP_RED_INT32] = {"int32", 4},     [OP_RED_INT64] = {"int64", 8},
    [OP_RED_UINT8] = {"uint8", 1},     [OP_RED_UINT16] = {"uint16", 2},
    [OP_RED_UINT32] = {"uint32", 4},   [OP_RED_UINT64] = {"uint64", 8},
    [OP_RED_FLOAT32] = {"float32", 4}, [OP_RED_FLOAT64] = {"float64", 8},
};

static const char *const red_ops[OP_RED_OP_COUNT_] = {
    [OP_RED_SUM] = "sum",   [OP_RED_PROD] = "prod", [OP_RED_MIN] = "min",
    [OP_RED_MAX] = "max",   [OP_RED_LAND] = "land", [OP_RED_LOR] = "lor",
    [OP_RED_LXOR] = "lxor", [OP_RED_BAND] = "band", [OP_RED_BOR] = "bor",
    [OP_RED_BXOR] = "bxor",
};

size_t op_red_type_size(unsigned type)
{
    return type < COUNT_OF(red_types) ? red_types[type].size : 0;
}

const char *op_red_type_name(unsigned type)
{
    return type < COUNT_OF(red_types) ? red_types[type].name : NULL;
}

const char *op_red_op_name(unsigned op)
{
    return op < COUNT_OF(red_ops) ? red_ops[op] : NULL;
}

int op_red_type_parse(const char *name)
{
    for (size_t i = 0; name != NULL && i < COUNT_OF(red_types); i++)
        if (strcmp(name, red_types[i].name) == 0)
            return (int)i;
    return -1;
}

int op_red_op_parse(const char *name)
{
    for (size_t i = 0; name != NULL && i < COUNT_OF(red_ops); i++)
        if (strcmp(name, red_ops[i]) == 0)
            return (int)i;
    return -1;
}

static bool red_is_bitwise(unsigned op)
{
    return op == OP_RED_BAND || op == OP_RED_BOR || op == OP_RED_BXOR;
}

static bool red_is_float(unsigned type)
{
    return type == OP_RED_FLOAT32 || type == OP_RED_FLOAT64;
}

bool op_red_valid(unsigned op, unsigned type)
{
    if (op >= OP_RED_OP_COUNT_ || type >= OP_RED_TYPE_COUNT_)
        return false;
    return !(red_is_bitwise(op) && red_is_float(type));
}
