/* Small files read whole, directories made, buffers written out (see file.h). */
#include "util/file.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

char *util_read_file(const char *path, size_t max_bytes, size_t *len, corral_error *err)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        corral_error_set(err, "%s: %s", path, strerror(errno));
        return NULL;
    }
    char *text = malloc(max_bytes + 1);
    size_t n = text ? fread(text, 1, max_bytes + 1, f) : 0; /* one more: an overlong file shows */
    bool read_error = text && ferror(f);
    fclose(f);
    if (!text || read_error || n > max_bytes) {
        if (!text)
            corral_error_set(err, "%s: out of memory", path);
        else if (read_error)
            corral_error_set(err, "%s: read error", path);
        else if (max_bytes % (1u << 20) == 0)
            corral_error_set(err, "%s: larger than %zu MiB", path, max_bytes >> 20);
        else
            corral_error_set(err, "%s: larger than %zu bytes", path, max_bytes);
        free(text);
        return NULL;
    }
    text[n] = '\0';
    *len = n;
    return text;
}

bool util_mkdirs(const char *path, corral_error *err)
{
    char *copy = strdup(path);
    if (!copy) {
        corral_error_set(err, "out of memory");
        return false;
    }
    /* Create each prefix in turn; EEXIST on the way is the common case. */
    for (char *p = copy + 1;; p++) {
        if (*p != '/' && *p != '\0')
            continue;
        char saved = *p;
        *p = '\0';
        if (mkdir(copy, 0755) != 0 && errno != EEXIST) {
            corral_error_set(err, "cannot create directory '%s': %s", copy, strerror(errno));
            free(copy);
            return false;
        }
        *p = saved;
        if (saved == '\0')
            break;
    }
    struct stat st;
    bool is_dir = stat(path, &st) == 0 && S_ISDIR(st.st_mode);
    if (!is_dir)
        corral_error_set(err, "'%s' exists and is not a directory", path);
    free(copy);
    return is_dir;
}

bool util_write_all(int fd, const void *data, size_t len)
{
    const char *p = data;
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return false;
        p += n;
        len -= (size_t)n;
    }
    return true;
}
