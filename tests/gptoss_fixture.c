/* The ollama-layout gpt-oss model of the memory tests (gptoss_fixture.h). */
#include "gptoss_fixture.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gguf.h"
#include "gguf_write_fixture.h"
#include "reference_fixture.h"
#include "tensor_type.h"

enum {
    N_EMBD = 64,
    N_HEAD = 4,
    N_HEAD_KV = 2,
    HEAD_DIM = 32,
    N_LAYER = 2,
    N_EXPERT = 64,
    N_EXPERT_USED = 2,
    N_FF_EXP = 2048,
};

static uint32_t next_random(uint32_t *state)
{
    *state = *state * 1664525u + 1013904223u;
    return *state >> 8;
}

/* An F32 tensor of small random values (norm weights near 1). */
static float *random_f32(size_t n, float center, float spread, uint32_t *state)
{
    float *v = malloc(n * sizeof *v);
    assert_non_null(v);
    for (size_t i = 0; i < n; i++)
        v[i] = center + spread * ((float)(next_random(state) % 2001) / 1000.0f - 1.0f);
    return v;
}

/* MXFP4 blocks (an E8M0 scale near 2^-4, random nibbles): the nibble order does not
 * matter to random bytes. */
static uint8_t *random_mxfp4(size_t bytes, uint32_t *state)
{
    uint8_t *b = malloc(bytes);
    assert_non_null(b);
    for (size_t i = 0; i < bytes; i++)
        b[i] = (uint8_t)(i % 17 == 0 ? 123 : next_random(state));
    return b;
}

typedef struct tensor_spec {
    char name[64];
    uint32_t type, n_dims;
    int64_t ne[4];
    void *data;
    size_t bytes;
} tensor_spec;

static void add_f32(tensor_spec *t, size_t *n, const char *name, int64_t ne0, int64_t ne1,
                    float center, float spread, uint32_t *state)
{
    tensor_spec *s = &t[(*n)++];
    snprintf(s->name, sizeof s->name, "%s", name);
    s->type = TENSOR_TYPE_F32;
    s->n_dims = ne1 > 1 ? 2 : 1;
    s->ne[0] = ne0, s->ne[1] = ne1, s->ne[2] = 1, s->ne[3] = 1;
    s->bytes = (size_t)(ne0 * ne1) * sizeof(float);
    s->data = random_f32((size_t)(ne0 * ne1), center, spread, state);
}

static void add_experts(tensor_spec *t, size_t *n, const char *name, int64_t n_in,
                        int64_t n_rows, uint32_t *state)
{
    tensor_spec *s = &t[(*n)++];
    snprintf(s->name, sizeof s->name, "%s", name);
    s->type = TENSOR_TYPE_MXFP4_OLLAMA;
    s->n_dims = 3;
    s->ne[0] = n_in, s->ne[1] = n_rows, s->ne[2] = N_EXPERT, s->ne[3] = 1;
    s->bytes = (size_t)(n_in / 32 * 17 * n_rows * N_EXPERT);
    s->data = random_mxfp4(s->bytes, state);
}

void gptoss_fixture_write(const char *path, size_t *experts_bytes)
{
    corral_error err;
    gguf_file *vocab = gguf_open(fixture("arch/gpt-oss-mxfp4.gguf"), &err);
    gguf_writer *w = gguf_writer_create();
    assert_non_null(vocab);
    assert_non_null(w);
    bool ok = gguf_writer_add_str(w, "general.architecture", "gptoss", 6, &err);
    static const struct {
        const char *key;
        uint32_t value;
    } u32s[] = {{"gptoss.context_length", 4096},  {"gptoss.embedding_length", N_EMBD},
                {"gptoss.block_count", N_LAYER},  {"gptoss.feed_forward_length", N_FF_EXP},
                {"gptoss.attention.head_count", N_HEAD},
                {"gptoss.attention.head_count_kv", N_HEAD_KV},
                {"gptoss.attention.key_length", HEAD_DIM},
                {"gptoss.attention.value_length", HEAD_DIM},
                {"gptoss.expert_count", N_EXPERT}, {"gptoss.expert_used_count", N_EXPERT_USED},
                {"gptoss.attention.sliding_window", 4},
                {"gptoss.rope.scaling.original_context_length", 4096}};
    for (size_t i = 0; ok && i < sizeof u32s / sizeof u32s[0]; i++)
        ok = gguf_writer_add_u32(w, u32s[i].key, u32s[i].value, &err);
    ok = ok && gguf_writer_add_f32(w, "gptoss.attention.layer_norm_rms_epsilon", 1e-5f, &err) &&
         gguf_writer_add_f32(w, "gptoss.rope.freq_base", 150000.0f, &err) &&
         gguf_writer_add_f32(w, "gptoss.rope.scaling.factor", 32.0f, &err);
    for (size_t i = 0; ok && i < gguf_n_kv(vocab); i++)
        if (strncmp(gguf_kv_at(vocab, i)->key, "tokenizer.", 10) == 0)
            ok = gguf_writer_copy_kv(w, gguf_kv_at(vocab, i), &err);
    const gguf_tensor *embd = gguf_find_tensor(vocab, "token_embd.weight");
    assert_non_null(embd);
    int64_t n_vocab = embd->ne[1];
    gguf_close(vocab);

    tensor_spec t[3 + N_LAYER * 14];
    size_t n = 0;
    uint32_t state = 42;
    int64_t qkv = (N_HEAD + 2 * N_HEAD_KV) * HEAD_DIM;
    add_f32(t, &n, "token_embd.weight", N_EMBD, n_vocab, 0.0f, 0.5f, &state);
    add_f32(t, &n, "output_norm.weight", N_EMBD, 1, 1.0f, 0.1f, &state);
    add_f32(t, &n, "output.weight", N_EMBD, n_vocab, 0.0f, 0.2f, &state);
    *experts_bytes = 0;
    for (int il = 0; il < N_LAYER; il++) {
        char name[64];
#define LAYER(suffix) (snprintf(name, sizeof name, "blk.%d." suffix, il), name)
        add_f32(t, &n, LAYER("attn_norm.weight"), N_EMBD, 1, 1.0f, 0.1f, &state);
        add_f32(t, &n, LAYER("attn_qkv.weight"), N_EMBD, qkv, 0.0f, 0.2f, &state);
        add_f32(t, &n, LAYER("attn_qkv.bias"), qkv, 1, 0.0f, 0.1f, &state);
        add_f32(t, &n, LAYER("attn_out.weight"), N_HEAD * HEAD_DIM, N_EMBD, 0.0f, 0.2f, &state);
        add_f32(t, &n, LAYER("attn_out.bias"), N_EMBD, 1, 0.0f, 0.1f, &state);
        add_f32(t, &n, LAYER("attn_sinks"), N_HEAD, 1, 0.0f, 1.0f, &state);
        add_f32(t, &n, LAYER("ffn_norm.weight"), N_EMBD, 1, 1.0f, 0.1f, &state);
        add_f32(t, &n, LAYER("ffn_gate_inp.weight"), N_EMBD, N_EXPERT, 0.0f, 0.5f, &state);
        add_f32(t, &n, LAYER("ffn_gate_inp.bias"), N_EXPERT, 1, 0.0f, 0.5f, &state);
        add_experts(t, &n, LAYER("ffn_gate_up_exps.weight"), N_EMBD, 2 * N_FF_EXP, &state);
        add_f32(t, &n, LAYER("ffn_gate_up_exps.bias"), 2 * N_FF_EXP, N_EXPERT, 0.0f, 0.1f,
                &state);
        add_experts(t, &n, LAYER("ffn_down_exps.weight"), N_FF_EXP, N_EMBD, &state);
        add_f32(t, &n, LAYER("ffn_down_exps.bias"), N_EMBD, N_EXPERT, 0.0f, 0.1f, &state);
        *experts_bytes += t[n - 4].bytes + t[n - 2].bytes;
#undef LAYER
    }
    for (size_t i = 0; ok && i < n; i++)
        ok = gguf_writer_add_tensor(w, t[i].name, t[i].type, t[i].n_dims, t[i].ne, &err);
    ok = ok && gguf_writer_begin(w, path, &err);
    for (size_t i = 0; ok && i < n; i++)
        ok = gguf_writer_write_tensor(w, t[i].data, t[i].bytes, &err);
    gguf_write_fixture_finish(w, ok, path, &err);
    for (size_t i = 0; i < n; i++)
        free(t[i].data);
}
