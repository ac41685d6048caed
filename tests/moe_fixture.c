/* Writing mixture-of-experts models for the forward tests (moe_fixture.h). */
#include "moe_fixture.h"

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
    gguf_write_fixture_finish(w, ok, dst, &err);
    gguf_close(in);
}

void moe_fixture_write_shared_expert(const char *src, const char *dst, const char *width_key,
                                     uint32_t n_layer, uint32_t n_embd, uint32_t n_ff)
{
    static const char *const kinds[] = {"gate", "up", "down"};
    corral_error err;
    gguf_file *in = gguf_open(src, &err);
    gguf_writer *w = gguf_writer_create();
    float *values = malloc((size_t)n_embd * n_ff * sizeof *values);
    if (!in || !w || !values)
        fail_msg("%s", in ? "out of memory" : err.message);
    uint32_t rng = 777;
    for (size_t i = 0; i < (size_t)n_embd * n_ff; i++) {
        rng = rng * 1664525u + 1013904223u;
        values[i] = ((float)(rng >> 8) / (float)(1u << 23) - 1.0f) * 0.2f;
    }
    bool ok = gguf_writer_add_u32(w, width_key, n_ff, &err);
    for (size_t i = 0; ok && i < gguf_n_kv(in); i++)
        ok = gguf_writer_copy_kv(w, gguf_kv_at(in, i), &err);
    for (size_t i = 0; ok && i < gguf_n_tensors(in); i++) {
        const gguf_tensor *t = gguf_tensor_at(in, i);
        ok = gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, &err);
    }
    for (uint32_t il = 0; ok && il < n_layer; il++)
        for (size_t k = 0; ok && k < 3; k++) {
            char name[64];
            snprintf(name, sizeof name, "blk.%u.ffn_%s_shexp.weight", il, kinds[k]);
            int64_t ne[2] = {k == 2 ? n_ff : n_embd, k == 2 ? n_embd : n_ff};
            ok = gguf_writer_add_tensor(w, name, TENSOR_TYPE_F32, 2, ne, &err);
        }
    ok = ok && gguf_writer_begin(w, dst, &err);
    for (size_t i = 0; ok && i < gguf_n_tensors(in); i++) {
        const gguf_tensor *t = gguf_tensor_at(in, i);
        ok = gguf_writer_write_tensor(w, t->data, t->size_bytes, &err);
    }
    for (uint32_t k = 0; ok && k < n_layer * 3; k++) /* every matrix the same values */
        ok = gguf_writer_write_tensor(w, values, (size_t)n_embd * n_ff * sizeof *values, &err);
    gguf_write_fixture_finish(w, ok, dst, &err);
    free(values);
    gguf_close(in);
}

void moe_fixture_write_selection_bias(const char *src, const char *dst, uint32_t n_layer,
                                      uint32_t n_expert)
{
    corral_error err;
    gguf_file *in = gguf_open(src, &err);
    gguf_writer *w = gguf_writer_create();
    float *bias = malloc((size_t)n_expert * sizeof *bias);
    if (!in || !w || !bias)
        fail_msg("%s", in ? "out of memory" : err.message);
    uint32_t rng = 4242;
    for (size_t e = 0; e < n_expert; e++) {
        rng = rng * 1664525u + 1013904223u;
        bias[e] = ((float)(rng >> 8) / (float)(1u << 23) - 1.0f) * 0.3f;
    }
    bool ok = true;
    for (size_t i = 0; ok && i < gguf_n_kv(in); i++)
        ok = gguf_writer_copy_kv(w, gguf_kv_at(in, i), &err);
    for (size_t i = 0; ok && i < gguf_n_tensors(in); i++) {
        const gguf_tensor *t = gguf_tensor_at(in, i);
        ok = gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, &err);
    }
    for (uint32_t il = 0; ok && il < n_layer; il++) {
        char name[64];
        snprintf(name, sizeof name, "blk.%u.exp_probs_b.bias", il);
        int64_t ne[1] = {n_expert};
        ok = gguf_writer_add_tensor(w, name, TENSOR_TYPE_F32, 1, ne, &err);
    }
    ok = ok && gguf_writer_begin(w, dst, &err);
    for (size_t i = 0; ok && i < gguf_n_tensors(in); i++) {
        const gguf_tensor *t = gguf_tensor_at(in, i);
        ok = gguf_writer_write_tensor(w, t->data, t->size_bytes, &err);
    }
    for (uint32_t il = 0; ok && il < n_layer; il++)
        ok = gguf_writer_write_tensor(w, bias, (size_t)n_expert * sizeof *bias, &err);
    gguf_write_fixture_finish(w, ok, dst, &err);
    free(bias);
    gguf_close(in);
}

/*
 * arch/deepseek2.gguf as conversions before the split wrote it: per layer one attn_kv_b
 * [kv latent 40, 4 heads x (24 key + 32 value rows)], a head's key rows the columns of its
 * attn_k_b slab and its value rows its attn_v_b slab, and key_length / value_length the
 * heads' (40, 32) over 4 KV heads instead of the cache rows'. The same model: it must give the
 * reference's logits.
 */
void moe_fixture_write_deepseek2_combined_kv_b(const char *src, const char *dst)
{
    enum { H = 4, NOPE = 24, V = 32, LATENT = 40 };
    corral_error err;
    gguf_file *in = gguf_open(src, &err);
    gguf_writer *w = gguf_writer_create();
    if (!in || !w)
        fail_msg("%s", in ? "out of memory" : err.message);
    bool ok = true;
    for (size_t i = 0; ok && i < gguf_n_kv(in); i++) {
        const gguf_kv *kv = gguf_kv_at(in, i);
        if (strcmp(kv->key, "deepseek2.attention.key_length") == 0)
            ok = gguf_writer_add_u32(w, kv->key, NOPE + 16, &err);
        else if (strcmp(kv->key, "deepseek2.attention.value_length") == 0)
            ok = gguf_writer_add_u32(w, kv->key, V, &err);
        else if (strcmp(kv->key, "deepseek2.attention.head_count_kv") == 0)
            ok = gguf_writer_add_u32(w, kv->key, H, &err);
        else if (!strstr(kv->key, "_length_mla"))
            ok = gguf_writer_copy_kv(w, kv, &err);
    }
    static float kv_b[H * (NOPE + V) * LATENT];
    const int64_t kv_b_ne[4] = {LATENT, H * (NOPE + V), 1, 1};
    for (int pass = 0; ok && pass < 2; pass++) {
        for (size_t i = 0; ok && i < gguf_n_tensors(in); i++) {
            const gguf_tensor *t = gguf_tensor_at(in, i);
            if (strstr(t->name, ".attn_v_b."))
                continue;
            const char *k_b = strstr(t->name, ".attn_k_b.");
            if (!k_b) {
                ok = gguf_write_fixture_copy(w, pass, t->name, t, &err);
                continue;
            }
            char name[64];
            snprintf(name, sizeof name, "%.*s.attn_kv_b.weight", (int)(k_b - t->name), t->name);
            if (pass == 0) {
                ok = gguf_writer_add_tensor(w, name, 0, 2, kv_b_ne, &err);
                continue;
            }
            char v_name[64];
            snprintf(v_name, sizeof v_name, "%.*s.attn_v_b.weight", (int)(k_b - t->name), t->name);
            const float *key = t->data, *value = gguf_find_tensor(in, v_name)->data;
            for (size_t h = 0; h < H; h++)
                for (size_t i2 = 0; i2 < LATENT; i2++) {
                    for (size_t j = 0; j < NOPE; j++) /* attn_k_b [24, 40, 4]: (j, i2, h) */
                        kv_b[(h * (NOPE + V) + j) * LATENT + i2] = key[(h * LATENT + i2) * NOPE + j];
                    for (size_t r = 0; r < V; r++) /* attn_v_b [40, 32, 4]: (i2, r, h) */
                        kv_b[(h * (NOPE + V) + NOPE + r) * LATENT + i2] = value[(h * V + r) * LATENT + i2];
                }
            ok = gguf_writer_write_tensor(w, kv_b, sizeof kv_b, &err);
        }
        if (pass == 0)
            ok = ok && gguf_writer_begin(w, dst, &err);
    }
    gguf_write_fixture_finish(w, ok, dst, &err);
    gguf_close(in);
}
