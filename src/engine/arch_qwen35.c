/*
 * qwen35 (Qwen 3.5 dense, 0.8B-27B): a hybrid of recurrent and attention layers. Every
 * full_attention_interval-th layer (the 4th, 8th, ...) is gated attention; the others are
 * Gated DeltaNet layers (delta_net.c), whose per-sequence state takes the place of a KV cache.
 * Both are pre-norm blocks with a SwiGLU FFN whose norm the file calls post_attention_norm.
 * Layers past block_count - nextn_predict_layers are the multi-token prediction head, which
 * is not loaded.
 *
 * The gated attention's q projection is twice as wide: per head, its q rows and then as many
 * rows of a gate; q and k are RMS-normed per head and rotated on their first n_rot
 * components; the attention's output is multiplied by sigmoid(gate) before attn_output.
 * Positions are M-RoPE with interleaved sections (rope.dimension_sections), but a text
 * token has the same temporal, height and width position, so as long as every rotated pair
 * falls in one of those three sections the rotation is NeoX's at the token's position.
 * An image (llama.cpp's qwen3vl_merger projector, without deepstack) is Qwen3-VL's: its
 * tokens turn with their grid positions (corral_decode_image) and the recurrent layers take
 * its rows in order like any token's.
 * The MoE sizes (arch_qwen35moe.c) share the layers' keys, mixers and block. ollama's files
 * give attention.head_count_kv per layer (0 on the recurrent ones) and its first conversions
 * name the dt bias blk.N.ssm_dt, as they do for qwen3next.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "delta_net.h"
#include "forward.h"
#include "tensor_type.h"

/* The file's sections cover every rotated pair, the condition for text to be plain RoPE: a
 * pair outside them would turn with an image's fourth position, which text leaves at 0. The
 * sections interleave: pair i (mod their sum) is temporal when i % 3 == 0 and i < 3 * t,
 * height when i % 3 == 1 and i < 3 * h, width when i % 3 == 2 and i < 3 * w. With
 * ollama_keys (ollama's own qwen3vl files), a file without rope.dimension_sections may have
 * rope.mrope_section, or neither, when ollama's engine takes 24, 20, 20. */
bool imrope_check_sections(model_loader *ld, bool ollama_keys, uint32_t sections[4])
{
    const hparams *hp = &ld->model->hp;
    const char *arch = ld->model->arch->name;
    char key[64];
    snprintf(key, sizeof key, "%s.rope.dimension_sections", arch);
    const gguf_kv *kv;
    if (!gguf_get_array_opt(ld->model->file, key, GGUF_TYPE_COUNT, &kv, ld->err))
        return false;
    if (!kv && ollama_keys) {
        snprintf(key, sizeof key, "%s.rope.mrope_section", arch);
        if (!gguf_get_array_opt(ld->model->file, key, GGUF_TYPE_COUNT, &kv, ld->err))
            return false;
    }
    if (!kv && !ollama_keys)
        return gguf_get_array(ld->model->file, key, GGUF_TYPE_COUNT, &kv, ld->err);
    int64_t sec[4] = {24, 20, 20, 0}, sum = kv ? 0 : 64;
    bool ok = !kv || (kv->n >= 3 && kv->n <= 4 && gguf_type_is_integer(kv->elem_type));
    for (uint64_t i = 0; ok && kv && i < 4; i++) {
        sec[i] = i < kv->n ? gguf_kv_i64(kv, i) : 0;
        ok = sec[i] >= 0 && sec[i] <= hp->n_rot;
        sum += ok ? sec[i] : 0;
    }
    for (int64_t i = 0; ok && i < hp->n_rot / 2; i++) {
        int64_t sector = sum > 0 ? i % sum : 0;
        ok = sum > 0 && sector < 3 * sec[sector % 3];
    }
    if (!ok) {
        corral_error_set(ld->err, "%s: %s must be 3 or 4 sizes whose interleaved sections cover "
                         "all %u rotated pairs", gguf_path(ld->model->file), key, hp->n_rot / 2);
        return false;
    }
    for (int i = 0; sections && i < 4; i++)
        sections[i] = (uint32_t)sec[i];
    return true;
}

/* ollama's files write attention.head_count_kv per layer, 0 for a recurrent one (model.c
 * read it and checked the others agree): the zeros must be the layers the interval makes
 * recurrent, MTP layers past the trunk aside. */
static bool check_kv_heads_per_layer(model_loader *ld)
{
    const corral_model *m = ld->model;
    char key[64];
    snprintf(key, sizeof key, "%s.attention.head_count_kv", m->arch->name);
    const gguf_kv *kv = gguf_find_kv(m->file, key);
    if (!kv || kv->type != GGUF_TYPE_ARRAY)
        return true;
    for (uint32_t il = 0; il < m->hp.n_layer && il < kv->n; il++)
        if ((gguf_kv_i64(kv, il) == 0) != m->layers[il].recurrent) {
            corral_error_set(ld->err, "%s: %s says layer %u is %s, but full_attention_interval "
                             "makes it %s", gguf_path(m->file), key, il,
                             gguf_kv_i64(kv, il) == 0 ? "recurrent" : "attention",
                             m->layers[il].recurrent ? "recurrent" : "attention");
            return false;
        }
    return true;
}

bool qwen35_linear_hparams(model_loader *ld)
{
    corral_model *m = ld->model;
    hparams *hp = &m->hp;
    uint32_t inner = 0, interval = 4, n_predict = 0;
    if (!model_read_u32(ld, "nextn_predict_layers", &n_predict, false))
        return false;
    /* block_count includes the multi-token prediction layers a converter may append; those
     * only serve speculative drafting, which the trunk does not run */
    if (n_predict >= hp->n_layer) {
        corral_error_set(ld->err, "%s: %u prediction layers of %u layers leave no model",
                         gguf_path(m->file), n_predict, hp->n_layer);
        return false;
    }
    hp->n_layer -= n_predict;
    if (!model_read_u32(ld, "ssm.conv_kernel", &hp->ssm_conv_kernel, true) ||
        !model_read_u32(ld, "ssm.state_size", &hp->ssm_head_dim, true) ||
        !model_read_u32(ld, "ssm.group_count", &hp->ssm_k_heads, true) ||
        !model_read_u32(ld, "ssm.time_step_rank", &hp->ssm_v_heads, true) ||
        !model_read_u32(ld, "ssm.inner_size", &inner, true) ||
        !model_read_u32(ld, "full_attention_interval", &interval, false))
        return false;
    /* a value head is as wide as a key head (the state is square); the caps keep a layer's
     * state (value heads x head_dim^2 floats) and the conv's window well inside size_t */
    if (hp->ssm_conv_kernel == 0 || hp->ssm_conv_kernel > 64 || hp->ssm_head_dim == 0 ||
        hp->ssm_head_dim > 4096 || hp->ssm_k_heads == 0 || hp->ssm_v_heads == 0 ||
        hp->ssm_v_heads > 4096 || hp->ssm_v_heads % hp->ssm_k_heads != 0 ||
        (uint64_t)hp->ssm_v_heads * hp->ssm_head_dim != inner || interval == 0 ||
        hp->head_dim_k != hp->head_dim_v) {
        corral_error_set(ld->err, "%s: inconsistent linear attention (conv %u, state %u, %u key heads, %u value heads, inner %u, full attention every %u; heads %u / %u)",
                         gguf_path(m->file), hp->ssm_conv_kernel, hp->ssm_head_dim,
                         hp->ssm_k_heads, hp->ssm_v_heads, inner, interval, hp->head_dim_k,
                         hp->head_dim_v);
        return false;
    }
    hp->ssm_state = hp->ssm_head_dim; /* the state is square */
    for (uint32_t il = 0; il < hp->n_layer; il++)
        m->layers[il].recurrent = (il + 1) % interval != 0;
    return check_kv_heads_per_layer(ld);
}

/* The sections are kept for an image's grid positions. */
bool qwen35_hparams(model_loader *ld)
{
    hparams *hp = &ld->model->hp;
    hp->mrope_interleaved = true;
    return qwen35_linear_hparams(ld) && imrope_check_sections(ld, false, hp->mrope_sections);
}

/* The conv's taps are read as floats once per context (delta_net.c): F32 or F16 rows. */
static bool bind_conv(model_loader *ld, weight *w, const char *name)
{
    const hparams *hp = &ld->model->hp;
    size_t channels = 2 * (size_t)hp->ssm_k_heads * hp->ssm_head_dim +
                      (size_t)hp->ssm_v_heads * hp->ssm_head_dim;
    if (!model_bind_matrix(ld, w, name, hp->ssm_conv_kernel, channels, 1, true))
        return false;
    if (w->type != TENSOR_TYPE_F32 && w->type != TENSOR_TYPE_F16) {
        corral_error_set(ld->err, "%s: tensor '%s' has type %s, which is not supported (F32 "
                         "and F16 are)", gguf_path(ld->model->file), name,
                         tensor_type_name(w->type));
        return false;
    }
    return true;
}

#define NAME(suffix) (snprintf(name, name_size, "blk.%u." suffix, il), name)

/* The q/k/v and z projections, and beta's and alpha's. Qwen3-Next (ARCH_SSM_GROUPED) has
 * beta's and alpha's in one ssm_ba and its older files q, k, v and z in one ssm_in, both
 * grouped by key head (delta_net.c); its newer ones write attn_qkv and attn_gate as qwen35. */
static bool bind_projections(model_loader *ld, uint32_t il, char *name, size_t name_size)
{
    const hparams *hp = &ld->model->hp;
    layer_weights *l = &ld->model->layers[il];
    size_t E = hp->n_embd, H = hp->ssm_v_heads;
    size_t key_width = (size_t)hp->ssm_k_heads * hp->ssm_head_dim;
    size_t value_width = H * hp->ssm_head_dim;
    if (ld->model->arch->tensors & ARCH_SSM_GROUPED) {
        if (!model_bind_matrix(ld, &l->ssm_in, NAME("ssm_in.weight"), E,
                               2 * key_width + 2 * value_width, 1, false) ||
            !model_bind_matrix(ld, &l->ssm_ba, NAME("ssm_ba.weight"), E, 2 * H, 1, true))
            return false;
        if (l->ssm_in.data)
            return true;
    }
    return model_bind_matrix(ld, &l->ssm_qkv, NAME("attn_qkv.weight"), E,
                             2 * key_width + value_width, 1, true) &&
           model_bind_matrix(ld, &l->ssm_z, NAME("attn_gate.weight"), E, value_width, 1, true) &&
           ((ld->model->arch->tensors & ARCH_SSM_GROUPED) ||
            (model_bind_matrix(ld, &l->ssm_beta, NAME("ssm_beta.weight"), E, H, 1, true) &&
             model_bind_matrix(ld, &l->ssm_alpha, NAME("ssm_alpha.weight"), E, H, 1, true)));
}

/* The time step's bias: llama.cpp's ssm_dt.bias, or ssm_dt as ollama's first Qwen3-Next and
 * Qwen 3.5 conversions name it (the same vector). */
static bool bind_dt(model_loader *ld, uint32_t il, char *name, size_t name_size)
{
    layer_weights *l = &ld->model->layers[il];
    size_t H = ld->model->hp.ssm_v_heads;
    if (!model_bind_vector(ld, &l->ssm_dt, NAME("ssm_dt.bias"), H, false))
        return false;
    return l->ssm_dt.data || model_bind_vector(ld, &l->ssm_dt, NAME("ssm_dt"), H, true);
}

static bool bind_recurrent(model_loader *ld, uint32_t il, char *name, size_t name_size)
{
    const hparams *hp = &ld->model->hp;
    layer_weights *l = &ld->model->layers[il];
    size_t E = hp->n_embd, S = hp->ssm_head_dim, H = hp->ssm_v_heads;
    size_t value_width = H * S;
    return bind_projections(ld, il, name, name_size) &&
           bind_conv(ld, &l->ssm_conv, NAME("ssm_conv1d.weight")) &&
           bind_dt(ld, il, name, name_size) &&
           model_bind_vector(ld, &l->ssm_a, NAME("ssm_a"), H, true) &&
           model_bind_vector(ld, &l->ssm_norm, NAME("ssm_norm.weight"), S, true) &&
           model_bind_matrix(ld, &l->ssm_out, NAME("ssm_out.weight"), value_width, E, 1, true);
}

static bool bind_gated_attention(model_loader *ld, uint32_t il, char *name, size_t name_size)
{
    const hparams *hp = &ld->model->hp;
    layer_weights *l = &ld->model->layers[il];
    size_t E = hp->n_embd, D = hp->head_dim_k;
    size_t q_width = hp->n_head * D, kv_width = hp->n_head_kv * D;
    return model_bind_matrix(ld, &l->wq, NAME("attn_q.weight"), E, 2 * q_width, 1, true) &&
           model_bind_matrix(ld, &l->wk, NAME("attn_k.weight"), E, kv_width, 1, true) &&
           model_bind_matrix(ld, &l->wv, NAME("attn_v.weight"), E, kv_width, 1, true) &&
           model_bind_matrix(ld, &l->wo, NAME("attn_output.weight"), q_width, E, 1, true) &&
           model_bind_vector(ld, &l->q_norm, NAME("attn_q_norm.weight"), D, true) &&
           model_bind_vector(ld, &l->k_norm, NAME("attn_k_norm.weight"), D, true);
}

bool qwen35_bind_attention(model_loader *ld, uint32_t il)
{
    layer_weights *l = &ld->model->layers[il];
    char name[GGUF_MAX_NAME_BYTES + 1];
    size_t name_size = sizeof name;
    return model_bind_vector(ld, &l->attn_norm, NAME("attn_norm.weight"), ld->model->hp.n_embd,
                             true) &&
           (l->recurrent ? bind_recurrent(ld, il, name, name_size)
                         : bind_gated_attention(ld, il, name, name_size));
#undef NAME
}

/* Layer il's gated attention over ctx->xn into ctx->xn. The q projection (per token 2 *
 * n_head * head_dim) goes to ctx->gate, which the FFN uses only after the attention and the
 * context makes wide enough for it; its q halves move to ctx->q, its gates stay for the end. */
static void gated_attention(corral_context *ctx, uint32_t il)
{
    const hparams *hp = &ctx->model->hp;
    const layer_weights *l = &ctx->model->layers[il];
    size_t n = ctx->n_tokens, D = hp->head_dim_k, H = hp->n_head;
    float *q_gate = ctx->gate;
    const matrix_product qkv[] = {forward_layer_product(ctx, il, LM_WQ, &l->wq, q_gate),
                                  forward_layer_product(ctx, il, LM_WK, &l->wk, ctx->k),
                                  forward_layer_product(ctx, il, LM_WV, &l->wv, ctx->v)};
    forward_matmul(ctx, qkv, 3, ctx->xn, n);
    for (size_t t = 0; t < n; t++) {
        float *q = ctx->q + t * H * D, *k = ctx->k + t * hp->n_head_kv * D;
        const float *cs = ctx->rope_cs[0] + t * hp->n_rot;
        for (size_t h = 0; h < H; h++) {
            memcpy(q + h * D, q_gate + (t * H + h) * 2 * D, D * sizeof *q);
            block_rmsnorm(q + h * D, l->q_norm.data, D, hp->norm_eps, q + h * D);
        }
        for (size_t h = 0; h < hp->n_head_kv; h++)
            block_rmsnorm(k + h * D, l->k_norm.data, D, hp->norm_eps, k + h * D);
        rope_apply(&ctx->rope[0], cs, q, H, D);
        rope_apply(&ctx->rope[0], cs, k, hp->n_head_kv, D);
    }
    forward_attend(ctx, il);
    for (size_t t = 0; t < n; t++)
        for (size_t h = 0; h < H; h++) {
            float *out = ctx->attn + (t * H + h) * D;
            const float *gate = q_gate + (t * H + h) * 2 * D + D;
            for (size_t j = 0; j < D; j++)
                out[j] *= 1.0f / (1.0f + expf(-gate[j]));
        }
    const matrix_product wo = forward_layer_product(ctx, il, LM_WO, &l->wo, ctx->xn);
    forward_matmul(ctx, &wo, 1, ctx->attn, n);
}

/* x += mixer(norm(x)); x += ffn(norm(x)), the mixer a Gated DeltaNet or gated attention. */
void qwen35_layer(corral_context *ctx, uint32_t il)
{
    layer_pre_norm_hybrid(ctx, il, forward_delta_net, gated_attention);
}

const model_arch arch_qwen35 = {
    .name = "qwen35",
    .rope = ROPE_NEOX,
    .ffn = FFN_SWIGLU,
    .tensors = ARCH_FFN_NORM_POST_ATTN | ARCH_KV_HEADS_PER_LAYER,
    .read_hparams = qwen35_hparams,
    .layer = qwen35_layer,
    .bind_attention = qwen35_bind_attention,
};
