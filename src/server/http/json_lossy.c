/* JSON strings of untrusted bytes (see json_lossy.h). */
#include "server/http/json_lossy.h"

#include <stdlib.h>
#include <string.h>

#include "engine/utf8.h"
#include "util/checked.h"

json_t *json_string_lossy(const char *data, size_t len)
{
    const unsigned char *bytes = (const unsigned char *)data;
    int incomplete_tail;
    if (utf8_valid_prefix(bytes, len, &incomplete_tail) == len)
        return json_stringn(data, len);
    size_t cap, out = 0;
    char *clean = checked_mul_size(len, 3, &cap) ? malloc(cap) : NULL;
    if (!clean)
        return NULL;
    for (size_t at = 0; at < len;) {
        size_t valid = utf8_valid_prefix(bytes + at, len - at, &incomplete_tail);
        memcpy(clean + out, data + at, valid);
        out += valid;
        at += valid;
        if (at < len) { /* one byte that starts no valid sequence */
            memcpy(clean + out, "\xef\xbf\xbd", 3);
            out += 3;
            at++;
        }
    }
    json_t *s = json_stringn(clean, out);
    free(clean);
    return s;
}
