/*
 * tests/fixtures/arch/mllama.gguf rewritten as the llama model of its self-attention layers
 * (mllama_fixture.h).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "gguf.h"
#include "gguf_write_fixture.h"
#include "mllama_fixture.h"
#include "reference_fixture.h"
#include "tensor_type.h"

void mllama_fixture_write_llama(const char *dst)
{
    corral_error err;
    gguf_file *in = gguf_open(fixture("arch/mllama.gguf"), &err);
    gguf_writer *w = gguf_writer_create();
    if (!in || !w)
        fail_msg("%s", in ? "out of memory" : err.message);
    const gguf_kv *cross = gguf_find_kv(in, "mllama.attention.cross_attention_layers");
    const gguf_tensor *output = gguf_find_tensor(in, "output.weight");
    assert_non_null(cross);
    assert_non_null(output);
    uint32_t n_layer, n_vocab = (uint32_t)output->ne[1];
    assert_true(gguf_get_u32(in, "mllama.block_count", &n_layer, &err));
    bool is_cross[16] = {false};
    assert_true(n_layer <= 16);
    for (uint64_t i = 0; i < cross->n; i++)
        is_cross[gguf_kv_i64(cross, i)] = true;
    uint32_t renumber[16], n_kept = 0;
    for (uint32_t il = 0; il < n_layer; il++)
        renumber[il] = is_cross[il] ? UINT32_MAX : n_kept++;
    bool ok = true;
    for (size_t k = 0; ok && k < gguf_n_kv(in); k++) {
        const gguf_kv *kv = gguf_kv_at(in, k);
        char key[128];
        if (kv == cross)
            continue;
        if (strcmp(kv->key, "general.architecture") == 0) {
            ok = gguf_writer_add_str(w, kv->key, "llama", 5, &err);
        } else if (strcmp(kv->key, "mllama.block_count") == 0) {
            ok = gguf_writer_add_u32(w, "llama.block_count", n_kept, &err);
        } else if (strcmp(kv->key, "tokenizer.ggml.tokens") == 0) {
            gguf_str texts[512];
            assert_true(n_vocab <= 512 && n_vocab < kv->n);
            for (uint32_t i = 0; i < n_vocab; i++)
                texts[i] = gguf_kv_str(kv, i);
            ok = gguf_writer_add_str_array(w, kv->key, texts, n_vocab, &err);
        } else if (strcmp(kv->key, "tokenizer.ggml.token_type") == 0) {
            int32_t types[512];
            for (uint32_t i = 0; i < n_vocab; i++)
                types[i] = (int32_t)gguf_kv_i64(kv, i);
            ok = gguf_writer_add_array(w, kv->key, GGUF_TYPE_INT32, types, n_vocab, &err);
        } else if (strncmp(kv->key, "mllama.", 7) == 0) {
            snprintf(key, sizeof key, "llama.%s", kv->key + 7);
            gguf_kv renamed = *kv;
            renamed.key = key;
            ok = gguf_writer_copy_kv(w, &renamed, &err);
        } else {
            ok = gguf_writer_copy_kv(w, kv, &err);
        }
    }
    for (int pass = 0; ok && pass < 2; pass++) {
        for (size_t k = 0; ok && k < gguf_n_tensors(in); k++) {
            const gguf_tensor *t = gguf_tensor_at(in, k);
            char name[GGUF_MAX_NAME_BYTES + 1];
            unsigned il;
            int at;
            if (strcmp(t->name, "token_embd.weight") == 0) {
                int64_t ne[2] = {t->ne[0], n_vocab};
                size_t bytes = (size_t)t->ne[0] * n_vocab * sizeof(float);
                assert_int_equal(t->type, TENSOR_TYPE_F32);
                ok = pass == 0 ? gguf_writer_add_tensor(w, t->name, t->type, 2, ne, &err)
                               : gguf_writer_write_tensor(w, t->data, bytes, &err);
                continue;
            }
            if (sscanf(t->name, "blk.%u.%n", &il, &at) == 1) {
                assert_true(il < n_layer);
                if (is_cross[il])
                    continue;
                snprintf(name, sizeof name, "blk.%u.%s", renumber[il], t->name + at);
            } else {
                snprintf(name, sizeof name, "%s", t->name);
            }
            ok = gguf_write_fixture_copy(w, pass, name, t, &err);
        }
        if (pass == 0)
            ok = ok && gguf_writer_begin(w, dst, &err);
    }
    gguf_write_fixture_finish(w, ok, dst, &err);
    gguf_close(in);
}

