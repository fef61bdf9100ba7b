/* offpath reduction kernels: apply an MPI-style op element by element.
 * Integer arithmetic wraps (two's complement, no undefined behaviour on signed
 * overflow); logical ops yield 0 or 1 (C semantics: nonzero is true, also for
 * floats); floats are computed natively in IEEE arithmetic. Bitwise ops on
 * floats are invalid (op_red_valid). Wire payloads carry elements in network
 * byte order; the _be variants read such input. */
#ifndef OFFPATH_REDUCE_H
#define OFFPATH_REDUCE_H

#include <stddef.h>

#include "offpath/wire.h"

/* acc[i] = acc[i] op in[i], both in host byte order. */
OP_API void op_reduce(unsigned op, unsigned type, void *acc, const void *in, size_t count);
/* acc[i] = acc[i] op be(in[i]): acc in host order, in in network order. */
OP_API void op_reduce_be(unsigned op, unsigned type, void *acc, const void *in_be, size_t count);
/* Convert count elements between host and network order (dst may equal src). */
OP_API void op_red_to_be(unsigned type, void *dst, const void *src, size_t count);
OP_API void op_red_from_be(unsigned type, void *dst, const void *src, size_t count);

#endif
