/* A fixture model with its metadata changed (key_variant_fixture.h). */
#include "key_variant_fixture.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "gguf_write_fixture.h"
#include "reference_fixture.h"

static bool apply_edit(gguf_writer *w, const key_edit *e, const gguf_kv *kv, corral_error *err)
{
    if (e->rename)
        return !kv || gguf_writer_add_scalar(w, e->rename, kv->type, kv->data, err);
    return e->type == GGUF_TYPE_COUNT || gguf_writer_add_scalar(w, e->key, e->type, e->value, err);
}

void write_variant(const char *src, const char *dst, const key_edit *edits, size_t n_edits)
{
    corral_error err;
    gguf_file *in = gguf_open(fixture(src), &err);
    gguf_writer *w = gguf_writer_create();
    if (!in || !w)
        fail_msg("%s", in ? "out of memory" : err.message);
    bool ok = true, found[8] = {false};
    assert_true(n_edits <= 8);
    for (size_t i = 0; ok && i < gguf_n_kv(in); i++) {
        const gguf_kv *kv = gguf_kv_at(in, i);
        size_t e = 0;
        while (e < n_edits && strcmp(kv->key, edits[e].key) != 0)
            e++;
        if (e == n_edits) {
            ok = gguf_writer_copy_kv(w, kv, &err);
            continue;
        }
        found[e] = true;
        ok = apply_edit(w, &edits[e], kv, &err);
    }
    for (size_t e = 0; ok && e < n_edits; e++)
        if (!found[e])
            ok = apply_edit(w, &edits[e], NULL, &err);
    for (size_t i = 0; ok && i < gguf_n_tensors(in); i++) {
        const gguf_tensor *t = gguf_tensor_at(in, i);
        ok = gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, &err);
    }
    ok = ok && gguf_writer_begin(w, dst, &err);
    for (size_t i = 0; ok && i < gguf_n_tensors(in); i++)
        ok = gguf_writer_write_tensor(w, gguf_tensor_at(in, i)->data,
                                      gguf_tensor_at(in, i)->size_bytes, &err);
    gguf_write_fixture_finish(w, ok, dst, &err);
    gguf_close(in);
}

void write_key_variant(const char *src, const char *dst, const char *key, enum gguf_type type,
                       const void *value)
{
    const key_edit edit = {key, NULL, type, value};
    write_variant(src, dst, &edit, 1);
}

void write_u32_variant(const char *src, const char *dst, const char *key, uint32_t value)
{
    write_key_variant(src, dst, key, GGUF_TYPE_UINT32, &value);
}
