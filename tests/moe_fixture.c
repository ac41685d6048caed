/* Writing a mixture-of-experts model with one tensor per expert (moe_fixture.h). */
#include "moe_fixture.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "gguf.h"

void moe_fixture_write_split_experts(const char *src, const char *dst)
{
    corral_error err;
    gguf_file *in = gguf_open(src, &err);
    gguf_writer *w = gguf_writer_create();
    if (!in || !w)
        fail_msg("%s", in ? "out of memory" : err.message);
    bool ok = true;
    for (size_t i = 0; ok && i < gguf_n_kv(in); i++)
        ok = gguf_writer_copy_kv(w, gguf_kv_at(in, i), &err);
    for (int pass = 0; pass < 2; pass++)
        for (size_t i = 0; ok && i < gguf_n_tensors(in); i++) {
            const gguf_tensor *t = gguf_tensor_at(in, i);
            const char *exps = strstr(t->name, "_exps.weight");
            size_t n_split = exps ? (size_t)t->ne[2] : 1, bytes = t->size_bytes / n_split;
            for (size_t k = 0; ok && k < n_split; k++) {
                size_t e = n_split - 1 - k; /* last expert first: no expert follows the one before */
                char name[128];
                if (exps)
                    snprintf(name, sizeof name, "%.*s.%zu.weight", (int)(exps - t->name), t->name, e);
                else
                    snprintf(name, sizeof name, "%s", t->name);
                if (pass == 0)
                    ok = gguf_writer_add_tensor(w, name, t->type, exps ? 2 : t->n_dims, t->ne, &err);
                else
                    ok = gguf_writer_write_tensor(w, (const char *)t->data + e * bytes, bytes, &err);
            }
            if (pass == 0 && i + 1 == gguf_n_tensors(in))
                ok = ok && gguf_writer_begin(w, dst, &err);
        }
    ok = ok && gguf_writer_finish(w, &err);
    if (!ok)
        fail_msg("writing %s: %s", dst, err.message);
    gguf_writer_free(w);
    gguf_close(in);
}
