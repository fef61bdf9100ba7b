/* X25519 key pairs and their one-line text files. The parsers are pure
 * (text in, key out, a reason on refusal); file access is kept apart. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sodium.h>

#include "channel_internal.h"

#define SECRET_TAG "offpath-x25519-secret "
#define PUBLIC_TAG "offpath-x25519-public "
#define HEX_LEN (2 * OP_CHAN_KEY_BYTES)
#define KEY_FILE_MAX 256

op_status_t op_chan_keypair_generate(struct op_chan_keypair *kp)
{
    if (sodium_init() < 0)
        return OP_ERR_UNSUPPORTED;
    return crypto_box_keypair(kp->pub, kp->sec) == 0 ? OP_OK : OP_ERR_IO;
}

/* "TAG <64 hex>" with an optional final newline, nothing else. */
static op_status_t parse_line(const char *text, size_t len, const char *tag,
                              uint8_t key[OP_CHAN_KEY_BYTES], char why[128])
{
    size_t tag_len = strlen(tag);

    if (len > 0 && text[len - 1] == '\n')
        len--;
    if (len < tag_len || memcmp(text, tag, tag_len) != 0) {
        snprintf(why, 128, "does not start with \"%.*s\"", (int)(tag_len - 1), tag);
        return OP_ERR_MALFORMED;
    }
    if (len - tag_len != HEX_LEN) {
        snprintf(why, 128, "expected %d hex digits after the tag, found %zu characters", HEX_LEN,
                 len - tag_len);
        return OP_ERR_MALFORMED;
    }
    for (size_t i = 0; i < OP_CHAN_KEY_BYTES; i++) {
        int hi = op_hex_digit(text[tag_len + 2 * i]), lo = op_hex_digit(text[tag_len + 2 * i + 1]);
        if (hi < 0 || lo < 0) {
            snprintf(why, 128, "character %zu is not a hex digit", tag_len + 2 * i + (hi < 0 ? 1 : 2));
            return OP_ERR_MALFORMED;
        }
        key[i] = (uint8_t)(hi << 4 | lo);
    }
    return OP_OK;
}

op_status_t op_chan_parse_public(const char *text, size_t len, uint8_t pub[OP_CHAN_KEY_BYTES],
                                 char why[128])
{
    return parse_line(text, len, PUBLIC_TAG, pub, why);
}

op_status_t op_chan_parse_secret(const char *text, size_t len, struct op_chan_keypair *kp,
                                 char why[128])
{
    op_status_t st = parse_line(text, len, SECRET_TAG, kp->sec, why);
    if (st != OP_OK)
        return st;
    if (sodium_init() < 0)
        return OP_ERR_UNSUPPORTED;
    crypto_scalarmult_base(kp->pub, kp->sec);
    return OP_OK;
}

static void format_line(char out[KEY_FILE_MAX], const char *tag, const uint8_t key[32])
{
    size_t n = (size_t)snprintf(out, KEY_FILE_MAX, "%s", tag);
    sodium_bin2hex(out + n, KEY_FILE_MAX - n, key, OP_CHAN_KEY_BYTES);
    strcat(out, "\n");
}

static op_status_t write_file(const char *path, const char *text, mode_t mode, char why[256])
{
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
    if (fd < 0) {
        int e = errno;
        snprintf(why, 256, "cannot create %s: %s", path, strerror(e));
        return op_status_from_errno(e);
    }
    size_t len = strlen(text);
    ssize_t n = write(fd, text, len);
    int e = errno;
    if (close(fd) != 0 || n != (ssize_t)len) {
        snprintf(why, 256, "cannot write %s: %s", path, strerror(n < 0 ? e : EIO));
        unlink(path);
        return op_status_from_errno(n < 0 ? e : EIO);
    }
    return OP_OK;
}

op_status_t op_chan_write_keys(const char *name, const struct op_chan_keypair *kp, char why[256])
{
    char path[4096], line[KEY_FILE_MAX];
    op_status_t st;

    if (snprintf(path, sizeof path, "%s.key", name) >= (int)sizeof path) {
        snprintf(why, 256, "the name is too long");
        return OP_ERR_INVAL;
    }
    format_line(line, SECRET_TAG, kp->sec);
    st = write_file(path, line, 0600, why);
    sodium_memzero(line, sizeof line);
    if (st != OP_OK)
        return st;
    snprintf(path, sizeof path, "%s.pub", name);
    format_line(line, PUBLIC_TAG, kp->pub);
    st = write_file(path, line, 0644, why);
    if (st != OP_OK) {
        snprintf(path, sizeof path, "%s.key", name);
        unlink(path); /* never leave half a pair */
    }
    return st;
}

static op_status_t read_small(const char *path, bool secret, char *buf, size_t *len,
                              char why[256])
{
    struct stat sb;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        snprintf(why, 256, "cannot read %s: %s", path, strerror(e));
        return op_status_from_errno(e);
    }
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        snprintf(why, 256, "%s is not a regular file", path);
        return OP_ERR_INVAL;
    }
    /* As ssh does: a secret others can read is no longer a secret. */
    if (secret && (sb.st_mode & 077) != 0) {
        close(fd);
        snprintf(why, 256, "%s is readable by group or others (mode %03o); chmod 600 it", path,
                 (unsigned)(sb.st_mode & 0777));
        return OP_ERR_REFUSED;
    }
    ssize_t n = read(fd, buf, KEY_FILE_MAX);
    close(fd);
    if (n < 0 || n >= KEY_FILE_MAX) {
        snprintf(why, 256, "%s: %s", path, n < 0 ? strerror(errno) : "too long for a key file");
        return OP_ERR_MALFORMED;
    }
    *len = (size_t)n;
    return OP_OK;
}

op_status_t op_chan_read_secret(const char *path, struct op_chan_keypair *kp, char why[256])
{
    char buf[KEY_FILE_MAX], reason[128];
    size_t len;
    op_status_t st = read_small(path, true, buf, &len, why);
    if (st == OP_OK && (st = op_chan_parse_secret(buf, len, kp, reason)) != OP_OK)
        snprintf(why, 256, "%s is not a secret key file: %s", path, reason);
    sodium_memzero(buf, sizeof buf);
    return st;
}

op_status_t op_chan_read_public(const char *path, uint8_t pub[OP_CHAN_KEY_BYTES], char why[256])
{
    char buf[KEY_FILE_MAX], reason[128];
    size_t len;
    op_status_t st = read_small(path, false, buf, &len, why);
    if (st == OP_OK && (st = op_chan_parse_public(buf, len, pub, reason)) != OP_OK)
        snprintf(why, 256, "%s is not a public key file: %s", path, reason);
    return st;
}
