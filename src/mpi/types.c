/* MPI's predefined datatypes and ops as the switch's codes. Derived types and
 * user ops have none: those calls fall back to the MPI's own Allreduce. */
#include "mpi_base.h"

struct type_map {
    MPI_Datatype mpi;
    int code;
};

static int integer_code(int size, bool is_signed)
{
    switch (size) {
    case 1: return is_signed ? OP_RED_INT8 : OP_RED_UINT8;
    case 2: return is_signed ? OP_RED_INT16 : OP_RED_UINT16;
    case 4: return is_signed ? OP_RED_INT32 : OP_RED_UINT32;
    case 8: return is_signed ? OP_RED_INT64 : OP_RED_UINT64;
    default: return -1;
    }
}

int opm_type_code(MPI_Datatype t)
{
    /* C integer types by their size here, so int and long map right on any ABI. */
    const struct {
        MPI_Datatype t;
        int size;
        bool is_signed;
    } ints[] = {
        /* MPI_CHAR, MPI_BYTE and MPI_C_BOOL are not arithmetic types in MPI:
         * left to the MPI, which knows which ops it allows on them. */
        {MPI_SIGNED_CHAR, 1, true}, {MPI_UNSIGNED_CHAR, 1, false},
        {MPI_SHORT, sizeof(short), true}, {MPI_UNSIGNED_SHORT, sizeof(short), false},
        {MPI_INT, sizeof(int), true}, {MPI_UNSIGNED, sizeof(int), false},
        {MPI_LONG, sizeof(long), true}, {MPI_UNSIGNED_LONG, sizeof(long), false},
        {MPI_LONG_LONG, sizeof(long long), true},
        {MPI_UNSIGNED_LONG_LONG, sizeof(long long), false},
        {MPI_INT8_T, 1, true}, {MPI_INT16_T, 2, true}, {MPI_INT32_T, 4, true},
        {MPI_INT64_T, 8, true}, {MPI_UINT8_T, 1, false}, {MPI_UINT16_T, 2, false},
        {MPI_UINT32_T, 4, false}, {MPI_UINT64_T, 8, false},
    };
    for (size_t i = 0; i < sizeof(ints) / sizeof(ints[0]); i++)
        if (ints[i].t == t)
            return integer_code(ints[i].size, ints[i].is_signed);
    if (t == MPI_FLOAT)
        return OP_RED_FLOAT32;
    if (t == MPI_DOUBLE)
        return OP_RED_FLOAT64;
    return -1;
}

int opm_op_code(MPI_Op op)
{
    const struct {
        MPI_Op op;
        int code;
    } ops[] = {
        {MPI_SUM, OP_RED_SUM},   {MPI_PROD, OP_RED_PROD}, {MPI_MIN, OP_RED_MIN},
        {MPI_MAX, OP_RED_MAX},   {MPI_LAND, OP_RED_LAND}, {MPI_LOR, OP_RED_LOR},
        {MPI_LXOR, OP_RED_LXOR}, {MPI_BAND, OP_RED_BAND}, {MPI_BOR, OP_RED_BOR},
        {MPI_BXOR, OP_RED_BXOR},
    };
    for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++)
        if (ops[i].op == op)
            return ops[i].code;
    return -1;
}

int opm_no_memory(MPI_Comm comm)
{
    PMPI_Comm_call_errhandler(comm, MPI_ERR_NO_MEM);
    return MPI_ERR_NO_MEM;
}
