/* Writing dense models with reshaped attention heads for the forward tests (head_fixture.h). */
#include "head_fixture.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gguf.h"
#include "gguf_write_fixture.h"
#include "tensor_type.h"

/* The new shape of an attention tensor of src (ne[0], ne[1]; a bias: ne[1] 1), or false for
 * any other tensor. */
static bool reshaped(const char *name, int64_t n_embd, int64_t q_width, int64_t kv_width,
                     int64_t ne[2])
{
    static const struct { const char *suffix; int what; } kinds[] = {
        {".attn_q.weight", 0}, {".attn_k.weight", 1}, {".attn_v.weight", 1},
        {".attn_output.weight", 2}, {".attn_q.bias", 3}, {".attn_k.bias", 4},
        {".attn_v.bias", 4}};
    size_t len = strlen(name);
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        size_t n = strlen(kinds[i].suffix);
        if (len < n || strcmp(name + len - n, kinds[i].suffix) != 0)
            continue;
        int64_t shapes[5][2] = {{n_embd, q_width}, {n_embd, kv_width}, {q_width, n_embd},
                                {q_width, 1}, {kv_width, 1}};
        ne[0] = shapes[kinds[i].what][0];
        ne[1] = shapes[kinds[i].what][1];
        return true;
    }
    return false;
}

void head_fixture_write(const char *src, const char *dst, uint32_t n_head, uint32_t n_head_kv,
                        uint32_t head_dim, uint32_t n_rot)
{
    corral_error err;
    gguf_file *in = gguf_open(src, &err);
    gguf_writer *w = gguf_writer_create();
    const gguf_kv *arch_kv = in ? gguf_find_kv(in, "general.architecture") : NULL;
    const gguf_tensor *embd = in ? gguf_find_tensor(in, "token_embd.weight") : NULL;
    if (!in || !w || !arch_kv || !embd)
        fail_msg("%s: %s", src, in ? "no architecture or embeddings" : err.message);
    gguf_str arch = gguf_kv_str(arch_kv, 0);
    int64_t n_embd = embd->ne[0], q_width = (int64_t)n_head * head_dim;
    int64_t kv_width = (int64_t)n_head_kv * head_dim;
    const char *const keys[] = {"attention.head_count", "attention.head_count_kv",
                                "attention.key_length", "attention.value_length",
                                "rope.dimension_count"};
    const uint32_t values[] = {n_head, n_head_kv, head_dim, head_dim, n_rot};
    bool ok = true;
    for (size_t i = 0; ok && i < gguf_n_kv(in); i++) {
        const gguf_kv *kv = gguf_kv_at(in, i);
        bool replaced = false;
        for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
            char key[128];
            snprintf(key, sizeof key, "%.*s.%s", (int)arch.size, arch.data, keys[k]);
            replaced = replaced || strcmp(kv->key, key) == 0;
        }
        if (!replaced)
            ok = gguf_writer_copy_kv(w, kv, &err);
    }
    for (size_t k = 0; ok && k < sizeof keys / sizeof keys[0]; k++) {
        char key[128];
        snprintf(key, sizeof key, "%.*s.%s", (int)arch.size, arch.data, keys[k]);
        ok = gguf_writer_add_u32(w, key, values[k], &err);
    }
    size_t most = (size_t)(q_width > kv_width ? q_width : kv_width) * (size_t)n_embd;
    float *random = malloc(most * sizeof *random);
    if (!random)
        fail_msg("out of memory");
    for (int pass = 0; ok && pass < 2; pass++) {
        for (size_t i = 0; ok && i < gguf_n_tensors(in); i++) {
            const gguf_tensor *t = gguf_tensor_at(in, i);
            int64_t ne[4] = {1, 1, 1, 1};
            if (!reshaped(t->name, n_embd, q_width, kv_width, ne))
                ok = gguf_write_fixture_copy(w, pass, t->name, t, &err);
            else if (pass == 0)
                ok = gguf_writer_add_tensor(w, t->name, TENSOR_TYPE_F32, ne[1] > 1 ? 2 : 1, ne,
                                            &err);
            else {
                size_t n = (size_t)(ne[0] * ne[1]);
                uint32_t rng = 2718u + (uint32_t)i; /* each tensor its own values */
                for (size_t k = 0; k < n; k++) {
                    rng = rng * 1664525u + 1013904223u;
                    random[k] = ((float)(rng >> 8) / (float)(1u << 23) - 1.0f) * 0.15f;
                }
                ok = gguf_writer_write_tensor(w, random, n * sizeof *random, &err);
            }
        }
        if (pass == 0)
            ok = ok && gguf_writer_begin(w, dst, &err);
    }
    gguf_write_fixture_finish(w, ok, dst, &err);
    free(random);
    gguf_close(in);
}
