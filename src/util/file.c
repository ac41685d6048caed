/* Small files read whole (see file.h). */
#include "util/file.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
