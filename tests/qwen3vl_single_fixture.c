/*
 * The qwen3vl vision pair written as ollama's single file (qwen3vl_single_fixture.h).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gguf.h"
#include "gguf_write_fixture.h"
#include "quant_half.h"
#include "qwen3vl_single_fixture.h"

void qwen3vl_single_fixture_write(const char *text_path, const char *mmproj_path, const char *dst,
                                  const char *drop_tensor, const int32_t *indexes,
                                  uint64_t n_indexes)
{
    corral_error err = {0};
    gguf_file *text = gguf_open(text_path, &err);
    gguf_file *mm = text ? gguf_open(mmproj_path, &err) : NULL;
    if (!mm)
        fail_msg("%s", err.message);
    /* the text model's architecture names the keys: qwen3vl, or qwen35 (Qwen 3.5) */
    gguf_str arch_str;
    if (!gguf_get_str(text, "general.architecture", &arch_str, &err))
        fail_msg("%s", err.message);
    char arch[32], key[96];
    snprintf(arch, sizeof arch, "%.*s", (int)arch_str.size, arch_str.data);
    bool qwen35 = strncmp(arch, "qwen35", 6) == 0;
    char skip[3][96];
    snprintf(skip[0], sizeof skip[0], "%s.n_deepstack_layers", arch);
    snprintf(skip[1], sizeof skip[1], "%s.rope.dimension_sections", arch);
    snprintf(skip[2], sizeof skip[2], "%s.attention.head_count_kv", arch);
    gguf_writer *w = gguf_writer_create();
    bool ok = w != NULL;
    for (size_t i = 0; ok && i < gguf_n_kv(text); i++) {
        const gguf_kv *kv = gguf_kv_at(text, i);
        if (strcmp(kv->key, skip[0]) != 0 && strcmp(kv->key, skip[1]) != 0 &&
            (!qwen35 || strcmp(kv->key, skip[2]) != 0))
            ok = gguf_writer_copy_kv(w, kv, &err);
    }
    static const char *const sizes[] = {"block_count", "embedding_length", "attention.head_count",
                                        "patch_size", "spatial_merge_size"};
    for (size_t i = 0; ok && i < sizeof sizes / sizeof sizes[0]; i++) {
        char from[96];
        uint32_t v;
        snprintf(from, sizeof from, "clip.vision.%s", sizes[i]);
        snprintf(key, sizeof key, "%s.vision.%s", arch, sizes[i]);
        ok = gguf_get_u32(mm, from, &v, &err) && gguf_writer_add_u32(w, key, v, &err);
    }
    int32_t sections[3] = {3, 3, 2};
    float half[3] = {0.5f, 0.5f, 0.5f};
    snprintf(key, sizeof key, "%s.vision.num_channels", arch);
    ok = ok && gguf_writer_add_u32(w, key, 3, &err);
    if (qwen35) {
        /* Qwen 3.5's: the sections as three dimension_sections, the KV heads per layer (0 for
         * a recurrent one), the markers llama.cpp's files lack; no tower epsilon,
         * normalisation, deepstack or frame count (its engine fixes them) */
        uint32_t n_layer = 0, interval = 0, heads = 0;
        snprintf(key, sizeof key, "%s.block_count", arch);
        ok = ok && gguf_get_u32(text, key, &n_layer, &err);
        snprintf(key, sizeof key, "%s.full_attention_interval", arch);
        ok = ok && gguf_get_u32(text, key, &interval, &err);
        ok = ok && gguf_get_u32(text, skip[2], &heads, &err);
        int32_t per_layer[64] = {0};
        assert_true(!ok || (n_layer <= 64 && interval > 0));
        for (uint32_t il = 0; ok && il < n_layer; il++)
            per_layer[il] = (il + 1) % interval == 0 ? (int32_t)heads : 0;
        ok = ok && gguf_writer_add_array(w, skip[1], GGUF_TYPE_INT32, sections, 3, &err) &&
             gguf_writer_add_array(w, skip[2], GGUF_TYPE_INT32, per_layer, n_layer, &err);
        snprintf(key, sizeof key, "%s.ssm.v_head_reordered", arch);
        ok = ok && gguf_writer_add_bool(w, key, true, &err);
        snprintf(key, sizeof key, "%s.rope.mrope_interleaved", arch);
        ok = ok && gguf_writer_add_bool(w, key, true, &err);
    } else {
        ok = ok &&
             gguf_writer_add_u32(w, "qwen3vl.vision.temporal_patch_size", 2, &err) &&
             gguf_writer_add_f32(w, "qwen3vl.vision.attention.layer_norm_epsilon", 1e-6f, &err) &&
             gguf_writer_add_f32(w, "qwen3vl.vision.rope.freq_base", 10000.0f, &err) &&
             gguf_writer_add_array(w, "qwen3vl.vision.deepstack_visual_indexes", GGUF_TYPE_INT32,
                                   indexes, n_indexes, &err) &&
             gguf_writer_add_array(w, "qwen3vl.vision.image_mean", GGUF_TYPE_FLOAT32, half, 3,
                                   &err) &&
             gguf_writer_add_array(w, "qwen3vl.vision.image_std", GGUF_TYPE_FLOAT32, half, 3,
                                   &err) &&
             gguf_writer_add_array(w, "qwen3vl.rope.mrope_section", GGUF_TYPE_INT32, sections, 3,
                                   &err);
    }
    /* the Conv3D kernel [p, p, 2, 3E]: per output and channel, per frame, p rows of p */
    const gguf_tensor *k0 = gguf_find_tensor(mm, "v.patch_embd.weight");
    const gguf_tensor *k1 = gguf_find_tensor(mm, "v.patch_embd.weight.1");
    assert_non_null(k0);
    assert_non_null(k1);
    size_t p = (size_t)k0->ne[0], E = (size_t)k0->ne[3], hw = p * p;
    uint16_t *conv3d = malloc(2 * 3 * E * hw * sizeof *conv3d);
    assert_non_null(conv3d);
    for (size_t o = 0; o < E; o++)
        for (size_t c = 0; c < 3; c++)
            for (size_t f = 0; f < 2; f++)
                for (size_t i = 0; i < hw; i++)
                    conv3d[((o * 3 + c) * 2 + f) * hw + i] = quant_f32_to_f16(
                        ((const float *)(f ? k1 : k0)->data)[(o * 3 + c) * hw + i]);
    static const struct { const char *ours, *theirs; } renames[] = {
        {"v.patch_embd.bias", "v.patch_embed.bias"}, {"v.position_embd.weight", "v.pos_embed.weight"},
        {"v.post_ln.", "v.merger.norm."}, {"mm.0.", "v.merger.linear_fc1."},
        {"mm.2.", "v.merger.linear_fc2."}, {".ln1.", ".norm1."}, {".ln2.", ".norm2."},
        {".ffn_up.", ".mlp.linear_fc1."}, {".ffn_down.", ".mlp.linear_fc2."},
        {".fc1.", ".linear_fc1."}, {".fc2.", ".linear_fc2."},
    };
    for (int pass = 0; ok && pass < 2; pass++) {
        for (size_t i = 0; ok && i < gguf_n_tensors(text); i++) {
            const gguf_tensor *t = gguf_tensor_at(text, i);
            /* Qwen 3.5's time step bias as ollama names it */
            char name[128];
            snprintf(name, sizeof name, "%s", t->name);
            char *dt = strstr(name, ".ssm_dt.bias");
            if (qwen35 && dt)
                dt[strlen(".ssm_dt")] = '\0';
            if (!drop_tensor || strcmp(name, drop_tensor) != 0)
                ok = gguf_write_fixture_copy(w, pass, name, t, &err);
        }
        /* and its multi-token prediction layer, which the text model does not load (a stand-in:
         * the output norm's values) */
        if (ok && qwen35)
            ok = gguf_write_fixture_copy(w, pass, "mtp.norm.weight",
                                         gguf_find_tensor(text, "output_norm.weight"), &err);
        bool kernel = !drop_tensor || strcmp(drop_tensor, "v.patch_embed.weight") != 0;
        if (ok && kernel && pass == 0) {
            int64_t ne[4] = {(int64_t)p, (int64_t)p, 2, (int64_t)(3 * E)};
            ok = gguf_writer_add_tensor(w, "v.patch_embed.weight", 1 /* F16 */, 4, ne, &err);
        } else if (ok && kernel) {
            ok = gguf_writer_write_tensor(w, conv3d, 2 * 3 * E * hw * sizeof *conv3d, &err);
        }
        for (size_t i = 0; ok && i < gguf_n_tensors(mm); i++) {
            const gguf_tensor *t = gguf_tensor_at(mm, i);
            if (strncmp(t->name, "v.patch_embd.weight", 19) == 0)
                continue;
            char name[128], rest[128];
            snprintf(name, sizeof name, "%s", t->name);
            for (size_t r = 0; r < sizeof renames / sizeof renames[0]; r++) {
                char *at = strstr(name, renames[r].ours);
                if (!at)
                    continue;
                snprintf(rest, sizeof rest, "%s", at + strlen(renames[r].ours));
                snprintf(at, sizeof name - (size_t)(at - name), "%s%s", renames[r].theirs, rest);
            }
            int layer;
            char leaf[64];
            if (sscanf(t->name, "v.deepstack.%d.%63s", &layer, leaf) == 2) {
                long k = -1;
                for (uint64_t j = 0; j < n_indexes; j++)
                    if (indexes[j] == layer)
                        k = (long)j;
                if (k < 0) /* a merger the list leaves out: numbered past it */
                    k = (long)n_indexes;
                snprintf(rest, sizeof rest, "%s", strchr(strchr(name + 12, '.'), '.') + 1);
                snprintf(name, sizeof name, "v.deepstack_merger.%ld.%.80s", k, rest);
            }
            if (drop_tensor && strcmp(name, drop_tensor) == 0)
                continue;
            char *qkv = strstr(name, "attn_qkv.");
            if (!qkv) {
                ok = gguf_write_fixture_copy(w, pass, name, t, &err);
                continue;
            }
            /* q, k and v apart: thirds of the fused rows */
            size_t third = t->size_bytes / 3;
            for (size_t j = 0; ok && j < 3; j++) {
                char part[128];
                snprintf(part, sizeof part, "%.*sattn_%c.%s", (int)(qkv - name), name, "qkv"[j],
                         qkv + strlen("attn_qkv."));
                int64_t ne[4] = {t->ne[0], t->n_dims > 1 ? t->ne[1] / 3 : t->ne[0] / 3, 1, 1};
                if (t->n_dims == 1)
                    ne[0] /= 3;
                ok = pass == 0 ? gguf_writer_add_tensor(w, part, t->type, t->n_dims, ne, &err)
                               : gguf_writer_write_tensor(
                                     w, (const uint8_t *)t->data + j * third, third, &err);
            }
        }
        if (ok && pass == 0)
            ok = gguf_writer_begin(w, dst, &err);
    }
    gguf_write_fixture_finish(w, ok, dst, &err);
    free(conv3d);
    gguf_close(mm);
    gguf_close(text);
}

