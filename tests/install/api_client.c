/* Another project's program on offpath's C API, built only with
 * `pkg-config --cflags --libs offpath` against an installed prefix
 * (tests/system/test_install.py): a reduction, a parser and a status name. */
#include <stdio.h>

#include <offpath/common.h>
#include <offpath/reduce.h>

int main(void)
{
    float acc[4] = {1, 2, 3, 4};
    const float in[4] = {10, 20, 30, 40};
    op_reduce(OP_RED_SUM, OP_RED_FLOAT32, acc, in, 4);
    uint64_t n;
    if (op_parse_u64("4096", 1, 1u << 20, &n) != OP_OK)
        return 1;
    printf("sum %g %g %g %g, parsed %llu, %s\n", acc[0], acc[1], acc[2], acc[3],
           (unsigned long long)n, op_status_str(OP_ERR_TIMEOUT));
    return 0;
}
