/* Files that travel with the binary (the MPI library, the MPI programs, the
 * model's script and tables, the DNS XDP object), found relative to the
 * running binary so that an installed offpath uses its own prefix's copies
 * and one in a build tree its neighbours, wherever either was put. */
#include <libgen.h>
#include <string.h>
#include <unistd.h>

#include "offpath/common.h"

static bool fits(int n, size_t len)
{
    return n > 0 && (size_t)n < len;
}

bool op_path_find(const char *exe, const char *const *dirs, size_t n_dirs, const char *name,
                  int amode, char *out, size_t len)
{
    /* without the binary's path (no /proc) only the absolute dirs can be tried */
    char copy[4096];
    const char *here = NULL;
    if (exe != NULL && fits(snprintf(copy, sizeof(copy), "%s", exe), sizeof(copy)))
        here = dirname(copy);
    for (size_t i = 0; i < n_dirs; i++) {
        if (dirs[i][0] != '/' && here == NULL)
            continue;
        int n = dirs[i][0] == '/' ? snprintf(out, len, "%s/%s", dirs[i], name)
                                  : snprintf(out, len, "%s/%s/%s", here, dirs[i], name);
        if (fits(n, len) && access(out, amode) == 0)
            return true;
    }
    if (len > 0)
        out[0] = '\0';
    return false;
}
