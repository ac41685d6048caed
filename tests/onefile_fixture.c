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

/* llama.cpp's projector tensor name as ollama's converter writes it, into out. */
static void ollama_name(const char *name, char *out, size_t size)
{
    static const char *const map[][2] = {
        {"v.patch_embd.", "v.patch_embedding."}, {"v.position_embd.", "v.position_embedding."},
        {"v.post_ln.", "v.post_layernorm."},     {"mm.soft_emb_norm.", "mm.mm_soft_emb_norm."},
        {"mm.input_projection.", "mm.mm_input_projection."},
        {".ln1.", ".layer_norm1."},              {".ln2.", ".layer_norm2."},
        {".attn_out.", ".attn_output."},         {".ffn_up.", ".mlp.fc1."},
        {".ffn_down.", ".mlp.fc2."},
    };
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++) {
        const char *at = strstr(name, map[i][0]);
        if (at) {
            snprintf(out, size, "%.*s%s%s", (int)(at - name), name, map[i][1],
                     at + strlen(map[i][0]));
            return;
        }
    }
    snprintf(out, size, "%s", name);
}

void onefile_fixture_write(const char *text, const char *mmproj, const char *dst,
                           uint32_t tokens_per_image, const char *drop_key,
                           const char *bad_tensor)
{
    corral_error err;
    gguf_file *in = gguf_open(text, &err);
    if (!in)
        fail_msg("%s: %s", text, err.message);
    gguf_file *mm = gguf_open(mmproj, &err);
    if (!mm)
        fail_msg("%s: %s", mmproj, err.message);
    gguf_writer *w = gguf_writer_create();
    const gguf_kv *arch_kv = gguf_find_kv(in, "general.architecture");
    if (!w || !arch_kv)
        fail_msg("%s: no architecture", text);
    gguf_str arch = gguf_kv_str(arch_kv, 0);
    bool ok = true;
    for (size_t i = 0; ok && i < gguf_n_kv(in); i++)
        ok = gguf_writer_copy_kv(w, gguf_kv_at(in, i), &err);
    static const char prefix[] = "clip.vision.";
    for (size_t i = 0; ok && i < gguf_n_kv(mm); i++) {
        gguf_kv kv = *gguf_kv_at(mm, i);
        if (strncmp(kv.key, prefix, sizeof prefix - 1) != 0 || strstr(kv.key, "image_mean") ||
            strstr(kv.key, "image_std"))
            continue;
        char key[128];
        snprintf(key, sizeof key, "%.*s.vision.%s", (int)arch.size, arch.data,
                 kv.key + sizeof prefix - 1);
        if (drop_key && strcmp(key, drop_key) == 0)
            continue;
        kv.key = key;
        ok = gguf_writer_copy_kv(w, &kv, &err);
    }
    char key[128];
    snprintf(key, sizeof key, "%.*s.mm.tokens_per_image", (int)arch.size, arch.data);
    if (ok && !(drop_key && strcmp(key, drop_key) == 0))
        ok = gguf_writer_add_u32(w, key, tokens_per_image, &err);
    for (int pass = 0; ok && pass < 2; pass++) {
        for (size_t i = 0; ok && i < gguf_n_tensors(in); i++) {
            const gguf_tensor *t = gguf_tensor_at(in, i);
            ok = pass == 0 ? gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, &err)
                           : gguf_writer_write_tensor(w, t->data, t->size_bytes, &err);
        }
        for (size_t i = 0; ok && i < gguf_n_tensors(mm); i++) {
            const gguf_tensor *t = gguf_tensor_at(mm, i);
            char name[128];
            ollama_name(t->name, name, sizeof name);
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
    ok = ok && gguf_writer_finish(w, &err);
    if (!ok)
        fail_msg("writing %s: %s", dst, err.message);
    gguf_writer_free(w);
    gguf_close(mm);
    gguf_close(in);
}
