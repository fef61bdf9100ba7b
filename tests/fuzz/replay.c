/* Runs a fuzz target's LLVMFuzzerTestOneInput on every regular file of a
 * corpus directory, so the corpus replays in every normal test run (without
 * libFuzzer). Fails if the directory is missing or holds no input. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Read a whole file; NULL on error. A zero-length file gives a 1-byte buffer. */
static uint8_t *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return NULL;
    uint8_t *buf = NULL;
    struct stat st;
    if (fstat(fileno(f), &st) == 0 && st.st_size >= 0) {
        size_t size = (size_t)st.st_size;
        buf = malloc(size > 0 ? size : 1);
        if (buf != NULL && fread(buf, 1, size, f) != size) {
            free(buf);
            buf = NULL;
        }
        *len = size;
    }
    fclose(f);
    return buf;
}

/* Replay one directory entry; returns 1 if it was an input, 0 if skipped,
 * -1 on error. */
static int replay_entry(const char *dir, const char *name)
{
    char path[4096];
    struct stat st;
    if (snprintf(path, sizeof path, "%s/%s", dir, name) >= (int)sizeof path)
        return -1;
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode))
        return 0;
    size_t len = 0;
    uint8_t *buf = read_file(path, &len);
    if (buf == NULL) {
        fprintf(stderr, "replay: cannot read %s\n", path);
        return -1;
    }
    LLVMFuzzerTestOneInput(buf, len);
    free(buf);
    return 1;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]);
        return 2;
    }
    DIR *d = opendir(argv[1]);
    if (d == NULL) {
        perror(argv[1]);
        return 1;
    }
    size_t n = 0;
    int failed = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        int r = replay_entry(argv[1], e->d_name);
        failed |= r < 0;
        n += r > 0;
    }
    closedir(d);
    printf("replayed %zu inputs\n", n);
    if (n == 0)
        fprintf(stderr, "replay: no inputs in %s\n", argv[1]);
    return failed || n == 0 ? 1 : 0;
}
