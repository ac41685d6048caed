/* Same-role messages merged and system contents joined, as ollama does (collate.h). */
#include "template/collate.h"

#include <stdbool.h>
#include <string.h>

static const char *str_field(const json_t *obj, const char *key)
{
    const char *s = json_string_value(json_object_get(obj, key));
    return s ? s : "";
}

json_t *collate_messages(const json_t *messages, tbuf *system)
{
    json_t *out = json_array();
    if (!out)
        return NULL;
    json_t *last = NULL;
    for (size_t i = 0; i < json_array_size(messages); i++) {
        json_t *m = json_array_get(messages, i);
        if (!json_is_object(m))
            continue;
        const char *role = str_field(m, "role");
        const char *content = str_field(m, "content");
        if (strcmp(role, "system") == 0) {
            if ((system->len && !tbuf_puts(system, "\n\n")) || !tbuf_puts(system, content))
                goto fail;
        }
        if (last && strcmp(str_field(last, "role"), role) == 0 && strcmp(role, "tool") != 0) {
            tbuf merged;
            tbuf_init(&merged, system->max_bytes);
            bool ok = tbuf_puts(&merged, str_field(last, "content")) &&
                      tbuf_puts(&merged, "\n\n") && tbuf_puts(&merged, content);
            json_t *text = ok ? json_stringn_nocheck(merged.data, merged.len) : NULL;
            tbuf_free(&merged);
            if (!text || json_object_set_new(last, "content", text) != 0)
                goto fail;
            continue;
        }
        last = json_copy(m);
        if (!last || json_array_append_new(out, last) != 0)
            goto fail;
    }
    return out;
fail:
    json_decref(out);
    return NULL;
}
