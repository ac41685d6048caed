/*
 * The Hugging Face checkpoint of a GGUF fixture (see hf_fixture.h), written with jansson and
 * plain stdio, independently of src/convert.
 */
#include "hf_fixture.h"

#include <jansson.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cmocka.h>

#include "gguf.h"
#include "quant_half.h"
#include "store_fixture.h"
#include "tensor_type.h"
#include "util/base64.h"

const char hf_fixture_qwen2_regex[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+"
    "[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

/* GGUF block tensor names and Hugging Face's */
static const char *const block_names[][2] = {
    {"attn_norm", "input_layernorm"},     {"attn_q_norm", "self_attn.q_norm"},
    {"attn_k_norm", "self_attn.k_norm"},  {"attn_q", "self_attn.q_proj"},
    {"attn_k", "self_attn.k_proj"},       {"attn_v", "self_attn.v_proj"},
    {"attn_output", "self_attn.o_proj"},  {"ffn_norm", "post_attention_layernorm"},
    {"ffn_gate", "mlp.gate_proj"},        {"ffn_up", "mlp.up_proj"},
    {"ffn_down", "mlp.down_proj"}, {"attn_qkv", "self_attn.qkv_proj"},
    {"ffn_gate_inp", "mlp.gate"},
    /* DeepSeek-V2's latent attention and shared experts (DeepSeek V3's, GLM-4 MoE Lite's) */
    {"attn_q_a", "self_attn.q_a_proj"}, {"attn_q_a_norm", "self_attn.q_a_layernorm"},
    {"attn_q_b", "self_attn.q_b_proj"}, {"attn_kv_a_mqa", "self_attn.kv_a_proj_with_mqa"},
    {"attn_kv_a_norm", "self_attn.kv_a_layernorm"},
    {"ffn_gate_shexp", "mlp.shared_experts.gate_proj"},
    {"ffn_up_shexp", "mlp.shared_experts.up_proj"},
    {"ffn_down_shexp", "mlp.shared_experts.down_proj"},
};

/* gpt-oss's names that differ from the others' (its sinks have no ".weight") */
static const char *const gptoss_names[][2] = {
    {"attn_sinks", "self_attn.sinks"},
    {"post_attention_norm", "post_attention_layernorm"},
    {"ffn_gate_inp", "mlp.router"},
};

/* Phi-3's up is gate and up together */
static const char *const phi3_names[][2] = {{"ffn_up", "mlp.gate_up_proj"}};

/* gemma2's and gemma3's norms around attention and the FFN */
static const char *const sandwich_names[][2] = {
    {"post_attention_norm", "post_attention_layernorm"},
    {"ffn_norm", "pre_feedforward_layernorm"},
    {"post_ffw_norm", "post_feedforward_layernorm"},
};

/* StarCoder2's two-layer FFN */
static const char *const starcoder2_names[][2] = {{"ffn_up", "mlp.c_fc"},
                                                  {"ffn_down", "mlp.c_proj"}};

static void hf_name(const char *gguf, bool sandwich, bool phi3, bool mixtral, bool gptoss,
                    bool starcoder2, char *out, size_t cap)
{
    if (strcmp(gguf, "token_embd.weight") == 0) {
        snprintf(out, cap, "model.embed_tokens.weight");
        return;
    }
    if (strncmp(gguf, "output_norm.", 12) == 0) {
        snprintf(out, cap, "model.norm.%s", gguf + 12);
        return;
    }
    if (strcmp(gguf, "output.weight") == 0) {
        snprintf(out, cap, "lm_head.weight");
        return;
    }
    unsigned layer;
    char part[64], kind[16];
    if (sscanf(gguf, "blk.%u.%63[a-z_].%15s", &layer, part, kind) != 3)
        fail_msg("no Hugging Face name for %s", gguf);
    if (strcmp(part, "exp_probs_b") == 0) { /* DeepSeek V3's selection bias */
        snprintf(out, cap, "model.layers.%u.mlp.gate.e_score_correction_bias", layer);
        return;
    }
    if (mixtral && strcmp(part, "ffn_gate_inp") == 0) {
        snprintf(out, cap, "model.layers.%u.block_sparse_moe.gate.%s", layer, kind);
        return;
    }
    for (size_t i = 0; gptoss && i < sizeof gptoss_names / sizeof gptoss_names[0]; i++)
        if (strcmp(part, gptoss_names[i][0]) == 0) {
            if (i == 0)
                snprintf(out, cap, "model.layers.%u.%s", layer, gptoss_names[i][1]);
            else
                snprintf(out, cap, "model.layers.%u.%s.%s", layer, gptoss_names[i][1], kind);
            return;
        }
    for (size_t i = 0; starcoder2 && i < 2; i++)
        if (strcmp(part, starcoder2_names[i][0]) == 0) {
            snprintf(out, cap, "model.layers.%u.%s.%s", layer, starcoder2_names[i][1], kind);
            return;
        }
    if (phi3 && strcmp(part, phi3_names[0][0]) == 0) {
        snprintf(out, cap, "model.layers.%u.%s.%s", layer, phi3_names[0][1], kind);
        return;
    }
    for (size_t i = 0; sandwich && i < sizeof sandwich_names / sizeof sandwich_names[0]; i++)
        if (strcmp(part, sandwich_names[i][0]) == 0) {
            snprintf(out, cap, "model.layers.%u.%s.%s", layer, sandwich_names[i][1], kind);
            return;
        }
    for (size_t i = 0; i < sizeof block_names / sizeof block_names[0]; i++)
        if (strcmp(part, block_names[i][0]) == 0) {
            snprintf(out, cap, "model.layers.%u.%s.%s", layer, block_names[i][1], kind);
            return;
        }
    fail_msg("no Hugging Face name for %s", gguf);
}

/* The Hugging Face name of GGUF tensor gguf, into out: after the first piece of a row of
 * whole (n_whole pairs) that begins it, that row's other piece and the rest; else, for
 * "blk.L." and a part of parts (n_parts pairs) after it, layers, ".L." and the part's
 * Hugging Face piece. With kind_apart, a part stands before the last ".weight" or ".bias",
 * which follows the Hugging Face piece too. */
static void table_hf_name(const char *gguf, const char *const (*whole)[2], size_t n_whole,
                          const char *const (*parts)[2], size_t n_parts, const char *layers,
                          bool kind_apart, char *out, size_t cap)
{
    for (size_t i = 0; i < n_whole; i++)
        if (!strncmp(gguf, whole[i][0], strlen(whole[i][0]))) {
            snprintf(out, cap, "%s%s", whole[i][1], gguf + strlen(whole[i][0]));
            return;
        }
    unsigned layer;
    int used = 0;
    char part[64], kind[16] = "";
    bool ok = kind_apart ? sscanf(gguf, "blk.%u.%63[a-z_].%15s", &layer, part, kind) == 3
                         : sscanf(gguf, "blk.%u.%n", &layer, &used) == 1 && used > 0;
    if (!ok)
        fail_msg("no Hugging Face name for %s", gguf);
    const char *rest = kind_apart ? part : gguf + used;
    for (size_t i = 0; i < n_parts; i++)
        if (!strcmp(rest, parts[i][0])) {
            snprintf(out, cap, "%s.%u.%s%s%s", layers, layer, parts[i][1], kind_apart ? "." : "",
                     kind);
            return;
        }
    fail_msg("no Hugging Face name for %s", gguf);
}

/* LFM2's block tensors, GGUF's name after "blk.L." and Hugging Face's after "model.layers.L." */
static const char *const lfm2_names[][2] = {
    {"attn_norm.weight", "operator_norm.weight"},
    {"ffn_norm.weight", "ffn_norm.weight"},
    {"attn_q.weight", "self_attn.q_proj.weight"},
    {"attn_k.weight", "self_attn.k_proj.weight"},
    {"attn_v.weight", "self_attn.v_proj.weight"},
    {"attn_output.weight", "self_attn.out_proj.weight"},
    {"attn_q_norm.weight", "self_attn.q_layernorm.weight"},
    {"attn_k_norm.weight", "self_attn.k_layernorm.weight"},
    {"shortconv.in_proj.weight", "conv.in_proj.weight"},
    {"shortconv.conv.weight", "conv.conv.weight"},
    {"shortconv.out_proj.weight", "conv.out_proj.weight"},
    {"ffn_gate.weight", "feed_forward.w1.weight"},
    {"ffn_down.weight", "feed_forward.w2.weight"},
    {"ffn_up.weight", "feed_forward.w3.weight"},
    {"ffn_gate_inp.weight", "feed_forward.gate.weight"},
    {"exp_probs_b.bias", "feed_forward.expert_bias"},
};

static void lfm2_hf_name(const char *gguf, char *out, size_t cap)
{
    static const char *const whole[][2] = {{"token_embd.weight", "model.embed_tokens.weight"},
                                           {"token_embd_norm.weight",
                                            "model.embedding_norm.weight"}};
    table_hf_name(gguf, whole, 2, lfm2_names, sizeof lfm2_names / sizeof lfm2_names[0],
                  "model.layers", false, out, cap);
}

/* Nemotron-H's tensors, GGUF's name after "blk.L." and Hugging Face's after
 * "backbone.layers.L." */
static const char *const nemotron_h_names[][2] = {
    {"attn_norm.weight", "norm.weight"},
    {"ssm_in.weight", "mixer.in_proj.weight"},
    {"ssm_out.weight", "mixer.out_proj.weight"},
    {"ssm_dt.bias", "mixer.dt_bias"},
    {"ssm_a", "mixer.A_log"},
    {"ssm_d", "mixer.D"},
    {"ssm_conv1d.weight", "mixer.conv1d.weight"},
    {"ssm_conv1d.bias", "mixer.conv1d.bias"},
    {"ssm_norm.weight", "mixer.norm.weight"},
    {"attn_q.weight", "mixer.q_proj.weight"},
    {"attn_k.weight", "mixer.k_proj.weight"},
    {"attn_v.weight", "mixer.v_proj.weight"},
    {"attn_output.weight", "mixer.o_proj.weight"},
    {"ffn_up.weight", "mixer.up_proj.weight"},
    {"ffn_down.weight", "mixer.down_proj.weight"},
    {"ffn_gate_inp.weight", "mixer.gate.weight"},
    {"exp_probs_b.bias", "mixer.gate.e_score_correction_bias"},
    {"ffn_up_shexp.weight", "mixer.shared_experts.up_proj.weight"},
    {"ffn_down_shexp.weight", "mixer.shared_experts.down_proj.weight"},
};

static void nemotron_h_hf_name(const char *gguf, char *out, size_t cap)
{
    static const char *const whole[][2] = {{"token_embd.weight", "backbone.embeddings.weight"},
                                           {"output_norm.weight", "backbone.norm_f.weight"},
                                           {"output.weight", "lm_head.weight"}};
    table_hf_name(gguf, whole, 3, nemotron_h_names,
                  sizeof nemotron_h_names / sizeof nemotron_h_names[0], "backbone.layers", false,
                  out, cap);
}

/* A "bert" model's GGUF names and BertModel's */
static const char *const bert_names[][2] = {
    {"token_embd.", "embeddings.word_embeddings."},
    {"token_types.", "embeddings.token_type_embeddings."},
    {"position_embd.", "embeddings.position_embeddings."},
    {"token_embd_norm.", "embeddings.LayerNorm."},
    {"attn_q", "attention.self.query"},
    {"attn_k", "attention.self.key"},
    {"attn_v", "attention.self.value"},
    {"attn_output", "attention.output.dense"},
    {"attn_output_norm", "attention.output.LayerNorm"},
    {"ffn_up", "intermediate.dense"},
    {"ffn_down", "output.dense"},
    {"layer_output_norm", "output.LayerNorm"},
};

/* A "nomic-bert" model's GGUF names and nomic's */
static const char *const nomic_names[][2] = {
    {"token_embd.", "embeddings.word_embeddings."},
    {"token_types.", "embeddings.token_type_embeddings."},
    {"token_embd_norm.", "emb_ln."},
    {"attn_qkv", "attn.Wqkv"},
    {"attn_output", "attn.out_proj"},
    {"attn_output_norm", "norm1"},
    {"layer_output_norm", "norm2"},
    {"ffn_up", "mlp.fc11"},
    {"ffn_gate", "mlp.fc12"},
    {"ffn_down", "mlp.fc2"},
};

/* A "nomic-bert-moe" model's (nomic-embed-text v2's): a GELU FFN and, in its expert layers,
 * a router */
static const char *const nomic_moe_names[][2] = {
    {"token_embd.", "embeddings.word_embeddings."},
    {"token_types.", "embeddings.token_type_embeddings."},
    {"token_embd_norm.", "emb_ln."},
    {"attn_qkv", "attn.Wqkv"},
    {"attn_output", "attn.out_proj"},
    {"attn_output_norm", "norm1"},
    {"layer_output_norm", "norm2"},
    {"ffn_up", "mlp.fc1"},
    {"ffn_down", "mlp.fc2"},
    {"ffn_gate_inp", "mlp.router.layer"},
};

static void nomic_hf_name(const char *gguf, bool moe, char *out, size_t cap)
{
    const char *const(*names)[2] = moe ? nomic_moe_names : nomic_names;
    size_t n = moe ? sizeof nomic_moe_names / sizeof nomic_moe_names[0]
                   : sizeof nomic_names / sizeof nomic_names[0];
    table_hf_name(gguf, names, 3, names + 3, n - 3, "encoder.layers", true, out, cap);
}

static void bert_hf_name(const char *gguf, char *out, size_t cap)
{
    table_hf_name(gguf, bert_names, 4, bert_names + 4,
                  sizeof bert_names / sizeof bert_names[0] - 4, "encoder.layer", true, out, cap);
}

static uint32_t get_u32(const gguf_file *f, const char *key)
{
    uint32_t v = 0;
    corral_error err;
    if (!gguf_get_u32(f, key, &v, &err))
        fail_msg("%s", err.message);
    return v;
}

/* A count: the key's, or the largest of its per-layer list (LFM2's and Nemotron-H's key/value
 * heads and FFN widths, 0 where a layer has none). */
static uint32_t layer_max(const gguf_file *f, const char *key)
{
    const gguf_kv *kv = gguf_find_kv(f, key);
    assert_non_null(kv);
    int64_t most = 0;
    for (uint64_t i = 0; i < kv->n; i++)
        most = gguf_kv_i64(kv, i) > most ? gguf_kv_i64(kv, i) : most;
    return (uint32_t)most;
}

static void write_json(const char *dir, const char *name, json_t *value)
{
    char *text = json_dumps(value, JSON_INDENT(1) | JSON_REAL_PRECISION(17));
    assert_non_null(text);
    store_fixture_write(dir, name, text, strlen(text));
    free(text);
    json_decref(value);
}

/* A per-layer key's value at layer i (the key's one value when it is not a list). */
static int64_t at_layer(const gguf_kv *kv, uint32_t i)
{
    return gguf_kv_i64(kv, kv->type == GGUF_TYPE_ARRAY ? i : 0);
}

/*
 * Gemma 4's config.json from the generic one (c, consumed): the sliding layers' head width
 * as head_dim and the global ones' as global_head_dim, each kind's key/value heads, layer_types,
 * rope_parameters per kind (partial_rotary_factor from rope_freqs' rotated pairs), the shared
 * layers' FFN doubled, the experts enabled; under text_config for a
 * Gemma4ForConditionalGeneration.
 */
static json_t *gemma4_config(const gguf_file *f, json_t *c, const char *hf_arch)
{
    const gguf_kv *pattern = gguf_find_kv(f, "gemma4.attention.sliding_window_pattern");
    const gguf_kv *kv_heads = gguf_find_kv(f, "gemma4.attention.head_count_kv");
    const gguf_kv *ff = gguf_find_kv(f, "gemma4.feed_forward_length");
    const gguf_tensor *freqs = gguf_find_tensor(f, "rope_freqs.weight");
    assert_true(pattern && kv_heads && ff && freqs);
    uint32_t n_layer = get_u32(f, "gemma4.block_count"), global = 0, sliding = 0;
    uint32_t shared = get_u32(f, "gemma4.attention.shared_kv_layers");
    bool first_global = true, first_sliding = true, k_eq_v = false, double_wide = false;
    json_t *types = json_array();
    for (uint32_t i = 0; i < n_layer; i++) {
        bool slides = gguf_kv_bool(pattern, i);
        json_array_append_new(types, json_string(slides ? "sliding_attention"
                                                        : "full_attention"));
        if (slides && first_sliding)
            sliding = (uint32_t)at_layer(kv_heads, i), first_sliding = false;
        if (!slides && first_global)
            global = (uint32_t)at_layer(kv_heads, i), first_global = false;
        char name[64], qkv[64];
        snprintf(name, sizeof name, "blk.%u.attn_v.weight", i);
        snprintf(qkv, sizeof qkv, "blk.%u.attn_qkv.weight", i);
        if (!slides && i < n_layer - shared && !gguf_find_tensor(f, name) &&
            !gguf_find_tensor(f, qkv))
            k_eq_v = true;
        double_wide = double_wide || at_layer(ff, i) != at_layer(ff, 0);
    }
    uint32_t rotated = 0;
    for (uint64_t i = 0; i < gguf_tensor_n_elems(freqs); i++)
        rotated += ((const float *)freqs->data)[i] == 1.0f;
    uint32_t global_dim = get_u32(f, "gemma4.attention.key_length");
    float base, base_swa;
    corral_error err;
    assert_true(gguf_get_f32(f, "gemma4.rope.freq_base", &base, &err));
    assert_true(gguf_get_f32(f, "gemma4.rope.freq_base_swa", &base_swa, &err));
    json_t *more = json_pack(
        "{s:I,s:I,s:I,s:I,s:o,s:I,s:I,s:b,s:b,s:I,s:{s:{s:s,s:f,s:f},s:{s:s,s:f}}}", "head_dim",
        (json_int_t)get_u32(f, "gemma4.attention.key_length_swa"), "global_head_dim",
        (json_int_t)global_dim, "num_key_value_heads", (json_int_t)sliding,
        "num_global_key_value_heads", (json_int_t)global, "layer_types", types,
        "num_kv_shared_layers", (json_int_t)shared, "hidden_size_per_layer_input",
        (json_int_t)get_u32(f, "gemma4.embedding_length_per_layer_input"), "attention_k_eq_v",
        k_eq_v, "use_double_wide_mlp", double_wide, "intermediate_size",
        (json_int_t)at_layer(ff, 0), "rope_parameters", "full_attention", "rope_type",
        "proportional", "rope_theta", (double)base, "partial_rotary_factor",
        (double)(2.0f * (float)rotated / (float)global_dim), "sliding_attention", "rope_type",
        "default", "rope_theta", (double)base_swa);
    assert_non_null(more);
    json_object_update(c, more);
    json_decref(more);
    json_object_del(c, "rope_theta");
    if (gguf_find_kv(f, "gemma4.expert_count")) { /* the experts beside the dense FFN */
        json_object_set_new(c, "enable_moe_block", json_true());
        json_object_set(c, "top_k_experts", json_object_get(c, "num_experts_per_tok"));
        json_object_del(c, "num_experts_per_tok");
    }
    if (strstr(hf_arch, "ForCausalLM"))
        return c;
    json_t *arches = json_incref(json_object_get(c, "architectures"));
    json_object_del(c, "architectures");
    return json_pack("{s:o,s:o}", "architectures", arches, "text_config", c);
}

/*
 * Laguna's config.json keys over the generic ones in c: query heads per layer, layer_types
 * (llama.cpp's default period: every fourth layer global), per-head gating, the dense first
 * layer, the router's settings, and rope_parameters per kind of layer (YaRN on the global
 * ones, partial_rotary_factor from each kind's rotated dimensions).
 */
static void laguna_config(const gguf_file *f, json_t *c)
{
    const gguf_kv *heads = gguf_find_kv(f, "laguna.attention.head_count");
    uint32_t n_layer = get_u32(f, "laguna.block_count"), dim = get_u32(f,
                                                                     "laguna.attention.key_length");
    json_t *per_layer = json_array(), *types = json_array();
    for (uint32_t i = 0; i < n_layer; i++) {
        json_array_append_new(per_layer, json_integer(at_layer(heads, i)));
        json_array_append_new(types, json_string(i % 4 ? "sliding_attention" : "full_attention"));
    }
    gguf_str type = gguf_kv_str(gguf_find_kv(f, "laguna.rope.scaling.type"), 0);
    float base, base_swa, factor, scale;
    corral_error err;
    assert_true(gguf_get_f32(f, "laguna.rope.freq_base", &base, &err));
    assert_true(gguf_get_f32(f, "laguna.rope.freq_base_swa", &base_swa, &err));
    assert_true(gguf_get_f32(f, "laguna.rope.scaling.factor", &factor, &err));
    assert_true(gguf_get_f32(f, "laguna.expert_weights_scale", &scale, &err));
    json_t *more = json_pack(
        "{s:o,s:o,s:s,s:s,s:[i],s:b,s:f,s:b,s:{s:{s:s%,s:f,s:f,s:I,s:f},s:{s:s,s:f,s:f}}}",
        "num_attention_heads_per_layer", per_layer, "layer_types", types, "gating", "per-head",
        "qk_norm_type", "rmsnorm", "mlp_only_layers", 0, "norm_topk_prob",
        gguf_kv_bool(gguf_find_kv(f, "laguna.expert_weights_norm"), 0),
        "moe_routed_scaling_factor", (double)scale, "moe_router_use_sigmoid", true,
        "rope_parameters", "full_attention", "rope_type",
        type.data, type.size, "rope_theta",
        (double)base, "factor", (double)factor, "original_max_position_embeddings",
        (json_int_t)get_u32(f, "laguna.rope.scaling.original_context_length"),
        "partial_rotary_factor", (double)get_u32(f, "laguna.rope.dimension_count") / dim,
        "sliding_attention", "rope_type", "default", "rope_theta", (double)base_swa,
        "partial_rotary_factor", (double)get_u32(f, "laguna.rope.dimension_count_swa") / dim);
    assert_non_null(more);
    json_object_update(c, more);
    json_decref(more);
    json_object_del(c, "rope_theta");
    json_object_del(c, "rope_scaling");
}

static void write_config(const gguf_file *f, const char *dir, const char *hf_arch)
{
    gguf_str arch;
    corral_error err;
    assert_true(gguf_get_str(f, "general.architecture", &arch, &err));
    char a[32], key[96];
    snprintf(a, sizeof a, "%.*s", (int)arch.size, arch.data);
#define K(suffix) (snprintf(key, sizeof key, "%s." suffix, a), key)
    /* one width, or (Gemma 3n's) one per layer */
    const gguf_kv *ff = gguf_find_kv(f, K("feed_forward_length"));
    assert_non_null(ff);
    json_t *widths = json_array();
    for (uint64_t i = 0; ff->type == GGUF_TYPE_ARRAY && i < ff->n; i++)
        json_array_append_new(widths, json_integer(gguf_kv_i64(ff, i)));
    json_t *c = json_pack("{s:[s],s:I,s:I,s:o,s:I,s:I,s:I,s:I}", "architectures", hf_arch,
                          "num_hidden_layers", (json_int_t)get_u32(f, K("block_count")),
                          "hidden_size", (json_int_t)get_u32(f, K("embedding_length")),
                          "intermediate_size",
                          ff->type == GGUF_TYPE_ARRAY && !strcmp(a, "gemma3n")
                              ? widths
                              : (json_decref(widths),
                                 json_integer((json_int_t)layer_max(f, K("feed_forward_length")))),
                          "num_attention_heads",
                          (json_int_t)layer_max(f, K("attention.head_count")),
                          "num_key_value_heads",
                          (json_int_t)layer_max(f, K("attention.head_count_kv")),
                          "max_position_embeddings", (json_int_t)get_u32(f, K("context_length")),
                          "vocab_size",
                          (json_int_t)gguf_find_kv(f, "tokenizer.ggml.tokens")->n);
    float theta = 0, eps;
    if (gguf_find_kv(f, K("rope.freq_base"))) { /* BERT's positions are learned */
        assert_true(gguf_get_f32(f, K("rope.freq_base"), &theta, &err));
        json_object_set_new(c, "rope_theta", json_real(theta));
    }
    if (gguf_find_kv(f, K("attention.layer_norm_rms_epsilon"))) {
        assert_true(gguf_get_f32(f, K("attention.layer_norm_rms_epsilon"), &eps, &err));
        json_object_set_new(c, "rms_norm_eps", json_real(eps));
    }
    if (gguf_find_kv(f, K("attention.layer_norm_epsilon"))) { /* LayerNorm's */
        assert_true(gguf_get_f32(f, K("attention.layer_norm_epsilon"), &eps, &err));
        json_object_set_new(c, strcmp(a, "starcoder2") ? "layer_norm_eps" : "norm_epsilon",
                            json_real(eps));
    }
    if (gguf_find_kv(f, K("attention.key_length")))
        json_object_set_new(c, "head_dim", json_integer(get_u32(f, K("attention.key_length"))));
    json_object_set_new(c, "torch_dtype", json_string("bfloat16"));
    bool mixtral = strcmp(a, "llama") == 0, gptoss = strcmp(a, "gpt-oss") == 0;
    const char *const gemma_keys[][2] = {
        {"expert_used_count", "num_experts_per_tok"},
        {"expert_feed_forward_length", "moe_intermediate_size"},
        {"expert_shared_feed_forward_length", "shared_expert_intermediate_size"},
        {"rope.scaling.original_context_length", "original_max_position_embeddings"},
        {"attention.sliding_window", "sliding_window"},
        {"attn_logit_softcapping", "attn_logit_softcapping"},
        {"final_logit_softcapping", "final_logit_softcapping"},
        {"embedding_scale", "embedding_multiplier"}, /* Granite's */
        {"residual_scale", "residual_multiplier"},
        {"attention.scale", "attention_multiplier"},
        {"logit_scale", strcmp(a, "granite") ? "logit_scale" : "logits_scaling"},
        {"interleave_moe_layer_step", "interleave_moe_layer_step"}, /* Llama 4's */
        {"rope.freq_base_swa", "rope_local_base_freq"}, /* EmbeddingGemma's */
    };
    for (size_t i = 0; i < sizeof gemma_keys / sizeof gemma_keys[0]; i++) {
        snprintf(key, sizeof key, "%s.%s", a, gemma_keys[i][0]);
        const gguf_kv *kv = gguf_find_kv(f, key);
        if (kv)
            json_object_set_new(c, gemma_keys[i][1],
                                kv->type == GGUF_TYPE_FLOAT32 ? json_real(gguf_kv_f32(kv, 0))
                                                              : json_integer(gguf_kv_i64(kv, 0)));
    }
    snprintf(key, sizeof key, "%s.expert_count", a);
    if (gguf_find_kv(f, key))
        json_object_set_new(c, mixtral || gptoss || !strcmp(a, "llama4") ? "num_local_experts"
                                                                          : "num_experts",
                            json_integer(get_u32(f, key)));
    if (gptoss) /* its one intermediate_size is every expert's width */
        json_object_set_new(c, "intermediate_size",
                            json_integer(get_u32(f, K("expert_feed_forward_length"))));
    const gguf_kv *rope_type = gguf_find_kv(f, K("rope.scaling.type"));
    if (rope_type && gguf_kv_str(rope_type, 0).size == 4 &&
        memcmp(gguf_kv_str(rope_type, 0).data, "none", 4) == 0)
        rope_type = NULL; /* Command R's: its config has no rope_scaling */
    if (rope_type) {
        float factor, attn_factor;
        assert_true(gguf_get_f32(f, K("rope.scaling.factor"), &factor, &err));
        json_t *scaling =
            json_pack("{s:s%,s:f,s:I}", "rope_type", gguf_kv_str(rope_type, 0).data,
                      gguf_kv_str(rope_type, 0).size, "factor", (double)factor,
                      "original_max_position_embeddings",
                      (json_int_t)get_u32(f, K("rope.scaling.original_context_length")));
        if (gguf_find_kv(f, K("rope.scaling.attn_factor"))) {
            assert_true(gguf_get_f32(f, K("rope.scaling.attn_factor"), &attn_factor, &err));
            json_object_set_new(scaling, "attention_factor", json_real(attn_factor));
        }
        json_object_set_new(c, "rope_scaling", scaling);
    }
    const gguf_kv *pattern = gguf_find_kv(f, K("attention.sliding_window_pattern"));
    if (pattern && (strcmp(a, "olmo2") == 0 || strcmp(a, "gemma3n") == 0)) { /* sliding layers */
        json_t *types = json_array();
        for (uint64_t i = 0; i < pattern->n; i++)
            json_array_append_new(types, json_string(gguf_kv_bool(pattern, i)
                                                         ? "sliding_attention"
                                                         : "full_attention"));
        json_object_set_new(c, "layer_types", types);
    }
    if (strcmp(a, "command-r") == 0 && gguf_find_tensor(f, "blk.0.attn_q_norm.weight"))
        json_object_set_new(c, "use_qk_norm", json_true()); /* Command R+'s */
    if (strncmp(a, "lfm2", 4) == 0) { /* LFM2's own names, its convolution layers by type */
        json_object_set(c, "norm_eps", json_object_get(c, "rms_norm_eps"));
        json_object_del(c, "rms_norm_eps");
        json_object_set_new(c, "conv_L_cache", json_integer(get_u32(f, K("shortconv.l_cache"))));
        const gguf_kv *per_layer = gguf_find_kv(f, K("attention.head_count_kv"));
        json_t *types = json_array();
        for (uint64_t i = 0; i < per_layer->n; i++)
            json_array_append_new(types, json_string(gguf_kv_i64(per_layer, i)
                                                         ? "full_attention"
                                                         : "conv"));
        json_object_set_new(c, "layer_types", types);
        if (gguf_find_kv(f, K("leading_dense_block_count")))
            json_object_set_new(c, "num_dense_layers",
                                json_integer(get_u32(f, K("leading_dense_block_count"))));
    }
    if (strncmp(a, "nemotron_h", 10) == 0) { /* its layers' kinds and Mamba2 sizes */
        const gguf_kv *kv_heads = gguf_find_kv(f, K("attention.head_count_kv"));
        const gguf_kv *ffn = gguf_find_kv(f, K("feed_forward_length"));
        bool moe = gguf_find_kv(f, K("expert_count")) != NULL;
        char pattern[256] = {0};
        for (uint64_t i = 0; i < kv_heads->n && i + 1 < sizeof pattern; i++)
            pattern[i] = gguf_kv_i64(kv_heads, i) ? '*'
                         : gguf_kv_i64(ffn, i)    ? (moe ? 'E' : '-')
                                                  : 'M';
        uint32_t heads = get_u32(f, K("ssm.time_step_rank"));
        json_object_set_new(c, "hybrid_override_pattern", json_string(pattern));
        json_object_set_new(c, "conv_kernel", json_integer(get_u32(f, K("ssm.conv_kernel"))));
        json_object_set_new(c, "ssm_state_size", json_integer(get_u32(f, K("ssm.state_size"))));
        json_object_set_new(c, "n_groups", json_integer(get_u32(f, K("ssm.group_count"))));
        json_object_set_new(c, "mamba_num_heads", json_integer(heads));
        json_object_set_new(c, "mamba_head_dim",
                            json_integer(get_u32(f, K("ssm.inner_size")) / heads));
        json_object_set(c, "norm_eps", json_object_get(c, "rms_norm_eps"));
        json_object_del(c, "rms_norm_eps");
        const gguf_kv *norm = gguf_find_kv(f, K("expert_weights_norm"));
        const gguf_kv *scale = gguf_find_kv(f, K("expert_weights_scale"));
        if (norm)
            json_object_set_new(c, "norm_topk_prob", json_boolean(gguf_kv_bool(norm, 0)));
        if (scale)
            json_object_set_new(c, "routed_scaling_factor", json_real(gguf_kv_f32(scale, 0)));
        json_t *shared = json_object_get(c, "shared_expert_intermediate_size");
        if (shared) {
            json_object_set(c, "moe_shared_expert_intermediate_size", shared);
            json_object_del(c, "shared_expert_intermediate_size");
        }
    }
    if (strcmp(a, "deepseek2") == 0) { /* its latent attention and experts */
        uint32_t rope = get_u32(f, K("rope.dimension_count"));
        static const char *const keys[][2] = {
            {"attention.q_lora_rank", "q_lora_rank"},
            {"attention.kv_lora_rank", "kv_lora_rank"},
            {"attention.value_length_mla", "v_head_dim"},
            {"expert_shared_count", "n_shared_experts"},
            {"leading_dense_block_count", "first_k_dense_replace"},
            {"expert_group_count", "n_group"},
            {"expert_group_used_count", "topk_group"},
        };
        for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
            snprintf(key, sizeof key, "%s.%s", a, keys[i][0]);
            json_object_set_new(c, keys[i][1], json_integer(get_u32(f, key)));
        }
        json_object_set_new(c, "qk_rope_head_dim", json_integer(rope));
        json_object_set_new(c, "qk_nope_head_dim",
                            json_integer(get_u32(f, K("attention.key_length_mla")) - rope));
        json_object_set_new(c, "norm_topk_prob",
                            json_boolean(gguf_kv_bool(gguf_find_kv(f, K("expert_weights_norm")),
                                                      0)));
        json_object_set_new(c, "routed_scaling_factor",
                            json_real(gguf_kv_f32(gguf_find_kv(f, K("expert_weights_scale")),
                                                  0)));
        json_object_set(c, "n_routed_experts", json_object_get(c, "num_experts"));
        json_object_del(c, "num_experts");
        json_object_del(c, "head_dim");
        if (strcmp(hf_arch, "DeepseekV3ForCausalLM") == 0) { /* its scoring and YaRN */
            float log_mul;
            assert_true(gguf_get_f32(f, K("rope.scaling.yarn_log_multiplier"), &log_mul, &err));
            assert_int_equal(get_u32(f, K("expert_gating_func")), 2);
            json_object_set_new(c, "scoring_func", json_string("sigmoid"));
            json_t *scaling = json_object_get(c, "rope_scaling");
            assert_non_null(scaling);
            json_object_set_new(scaling, "mscale_all_dim", json_real(log_mul / 0.1f));
            json_object_set_new(scaling, "mscale", json_real(log_mul / 0.1f));
        } else {
            json_object_del(c, "rope_scaling"); /* GLM's RoPE is not scaled */
        }
    }
    if (strcmp(a, "nomic-bert-moe") == 0) { /* nomic-embed-text v2's experts, GELU, one type */
        json_object_set(c, "moe_top_k", json_object_get(c, "num_experts_per_tok"));
        json_object_del(c, "num_experts_per_tok");
        json_object_set_new(c, "moe_every_n_layers",
                            json_integer(get_u32(f, K("moe_every_n_layers"))));
        json_object_set_new(c, "type_vocab_size",
                            json_integer(get_u32(f, "tokenizer.ggml.token_type_count")));
        json_object_set_new(c, "activation_function", json_string("gelu"));
        json_object_set_new(c, "moe_normalize_expert_weights", json_false());
        json_object_set_new(c, "prenorm", json_false());
    }
    if (strncmp(a, "nomic-bert", 10) == 0) { /* nomic's config names its sizes as GPT-2 does */
        static const char *const gpt2[][2] = {
            {"num_hidden_layers", "n_layer"},       {"hidden_size", "n_embd"},
            {"intermediate_size", "n_inner"},       {"num_attention_heads", "n_head"},
            {"max_position_embeddings", "n_positions"},
            {"layer_norm_eps", "layer_norm_epsilon"}, {"rope_theta", "rotary_emb_base"},
        };
        for (size_t i = 0; i < sizeof gpt2 / sizeof gpt2[0]; i++) {
            json_object_set(c, gpt2[i][1], json_object_get(c, gpt2[i][0]));
            json_object_del(c, gpt2[i][0]);
        }
        json_object_del(c, "num_key_value_heads");
    }
    if (strcmp(hf_arch, "Ministral3ForCausalLM") == 0) { /* its RoPE all in rope_parameters */
        json_t *rope = json_object_get(c, "rope_scaling");
        rope = rope ? json_incref(rope) : json_object();
        json_object_del(c, "rope_scaling");
        json_object_set(rope, "rope_theta", json_object_get(c, "rope_theta"));
        json_object_del(c, "rope_theta");
        static const char *const extra[][2] = {
            {"rope.scaling.yarn_beta_fast", "beta_fast"},
            {"rope.scaling.yarn_beta_slow", "beta_slow"},
            {"rope.scaling.yarn_log_multiplier", "mscale_all_dim"},
            {"attention.temperature_scale", "llama_4_scaling_beta"},
        };
        for (size_t i = 0; i < sizeof extra / sizeof extra[0]; i++) {
            snprintf(key, sizeof key, "%s.%s", a, extra[i][0]);
            if (gguf_find_kv(f, key))
                json_object_set_new(rope, extra[i][1],
                                    json_real(gguf_kv_f32(gguf_find_kv(f, key), 0)));
        }
        json_object_set_new(c, "rope_parameters", rope);
    }
    if (strcmp(a, "gemma3n") == 0) { /* its AltUp, per-layer inputs, local base, sparsity */
        const gguf_kv *scales = gguf_find_kv(f, K("activation_sparsity_scale"));
        float local;
        assert_non_null(scales);
        assert_true(gguf_get_f32(f, K("rope.freq_base_swa"), &local, &err));
        json_t *sparsity = json_array();
        for (uint64_t i = 0; i < scales->n; i++) /* the normal CDF of each layer's scale */
            json_array_append_new(sparsity,
                                  json_real(0.5 * erfc(-(double)gguf_kv_f32(scales, i) /
                                                       sqrt(2.0))));
        json_t *more = json_pack(
            "{s:I,s:I,s:I,s:I,s:f,s:f,s:b,s:f,s:o}", "altup_num_inputs",
            (json_int_t)get_u32(f, K("altup.num_inputs")), "altup_active_idx",
            (json_int_t)get_u32(f, K("altup.active_idx")), "hidden_size_per_layer_input",
            (json_int_t)get_u32(f, K("embedding_length_per_layer_input")),
            "num_kv_shared_layers", (json_int_t)get_u32(f, K("attention.shared_kv_layers")),
            "rope_local_base_freq", (double)local, "altup_coef_clip", 120.0,
            "altup_correct_scale", true, "altup_lr_multiplier", 1.0,
            "activation_sparsity_pattern", sparsity);
        json_object_update(c, more);
        json_decref(more);
        json_t *arches = json_incref(json_object_get(c, "architectures"));
        json_object_del(c, "architectures");
        c = json_pack("{s:o,s:o,s:{},s:{}}", "architectures", arches, "text_config", c,
                      "vision_config", "audio_config");
    }
    if (strcmp(a, "qwen3next") == 0) /* plain NeoX RoPE on part of each head */
        json_object_set_new(c, "partial_rotary_factor",
                            json_real((double)get_u32(f, K("rope.dimension_count")) /
                                      get_u32(f, K("attention.key_length"))));
    if (strncmp(a, "qwen35", 6) == 0 || strcmp(a, "qwen3next") == 0) {
        uint32_t v_heads = get_u32(f, K("ssm.time_step_rank"));
        json_object_set_new(c, "linear_conv_kernel_dim",
                            json_integer(get_u32(f, K("ssm.conv_kernel"))));
        json_object_set_new(c, "linear_key_head_dim",
                            json_integer(get_u32(f, K("ssm.state_size"))));
        json_object_set_new(c, "linear_num_key_heads",
                            json_integer(get_u32(f, K("ssm.group_count"))));
        json_object_set_new(c, "linear_num_value_heads", json_integer(v_heads));
        json_object_set_new(c, "linear_value_head_dim",
                            json_integer(get_u32(f, K("ssm.inner_size")) / v_heads));
        json_object_set_new(c, "full_attention_interval",
                            json_integer(get_u32(f, K("full_attention_interval"))));
    }
    /* rope_parameters holds RoPE; text_config the model, but in a ...ForCausalLM's */
    if (strncmp(a, "qwen35", 6) == 0) {
        uint32_t rope_dims = get_u32(f, K("rope.dimension_count"));
        const gguf_kv *sections = gguf_find_kv(f, K("rope.dimension_sections"));
        assert_non_null(sections);
        json_t *mrope = json_array();
        for (uint64_t i = 0; i < 3; i++) /* the checkpoint lists three */
            json_array_append_new(mrope, json_integer(gguf_kv_i64(sections, i)));
        json_object_set_new(c, "rope_parameters",
                            json_pack("{s:s,s:f,s:f,s:o,s:b}", "rope_type", "default",
                                      "rope_theta", (double)theta, "partial_rotary_factor",
                                      (double)rope_dims / get_u32(f, K("attention.key_length")),
                                      "mrope_section", mrope, "mrope_interleaved", true));
        json_object_del(c, "rope_theta");
        if (!strstr(hf_arch, "ForCausalLM")) {
            json_t *arches = json_incref(json_object_get(c, "architectures"));
            json_object_del(c, "architectures");
            c = json_pack("{s:o,s:o,s:{s:I}}", "architectures", arches, "text_config", c,
                          "vision_config", "depth", (json_int_t)1);
        }
    }
    if (strcmp(a, "gemma4") == 0)
        c = gemma4_config(f, c, hf_arch);
    if (strcmp(a, "laguna") == 0)
        laguna_config(f, c);
#undef K
    /* Phi-3's LongRoPE factors */
    const gguf_tensor *factors[2] = {gguf_find_tensor(f, "rope_factors_long.weight"),
                                     gguf_find_tensor(f, "rope_factors_short.weight")};
    if (factors[0] && factors[1]) {
        json_t *lists[2] = {json_array(), json_array()};
        for (int k = 0; k < 2; k++)
            for (uint64_t i = 0; i < gguf_tensor_n_elems(factors[k]); i++)
                json_array_append_new(lists[k], json_real(((const float *)factors[k]->data)[i]));
        json_object_set_new(c, "rope_scaling", json_pack("{s:s,s:o,s:o}", "type", "longrope",
                                                         "long_factor", lists[0], "short_factor",
                                                         lists[1]));
    }
    write_json(dir, "config.json", c);
}

static json_t *token_text(const gguf_kv *tokens, uint32_t id)
{
    gguf_str s = gguf_kv_str(tokens, id);
    return json_stringn(s.data, s.size);
}

/* ---- SentencePiece's tokenizer.model: protobuf, written by hand ---- */

typedef struct bytes {
    uint8_t *data;
    size_t len, cap;
} bytes;

static void put(bytes *b, const void *data, size_t n)
{
    if (b->len + n > b->cap) {
        b->cap = (b->len + n) * 2;
        b->data = realloc(b->data, b->cap);
        assert_non_null(b->data);
    }
    memcpy(b->data + b->len, data, n);
    b->len += n;
}

static void put_varint(bytes *b, uint64_t v)
{
    do {
        uint8_t byte = (uint8_t)(v & 0x7f) | (v > 0x7f ? 0x80 : 0);
        put(b, &byte, 1);
        v >>= 7;
    } while (v);
}

/* ModelProto: a trainer_spec (field 2, skipped by readers of the pieces), then one
 * SentencePiece (field 1: piece 1, score 2, type 3) per token. */
static void write_spm(const gguf_file *f, const char *dir)
{
    const gguf_kv *tokens = gguf_find_kv(f, "tokenizer.ggml.tokens");
    const gguf_kv *scores = gguf_find_kv(f, "tokenizer.ggml.scores");
    const gguf_kv *types = gguf_find_kv(f, "tokenizer.ggml.token_type");
    bytes out = {0};
    static const uint8_t trainer_spec[] = {0x12, 0x02, 0x18, 0x01};
    put(&out, trainer_spec, sizeof trainer_spec);
    for (uint64_t id = 0; id < tokens->n; id++) {
        bytes piece = {0};
        gguf_str text = gguf_kv_str(tokens, id);
        put_varint(&piece, 0x0a);
        put_varint(&piece, text.size);
        put(&piece, text.data, text.size);
        float score = gguf_kv_f32(scores, id);
        put_varint(&piece, 0x15);
        put(&piece, &score, 4);
        if (gguf_kv_i64(types, id) != 1) { /* NORMAL is the default */
            put_varint(&piece, 0x18);
            put_varint(&piece, (uint64_t)gguf_kv_i64(types, id));
        }
        put_varint(&out, 0x0a);
        put_varint(&out, piece.len);
        put(&out, piece.data, piece.len);
        free(piece.data);
    }
    store_fixture_write(dir, "tokenizer.model", out.data, out.len);
    free(out.data);
}

/*
 * A "bert" vocabulary as tokenizer.json's WordPiece: a word's first piece without its "▁", a
 * continuation with "##", bracketed tokens as they are (the special ones, [UNK] too, added
 * tokens); tokenizer_config.json names [CLS], [SEP], [MASK], [PAD] and [UNK] as a BERT's
 * does, and no bos or eos.
 */
static void write_wordpiece(const gguf_file *f, const char *dir)
{
    const gguf_kv *tokens = gguf_find_kv(f, "tokenizer.ggml.tokens");
    const gguf_kv *types = gguf_find_kv(f, "tokenizer.ggml.token_type");
    json_t *vocab = json_object(), *added = json_array();
    for (uint32_t id = 0; id < tokens->n; id++) {
        gguf_str t = gguf_kv_str(tokens, id);
        char text[512];
        if (t.size >= 3 && memcmp(t.data, "\xe2\x96\x81", 3) == 0)
            snprintf(text, sizeof text, "%.*s", (int)t.size - 3, t.data + 3);
        else if (t.size >= 2 && t.data[0] == '[' && t.data[t.size - 1] == ']')
            snprintf(text, sizeof text, "%.*s", (int)t.size, t.data);
        else
            snprintf(text, sizeof text, "##%.*s", (int)t.size, t.data);
        json_object_set_new(vocab, text, json_integer(id));
        int64_t type = gguf_kv_i64(types, id);
        if (type == 2 || type == 3)
            json_array_append_new(added, json_pack("{s:I,s:s,s:b}", "id", (json_int_t)id,
                                                   "content", text, "special", true));
    }
    static const char *const specials[][2] = {{"cls", "cls"}, {"seperator", "sep"},
                                              {"mask", "mask"}, {"padding", "pad"},
                                              {"unknown", "unk"}};
    json_t *config = json_pack("{s:b}", "do_lower_case", true);
    for (size_t s = 0; s < sizeof specials / sizeof specials[0]; s++) {
        char key[64];
        snprintf(key, sizeof key, "tokenizer.ggml.%s_token_id", specials[s][0]);
        if (!gguf_find_kv(f, key))
            continue;
        uint32_t id = get_u32(f, key);
        snprintf(key, sizeof key, "%s_token", specials[s][1]);
        json_object_set_new(config, key, token_text(tokens, id));
    }
    write_json(dir, "tokenizer.json",
               json_pack("{s:s,s:o,s:{s:s},s:{s:s},s:{s:s,s:s,s:s,s:i,s:o}}", "version", "1.0",
                         "added_tokens", added, "normalizer", "type", "BertNormalizer",
                         "pre_tokenizer", "type", "BertPreTokenizer", "model", "type",
                         "WordPiece", "unk_token", "[UNK]", "continuing_subword_prefix", "##",
                         "max_input_chars_per_word", 100, "vocab", vocab));
    write_json(dir, "tokenizer_config.json", config);
}

/*
 * A "t5" vocabulary (SentencePiece's Unigram) as tokenizer.json's Unigram, as transformers
 * saves XLM-RoBERTa's: [piece, score] pairs in id order, unk_id, the control and user-defined
 * tokens among the added tokens (special or not), the charsmap base64 in a Precompiled
 * normalizer with a Replace of " {2,}" where extra spaces are removed, a Metaspace
 * pre-tokenizer, and a post-processor that ends a text with the eos token (there is no bos);
 * tokenizer_config.json names eos, unk and pad.
 */
static void write_unigram(const gguf_file *f, const char *dir)
{
    const gguf_kv *tokens = gguf_find_kv(f, "tokenizer.ggml.tokens");
    const gguf_kv *scores = gguf_find_kv(f, "tokenizer.ggml.scores");
    const gguf_kv *types = gguf_find_kv(f, "tokenizer.ggml.token_type");
    const gguf_kv *charsmap = gguf_find_kv(f, "tokenizer.ggml.precompiled_charsmap");
    assert_true(scores && types && charsmap);
    assert_false(gguf_find_kv(f, "tokenizer.ggml.bos_token_id"));
    json_t *vocab = json_array(), *added = json_array();
    for (uint32_t id = 0; id < tokens->n; id++) {
        json_array_append_new(vocab, json_pack("[o,f]", token_text(tokens, id),
                                               (double)gguf_kv_f32(scores, id)));
        int64_t type = gguf_kv_i64(types, id);
        if (type == 2 || type == 3 || type == 4)
            json_array_append_new(added, json_pack("{s:I,s:o,s:b}", "id", (json_int_t)id,
                                                   "content", token_text(tokens, id),
                                                   "special", type != 4));
    }
    char *map = util_base64_encode(charsmap->data, charsmap->n);
    assert_non_null(map);
    json_t *normalizers = json_pack("[{s:s,s:s}]", "type", "Precompiled",
                                    "precompiled_charsmap", map);
    free(map);
    bool collapse = false, prefix = false;
    corral_error err;
    assert_true(gguf_get_bool(f, "tokenizer.ggml.remove_extra_whitespaces", &collapse, &err));
    assert_true(gguf_get_bool(f, "tokenizer.ggml.add_space_prefix", &prefix, &err));
    if (collapse)
        json_array_append_new(normalizers, json_pack("{s:s,s:{s:s},s:s}", "type", "Replace",
                                                     "pattern", "Regex", " {2,}", "content",
                                                     " "));
    uint32_t eos = get_u32(f, "tokenizer.ggml.eos_token_id");
    json_t *single = json_pack("[{s:{s:s,s:i}},{s:{s:o,s:i}}]", "Sequence", "id", "A",
                               "type_id", 0, "SpecialToken", "id", token_text(tokens, eos),
                               "type_id", 0);
    write_json(dir, "tokenizer.json",
               json_pack("{s:s,s:o,s:{s:s,s:o},s:{s:s,s:s,s:s},s:{s:s,s:o},"
                         "s:{s:s,s:I,s:o,s:b}}",
                         "version", "1.0", "added_tokens", added, "normalizer", "type",
                         "Sequence", "normalizers", normalizers, "pre_tokenizer", "type",
                         "Metaspace", "replacement", "\xe2\x96\x81", "prepend_scheme",
                         prefix ? "always" : "never", "post_processor", "type",
                         "TemplateProcessing", "single", single, "model", "type", "Unigram",
                         "unk_id", (json_int_t)get_u32(f, "tokenizer.ggml.unknown_token_id"),
                         "vocab", vocab, "byte_fallback", false));
    write_json(dir, "tokenizer_config.json",
               json_pack("{s:o,s:o,s:o}", "eos_token", token_text(tokens, eos), "unk_token",
                         token_text(tokens, get_u32(f, "tokenizer.ggml.unknown_token_id")),
                         "pad_token",
                         token_text(tokens, get_u32(f, "tokenizer.ggml.padding_token_id"))));
}

static void write_tokenizer(const gguf_file *f, const char *dir, const char *pre_regex)
{
    const gguf_kv *tokens = gguf_find_kv(f, "tokenizer.ggml.tokens");
    const gguf_kv *types = gguf_find_kv(f, "tokenizer.ggml.token_type");
    const gguf_kv *merges = gguf_find_kv(f, "tokenizer.ggml.merges");
    assert_non_null(tokens);
    assert_non_null(types);
    /* the special tokens: added tokens, so that tokenizer_config.json can name them */
    static const char *const specials[][2] = {{"bos", "bos"}, {"eos", "eos"},
                                              {"unknown", "unk"}, {"padding", "pad"}};
    bool named[1 << 16] = {0};
    json_t *config = json_pack("{s:s}", "chat_template", HF_FIXTURE_CHAT_TEMPLATE);
    json_t *generation = json_object();
    for (size_t s = 0; s < 4; s++) {
        char key[64];
        snprintf(key, sizeof key, "tokenizer.ggml.%s_token_id", specials[s][0]);
        if (!gguf_find_kv(f, key))
            continue;
        uint32_t id = get_u32(f, key);
        named[id] = true;
        snprintf(key, sizeof key, "%s_token", specials[s][1]);
        json_object_set_new(config, key, json_pack("{s:o}", "content", token_text(tokens, id)));
        snprintf(key, sizeof key, "tokenizer.ggml.add_%s_token", specials[s][0]);
        const gguf_kv *add = gguf_find_kv(f, key);
        snprintf(key, sizeof key, "add_%s_token", specials[s][1]);
        if (add)
            json_object_set_new(config, key, json_boolean(gguf_kv_bool(add, 0)));
        if (strcmp(specials[s][1], "eos") == 0) /* and the ids that end a turn */
            json_object_set_new(generation, "eos_token_id", json_pack("[I,I]", (json_int_t)id,
                                                                     (json_int_t)0));
    }
    const gguf_kv *model = gguf_find_kv(f, "tokenizer.ggml.model");
    if (model && gguf_kv_str(model, 0).size == 2 && memcmp(gguf_kv_str(model, 0).data, "t5",
                                                          2) == 0) {
        json_decref(config);
        json_decref(generation);
        write_unigram(f, dir);
        return;
    }
    if (model && gguf_kv_str(model, 0).size == 4 && memcmp(gguf_kv_str(model, 0).data, "bert",
                                                          4) == 0) {
        json_decref(config);
        json_decref(generation);
        write_wordpiece(f, dir);
        return;
    }
    if (model && gguf_kv_str(model, 0).size == 5 && memcmp(gguf_kv_str(model, 0).data, "llama",
                                                          5) == 0) {
        write_spm(f, dir);
        write_json(dir, "tokenizer_config.json", config);
        write_json(dir, "generation_config.json", generation);
        return;
    }
    json_t *vocab = json_object(), *added = json_array();
    assert_true(tokens->n < sizeof named);
    for (uint32_t id = 0; id < tokens->n; id++) {
        int64_t type = gguf_kv_i64(types, id);
        if (type == 3 || type == 4 || named[id])
            json_array_append_new(added, json_pack("{s:I,s:o,s:b}", "id", (json_int_t)id,
                                                   "content", token_text(tokens, id),
                                                   "special", type == 3));
        else
            json_object_setn_new_nocheck(vocab, gguf_kv_str(tokens, id).data,
                                         gguf_kv_str(tokens, id).size, json_integer(id));
    }
    json_t *merge_list = json_array();
    for (uint64_t i = 0; merges && i < merges->n; i++) {
        gguf_str m = gguf_kv_str(merges, i);
        const char *space = memchr(m.data, ' ', m.size);
        assert_non_null(space);
        /* pairs, as newer tokenizers write them */
        json_array_append_new(merge_list,
                              json_pack("[s%,s%]", m.data, (size_t)(space - m.data), space + 1,
                                        m.size - (size_t)(space - m.data) - 1));
    }
    json_t *pre = json_null();
    if (pre_regex)
        pre = json_pack("{s:s,s:[{s:s,s:{s:s},s:s,s:b},{s:s,s:b}]}", "type", "Sequence",
                        "pretokenizers", "type", "Split", "pattern", "Regex", pre_regex,
                        "behavior", "Isolated", "invert", false, "type", "ByteLevel",
                        "add_prefix_space", false);
    write_json(dir, "tokenizer.json",
               json_pack("{s:s,s:o,s:o,s:{s:s,s:o,s:o}}", "version", "1.0", "added_tokens", added,
                         "pre_tokenizer", pre, "model", "type", "BPE", "vocab", vocab, "merges",
                         merge_list));
    write_json(dir, "tokenizer_config.json", config);
    write_json(dir, "generation_config.json", generation);
}

/* GGUF row r of a Llama Q/K matrix holds Hugging Face's row source_row(r). */
static uint64_t hf_row_of(uint64_t rows, uint32_t heads, uint64_t r)
{
    uint64_t d = rows / heads, head = r / d, j = r % d;
    return head * d + (j % 2) * (d / 2) + j / 2;
}

typedef struct shard {
    json_t *header;
    FILE *data;
    char path[512];
    uint64_t size;
} shard;

/* rows x cols floats (a vector when rows is 0) as one tensor of the shard. */
static void put_matrix(shard *s, const char *name, safetensors_dtype dtype, const float *src,
                       uint64_t rows, uint64_t cols, uint32_t permute_heads, bool minus_one)
{
    json_t *shape = rows ? json_pack("[I,I]", (json_int_t)rows, (json_int_t)cols)
                         : json_pack("[I]", (json_int_t)cols);
    rows = rows ? rows : 1;
    size_t esize = dtype == SAFETENSORS_F32 ? 4 : 2;
    for (uint64_t r = 0; r < rows; r++) {
        /* the Hugging Face row r is GGUF's row g with hf_row_of(g) == r */
        uint64_t g = r;
        if (permute_heads)
            for (g = 0; hf_row_of(rows, permute_heads, g) != r; g++)
                ;
        for (uint64_t c = 0; c < cols; c++) {
            float x = src[g * cols + c] - (minus_one ? 1.0f : 0.0f);
            uint16_t h = dtype == SAFETENSORS_F16 ? quant_f32_to_f16(x) : quant_f32_to_bf16(x);
            assert_int_equal(fwrite(dtype == SAFETENSORS_F32 ? (void *)&x : (void *)&h, esize, 1,
                                    s->data), 1);
        }
    }
    uint64_t bytes = rows * cols * esize;
    static const char *const names[] = {"F32", "F16", "BF16"};
    json_object_set_new(s->header, name,
                        json_pack("{s:s,s:o,s:[I,I]}", "dtype", names[dtype], "shape", shape,
                                  "data_offsets", (json_int_t)s->size,
                                  (json_int_t)(s->size + bytes)));
    s->size += bytes;
}

/* blk.L.ffn_KIND_exps.weight as its experts' matrices: Mixtral's names for llama, Qwen's else. */
/* The experts' names: Qwen's (mlp.experts.E.gate_proj), Mixtral's (block_sparse_moe...w1),
 * LFM2's (feed_forward.experts.E.w1) or Nemotron-H's (backbone...mixer.experts.E.up_proj). */
enum expert_names { EXPERTS_QWEN, EXPERTS_MIXTRAL, EXPERTS_LFM2, EXPERTS_NEMOTRON_H };

static void put_experts(shard *s, json_t *weight_map, const char *shard_name,
                        const gguf_tensor *t, enum expert_names layout, safetensors_dtype dtype)
{
    static const char *const formats[] = {
        [EXPERTS_QWEN] = "model.layers.%u.mlp.experts.%lld.%s.weight",
        [EXPERTS_MIXTRAL] = "model.layers.%u.block_sparse_moe.experts.%lld.%s.weight",
        [EXPERTS_LFM2] = "model.layers.%u.feed_forward.experts.%lld.%s.weight",
        [EXPERTS_NEMOTRON_H] = "backbone.layers.%u.mixer.experts.%lld.%s.weight",
    };
    bool w_names = layout == EXPERTS_MIXTRAL || layout == EXPERTS_LFM2;
    unsigned layer;
    char kind[8];
    assert_int_equal(sscanf(t->name, "blk.%u.ffn_%7[a-z]_exps.weight", &layer, kind), 2);
    static const char *const names[][3] = {{"gate", "gate_proj", "w1"},
                                           {"up", "up_proj", "w3"},
                                           {"down", "down_proj", "w2"}};
    size_t k = 0;
    while (k < 3 && strcmp(names[k][0], kind) != 0)
        k++;
    assert_true(k < 3);
    uint64_t cols = (uint64_t)t->ne[0], rows = (uint64_t)t->ne[1];
    for (int64_t e = 0; e < t->ne[2]; e++) {
        char name[256];
        snprintf(name, sizeof name, formats[layout], layer, (long long)e,
                 names[k][w_names ? 2 : 1]);
        put_matrix(s, name, dtype, (const float *)t->data + (uint64_t)e * rows * cols, rows, cols,
                   0, false);
        json_object_set_new(weight_map, name, json_string(shard_name));
    }
}

/* A U8 tensor of the given shape (outermost first) into the shard. */
static void put_bytes(shard *s, const char *name, const uint8_t *data, size_t n,
                      const uint64_t *shape, int n_dims)
{
    assert_int_equal(fwrite(data, 1, n, s->data), n);
    json_t *dims = json_array();
    for (int d = 0; d < n_dims; d++)
        json_array_append_new(dims, json_integer((json_int_t)shape[d]));
    json_object_set_new(s->header, name,
                        json_pack("{s:s,s:o,s:[I,I]}", "dtype", "U8", "shape", dims,
                                  "data_offsets", (json_int_t)s->size,
                                  (json_int_t)(s->size + n)));
    s->size += n;
}

/* A float tensor already in PyTorch's order, at the given 3-D shape, into the shard. */
static void put_tensor3(shard *s, const char *name, safetensors_dtype dtype, const float *src,
                        const uint64_t shape[3])
{
    put_matrix(s, name, dtype, src, shape[0] * shape[1], shape[2], 0, false);
    json_object_set_new(json_object_get(s->header, name), "shape",
                        json_pack("[I,I,I]", (json_int_t)shape[0], (json_int_t)shape[1],
                                  (json_int_t)shape[2]));
}

/*
 * gpt-oss's expert tensors of one layer as its checkpoint holds them (found at its gate's or
 * down's tensor, up's going with gate's): gate and up interleaved row by row in gate_up, a
 * plain matrix transposed ([experts, in, out]), MXFP4 blocks split into scales and 16 bytes
 * of pairs in Hugging Face's nibble order (byte k: elements 2k and 2k + 1).
 */
static void put_gptoss_experts(shard *s, json_t *weight_map, const char *shard_name,
                               const gguf_file *f, const gguf_tensor *t, safetensors_dtype dtype)
{
    unsigned layer;
    char kind[8], what[8], name[256], other[96];
    assert_int_equal(sscanf(t->name, "blk.%u.ffn_%7[a-z]_exps.%7s", &layer, kind, what), 3);
    if (strcmp(kind, "up") == 0)
        return;
    bool gate = strcmp(kind, "gate") == 0, bias = strcmp(what, "bias") == 0;
    snprintf(other, sizeof other, "blk.%u.ffn_up_exps.%s", layer, what);
    const gguf_tensor *parts[2] = {t, gate ? gguf_find_tensor(f, other) : NULL};
    uint64_t fused = gate ? 2 : 1;
    assert_true(!gate || parts[1]);
    uint64_t n_exp = (uint64_t)t->ne[t->n_dims - 1];
    uint64_t rows = bias ? (uint64_t)t->ne[0] : (uint64_t)t->ne[1]; /* per expert */
    uint64_t inner = bias ? 1 : (uint64_t)t->ne[0];
    const char *base = gate ? "gate_up_proj" : "down_proj";
    if (t->type == TENSOR_TYPE_MXFP4) {
        uint64_t nb = inner / 32, n_blocks = n_exp * fused * rows * nb;
        uint8_t *scales = malloc(n_blocks), *blocks = malloc(n_blocks * 16);
        assert_true(scales && blocks);
        for (uint64_t e = 0; e < n_exp; e++)
            for (uint64_t r = 0; r < rows; r++)
                for (uint64_t p = 0; p < fused; p++)
                    for (uint64_t b = 0; b < nb; b++) {
                        const uint8_t *in = (const uint8_t *)parts[p]->data +
                                            ((e * rows + r) * nb + b) * 17;
                        uint64_t at = ((e * fused * rows) + fused * r + p) * nb + b;
                        scales[at] = in[0];
                        for (int k = 0; k < 16; k++) { /* elements 2k, 2k + 1 */
                            int x = 2 * k, y = 2 * k + 1;
                            uint8_t lo = (uint8_t)(x < 16 ? in[1 + x] & 15 : in[1 + x - 16] >> 4);
                            uint8_t hi = (uint8_t)(y < 16 ? in[1 + y] & 15 : in[1 + y - 16] >> 4);
                            blocks[at * 16 + (uint64_t)k] = (uint8_t)(lo | hi << 4);
                        }
                    }
        uint64_t shape[4] = {n_exp, fused * rows, nb, 16};
        snprintf(name, sizeof name, "model.layers.%u.mlp.experts.%s_blocks", layer, base);
        put_bytes(s, name, blocks, n_blocks * 16, shape, 4);
        json_object_set_new(weight_map, name, json_string(shard_name));
        snprintf(name, sizeof name, "model.layers.%u.mlp.experts.%s_scales", layer, base);
        put_bytes(s, name, scales, n_blocks, shape, 3);
        json_object_set_new(weight_map, name, json_string(shard_name));
        free(scales);
        free(blocks);
        return;
    }
    assert_int_equal(t->type, TENSOR_TYPE_F32);
    /* GGUF's [experts][rows][inner] as PyTorch's [experts][inner][fused * rows] (a bias:
     * [experts][fused * rows]) */
    float *out = malloc(n_exp * inner * fused * rows * sizeof *out);
    assert_non_null(out);
    for (uint64_t e = 0; e < n_exp; e++)
        for (uint64_t r = 0; r < rows; r++)
            for (uint64_t p = 0; p < fused; p++)
                for (uint64_t i = 0; i < inner; i++)
                    out[(e * inner + i) * fused * rows + fused * r + p] =
                        ((const float *)parts[p]->data)[(e * rows + r) * inner + i];
    snprintf(name, sizeof name, "model.layers.%u.mlp.experts.%s%s", layer, base,
             bias ? "_bias" : "");
    if (bias) {
        put_matrix(s, name, SAFETENSORS_F32, out, n_exp, fused * rows, 0, false);
    } else {
        uint64_t shape[3] = {n_exp, inner, fused * rows};
        put_tensor3(s, name, dtype, out, shape);
    }
    json_object_set_new(weight_map, name, json_string(shard_name));
    free(out);
}

/*
 * nomic-bert-moe's blk.L.ffn_{up,down}_exps.weight as nomic's packed experts, [experts x
 * n_inner, n_embd]: mlp.experts.mlp.w1 the up matrices one after another, w2 each expert's
 * down matrix transposed; and the bias the experts' sum gets (mlp.experts.bias, beside w2),
 * which the conversion leaves out.
 */
static void put_nomic_experts(shard *s, json_t *weight_map, const char *shard_name,
                              const gguf_tensor *t, safetensors_dtype dtype)
{
    unsigned layer;
    char kind[8], name[128];
    assert_int_equal(sscanf(t->name, "blk.%u.ffn_%7[a-z]_exps.weight", &layer, kind), 2);
    bool down = strcmp(kind, "down") == 0;
    uint64_t cols = (uint64_t)t->ne[0], rows = (uint64_t)t->ne[1], n_exp = (uint64_t)t->ne[2];
    const float *data = t->data;
    float *owned = NULL;
    if (down) { /* expert e's [embd rows, ff cols] as [ff, embd] */
        assert_non_null(owned = malloc(t->size_bytes));
        for (uint64_t e = 0; e < n_exp; e++)
            for (uint64_t r = 0; r < rows; r++)
                for (uint64_t c = 0; c < cols; c++)
                    owned[(e * cols + c) * rows + r] = data[(e * rows + r) * cols + c];
        data = owned;
    } else {
        assert_string_equal(kind, "up");
    }
    snprintf(name, sizeof name, "encoder.layers.%u.mlp.experts.mlp.w%d", layer, down ? 2 : 1);
    put_matrix(s, name, dtype, data, n_exp * (down ? cols : rows), down ? rows : cols, 0, false);
    json_object_set_new(weight_map, name, json_string(shard_name));
    free(owned);
    if (!down)
        return;
    float bias[64];
    assert_true(rows <= 64);
    for (uint64_t i = 0; i < rows; i++)
        bias[i] = 0.25f * (float)i;
    snprintf(name, sizeof name, "encoder.layers.%u.mlp.experts.bias", layer);
    put_matrix(s, name, SAFETENSORS_F32, bias, 0, rows, 0, false);
    json_object_set_new(weight_map, name, json_string(shard_name));
}

static void finish_shard(shard *s, const char *dir, const char *name)
{
    json_object_set_new(s->header, "__metadata__", json_pack("{s:s}", "format", "pt"));
    char *header = json_dumps(s->header, JSON_COMPACT | JSON_SORT_KEYS);
    size_t len = strlen(header), padded = (len + 7) / 8 * 8; /* padded with spaces */
    char *file = malloc(8 + padded + s->size);
    assert_non_null(file);
    for (int i = 0; i < 8; i++)
        file[i] = (char)((uint64_t)padded >> (8 * i));
    memcpy(file + 8, header, len);
    memset(file + 8 + len, ' ', padded - len);
    rewind(s->data);
    assert_int_equal(fread(file + 8 + padded, 1, s->size, s->data), s->size);
    store_fixture_write(dir, name, file, 8 + padded + s->size);
    free(file);
    free(header);
    fclose(s->data);
    json_decref(s->header);
}

/* A tower tensor's Hugging Face name, into out: whole's (n_whole pairs) for a name it lists,
 * else for "v.blk.L.part.kind" blocks, ".L.", the Hugging Face piece parts (n_parts pairs)
 * gives part, "." and kind. False when neither names it. */
static bool tower_hf_name(const char *gguf, const char *const (*whole)[2], size_t n_whole,
                          const char *const (*parts)[2], size_t n_parts, const char *blocks,
                          char *out, size_t cap)
{
    for (size_t i = 0; i < n_whole; i++)
        if (!strcmp(gguf, whole[i][0])) {
            snprintf(out, cap, "%s", whole[i][1]);
            return true;
        }
    unsigned layer;
    char part[32], kind[16];
    if (sscanf(gguf, "v.blk.%u.%31[a-z_0-9].%15s", &layer, part, kind) != 3)
        return false;
    for (size_t i = 0; i < n_parts; i++)
        if (!strcmp(part, parts[i][0])) {
            snprintf(out, cap, "%s.%u.%s.%s", blocks, layer, parts[i][1], kind);
            return true;
        }
    return false;
}

/* The Hugging Face names of a llama.cpp projector's tensors (gemma3's) in a Gemma 3
 * multimodal checkpoint, older transformers' layout. */
static void vision_hf_name(const char *gguf, char *out, size_t cap)
{
    static const char *const whole[][2] = {
        {"v.patch_embd.weight", "vision_tower.vision_model.embeddings.patch_embedding.weight"},
        {"v.patch_embd.bias", "vision_tower.vision_model.embeddings.patch_embedding.bias"},
        {"v.position_embd.weight",
         "vision_tower.vision_model.embeddings.position_embedding.weight"},
        {"v.post_ln.weight", "vision_tower.vision_model.post_layernorm.weight"},
        {"v.post_ln.bias", "vision_tower.vision_model.post_layernorm.bias"},
        {"mm.soft_emb_norm.weight", "multi_modal_projector.mm_soft_emb_norm.weight"},
        {"mm.input_projection.weight", "multi_modal_projector.mm_input_projection_weight"},
    };
    static const char *const parts[][2] = {
        {"ln1", "layer_norm1"},  {"ln2", "layer_norm2"},   {"attn_q", "self_attn.q_proj"},
        {"attn_k", "self_attn.k_proj"}, {"attn_v", "self_attn.v_proj"},
        {"attn_out", "self_attn.out_proj"}, {"ffn_up", "mlp.fc1"}, {"ffn_down", "mlp.fc2"},
    };
    if (!tower_hf_name(gguf, whole, sizeof whole / sizeof whole[0], parts,
                       sizeof parts / sizeof parts[0], "vision_tower.vision_model.encoder.layers",
                       out, cap))
        fail_msg("no Hugging Face name for %s", gguf);
}

/* The Hugging Face names of a llama.cpp pixtral projector's tensors in a Mistral 3
 * checkpoint, older transformers' layout; NULL for its [IMG_BREAK] vector, which the
 * checkpoint keeps as that token's embedding. */
static const char *pixtral_hf_name(const char *gguf, char *out, size_t cap)
{
    static const char *const whole[][2] = {
        {"v.patch_embd.weight", "vision_tower.patch_conv.weight"},
        {"v.pre_ln.weight", "vision_tower.ln_pre.weight"},
        {"mm.input_norm.weight", "multi_modal_projector.norm.weight"},
        {"mm.patch_merger.weight", "multi_modal_projector.patch_merger.merging_layer.weight"},
        {"mm.1.weight", "multi_modal_projector.linear_1.weight"},
        {"mm.1.bias", "multi_modal_projector.linear_1.bias"},
        {"mm.2.weight", "multi_modal_projector.linear_2.weight"},
        {"mm.2.bias", "multi_modal_projector.linear_2.bias"},
    };
    static const char *const parts[][2] = {
        {"ln1", "attention_norm"},  {"ln2", "ffn_norm"},
        {"attn_q", "attention.q_proj"}, {"attn_k", "attention.k_proj"},
        {"attn_v", "attention.v_proj"}, {"attn_out", "attention.o_proj"},
        {"ffn_gate", "feed_forward.gate_proj"}, {"ffn_up", "feed_forward.up_proj"},
        {"ffn_down", "feed_forward.down_proj"},
    };
    if (!strcmp(gguf, "v.token_embd.img_break"))
        return NULL;
    if (!tower_hf_name(gguf, whole, sizeof whole / sizeof whole[0], parts,
                       sizeof parts / sizeof parts[0], "vision_tower.transformer.layers", out,
                       cap))
        fail_msg("no Hugging Face name for %s", gguf);
    return out;
}

/* The id of the token spelled text in f's vocabulary. */
static uint32_t token_id(const gguf_file *f, const char *text)
{
    const gguf_kv *tokens = gguf_find_kv(f, "tokenizer.ggml.tokens");
    assert_non_null(tokens);
    for (uint32_t id = 0; id < tokens->n; id++) {
        gguf_str s = gguf_kv_str(tokens, id);
        if (s.size == strlen(text) && memcmp(s.data, text, s.size) == 0)
            return id;
    }
    fail_msg("no token %s", text);
    return 0;
}

/* Mistral 3's config.json: the text model's keys under text_config, the pixtral projector's
 * under vision_config, its merge square, image token and projector beside them. */
static void nest_pixtral_config(const gguf_file *text, const gguf_file *mm, const char *dir)
{
    json_error_t jerr;
    json_t *flat = json_load_file(store_fixture_path(dir, "config.json"), 0, &jerr);
    assert_non_null(flat);
    uint32_t width = get_u32(mm, "clip.vision.embedding_length");
    uint32_t heads = get_u32(mm, "clip.vision.attention.head_count");
    json_t *c = json_pack(
        "{s:O,s:o,s:I,s:I,s:b,s:s}", "architectures", json_object_get(flat, "architectures"),
        "text_config", flat, "spatial_merge_size",
        (json_int_t)get_u32(mm, "clip.vision.spatial_merge_size"), "image_token_index",
        (json_int_t)token_id(text, "[IMG]"), "multimodal_projector_bias",
        gguf_find_tensor(mm, "mm.1.bias") != NULL, "projector_hidden_act", "gelu");
    json_object_del(flat, "architectures");
    json_object_set_new(
        c, "vision_config",
        json_pack("{s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:f,s:s}", "num_hidden_layers",
                  (json_int_t)get_u32(mm, "clip.vision.block_count"), "hidden_size",
                  (json_int_t)width, "intermediate_size",
                  (json_int_t)get_u32(mm, "clip.vision.feed_forward_length"),
                  "num_attention_heads", (json_int_t)heads, "head_dim",
                  (json_int_t)(width / heads), "image_size",
                  (json_int_t)get_u32(mm, "clip.vision.image_size"), "patch_size",
                  (json_int_t)get_u32(mm, "clip.vision.patch_size"), "rope_theta", 10000.0,
                  "model_type", "pixtral"));
    write_json(dir, "config.json", c);
}

/* Qwen2.5-VL's config.json: the text model's keys under text_config with its M-RoPE
 * sections as rope_scaling's, the qwen2.5vl_merger projector's as vision_config (its
 * every-p-th full-attention block as the list of those blocks). */
static void nest_qwen25vl_config(const gguf_file *text, const gguf_file *mm, const char *dir)
{
    json_error_t jerr;
    json_t *flat = json_load_file(store_fixture_path(dir, "config.json"), 0, &jerr);
    assert_non_null(flat);
    const gguf_kv *sections = gguf_find_kv(text, "qwen2vl.rope.dimension_sections");
    assert_non_null(sections);
    json_t *mrope = json_array(), *full = json_array();
    for (uint64_t i = 0; i < 3; i++)
        json_array_append_new(mrope, json_integer(gguf_kv_i64(sections, i)));
    json_object_set_new(flat, "rope_scaling",
                        json_pack("{s:s,s:o}", "type", "mrope", "mrope_section", mrope));
    uint32_t layers = get_u32(mm, "clip.vision.block_count");
    uint32_t pattern = get_u32(mm, "clip.vision.n_wa_pattern");
    for (uint32_t b = pattern - 1; b < layers; b += pattern)
        json_array_append_new(full, json_integer(b));
    json_t *c = json_pack("{s:O,s:o}", "architectures", json_object_get(flat, "architectures"),
                          "text_config", flat);
    json_object_del(flat, "architectures");
    uint32_t patch = get_u32(mm, "clip.vision.patch_size");
    json_object_set_new(
        c, "vision_config",
        json_pack("{s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:o,s:I,s:I}", "depth",
                  (json_int_t)layers, "hidden_size",
                  (json_int_t)get_u32(mm, "clip.vision.embedding_length"), "intermediate_size",
                  (json_int_t)get_u32(mm, "clip.vision.feed_forward_length"), "num_heads",
                  (json_int_t)get_u32(mm, "clip.vision.attention.head_count"), "in_chans",
                  (json_int_t)3, "patch_size", (json_int_t)patch, "spatial_patch_size",
                  (json_int_t)patch, "spatial_merge_size", (json_int_t)2, "window_size",
                  (json_int_t)112, "fullatt_block_indexes", full, "temporal_patch_size",
                  (json_int_t)2, "out_hidden_size",
                  (json_int_t)get_u32(mm, "clip.vision.projection_dim")));
    write_json(dir, "config.json", c);
}

/* The tower's patch kernel t (v.patch_embd.weight, [patch, patch, channels, outputs]) and
 * its second temporal slice (v.patch_embd.weight.1) as one Conv3D tensor named name,
 * [outputs, channels, 2, patch, patch]. */
static void put_patch_kernel(shard *s, json_t *weight_map, const char *shard_name,
                             const gguf_file *mm, const gguf_tensor *t, safetensors_dtype dtype,
                             const char *name)
{
    const gguf_tensor *second = gguf_find_tensor(mm, "v.patch_embd.weight.1");
    assert_non_null(second);
    uint64_t area = (uint64_t)t->ne[0] * (uint64_t)t->ne[1];
    uint64_t slices = (uint64_t)t->ne[2] * (uint64_t)t->ne[3]; /* channels x outputs */
    float *stacked = malloc(2 * area * slices * sizeof *stacked);
    assert_non_null(stacked);
    for (uint64_t k = 0; k < slices; k++)
        for (int p = 0; p < 2; p++)
            memcpy(stacked + (2 * k + (uint64_t)p) * area,
                   (const float *)(p ? second : t)->data + k * area, area * sizeof *stacked);
    put_matrix(s, name, dtype, stacked, (uint64_t)t->ne[3], 2 * area * (uint64_t)t->ne[2], 0,
               false);
    json_object_set_new(json_object_get(s->header, name), "shape",
                        json_pack("[I,I,I,I,I]", (json_int_t)t->ne[3], (json_int_t)t->ne[2],
                                  (json_int_t)2, (json_int_t)t->ne[1], (json_int_t)t->ne[0]));
    json_object_set_new(weight_map, name, json_string(shard_name));
    free(stacked);
}

/* The qwen2.5vl_merger projector's tensors under Qwen2.5-VL's names (older transformers'
 * layout), fused as the checkpoint keeps them: the two temporal patch kernels into one
 * [width, channels, 2, patch, patch], each block's Q, K and V (and biases) into attn.qkv. */
static void put_qwen25vl_tower(shard *s, json_t *weight_map, const char *shard_name,
                               const gguf_file *mm, safetensors_dtype dtype)
{
    static const char *const parts[][2] = {
        {"ln1", "norm1"},         {"ln2", "norm2"},         {"attn_out", "attn.proj"},
        {"ffn_gate", "mlp.gate_proj"}, {"ffn_up", "mlp.up_proj"}, {"ffn_down", "mlp.down_proj"},
    };
    static const char *const whole[][2] = {
        {"v.post_ln.weight", "visual.merger.ln_q.weight"},
        {"mm.0.weight", "visual.merger.mlp.0.weight"}, {"mm.0.bias", "visual.merger.mlp.0.bias"},
        {"mm.2.weight", "visual.merger.mlp.2.weight"}, {"mm.2.bias", "visual.merger.mlp.2.bias"},
    };
    char name[256];
    for (size_t i = 0; i < gguf_n_tensors(mm); i++) {
        const gguf_tensor *t = gguf_tensor_at(mm, i);
        assert_int_equal(t->type, TENSOR_TYPE_F32);
        uint64_t rows = t->n_dims == 1 ? 0 : (uint64_t)t->ne[t->n_dims - 1];
        uint64_t cols = gguf_tensor_n_elems(t) / (rows ? rows : 1);
        unsigned layer;
        char part[32], kind[16];
        if (tower_hf_name(t->name, whole, sizeof whole / sizeof whole[0], parts,
                          sizeof parts / sizeof parts[0], "visual.blocks", name, sizeof name)) {
            put_matrix(s, name, t->n_dims == 1 ? SAFETENSORS_F32 : dtype, t->data, rows, cols,
                       0, false);
            json_object_set_new(weight_map, name, json_string(shard_name));
            continue;
        }
        if (sscanf(t->name, "v.blk.%u.attn_%1[q].%15s", &layer, part, kind) == 3) {
            /* q found: k and v follow it into attn.qkv */
            const gguf_tensor *qkv[3] = {t, NULL, NULL};
            for (int p = 1; p < 3; p++) {
                char other[64];
                snprintf(other, sizeof other, "v.blk.%u.attn_%c.%s", layer, "qkv"[p], kind);
                assert_non_null(qkv[p] = gguf_find_tensor(mm, other));
            }
            uint64_t n = gguf_tensor_n_elems(t);
            float *fused = malloc(3 * n * sizeof *fused);
            assert_non_null(fused);
            for (int p = 0; p < 3; p++)
                memcpy(fused + p * n, qkv[p]->data, n * sizeof *fused);
            snprintf(name, sizeof name, "visual.blocks.%u.attn.qkv.%s", layer, kind);
            put_matrix(s, name, t->n_dims == 1 ? SAFETENSORS_F32 : dtype, fused,
                       rows ? 3 * rows : 0, rows ? cols : 3 * cols, 0, false);
            json_object_set_new(weight_map, name, json_string(shard_name));
            free(fused);
            continue;
        }
        if (strcmp(t->name, "v.patch_embd.weight") != 0)
            continue; /* attn_k, attn_v and the second kernel go with attn_q and the first */
        put_patch_kernel(s, weight_map, shard_name, mm, t, dtype, "visual.patch_embed.proj.weight");
    }
}

/* Qwen3-VL's config.json: the text model's keys under text_config with its M-RoPE sections
 * as rope_scaling's, the qwen3vl_merger projector's as vision_config (its deepstack layers
 * as their list); its preprocessor_config.json: the projector's normalisation and size
 * bounds. */
static void nest_qwen3vl_config(const gguf_file *text, const gguf_file *mm, const char *dir)
{
    json_error_t jerr;
    json_t *flat = json_load_file(store_fixture_path(dir, "config.json"), 0, &jerr);
    assert_non_null(flat);
    gguf_str arch;
    corral_error err;
    assert_true(gguf_get_str(text, "general.architecture", &arch, &err));
    char key[96];
    snprintf(key, sizeof key, "%.*s.rope.dimension_sections", (int)arch.size, arch.data);
    const gguf_kv *sections = gguf_find_kv(text, key);
    assert_non_null(sections);
    json_t *mrope = json_array(), *deepstack = json_array();
    for (uint64_t i = 0; i < 3; i++)
        json_array_append_new(mrope, json_integer(gguf_kv_i64(sections, i)));
    json_object_set_new(flat, "rope_scaling",
                        json_pack("{s:s,s:o,s:b}", "rope_type", "default", "mrope_section",
                                  mrope, "mrope_interleaved", true));
    const gguf_kv *layers = gguf_find_kv(mm, "clip.vision.is_deepstack_layers");
    assert_non_null(layers);
    for (uint64_t i = 0; i < layers->n; i++)
        if (gguf_kv_bool(layers, i))
            json_array_append_new(deepstack, json_integer((json_int_t)i));
    json_t *c = json_pack("{s:O,s:o}", "architectures", json_object_get(flat, "architectures"),
                          "text_config", flat);
    json_object_del(flat, "architectures");
    uint32_t patch = get_u32(mm, "clip.vision.patch_size");
    const gguf_tensor *pos = gguf_find_tensor(mm, "v.position_embd.weight");
    assert_non_null(pos);
    json_object_set_new(
        c, "vision_config",
        json_pack("{s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:o,s:s}", "depth",
                  (json_int_t)get_u32(mm, "clip.vision.block_count"), "hidden_size",
                  (json_int_t)get_u32(mm, "clip.vision.embedding_length"), "intermediate_size",
                  (json_int_t)get_u32(mm, "clip.vision.feed_forward_length"), "num_heads",
                  (json_int_t)get_u32(mm, "clip.vision.attention.head_count"), "in_channels",
                  (json_int_t)3, "patch_size", (json_int_t)patch, "spatial_merge_size",
                  (json_int_t)get_u32(mm, "clip.vision.spatial_merge_size"),
                  "temporal_patch_size", (json_int_t)2, "out_hidden_size",
                  (json_int_t)get_u32(mm, "clip.vision.projection_dim"),
                  "num_position_embeddings", (json_int_t)pos->ne[1],
                  "deepstack_visual_indexes", deepstack, "hidden_act", "gelu_pytorch_tanh"));
    write_json(dir, "config.json", c);
    const gguf_kv *mean = gguf_find_kv(mm, "clip.vision.image_mean");
    const gguf_kv *std = gguf_find_kv(mm, "clip.vision.image_std");
    assert_true(mean && std && mean->n == 3 && std->n == 3);
    write_json(dir, "preprocessor_config.json",
               json_pack("{s:[f,f,f],s:[f,f,f],s:{s:I,s:I},s:I,s:I}", "image_mean",
                         (double)gguf_kv_f32(mean, 0), (double)gguf_kv_f32(mean, 1),
                         (double)gguf_kv_f32(mean, 2), "image_std", (double)gguf_kv_f32(std, 0),
                         (double)gguf_kv_f32(std, 1), (double)gguf_kv_f32(std, 2), "size",
                         "shortest_edge", (json_int_t)(patch * patch * 4), "longest_edge",
                         (json_int_t)(patch * patch * 4096), "patch_size", (json_int_t)patch,
                         "merge_size", (json_int_t)2));
}

/* The qwen3vl_merger projector's tensors under Qwen3-VL's names (model.visual.*), fused as
 * the checkpoint keeps them: the two temporal patch kernels into one [width, channels, 2,
 * patch, patch]; each block's Q, K and V are fused in the projector already; the deepstack
 * mergers numbered by their place in the list. */
static void put_qwen3vl_tower(shard *s, json_t *weight_map, const char *shard_name,
                              const gguf_file *mm, safetensors_dtype dtype)
{
    static const char *const whole[][2] = {
        {"v.patch_embd.bias", "model.visual.patch_embed.proj.bias"},
        {"v.position_embd.weight", "model.visual.pos_embed.weight"},
        {"v.post_ln.weight", "model.visual.merger.norm.weight"},
        {"v.post_ln.bias", "model.visual.merger.norm.bias"},
        {"mm.0.weight", "model.visual.merger.linear_fc1.weight"},
        {"mm.0.bias", "model.visual.merger.linear_fc1.bias"},
        {"mm.2.weight", "model.visual.merger.linear_fc2.weight"},
        {"mm.2.bias", "model.visual.merger.linear_fc2.bias"},
    };
    static const char *const parts[][2] = {
        {"ln1", "norm1"},         {"ln2", "norm2"},         {"attn_qkv", "attn.qkv"},
        {"attn_out", "attn.proj"}, {"ffn_up", "mlp.linear_fc1"}, {"ffn_down", "mlp.linear_fc2"},
        {"norm", "norm"},         {"fc1", "linear_fc1"},    {"fc2", "linear_fc2"},
    };
    const gguf_kv *layers = gguf_find_kv(mm, "clip.vision.is_deepstack_layers");
    assert_non_null(layers);
    char name[256];
    for (size_t i = 0; i < gguf_n_tensors(mm); i++) {
        const gguf_tensor *t = gguf_tensor_at(mm, i);
        assert_int_equal(t->type, TENSOR_TYPE_F32);
        uint64_t rows = t->n_dims == 1 ? 0 : (uint64_t)t->ne[t->n_dims - 1];
        uint64_t cols = gguf_tensor_n_elems(t) / (rows ? rows : 1);
        unsigned layer;
        char part[32], kind[16];
        name[0] = '\0';
        for (size_t w = 0; w < sizeof whole / sizeof whole[0]; w++)
            if (!strcmp(t->name, whole[w][0]))
                snprintf(name, sizeof name, "%s", whole[w][1]);
        bool block = sscanf(t->name, "v.blk.%u.%31[a-z_0-9].%15s", &layer, part, kind) == 3;
        bool merger = !block &&
                      sscanf(t->name, "v.deepstack.%u.%31[a-z_0-9].%15s", &layer, part, kind) == 3;
        unsigned place = 0; /* a merger's place in the list of deepstack layers */
        for (unsigned l = 0; merger && l < layer; l++)
            place += gguf_kv_bool(layers, l);
        for (size_t p = 0; !name[0] && (block || merger) && p < sizeof parts / sizeof parts[0];
             p++)
            if (!strcmp(part, parts[p][0]))
                snprintf(name, sizeof name, block ? "model.visual.blocks.%u.%s.%s"
                                                  : "model.visual.deepstack_merger_list.%u.%s.%s",
                         block ? layer : place, parts[p][1], kind);
        if (name[0]) {
            put_matrix(s, name, t->n_dims == 1 ? SAFETENSORS_F32 : dtype, t->data, rows, cols,
                       0, false);
            json_object_set_new(weight_map, name, json_string(shard_name));
            continue;
        }
        if (strcmp(t->name, "v.patch_embd.weight") != 0)
            continue; /* the second kernel goes with the first */
        put_patch_kernel(s, weight_map, shard_name, mm, t, dtype, "model.visual.patch_embed.proj.weight");
    }
}

/* Gemma 3n's Hugging Face name of a gemma3n GGUF tensor that other families lack, into out;
 * false for the others. */
static bool gemma3n_hf_name(const char *gguf, char *out, size_t cap)
{
    static const char *const whole[][2] = {
        {"per_layer_token_embd.weight", "model.language_model.embed_tokens_per_layer.weight"},
        {"per_layer_model_proj.weight", "model.language_model.per_layer_model_projection.weight"},
        {"per_layer_proj_norm.weight", "model.language_model.per_layer_projection_norm.weight"},
    };
    static const char *const parts[][2] = {
        {"inp_gate", "per_layer_input_gate.weight"},
        {"proj", "per_layer_projection.weight"},
        {"post_norm", "post_per_layer_input_norm.weight"},
        {"altup_correct_coef", "altup.correction_coefs.weight"},
        {"altup_predict_coef", "altup.prediction_coefs.weight"},
        {"altup_router", "altup.modality_router.weight"},
        {"altup_router_norm", "altup.router_norm.weight"},
        {"altup_correct_scale", "altup.correct_output_scale"},
        {"laurel_l", "laurel.linear_left.weight"},
        {"laurel_r", "laurel.linear_right.weight"},
        {"laurel_post_norm", "laurel.post_laurel_norm.weight"},
    };
    for (size_t i = 0; i < sizeof whole / sizeof whole[0]; i++)
        if (!strcmp(gguf, whole[i][0])) {
            snprintf(out, cap, "%s", whole[i][1]);
            return true;
        }
    unsigned layer;
    char part[64];
    if (sscanf(gguf, "blk.%u.%63[a-z_].weight", &layer, part) != 2)
        return false;
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++)
        if (!strcmp(part, parts[i][0])) {
            snprintf(out, cap, "model.language_model.layers.%u.%s", layer, parts[i][1]);
            return true;
        }
    return false;
}

/* GLM-OCR's Hugging Face name of a glm4 block's tensor that the common names get wrong (its
 * sandwich norms, fused gate/up, prediction layer's parts), into out; false for the others. */
static bool glmocr_hf_name(const char *gguf, char *out, size_t cap)
{
    static const char *const parts[][2] = {
        {"post_attention_norm.weight", "post_self_attn_layernorm.weight"},
        {"post_ffw_norm.weight", "post_mlp_layernorm.weight"},
        {"ffn_up.weight", "mlp.gate_up_proj.weight"},
        {"nextn.eh_proj.weight", "eh_proj.weight"},
        {"nextn.enorm.weight", "enorm.weight"},
        {"nextn.hnorm.weight", "hnorm.weight"},
        {"nextn.embed_tokens.weight", "embed_tokens.weight"},
        {"nextn.shared_head_head.weight", "shared_head.head.weight"},
        {"nextn.shared_head_norm.weight", "shared_head.norm.weight"},
    };
    unsigned layer;
    int at = 0;
    if (sscanf(gguf, "blk.%u.%n", &layer, &at) != 1 || at == 0)
        return false;
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++)
        if (!strcmp(gguf + at, parts[i][0])) {
            snprintf(out, cap, "model.layers.%u.%s", layer, parts[i][1]);
            return true;
        }
    return false;
}

/* A glm4 q or k (weight or bias) with each head's rotated dimensions back in GLM's
 * interleaved pairs from the file's NeoX halves (rope.dimension_count of them): free it. */
static float *glmocr_interleaved(const gguf_file *f, const gguf_tensor *t)
{
    uint64_t dim = get_u32(f, "glm4.attention.key_length"), rot = get_u32(f,
                                                                          "glm4.rope.dimension_count");
    uint64_t cols = t->n_dims == 1 ? 1 : (uint64_t)t->ne[0];
    uint64_t rows = gguf_tensor_n_elems(t) / cols, half = rot / 2;
    float *out = malloc(gguf_tensor_n_elems(t) * sizeof *out);
    assert_non_null(out);
    for (uint64_t r = 0; r < rows; r++) {
        uint64_t j = r % dim, from = r;
        if (j < rot)
            from = r - j + (j % 2 ? half + j / 2 : j / 2);
        memcpy(out + r * cols, (const float *)t->data + from * cols, cols * sizeof *out);
    }
    return out;
}

/* Laguna's Hugging Face name of a block's tensor that the common names get wrong (its gate,
 * selection bias and shared expert), into out; false for the others. */
static bool laguna_hf_name(const char *gguf, char *out, size_t cap)
{
    static const char *const parts[][2] = {
        {"attn_gate.weight", "self_attn.g_proj.weight"},
        {"exp_probs_b.bias", "mlp.experts.e_score_correction_bias"},
        {"ffn_gate_shexp.weight", "mlp.shared_expert.gate_proj.weight"},
        {"ffn_up_shexp.weight", "mlp.shared_expert.up_proj.weight"},
        {"ffn_down_shexp.weight", "mlp.shared_expert.down_proj.weight"},
    };
    unsigned layer;
    int at = 0;
    if (sscanf(gguf, "blk.%u.%n", &layer, &at) != 1 || at == 0)
        return false;
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++)
        if (!strcmp(gguf + at, parts[i][0])) {
            snprintf(out, cap, "model.layers.%u.%s", layer, parts[i][1]);
            return true;
        }
    return false;
}

/* Gemma 4's Hugging Face name pieces of a block's GGUF tensors (a part and its kind). */
static const char *const gemma4_names[][2] = {
    {"attn_norm.weight", "input_layernorm.weight"},
    {"attn_q.weight", "self_attn.q_proj.weight"},
    {"attn_k.weight", "self_attn.k_proj.weight"},
    {"attn_v.weight", "self_attn.v_proj.weight"},
    {"attn_output.weight", "self_attn.o_proj.weight"},
    {"attn_q_norm.weight", "self_attn.q_norm.weight"},
    {"attn_k_norm.weight", "self_attn.k_norm.weight"},
    {"post_attention_norm.weight", "post_attention_layernorm.weight"},
    {"ffn_norm.weight", "pre_feedforward_layernorm.weight"},
    {"ffn_gate.weight", "mlp.gate_proj.weight"},
    {"ffn_up.weight", "mlp.up_proj.weight"},
    {"ffn_down.weight", "mlp.down_proj.weight"},
    {"post_ffw_norm.weight", "post_feedforward_layernorm.weight"},
    {"layer_output_scale.weight", "layer_scalar"},
    {"inp_gate.weight", "per_layer_input_gate.weight"},
    {"proj.weight", "per_layer_projection.weight"},
    {"post_norm.weight", "post_per_layer_input_norm.weight"},
    {"ffn_gate_inp.weight", "router.proj.weight"},
    {"ffn_gate_inp.scale", "router.scale"},
    {"ffn_down_exps.scale", "router.per_expert_scale"},
    {"pre_ffw_norm_2.weight", "pre_feedforward_layernorm_2.weight"},
    {"post_ffw_norm_1.weight", "post_feedforward_layernorm_1.weight"},
    {"post_ffw_norm_2.weight", "post_feedforward_layernorm_2.weight"},
    {"ffn_gate_up_exps.weight", "experts.gate_up_proj"},
    {"ffn_down_exps.weight", "experts.down_proj"},
    {"ffn_gate_exps.weight", "moe.gate_proj"},
    {"ffn_up_exps.weight", "moe.up_proj"},
};

/*
 * A gemma4 tensor under Gemma 4's name (under model.language_model., or model. when flat), its
 * norms as they are, the experts' stacks whole ([experts, rows, columns]); a fused attn_qkv as
 * the q_proj, k_proj and v_proj its layer's widths make.
 */
static void put_gemma4(shard *s, json_t *weight_map, const char *shard_name, const gguf_file *f,
                       const gguf_tensor *t, safetensors_dtype dtype, bool flat)
{
    static const char *const whole[][2] = {
        {"token_embd.weight", "embed_tokens.weight"},
        {"output_norm.weight", "norm.weight"},
        {"per_layer_token_embd.weight", "embed_tokens_per_layer.weight"},
        {"per_layer_model_proj.weight", "per_layer_model_projection.weight"},
        {"per_layer_proj_norm.weight", "per_layer_projection_norm.weight"},
    };
    const char *prefix = flat ? "model." : "model.language_model.";
    char name[256];
    const float *data = t->data;
    uint64_t cols = (uint64_t)t->ne[0], rows = gguf_tensor_n_elems(t) / cols;
    assert_int_equal(t->type, TENSOR_TYPE_F32);
    for (size_t i = 0; i < sizeof whole / sizeof whole[0]; i++)
        if (!strcmp(t->name, whole[i][0])) {
            snprintf(name, sizeof name, "%s%s", prefix, whole[i][1]);
            put_matrix(s, name, t->n_dims == 1 ? SAFETENSORS_F32 : dtype, data,
                       t->n_dims == 1 ? 0 : rows, cols, 0, false);
            json_object_set_new(weight_map, name, json_string(shard_name));
            return;
        }
    if (!strcmp(t->name, "output.weight")) { /* an untied head, beside the model */
        put_matrix(s, "lm_head.weight", dtype, data, rows, cols, 0, false);
        json_object_set_new(weight_map, "lm_head.weight", json_string(shard_name));
        return;
    }
    unsigned layer;
    int at = 0;
    assert_int_equal(sscanf(t->name, "blk.%u.%n", &layer, &at), 1);
    const char *part = t->name + at;
    if (!strcmp(part, "attn_qkv.weight")) { /* q, k and v at this layer's widths */
        bool slides = gguf_kv_bool(gguf_find_kv(f, "gemma4.attention.sliding_window_pattern"),
                                   layer);
        uint64_t dim = get_u32(f, slides ? "gemma4.attention.key_length_swa"
                                         : "gemma4.attention.key_length");
        uint64_t q = get_u32(f, "gemma4.attention.head_count") * dim;
        uint64_t kv = at_layer(gguf_find_kv(f, "gemma4.attention.head_count_kv"), layer) * dim;
        assert_int_equal(q + 2 * kv, rows);
        static const char *const parts[] = {"q_proj", "k_proj", "v_proj"};
        uint64_t first[] = {0, q, q + kv}, n[] = {q, kv, kv};
        for (int k = 0; k < 3; k++) {
            snprintf(name, sizeof name, "%slayers.%u.self_attn.%s.weight", prefix, layer,
                     parts[k]);
            put_matrix(s, name, dtype, data + first[k] * cols, n[k], cols, 0, false);
            json_object_set_new(weight_map, name, json_string(shard_name));
        }
        return;
    }
    const char *hf = NULL;
    for (size_t i = 0; i < sizeof gemma4_names / sizeof gemma4_names[0] && !hf; i++)
        if (!strcmp(part, gemma4_names[i][0]))
            hf = gemma4_names[i][1];
    if (!hf)
        fail_msg("no Gemma 4 name for %s", t->name);
    snprintf(name, sizeof name, "%slayers.%u.%s", prefix, layer, hf);
    put_matrix(s, name, t->n_dims == 1 ? SAFETENSORS_F32 : dtype, data,
               t->n_dims == 1 ? 0 : rows, cols, 0, false);
    if (t->n_dims == 3) /* [experts, rows, columns] */
        json_object_set_new(json_object_get(s->header, name), "shape",
                            json_pack("[I,I,I]", (json_int_t)t->ne[2], (json_int_t)t->ne[1],
                                      (json_int_t)cols));
    json_object_set_new(weight_map, name, json_string(shard_name));
}

/* Gemma 4's vision_config from a gemma4v projector's clip.vision.* keys, into config.json. */
static void nest_gemma4_vision_config(const gguf_file *mm, const char *dir)
{
    json_error_t jerr;
    json_t *c = json_load_file(store_fixture_path(dir, "config.json"), 0, &jerr);
    assert_non_null(c);
    float eps;
    corral_error err;
    assert_true(gguf_get_f32(mm, "clip.vision.attention.layer_norm_epsilon", &eps, &err));
    json_object_set_new(
        c, "vision_config",
        json_pack("{s:I,s:I,s:I,s:I,s:I,s:i,s:I,s:f}", "hidden_size",
                  (json_int_t)get_u32(mm, "clip.vision.embedding_length"), "num_hidden_layers",
                  (json_int_t)get_u32(mm, "clip.vision.block_count"), "num_attention_heads",
                  (json_int_t)get_u32(mm, "clip.vision.attention.head_count"),
                  "intermediate_size", (json_int_t)get_u32(mm, "clip.vision.feed_forward_length"),
                  "patch_size", (json_int_t)get_u32(mm, "clip.vision.patch_size"),
                  "num_channels", 3, "pooling_kernel_size",
                  (json_int_t)get_u32(mm, "clip.vision.projector.scale_factor"), "layer_norm_eps",
                  (double)eps));
    write_json(dir, "config.json", c);
}

/* A gemma4v projector tensor's values as floats (its patch kernel is F16); free them. */
static float *tower_floats(const gguf_tensor *t)
{
    size_t n = (size_t)gguf_tensor_n_elems(t);
    float *x = malloc(n * sizeof *x);
    assert_non_null(x);
    for (size_t i = 0; i < n; i++)
        x[i] = t->type == TENSOR_TYPE_F16 ? quant_f16_to_f32(((const uint16_t *)t->data)[i])
                                          : ((const float *)t->data)[i];
    return x;
}

/*
 * A gemma4v projector's tensors under Gemma 4's names: the blocks under
 * model.vision_tower.encoder.layers (the clipped linears as .linear.weight, their bounds as
 * scalars), the patch kernel as the linear layer over a patch's pixels (row, column, channel),
 * the position table [2, positions, hidden], the projection under model.embed_vision.
 */
static void put_gemma4_tower(shard *s, json_t *weight_map, const char *shard_name,
                             const gguf_file *mm, safetensors_dtype dtype)
{
    static const char *const parts[][2] = {
        {"ln1.weight", "input_layernorm.weight"},
        {"ln2.weight", "pre_feedforward_layernorm.weight"},
        {"attn_q.weight", "self_attn.q_proj.linear.weight"},
        {"attn_k.weight", "self_attn.k_proj.linear.weight"},
        {"attn_v.weight", "self_attn.v_proj.linear.weight"},
        {"attn_out.weight", "self_attn.o_proj.linear.weight"},
        {"attn_q_norm.weight", "self_attn.q_norm.weight"},
        {"attn_k_norm.weight", "self_attn.k_norm.weight"},
        {"attn_post_norm.weight", "post_attention_layernorm.weight"},
        {"ffn_gate.weight", "mlp.gate_proj.linear.weight"},
        {"ffn_up.weight", "mlp.up_proj.linear.weight"},
        {"ffn_down.weight", "mlp.down_proj.linear.weight"},
        {"ffn_post_norm.weight", "post_feedforward_layernorm.weight"},
        {"out_scale.weight", "layer_scalar"},
        /* a clipped linear's bounds */
        {"attn_q.", "self_attn.q_proj."},
        {"attn_k.", "self_attn.k_proj."},
        {"attn_v.", "self_attn.v_proj."},
        {"attn_out.", "self_attn.o_proj."},
        {"ffn_gate.", "mlp.gate_proj."},
        {"ffn_up.", "mlp.up_proj."},
        {"ffn_down.", "mlp.down_proj."},
    };
    static const char *const whole[][2] = {
        {"v.std_bias", "model.vision_tower.std_bias"},
        {"v.std_scale", "model.vision_tower.std_scale"},
        {"mm.input_projection.weight", "model.embed_vision.embedding_projection.weight"},
        {"mm.input_projection.", "model.embed_vision.embedding_projection."},
    };
    for (size_t i = 0; i < gguf_n_tensors(mm); i++) {
        const gguf_tensor *t = gguf_tensor_at(mm, i);
        char name[256] = "";
        float *x = tower_floats(t);
        uint64_t cols = (uint64_t)t->ne[0], rows = gguf_tensor_n_elems(t) / cols;
        unsigned layer;
        int at = 0;
        if (!strcmp(t->name, "v.patch_embd.weight")) { /* [hidden, P * P * C], pixel-major */
            uint64_t side = (uint64_t)t->ne[0], ch = (uint64_t)t->ne[2], out = (uint64_t)t->ne[3];
            float *hwc = malloc(gguf_tensor_n_elems(t) * sizeof *hwc);
            assert_non_null(hwc);
            for (uint64_t o = 0; o < out; o++)
                for (uint64_t c = 0; c < ch; c++)
                    for (uint64_t y = 0; y < side; y++)
                        for (uint64_t px = 0; px < side; px++)
                            hwc[o * side * side * ch + (y * side + px) * ch + c] =
                                x[((o * ch + c) * side + y) * side + px];
            snprintf(name, sizeof name, "model.vision_tower.patch_embedder.input_proj.weight");
            put_matrix(s, name, dtype, hwc, out, side * side * ch, 0, false);
            free(hwc);
        } else if (!strcmp(t->name, "v.position_embd.weight")) { /* [2, positions, hidden] */
            snprintf(name, sizeof name,
                     "model.vision_tower.patch_embedder.position_embedding_table");
            put_matrix(s, name, dtype, x, rows, cols, 0, false);
            json_object_set_new(json_object_get(s->header, name), "shape",
                                json_pack("[I,I,I]", (json_int_t)t->ne[2], (json_int_t)t->ne[1],
                                          (json_int_t)cols));
        } else if (sscanf(t->name, "v.blk.%u.%n", &layer, &at) == 1 && at > 0) {
            for (size_t k = 0; k < sizeof parts / sizeof parts[0] && !name[0]; k++)
                if (!strncmp(t->name + at, parts[k][0], strlen(parts[k][0])))
                    snprintf(name, sizeof name, "model.vision_tower.encoder.layers.%u.%s%s", layer,
                             parts[k][1], t->name + at + strlen(parts[k][0]));
        } else {
            for (size_t k = 0; k < sizeof whole / sizeof whole[0] && !name[0]; k++)
                if (!strncmp(t->name, whole[k][0], strlen(whole[k][0])))
                    snprintf(name, sizeof name, "%s%s", whole[k][1],
                             t->name + strlen(whole[k][0]));
        }
        if (!name[0])
            fail_msg("no Gemma 4 name for %s", t->name);
        bool bound = strstr(t->name, "put_m") != NULL; /* input_min ... output_max */
        if (!json_object_get(s->header, name)) {
            put_matrix(s, name, t->n_dims == 1 ? SAFETENSORS_F32 : dtype, x,
                       t->n_dims == 1 ? 0 : rows, cols, 0, false);
            if (bound) /* a scalar */
                json_object_set_new(json_object_get(s->header, name), "shape", json_array());
        }
        json_object_set_new(weight_map, name, json_string(shard_name));
        free(x);
    }
}

/* Whether write_checkpoint writes a Gemma 4 checkpoint that an audio tower joins (no dummy
 * tower tensors then): set only within hf_fixture_write_gemma4_audio. */
static bool g_gemma4_audio;

/* The checkpoint's value whose softplus, log(1 + exp(x)) in double as the converter takes it,
 * is y exactly: log(exp(y) - 1), moved by single steps until it lands. */
static float softplus_source(float y)
{
    float x = (float)log(expm1((double)y));
    for (int step = 0; step < 64; step++) {
        float z = (float)log(1.0 + exp((double)x));
        if (z == y)
            return x;
        x = nextafterf(x, z < y ? INFINITY : -INFINITY);
    }
    fail_msg("no checkpoint value gives %g through softplus", (double)y);
    return 0;
}

/* An audio block's tensor stem (ollama's), its Hugging Face names in transformers' naming
 * (layers.N.*) and in the older conformer naming (conformer.N.*), and whether it is a clipped
 * linear (its weight under .linear.). */
static const struct {
    const char *stem, *layers, *conformer;
    bool clipped;
} audio_parts[] = {
    {"ffn_norm", "feed_forward1.pre_layer_norm", "ffw_layer_start.pre_layer_norm", false},
    {"ffn_post_norm", "feed_forward1.post_layer_norm", "ffw_layer_start.post_layer_norm", false},
    {"ffn_up", "feed_forward1.ffw_layer_1", "ffw_layer_start.ffw_layer_1", true},
    {"ffn_down", "feed_forward1.ffw_layer_2", "ffw_layer_start.ffw_layer_2", true},
    {"ffn_norm_1", "feed_forward2.pre_layer_norm", "ffw_layer_end.pre_layer_norm", false},
    {"ffn_post_norm_1", "feed_forward2.post_layer_norm", "ffw_layer_end.post_layer_norm", false},
    {"ffn_up_1", "feed_forward2.ffw_layer_1", "ffw_layer_end.ffw_layer_1", true},
    {"ffn_down_1", "feed_forward2.ffw_layer_2", "ffw_layer_end.ffw_layer_2", true},
    {"ln1", "norm_pre_attn", "attention.pre_attn_norm", false},
    {"ln2", "norm_post_attn", "attention.post_norm", false},
    {"attn_q", "self_attn.q_proj", "attention.attn.q_proj", true},
    {"attn_k", "self_attn.k_proj", "attention.attn.k_proj", true},
    {"attn_v", "self_attn.v_proj", "attention.attn.v_proj", true},
    {"attn_out", "self_attn.post", "attention.post", true},
    {"per_dim_scale", "self_attn.per_dim_scale", "attention.attn.per_dim_scale", false},
    {"per_dim_k_scale", NULL, "attention.attn.per_dim_key_scale", false},
    {"linear_pos", "self_attn.relative_k_proj",
     "attention.attn.relative_position_embedding.pos_proj", false},
    {"conv_norm", "lconv1d.pre_layer_norm", "lconv1d.pre_layer_norm", false},
    {"conv_pw1", "lconv1d.linear_start", "lconv1d.linear_start", true},
    {"conv_dw", "lconv1d.depthwise_conv1d", "lconv1d.depthwise_conv1d", false},
    {"norm_conv", "lconv1d.conv_norm", "lconv1d.conv_norm", false},
    {"conv_pw2", "lconv1d.linear_end", "lconv1d.linear_end", true},
    {"layer_pre_norm", "norm_out", "norm_out", false},
};

/* An audio tower tensor's Hugging Face name into out (see hf_fixture_add_gemma4_audio). */
static void audio_hf_name(const char *gguf, char *out, size_t cap)
{
    static const char *const whole[][2] = {
        {"a.conv1d.0.", "model.audio_tower.subsample_conv_projection.layer0.conv."},
        {"a.conv1d.1.", "model.audio_tower.subsample_conv_projection.conv_1.conv."},
        {"a.pre_encode.out.", "model.audio_tower.subsample_conv_projection.input_proj_linear."},
        {"mm.a.fc.", "model.audio_tower.output_proj."},
        {"mm.a.input_projection.weight", "model.embed_audio.embedding_projection.linear.weight"},
        {"mm.a.input_projection.", "model.embed_audio.embedding_projection."},
    };
    if (!strcmp(gguf, "a.conv1d.0.norm.weight") || !strcmp(gguf, "a.conv1d.1.norm.weight")) {
        snprintf(out, cap, "model.audio_tower.subsample_conv_projection.%s.norm.weight",
                 gguf[9] == '0' ? "layer0" : "conv_1");
        return;
    }
    for (size_t i = 0; i < sizeof whole / sizeof whole[0]; i++)
        if (!strncmp(gguf, whole[i][0], strlen(whole[i][0]))) {
            snprintf(out, cap, "%s%s", whole[i][1], gguf + strlen(whole[i][0]));
            return;
        }
    unsigned layer;
    int at = 0;
    if (sscanf(gguf, "a.blk.%u.%n", &layer, &at) != 1 || at == 0)
        fail_msg("no Gemma 4 name for %s", gguf);
    const char *rest = gguf + at, *dot = strchr(rest, '.');
    assert_non_null(dot);
    for (size_t i = 0; i < sizeof audio_parts / sizeof audio_parts[0]; i++) {
        if (strlen(audio_parts[i].stem) != (size_t)(dot - rest) ||
            strncmp(rest, audio_parts[i].stem, (size_t)(dot - rest)) != 0)
            continue;
        const char *piece = layer % 2 ? audio_parts[i].conformer : audio_parts[i].layers;
        if (!piece)
            fail_msg("%s has no name in the block's naming", gguf);
        bool weight = !strcmp(dot, ".weight");
        bool bare = !strncmp(audio_parts[i].stem, "per_dim_", 8); /* a bare parameter */
        snprintf(out, cap, "model.audio_tower.%s.%u.%s%s", layer % 2 ? "conformer" : "layers",
                 layer, piece,
                 !weight ? dot : bare ? "" : audio_parts[i].clipped ? ".linear.weight" : ".weight");
        return;
    }
    fail_msg("no Gemma 4 name for %s", gguf);
}

static void add_gemma4_audio(const char *tower_path, const char *dir,
                             safetensors_dtype matrix_dtype)
{
    static const char shard_name[] = "model-audio.safetensors";
    corral_error err;
    gguf_file *a = gguf_open(tower_path, &err);
    if (!a)
        fail_msg("%s", err.message);
    shard s = {.header = json_object(), .data = tmpfile()};
    assert_non_null(s.data);
    json_error_t jerr;
    json_t *index = json_load_file(store_fixture_path(dir, "model.safetensors.index.json"), 0,
                                   &jerr);
    assert_non_null(index);
    json_t *weight_map = json_object_get(index, "weight_map");
    for (size_t i = 0; i < gguf_n_tensors(a); i++) {
        const gguf_tensor *t = gguf_tensor_at(a, i);
        assert_int_equal(t->type, TENSOR_TYPE_F32);
        char name[256];
        audio_hf_name(t->name, name, sizeof name);
        uint64_t cols = (uint64_t)t->ne[0], rows = gguf_tensor_n_elems(t) / cols;
        bool conv = !strncmp(t->name, "a.conv1d.", 9) && t->n_dims == 4;
        bool dw = strstr(t->name, ".conv_dw.") != NULL;
        bool bound = strstr(t->name, "put_m") != NULL; /* input_min ... output_max */
        bool per_dim = strstr(t->name, ".per_dim_scale.") != NULL;
        const float *x = t->data;
        float *through = NULL;
        if (per_dim) {
            assert_non_null(through = malloc(cols * sizeof *through));
            for (uint64_t e = 0; e < cols; e++)
                through[e] = softplus_source(x[e]);
            x = through;
        }
        /* kernels F32 as ollama's file keeps them, so that their values come back whole */
        safetensors_dtype dtype = t->n_dims == 1 || conv || dw ? SAFETENSORS_F32 : matrix_dtype;
        put_matrix(&s, name, dtype, x, t->n_dims == 1 ? 0 : rows, cols, 0, false);
        json_t *entry = json_object_get(s.header, name);
        if (bound) /* a scalar */
            json_object_set_new(entry, "shape", json_array());
        if (conv) /* [out, in, 3, 3] */
            json_object_set_new(entry, "shape",
                                json_pack("[I,I,I,I]", (json_int_t)t->ne[3], (json_int_t)t->ne[2],
                                          (json_int_t)t->ne[1], (json_int_t)t->ne[0]));
        if (dw) /* [channels, 1, kernel] */
            json_object_set_new(entry, "shape",
                                json_pack("[I,i,I]", (json_int_t)rows, 1, (json_int_t)cols));
        json_object_set_new(weight_map, name, json_string(shard_name));
        free(through);
    }
    finish_shard(&s, dir, shard_name);
    write_json(dir, "model.safetensors.index.json", index);
    json_t *c = json_load_file(store_fixture_path(dir, "config.json"), 0, &jerr);
    assert_non_null(c);
    float eps;
    assert_true(gguf_get_f32(a, "gemma4.audio.attention.layer_norm_epsilon", &eps, &err));
    const gguf_tensor *fc = gguf_find_tensor(a, "mm.a.fc.weight");
    assert_non_null(fc);
    json_object_set_new(
        c, "audio_config",
        json_pack("{s:I,s:I,s:I,s:I,s:I,s:f}", "hidden_size",
                  (json_int_t)get_u32(a, "gemma4.audio.embedding_length"), "num_hidden_layers",
                  (json_int_t)get_u32(a, "gemma4.audio.block_count"), "num_attention_heads",
                  (json_int_t)get_u32(a, "gemma4.audio.attention.head_count"), "conv_kernel_size",
                  (json_int_t)get_u32(a, "gemma4.audio.conv_kernel_size"), "output_proj_dims",
                  (json_int_t)fc->ne[1], "rms_norm_eps", (double)eps));
    write_json(dir, "config.json", c);
    gguf_close(a);
}

/* LFM2-VL's config.json (the text model's keys under text_config, the tower's as
 * vision_config, the projector's scale and LayerNorm at the top) and processor_config.json
 * (a tile twice the position table's side, the projector's normalisation). */
static void nest_lfm2vl_config(const gguf_file *mm, const char *dir)
{
    json_error_t jerr;
    json_t *text = json_load_file(store_fixture_path(dir, "config.json"), 0, &jerr);
    assert_non_null(text);
    json_t *arches = json_incref(json_object_get(text, "architectures"));
    json_object_del(text, "architectures");
    float eps;
    corral_error err;
    assert_true(gguf_get_f32(mm, "clip.vision.attention.layer_norm_epsilon", &eps, &err));
    uint32_t scale = get_u32(mm, "clip.vision.projector.scale_factor");
    json_t *c = json_pack(
        "{s:o,s:o,s:{s:I,s:I,s:I,s:I,s:I,s:i,s:f},s:I,s:b,s:b}", "architectures", arches,
        "text_config", text, "vision_config", "hidden_size",
        (json_int_t)get_u32(mm, "clip.vision.embedding_length"), "num_hidden_layers",
        (json_int_t)get_u32(mm, "clip.vision.block_count"), "num_attention_heads",
        (json_int_t)get_u32(mm, "clip.vision.attention.head_count"), "intermediate_size",
        (json_int_t)get_u32(mm, "clip.vision.feed_forward_length"), "patch_size",
        (json_int_t)get_u32(mm, "clip.vision.patch_size"), "num_channels", 3, "layer_norm_eps",
        (double)eps, "downsample_factor", (json_int_t)scale, "projector_use_layernorm",
        gguf_find_tensor(mm, "mm.input_norm.weight") != NULL, "do_image_splitting", true);
    assert_non_null(c);
    write_json(dir, "config.json", c);
    const gguf_kv *mean = gguf_find_kv(mm, "clip.vision.image_mean");
    const gguf_kv *std = gguf_find_kv(mm, "clip.vision.image_std");
    assert_true(mean && std);
    write_json(dir, "processor_config.json",
               json_pack("{s:{s:I,s:[f,f,f],s:[f,f,f]}}", "image_processor", "tile_size",
                         (json_int_t)get_u32(mm, "clip.vision.image_size") * scale,
                         "image_mean", (double)gguf_kv_f32(mean, 0),
                         (double)gguf_kv_f32(mean, 1), (double)gguf_kv_f32(mean, 2),
                         "image_std", (double)gguf_kv_f32(std, 0), (double)gguf_kv_f32(std, 1),
                         (double)gguf_kv_f32(std, 2)));
}

/*
 * An lfm2 projector's tensors under LFM2-VL's names: its SigLIP 2 tower under
 * model.vision_tower.vision_model.* (the patch kernel as the linear layer over a patch's
 * pixels, row by row, channels innermost), the projector under model.multi_modal_projector.*.
 */
static void put_lfm2vl_tower(shard *s, json_t *weight_map, const char *shard_name,
                             const gguf_file *mm, safetensors_dtype dtype)
{
    static const char *const parts[][2] = {
        {"ln1.", "layer_norm1."},         {"ln2.", "layer_norm2."},
        {"attn_q.", "self_attn.q_proj."}, {"attn_k.", "self_attn.k_proj."},
        {"attn_v.", "self_attn.v_proj."}, {"attn_out.", "self_attn.out_proj."},
        {"ffn_up.", "mlp.fc1."},          {"ffn_down.", "mlp.fc2."},
    };
    static const char *const whole[][2] = {
        {"v.patch_embd.", "model.vision_tower.vision_model.embeddings.patch_embedding."},
        {"v.position_embd.", "model.vision_tower.vision_model.embeddings.position_embedding."},
        {"v.post_ln.", "model.vision_tower.vision_model.post_layernorm."},
        {"mm.input_norm.", "model.multi_modal_projector.layer_norm."},
        {"mm.1.", "model.multi_modal_projector.linear_1."},
        {"mm.2.", "model.multi_modal_projector.linear_2."},
    };
    for (size_t i = 0; i < gguf_n_tensors(mm); i++) {
        const gguf_tensor *t = gguf_tensor_at(mm, i);
        char name[256] = "";
        unsigned layer;
        int at = 0;
        if (sscanf(t->name, "v.blk.%u.%n", &layer, &at) == 1 && at > 0) {
            for (size_t k = 0; k < sizeof parts / sizeof parts[0] && !name[0]; k++)
                if (!strncmp(t->name + at, parts[k][0], strlen(parts[k][0])))
                    snprintf(name, sizeof name,
                             "model.vision_tower.vision_model.encoder.layers.%u.%s%s", layer,
                             parts[k][1], t->name + at + strlen(parts[k][0]));
        } else {
            for (size_t k = 0; k < sizeof whole / sizeof whole[0] && !name[0]; k++)
                if (!strncmp(t->name, whole[k][0], strlen(whole[k][0])))
                    snprintf(name, sizeof name, "%s%s", whole[k][1],
                             t->name + strlen(whole[k][0]));
        }
        if (!name[0])
            fail_msg("no LFM2-VL name for %s", t->name);
        float *x = tower_floats(t);
        uint64_t cols = (uint64_t)t->ne[0], rows = gguf_tensor_n_elems(t) / cols;
        if (!strcmp(t->name, "v.patch_embd.weight")) { /* [hidden, P * P * C], pixel-major */
            uint64_t side = (uint64_t)t->ne[0], ch = (uint64_t)t->ne[2], out = (uint64_t)t->ne[3];
            float *hwc = malloc(gguf_tensor_n_elems(t) * sizeof *hwc);
            assert_non_null(hwc);
            for (uint64_t o = 0; o < out; o++)
                for (uint64_t c = 0; c < ch; c++)
                    for (uint64_t y = 0; y < side; y++)
                        for (uint64_t px = 0; px < side; px++)
                            hwc[o * side * side * ch + (y * side + px) * ch + c] =
                                x[((o * ch + c) * side + y) * side + px];
            put_matrix(s, name, dtype, hwc, out, side * side * ch, 0, false);
            free(hwc);
        } else {
            put_matrix(s, name, t->n_dims == 1 ? SAFETENSORS_F32 : dtype, x,
                       t->n_dims == 1 ? 0 : rows, cols, 0, false);
        }
        json_object_set_new(weight_map, name, json_string(shard_name));
        free(x);
    }
}

/* GLM-OCR's config.json (the glm4 text model's keys under text_config, its trunk's layers and
 * prediction layers apart, M-RoPE sections and partial rotation in rope_parameters; the tower's
 * as vision_config; the image marks' ids) and preprocessor_config.json (normalisation, sizes). */
static void nest_glmocr_config(const gguf_file *f, const gguf_file *mm, const char *dir)
{
    json_error_t jerr;
    json_t *text = json_load_file(store_fixture_path(dir, "config.json"), 0, &jerr);
    assert_non_null(text);
    json_t *arches = json_incref(json_object_get(text, "architectures"));
    json_object_del(text, "architectures");
    uint32_t nextn = get_u32(f, "glm4.nextn_predict_layers");
    const gguf_kv *sections = gguf_find_kv(f, "glm4.rope.dimension_sections");
    float base = 0, eps = 0;
    corral_error err;
    assert_non_null(sections);
    assert_true(gguf_get_f32(f, "glm4.rope.freq_base", &base, &err));
    assert_true(gguf_get_f32(mm, "clip.vision.attention.layer_norm_epsilon", &eps, &err));
    json_object_set_new(text, "num_hidden_layers",
                        json_integer(get_u32(f, "glm4.block_count") - nextn));
    json_object_set_new(text, "num_nextn_predict_layers", json_integer(nextn));
    json_object_set_new(
        text, "rope_parameters",
        json_pack("{s:s,s:[I,I,I],s:f,s:f}", "rope_type", "default", "mrope_section",
                  (json_int_t)gguf_kv_i64(sections, 0), (json_int_t)gguf_kv_i64(sections, 1),
                  (json_int_t)gguf_kv_i64(sections, 2), "rope_theta", (double)base,
                  "partial_rotary_factor",
                  (double)get_u32(f, "glm4.rope.dimension_count") /
                      get_u32(f, "glm4.attention.key_length")));
    json_object_del(text, "rope_theta");
    json_t *c = json_pack(
        "{s:o,s:o,s:{s:I,s:I,s:I,s:I,s:I,s:I,s:i,s:I,s:I,s:f},s:i,s:i,s:i}", "architectures",
        arches, "text_config", text, "vision_config", "depth",
        (json_int_t)get_u32(mm, "clip.vision.block_count"), "hidden_size",
        (json_int_t)get_u32(mm, "clip.vision.embedding_length"), "num_heads",
        (json_int_t)get_u32(mm, "clip.vision.attention.head_count"), "image_size",
        (json_int_t)get_u32(mm, "clip.vision.image_size"), "patch_size",
        (json_int_t)get_u32(mm, "clip.vision.patch_size"), "spatial_merge_size",
        (json_int_t)get_u32(mm, "clip.vision.spatial_merge_size"), "temporal_patch_size", 2,
        "out_hidden_size", (json_int_t)get_u32(mm, "clip.vision.projection_dim"),
        "intermediate_size", (json_int_t)get_u32(mm, "clip.vision.feed_forward_length"),
        "rms_norm_eps", (double)eps, "image_token_id", 310, "image_start_token_id", 308,
        "image_end_token_id", 309);
    assert_non_null(c);
    write_json(dir, "config.json", c);
    const gguf_kv *mean = gguf_find_kv(mm, "clip.vision.image_mean");
    const gguf_kv *std = gguf_find_kv(mm, "clip.vision.image_std");
    assert_true(mean && std);
    write_json(dir, "preprocessor_config.json",
               json_pack("{s:{s:i,s:i},s:i,s:i,s:[f,f,f],s:[f,f,f]}", "size", "shortest_edge",
                         12544, "longest_edge", 9633792, "temporal_patch_size", 2,
                         "merge_size", 2, "image_mean", (double)gguf_kv_f32(mean, 0),
                         (double)gguf_kv_f32(mean, 1), (double)gguf_kv_f32(mean, 2),
                         "image_std", (double)gguf_kv_f32(std, 0), (double)gguf_kv_f32(std, 1),
                         (double)gguf_kv_f32(std, 2)));
}

/*
 * A glm4v projector's tensors under GLM-OCR's names (model.visual.*): its two temporal patch
 * kernels stacked into one Conv3D kernel [hidden, channels, 2, patch, patch], the blocks'
 * fused q/k/v as attn.qkv, the patch merger as downsample, the merger's parts.
 */
static void put_glmocr_tower(shard *s, json_t *weight_map, const char *shard_name,
                             const gguf_file *mm, safetensors_dtype dtype)
{
    static const char *const parts[][2] = {
        {"ln1.", "norm1."},          {"ln2.", "norm2."},
        {"attn_qkv.", "attn.qkv."},  {"attn_out.", "attn.proj."},
        {"attn_q_norm.", "attn.q_norm."}, {"attn_k_norm.", "attn.k_norm."},
        {"ffn_gate.", "mlp.gate_proj."}, {"ffn_up.", "mlp.up_proj."},
        {"ffn_down.", "mlp.down_proj."},
    };
    static const char *const whole[][2] = {
        {"v.patch_embd.bias", "model.visual.patch_embed.proj.bias"},
        {"v.post_ln.", "model.visual.post_layernorm."},
        {"mm.patch_merger.", "model.visual.downsample."},
        {"mm.model.fc.", "model.visual.merger.proj."},
        {"mm.post_norm.", "model.visual.merger.post_projection_norm."},
        {"mm.gate.", "model.visual.merger.gate_proj."},
        {"mm.up.", "model.visual.merger.up_proj."},
        {"mm.down.", "model.visual.merger.down_proj."},
    };
    for (size_t i = 0; i < gguf_n_tensors(mm); i++) {
        const gguf_tensor *t = gguf_tensor_at(mm, i);
        char name[256] = "";
        if (!strcmp(t->name, "v.patch_embd.weight.1"))
            continue; /* stacked with v.patch_embd.weight */
        float *x = tower_floats(t);
        uint64_t cols = (uint64_t)t->ne[0], rows = gguf_tensor_n_elems(t) / cols;
        if (!strcmp(t->name, "v.patch_embd.weight")) {
            const gguf_tensor *second = gguf_find_tensor(mm, "v.patch_embd.weight.1");
            assert_non_null(second);
            float *y = tower_floats(second);
            uint64_t area = (uint64_t)t->ne[0] * (uint64_t)t->ne[1];
            uint64_t n = gguf_tensor_n_elems(t) / area; /* outputs x channels */
            float *both = malloc(2 * gguf_tensor_n_elems(t) * sizeof *both);
            assert_non_null(both);
            for (uint64_t k = 0; k < n; k++) {
                memcpy(both + (2 * k) * area, x + k * area, area * sizeof *both);
                memcpy(both + (2 * k + 1) * area, y + k * area, area * sizeof *both);
            }
            snprintf(name, sizeof name, "model.visual.patch_embed.proj.weight");
            put_matrix(s, name, dtype, both, 2 * n, area, 0, false);
            json_object_set_new(json_object_get(s->header, name), "shape",
                                json_pack("[I,I,i,I,I]", (json_int_t)t->ne[3],
                                          (json_int_t)t->ne[2], 2, (json_int_t)t->ne[1],
                                          (json_int_t)t->ne[0]));
            json_object_set_new(weight_map, name, json_string(shard_name));
            free(both);
            free(y);
            free(x);
            continue;
        }
        unsigned layer;
        int at = 0;
        if (sscanf(t->name, "v.blk.%u.%n", &layer, &at) == 1 && at > 0) {
            for (size_t k = 0; k < sizeof parts / sizeof parts[0] && !name[0]; k++)
                if (!strncmp(t->name + at, parts[k][0], strlen(parts[k][0])))
                    snprintf(name, sizeof name, "model.visual.blocks.%u.%s%s", layer, parts[k][1],
                             t->name + at + strlen(parts[k][0]));
        } else {
            for (size_t k = 0; k < sizeof whole / sizeof whole[0] && !name[0]; k++)
                if (!strncmp(t->name, whole[k][0], strlen(whole[k][0])))
                    snprintf(name, sizeof name, "%s%s", whole[k][1],
                             t->name + strlen(whole[k][0]));
        }
        if (!name[0])
            fail_msg("no GLM-OCR name for %s", t->name);
        put_matrix(s, name, t->n_dims == 1 ? SAFETENSORS_F32 : dtype, x,
                   t->n_dims == 1 ? 0 : rows, cols, 0, false);
        if (t->n_dims == 4) /* the merger's convolution [out, in, 2, 2] */
            json_object_set_new(json_object_get(s->header, name), "shape",
                                json_pack("[I,I,I,I]", (json_int_t)t->ne[3],
                                          (json_int_t)t->ne[2], (json_int_t)t->ne[1],
                                          (json_int_t)t->ne[0]));
        json_object_set_new(weight_map, name, json_string(shard_name));
        free(x);
    }
}

/* DeepSeek-OCR's config.json: the deepseek2-ocr language model's keys under language_config
 * (its experts as DeepSeek names them), the towers' sizes under vision_config.width (SAM's
 * global blocks at llama.cpp's fixed places). */
static void nest_deepseekocr_config(const gguf_file *f, const gguf_file *mm, const char *dir)
{
    json_error_t jerr;
    json_t *text = json_load_file(store_fixture_path(dir, "config.json"), 0, &jerr);
    assert_non_null(text);
    json_t *arches = json_incref(json_object_get(text, "architectures"));
    json_object_del(text, "architectures");
    json_object_set(text, "n_routed_experts", json_object_get(text, "num_experts"));
    json_object_del(text, "num_experts");
    json_object_set_new(text, "n_shared_experts",
                        json_integer(get_u32(f, "deepseek2-ocr.expert_shared_count")));
    json_object_set_new(text, "first_k_dense_replace",
                        json_integer(get_u32(f, "deepseek2-ocr.leading_dense_block_count")));
    json_t *c = json_pack(
        "{s:o,s:o,s:{s:I,s:{s:{s:I,s:I,s:I,s:I,s:I},s:{s:[i,i,i,i],s:I,s:I,s:I}}}}",
        "architectures", arches, "language_config", text, "vision_config", "image_size", 1024,
        "width", "clip-l-14-224", "heads",
        (json_int_t)get_u32(mm, "clip.vision.attention.head_count"), "image_size",
        (json_int_t)get_u32(mm, "clip.vision.image_size"), "layers",
        (json_int_t)get_u32(mm, "clip.vision.block_count"), "patch_size",
        (json_int_t)get_u32(mm, "clip.vision.patch_size"), "width",
        (json_int_t)get_u32(mm, "clip.vision.embedding_length"), "sam_vit_b",
        "global_attn_indexes", 2, 5, 8, 11, "heads",
        (json_int_t)get_u32(mm, "clip.vision.sam.head_count"), "layers",
        (json_int_t)get_u32(mm, "clip.vision.sam.block_count"), "width",
        (json_int_t)get_u32(mm, "clip.vision.sam.embedding_length"));
    assert_non_null(c);
    write_json(dir, "config.json", c);
}

/*
 * A deepseekocr projector's tensors under DeepSeek-OCR's names: SAM under model.sam_model.*
 * (its position table [1, side, side, width], its relative position tables as rel_pos_h and
 * rel_pos_w), CLIP under model.vision_model.*, the projection as model.projector.layers, the
 * newline and the view separator as vectors beside them.
 */
static void put_deepseekocr_towers(shard *s, json_t *weight_map, const char *shard_name,
                                   const gguf_file *mm, safetensors_dtype dtype)
{
    static const char *const sam_parts[][2] = {
        {"pre_ln.", "norm1."},         {"post_ln.", "norm2."},
        {"attn.out.", "attn.proj."},   {"attn.pos_h.weight", "attn.rel_pos_h"},
        {"attn.pos_w.weight", "attn.rel_pos_w"}, {"attn.qkv.", "attn.qkv."},
        {"mlp.", "mlp."},
    };
    static const char *const clip_parts[][2] = {
        {"ln1.", "layer_norm1."},          {"ln2.", "layer_norm2."},
        {"attn_qkv.", "self_attn.qkv_proj."}, {"attn_out.", "self_attn.out_proj."},
        {"ffn_up.", "mlp.fc1."},           {"ffn_down.", "mlp.fc2."},
    };
    static const char *const whole[][2] = {
        {"v.sam.patch_embd.", "model.sam_model.patch_embed.proj."},
        {"v.sam.pos_embd.weight", "model.sam_model.pos_embed"},
        {"v.sam.neck.", "model.sam_model.neck."},
        {"v.sam.net_", "model.sam_model.net_"},
        {"v.patch_embd.", "model.vision_model.embeddings.patch_embedding."},
        {"v.class_embd", "model.vision_model.embeddings.class_embedding"},
        {"v.position_embd.", "model.vision_model.embeddings.position_embedding."},
        {"v.pre_ln.", "model.vision_model.pre_layrnorm."},
        {"mm.model.fc.", "model.projector.layers."},
        {"v.image_newline", "model.image_newline"},
        {"v.view_seperator", "model.view_seperator"},
    };
    for (size_t i = 0; i < gguf_n_tensors(mm); i++) {
        const gguf_tensor *t = gguf_tensor_at(mm, i);
        char name[256] = "";
        unsigned layer;
        int at = 0;
        if (sscanf(t->name, "v.sam.blk.%u.%n", &layer, &at) == 1 && at > 0) {
            for (size_t k = 0; k < sizeof sam_parts / sizeof sam_parts[0] && !name[0]; k++)
                if (!strncmp(t->name + at, sam_parts[k][0], strlen(sam_parts[k][0])))
                    snprintf(name, sizeof name, "model.sam_model.blocks.%u.%s%s", layer,
                             sam_parts[k][1], t->name + at + strlen(sam_parts[k][0]));
        } else if (sscanf(t->name, "v.blk.%u.%n", &layer, &at) == 1 && at > 0) {
            for (size_t k = 0; k < sizeof clip_parts / sizeof clip_parts[0] && !name[0]; k++)
                if (!strncmp(t->name + at, clip_parts[k][0], strlen(clip_parts[k][0])))
                    snprintf(name, sizeof name, "model.vision_model.transformer.layers.%u.%s%s",
                             layer, clip_parts[k][1], t->name + at + strlen(clip_parts[k][0]));
        } else {
            for (size_t k = 0; k < sizeof whole / sizeof whole[0] && !name[0]; k++)
                if (!strncmp(t->name, whole[k][0], strlen(whole[k][0])))
                    snprintf(name, sizeof name, "%s%s", whole[k][1],
                             t->name + strlen(whole[k][0]));
        }
        if (!name[0])
            fail_msg("no DeepSeek-OCR name for %s", t->name);
        float *x = tower_floats(t);
        bool vector = t->n_dims == 1 || !strcmp(t->name, "v.view_seperator");
        uint64_t cols = (uint64_t)t->ne[0], rows = gguf_tensor_n_elems(t) / cols;
        put_matrix(s, name, vector ? SAFETENSORS_F32 : dtype, x, vector ? 0 : rows,
                   vector ? gguf_tensor_n_elems(t) : cols, 0, false);
        json_t *shape = NULL;
        if (!strcmp(t->name, "v.sam.pos_embd.weight")) /* [1, side, side, width] */
            shape = json_pack("[i,I,I,I]", 1, (json_int_t)t->ne[2], (json_int_t)t->ne[1],
                              (json_int_t)t->ne[0]);
        else if (t->n_dims == 4) /* a convolution's [out, in, height, width] */
            shape = json_pack("[I,I,I,I]", (json_int_t)t->ne[3], (json_int_t)t->ne[2],
                              (json_int_t)t->ne[1], (json_int_t)t->ne[0]);
        if (shape)
            json_object_set_new(json_object_get(s->header, name), "shape", shape);
        json_object_set_new(weight_map, name, json_string(shard_name));
        free(x);
    }
}

/* Llama 3.2 Vision's config.json: the text model's keys under text_config with its
 * cross-attention layers, the tower's mllama.vision.* keys as vision_config. */
static void nest_mllama_config(const gguf_file *f, const char *dir)
{
    json_error_t jerr;
    json_t *flat = json_load_file(store_fixture_path(dir, "config.json"), 0, &jerr);
    assert_non_null(flat);
    const gguf_kv *cross = gguf_find_kv(f, "mllama.attention.cross_attention_layers");
    const gguf_kv *kept = gguf_find_kv(f, "mllama.vision.intermediate_layers_indices");
    assert_true(cross && kept);
    json_t *cross_list = json_array(), *kept_list = json_array();
    for (uint64_t i = 0; i < cross->n; i++)
        json_array_append_new(cross_list, json_integer(gguf_kv_i64(cross, i)));
    for (uint64_t i = 0; i < kept->n; i++)
        json_array_append_new(kept_list, json_integer(gguf_kv_i64(kept, i)));
    json_object_set_new(flat, "cross_attention_layers", cross_list);
    json_t *c = json_pack("{s:O,s:o}", "architectures", json_object_get(flat, "architectures"),
                          "text_config", flat);
    json_object_del(flat, "architectures");
    float eps;
    corral_error err;
    assert_true(gguf_get_f32(f, "mllama.vision.attention.layer_norm_epsilon", &eps, &err));
    json_object_set_new(
        c, "vision_config",
        json_pack("{s:I,s:I,s:o,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:f}", "num_hidden_layers",
                  (json_int_t)get_u32(f, "mllama.vision.block_count"), "num_global_layers",
                  (json_int_t)get_u32(f, "mllama.vision.global.block_count"),
                  "intermediate_layers_indices", kept_list, "hidden_size",
                  (json_int_t)get_u32(f, "mllama.vision.embedding_length"), "intermediate_size",
                  (json_int_t)get_u32(f, "mllama.vision.feed_forward_length"), "attention_heads",
                  (json_int_t)get_u32(f, "mllama.vision.attention.head_count"), "image_size",
                  (json_int_t)get_u32(f, "mllama.vision.image_size"), "patch_size",
                  (json_int_t)get_u32(f, "mllama.vision.patch_size"), "num_channels",
                  (json_int_t)get_u32(f, "mllama.vision.num_channels"), "max_num_tiles",
                  (json_int_t)get_u32(f, "mllama.vision.max_num_tiles"), "norm_eps",
                  (double)eps));
    write_json(dir, "config.json", c);
}

/* An mllama text tensor's Hugging Face name when it is a cross-attention layer's, into out;
 * false for the others. */
static bool mllama_cross_name(const char *gguf, char *out, size_t cap)
{
    unsigned layer;
    char part[64];
    if (sscanf(gguf, "blk.%u.cross_attn_%63[a-z_]", &layer, part) != 2)
        return false;
    if (!strcmp(part, "attn_gate") || !strcmp(part, "mlp_gate")) /* parameters, no .weight */
        snprintf(out, cap, "language_model.model.layers.%u.cross_attn_%s", layer, part);
    else
        snprintf(out, cap, "language_model.model.layers.%u.cross_attn.%s.weight", layer, part);
    return true;
}

/* ollama's mllama tower (v.*, mm.0.*) under Llama 3.2 Vision's names: the gates as their
 * atanh (ollama's file holds them tanh'd, the position gate as 1 - tanh and again as tanh
 * under v.tile_position_embd.gate, which is the one read), each block's Q and K transposed
 * back and in Hugging Face's row order. */
static void put_mllama_tower(shard *s, json_t *weight_map, const char *shard_name,
                             const gguf_file *f, safetensors_dtype dtype)
{
    static const char *const whole[][2] = {
        {"v.patch_embd.weight", "vision_model.patch_embedding.weight"},
        {"v.class_embd", "vision_model.class_embedding"},
        {"v.position_embd.weight", "vision_model.gated_positional_embedding.embedding"},
        {"v.tile_position_embd.gate", "vision_model.gated_positional_embedding.gate"},
        {"v.tile_position_embd.weight",
         "vision_model.gated_positional_embedding.tile_embedding.weight"},
        {"v.pre_tile_position_embd.weight",
         "vision_model.pre_tile_positional_embedding.embedding.weight"},
        {"v.pre_tile_position_embd.gate", "vision_model.pre_tile_positional_embedding.gate"},
        {"v.post_tile_position_embd.weight",
         "vision_model.post_tile_positional_embedding.embedding.weight"},
        {"v.post_tile_position_embd.gate", "vision_model.post_tile_positional_embedding.gate"},
        {"v.pre_ln.weight", "vision_model.layernorm_pre.weight"},
        {"v.pre_ln.bias", "vision_model.layernorm_pre.bias"},
        {"v.post_ln.weight", "vision_model.layernorm_post.weight"},
        {"v.post_ln.bias", "vision_model.layernorm_post.bias"},
        {"mm.0.weight", "multi_modal_projector.weight"},
        {"mm.0.bias", "multi_modal_projector.bias"},
    };
    static const char *const parts[][2] = {
        {"attn_norm", "input_layernorm"}, {"ffn_norm", "post_attention_layernorm"},
        {"attn_q", "self_attn.q_proj"},   {"attn_k", "self_attn.k_proj"},
        {"attn_v", "self_attn.v_proj"},   {"attn_output", "self_attn.o_proj"},
        {"ffn_up", "mlp.fc1"},            {"ffn_down", "mlp.fc2"},
        {"attn_gate", "gate_attn"},       {"ffn_gate", "gate_ffn"},
    };
    uint32_t heads = get_u32(f, "mllama.vision.attention.head_count");
    for (size_t i = 0; i < gguf_n_tensors(f); i++) {
        const gguf_tensor *t = gguf_tensor_at(f, i);
        if (strncmp(t->name, "v.", 2) != 0 && strncmp(t->name, "mm.", 3) != 0)
            continue;
        if (!strcmp(t->name, "v.position_embd.gate")) /* 1 - the tile gate */
            continue;
        assert_int_equal(t->type, TENSOR_TYPE_F32);
        char name[256] = "";
        for (size_t w = 0; w < sizeof whole / sizeof whole[0]; w++)
            if (!strcmp(t->name, whole[w][0]))
                snprintf(name, sizeof name, "%s", whole[w][1]);
        unsigned layer;
        char part[32], rest[16] = "";
        bool global = sscanf(t->name, "v.global.blk.%u.%31[a-z_]%15s", &layer, part, rest) >= 2;
        if (!name[0] && (global || sscanf(t->name, "v.blk.%u.%31[a-z_]%15s", &layer, part,
                                          rest) >= 2))
            for (size_t p = 0; p < sizeof parts / sizeof parts[0]; p++)
                if (!strcmp(part, parts[p][0]))
                    snprintf(name, sizeof name, "vision_model.%stransformer.layers.%u.%s%s",
                             global ? "global_" : "", layer, parts[p][1], rest);
        if (!name[0])
            fail_msg("no Hugging Face name for %s", t->name);
        uint64_t n = gguf_tensor_n_elems(t), cols = (uint64_t)t->ne[0];
        uint64_t rows = t->n_dims == 1 ? 0 : n / cols;
        float *data = malloc(n * sizeof *data);
        assert_non_null(data);
        memcpy(data, t->data, n * sizeof *data);
        bool gate = strstr(t->name, "gate") != NULL;
        bool qk = strstr(t->name, ".attn_q.") || strstr(t->name, ".attn_k.");
        for (uint64_t e = 0; gate && e < n; e++)
            data[e] = (float)atanh((double)data[e]);
        for (uint64_t r = 0; qk && r < rows; r++) /* transposed back (square) */
            for (uint64_t k = 0; k < cols; k++)
                data[r * cols + k] = ((const float *)t->data)[k * cols + r];
        put_matrix(s, name, t->n_dims == 1 || gate ? SAFETENSORS_F32 : dtype, data, rows, cols,
                   qk ? heads : 0, false);
        if (t->n_dims > 2) { /* the patch kernel: [out, channels, height, width] */
            json_t *shape = json_array();
            for (uint32_t d = t->n_dims; d-- > 0;)
                json_array_append_new(shape, json_integer(t->ne[d]));
            json_object_set_new(json_object_get(s->header, name), "shape", shape);
        }
        json_object_set_new(weight_map, name, json_string(shard_name));
        free(data);
    }
}

/* A deepseek2 layer's attn_k_b ([latent, nope] per head, heads outermost) and attn_v_b
 * ([v, latent] per head) as DeepSeek's kv_b_proj: [heads x (nope + v), latent], each head's
 * key rows then its value rows. */
static void put_deepseek_kv_b(shard *s, json_t *weight_map, const char *shard_name,
                              const gguf_file *f, const gguf_tensor *k_b, safetensors_dtype dtype)
{
    unsigned layer;
    char name[256], other[96];
    assert_int_equal(sscanf(k_b->name, "blk.%u.attn_k_b.weight", &layer), 1);
    snprintf(other, sizeof other, "blk.%u.attn_v_b.weight", layer);
    const gguf_tensor *v_b = gguf_find_tensor(f, other);
    assert_non_null(v_b);
    uint64_t nope = (uint64_t)k_b->ne[0], latent = (uint64_t)k_b->ne[1];
    uint64_t heads = (uint64_t)k_b->ne[2], v = (uint64_t)v_b->ne[1];
    assert_int_equal(v_b->ne[0], latent);
    float *kv_b = malloc(heads * (nope + v) * latent * sizeof *kv_b);
    assert_non_null(kv_b);
    const float *k = k_b->data, *vv = v_b->data;
    for (uint64_t h = 0; h < heads; h++)
        for (uint64_t j = 0; j < nope + v; j++)
            for (uint64_t l = 0; l < latent; l++)
                kv_b[(h * (nope + v) + j) * latent + l] =
                    j < nope ? k[(h * latent + l) * nope + j] : vv[(h * v + j - nope) * latent + l];
    snprintf(name, sizeof name, "model.layers.%u.self_attn.kv_b_proj.weight", layer);
    put_matrix(s, name, dtype, kv_b, heads * (nope + v), latent, 0, false);
    json_object_set_new(weight_map, name, json_string(shard_name));
    free(kv_b);
}

/* A qwen3vlmoe (llama4) layer's experts as Qwen3-VL MoE's (Llama 4's) checkpoint packs them
 * (found at gate's or down's stack, up's going with gate's): each expert's matrices
 * transposed, gate's and up's side by side in gate_up_proj ([experts, n_embd, 2 n_ff]),
 * down_proj [experts, n_ff, n_embd]. */
static void put_packed_experts(shard *s, json_t *weight_map, const char *shard_name,
                               const gguf_file *f, const gguf_tensor *t, safetensors_dtype dtype,
                               bool llama4)
{
    unsigned layer;
    char kind[8], name[256], other[96];
    assert_int_equal(sscanf(t->name, "blk.%u.ffn_%7[a-z]_exps.weight", &layer, kind), 2);
    if (strcmp(kind, "up") == 0)
        return;
    bool gate = strcmp(kind, "gate") == 0;
    snprintf(other, sizeof other, "blk.%u.ffn_up_exps.weight", layer);
    const gguf_tensor *parts[2] = {t, gate ? gguf_find_tensor(f, other) : NULL};
    assert_true(!gate || parts[1]);
    uint64_t in = (uint64_t)t->ne[0], out = (uint64_t)t->ne[1], n_exp = (uint64_t)t->ne[2];
    uint64_t width = gate ? 2 * out : out; /* the checkpoint's last dimension */
    float *packed = malloc(n_exp * in * width * sizeof *packed);
    assert_non_null(packed);
    for (uint64_t e = 0; e < n_exp; e++)
        for (uint64_t i = 0; i < in; i++)
            for (uint64_t o = 0; o < width; o++)
                packed[(e * in + i) * width + o] =
                    ((const float *)parts[o / out]->data)[(e * out + o % out) * in + i];
    snprintf(name, sizeof name,
             llama4 ? "language_model.model.layers.%u.feed_forward.experts.%s"
                    : "model.language_model.layers.%u.mlp.experts.%s",
             layer, gate ? "gate_up_proj" : "down_proj");
    put_tensor3(s, name, dtype, packed, (const uint64_t[3]){n_exp, in, width});
    json_object_set_new(weight_map, name, json_string(shard_name));
    free(packed);
}

/* Llama 4's config.json: the text model's keys under text_config (its experts'
 * intermediate_size, its dense layers' intermediate_size_mlp), the llama4 projector's as
 * vision_config (a pixel shuffle ratio of 1 / its scale factor). */
static void nest_llama4_config(const gguf_file *mm, const char *dir)
{
    json_error_t jerr;
    json_t *flat = json_load_file(store_fixture_path(dir, "config.json"), 0, &jerr);
    assert_non_null(flat);
    json_t *dense = json_incref(json_object_get(flat, "intermediate_size"));
    json_object_set(flat, "intermediate_size", json_object_get(flat, "moe_intermediate_size"));
    json_object_set_new(flat, "intermediate_size_mlp", dense);
    json_object_del(flat, "moe_intermediate_size");
    json_object_set_new(flat, "use_qk_norm", json_true());
    json_object_set_new(flat, "attention_chunk_size", json_integer(8192));
    json_t *c = json_pack("{s:O,s:o}", "architectures", json_object_get(flat, "architectures"),
                          "text_config", flat);
    json_object_del(flat, "architectures");
    float eps;
    corral_error err;
    assert_true(gguf_get_f32(mm, "clip.vision.attention.layer_norm_epsilon", &eps, &err));
    json_object_set_new(
        c, "vision_config",
        json_pack("{s:I,s:I,s:I,s:I,s:I,s:I,s:f,s:f,s:f,s:s}", "num_hidden_layers",
                  (json_int_t)get_u32(mm, "clip.vision.block_count"), "hidden_size",
                  (json_int_t)get_u32(mm, "clip.vision.embedding_length"), "intermediate_size",
                  (json_int_t)get_u32(mm, "clip.vision.feed_forward_length"),
                  "num_attention_heads",
                  (json_int_t)get_u32(mm, "clip.vision.attention.head_count"), "image_size",
                  (json_int_t)get_u32(mm, "clip.vision.image_size"), "patch_size",
                  (json_int_t)get_u32(mm, "clip.vision.patch_size"), "norm_eps", (double)eps,
                  "pixel_shuffle_ratio",
                  1.0 / get_u32(mm, "clip.vision.projector.scale_factor"), "rope_theta",
                  10000.0, "model_type", "llama4_vision_model"));
    write_json(dir, "config.json", c);
}

/* A Llama text model's Hugging Face name (name, cap bytes) with Llama 4's FFN names: its
 * router, shared expert and dense layers under feed_forward. */
static void llama4_hf_name(char *name, size_t cap)
{
    static const char *const pieces[][2] = {
        {"mlp.gate.", "feed_forward.router."},
        {"mlp.gate_proj", "feed_forward.gate_proj"},
        {"mlp.up_proj", "feed_forward.up_proj"},
        {"mlp.down_proj", "feed_forward.down_proj"},
        {"mlp.shared_experts.", "feed_forward.shared_expert."},
    };
    char out[256];
    for (size_t i = 0; i < sizeof pieces / sizeof pieces[0]; i++) {
        char *at = strstr(name, pieces[i][0]);
        if (!at)
            continue;
        snprintf(out, sizeof out, "%.*s%s%s", (int)(at - name), name, pieces[i][1],
                 at + strlen(pieces[i][0]));
        snprintf(name, cap, "%s", out);
        return;
    }
}

/* The llama4 projector's tensors under Llama 4's names (vision_model.*, the adapter MLP
 * inside the tower, the projection as multi_modal_projector.linear_1). */
static void put_llama4_tower(shard *s, json_t *weight_map, const char *shard_name,
                             const gguf_file *mm, safetensors_dtype dtype)
{
    static const char *const whole[][2] = {
        {"v.patch_embd.weight", "vision_model.patch_embedding.linear.weight"},
        {"v.class_embd", "vision_model.class_embedding"},
        {"v.position_embd.weight", "vision_model.positional_embedding_vlm"},
        {"v.pre_ln.weight", "vision_model.layernorm_pre.weight"},
        {"v.pre_ln.bias", "vision_model.layernorm_pre.bias"},
        {"v.post_ln.weight", "vision_model.layernorm_post.weight"},
        {"v.post_ln.bias", "vision_model.layernorm_post.bias"},
        {"mm.model.mlp.1.weight", "vision_model.vision_adapter.mlp.fc1.weight"},
        {"mm.model.mlp.2.weight", "vision_model.vision_adapter.mlp.fc2.weight"},
        {"mm.model.fc.weight", "multi_modal_projector.linear_1.weight"},
    };
    static const char *const parts[][2] = {
        {"ln1", "input_layernorm"},    {"ln2", "post_attention_layernorm"},
        {"attn_q", "self_attn.q_proj"}, {"attn_k", "self_attn.k_proj"},
        {"attn_v", "self_attn.v_proj"}, {"attn_out", "self_attn.o_proj"},
        {"ffn_up", "mlp.fc1"},         {"ffn_down", "mlp.fc2"},
    };
    char name[256];
    for (size_t i = 0; i < gguf_n_tensors(mm); i++) {
        const gguf_tensor *t = gguf_tensor_at(mm, i);
        assert_int_equal(t->type, TENSOR_TYPE_F32);
        uint64_t rows = t->n_dims == 1 ? 0 : (uint64_t)t->ne[t->n_dims - 1];
        uint64_t cols = gguf_tensor_n_elems(t) / (rows ? rows : 1);
        if (!tower_hf_name(t->name, whole, sizeof whole / sizeof whole[0], parts,
                           sizeof parts / sizeof parts[0], "vision_model.model.layers", name,
                           sizeof name))
            fail_msg("no Hugging Face name for %s", t->name);
        put_matrix(s, name, t->n_dims == 1 ? SAFETENSORS_F32 : dtype, t->data, rows, cols, 0,
                   false);
        json_object_set_new(weight_map, name, json_string(shard_name));
    }
}

/* config.json's keys but the architecture's moved under text_config, the projector's
 * clip.vision.* keys as vision_config, its tokens per image beside them. */
static void nest_vision_config(const gguf_file *mm, const char *dir, uint32_t tokens_per_image)
{
    json_error_t jerr;
    json_t *flat = json_load_file(store_fixture_path(dir, "config.json"), 0, &jerr);
    assert_non_null(flat);
    json_t *c = json_pack("{s:O,s:o,s:I}", "architectures", json_object_get(flat, "architectures"),
                          "text_config", flat, "mm_tokens_per_image",
                          (json_int_t)tokens_per_image);
    json_object_del(flat, "architectures");
    float eps;
    corral_error err;
    assert_true(gguf_get_f32(mm, "clip.vision.attention.layer_norm_epsilon", &eps, &err));
    json_object_set_new(
        c, "vision_config",
        json_pack("{s:I,s:I,s:I,s:I,s:I,s:I,s:f,s:s}", "num_hidden_layers",
                  (json_int_t)get_u32(mm, "clip.vision.block_count"), "hidden_size",
                  (json_int_t)get_u32(mm, "clip.vision.embedding_length"), "intermediate_size",
                  (json_int_t)get_u32(mm, "clip.vision.feed_forward_length"),
                  "num_attention_heads",
                  (json_int_t)get_u32(mm, "clip.vision.attention.head_count"),
                  "image_size", (json_int_t)get_u32(mm, "clip.vision.image_size"), "patch_size",
                  (json_int_t)get_u32(mm, "clip.vision.patch_size"), "layer_norm_eps",
                  (double)eps, "model_type", "siglip_vision_model"));
    write_json(dir, "config.json", c);
}

/* The projector's tensors into s under their Hugging Face names, at their PyTorch shapes. */
static void put_vision(shard *s, json_t *weight_map, const char *shard_name, const gguf_file *mm,
                       safetensors_dtype matrix_dtype, bool pixtral);

/* Qwen 3.5's Gated DeltaNet tensors and FFN norm: the GGUF name's piece and Hugging Face's */
static const char *const qwen35_names[][2] = {
    {"ssm_ba", "linear_attn.in_proj_ba"}, /* Qwen3-Next's */
    {"attn_qkv", "linear_attn.in_proj_qkv"}, {"attn_gate", "linear_attn.in_proj_z"},
    {"ssm_beta", "linear_attn.in_proj_b"},   {"ssm_alpha", "linear_attn.in_proj_a"},
    {"ssm_conv1d", "linear_attn.conv1d"},    {"ssm_norm", "linear_attn.norm"},
    {"ssm_out", "linear_attn.out_proj"},     {"post_attention_norm", "post_attention_layernorm"},
    {"ffn_gate_inp_shexp", "mlp.shared_expert_gate"},
    {"ffn_gate_shexp", "mlp.shared_expert.gate_proj"},
    {"ffn_up_shexp", "mlp.shared_expert.up_proj"},
    {"ffn_down_shexp", "mlp.shared_expert.down_proj"},
};

/* A qwen35 tensor's name in a Qwen3_5ForConditionalGeneration checkpoint (the text model's
 * under model.language_model.), or under model. (flat: a qwen3next one's in a
 * Qwen3NextForCausalLM checkpoint, a qwen35 one's in a Qwen3_5ForCausalLM one). */
static void qwen35_hf_name(const char *gguf, bool flat, char *out, size_t cap)
{
    const char *prefix = flat ? "model." : "model.language_model.";
    unsigned layer;
    char part[64], kind[16], plain[200];
    if (sscanf(gguf, "blk.%u.%63[a-z_0-9]", &layer, part) == 2 && strcmp(part, "ssm_a") == 0) {
        snprintf(out, cap, "%slayers.%u.linear_attn.A_log", prefix, layer);
        return;
    }
    if (sscanf(gguf, "blk.%u.%63[a-z_0-9].%15s", &layer, part, kind) == 3) {
        if (strcmp(part, "ssm_dt") == 0) {
            snprintf(out, cap, "%slayers.%u.linear_attn.dt_bias", prefix, layer);
            return;
        }
        for (size_t i = 0; i < sizeof qwen35_names / sizeof qwen35_names[0]; i++)
            if (strcmp(part, qwen35_names[i][0]) == 0) {
                snprintf(out, cap, "%slayers.%u.%s.%s", prefix, layer, qwen35_names[i][1],
                         kind);
                return;
            }
    }
    hf_name(gguf, false, false, false, false, false, plain, sizeof plain);
    if (strncmp(plain, "model.", 6) == 0)
        snprintf(out, cap, "%s%s", prefix, plain + 6);
    else
        snprintf(out, cap, "%s", plain);
}

/*
 * A qwen35 tensor as its checkpoint holds it: value heads grouped by key head where the GGUF
 * tiles them (the GGUF's value head v * key_heads + k is the checkpoint's k * per_key + v;
 * rows, or columns of ssm_out, ssm_a and ssm_dt), A_log = log(-a), the norms but ssm_norm as
 * w - 1, the convolution [channels, 1, kernel].
 */
static void put_qwen35(shard *s, const char *name, const gguf_file *f, const gguf_tensor *t,
                       safetensors_dtype dtype)
{
    gguf_str arch;
    corral_error err;
    char key[96];
    assert_true(gguf_get_str(f, "general.architecture", &arch, &err));
#define K(suffix) (snprintf(key, sizeof key, "%.*s." suffix, (int)arch.size, arch.data), key)
    uint32_t nk = get_u32(f, K("ssm.group_count"));
    uint32_t nv = get_u32(f, K("ssm.time_step_rank"));
    uint32_t hk = get_u32(f, K("ssm.state_size"));
    uint32_t hv = get_u32(f, K("ssm.inner_size")) / nv, per_key = nv / nk;
#undef K
    uint64_t cols = (uint64_t)t->ne[0], rows = t->n_dims == 1 ? 1 : (uint64_t)t->ne[1];
    const float *in = t->data;
    float *out = malloc(rows * cols * sizeof *out);
    assert_non_null(out);
    memcpy(out, in, rows * cols * sizeof *out);
    const char *part = strncmp(t->name, "blk.", 4) == 0 ? strchr(t->name + 4, '.') + 1 : "";
    uint64_t first = 0, head = 1;
    bool next = arch.size == 9 && memcmp(arch.data, "qwen3next", 9) == 0;
    bool columns = false, reordered = !next; /* Qwen3-Next keeps them grouped */
    if (!strcmp(part, "attn_qkv.weight") || !strcmp(part, "ssm_conv1d.weight"))
        first = 2 * (uint64_t)nk * hk, head = hv;
    else if (!strcmp(part, "attn_gate.weight"))
        head = hv;
    else if (!strcmp(part, "ssm_out.weight"))
        head = hv, columns = true;
    else if (!strcmp(part, "ssm_a") || !strcmp(part, "ssm_dt.bias"))
        columns = true;
    else if (strcmp(part, "ssm_beta.weight") != 0 && strcmp(part, "ssm_alpha.weight") != 0)
        reordered = false;
    for (uint64_t g = 0; reordered && g < (uint64_t)nv * head; g++) {
        uint64_t v = g / head / nk, k = g / head % nk;
        uint64_t h = first + (k * per_key + v) * head + g % head; /* the checkpoint's */
        for (uint64_t o = 0; o < (columns ? rows : cols); o++) {
            if (columns)
                out[o * cols + h] = in[o * cols + first + g];
            else
                out[h * cols + o] = in[(first + g) * cols + o];
        }
    }
    size_t len = strlen(t->name);
    bool norm = len > 12 && !strcmp(t->name + len - 12, "_norm.weight") &&
                !strstr(t->name, "ssm_norm");
    for (uint64_t e = 0; e < rows * cols; e++) {
        if (!strcmp(part, "ssm_a"))
            out[e] = logf(-out[e]);
        if (norm)
            out[e] -= 1.0f;
    }
    bool row = !strcmp(part, "ffn_gate_inp_shexp.weight"); /* a matrix of one row */
    put_matrix(s, name, t->n_dims == 1 && !row ? SAFETENSORS_F32 : dtype, out,
               t->n_dims == 1 && !row ? 0 : rows, cols, 0, false);
    if (!strcmp(part, "ssm_conv1d.weight"))
        json_object_set_new(json_object_get(s->header, name), "shape",
                            json_pack("[I,i,I]", (json_int_t)rows, 1, (json_int_t)cols));
    if (!strcmp(part, "ffn_gate_inp_shexp.weight")) /* one row */
        json_object_set_new(json_object_get(s->header, name), "shape",
                            json_pack("[i,I]", 1, (json_int_t)cols));
    free(out);
}

/* A qwen3next layer's attn_qkv (every key head's q, then k, then v) and attn_gate (z) as the
 * checkpoint fuses them: in_proj_qkvz, per key head its q, k, its value heads' v, then z. */
static void put_qwen3next_qkvz(shard *s, const char *name, const gguf_file *f,
                               const gguf_tensor *qkv, safetensors_dtype dtype)
{
    uint32_t nk = get_u32(f, "qwen3next.ssm.group_count");
    uint64_t hk = get_u32(f, "qwen3next.ssm.state_size");
    uint64_t v_per_key = get_u32(f, "qwen3next.ssm.inner_size") / nk;
    unsigned layer;
    char gate_name[96];
    assert_int_equal(sscanf(qkv->name, "blk.%u.", &layer), 1);
    snprintf(gate_name, sizeof gate_name, "blk.%u.attn_gate.weight", layer);
    const gguf_tensor *gate = gguf_find_tensor(f, gate_name);
    assert_non_null(gate);
    uint64_t cols = (uint64_t)qkv->ne[0], group = 2 * hk + 2 * v_per_key;
    const float *q = qkv->data, *z = gate->data;
    float *out = malloc(nk * group * cols * sizeof *out);
    assert_non_null(out);
    for (uint64_t h = 0; h < nk; h++) {
        float *g = out + h * group * cols;
        memcpy(g, q + h * hk * cols, hk * cols * sizeof *out);                    /* q */
        memcpy(g + hk * cols, q + (nk + h) * hk * cols, hk * cols * sizeof *out); /* k */
        memcpy(g + 2 * hk * cols, q + (2 * nk * hk + h * v_per_key) * cols,
               v_per_key * cols * sizeof *out);                                   /* v */
        memcpy(g + (2 * hk + v_per_key) * cols, z + h * v_per_key * cols,
               v_per_key * cols * sizeof *out);                                   /* z */
    }
    put_matrix(s, name, dtype, out, nk * group, cols, 0, false);
    free(out);
}

/* A qwen35moe layer's experts as its checkpoint packs them (found at gate's or down's, up's
 * going with gate's): gate_up_proj [experts, 2 n_ff, n_embd], each expert's gate rows then its
 * up rows, and down_proj [experts, n_embd, n_ff]. */
static void put_qwen35_experts(shard *s, json_t *weight_map, const char *shard_name,
                               const gguf_file *f, const gguf_tensor *t, safetensors_dtype dtype,
                               bool flat)
{
    unsigned layer;
    char kind[8], name[256], up_name[96];
    assert_int_equal(sscanf(t->name, "blk.%u.ffn_%7[a-z]_exps", &layer, kind), 2);
    if (!strcmp(kind, "up"))
        return;
    uint64_t cols = (uint64_t)t->ne[0], rows = (uint64_t)t->ne[1], n_exp = (uint64_t)t->ne[2];
    bool down = !strcmp(kind, "down");
    snprintf(up_name, sizeof up_name, "blk.%u.ffn_up_exps.weight", layer);
    const gguf_tensor *up = down ? NULL : gguf_find_tensor(f, up_name);
    assert_true(down || up);
    uint64_t fused = down ? 1 : 2;
    float *out = malloc(n_exp * fused * rows * cols * sizeof *out);
    assert_non_null(out);
    for (uint64_t e = 0; e < n_exp; e++)
        for (uint64_t p = 0; p < fused; p++)
            memcpy(out + (e * fused + p) * rows * cols,
                   (const float *)(p ? up : t)->data + e * rows * cols,
                   rows * cols * sizeof *out);
    snprintf(name, sizeof name, "model.%slayers.%u.mlp.experts.%s",
             flat ? "" : "language_model.", layer, down ? "down_proj" : "gate_up_proj");
    uint64_t shape[3] = {n_exp, fused * rows, cols};
    put_tensor3(s, name, dtype, out, shape);
    json_object_set_new(weight_map, name, json_string(shard_name));
    free(out);
}

/* EmbeddingGemma's projection dense_N.weight as the N_Dense module: its config.json and
 * linear.weight in its own model.safetensors. */
static void put_dense_module(const gguf_file *f, unsigned n, const char *dir,
                             safetensors_dtype dtype)
{
    char name[64];
    snprintf(name, sizeof name, "dense_%u.weight", n);
    const gguf_tensor *t = gguf_find_tensor(f, name);
    assert_non_null(t);
    uint64_t in = (uint64_t)t->ne[0], out = (uint64_t)t->ne[1];
    snprintf(name, sizeof name, "%u_Dense/config.json", n);
    write_json(dir, name, json_pack("{s:I,s:I,s:b,s:s}", "in_features", (json_int_t)in,
                                    "out_features", (json_int_t)out, "bias", false,
                                    "activation_function",
                                    "torch.nn.modules.linear.Identity"));
    shard s = {.header = json_object(), .data = tmpfile()};
    assert_non_null(s.data);
    put_matrix(&s, "linear.weight", dtype, t->data, out, in, 0, false);
    snprintf(name, sizeof name, "%u_Dense/model.safetensors", n);
    finish_shard(&s, dir, name);
}

/*
 * A Nemotron-H tensor as its checkpoint holds it: A as A_log = log(-A), A, D and the gated
 * norm (one row per group in the GGUF) as vectors, the convolution [channels, 1, taps].
 */
static void put_nemotron_h(shard *s, const char *name, const gguf_tensor *t,
                           safetensors_dtype dtype)
{
    uint64_t n = gguf_tensor_n_elems(t), cols = (uint64_t)t->ne[0];
    bool a = strstr(t->name, ".ssm_a") != NULL;
    if (a || strstr(t->name, ".ssm_d") || strstr(t->name, ".ssm_norm.") || t->n_dims == 1) {
        float *v = malloc(n * sizeof *v);
        assert_non_null(v);
        for (uint64_t i = 0; i < n; i++)
            v[i] = a ? logf(-((const float *)t->data)[i]) : ((const float *)t->data)[i];
        put_matrix(s, name, SAFETENSORS_F32, v, 0, n, 0, false);
        free(v);
        return;
    }
    put_matrix(s, name, dtype, t->data, n / cols, cols, 0, false);
    if (strstr(t->name, ".ssm_conv1d."))
        json_object_set_new(json_object_get(s->header, name), "shape",
                            json_pack("[I,i,I]", (json_int_t)(n / cols), 1, (json_int_t)cols));
}

/*
 * sentence-transformers' modules of an encoder: its pooling_type (1 mean, 2 CLS) in
 * 1_Pooling/config.json, EmbeddingGemma's projections as its 2_Dense and 3_Dense modules, then
 * a Normalize module; and what a BertModel checkpoint holds that the GGUF leaves out: I64
 * position ids and the pooler.
 */
static void put_sentence_transformers(const gguf_file *f, const char *arch, shard *s,
                                      json_t *weight_map, const char *shard_name,
                                      const char *dir, safetensors_dtype dtype)
{
    char key[96];
    snprintf(key, sizeof key, "%s.pooling_type", arch);
    uint32_t pooling = get_u32(f, key);
    bool bert = strcmp(arch, "bert") == 0, gemma = strcmp(arch, "gemma-embedding") == 0;
    json_t *modules = json_pack("[{s:s,s:s},{s:s,s:s}]", "type",
                                "sentence_transformers.models.Transformer", "path", "", "type",
                                "sentence_transformers.models.Pooling", "path", "1_Pooling");
    for (unsigned n = 2; gemma && n <= 3; n++) {
        char path[16];
        snprintf(path, sizeof path, "%u_Dense", n);
        json_array_append_new(modules, json_pack("{s:s,s:s}", "type",
                                                 "sentence_transformers.models.Dense", "path",
                                                 path));
        put_dense_module(f, n, dir, dtype);
    }
    json_array_append_new(modules, json_pack("{s:s,s:s}", "type",
                                             "sentence_transformers.models.Normalize", "path",
                                             "4_Normalize"));
    write_json(dir, "modules.json", modules);
    write_json(dir, "1_Pooling/config.json",
               json_pack("{s:b,s:b,s:b}", "pooling_mode_cls_token", pooling == 2,
                         "pooling_mode_mean_tokens", pooling == 1, "pooling_mode_max_tokens",
                         false));
    if (!bert)
        return;
    uint64_t n = 16, ids[16], shape[2] = {1, 16};
    for (uint64_t i = 0; i < n; i++)
        ids[i] = i;
    put_bytes(s, "embeddings.position_ids", (const uint8_t *)ids, sizeof ids, shape, 2);
    json_object_set_new(json_object_get(s->header, "embeddings.position_ids"), "dtype",
                        json_string("I64"));
    static const float pooler[4] = {1, 2, 3, 4};
    put_matrix(s, "pooler.dense.weight", SAFETENSORS_F32, pooler, 2, 2, 0, false);
    put_matrix(s, "pooler.dense.bias", SAFETENSORS_F32, pooler, 0, 2, 0, false);
    static const char *const names[] = {"embeddings.position_ids", "pooler.dense.weight",
                                        "pooler.dense.bias"};
    for (size_t i = 0; i < 3; i++)
        json_object_set_new(weight_map, names[i], json_string(shard_name));
}

static void write_checkpoint(const char *gguf_path, const char *dir, const char *hf_arch,
                             safetensors_dtype matrix_dtype, const char *pre_regex,
                             const char *mmproj_path, uint32_t tokens_per_image,
                             const char *experts_path)
{
    corral_error err;
    gguf_file *f = gguf_open(gguf_path, &err);
    if (!f)
        fail_msg("%s", err.message);
    gguf_file *mm = mmproj_path ? gguf_open(mmproj_path, &err) : NULL;
    if (mmproj_path && !mm)
        fail_msg("%s", err.message);
    gguf_file *experts = experts_path ? gguf_open(experts_path, &err) : NULL;
    if (experts_path && !experts)
        fail_msg("%s", err.message);
    write_config(f, dir, hf_arch);
    bool pixtral = mm && strcmp(hf_arch, "Mistral3ForConditionalGeneration") == 0;
    bool gemma4v = mm && strcmp(hf_arch, "Gemma4ForConditionalGeneration") == 0;
    bool lfm2vl = mm && strcmp(hf_arch, "Lfm2VlForConditionalGeneration") == 0;
    bool glmocr = mm && strcmp(hf_arch, "GlmOcrForConditionalGeneration") == 0;
    bool dsocr = mm && strcmp(hf_arch, "DeepseekOCRForCausalLM") == 0;
    bool qwen25vl = mm && strcmp(hf_arch, "Qwen2_5_VLForConditionalGeneration") == 0;
    bool qwen3vl = mm && strncmp(hf_arch, "Qwen3VL", 7) == 0;
    bool llama4 = mm && strcmp(hf_arch, "Llama4ForConditionalGeneration") == 0;
    /* Llama 3.2 Vision: text and tower in f, as ollama's file holds them */
    bool mllama = strcmp(hf_arch, "MllamaForConditionalGeneration") == 0;
    if (gemma4v)
        nest_gemma4_vision_config(mm, dir);
    else if (lfm2vl)
        nest_lfm2vl_config(mm, dir);
    else if (glmocr)
        nest_glmocr_config(f, mm, dir);
    else if (dsocr)
        nest_deepseekocr_config(f, mm, dir);
    else if (pixtral)
        nest_pixtral_config(f, mm, dir);
    else if (qwen25vl)
        nest_qwen25vl_config(f, mm, dir);
    else if (qwen3vl)
        nest_qwen3vl_config(f, mm, dir);
    else if (llama4)
        nest_llama4_config(mm, dir);
    else if (mllama)
        nest_mllama_config(f, dir);
    else if (mm)
        nest_vision_config(mm, dir, tokens_per_image);
    write_tokenizer(f, dir, pre_regex);
    gguf_str arch;
    assert_true(gguf_get_str(f, "general.architecture", &arch, &err));
    bool llama = arch.size == 5 && memcmp(arch.data, "llama", 5) == 0;
    bool gemma3n = arch.size == 7 && memcmp(arch.data, "gemma3n", 7) == 0;
    bool gemma4 = arch.size == 6 && memcmp(arch.data, "gemma4", 6) == 0;
    /* Gemma's norms but Gemma 3n's and Gemma 4's, which scale by w */
    bool gemma = arch.size >= 5 && memcmp(arch.data, "gemma", 5) == 0 && !gemma3n && !gemma4;
    bool sandwich = gemma && arch.size == 6; /* gemma2, gemma3 */
    bool phi3 = arch.size == 4 && memcmp(arch.data, "phi3", 4) == 0;
    bool gptoss = arch.size == 7 && memcmp(arch.data, "gpt-oss", 7) == 0;
    bool starcoder2 = arch.size == 10 && memcmp(arch.data, "starcoder2", 10) == 0;
    bool olmo2 = arch.size == 5 && memcmp(arch.data, "olmo2", 5) == 0;
    bool qwen35 = arch.size >= 6 && memcmp(arch.data, "qwen35", 6) == 0; /* and qwen35moe */
    bool next = arch.size == 9 && memcmp(arch.data, "qwen3next", 9) == 0;
    bool deepseek = arch.size == 9 && memcmp(arch.data, "deepseek2", 9) == 0;
    bool laguna = arch.size == 6 && memcmp(arch.data, "laguna", 6) == 0;
    bool qwen35_flat = qwen35 && strstr(hf_arch, "ForCausalLM"); /* no language_model. */
    bool bert = arch.size == 4 && memcmp(arch.data, "bert", 4) == 0;
    bool nomic = arch.size >= 10 && memcmp(arch.data, "nomic-bert", 10) == 0;
    bool nomic_moe = nomic && arch.size > 10; /* nomic-bert-moe */
    bool embedding_gemma = arch.size == 15 && memcmp(arch.data, "gemma-embedding", 15) == 0;
    bool lfm2 = arch.size >= 4 && memcmp(arch.data, "lfm2", 4) == 0; /* and lfm2moe */
    bool nemotron = arch.size >= 10 && memcmp(arch.data, "nemotron_h", 10) == 0; /* and _moe */
    /* Llama's derivatives keep Hugging Face's rotated halves too */
    bool permuted = llama || (arch.size == 7 && memcmp(arch.data, "granite", 7) == 0) ||
                    (arch.size == 7 && memcmp(arch.data, "smollm3", 7) == 0) || pixtral ||
                    (arch.size == 6 && memcmp(arch.data, "mllama", 6) == 0) ||
                    (arch.size == 8 && memcmp(arch.data, "mistral3", 8) == 0);
    sandwich = sandwich || olmo2 || gemma3n || embedding_gemma;
    char key[96];
    snprintf(key, sizeof key, "%.*s.attention.head_count", (int)arch.size, arch.data);
    uint32_t heads = layer_max(f, key);
    snprintf(key, sizeof key, "%.*s.attention.head_count_kv", (int)arch.size, arch.data);
    uint32_t kv_heads = layer_max(f, key);
    static const char *const shard_names[] = {"model-00001-of-00002.safetensors",
                                              "model-00002-of-00002.safetensors"};
    shard shards[2];
    json_t *weight_map = json_object();
    for (int s = 0; s < 2; s++) {
        shards[s].header = json_object();
        shards[s].data = tmpfile();
        shards[s].size = 0;
        assert_non_null(shards[s].data);
    }
    size_t n = gguf_n_tensors(f);
    for (size_t i = 0; i < n; i++) {
        const gguf_tensor *t = gguf_tensor_at(f, i);
        char name[256];
        if (strncmp(t->name, "rope_factors_", 13) == 0)
            continue; /* config.json's rope_scaling holds them */
        /* mllama's tower goes apart (put_mllama_tower); its rope_freqs are not made from a
         * rope_scaling */
        if (mllama && (!strncmp(t->name, "v.", 2) || !strncmp(t->name, "mm.", 3) ||
                       !strcmp(t->name, "rope_freqs.weight")))
            continue;
        if (strncmp(t->name, "dense_", 6) == 0)
            continue; /* EmbeddingGemma's: sentence-transformers' Dense modules hold them */
        if (gemma4 && strcmp(t->name, "rope_freqs.weight") != 0) /* (config.json makes those) */
            put_gemma4(&shards[i < n / 2 ? 0 : 1], weight_map, shard_names[i < n / 2 ? 0 : 1], f,
                       t, matrix_dtype, strstr(hf_arch, "ForCausalLM") != NULL);
        if (gemma4)
            continue;
        if (gptoss && strstr(t->name, "_exps.")) {
            const gguf_tensor *e = experts ? gguf_find_tensor(experts, t->name) : t;
            assert_non_null(e);
            put_gptoss_experts(&shards[i < n / 2 ? 0 : 1], weight_map,
                               shard_names[i < n / 2 ? 0 : 1], experts ? experts : f, e,
                               matrix_dtype);
            continue;
        }
        if (deepseek && strstr(t->name, ".attn_v_b.")) /* in kv_b_proj, with attn_k_b */
            continue;
        if (deepseek && strstr(t->name, ".attn_k_b.")) {
            put_deepseek_kv_b(&shards[i < n / 2 ? 0 : 1], weight_map,
                              shard_names[i < n / 2 ? 0 : 1], f, t, matrix_dtype);
            continue;
        }
        if ((qwen3vl || llama4) && t->n_dims == 3) {
            put_packed_experts(&shards[i < n / 2 ? 0 : 1], weight_map,
                               shard_names[i < n / 2 ? 0 : 1], f, t, matrix_dtype, llama4);
            continue;
        }
        if (qwen35 && t->n_dims == 3) {
            put_qwen35_experts(&shards[i < n / 2 ? 0 : 1], weight_map,
                               shard_names[i < n / 2 ? 0 : 1], f, t, matrix_dtype,
                               qwen35_flat);
            continue;
        }
        if (next && strstr(t->name, ".attn_gate.")) /* in in_proj_qkvz, with attn_qkv */
            continue;
        if (next && strstr(t->name, ".attn_qkv.")) {
            snprintf(name, sizeof name, "model.layers.%.*s.linear_attn.in_proj_qkvz.weight",
                     (int)strcspn(t->name + 4, "."), t->name + 4);
            put_qwen3next_qkvz(&shards[i < n / 2 ? 0 : 1], name, f, t, matrix_dtype);
            json_object_set_new(weight_map, name, json_string(shard_names[i < n / 2 ? 0 : 1]));
            continue;
        }
        if (qwen35 || (next && t->n_dims < 3)) {
            qwen35_hf_name(t->name, next || qwen35_flat, name, sizeof name);
            put_qwen35(&shards[i < n / 2 ? 0 : 1], name, f, t, matrix_dtype);
            json_object_set_new(weight_map, name, json_string(shard_names[i < n / 2 ? 0 : 1]));
            continue;
        }
        if (gemma3n && t->n_dims == 3) { /* the AltUp projections: one matrix each */
            uint64_t side = (uint64_t)t->ne[0];
            for (int64_t k = 0; k < t->ne[2]; k++) {
                snprintf(name, sizeof name, "model.language_model.%s.%lld.weight",
                         strncmp(t->name, "altup_proj.", 11) == 0 ? "altup_projections"
                                                                  : "altup_unembed_projections",
                         (long long)k);
                put_matrix(&shards[i < n / 2 ? 0 : 1], name, matrix_dtype,
                           (const float *)t->data + (uint64_t)k * side * side, side, side, 0,
                           false);
                json_object_set_new(weight_map, name, json_string(shard_names[i < n / 2 ? 0 : 1]));
            }
            continue;
        }
        if (nomic_moe && t->n_dims == 3) {
            put_nomic_experts(&shards[i < n / 2 ? 0 : 1], weight_map,
                              shard_names[i < n / 2 ? 0 : 1], t, matrix_dtype);
            continue;
        }
        if (t->n_dims == 3) { /* experts: one matrix each */
            put_experts(&shards[i < n / 2 ? 0 : 1], weight_map, shard_names[i < n / 2 ? 0 : 1],
                        t,
                        llama      ? EXPERTS_MIXTRAL
                        : lfm2     ? EXPERTS_LFM2
                        : nemotron ? EXPERTS_NEMOTRON_H
                                   : EXPERTS_QWEN,
                        matrix_dtype);
            continue;
        }
        if (nemotron) {
            nemotron_h_hf_name(t->name, name, sizeof name);
            put_nemotron_h(&shards[i < n / 2 ? 0 : 1], name, t, matrix_dtype);
            json_object_set_new(weight_map, name, json_string(shard_names[i < n / 2 ? 0 : 1]));
            continue;
        }
        bool cross = mllama && mllama_cross_name(t->name, name, sizeof name);
        if (bert)
            bert_hf_name(t->name, name, sizeof name);
        else if (nomic)
            nomic_hf_name(t->name, nomic_moe, name, sizeof name);
        else if (lfm2)
            lfm2_hf_name(t->name, name, sizeof name);
        else if (laguna && laguna_hf_name(t->name, name, sizeof name))
            ;
        else if (glmocr && glmocr_hf_name(t->name, name, sizeof name))
            ;
        else if (!cross && (!gemma3n || !gemma3n_hf_name(t->name, name, sizeof name)))
            hf_name(t->name, sandwich, phi3, llama, gptoss, starcoder2, name, sizeof name);
        if (embedding_gemma) /* its text model is saved without "model." */
            memmove(name, name + 6, strlen(name + 6) + 1);
        if (llama4) /* its FFN as feed_forward.* */
            llama4_hf_name(name, sizeof name);
        if (gemma3n && strncmp(name, "model.language_model.", 21) != 0) {
            memmove(name + strlen("model.language_model."), name + strlen("model."),
                    strlen(name + strlen("model.")) + 1);
            memcpy(name, "model.language_model.", strlen("model.language_model."));
        }
        if ((qwen3vl || lfm2vl || glmocr) && strncmp(name, "model.", 6) == 0) { /* newer */
            memmove(name + strlen("model.language_model."), name + strlen("model."),
                    strlen(name + strlen("model.")) + 1);
            memcpy(name, "model.language_model.", strlen("model.language_model."));
        } else if ((mm && !qwen3vl && !lfm2vl && !glmocr && !dsocr) ||
                   (mllama && !cross)) { /* under language_model., as older
                                                              * transformers saved it */
            memmove(name + strlen("language_model."), name, strlen(name) + 1);
            memcpy(name, "language_model.", strlen("language_model."));
        }
        uint32_t permute = 0;
        if (permuted && (strstr(t->name, ".attn_q.weight") ||
                         strstr(t->name, ".cross_attn_q_proj.weight")))
            permute = heads;
        if (permuted && (strstr(t->name, ".attn_k.weight") ||
                         strstr(t->name, ".cross_attn_k_proj.weight")))
            permute = kv_heads;
        shard *s = &shards[i < n / 2 ? 0 : 1];
        uint64_t cols = (uint64_t)t->ne[0];
        const float *data = t->data;
        float *owned = NULL;
        if (t->type == TENSOR_TYPE_F16) { /* (gemma3n's per-layer embeddings) */
            assert_non_null(owned = malloc(gguf_tensor_n_elems(t) * sizeof *owned));
            for (uint64_t e = 0; e < gguf_tensor_n_elems(t); e++)
                owned[e] = quant_f16_to_f32(((const uint16_t *)t->data)[e]);
            data = owned;
        } else {
            assert_int_equal(t->type, TENSOR_TYPE_F32);
        }
        if (glmocr && (strstr(t->name, ".attn_q.") || strstr(t->name, ".attn_k.")))
            data = owned = glmocr_interleaved(f, t); /* GLM's pairs, before NeoX's */
        if (pixtral && strcmp(t->name, "token_embd.weight") == 0) {
            /* Mistral 3 keeps [IMG_BREAK]'s vector as that token's embedding */
            const gguf_tensor *brk = gguf_find_tensor(mm, "v.token_embd.img_break");
            assert_non_null(brk);
            assert_int_equal(brk->ne[0], cols);
            assert_non_null(owned = malloc(t->size_bytes));
            memcpy(owned, t->data, t->size_bytes);
            memcpy(owned + token_id(f, "[IMG_BREAK]") * cols, brk->data, brk->size_bytes);
            data = owned;
        }
        /* Gemma's checkpoints keep norms as w - 1 */
        put_matrix(s, name, t->n_dims == 1 ? SAFETENSORS_F32 : matrix_dtype, data,
                   t->n_dims == 1 ? 0 : gguf_tensor_n_elems(t) / cols, cols, permute,
                   gemma && strstr(t->name, "_norm.weight") != NULL);
        free(owned);
        if (lfm2 && strstr(t->name, ".shortconv.conv.")) /* [channels, 1, taps] */
            json_object_set_new(json_object_get(s->header, name), "shape",
                                json_pack("[I,i,I]", (json_int_t)t->ne[1], 1,
                                          (json_int_t)t->ne[0]));
        json_object_set_new(weight_map, name, json_string(shard_names[i < n / 2 ? 0 : 1]));
    }
    if (gemma4v)
        put_gemma4_tower(&shards[1], weight_map, shard_names[1], mm, matrix_dtype);
    else if (lfm2vl)
        put_lfm2vl_tower(&shards[1], weight_map, shard_names[1], mm, matrix_dtype);
    else if (glmocr)
        put_glmocr_tower(&shards[1], weight_map, shard_names[1], mm, matrix_dtype);
    else if (dsocr)
        put_deepseekocr_towers(&shards[1], weight_map, shard_names[1], mm, matrix_dtype);
    else if (qwen25vl)
        put_qwen25vl_tower(&shards[1], weight_map, shard_names[1], mm, matrix_dtype);
    else if (qwen3vl)
        put_qwen3vl_tower(&shards[1], weight_map, shard_names[1], mm, matrix_dtype);
    else if (llama4)
        put_llama4_tower(&shards[1], weight_map, shard_names[1], mm, matrix_dtype);
    else if (mllama)
        put_mllama_tower(&shards[1], weight_map, shard_names[1], f, matrix_dtype);
    else if (mm)
        put_vision(&shards[1], weight_map, shard_names[1], mm, matrix_dtype, pixtral);
    if (bert || nomic || embedding_gemma)
        put_sentence_transformers(f, bert        ? "bert"
                                     : nomic_moe ? "nomic-bert-moe"
                                     : nomic     ? "nomic-bert"
                                                 : "gemma-embedding",
                                  &shards[1], weight_map, shard_names[1], dir, matrix_dtype);
    if (gemma4 && !strstr(hf_arch, "ForCausalLM") && !g_gemma4_audio) {
        /* its towers: left out without audio_config */
        static const float dummy[4] = {1, 2, 3, 4};
        static const char *const towers[] = {
            "model.audio_tower.layers.0.self_attn.q_proj.linear.weight",
            "model.embed_audio.embedding_projection.weight",
            "model.language_model.embedding_post_projection_norm.weight"};
        for (size_t i = 0; i < 3; i++) {
            put_matrix(&shards[1], towers[i], matrix_dtype, dummy, 2, 2, 0, false);
            json_object_set_new(weight_map, towers[i], json_string(shard_names[1]));
        }
    }
    if (gemma3n) { /* its towers: left out */
        static const float dummy[4] = {1, 2, 3, 4};
        static const char *const towers[] = {"model.vision_tower.timm_model.stem.conv.weight",
                                             "model.audio_tower.conformer.0.norm.weight"};
        for (size_t i = 0; i < 2; i++) {
            put_matrix(&shards[1], towers[i], matrix_dtype, dummy, 2, 2, 0, false);
            json_object_set_new(weight_map, towers[i], json_string(shard_names[1]));
        }
    }
    if (deepseek) { /* a multi-token prediction layer past the model's: left out */
        static const float dummy[4] = {1, 2, 3, 4};
        char mtp[96];
        snprintf(mtp, sizeof mtp, "model.layers.%u.eh_proj.weight",
                 get_u32(f, "deepseek2.block_count"));
        put_matrix(&shards[1], mtp, matrix_dtype, dummy, 2, 2, 0, false);
        json_object_set_new(weight_map, mtp, json_string(shard_names[1]));
    }
    if (nemotron) { /* a multi-token prediction layer's: left out */
        static const float dummy[4] = {1, 2, 3, 4};
        put_matrix(&shards[1], "mtp.layers.0.mixer.q_proj.weight", matrix_dtype, dummy, 2, 2, 0,
                   false);
        json_object_set_new(weight_map, "mtp.layers.0.mixer.q_proj.weight",
                            json_string(shard_names[1]));
    }
    if (qwen35 || next) { /* a vision tower's and a multi-token prediction layer's: left out */
        static const float dummy[4] = {1, 2, 3, 4};
        static const char *const skipped[] = {"model.visual.blocks.0.attn.qkv.weight",
                                              "mtp.fc.weight"};
        for (size_t i = 0; i < 2; i++) {
            put_matrix(&shards[1], skipped[i], matrix_dtype, dummy, 2, 2, 0, false);
            json_object_set_new(weight_map, skipped[i], json_string(shard_names[1]));
        }
    }
    for (int s = 0; s < 2; s++)
        finish_shard(&shards[s], dir, shard_names[s]);
    write_json(dir, "model.safetensors.index.json",
               json_pack("{s:{s:i},s:o}", "metadata", "total_size", 0, "weight_map", weight_map));
    if (mm)
        gguf_close(mm);
    if (experts)
        gguf_close(experts);
    gguf_close(f);
}

static void put_vision(shard *s, json_t *weight_map, const char *shard_name, const gguf_file *mm,
                       safetensors_dtype matrix_dtype, bool pixtral)
{
    uint32_t heads = get_u32(mm, "clip.vision.attention.head_count");
    for (size_t i = 0; i < gguf_n_tensors(mm); i++) {
        const gguf_tensor *t = gguf_tensor_at(mm, i);
        assert_int_equal(t->type, TENSOR_TYPE_F32);
        char name[256];
        if (!pixtral)
            vision_hf_name(t->name, name, sizeof name);
        else if (!pixtral_hf_name(t->name, name, sizeof name))
            continue;
        uint64_t rows = t->n_dims == 1 ? 0 : (uint64_t)t->ne[t->n_dims - 1];
        uint64_t cols = gguf_tensor_n_elems(t) / (rows ? rows : 1);
        /* Gemma's RMSNorm keeps w - 1; SigLIP's LayerNorms keep w */
        bool minus_one = strcmp(t->name, "mm.soft_emb_norm.weight") == 0;
        /* llama.cpp's converter interleaves pixtral's Q and K heads' halves, as Llama's */
        bool qk = pixtral && (strstr(t->name, ".attn_q.") || strstr(t->name, ".attn_k."));
        put_matrix(s, name, t->n_dims == 1 ? SAFETENSORS_F32 : matrix_dtype, t->data, rows,
                   cols, qk ? heads : 0, minus_one);
        if (t->n_dims > 2) { /* the patch kernel: [out, channels, height, width] */
            json_t *shape = json_array();
            for (uint32_t d = t->n_dims; d-- > 0;)
                json_array_append_new(shape, json_integer(t->ne[d]));
            json_object_set_new(json_object_get(s->header, name), "shape", shape);
        }
        json_object_set_new(weight_map, name, json_string(shard_name));
    }
}

void hf_fixture_write(const char *gguf_path, const char *dir, const char *hf_arch,
                      safetensors_dtype matrix_dtype, const char *pre_regex)
{
    write_checkpoint(gguf_path, dir, hf_arch, matrix_dtype, pre_regex, NULL, 0, NULL);
}

void hf_fixture_write_experts_from(const char *gguf_path, const char *experts_path,
                                   const char *dir, const char *hf_arch,
                                   safetensors_dtype matrix_dtype, const char *pre_regex)
{
    write_checkpoint(gguf_path, dir, hf_arch, matrix_dtype, pre_regex, NULL, 0, experts_path);
}

void hf_fixture_write_vision(const char *text_path, const char *mmproj_path, const char *dir,
                             uint32_t tokens_per_image, safetensors_dtype matrix_dtype)
{
    write_checkpoint(text_path, dir, "Gemma3ForConditionalGeneration", matrix_dtype, NULL,
                     mmproj_path, tokens_per_image, NULL);
}

void hf_fixture_write_gemma4v(const char *text_path, const char *mmproj_path, const char *dir,
                              safetensors_dtype matrix_dtype)
{
    write_checkpoint(text_path, dir, "Gemma4ForConditionalGeneration", matrix_dtype, NULL,
                     mmproj_path, 0, NULL);
}

void hf_fixture_write_gemma4_audio(const char *text_path, const char *mmproj_path,
                                   const char *tower_path, const char *dir,
                                   safetensors_dtype matrix_dtype)
{
    g_gemma4_audio = true;
    write_checkpoint(text_path, dir, "Gemma4ForConditionalGeneration", matrix_dtype, NULL,
                     mmproj_path, 0, NULL);
    g_gemma4_audio = false;
    add_gemma4_audio(tower_path, dir, matrix_dtype);
}

void hf_fixture_write_lfm2vl(const char *text_path, const char *mmproj_path, const char *dir,
                             safetensors_dtype matrix_dtype)
{
    write_checkpoint(text_path, dir, "Lfm2VlForConditionalGeneration", matrix_dtype,
                     hf_fixture_qwen2_regex, mmproj_path, 0, NULL);
}

void hf_fixture_write_glmocr(const char *text_path, const char *mmproj_path, const char *dir,
                             safetensors_dtype matrix_dtype)
{
    write_checkpoint(text_path, dir, "GlmOcrForConditionalGeneration", matrix_dtype,
                     hf_fixture_qwen2_regex, mmproj_path, 0, NULL);
}

void hf_fixture_write_deepseekocr(const char *text_path, const char *mmproj_path,
                                  const char *dir, safetensors_dtype matrix_dtype)
{
    write_checkpoint(text_path, dir, "DeepseekOCRForCausalLM", matrix_dtype,
                     hf_fixture_qwen2_regex, mmproj_path, 0, NULL);
}

void hf_fixture_write_pixtral(const char *text_path, const char *mmproj_path, const char *dir,
                              safetensors_dtype matrix_dtype)
{
    /* the fixture's vocabulary splits text as Qwen2's */
    write_checkpoint(text_path, dir, "Mistral3ForConditionalGeneration", matrix_dtype,
                     hf_fixture_qwen2_regex, mmproj_path, 0, NULL);
}

void hf_fixture_write_qwen25vl(const char *text_path, const char *mmproj_path, const char *dir,
                               safetensors_dtype matrix_dtype)
{
    write_checkpoint(text_path, dir, "Qwen2_5_VLForConditionalGeneration", matrix_dtype,
                     hf_fixture_qwen2_regex, mmproj_path, 0, NULL);
}

void hf_fixture_write_qwen3vl(const char *text_path, const char *mmproj_path, const char *dir,
                              safetensors_dtype matrix_dtype)
{
    corral_error err;
    gguf_file *f = gguf_open(text_path, &err);
    if (!f)
        fail_msg("%s", err.message);
    bool moe = gguf_find_kv(f, "qwen3vlmoe.expert_count") != NULL;
    gguf_close(f);
    write_checkpoint(text_path, dir,
                     moe ? "Qwen3VLMoeForConditionalGeneration" : "Qwen3VLForConditionalGeneration",
                     matrix_dtype, hf_fixture_qwen2_regex, mmproj_path, 0, NULL);
}

void hf_fixture_write_llama4(const char *text_path, const char *mmproj_path, const char *dir,
                             safetensors_dtype matrix_dtype)
{
    write_checkpoint(text_path, dir, "Llama4ForConditionalGeneration", matrix_dtype,
                     hf_fixture_qwen2_regex, mmproj_path, 0, NULL);
}

void hf_fixture_write_mllama(const char *gguf_path, const char *dir,
                             safetensors_dtype matrix_dtype)
{
    write_checkpoint(gguf_path, dir, "MllamaForConditionalGeneration", matrix_dtype,
                     hf_fixture_qwen2_regex, NULL, 0, NULL);
}

void hf_fixture_write_adapter(const char *adapter_path, const char *base_path, const char *dir)
{
    corral_error err;
    gguf_file *ad = gguf_open(adapter_path, &err);
    gguf_file *base = ad ? gguf_open(base_path, &err) : NULL;
    if (!base)
        fail_msg("%s", err.message);
    uint32_t heads = get_u32(base, "llama.attention.head_count");
    uint32_t kv_heads = get_u32(base, "llama.attention.head_count_kv");
    float alpha = 0;
    assert_true(gguf_get_f32(ad, "adapter.lora.alpha", &alpha, &err));
    shard s = {.header = json_object(), .data = tmpfile()};
    assert_non_null(s.data);
    json_t *modules = json_array();
    uint64_t rank = 0;
    for (size_t i = 0; i < gguf_n_tensors(ad); i++) {
        const gguf_tensor *t = gguf_tensor_at(ad, i);
        char base_name[256], hf[256], name[300];
        size_t len = strlen(t->name) - strlen(".lora_a");
        bool is_a = strcmp(t->name + len, ".lora_a") == 0;
        snprintf(base_name, sizeof base_name, "%.*s", (int)len, t->name);
        hf_name(base_name, false, false, false, false, false, hf, sizeof hf);
        hf[strlen(hf) - strlen(".weight")] = '\0';
        snprintf(name, sizeof name, "base_model.model.%s.lora_%c.weight", hf, is_a ? 'A' : 'B');
        /* GGUF's lora_a [n_in, r] and lora_b [r, n_out] are PEFT's [r, n_in] and [n_out, r] */
        uint64_t cols = (uint64_t)t->ne[0], rows = (uint64_t)t->ne[1];
        float *values = malloc(rows * cols * sizeof *values);
        assert_non_null(values);
        const uint16_t *halves = t->data;
        for (uint64_t e = 0; e < rows * cols; e++)
            values[e] = t->type == TENSOR_TYPE_F32 ? ((const float *)t->data)[e]
                                                   : quant_f16_to_f32(halves[e]);
        uint32_t permute = 0;
        if (!is_a && strstr(base_name, ".attn_q.weight"))
            permute = heads;
        if (!is_a && strstr(base_name, ".attn_k.weight"))
            permute = kv_heads;
        put_matrix(&s, name, t->type == TENSOR_TYPE_F32 ? SAFETENSORS_F32 : SAFETENSORS_F16,
                   values, rows, cols, permute, false);
        free(values);
        rank = is_a ? rows : rank;
        const char *module = strrchr(hf, '.') + 1;
        bool listed = false;
        for (size_t m = 0; m < json_array_size(modules); m++)
            listed = listed || strcmp(json_string_value(json_array_get(modules, m)), module) == 0;
        if (!listed)
            json_array_append_new(modules, json_string(module));
    }
    finish_shard(&s, dir, "adapter_model.safetensors");
    write_json(dir, "adapter_config.json",
               json_pack("{s:s,s:s,s:I,s:f,s:o,s:b,s:b}", "peft_type", "LORA", "task_type",
                         "CAUSAL_LM", "r", (json_int_t)rank, "lora_alpha", (double)alpha,
                         "target_modules", modules, "use_rslora", false, "use_dora", false));
    gguf_close(base);
    gguf_close(ad);
}
