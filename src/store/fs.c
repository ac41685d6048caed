/*
 * File-system helpers for the store: bounded whole-file reads, atomic writes (temp file,
 * fsync, rename, fsync of the directory), mkdir -p and path joining. Every write the store
 * makes to a final name goes through store_write_file_atomic or the blob writer's rename.
 */
#include "store/store_internal.h"
#include "util/file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

char *store_join(const char *first, ...)
{
    size_t total = strlen(first) + 1;
    va_list ap;
    va_start(ap, first);
    for (const char *part = va_arg(ap, const char *); part; part = va_arg(ap, const char *))
        total += strlen(part) + 1;
    va_end(ap);

    char *out = malloc(total);
    if (!out)
        return NULL;
    size_t used = strlen(first);
    memcpy(out, first, used);
    va_start(ap, first);
    for (const char *part = va_arg(ap, const char *); part; part = va_arg(ap, const char *)) {
        size_t n = strlen(part);
        out[used++] = '/';
        memcpy(out + used, part, n);
        used += n;
    }
    va_end(ap);
    out[used] = '\0';
    return out;
}

char *store_dirname(const char *path)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        return strdup(".");
    size_t n = slash == path ? 1 : (size_t)(slash - path);
    return strndup(path, n);
}


corral_store_status store_read_file(const char *path, size_t max_bytes, char **out, size_t *len,
                                    struct timespec *mtime, corral_error *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        corral_error_set(err, "cannot open '%s': %s", path, strerror(errno));
        return errno == ENOENT || errno == ENOTDIR ? CORRAL_STORE_NOT_FOUND : CORRAL_STORE_IO;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        corral_error_set(err, "cannot stat '%s': %s", path, strerror(errno));
        close(fd);
        return CORRAL_STORE_IO;
    }
    if (!S_ISREG(st.st_mode)) {
        corral_error_set(err, "'%s' is not a regular file", path);
        close(fd);
        return CORRAL_STORE_INVALID;
    }
    if ((uint64_t)st.st_size > max_bytes) {
        corral_error_set(err, "'%s' is %lld bytes, more than the limit of %zu", path,
                         (long long)st.st_size, max_bytes);
        close(fd);
        return CORRAL_STORE_INVALID;
    }
    /* The file may grow between fstat and read; the buffer never does. */
    size_t cap = (size_t)st.st_size;
    char *buf = malloc(cap + 1);
    if (!buf) {
        corral_error_set(err, "out of memory reading '%s'", path);
        close(fd);
        return CORRAL_STORE_IO;
    }
    size_t used = 0;
    while (used < cap) {
        ssize_t n = read(fd, buf + used, cap - used);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            corral_error_set(err, "cannot read '%s': %s", path, strerror(errno));
            free(buf);
            close(fd);
            return CORRAL_STORE_IO;
        }
        if (n == 0)
            break;
        used += (size_t)n;
    }
    close(fd);
    buf[used] = '\0';
    *out = buf;
    *len = used;
    if (mtime)
        *mtime = st.st_mtim;
    return CORRAL_STORE_OK;
}

bool store_fsync_dir(const char *dir, corral_error *err)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        corral_error_set(err, "cannot open directory '%s': %s", dir, strerror(errno));
        return false;
    }
    bool ok = fsync(fd) == 0;
    if (!ok)
        corral_error_set(err, "cannot sync directory '%s': %s", dir, strerror(errno));
    close(fd);
    return ok;
}


bool store_write_file_atomic(const char *path, const void *data, size_t len, corral_error *err)
{
    char *dir = store_dirname(path);
    char *tmp = dir ? store_join(dir, STORE_TEMP_PREFIX "XXXXXX", NULL) : NULL;
    if (!tmp) {
        corral_error_set(err, "out of memory");
        free(dir);
        return false;
    }
    bool ok = false;
    int fd = mkostemp(tmp, O_CLOEXEC);
    if (fd < 0) {
        corral_error_set(err, "cannot create a temporary file in '%s': %s", dir, strerror(errno));
        goto out;
    }
    /* mkostemp makes 0600 files; blobs and manifests are world-readable, as ollama's are. */
    if (!util_write_all(fd, data, len) || fsync(fd) != 0 || fchmod(fd, 0644) != 0) {
        corral_error_set(err, "cannot write '%s': %s", tmp, strerror(errno));
        close(fd);
        unlink(tmp);
        goto out;
    }
    if (close(fd) != 0) {
        corral_error_set(err, "cannot write '%s': %s", tmp, strerror(errno));
        unlink(tmp);
        goto out;
    }
    if (rename(tmp, path) != 0) {
        corral_error_set(err, "cannot rename '%s' to '%s': %s", tmp, path, strerror(errno));
        unlink(tmp);
        goto out;
    }
    ok = store_fsync_dir(dir, err);
out:
    free(tmp);
    free(dir);
    return ok;
}

void store_printable(const char *s, char *buf, size_t cap)
{
    if (cap == 0)
        return;
    size_t i = 0;
    for (; s[i] && i + 1 < cap; i++)
        buf[i] = s[i] >= 0x20 && s[i] < 0x7f ? s[i] : '?';
    buf[i] = '\0';
    /* Mark a cut so the reader does not take the prefix for the whole input. */
    if (s[i] && cap > 4)
        memcpy(buf + cap - 4, "...", 4);
}

bool store_blob_name_to_digest(const char *file_name, char digest[CORRAL_DIGEST_BUF])
{
    size_t prefix = strlen(STORE_BLOB_PREFIX);
    if (strncmp(file_name, STORE_BLOB_PREFIX, prefix) != 0 ||
        strlen(file_name) != CORRAL_DIGEST_LEN)
        return false;
    memcpy(digest, "sha256:", prefix);
    memcpy(digest + prefix, file_name + prefix, CORRAL_DIGEST_LEN - prefix + 1);
    return corral_digest_is_valid(digest);
}
