/* Writing ollama-style single-file vision models for the vision tests (onefile_fixture.h). */
#include "onefile_fixture.h"

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

/* llama.cpp's projector tensor name as ollama's converter writes it, into out. */
static void ollama_name(bool qwen, const char *name, char *out, size_t size)
{
    static const char *const gemma3[][2] = {
        {"v.patch_embd.", "v.patch_embedding."}, {"v.position_embd.", "v.position_embedding."},
        {"v.post_ln.", "v.post_layernorm."},     {"mm.soft_emb_norm.", "mm.mm_soft_emb_norm."},
        {"mm.input_projection.", "mm.mm_input_projection."},
        {".ln1.", ".layer_norm1."},              {".ln2.", ".layer_norm2."},
        {".attn_out.", ".attn_output."},         {".ffn_up.", ".mlp.fc1."},
        {".ffn_down.", ".mlp.fc2."},
    };
    static const char *const qwen25vl[][2] = {
        {"v.patch_embd.weight.1", "v.patch_embd_1.weight"},
        {"v.patch_embd.weight", "v.patch_embd_0.weight"},
        {"v.post_ln.", "v.merger.ln_q."},
        {"mm.0.", "v.merger.mlp.0."},
        {"mm.2.", "v.merger.mlp.2."},
    };
    const char *const(*map)[2] = qwen ? qwen25vl : gemma3;
    size_t n = qwen ? sizeof qwen25vl / sizeof qwen25vl[0] : sizeof gemma3 / sizeof gemma3[0];
    for (size_t i = 0; i < n; i++) {
        const char *at = strstr(name, map[i][0]);
        if (at) {
            snprintf(out, size, "%.*s%s%s", (int)(at - name), name, map[i][1],
                     at + strlen(map[i][0]));
            return;
        }
    }
    snprintf(out, size, "%s", name);
}

static bool skipped(const char *key, const char *drop_key)
{
    return drop_key && strcmp(key, drop_key) == 0;
}

/* The text model's keys; for Qwen2.5-VL under ollama's architecture name, its M-RoPE
 * sections as ollama's three. */
static bool copy_text_keys(gguf_writer *w, const gguf_file *in, bool qwen, const char *drop_key,
                           corral_error *err)
{
    static const char old_prefix[] = "qwen2vl.";
    bool ok = true;
    for (size_t i = 0; ok && i < gguf_n_kv(in); i++) {
        gguf_kv kv = *gguf_kv_at(in, i);
        char key[128];
        if (!qwen || (strcmp(kv.key, "general.architecture") != 0 &&
                      strncmp(kv.key, old_prefix, sizeof old_prefix - 1) != 0)) {
            ok = gguf_writer_copy_kv(w, &kv, err);
            continue;
        }
        if (strcmp(kv.key, "general.architecture") == 0) {
            ok = gguf_writer_add_str(w, kv.key, "qwen25vl", 8, err);
            continue;
        }
        const char *rest = kv.key + sizeof old_prefix - 1;
        if (strcmp(rest, "rope.dimension_sections") == 0) {
            int32_t sections[3];
            for (int s = 0; s < 3; s++)
                sections[s] = (int32_t)gguf_kv_i64(&kv, (uint64_t)s);
            if (!skipped("qwen25vl.rope.mrope_section", drop_key))
                ok = gguf_writer_add_array(w, "qwen25vl.rope.mrope_section", GGUF_TYPE_INT32,
                                           sections, 3, err);
            continue;
        }
        snprintf(key, sizeof key, "qwen25vl.%s", rest);
        kv.key = key;
        ok = gguf_writer_copy_kv(w, &kv, err);
    }
    return ok;
}

/* The projector's tower keys as ollama's converter writes them. */
static bool copy_tower_keys(gguf_writer *w, const gguf_file *mm, const char *arch, bool qwen,
                            uint32_t tokens_per_image, const char *drop_key, corral_error *err)
{
    static const char prefix[] = "clip.vision.";
    /* ollama's qwen25vl converter writes neither the image size nor the MLP width */
    static const char *const qwen_kept[] = {"block_count", "embedding_length",
                                            "attention.head_count", "patch_size",
                                            "attention.layer_norm_epsilon"};
    bool ok = true;
    for (size_t i = 0; ok && i < gguf_n_kv(mm); i++) {
        gguf_kv kv = *gguf_kv_at(mm, i);
        if (strncmp(kv.key, prefix, sizeof prefix - 1) != 0 || strstr(kv.key, "image_mean") ||
            strstr(kv.key, "image_std"))
            continue;
        const char *rest = kv.key + sizeof prefix - 1;
        bool kept = !qwen;
        for (size_t k = 0; qwen && k < sizeof qwen_kept / sizeof qwen_kept[0]; k++)
            kept = kept || strcmp(rest, qwen_kept[k]) == 0;
        char key[128];
        snprintf(key, sizeof key, "%s.vision.%s", arch, rest);
        if (!kept || skipped(key, drop_key))
            continue;
        kv.key = key;
        ok = gguf_writer_copy_kv(w, &kv, err);
    }
    char key[128];
    if (!qwen) {
        snprintf(key, sizeof key, "%s.mm.tokens_per_image", arch);
        return !ok || skipped(key, drop_key) ||
               gguf_writer_add_u32(w, key, tokens_per_image, err);
    }
    /* llama.cpp's "every p-th block attends fully" as ollama's list of those blocks */
    uint32_t pattern = 0, n_layer = 0;
    corral_error ignored;
    if (!ok || !gguf_get_u32(mm, "clip.vision.n_wa_pattern", &pattern, &ignored) ||
        !gguf_get_u32(mm, "clip.vision.block_count", &n_layer, &ignored) || pattern == 0 ||
        n_layer / pattern > 64)
        return false;
    int32_t full[64];
    for (uint32_t k = 0; k < n_layer / pattern; k++)
        full[k] = (int32_t)((k + 1) * pattern - 1);
    snprintf(key, sizeof key, "%s.vision.fullatt_block_indexes", arch);
    return skipped(key, drop_key) ||
           gguf_writer_add_array(w, key, GGUF_TYPE_INT32, full, n_layer / pattern, err);
}

void onefile_fixture_write(const char *text, const char *mmproj, const char *dst,
                           uint32_t tokens_per_image, const char *drop_key,
                           const char *bad_tensor)
{
    corral_error err = {{0}};
    gguf_file *in = gguf_open(text, &err);
    if (!in)
        fail_msg("%s: %s", text, err.message);
    gguf_file *mm = gguf_open(mmproj, &err);
    if (!mm)
        fail_msg("%s: %s", mmproj, err.message);
    gguf_writer *w = gguf_writer_create();
    gguf_str arch_in, type;
    if (!w || !gguf_get_str(in, "general.architecture", &arch_in, &err) ||
        !gguf_get_str(mm, "clip.projector_type", &type, &err))
        fail_msg("%s, %s: no architecture or projector type", text, mmproj);
    bool qwen = type.size == 16 && memcmp(type.data, "qwen2.5vl_merger", 16) == 0;
    char arch[64];
    snprintf(arch, sizeof arch, "%.*s", (int)arch_in.size, arch_in.data);
    if (qwen)
        snprintf(arch, sizeof arch, "qwen25vl");
    bool ok = copy_text_keys(w, in, qwen, drop_key, &err) &&
              copy_tower_keys(w, mm, arch, qwen, tokens_per_image, drop_key, &err);
    for (int pass = 0; ok && pass < 2; pass++) {
        for (size_t i = 0; ok && i < gguf_n_tensors(in); i++) {
            const gguf_tensor *t = gguf_tensor_at(in, i);
            ok = gguf_write_fixture_copy(w, pass, t->name, t, &err);
        }
        for (size_t i = 0; ok && i < gguf_n_tensors(mm); i++) {
            const gguf_tensor *t = gguf_tensor_at(mm, i);
            char name[128];
            ollama_name(qwen, t->name, name, sizeof name);
            int64_t flat[4] = {(int64_t)gguf_tensor_n_elems(t), 1, 1, 1};
            bool bad = bad_tensor && strcmp(name, bad_tensor) == 0;
            if (pass == 0)
                ok = bad ? gguf_writer_add_tensor(w, name, t->type, 1, flat, &err)
                         : gguf_writer_add_tensor(w, name, t->type, t->n_dims, t->ne, &err);
            else
                ok = gguf_writer_write_tensor(w, t->data, t->size_bytes, &err);
        }
        if (pass == 0)
            ok = ok && gguf_writer_begin(w, dst, &err);
    }
    gguf_write_fixture_finish(w, ok, dst, &err);
    gguf_close(mm);
    gguf_close(in);
}
