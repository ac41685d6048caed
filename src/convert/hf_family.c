/*
 * Hugging Face architectures (see hf_family.h): the table of those Corral converts, their
 * config.json keys, tensor names and GGUF metadata.
 */
#include "convert/hf_family.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "convert/hf_family_deepseek2.h"
#include "convert/hf_family_deepseekocr.h"
#include "convert/hf_family_embed.h"
#include "convert/hf_family_gemma4.h"
#include "convert/hf_family_glmocr.h"
#include "convert/hf_family_laguna.h"
#include "convert/hf_family_lfm2.h"
#include "convert/hf_family_nemotron_h.h"
#include "convert/hf_tokenizer.h"

#define MAX_LAYERS 4096u
#define MAX_WIDTH (1u << 20)
#define MAX_EXPERTS 4096u

/* What the functions below read and write. */
typedef struct family {
    const json_t *config;
    const char *section;     /* what config is, for messages: "" or "vision_config." */
    hf_params p;
    corral_error *err;
    hf_extra_tensor *extras; /* make_rope_freqs' */
    size_t n_extras;
    uint32_t n_vocab;        /* write_keys' */
    bool any_bf16;
} family;

static const hf_arch archs[] = {
    {"LlamaForCausalLM", "llama", FAMILY_LLAMA, false},
    {"MistralForCausalLM", "llama", FAMILY_LLAMA, false},
    {"Qwen2ForCausalLM", "qwen2", FAMILY_QWEN2, false},
    {"Qwen3ForCausalLM", "qwen3", FAMILY_QWEN3, false},
    {"Qwen3MoeForCausalLM", "qwen3moe", FAMILY_QWEN3, false},
    {"MixtralForCausalLM", "llama", FAMILY_LLAMA, false},
    {"GemmaForCausalLM", "gemma", FAMILY_GEMMA, false},
    {"Gemma2ForCausalLM", "gemma2", FAMILY_GEMMA2, false},
    {"Gemma3ForCausalLM", "gemma3", FAMILY_GEMMA3, false},
    {"Gemma3ForConditionalGeneration", "gemma3", FAMILY_GEMMA3, true},
    {"Gemma3nForConditionalGeneration", "gemma3n", FAMILY_GEMMA3N, false}, /* the text model */
    {"Mistral3ForConditionalGeneration", "mistral3", FAMILY_LLAMA, true},
    {"Llama4ForConditionalGeneration", "llama4", FAMILY_LLAMA4, true},
    {"MllamaForConditionalGeneration", "mllama", FAMILY_MLLAMA, true},
    {"Ministral3ForCausalLM", "mistral3", FAMILY_LLAMA, false}, /* the text model alone */
    {"Qwen2_5_VLForConditionalGeneration", "qwen25vl", FAMILY_QWEN2, true},
    {"Qwen3VLForConditionalGeneration", "qwen3vl", FAMILY_QWEN3, true},
    {"Qwen3VLMoeForConditionalGeneration", "qwen3vlmoe", FAMILY_QWEN3, true},
    {"Phi3ForCausalLM", "phi3", FAMILY_PHI3, false},
    {"GptOssForCausalLM", "gpt-oss", FAMILY_GPTOSS, false},
    {"Olmo2ForCausalLM", "olmo2", FAMILY_OLMO2, false},
    {"Olmo3ForCausalLM", "olmo2", FAMILY_OLMO2, false},
    {"GraniteForCausalLM", "granite", FAMILY_LLAMA, false},
    {"Cohere2ForCausalLM", "cohere2", FAMILY_COHERE2, false},
    {"CohereForCausalLM", "command-r", FAMILY_COMMAND_R, false},
    {"SmolLM3ForCausalLM", "smollm3", FAMILY_LLAMA, false},
    {"Starcoder2ForCausalLM", "starcoder2", FAMILY_STARCODER2, false},
    {"Qwen3_5ForConditionalGeneration", "qwen35", FAMILY_QWEN35, false},
    {"Qwen3_5MoeForConditionalGeneration", "qwen35moe", FAMILY_QWEN35, false},
    {"Qwen3_5ForCausalLM", "qwen35", FAMILY_QWEN35, false}, /* the text model alone */
    {"Qwen3_5MoeForCausalLM", "qwen35moe", FAMILY_QWEN35, false},
    {"Qwen3NextForCausalLM", "qwen3next", FAMILY_QWEN35, false},
    {"BertModel", "bert", FAMILY_BERT, false},
    {"NomicBertModel", "nomic-bert", FAMILY_BERT, false}, /* nomic-embed-text v1 and v1.5 */
    {"Gemma3TextModel", "gemma-embedding", FAMILY_GEMMA3, false}, /* EmbeddingGemma */
    {"Lfm2ForCausalLM", "lfm2", FAMILY_LFM2, false},
    {"Lfm2MoeForCausalLM", "lfm2moe", FAMILY_LFM2, false},
    {"Lfm2VlForConditionalGeneration", "lfm2", FAMILY_LFM2, false}, /* its tower in the file */
    {"NemotronHForCausalLM", "nemotron_h", FAMILY_NEMOTRON_H, false}, /* or nemotron_h_moe */
    {"DeepseekV3ForCausalLM", "deepseek2", FAMILY_DEEPSEEK2, false},  /* and R1 */
    {"Glm4MoeLiteForCausalLM", "deepseek2", FAMILY_DEEPSEEK2, false}, /* GLM-4.7-Flash */
    {"Gemma4ForCausalLM", "gemma4", FAMILY_GEMMA4, false},
    {"LagunaForCausalLM", "laguna", FAMILY_LAGUNA, false},
    {"GlmOcrForConditionalGeneration", "glmocr", FAMILY_GLMOCR, false}, /* its tower in it */
    {"DeepseekOCRForCausalLM", "deepseekocr", FAMILY_DEEPSEEKOCR, false}, /* its towers too */
    {"Gemma4ForConditionalGeneration", "gemma4", FAMILY_GEMMA4, false}, /* its towers in it */
};

const hf_arch *hf_family_by_gguf_name(const char *gguf_name)
{
    for (size_t i = 0; i < sizeof archs / sizeof archs[0]; i++)
        if (strcmp(archs[i].gguf_name, gguf_name) == 0)
            return &archs[i];
    return NULL;
}

bool hf_family_is_qwen3next(const hf_arch *a)
{
    return !strcmp(a->gguf_name, "qwen3next");
}

bool hf_family_is_pixtral(const hf_arch *a)
{
    return a->vision && a->family == FAMILY_LLAMA;
}

bool hf_family_is_qwen25vl(const hf_arch *a)
{
    return a->vision && a->family == FAMILY_QWEN2;
}

bool hf_family_is_mllama(const hf_arch *a)
{
    return a->family == FAMILY_MLLAMA;
}

bool hf_family_experts_transposed(const hf_arch *a)
{
    return a->family == FAMILY_LLAMA4 || hf_family_is_qwen3vl(a);
}

bool hf_family_is_qwen3vl(const hf_arch *a)
{
    return a->vision && a->family == FAMILY_QWEN3;
}

const char *hf_family_pre_tokenizer(const hf_arch *a)
{
    if (hf_family_is_deepseek2(a))
        return hf_deepseek2_pre_tokenizer(a);
    if (hf_family_is_gemma4(a))
        return "gemma4";
    if (hf_family_is_laguna(a))
        return "laguna";
    if (hf_family_is_glmocr(a))
        return "chatglm-bpe";
    return hf_family_is_lfm2(a) ? "lfm2" : NULL;
}

const char *hf_family_bpe_model(const hf_arch *a)
{
    return hf_family_is_gemma4(a) ? "llama" : "gpt2";
}

bool hf_family_is_gemma(const hf_arch *a)
{
    return a->family == FAMILY_GEMMA || a->family == FAMILY_GEMMA2 || a->family == FAMILY_GEMMA3;
}

/* gemma2's and gemma3's norms around attention and the FFN, OLMo 2's after them */
static bool has_sandwich_norms(const hf_arch *a)
{
    return a->family == FAMILY_GEMMA2 || a->family == FAMILY_GEMMA3 || a->family == FAMILY_OLMO2 ||
           a->family == FAMILY_GEMMA3N;
}

/* The names of those norms, tried before the others where they exist. */
static const char *const sandwich_renames[][2] = {
    {"post_attention_layernorm", "post_attention_norm"},
    {"pre_feedforward_layernorm", "ffn_norm"},
    {"post_feedforward_layernorm", "post_ffw_norm"},
};

/* gpt-oss's names that differ from the others', tried first for it. */
static const char *const gptoss_renames[][2] = {
    {"self_attn.sinks", "attn_sinks.weight"},
    {"post_attention_layernorm", "post_attention_norm"},
    {"mlp.router", "ffn_gate_inp"},
};

/* Qwen 3.5's Gated DeltaNet names and its FFN norm's, tried first for it (and Qwen3-Next,
 * whose projections are fused: q, k, v and z in in_proj_qkvz, beta and alpha in in_proj_ba). */
static const char *const qwen35_renames[][2] = {
    {"linear_attn.in_proj_qkvz", "ssm_in"},  {"linear_attn.in_proj_ba", "ssm_ba"}, /* Next's */
    {"linear_attn.in_proj_qkv", "attn_qkv"}, {"linear_attn.in_proj_z", "attn_gate"},
    {"linear_attn.in_proj_b", "ssm_beta"},   {"linear_attn.in_proj_a", "ssm_alpha"},
    {"linear_attn.conv1d", "ssm_conv1d"},    {"linear_attn.dt_bias", "ssm_dt.bias"},
    {"linear_attn.A_log", "ssm_a"},          {"linear_attn.norm", "ssm_norm"},
    {"linear_attn.out_proj", "ssm_out"},     {"post_attention_layernorm", "post_attention_norm"},
    {"mlp.shared_expert_gate", "ffn_gate_inp_shexp"},
    {"mlp.shared_expert.gate_proj", "ffn_gate_shexp"},
    {"mlp.shared_expert.up_proj", "ffn_up_shexp"},
    {"mlp.shared_expert.down_proj", "ffn_down_shexp"},
};

/* Gemma 3n's per-layer inputs, AltUp and LAuReL, tried first for it (its AltUp projections
 * are stacked apart, hf_family_parse_stacked). */
static const char *const gemma3n_renames[][2] = {
    {"model.embed_tokens_per_layer", "per_layer_token_embd"},
    {"model.per_layer_model_projection", "per_layer_model_proj"},
    {"model.per_layer_projection_norm", "per_layer_proj_norm"},
    {"per_layer_input_gate", "inp_gate"},
    {"per_layer_projection", "proj"},
    {"post_per_layer_input_norm", "post_norm"},
    {"altup.modality_router", "altup_router"},
    {"altup.router_norm", "altup_router_norm"},
    {"altup.prediction_coefs", "altup_predict_coef"},
    {"altup.correction_coefs", "altup_correct_coef"},
    {"altup.correct_output_scale", "altup_correct_scale.weight"},
    {"laurel.linear_left", "laurel_l"},
    {"laurel.linear_right", "laurel_r"},
    {"laurel.post_laurel_norm", "laurel_post_norm"},
};

/* Llama 3.2 Vision's cross-attention (cross_attn.q_proj as cross_attn_q_proj), first for it. */
static const char *const mllama_renames[][2] = {
    {"cross_attn.", "cross_attn_"},
};

/* Llama 4's FFN names (its router, shared expert, dense layers), tried first for it. */
static const char *const llama4_renames[][2] = {
    {"feed_forward.router", "ffn_gate_inp"},
    {"feed_forward.shared_expert.gate_proj", "ffn_gate_shexp"},
    {"feed_forward.shared_expert.up_proj", "ffn_up_shexp"},
    {"feed_forward.shared_expert.down_proj", "ffn_down_shexp"},
    {"feed_forward.gate_proj", "ffn_gate"},
    {"feed_forward.up_proj", "ffn_up"},
    {"feed_forward.down_proj", "ffn_down"},
};

/* Hugging Face name pieces and their GGUF names, tried in this order at each position. */
static const char *const renames[][2] = {
    {"lm_head", "output"},
    {"model.embed_tokens", "token_embd"},
    {"model.norm", "output_norm"},
    {"model.layers", "blk"},
    {"input_layernorm", "attn_norm"},
    {"self_attn.q_proj", "attn_q"},
    {"self_attn.k_proj", "attn_k"},
    {"self_attn.v_proj", "attn_v"},
    {"self_attn.o_proj", "attn_output"},
    {"self_attn.qkv_proj", "attn_qkv"},
    {"self_attn.q_norm", "attn_q_norm"},
    {"self_attn.k_norm", "attn_k_norm"},
    {"mlp.gate_proj", "ffn_gate"},
    {"mlp.up_proj", "ffn_up"},
    {"mlp.down_proj", "ffn_down"},
    {"mlp.gate_up_proj", "ffn_up"},
    {"mlp.c_fc", "ffn_up"},     /* StarCoder2's */
    {"mlp.c_proj", "ffn_down"},
    {"mlp.gate.", "ffn_gate_inp."},              /* a mixture of experts' router */
    {"block_sparse_moe.gate.", "ffn_gate_inp."}, /* Mixtral's */
    {"post_attention_layernorm", "ffn_norm"},
};


static bool read_u32(family *c, const char *key, bool required, uint32_t max, uint32_t *out)
{
    const json_t *v = json_object_get(c->config, key);
    if (!v || json_is_null(v)) {
        if (required)
            corral_error_set(c->err, "config.json has no %s%s", c->section, key);
        return !required;
    }
    if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > max) {
        corral_error_set(c->err, "config.json: %s%s must be an integer from 1 to %u", c->section,
                         key, max);
        return false;
    }
    *out = (uint32_t)json_integer_value(v);
    return true;
}

static bool read_f32(family *c, const json_t *obj, const char *key, bool *present, float *out)
{
    const json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v))
        return true;
    double d = json_number_value(v);
    if (!json_is_number(v) || !(d > 0) || d > 3.4e38) {
        corral_error_set(c->err, "config.json: %s%s must be a positive number", c->section, key);
        return false;
    }
    *out = (float)d;
    if (present)
        *present = true;
    return true;
}

static bool read_rope_scaling(family *c)
{
    hf_params *p = &c->p;
    const json_t *s = json_object_get(c->config, "rope_scaling");
    if (!s || json_is_null(s))
        return true;
    const char *type = json_string_value(json_object_get(s, "rope_type"));
    if (!type)
        type = json_string_value(json_object_get(s, "type"));
    if (!json_is_object(s) || !type) {
        corral_error_set(c->err, "config.json: rope_scaling needs a rope_type");
        return false;
    }
    bool llama = p->arch->family == FAMILY_LLAMA || p->arch->family == FAMILY_LLAMA4 ||
                 p->arch->family == FAMILY_MLLAMA;
    bool phi3 = p->arch->family == FAMILY_PHI3;
    /* Qwen2.5-VL's and Qwen3-VL's M-RoPE: its sections are read_rope_sections' */
    if (strcmp(type, "default") == 0 ||
        ((hf_family_is_qwen25vl(p->arch) || hf_family_is_qwen3vl(p->arch)) &&
         strcmp(type, "mrope") == 0))
        return true;
    if (!(strcmp(type, "linear") == 0 || strcmp(type, "yarn") == 0 ||
          (llama && strcmp(type, "llama3") == 0) ||
          (phi3 && (strcmp(type, "longrope") == 0 || strcmp(type, "su") == 0)))) {
        corral_error_set(c->err, "config.json: rope_scaling type '%.40s' is not supported for "
                         "%s", type, p->arch->hf_name);
        return false;
    }
    p->rope_type = type;
    uint32_t original = 0;
    const json_t *o = json_object_get(s, "original_max_position_embeddings");
    if (json_is_integer(o) && json_integer_value(o) > 0 && json_integer_value(o) <= UINT32_MAX)
        original = (uint32_t)json_integer_value(o);
    p->rope_original_ctx = original;
    if (!phi3 && strcmp(type, "yarn") == 0 &&
        !read_f32(c, s, "attention_factor", NULL, &p->rope_attn_factor))
        return false;
    return read_f32(c, s, "factor", NULL, &p->rope_factor) &&
           read_f32(c, s, "low_freq_factor", NULL, &p->low_freq_factor) &&
           read_f32(c, s, "high_freq_factor", NULL, &p->high_freq_factor);
}

static hf_status read_sliding_layers(family *c, uint32_t every);
static bool read_layer_list(family *c, const json_t *obj, const char *key, uint32_t n,
                            int32_t *out, size_t cap, uint32_t *n_out);

/* A number of Qwen 3.5's and Mistral 3's rope_parameters (where newer configs keep it) unless
 * config.json gives it at the top. */
static bool read_rope_parameter(family *c, const char *key, bool *present, float *out)
{
    const json_t *rope = json_object_get(c->config, "rope_parameters");
    if (json_object_get(c->config, key) || !json_is_object(rope))
        return read_f32(c, c->config, key, present, out);
    const char *saved = c->section;
    c->section = "rope_parameters.";
    bool ok = read_f32(c, rope, key, present, out);
    c->section = saved;
    return ok;
}

/* Mistral 3's text RoPE: its base at the top or in rope_parameters (newer configs); a scaled
 * RoPE (Ministral 3's YaRN) is refused, as the keys ollama writes for it are not read here. */
static bool read_pixtral_rope(family *c)
{
    const json_t *rope = json_object_get(c->config, "rope_parameters");
    const char *type = json_string_value(json_object_get(rope, "rope_type"));
    if (c->p.rope_type || (type && strcmp(type, "default") != 0)) {
        corral_error_set(c->err, "config.json: a scaled RoPE ('%.40s') is not supported for %s",
                         c->p.rope_type ? c->p.rope_type : type, c->p.arch->hf_name);
        return false;
    }
    return read_rope_parameter(c, "rope_theta", &c->p.has_theta, &c->p.rope_theta);
}

/* Mistral 3's text model saved alone (Ministral 3). */
static bool is_ministral(const hf_arch *a)
{
    return !a->vision && !strcmp(a->gguf_name, "mistral3");
}

/*
 * Ministral 3's RoPE, all in rope_parameters: its base, and for YaRN its factor, the context
 * it was trained for, beta_fast, beta_slow, mscale_all_dim (the log multiplier) and
 * llama_4_scaling_beta (the attention temperature), as ollama's converter takes them.
 */
static bool read_ministral_rope(family *c)
{
    hf_params *p = &c->p;
    p->yarn_beta_fast = p->yarn_beta_slow = p->yarn_log_multiplier = p->temperature_scale = -1;
    if (!read_rope_parameter(c, "rope_theta", &p->has_theta, &p->rope_theta))
        return false;
    const json_t *rope = json_object_get(c->config, "rope_parameters");
    const char *type = json_string_value(json_object_get(rope, "rope_type"));
    if (!type || !strcmp(type, "default"))
        return true;
    if (strcmp(type, "yarn") != 0 || p->rope_type) {
        corral_error_set(c->err, "config.json: only rope_parameters' yarn scales the RoPE of "
                         "%s", p->arch->hf_name);
        return false;
    }
    const json_t *o = json_object_get(rope, "original_max_position_embeddings");
    if (o && (!json_is_integer(o) || json_integer_value(o) < 1 ||
              json_integer_value(o) > UINT32_MAX)) {
        corral_error_set(c->err, "config.json: rope_parameters.original_max_position_embeddings "
                         "must be a positive integer");
        return false;
    }
    p->rope_type = type;
    p->rope_original_ctx = o ? (uint32_t)json_integer_value(o) : 0;
    const char *saved = c->section;
    c->section = "rope_parameters.";
    bool ok = read_f32(c, rope, "factor", NULL, &p->rope_factor) &&
              read_f32(c, rope, "beta_fast", NULL, &p->yarn_beta_fast) &&
              read_f32(c, rope, "beta_slow", NULL, &p->yarn_beta_slow) &&
              read_f32(c, rope, "mscale_all_dim", NULL, &p->yarn_log_multiplier) &&
              read_f32(c, rope, "llama_4_scaling_beta", NULL, &p->temperature_scale);
    c->section = saved;
    return ok;
}

typedef struct f32_key {
    const char *key; /* after the architecture's name */
    float value;
} f32_key;

/* Each of the n keys whose value is above zero (or zero too, with zero_given) under the
 * architecture a: the others' config.json did not give them. */
static bool write_given_f32s(family *c, gguf_writer *w, const char *a, const f32_key *keys,
                             size_t n, bool zero_given)
{
    char key[96];
    bool ok = true;
    for (size_t i = 0; ok && i < n; i++)
        if (keys[i].value > 0 || (zero_given && keys[i].value == 0)) {
            snprintf(key, sizeof key, "%s.%s", a, keys[i].key);
            ok = gguf_writer_add_f32(w, key, keys[i].value, c->err);
        }
    return ok;
}

/* Ministral 3's YaRN keys beyond the common ones, and its attention temperature. */
static bool write_ministral_keys(family *c, gguf_writer *w, const char *a)
{
    const hf_params *p = &c->p;
    const f32_key keys[] = {{"rope.scaling.yarn_beta_fast", p->yarn_beta_fast},
                            {"rope.scaling.yarn_beta_slow", p->yarn_beta_slow},
                            {"rope.scaling.yarn_log_multiplier", p->yarn_log_multiplier},
                            {"attention.temperature_scale", p->temperature_scale}};
    return write_given_f32s(c, w, a, keys, sizeof keys / sizeof keys[0], true);
}

/* Qwen 3.5's M-RoPE sections (rope_parameters' or rope_scaling's mrope_section, else
 * llama.cpp's default), padded to four. */
static bool read_rope_sections(family *c)
{
    static const int32_t fallback[4] = {11, 11, 10, 0};
    const json_t *list = json_object_get(json_object_get(c->config, "rope_parameters"),
                                         "mrope_section");
    if (!list)
        list = json_object_get(json_object_get(c->config, "rope_scaling"), "mrope_section");
    memcpy(c->p.rope_sections, fallback, sizeof fallback);
    if (!list)
        return true;
    if (!json_is_array(list) || json_array_size(list) == 0 || json_array_size(list) > 4) {
        corral_error_set(c->err, "config.json: mrope_section must be a list of 1 to 4 integers");
        return false;
    }
    memset(c->p.rope_sections, 0, sizeof c->p.rope_sections);
    for (size_t i = 0; i < json_array_size(list); i++) {
        const json_t *v = json_array_get(list, i);
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > 65536) {
            corral_error_set(c->err, "config.json: mrope_section[%zu] must be an integer from 0 "
                             "to 65536", i);
            return false;
        }
        c->p.rope_sections[i] = (int32_t)json_integer_value(v);
    }
    c->p.n_rope_sections = (uint32_t)json_array_size(list);
    return true;
}

/* Qwen 3.5's Gated DeltaNet sizes, which layers are attention, and its partial M-RoPE. */
static hf_status read_qwen35_config(family *c)
{
    hf_params *p = &c->p;
    float rotary = 0.25f;
    p->full_attention_interval = 4;
    if (!read_u32(c, "linear_conv_kernel_dim", true, 64, &p->conv_kernel) ||
        !read_u32(c, "linear_num_key_heads", true, 65536, &p->key_heads) ||
        !read_u32(c, "linear_key_head_dim", true, 65536, &p->key_head_dim) ||
        !read_u32(c, "linear_num_value_heads", true, 65536, &p->value_heads) ||
        !read_u32(c, "linear_value_head_dim", true, 65536, &p->value_head_dim) ||
        !read_u32(c, "full_attention_interval", false, MAX_LAYERS, &p->full_attention_interval) ||
        (p->n_expert && !read_u32(c, "shared_expert_intermediate_size", false, 1u << 24,
                                  &p->n_ff_shared)) ||
        (!p->has_theta && !read_rope_parameter(c, "rope_theta", &p->has_theta, &p->rope_theta)) ||
        !read_rope_parameter(c, "partial_rotary_factor", NULL, &rotary) || !read_rope_sections(c))
        return HF_INVALID;
    if ((uint64_t)p->value_heads * p->value_head_dim > (1u << 24) ||
        (uint64_t)p->key_heads * p->key_head_dim > (1u << 24)) {
        corral_error_set(c->err, "config.json: the linear attention's heads are wider than %u",
                         1u << 24);
        return HF_INVALID;
    }
    if (p->value_heads % p->key_heads) {
        corral_error_set(c->err, "config.json: linear_num_value_heads (%u) must be a multiple of "
                         "linear_num_key_heads (%u)", p->value_heads, p->key_heads);
        return HF_INVALID;
    }
    p->rope_dims = (uint32_t)((float)p->head_dim * rotary);
    if (rotary > 1.0f || p->rope_dims < 2 || p->rope_dims % 2) {
        corral_error_set(c->err, "config.json: partial_rotary_factor %g of a head of %u does not "
                         "make an even number of rotated dimensions", (double)rotary,
                         p->head_dim);
        return HF_INVALID;
    }
    return HF_OK;
}

/* A count of config.json that may be 0 (absent: *out left). */
static bool read_count(family *c, const char *key, uint32_t max, uint32_t *out)
{
    const json_t *v = json_object_get(c->config, key);
    if (v && (!json_is_integer(v) || json_integer_value(v) < 0 ||
              json_integer_value(v) > max)) {
        corral_error_set(c->err, "config.json: %s%s must be an integer from 0 to %u", c->section,
                         key, max);
        return false;
    }
    if (v)
        *out = (uint32_t)json_integer_value(v);
    return true;
}

/* The standard normal distribution's quantile of p (Acklam's rational approximation, then a
 * Halley step on the CDF for double precision); -inf at 0. */
static double normal_quantile(double p)
{
    static const double a[] = {-3.969683028665376e+01, 2.209460984245205e+02,
                               -2.759285104469687e+02, 1.383577518672690e+02,
                               -3.066479806614716e+01, 2.506628277459239e+00};
    static const double b[] = {-5.447609879822406e+01, 1.615858368580409e+02,
                               -1.556989798598866e+02, 6.680131188771972e+01,
                               -1.328068155288572e+01};
    static const double t[] = {-7.784894002430293e-03, -3.223964580411365e-01,
                               -2.400758277161838e+00, -2.549732539343734e+00,
                               4.374664141464968e+00,  2.938163982698783e+00};
    static const double d[] = {7.784695709041462e-03, 3.224671290700398e-01,
                               2.445134137142996e+00, 3.754408661907416e+00};
    if (p <= 0)
        return -INFINITY;
    double x;
    if (p < 0.02425 || p > 1 - 0.02425) { /* the tails */
        double q = sqrt(-2 * log(p < 0.5 ? p : 1 - p));
        x = (((((t[0] * q + t[1]) * q + t[2]) * q + t[3]) * q + t[4]) * q + t[5]) /
            ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
        x = p < 0.5 ? x : -x;
    } else {
        double q = p - 0.5, r = q * q;
        x = (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
            (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1);
    }
    double e = 0.5 * erfc(-x / sqrt(2.0)) - p, u = e * sqrt(2 * M_PI) * exp(x * x / 2);
    return x - u / (1 + x * u / 2);
}

/* Gemma 3n's text model: its per-layer inputs, AltUp and shared KV layers, its widths (one, or
 * one per layer), sliding layers (layer_types) and local RoPE base, and the activation
 * sparsity as the normal quantile of each layer's pattern (0: none, -inf). */
static hf_status read_gemma3n_config(family *c)
{
    hf_params *p = &c->p;
    hf_gemma3n *g = &p->gemma3n;
    const json_t *ff = json_object_get(c->config, "intermediate_size");
    const json_t *pattern = json_object_get(c->config, "activation_sparsity_pattern");
    const json_t *scale = json_object_get(c->config, "altup_correct_scale");
    g->altup_inputs = 4;
    g->lr_multiplier = 1.0f;
    if (!read_u32(c, "hidden_size_per_layer_input", true, MAX_WIDTH, &g->n_embd_per_layer) ||
        !read_u32(c, "altup_num_inputs", false, 64, &g->altup_inputs) ||
        !read_count(c, "altup_active_idx", 63, &g->altup_active) ||
        !read_count(c, "num_kv_shared_layers", p->n_layer, &g->n_kv_shared) ||
        !read_f32(c, c->config, "altup_coef_clip", NULL, &g->coef_clip) ||
        !read_f32(c, c->config, "altup_lr_multiplier", NULL, &g->lr_multiplier) ||
        !read_u32(c, "sliding_window", true, UINT32_MAX, &p->sliding_window) ||
        !read_f32(c, c->config, "rope_local_base_freq", NULL, &p->rope_local_theta) ||
        !read_f32(c, c->config, "final_logit_softcapping", NULL, &p->final_softcap))
        return HF_INVALID;
    if (g->altup_active >= g->altup_inputs || g->altup_inputs < 2) {
        corral_error_set(c->err, "config.json: altup_active_idx %u of %u AltUp inputs",
                         g->altup_active, g->altup_inputs);
        return HF_INVALID;
    }
    if (scale && !json_is_boolean(scale)) {
        corral_error_set(c->err, "config.json: altup_correct_scale must be true or false");
        return HF_INVALID;
    }
    g->correct_scale = json_is_true(scale);
    if (json_is_array(ff) && json_array_size(ff) != p->n_layer) {
        corral_error_set(c->err, "config.json: intermediate_size lists %zu widths for %u layers",
                         json_array_size(ff), p->n_layer);
        return HF_INVALID;
    }
    if (pattern && (!json_is_array(pattern) || json_array_size(pattern) != p->n_layer)) {
        corral_error_set(c->err, "config.json: activation_sparsity_pattern must list a number "
                         "for each of the %u layers", p->n_layer);
        return HF_INVALID;
    }
    if ((json_is_array(ff) && !(g->ff_per_layer = calloc(p->n_layer, sizeof *g->ff_per_layer))) ||
        (pattern && !(g->sparsity_scale = calloc(p->n_layer, sizeof *g->sparsity_scale)))) {
        corral_error_set(c->err, "out of memory");
        return HF_IO;
    }
    for (uint32_t i = 0; json_is_array(ff) && i < p->n_layer; i++) {
        const json_t *w = json_array_get(ff, i);
        if (!json_is_integer(w) || json_integer_value(w) < 1 ||
            json_integer_value(w) > (1 << 24)) {
            corral_error_set(c->err, "config.json: intermediate_size[%u] must be an integer "
                             "from 1 to %u", i, 1u << 24);
            return HF_INVALID;
        }
        g->ff_per_layer[i] = (uint32_t)json_integer_value(w);
    }
    if (g->ff_per_layer)
        p->n_ff = g->ff_per_layer[0];
    for (uint32_t i = 0; pattern && i < p->n_layer; i++) {
        const json_t *v = json_array_get(pattern, i);
        double share = json_number_value(v);
        if (!json_is_number(v) || !(share >= 0 && share < 1)) {
            corral_error_set(c->err, "config.json: activation_sparsity_pattern[%u] must be a "
                             "number from 0 to below 1", i);
            return HF_INVALID;
        }
        /* of the share as the checkpoint's float holds it, as ollama's converter takes it */
        g->sparsity_scale[i] = (float)normal_quantile((double)(float)share);
    }
    return read_sliding_layers(c, 0);
}

/* Llama 4's: its experts are intermediate_size wide and its dense layers
 * intermediate_size_mlp, an MoE layer every interleave_moe_layer_step, its attention chunk
 * and QK norm. */
static hf_status read_llama4_config(family *c)
{
    hf_params *p = &c->p;
    const json_t *qk_norm = json_object_get(c->config, "use_qk_norm");
    p->n_ff_expert = p->n_ff;
    p->moe_step = 1;
    if (!read_u32(c, "intermediate_size_mlp", true, 1u << 24, &p->n_ff) ||
        !read_u32(c, "interleave_moe_layer_step", false, p->n_layer, &p->moe_step) ||
        !read_u32(c, "attention_chunk_size", false, UINT32_MAX, &p->attention_chunk))
        return HF_INVALID;
    if (!p->n_expert) {
        corral_error_set(c->err, "config.json has no num_local_experts");
        return HF_INVALID;
    }
    if (qk_norm && !json_is_boolean(qk_norm)) {
        corral_error_set(c->err, "config.json: use_qk_norm must be true or false");
        return HF_INVALID;
    }
    p->qk_norm = json_is_true(qk_norm);
    return HF_OK;
}

/* Gemma 2's and 3's window, softcaps and which layers slide (layer_types, or every layer but
 * each sliding_window_pattern-th). */
static hf_status read_gemma_config(family *c)
{
    hf_params *p = &c->p;
    if (!read_u32(c, "sliding_window", false, UINT32_MAX, &p->sliding_window) ||
        !read_f32(c, c->config, "attn_logit_softcapping", NULL, &p->attn_softcap) ||
        !read_f32(c, c->config, "final_logit_softcapping", NULL, &p->final_softcap) ||
        !read_f32(c, c->config, "rope_local_base_freq", NULL, &p->rope_local_theta))
        return HF_INVALID;
    if (p->arch->family != FAMILY_GEMMA3)
        return HF_OK;
    uint32_t every = 0;
    if (!json_is_array(json_object_get(c->config, "layer_types")) &&
        !read_u32(c, "sliding_window_pattern", false, MAX_LAYERS, &every))
        return HF_INVALID;
    return read_sliding_layers(c, every);
}

/* Which layers slide: layer_types' "sliding_attention" ones, else every layer but each
 * every-th (none listed when every is 0). */
static hf_status read_sliding_layers(family *c, uint32_t every)
{
    hf_params *p = &c->p;
    const json_t *types = json_object_get(c->config, "layer_types");
    if (!json_is_array(types) && every == 0)
        return HF_OK;
    if (!(p->sliding_pattern = calloc(p->n_layer, 1))) {
        corral_error_set(c->err, "out of memory");
        return HF_IO;
    }
    p->n_sliding_pattern = p->n_layer;
    for (uint32_t i = 0; i < p->n_layer; i++) {
        const char *type = json_string_value(json_array_get(types, i));
        p->sliding_pattern[i] = json_is_array(types) ? type && !strcmp(type, "sliding_attention")
                                                     : (i + 1) % every != 0;
    }
    return HF_OK;
}

/* Command R's logit scale, whether it has q/k norms, and its context: model_max_length over
 * max_position_embeddings, as ollama's converter takes it. Its RoPE is never scaled (the file
 * says "none"). */
static hf_status read_command_r_config(family *c)
{
    hf_params *p = &c->p;
    if (p->rope_type) {
        corral_error_set(c->err, "config.json: a scaled RoPE ('%.40s') is not supported for %s",
                         p->rope_type, p->arch->hf_name);
        return HF_INVALID;
    }
    const json_t *qk_norm = json_object_get(c->config, "use_qk_norm");
    if (qk_norm && !json_is_null(qk_norm) && !json_is_boolean(qk_norm)) {
        corral_error_set(c->err, "config.json: use_qk_norm must be true or false");
        return HF_INVALID;
    }
    p->qk_norm = json_is_true(qk_norm);
    return read_f32(c, c->config, "logit_scale", NULL, &p->logit_scale) &&
                   read_u32(c, "model_max_length", false, UINT32_MAX, &p->n_ctx)
               ? HF_OK
               : HF_INVALID;
}

static hf_status read_config(family *c)
{
    const json_t *list = json_object_get(c->config, "architectures");
    const char *name = json_string_value(json_array_get(list, 0));
    if (!name) {
        corral_error_set(c->err, "config.json names no architecture (\"architectures\")");
        return HF_INVALID;
    }
    for (size_t i = 0; i < sizeof archs / sizeof archs[0]; i++)
        if (strcmp(archs[i].hf_name, name) == 0)
            c->p.arch = &archs[i];
    if (!c->p.arch) {
        /* the list of those converted is too long for an error message: the help has it */
        bool cut = strlen(name) > HF_SHOWN_NAME_BYTES;
        corral_error_set(c->err, HF_UNSUPPORTED_FORMAT, HF_SHOWN_NAME_BYTES, name,
                         cut ? "..." : "");
        return HF_INVALID;
    }
    hf_params *p = &c->p;
    uint32_t vocab = 0;
    /* Gemma 3n's may list a width per layer (read_gemma3n_config's) */
    bool ff_list = p->arch->family == FAMILY_GEMMA3N &&
                   json_is_array(json_object_get(c->config, "intermediate_size"));
    if (!read_u32(c, "num_hidden_layers", true, MAX_LAYERS, &p->n_layer) ||
        !read_u32(c, "hidden_size", true, MAX_WIDTH, &p->n_embd) ||
        (!ff_list && !read_u32(c, "intermediate_size", true, 1u << 24, &p->n_ff)) ||
        !read_u32(c, "num_attention_heads", true, 65536, &p->n_head) ||
        !read_u32(c, "max_position_embeddings", false, UINT32_MAX, &p->n_ctx) ||
        !read_u32(c, "vocab_size", false, HF_MAX_VOCAB, &vocab))
        return HF_INVALID;
    p->vocab_size = vocab;
    p->n_head_kv = p->n_head;
    if (!read_u32(c, "num_key_value_heads", false, p->n_head, &p->n_head_kv))
        return HF_INVALID;
    if (json_object_get(c->config, "head_dim") && !json_is_null(json_object_get(c->config,
                                                                                 "head_dim"))) {
        if (!read_u32(c, "head_dim", true, 65536, &p->head_dim))
            return HF_INVALID;
        p->has_head_dim = true;
    } else {
        p->head_dim = p->n_embd / p->n_head;
    }
    if (p->head_dim == 0 || p->head_dim % 2 || p->n_head % p->n_head_kv) {
        corral_error_set(c->err, "config.json: %u heads of %u dimensions (%u key/value heads) "
                         "do not make an attention layer", p->n_head, p->head_dim, p->n_head_kv);
        return HF_INVALID;
    }
    if (!read_f32(c, c->config, "rope_theta", &p->has_theta, &p->rope_theta) ||
        !read_f32(c, c->config, "rms_norm_eps", &p->has_eps, &p->rms_eps) ||
        !read_rope_scaling(c))
        return HF_INVALID;
    if (hf_family_is_pixtral(p->arch) && !read_pixtral_rope(c))
        return HF_INVALID;
    if (is_ministral(p->arch) && !read_ministral_rope(c))
        return HF_INVALID;
    if (p->arch->family == FAMILY_GEMMA3 && !p->has_theta) {
        p->has_theta = true; /* Gemma 3's global layers' base when its config leaves it out */
        p->rope_theta = 1000000.0f;
    }
    if (hf_family_is_gemma_embedding(p->arch)) { /* ollama's defaults where config is silent */
        p->rms_eps = p->has_eps ? p->rms_eps : 1e-6f;
        p->has_eps = true;
        p->n_ctx = p->n_ctx ? p->n_ctx : 2048;
    }
    if (p->arch->family == FAMILY_GEMMA4) /* its experts' keys are its own */
        return hf_gemma4_read_config(c->config, p, c->err);
    if (p->arch->family == FAMILY_LAGUNA)
        return hf_laguna_read_config(c->config, p, c->err);
    if (p->arch->family == FAMILY_GLMOCR)
        return hf_glmocr_read_config(c->config, p, c->err);
    if (p->arch->family == FAMILY_DEEPSEEKOCR) /* its experts' keys are language_config's */
        return hf_deepseekocr_read_config(c->config, p, c->err);
    bool gptoss = p->arch->family == FAMILY_GPTOSS;
    bool local = gptoss || !strcmp(p->arch->gguf_name, "llama") ||
                 p->arch->family == FAMILY_LLAMA4 ||
                 (p->arch->family == FAMILY_LFM2 && /* ollama's LFM2 takes either */
                  json_object_get(c->config, "num_local_experts"));
    bool routed = (p->arch->family == FAMILY_NEMOTRON_H && /* ollama's Nemotron-H: either */
                   json_object_get(c->config, "n_routed_experts")) ||
                  p->arch->family == FAMILY_DEEPSEEK2;
    if (!read_u32(c, routed ? "n_routed_experts" : local ? "num_local_experts" : "num_experts",
                  gptoss, MAX_EXPERTS, &p->n_expert) ||
        !read_u32(c, "num_experts_per_tok", p->n_expert > 0, p->n_expert ? p->n_expert : 1,
                  &p->n_expert_used) ||
        !read_u32(c, "moe_intermediate_size", false, 1u << 24, &p->n_ff_expert))
        return HF_INVALID;
    if (gptoss) { /* every expert is intermediate_size wide; some layers slide */
        p->n_ff_expert = p->n_ff;
        if (!read_u32(c, "sliding_window", false, UINT32_MAX, &p->sliding_window))
            return HF_INVALID;
    }
    arch_family f = p->arch->family;
    if (!read_f32(c, c->config, f == FAMILY_STARCODER2 ? "norm_epsilon" : "layer_norm_eps",
                  &p->has_ln_eps, &p->ln_eps))
        return HF_INVALID;
    if (!strcmp(p->arch->gguf_name, "granite") &&
        (!read_f32(c, c->config, "embedding_multiplier", NULL, &p->embedding_scale) ||
         !read_f32(c, c->config, "residual_multiplier", NULL, &p->residual_scale) ||
         !read_f32(c, c->config, "attention_multiplier", NULL, &p->attention_scale) ||
         !read_f32(c, c->config, "logits_scaling", NULL, &p->logit_scale)))
        return HF_INVALID;
    if (f == FAMILY_COHERE2 &&
        (!read_f32(c, c->config, "logit_scale", NULL, &p->logit_scale) ||
         !read_u32(c, "sliding_window", false, UINT32_MAX, &p->sliding_window)))
        return HF_INVALID;
    if (f == FAMILY_COMMAND_R)
        return read_command_r_config(c);
    if (f == FAMILY_BERT && !strcmp(p->arch->hf_name, "NomicBertModel"))
        return hf_embed_read_nomic_config(c->config, p, c->err);
    if (f == FAMILY_LFM2)
        return hf_lfm2_read_config(c->config, p, c->err);
    if (f == FAMILY_NEMOTRON_H)
        return hf_nemotron_h_read_config(c->config, p, c->err);
    if (f == FAMILY_DEEPSEEK2)
        return hf_deepseek2_read_config(c->config, p, c->err);
    if (f == FAMILY_OLMO2) { /* Olmo 3's window: every layer but each fourth, or layer_types */
        if (!read_u32(c, "sliding_window", false, UINT32_MAX, &p->sliding_window))
            return HF_INVALID;
        return p->sliding_window ? read_sliding_layers(c, 4) : HF_OK;
    }
    if (f == FAMILY_QWEN35)
        return read_qwen35_config(c);
    if (f == FAMILY_LLAMA4)
        return read_llama4_config(c);
    if (f == FAMILY_GEMMA3N)
        return read_gemma3n_config(c);
    if (f == FAMILY_MLLAMA)
        return read_layer_list(c, c->config, "cross_attention_layers", p->n_layer,
                               p->cross_layers, 256, &p->n_cross)
                   ? HF_OK
                   : HF_INVALID;
    if (p->arch->family == FAMILY_PHI3) {
        uint32_t original = 0;
        if (!read_u32(c, "sliding_window", false, UINT32_MAX, &p->sliding_window) ||
            !read_u32(c, "original_max_position_embeddings", false, UINT32_MAX, &original))
            return HF_INVALID;
        if (original)
            p->rope_original_ctx = original;
    }
    if (hf_family_is_qwen25vl(p->arch))
        return read_rope_sections(c) ? HF_OK : HF_INVALID;
    if (hf_family_is_qwen3vl(p->arch)) /* its base in rope_parameters in newer configs */
        return (p->has_theta || read_rope_parameter(c, "rope_theta", &p->has_theta,
                                                    &p->rope_theta)) &&
                       read_rope_sections(c)
                   ? HF_OK
                   : HF_INVALID;
    return has_sandwich_norms(p->arch) ? read_gemma_config(c) : HF_OK;
}

/* config.json's keys with those of its object at key over them (text_config; DeepSeek-OCR's
 * language_config), which must be an object when there is one. */
static json_t *nested_config(family *c, const json_t *config, const char *key)
{
    const json_t *text = json_object_get(config, key);
    if (text && !json_is_object(text)) {
        corral_error_set(c->err, "config.json: %s must be an object", key);
        return NULL;
    }
    json_t *merged = json_copy((json_t *)config);
    if (!merged || (text && json_object_update(merged, (json_t *)text) != 0)) {
        json_decref(merged);
        corral_error_set(c->err, "out of memory");
        return NULL;
    }
    return merged;
}

/*
 * Gemma 3's text model under text_config: config.json's keys with text_config's over them,
 * and what Hugging Face's Gemma3TextConfig assumes where the file leaves a key out (the
 * released checkpoints leave out head counts, which ollama's converter takes from the layer
 * count: 34, 48 and 62 layers are the 4B, 12B and 27B models).
 */
static json_t *gemma3_text_config(family *c, const json_t *config)
{
    json_t *merged = nested_config(c, config, "text_config");
    if (!merged)
        return NULL;
    const json_t *layers = json_object_get(merged, "num_hidden_layers");
    json_int_t n = json_is_integer(layers) ? json_integer_value(layers) : 0;
    json_int_t heads = n == 34 ? 8 : n == 48 ? 16 : n == 62 ? 32 : 8;
    json_t *defaults = json_pack("{s:I,s:I,s:i,s:f,s:f,s:f,s:i,s:i,s:i}", "num_attention_heads",
                                 heads, "num_key_value_heads", heads / 2, "head_dim", 256,
                                 "rms_norm_eps", 1e-6, "rope_theta", 1000000.0,
                                 "rope_local_base_freq", 10000.0, "max_position_embeddings",
                                 131072, "sliding_window", 4096, "sliding_window_pattern", 6);
    const char *key;
    json_t *value;
    json_object_foreach(defaults, key, value)
        if (!json_object_get(merged, key) && (strcmp(key, "sliding_window_pattern") != 0 ||
                                               !json_object_get(merged, "layer_types")))
            json_object_set(merged, key, value);
    json_decref(defaults);
    return merged;
}

/* Mistral 3's: vision_config's head size and RoPE base (rope_theta, or rope_parameters' in
 * newer configs), config.json's merge square, image token and projector, with Hugging Face's
 * defaults. */
static bool read_pixtral_config(family *c, const json_t *config, const json_t *v)
{
    hf_vision *vis = &c->p.vision;
    vis->head_dim = vis->n_embd / vis->n_head;
    vis->rope_theta = 10000.0f;
    vis->merge_size = 2;
    vis->image_token = 10;
    const json_t *rope = json_object_get(v, "rope_parameters");
    c->config = v;
    c->section = "vision_config.";
    bool ok = read_u32(c, "head_dim", false, 65536, &vis->head_dim) &&
              read_f32(c, json_is_object(rope) && !json_object_get(v, "rope_theta") ? rope : v,
                       "rope_theta", NULL, &vis->rope_theta);
    c->config = config;
    c->section = "";
    ok = ok && read_u32(c, "spatial_merge_size", false, 64, &vis->merge_size) &&
         read_u32(c, "image_token_index", false, UINT32_MAX, &vis->image_token);
    const json_t *bias = json_object_get(config, "multimodal_projector_bias");
    const json_t *act = json_object_get(config, "projector_hidden_act");
    if (ok && bias && !json_is_boolean(bias)) {
        corral_error_set(c->err, "config.json: multimodal_projector_bias must be true or false");
        ok = false;
    }
    vis->projector_bias = json_is_true(bias);
    if (ok && act && (!json_is_string(act) ||
                      json_string_length(act) >= sizeof vis->projector_act)) {
        corral_error_set(c->err, "config.json: projector_hidden_act must be a name of at most "
                         "%zu characters", sizeof vis->projector_act - 1);
        ok = false;
    }
    if (ok && act)
        memcpy(vis->projector_act, json_string_value(act), json_string_length(act) + 1);
    return ok;
}

/* vision_config: the tower's sizes (required), its epsilon and channels (SigLIP's defaults);
 * Llama 4's epsilon (norm_eps), RoPE base and pixel shuffle. */
static hf_status read_vision_config(family *c, const json_t *config, bool pixtral, bool llama4)
{
    const json_t *v = json_object_get(config, "vision_config");
    if (!json_is_object(v)) {
        corral_error_set(c->err, "config.json has no vision_config object");
        return HF_INVALID;
    }
    hf_vision *vis = &c->p.vision;
    vis->n_channels = 3;
    vis->eps = 1e-6f;
    const json_t *saved = c->config;
    c->config = v;
    c->section = "vision_config.";
    bool ok = read_u32(c, "num_hidden_layers", true, MAX_LAYERS, &vis->n_layer) &&
              read_u32(c, "hidden_size", true, MAX_WIDTH, &vis->n_embd) &&
              read_u32(c, "intermediate_size", true, 1u << 24, &vis->n_ff) &&
              read_u32(c, "num_attention_heads", true, 65536, &vis->n_head) &&
              read_u32(c, "image_size", true, 65536, &vis->image_size) &&
              read_u32(c, "patch_size", true, 65536, &vis->patch_size) &&
              read_u32(c, "num_channels", false, 3, &vis->n_channels) &&
              read_f32(c, v, llama4 ? "norm_eps" : "layer_norm_eps", NULL, &vis->eps);
    if (ok && llama4) {
        vis->rope_theta = 10000.0f;
        ok = read_f32(c, v, "rope_theta", NULL, &vis->rope_theta) &&
             read_f32(c, v, "pixel_shuffle_ratio", NULL, &vis->pixel_shuffle_ratio);
    }
    c->config = config;
    c->section = "";
    ok = ok && read_u32(c, "mm_tokens_per_image", false, 1u << 20, &vis->tokens_per_image);
    if (ok && vis->n_embd % vis->n_head) {
        corral_error_set(c->err, "config.json: vision_config's %u heads do not divide its "
                         "hidden_size %u", vis->n_head, vis->n_embd);
        ok = false;
    }
    ok = ok && (!pixtral || read_pixtral_config(c, config, v));
    c->config = saved;
    return ok ? HF_OK : HF_INVALID;
}

/* Qwen2.5-VL's vision_config, with the defaults ollama's converter takes for what it leaves
 * out (its channels under in_chans or, in newer configs, in_channels). */
static hf_status read_qwen25vl_vision(family *c, const json_t *config)
{
    const json_t *v = json_object_get(config, "vision_config");
    if (!json_is_object(v)) {
        corral_error_set(c->err, "config.json has no vision_config object");
        return HF_INVALID;
    }
    hf_vision *vis = &c->p.vision;
    *vis = (hf_vision){.n_layer = 32, .n_head = 16, .n_channels = 3, .patch_size = 14,
                       .merge_size = 2, .window_size = 112, .eps = 1e-6f,
                       .rope_theta = 10000.0f, .temporal_patch_size = 2};
    const json_t *saved = c->config;
    c->config = v;
    c->section = "vision_config.";
    bool ok = read_u32(c, "depth", false, MAX_LAYERS, &vis->n_layer) &&
              read_u32(c, "hidden_size", true, MAX_WIDTH, &vis->n_embd) &&
              read_u32(c, "num_heads", false, 65536, &vis->n_head) &&
              read_u32(c, json_object_get(v, "in_chans") ? "in_chans" : "in_channels", false, 3,
                       &vis->n_channels) &&
              read_u32(c, "patch_size", false, 65536, &vis->patch_size) &&
              read_u32(c, "spatial_merge_size", false, 64, &vis->merge_size) &&
              read_u32(c, "spatial_patch_size", false, 65536, &vis->spatial_patch_size) &&
              read_u32(c, "window_size", false, 65536, &vis->window_size) &&
              read_u32(c, "temporal_patch_size", false, 64, &vis->temporal_patch_size) &&
              read_f32(c, v, "layer_norm_epsilon", NULL, &vis->eps) &&
              read_f32(c, v, "rope_theta", NULL, &vis->rope_theta);
    const json_t *full = json_object_get(v, "fullatt_block_indexes");
    static const int32_t fallback[] = {7, 15, 23, 31};
    memcpy(vis->full_blocks, fallback, sizeof fallback);
    vis->n_full = 4;
    if (ok && full && json_array_size(full) > 0) {
        size_t n = json_array_size(full);
        for (size_t i = 0; ok && i < n; i++) {
            const json_t *b = json_array_get(full, i);
            ok = n <= 64 && json_is_integer(b) && json_integer_value(b) >= 0 &&
                 json_integer_value(b) < vis->n_layer;
            if (ok)
                vis->full_blocks[i] = (int32_t)json_integer_value(b);
        }
        vis->n_full = (uint32_t)n;
        if (!ok)
            corral_error_set(c->err, "config.json: vision_config.fullatt_block_indexes must "
                             "list at most 64 of the tower's %u blocks", vis->n_layer);
    } else if (ok && full && !json_is_array(full)) {
        corral_error_set(c->err, "config.json: vision_config.fullatt_block_indexes must be a "
                         "list");
        ok = false;
    }
    if (ok && (vis->n_head == 0 || vis->n_embd % vis->n_head)) {
        corral_error_set(c->err, "config.json: vision_config's %u heads do not divide its "
                         "hidden_size %u", vis->n_head, vis->n_embd);
        ok = false;
    }
    c->config = saved;
    c->section = "";
    return ok ? HF_OK : HF_INVALID;
}

/* config.json's list key of at most cap layers below n, ascending (Llama 3.2 Vision's
 * cross-attention layers and the blocks its tower keeps, Qwen3-VL's deepstack blocks): into
 * out, *n_out. */
static bool read_layer_list(family *c, const json_t *obj, const char *key, uint32_t n,
                            int32_t *out, size_t cap, uint32_t *n_out)
{
    const json_t *list = json_object_get(obj, key);
    size_t count = json_array_size(list);
    bool ok = json_is_array(list) && count <= cap;
    for (size_t i = 0; ok && i < count; i++) {
        const json_t *v = json_array_get(list, i);
        ok = json_is_integer(v) && json_integer_value(v) >= (i ? out[i - 1] + 1 : 0) &&
             json_integer_value(v) < n;
        if (ok)
            out[i] = (int32_t)json_integer_value(v);
    }
    if (!ok) {
        corral_error_set(c->err, "config.json: %s%s must list at most %zu of the %u layers, in "
                         "ascending order", c->section, key, cap, n);
        return false;
    }
    *n_out = (uint32_t)count;
    return true;
}

/* Llama 3.2 Vision's vision_config: its local and global blocks, the blocks whose states it
 * keeps, its sizes (attention_heads), tiles and epsilon (norm_eps). */
static hf_status read_mllama_vision(family *c, const json_t *config)
{
    const json_t *v = json_object_get(config, "vision_config");
    if (!json_is_object(v)) {
        corral_error_set(c->err, "config.json has no vision_config object");
        return HF_INVALID;
    }
    hf_vision *vis = &c->p.vision;
    *vis = (hf_vision){.n_channels = 3, .eps = 1e-5f};
    const json_t *saved = c->config;
    c->config = v;
    c->section = "vision_config.";
    bool ok = read_u32(c, "num_hidden_layers", true, MAX_LAYERS, &vis->n_layer) &&
              read_u32(c, "num_global_layers", true, MAX_LAYERS, &vis->n_global_layer) &&
              read_u32(c, "hidden_size", true, MAX_WIDTH, &vis->n_embd) &&
              read_u32(c, "intermediate_size", true, 1u << 24, &vis->n_ff) &&
              read_u32(c, "attention_heads", true, 65536, &vis->n_head) &&
              read_u32(c, "image_size", true, 65536, &vis->image_size) &&
              read_u32(c, "patch_size", true, 65536, &vis->patch_size) &&
              read_u32(c, "num_channels", false, 3, &vis->n_channels) &&
              read_u32(c, "max_num_tiles", true, 64, &vis->max_tiles) &&
              read_f32(c, v, "norm_eps", NULL, &vis->eps) &&
              read_layer_list(c, v, "intermediate_layers_indices", vis->n_layer, vis->kept, 64,
                              &vis->n_kept);
    if (ok && (vis->n_embd % vis->n_head || (vis->n_embd / vis->n_head) % 2)) {
        corral_error_set(c->err, "config.json: vision_config's %u heads do not split its "
                         "hidden_size %u into heads of an even size", vis->n_head, vis->n_embd);
        ok = false;
    }
    c->config = saved;
    c->section = "";
    return ok ? HF_OK : HF_INVALID;
}

/* Qwen3-VL's vision_config, with the defaults ollama's converter takes for what it leaves
 * out. */
static hf_status read_qwen3vl_vision(family *c, const json_t *config)
{
    const json_t *v = json_object_get(config, "vision_config");
    if (!json_is_object(v)) {
        corral_error_set(c->err, "config.json has no vision_config object");
        return HF_INVALID;
    }
    hf_vision *vis = &c->p.vision;
    *vis = (hf_vision){.n_layer = 32, .n_head = 16, .n_channels = 3, .patch_size = 14,
                       .merge_size = 2, .eps = 1e-6f, .rope_theta = 10000.0f,
                       .temporal_patch_size = 2};
    const json_t *saved = c->config;
    c->config = v;
    c->section = "vision_config.";
    bool ok = read_u32(c, "depth", false, MAX_LAYERS, &vis->n_layer) &&
              read_u32(c, "hidden_size", true, MAX_WIDTH, &vis->n_embd) &&
              read_u32(c, "num_heads", false, 65536, &vis->n_head) &&
              read_u32(c, "in_channels", false, 3, &vis->n_channels) &&
              read_u32(c, "patch_size", false, 65536, &vis->patch_size) &&
              read_u32(c, "spatial_merge_size", false, 64, &vis->merge_size) &&
              read_u32(c, "temporal_patch_size", false, 64, &vis->temporal_patch_size) &&
              read_f32(c, v, "layer_norm_epsilon", NULL, &vis->eps) &&
              read_f32(c, v, "rope_theta", NULL, &vis->rope_theta);
    ok = ok && (!json_object_get(v, "deepstack_visual_indexes") ||
                read_layer_list(c, v, "deepstack_visual_indexes", vis->n_layer, vis->deepstack,
                                64, &vis->n_deepstack));
    if (ok && vis->n_embd % vis->n_head) {
        corral_error_set(c->err, "config.json: vision_config's %u heads do not divide its "
                         "hidden_size %u", vis->n_head, vis->n_embd);
        ok = false;
    }
    c->config = saved;
    c->section = "";
    return ok ? HF_OK : HF_INVALID;
}

/* preprocessor_config.json's key (three positive numbers) into out, *present set; an absent
 * key leaves both. */
static bool read_triple(family *c, const char *key, float out[3], bool *present)
{
    const json_t *list = json_object_get(c->config, key);
    if (!list || json_is_null(list))
        return true;
    bool ok = json_is_array(list) && json_array_size(list) == 3;
    for (size_t i = 0; ok && i < 3; i++) {
        double d = json_number_value(json_array_get(list, i));
        ok = json_is_number(json_array_get(list, i)) && d > 0 && d < 1e6;
        out[i] = (float)d;
    }
    if (!ok)
        corral_error_set(c->err, "preprocessor_config.json: %s must be three positive numbers",
                         key);
    *present = ok;
    return ok;
}

hf_status hf_family_read_preprocessor(const json_t *preprocessor, hf_params *p,
                                      corral_error *err)
{
    family c = {.config = preprocessor, .section = "", .p = *p, .err = err};
    hf_vision *vis = &c.p.vision;
    bool mean = false, std = false;
    const json_t *size = json_object_get(preprocessor, "size");
    bool ok = read_triple(&c, "image_mean", vis->image_mean, &mean) &&
              read_triple(&c, "image_std", vis->image_std, &std);
    if (ok && mean != std) {
        corral_error_set(err, "preprocessor_config.json gives image_%s without image_%s",
                         mean ? "mean" : "std", mean ? "std" : "mean");
        ok = false;
    }
    vis->has_normalisation = mean;
    if (ok && size && !json_is_object(size)) {
        corral_error_set(err, "preprocessor_config.json: size must be an object");
        ok = false;
    }
    if (ok && size) {
        c.config = size;
        c.section = "size.";
        ok = read_u32(&c, "shortest_edge", false, UINT32_MAX, &vis->shortest_edge) &&
             read_u32(&c, "longest_edge", false, UINT32_MAX, &vis->longest_edge);
    }
    *p = c.p;
    return ok ? HF_OK : HF_INVALID;
}

hf_status hf_family_read_config(const json_t *config, hf_params *p, corral_error *err)
{
    family c = {.config = config, .section = "", .err = err};
    const char *name = json_string_value(json_array_get(json_object_get(config,
                                                                        "architectures"), 0));
    bool gemma3 = name && strcmp(name, "Gemma3ForConditionalGeneration") == 0;
    bool pixtral = name && strcmp(name, "Mistral3ForConditionalGeneration") == 0;
    bool qwen25vl = name && strcmp(name, "Qwen2_5_VLForConditionalGeneration") == 0;
    bool qwen3vl = name && (strcmp(name, "Qwen3VLForConditionalGeneration") == 0 ||
                            strcmp(name, "Qwen3VLMoeForConditionalGeneration") == 0);
    bool llama4 = name && strcmp(name, "Llama4ForConditionalGeneration") == 0;
    bool mllama = name && strcmp(name, "MllamaForConditionalGeneration") == 0;
    bool vision = gemma3 || pixtral || qwen25vl || qwen3vl || llama4 || mllama;
    bool ocr = name && strcmp(name, "DeepseekOCRForCausalLM") == 0; /* under language_config */
    /* Qwen 3.5's text model, its vision tower left out */
    bool nested = vision || (name && (strcmp(name, "Qwen3_5ForConditionalGeneration") == 0 ||
                                      strcmp(name, "Qwen3_5MoeForConditionalGeneration") == 0 ||
                                      strcmp(name, "Gemma3nForConditionalGeneration") == 0 ||
                                      strcmp(name, "Gemma4ForConditionalGeneration") == 0 ||
                                      strcmp(name, "Lfm2VlForConditionalGeneration") == 0 ||
                                      strcmp(name, "GlmOcrForConditionalGeneration") == 0)) ||
                  ocr;
    hf_status status = HF_OK;
    if (nested) {
        c.p.text_config = gemma3 ? gemma3_text_config(&c, config)
                                 : nested_config(&c, config,
                                                 ocr ? "language_config" : "text_config");
        const json_t *text = json_object_get(config, ocr ? "language_config" : "text_config");
        if (!c.p.text_config)
            status = text && !json_is_object(text) ? HF_INVALID : HF_IO;
    }
    bool nomic = name && !strcmp(name, "NomicBertModel");
    if (nomic && !(c.p.text_config = hf_embed_nomic_config(config))) {
        corral_error_set(err, "out of memory");
        status = HF_IO;
    }
    if (vision && status == HF_OK)
        status = qwen25vl  ? read_qwen25vl_vision(&c, config)
                 : qwen3vl ? read_qwen3vl_vision(&c, config)
                 : mllama  ? read_mllama_vision(&c, config)
                           : read_vision_config(&c, config, pixtral, llama4);
    if (status == HF_OK) {
        c.config = c.p.text_config ? c.p.text_config : config;
        status = read_config(&c);
    }
    *p = c.p;
    return status;
}

void hf_family_params_free(hf_params *p)
{
    free(p->sliding_pattern);
    p->sliding_pattern = NULL;
    free(p->gemma3n.sparsity_scale);
    p->gemma3n.sparsity_scale = NULL;
    free(p->gemma3n.ff_per_layer);
    p->gemma3n.ff_per_layer = NULL;
    free(p->kv_heads_per_layer);
    p->kv_heads_per_layer = NULL;
    free(p->laguna.heads);
    p->laguna.heads = NULL;
    free(p->layer_kinds);
    p->layer_kinds = NULL;
    free(p->ffn_per_layer);
    p->ffn_per_layer = NULL;
    json_decref(p->text_config);
    p->text_config = NULL;
}

const char *const *hf_family_rename_in(const char *const (*renames)[2], size_t n,
                                       const char *s)
{
    for (size_t r = 0; r < n; r++)
        if (strncmp(s, renames[r][0], strlen(renames[r][0])) == 0)
            return renames[r];
    return NULL;
}

void hf_family_rename_by(const char *const (*renames)[2], size_t n, const char *in, char *out,
                         size_t cap)
{
    size_t o = 0;
    for (const char *s = in; *s && o + 1 < cap;) {
        const char *const *pair = hf_family_rename_in(renames, n, s);
        const char *piece = pair ? pair[1] : s;
        size_t len = pair ? strlen(piece) : 1;
        for (size_t i = 0; i < len && o + 1 < cap; i++)
            out[o++] = piece[i];
        s += pair ? strlen(pair[0]) : 1;
    }
    out[o] = '\0';
}

bool hf_family_weight_or_bias(const char *rest, const char *const *parts, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        size_t len = strlen(parts[i]);
        if (!strncmp(rest, parts[i], len) &&
            (!strcmp(rest + len, ".weight") || !strcmp(rest + len, ".bias")))
            return true;
    }
    return false;
}

#define RENAME_IN(table, s) hf_family_rename_in(table, sizeof table / sizeof table[0], s)

/* The pair of the rename tables that starts s, or NULL. */
static const char *const *rename_at(const hf_arch *a, const char *s)
{
    const char *const *own = hf_family_is_lfm2(a)          ? hf_lfm2_rename_at(s)
                             : hf_family_is_nemotron_h(a) ? hf_nemotron_h_rename_at(s)
                             : hf_family_is_deepseek2(a)  ? hf_deepseek2_rename_at(s)
                             : hf_family_is_gemma4(a)     ? hf_gemma4_rename_at(s)
                             : hf_family_is_laguna(a)     ? hf_laguna_rename_at(s)
                             : hf_family_is_glmocr(a)     ? hf_glmocr_rename_at(s)
                             : hf_family_is_deepseekocr(a) ? hf_deepseekocr_rename_at(s)
                                                          : NULL;
    if (own)
        return own;
    if (has_sandwich_norms(a) && (own = RENAME_IN(sandwich_renames, s)))
        return own;
    if (a->family == FAMILY_QWEN35 && (own = RENAME_IN(qwen35_renames, s)))
        return own;
    if (a->family == FAMILY_GEMMA3N && (own = RENAME_IN(gemma3n_renames, s)))
        return own;
    if (a->family == FAMILY_MLLAMA && (own = RENAME_IN(mllama_renames, s)))
        return own;
    if (a->family == FAMILY_LLAMA4 && (own = RENAME_IN(llama4_renames, s)))
        return own;
    if (a->family == FAMILY_GPTOSS && (own = RENAME_IN(gptoss_renames, s)))
        return own;
    return RENAME_IN(renames, s);
}

/* A multimodal checkpoint's prefixes (older and newer transformers' layouts): its text model's
 * as a text checkpoint's, its tower's as ollama's "v." and its projector's as "mm.". */
static const char *const vision_prefixes[][2] = {
    {"model.language_model.", "model."},
    {"language_model.model.", "model."},
    {"language_model.lm_head.", "lm_head."},
    {"model.vision_tower.vision_model.embeddings.", "v."},
    {"vision_tower.vision_model.embeddings.", "v."},
    {"model.vision_tower.vision_model.", "v."},
    {"vision_tower.vision_model.", "v."},
    {"model.multi_modal_projector.", "mm."},
    {"multi_modal_projector.", "mm."},
    {"model.vision_tower.", "v."}, /* Mistral 3's */
    {"vision_tower.", "v."},
    {"model.visual.", "v."}, /* Qwen2.5-VL's */
    {"visual.", "v."},
    {"vision_model.", "v."}, /* Llama 4's */
};

/* A tower's and projector's name pieces that differ from the text model's. */
static const char *const vision_renames[][2] = {
    {"encoder.layers", "blk"},
    {"self_attn.out_proj", "attn_output"},
    {"mm_input_projection_weight", "mm_input_projection.weight"},
    /* pixtral's */
    {"transformer.layers", "blk"},
    {"ln_pre", "encoder_norm"},
    {"attention.q_proj", "attn_q"},
    {"attention.k_proj", "attn_k"},
    {"attention.v_proj", "attn_v"},
    {"attention.o_proj", "attn_output"},
    {"attention_norm", "attn_norm"},
    {"feed_forward.gate_proj", "ffn_gate"},
    {"feed_forward.up_proj", "ffn_up"},
    {"feed_forward.down_proj", "ffn_down"},
};

/* Qwen2.5-VL's tower: its fused patch kernel and Q/K/V are split by name later (hf_convert.c)
 * into patch_embd_0/1 and attn_q/k/v; its MLP takes the text model's names. */
static const char *const qwen25vl_renames[][2] = {
    {"blocks", "blk"},       {"attn.proj", "attn_out"},
    {"attn.qkv", "attn_qkv"}, {"norm1", "ln1"},
    {"norm2", "ln2"},        {"patch_embed.proj", "patch_embd"},
};

/* Llama 3.2 Vision's tower as ollama's file names it (its blocks' attention and norms take the
 * text model's names); its position gate is split in two later (hf_convert.c). */
static const char *const mllama_tower_renames[][2] = {
    {"gated_positional_embedding.tile_embedding.weight", "tile_position_embd.weight"},
    {"gated_positional_embedding.embedding", "position_embd.weight"},
    {"gated_positional_embedding.gate", "position_embd.gate"},
    {"pre_tile_positional_embedding.embedding.weight", "pre_tile_position_embd.weight"},
    {"pre_tile_positional_embedding.gate", "pre_tile_position_embd.gate"},
    {"post_tile_positional_embedding.embedding.weight", "post_tile_position_embd.weight"},
    {"post_tile_positional_embedding.gate", "post_tile_position_embd.gate"},
    {"class_embedding", "class_embd"},
    {"patch_embedding", "patch_embd"},
    {"layernorm_pre", "pre_ln"},
    {"layernorm_post", "post_ln"},
    {"global_transformer.layers", "global.blk"},
    {"transformer.layers", "blk"},
    {"mlp.fc1", "ffn_up"},
    {"mlp.fc2", "ffn_down"},
    {"gate_attn", "attn_gate"},
    {"gate_ffn", "ffn_gate"},
    {"mm.", "mm.0."},
};

/* Llama 4's tower as ollama's file names it: Hugging Face's names, its blocks' as the text
 * model's but its MLP's, the patch projection without ".linear". */
static const char *const llama4_tower_renames[][2] = {
    {"patch_embedding.linear", "patch_embedding"},
};

/* Qwen3-VL's tower as ollama's file names it: Hugging Face's names but these; its Q/K/V are
 * split by name later (hf_convert.c), its Conv3D patch kernel kept whole. */
static const char *const qwen3vl_renames[][2] = {
    {"patch_embed.proj", "patch_embed"}, {"blocks", "blk"},
    {"attn.qkv", "attn_qkv"},            {"attn.proj", "attn_out"},
    {"deepstack_merger_list", "deepstack_merger"},
};

void hf_family_rename(const hf_arch *a, const char *in, char *out, size_t cap)
{
    if (a->family == FAMILY_BERT) {
        hf_embed_rename(a, in, out, cap);
        return;
    }
    if ((hf_family_is_gemma4(a) && hf_gemma4_rename_tower(in, out, cap)) ||
        (hf_lfm2_is_vl(a) && hf_lfm2_rename_tower(in, out, cap)) ||
        (hf_family_is_glmocr(a) && hf_glmocr_rename_tower(in, out, cap)) ||
        (hf_family_is_deepseekocr(a) && hf_deepseekocr_rename_tower(in, out, cap)))
        return;
    char stripped[2048];
    /* EmbeddingGemma's text model is saved without its "model." */
    if (hf_family_is_gemma_embedding(a) && strncmp(in, "model.", 6) != 0) {
        snprintf(stripped, sizeof stripped, "model.%s", in);
        in = stripped;
    }
    /* a text model under a multimodal checkpoint's prefixes (Gemma 3's, Mistral 3's, Qwen 3.5's,
     * Gemma 3n's) */
    size_t n_prefixes = a->vision || a->family == FAMILY_QWEN35 ||
                                a->family == FAMILY_GEMMA3N || a->family == FAMILY_GEMMA4 ||
                                hf_lfm2_is_vl(a) || hf_family_is_glmocr(a)
                            ? sizeof vision_prefixes / sizeof vision_prefixes[0]
                            : 0;
    for (size_t i = 0; i < n_prefixes; i++) {
        size_t len = strlen(vision_prefixes[i][0]);
        if (strncmp(in, vision_prefixes[i][0], len) == 0) {
            snprintf(stripped, sizeof stripped, "%s%s", vision_prefixes[i][1], in + len);
            in = stripped;
            break;
        }
    }
    bool tower = a->vision && (strncmp(in, "v.", 2) == 0 || strncmp(in, "mm.", 3) == 0);
    bool qwen = hf_family_is_qwen25vl(a), qwen3vl = hf_family_is_qwen3vl(a);
    bool llama4 = a->family == FAMILY_LLAMA4, mllama = a->family == FAMILY_MLLAMA;
    const char *const(*tower_renames)[2] = qwen      ? qwen25vl_renames
                                           : qwen3vl ? qwen3vl_renames
                                           : llama4  ? llama4_tower_renames
                                           : mllama  ? mllama_tower_renames
                                                     : vision_renames;
    size_t n_tower_renames = qwen      ? sizeof qwen25vl_renames / sizeof qwen25vl_renames[0]
                             : qwen3vl ? sizeof qwen3vl_renames / sizeof qwen3vl_renames[0]
                             : llama4  ? sizeof llama4_tower_renames /
                                            sizeof llama4_tower_renames[0]
                             : mllama  ? sizeof mllama_tower_renames /
                                            sizeof mllama_tower_renames[0]
                                       : sizeof vision_renames / sizeof vision_renames[0];
    size_t o = 0;
    for (const char *s = in; *s && o + 1 < cap;) {
        const char *const *pair = tower ? hf_family_rename_in(tower_renames, n_tower_renames, s)
                                        : NULL;
        if (!pair)
            pair = rename_at(a, s);
        const char *piece = pair ? pair[1] : s;
        size_t len = pair ? strlen(piece) : 1;
        for (size_t i = 0; i < len && o + 1 < cap; i++)
            out[o++] = piece[i];
        s += pair ? strlen(pair[0]) : 1;
    }
    out[o] = '\0';
}

/* Whether rest is one of parts followed by ".weight" or (with biases) ".bias". */
static bool is_part(const char *rest, const char *const *parts, bool biases)
{
    for (; *parts; parts++) {
        size_t n = strlen(*parts);
        if (!strncmp(rest, *parts, n) &&
            (!strcmp(rest + n, ".weight") || (biases && !strcmp(rest + n, ".bias"))))
            return true;
    }
    return false;
}

/* Qwen3-VL's tower tensor under ollama's name (its Q/K/V before hf_convert.c splits them). */
static bool known_qwen3vl_tensor(const hf_params *p, const char *name)
{
    static const char *const whole[] = {"v.patch_embed", "v.pos_embed", "v.merger.norm",
                                        "v.merger.linear_fc1", "v.merger.linear_fc2", NULL};
    static const char *const block[] = {"norm1",          "norm2",          "attn_qkv",
                                        "attn_out",       "mlp.linear_fc1", "mlp.linear_fc2",
                                        NULL};
    static const char *const merger[] = {"norm", "linear_fc1", "linear_fc2", NULL};
    if (is_part(name, whole, true))
        return strcmp(name, "v.pos_embed.bias") != 0;
    unsigned index;
    char prefix[48];
    bool in_block = sscanf(name, "v.blk.%u.", &index) == 1 && index < p->vision.n_layer;
    if (in_block)
        snprintf(prefix, sizeof prefix, "v.blk.%u.", index);
    else if (sscanf(name, "v.deepstack_merger.%u.", &index) == 1 &&
             index < p->vision.n_deepstack)
        snprintf(prefix, sizeof prefix, "v.deepstack_merger.%u.", index);
    else
        return false;
    size_t used = strlen(prefix); /* exactly that spelling: no "+1" or "01" */
    return !strncmp(name, prefix, used) && is_part(name + used, in_block ? block : merger, true);
}

/* Llama 3.2 Vision's tower tensor under ollama's name (its position gate before hf_convert.c
 * splits it). */
static bool known_mllama_tower_tensor(const hf_params *p, const char *name)
{
    static const char *const whole[] = {
        "v.patch_embd.weight",           "v.class_embd",
        "v.position_embd.weight",        "v.position_embd.gate",
        "v.tile_position_embd.weight",   "v.pre_tile_position_embd.weight",
        "v.pre_tile_position_embd.gate", "v.post_tile_position_embd.weight",
        "v.post_tile_position_embd.gate", NULL};
    static const char *const biased[] = {"v.pre_ln", "v.post_ln", "mm.0", NULL};
    static const char *const block[] = {"attn_norm", "ffn_norm", "ffn_up", "ffn_down", NULL};
    static const char *const attention[] = {"attn_q", "attn_k", "attn_v", "attn_output", NULL};
    for (const char *const *w = whole; *w; w++)
        if (!strcmp(name, *w))
            return true;
    if (is_part(name, biased, true))
        return true;
    unsigned layer;
    char prefix[40];
    bool global = sscanf(name, "v.global.blk.%u.", &layer) == 1;
    if (!global && sscanf(name, "v.blk.%u.", &layer) != 1)
        return false;
    if (layer >= (global ? p->vision.n_global_layer : p->vision.n_layer))
        return false;
    size_t used = (size_t)snprintf(prefix, sizeof prefix, global ? "v.global.blk.%u."
                                                                 : "v.blk.%u.", layer);
    if (strncmp(name, prefix, used) != 0)
        return false;
    const char *rest = name + used;
    return is_part(rest, block, true) || is_part(rest, attention, false) ||
           (global && (!strcmp(rest, "attn_gate") || !strcmp(rest, "ffn_gate")));
}

/* Llama 4's tower tensor under ollama's name. */
static bool known_llama4_tower_tensor(const hf_params *p, const char *name)
{
    static const char *const whole[] = {"v.patch_embedding", "v.layernorm_pre",
                                        "v.layernorm_post", "v.vision_adapter.mlp.fc1",
                                        "v.vision_adapter.mlp.fc2", "mm.linear_1", NULL};
    static const char *const block[] = {"attn_q", "attn_k",   "attn_v",  "attn_output",
                                        "attn_norm", "ffn_norm", "mlp.fc1", "mlp.fc2", NULL};
    if (!strcmp(name, "v.class_embedding") || !strcmp(name, "v.positional_embedding_vlm"))
        return true;
    bool biased = strncmp(name, "v.layernorm_", 12) == 0; /* the adapter and mm: no biases */
    if (is_part(name, whole, biased))
        return true;
    unsigned layer;
    char prefix[32];
    if (sscanf(name, "v.blk.%u.", &layer) != 1 || layer >= p->vision.n_layer)
        return false;
    size_t used = (size_t)snprintf(prefix, sizeof prefix, "v.blk.%u.", layer);
    return !strncmp(name, prefix, used) && is_part(name + used, block, true);
}

/* A tower's or projector's tensor under ollama's name. */
static bool known_vision_tensor(const hf_params *p, const char *name)
{
    if (hf_family_is_qwen3vl(p->arch))
        return known_qwen3vl_tensor(p, name);
    if (p->arch->family == FAMILY_LLAMA4)
        return known_llama4_tower_tensor(p, name);
    if (p->arch->family == FAMILY_MLLAMA)
        return known_mllama_tower_tensor(p, name);
    static const char *const siglip_whole[] = {
        "v.patch_embedding.weight", "v.patch_embedding.bias", "v.position_embedding.weight",
        "v.post_layernorm.weight",  "v.post_layernorm.bias",  "mm.mm_input_projection.weight",
        "mm.mm_soft_emb_norm.weight", NULL,
    };
    static const char *const pixtral_whole[] = {
        "v.patch_conv.weight", "v.encoder_norm.weight", "mm.norm.weight",
        "mm.patch_merger.merging_layer.weight", "mm.linear_1.weight", "mm.linear_1.bias",
        "mm.linear_2.weight", "mm.linear_2.bias", NULL,
    };
    /* Qwen2.5-VL's patch kernel and Q/K/V before hf_convert.c splits them */
    static const char *const qwen25vl_whole[] = {
        "v.patch_embd.weight",    "v.merger.ln_q.weight",   "v.merger.mlp.0.weight",
        "v.merger.mlp.0.bias",    "v.merger.mlp.2.weight",  "v.merger.mlp.2.bias", NULL,
    };
    bool pixtral = hf_family_is_pixtral(p->arch), qwen = hf_family_is_qwen25vl(p->arch);
    for (const char *const *w = pixtral ? pixtral_whole : qwen ? qwen25vl_whole : siglip_whole;
         *w; w++)
        if (!strcmp(name, *w))
            return true;
    unsigned layer;
    char prefix[32];
    if (sscanf(name, "v.blk.%u.", &layer) != 1 || layer >= p->vision.n_layer)
        return false;
    int used = snprintf(prefix, sizeof prefix, "v.blk.%u.", layer);
    if (strncmp(name, prefix, (size_t)used) != 0)
        return false;
    static const char *const siglip_parts[] = {"attn_q", "attn_k", "attn_v", "attn_output",
                                               "layer_norm1", "layer_norm2", "mlp.fc1",
                                               "mlp.fc2", NULL};
    static const char *const pixtral_parts[] = {"attn_q", "attn_k", "attn_v", "attn_output",
                                                "attn_norm", "ffn_norm", "ffn_gate", "ffn_up",
                                                "ffn_down", NULL};
    static const char *const qwen25vl_parts[] = {"attn_qkv", "attn_out", "ln1", "ln2",
                                                 "ffn_gate", "ffn_up", "ffn_down", NULL};
    const char *rest = name + used;
    for (const char *const *part = pixtral ? pixtral_parts : qwen ? qwen25vl_parts : siglip_parts;
         *part; part++) {
        size_t n = strlen(*part);
        if (!strncmp(rest, *part, n) && (!strcmp(rest + n, ".weight") ||
                                         (!pixtral && !strcmp(rest + n, ".bias"))))
            return true;
    }
    return false;
}

/* A gpt-oss block's tensor but its experts' (the part of its name after "blk.L."). */
static bool known_gptoss_tensor(const char *suffix)
{
    static const char *const names[] = {
        "attn_norm.weight",   "attn_q.weight",      "attn_q.bias",
        "attn_k.weight",      "attn_k.bias",        "attn_v.weight",
        "attn_v.bias",        "attn_output.weight", "attn_output.bias",
        "attn_sinks.weight",  "post_attention_norm.weight", "ffn_gate_inp.weight",
        "ffn_gate_inp.bias",
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strcmp(suffix, names[i]))
            return true;
    return false;
}

/* An OLMo 2, Cohere 2 or StarCoder2 block's tensor (the part of its name after "blk.L."). */
static bool known_block_tensor(arch_family f, const char *suffix)
{
    static const char *const olmo2[] = {
        "attn_q.weight",      "attn_k.weight",       "attn_v.weight",
        "attn_output.weight", "attn_q_norm.weight",  "attn_k_norm.weight",
        "ffn_gate.weight",    "ffn_up.weight",       "ffn_down.weight",
        "post_attention_norm.weight", "post_ffw_norm.weight",
    };
    static const char *const cohere2[] = {
        "attn_norm.weight", "attn_q.weight",   "attn_k.weight", "attn_v.weight",
        "attn_output.weight", "ffn_gate.weight", "ffn_up.weight", "ffn_down.weight",
    };
    static const char *const starcoder2[] = {
        "attn_norm.weight", "attn_norm.bias", "attn_q.weight",     "attn_q.bias",
        "attn_k.weight",    "attn_k.bias",    "attn_v.weight",     "attn_v.bias",
        "attn_output.weight", "attn_output.bias", "ffn_norm.weight", "ffn_norm.bias",
        "ffn_up.weight",    "ffn_up.bias",    "ffn_down.weight",   "ffn_down.bias",
    };
    const char *const *names = f == FAMILY_OLMO2 ? olmo2 : f == FAMILY_COHERE2 ? cohere2
                                                                              : starcoder2;
    size_t n = f == FAMILY_OLMO2     ? sizeof olmo2 / sizeof olmo2[0]
               : f == FAMILY_COHERE2 ? sizeof cohere2 / sizeof cohere2[0]
                                     : sizeof starcoder2 / sizeof starcoder2[0];
    for (size_t i = 0; i < n; i++)
        if (!strcmp(suffix, names[i]))
            return true;
    return false;
}

/* A Gemma 3n block's tensor (the part of its name after "blk.L."). */
static bool known_gemma3n_tensor(const char *suffix)
{
    static const char *const names[] = {
        "attn_norm",     "attn_q",        "attn_k",          "attn_v",
        "attn_output",   "attn_q_norm",   "attn_k_norm",     "post_attention_norm",
        "ffn_norm",      "ffn_gate",      "ffn_up",          "ffn_down",
        "post_ffw_norm", "inp_gate",      "proj",            "post_norm",
        "altup_correct_coef", "altup_correct_scale", "altup_predict_coef", "altup_router",
        "altup_router_norm",  "laurel_l",  "laurel_r",        "laurel_post_norm", NULL};
    return is_part(suffix, names, false);
}

/* Whether a Qwen 3.5 layer is attention (every full_attention_interval-th), else Gated
 * DeltaNet. */
static bool qwen35_attention_layer(const hf_params *p, unsigned layer)
{
    return (layer + 1) % p->full_attention_interval == 0;
}

/* A Qwen 3.5 block's tensor (the part of its name after "blk.L."), by the layer's kind. */
static bool known_qwen35_tensor(const hf_params *p, unsigned layer, const char *suffix)
{
    static const char *const both[] = {"attn_norm.weight", "post_attention_norm.weight"};
    static const char *const ffn[] = {"ffn_gate.weight", "ffn_up.weight", "ffn_down.weight"};
    static const char *const moe[] = {"ffn_gate_inp.weight", "ffn_gate_inp_shexp.weight",
                                      "ffn_gate_shexp.weight", "ffn_up_shexp.weight",
                                      "ffn_down_shexp.weight"};
    static const char *const attention[] = {"attn_q.weight",      "attn_k.weight",
                                            "attn_v.weight",      "attn_output.weight",
                                            "attn_q_norm.weight", "attn_k_norm.weight"};
    static const char *const delta_net[] = {"attn_qkv.weight",   "attn_gate.weight",
                                            "ssm_beta.weight",   "ssm_alpha.weight",
                                            "ssm_conv1d.weight", "ssm_dt.bias",
                                            "ssm_a",             "ssm_norm.weight",
                                            "ssm_out.weight"};
    static const char *const next_delta_net[] = {"ssm_in.weight",     "ssm_ba.weight",
                                                 "ssm_conv1d.weight", "ssm_dt.bias",
                                                 "ssm_a",             "ssm_norm.weight",
                                                 "ssm_out.weight"};
    for (size_t i = 0; i < sizeof both / sizeof both[0]; i++)
        if (!strcmp(suffix, both[i]))
            return true;
    for (size_t i = 0; !p->n_expert && i < sizeof ffn / sizeof ffn[0]; i++)
        if (!strcmp(suffix, ffn[i]))
            return true;
    for (size_t i = 0; p->n_expert && i < sizeof moe / sizeof moe[0]; i++)
        if (!strcmp(suffix, moe[i]))
            return true;
    bool full = qwen35_attention_layer(p, layer), next = hf_family_is_qwen3next(p->arch);
    const char *const *names = full ? attention : next ? next_delta_net : delta_net;
    size_t n = full   ? sizeof attention / sizeof attention[0]
               : next ? sizeof next_delta_net / sizeof next_delta_net[0]
                      : sizeof delta_net / sizeof delta_net[0];
    for (size_t i = 0; i < n; i++)
        if (!strcmp(suffix, names[i]))
            return true;
    return false;
}

bool hf_family_v_order(const hf_params *p, const char *name, hf_v_order *order)
{
    if (p->arch->family != FAMILY_QWEN35 || hf_family_is_qwen3next(p->arch) ||
        p->value_heads == p->key_heads)
        return false; /* Qwen3-Next's GGUF keeps the checkpoint's grouped order */
    const char *suffix = strchr(name, '.');
    if (strncmp(name, "blk.", 4) != 0 || !suffix || !(suffix = strchr(suffix + 1, '.')))
        return false;
    suffix++;
    uint64_t qk = 2 * (uint64_t)p->key_heads * p->key_head_dim;
    uint64_t v = (uint64_t)p->value_heads * p->value_head_dim;
    static const struct {
        const char *suffix;
        bool qk_first, per_dim, columns;
    } kinds[] = {
        {"attn_qkv.weight", true, true, false},  {"ssm_conv1d.weight", true, true, false},
        {"attn_gate.weight", false, true, false}, {"ssm_beta.weight", false, false, false},
        {"ssm_alpha.weight", false, false, false}, {"ssm_out.weight", false, true, true},
        {"ssm_a", false, false, true},            {"ssm_dt.bias", false, false, true},
    };
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
        if (!strcmp(suffix, kinds[i].suffix)) {
            order->first = kinds[i].qk_first ? qk : 0;
            order->head_size = kinds[i].per_dim ? p->value_head_dim : 1;
            order->size = order->first + (kinds[i].per_dim ? v : p->value_heads);
            order->columns = kinds[i].columns;
            return true;
        }
    return false;
}

bool hf_family_parse_packed_experts(const hf_arch *a, const char *name, unsigned *layer,
                                    bool *down)
{
    static const char *const spellings[][2] = {
        {"model.language_model.layers.%u.mlp.experts.%15[a-z_]",
         "model.language_model.layers.%u.mlp.experts.%s"},
        {"model.layers.%u.mlp.experts.%15[a-z_]", "model.layers.%u.mlp.experts.%s"},
        {"language_model.model.layers.%u.feed_forward.experts.%15[a-z_]", /* Llama 4's */
         "language_model.model.layers.%u.feed_forward.experts.%s"},
    };
    char part[16], again[256];
    if (a->family != FAMILY_QWEN35 && !hf_family_experts_transposed(a))
        return false;
    for (size_t i = 0; i < sizeof spellings / sizeof spellings[0]; i++) {
        if (sscanf(name, spellings[i][0], layer, part) != 2)
            continue;
        *down = !strcmp(part, "down_proj");
        snprintf(again, sizeof again, spellings[i][1], *layer, part);
        /* exactly that spelling: no "+1" or "01" */
        return (*down || !strcmp(part, "gate_up_proj")) && !strcmp(again, name);
    }
    return false;
}

bool hf_family_parse_stacked(const hf_params *p, const char *name, char *stack, size_t cap,
                             uint32_t *index, uint32_t *count)
{
    static const char *const stacks[][2] = {
        {"model.language_model.altup_projections.", "altup_proj.weight"},
        {"model.language_model.altup_unembed_projections.", "altup_unembd_proj.weight"},
    };
    if (p->arch->family != FAMILY_GEMMA3N)
        return false;
    for (size_t i = 0; i < sizeof stacks / sizeof stacks[0]; i++) {
        size_t n = strlen(stacks[i][0]);
        unsigned k;
        char again[128];
        if (strncmp(name, stacks[i][0], n) != 0 || sscanf(name + n, "%u", &k) != 1)
            continue;
        snprintf(again, sizeof again, "%s%u.weight", stacks[i][0], k);
        if (strcmp(again, name) != 0) /* exactly that spelling: no "+1" or "01" */
            return false;
        snprintf(stack, cap, "%s", stacks[i][1]);
        *index = k;
        *count = p->gemma3n.altup_inputs - 1; /* one per input but the active one */
        return true;
    }
    return false;
}

float hf_family_clamp(const hf_params *p, const char *gguf_name)
{
    static const char *const coefs[] = {".altup_predict_coef.weight",
                                        ".altup_correct_coef.weight"};
    size_t len = strlen(gguf_name);
    for (size_t i = 0; p->arch->family == FAMILY_GEMMA3N && i < 2; i++)
        if (len > strlen(coefs[i]) && !strcmp(gguf_name + len - strlen(coefs[i]), coefs[i]))
            return p->gemma3n.coef_clip;
    return 0.0f;
}

bool hf_family_skipped_tensor(const hf_params *p, const char *name)
{
    static const char *const gemma3n_towers[] = {"model.vision_tower.", "model.audio_tower.",
                                                 "model.embed_vision.", "model.embed_audio."};
    arch_family f = p->arch->family;
    for (size_t i = 0; f == FAMILY_GEMMA3N && i < 4; i++)
        if (!strncmp(name, gemma3n_towers[i], strlen(gemma3n_towers[i])))
            return true; /* the text model only, as ollama's converter writes it */
    if (f == FAMILY_BERT)
        return hf_embed_skipped_tensor(p->arch, name);
    if (f == FAMILY_NEMOTRON_H)
        return hf_nemotron_h_skipped_tensor(name);
    if (f == FAMILY_DEEPSEEK2)
        return hf_deepseek2_skipped_tensor(p, name);
    if (f == FAMILY_GEMMA4)
        return hf_gemma4_skipped_tensor(p, name);
    if (f == FAMILY_GLMOCR)
        return hf_glmocr_skipped_tensor(p, name);
    return f == FAMILY_QWEN35 &&
           (!strncmp(name, "model.visual.", 13) || !strncmp(name, "mtp.", 4));
}

bool hf_family_adds_one(const hf_arch *a, const char *gguf_name)
{
    size_t len = strlen(gguf_name), n = strlen("_norm.weight");
    bool norm = len > n && !strcmp(gguf_name + len - n, "_norm.weight");
    if (hf_family_is_gemma(a))
        return norm;
    /* Qwen 3.5's RMSNorms scale by 1 + w, but its gated norm (ssm_norm) by w */
    return a->family == FAMILY_QWEN35 && norm && !strstr(gguf_name, ".ssm_norm.");
}

bool hf_family_listed(const char *s, const char *const *names, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(s, names[i]))
            return true;
    return false;
}

const char *hf_family_layer_suffix(const hf_params *p, const char *name, unsigned *layer)
{
    char prefix[32];
    if (sscanf(name, "blk.%u.", layer) != 1 || *layer >= p->n_layer)
        return NULL;
    int used = snprintf(prefix, sizeof prefix, "blk.%u.", *layer);
    if (strncmp(name, prefix, (size_t)used) != 0) /* "blk.01." or "blk.+1." */
        return NULL;
    return name + used;
}

bool hf_family_read_count(const json_t *config, const char *key, bool required, uint32_t max,
                          uint32_t *out, corral_error *err)
{
    const json_t *v = json_object_get(config, key);
    if (!v || json_is_null(v)) {
        if (required)
            corral_error_set(err, "config.json has no %s", key);
        return !required;
    }
    if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > max) {
        corral_error_set(err, "config.json: %s must be an integer from 1 to %u", key, max);
        return false;
    }
    *out = (uint32_t)json_integer_value(v);
    return true;
}

bool hf_family_known_tensor(const hf_params *p, const char *name)
{
    if (p->arch->vision && (!strncmp(name, "v.", 2) || !strncmp(name, "mm.", 3)))
        return known_vision_tensor(p, name);
    if (p->arch->family == FAMILY_BERT)
        return hf_embed_known_tensor(p, name);
    if (hf_lfm2_is_vl(p->arch) && (!strncmp(name, "v.", 2) || !strncmp(name, "mm.", 3)))
        return hf_lfm2_known_tower(p, name);
    if (hf_family_is_glmocr(p->arch) && (!strncmp(name, "v.", 2) || !strncmp(name, "mm.", 3)))
        return hf_glmocr_known_tower(p, name);
    if (hf_family_is_deepseekocr(p->arch) &&
        (!strncmp(name, "v.", 2) || !strncmp(name, "s.", 2) || !strncmp(name, "mm.", 3)))
        return hf_deepseekocr_known_tower(p, name);
    arch_family f = p->arch->family;
    if (f == FAMILY_GEMMA4 && hf_gemma4_known_global(p, name))
        return true;
    if (f == FAMILY_GEMMA3N && (!strcmp(name, "per_layer_token_embd.weight") ||
                                !strcmp(name, "per_layer_model_proj.weight") ||
                                !strcmp(name, "per_layer_proj_norm.weight")))
        return true;
    if (!strcmp(name, "token_embd.weight") || !strcmp(name, "output_norm.weight") ||
        !strcmp(name, "output.weight") ||
        (f == FAMILY_STARCODER2 && !strcmp(name, "output_norm.bias")) ||
        (f == FAMILY_LFM2 && !strcmp(name, "token_embd_norm.weight"))) /* its final norm */
        return true;
    unsigned layer;
    const char *suffix = hf_family_layer_suffix(p, name, &layer);
    if (!suffix)
        return false;
    if (f == FAMILY_GPTOSS)
        return known_gptoss_tensor(suffix);
    if (f == FAMILY_LFM2)
        return hf_lfm2_known_tensor(p, layer, suffix);
    if (f == FAMILY_NEMOTRON_H)
        return hf_nemotron_h_known_tensor(p, layer, suffix);
    if (f == FAMILY_DEEPSEEK2)
        return hf_deepseek2_known_tensor(p, layer, suffix);
    if (f == FAMILY_GEMMA4)
        return hf_gemma4_known_tensor(p, layer, suffix);
    if (f == FAMILY_LAGUNA)
        return hf_laguna_known_tensor(p, layer, suffix);
    if (f == FAMILY_GLMOCR)
        return hf_glmocr_known_tensor(p, layer, suffix);
    if (f == FAMILY_DEEPSEEKOCR)
        return hf_deepseekocr_known_tensor(p, layer, suffix);
    if (f == FAMILY_QWEN35)
        return known_qwen35_tensor(p, layer, suffix);
    if (f == FAMILY_GEMMA3N)
        return known_gemma3n_tensor(suffix);
    if (f == FAMILY_COMMAND_R && p->qk_norm &&
        (!strcmp(suffix, "attn_q_norm.weight") || !strcmp(suffix, "attn_k_norm.weight")))
        return true;
    if (f == FAMILY_OLMO2 || f == FAMILY_COHERE2 || f == FAMILY_COMMAND_R ||
        f == FAMILY_STARCODER2)
        return known_block_tensor(f == FAMILY_COMMAND_R ? FAMILY_COHERE2 : f, suffix);
    static const char *const block[] = {"attn_norm.weight", "attn_output.weight",
                                        "ffn_norm.weight", "ffn_up.weight", "ffn_down.weight"};
    for (size_t i = 0; i < sizeof block / sizeof block[0]; i++)
        if (!strcmp(suffix, block[i]))
            return true;
    if (p->n_expert && !strcmp(suffix, "ffn_gate_inp.weight"))
        return true;
    if (f == FAMILY_PHI3) /* q/k/v in one matrix, gate and up in one */
        return !strcmp(suffix, "attn_qkv.weight");
    if (f == FAMILY_MLLAMA) { /* a cross-attention layer's, in those layers */
        static const char *const cross[] = {"cross_attn_q_proj", "cross_attn_k_proj",
                                            "cross_attn_v_proj", "cross_attn_o_proj",
                                            "cross_attn_q_norm", "cross_attn_k_norm", NULL};
        bool in_cross = false;
        for (uint32_t i = 0; i < p->n_cross; i++)
            in_cross = in_cross || p->cross_layers[i] == (int32_t)layer;
        if (in_cross && (is_part(suffix, cross, false) || !strcmp(suffix, "cross_attn_attn_gate") ||
                         !strcmp(suffix, "cross_attn_mlp_gate")))
            return true;
    }
    if (f == FAMILY_LLAMA4 && (!strcmp(suffix, "ffn_gate_shexp.weight") ||
                               !strcmp(suffix, "ffn_up_shexp.weight") ||
                               !strcmp(suffix, "ffn_down_shexp.weight")))
        return true;
    if (!strcmp(suffix, "attn_q.weight") || !strcmp(suffix, "attn_k.weight") ||
        !strcmp(suffix, "attn_v.weight") || !strcmp(suffix, "ffn_gate.weight"))
        return true;
    if (f == FAMILY_QWEN2 && (!strcmp(suffix, "attn_q.bias") || !strcmp(suffix, "attn_k.bias") ||
                              !strcmp(suffix, "attn_v.bias")))
        return true;
    if (has_sandwich_norms(p->arch) && (!strcmp(suffix, "post_attention_norm.weight") ||
                                        !strcmp(suffix, "post_ffw_norm.weight")))
        return true;
    return (f == FAMILY_QWEN3 || f == FAMILY_GEMMA3) &&
           (!strcmp(suffix, "attn_q_norm.weight") || !strcmp(suffix, "attn_k_norm.weight"));
}

bool hf_family_parse_expert(const char *name, unsigned *layer, unsigned *expert,
                            const char **kind)
{
    static const char *const hf[][2] = {{"gate_proj", "gate"}, {"up_proj", "up"},
                                        {"down_proj", "down"}, {"w1", "gate"},
                                        {"w3", "up"}, {"w2", "down"}};
    char part[16], again[256];
    /* Mixtral's w1/w2/w3 under block_sparse_moe, LFM2's under feed_forward */
    bool lfm2 = sscanf(name, "model.layers.%u.feed_forward.experts.%u.%15[a-z0-9].weight",
                       layer, expert, part) == 3;
    bool nemotron = sscanf(name, "backbone.layers.%u.mixer.experts.%u.%15[a-z_].weight", layer,
                           expert, part) == 3; /* up_proj and down_proj: ReLU², no gate */
    if (lfm2 || nemotron ||
        sscanf(name, "model.layers.%u.mlp.experts.%u.%15[a-z_].weight", layer, expert,
               part) == 3 ||
        sscanf(name, "model.layers.%u.block_sparse_moe.experts.%u.%15[a-z0-9].weight", layer,
               expert, part) == 3) {
        for (size_t i = 0; i < sizeof hf / sizeof hf[0]; i++) {
            bool mixtral = hf[i][0][0] == 'w';
            snprintf(again, sizeof again,
                     lfm2       ? "model.layers.%u.feed_forward.experts.%u.%s.weight"
                     : nemotron ? "backbone.layers.%u.mixer.experts.%u.%s.weight"
                     : mixtral  ? "model.layers.%u.block_sparse_moe.experts.%u.%s.weight"
                                : "model.layers.%u.mlp.experts.%u.%s.weight",
                     *layer, *expert, hf[i][0]);
            if (strcmp(again, name) == 0) { /* exactly that spelling: no "+1" or "01" */
                *kind = hf[i][1];
                return true;
            }
        }
    }
    return false;
}

bool hf_family_parse_gptoss_experts(const char *name, unsigned *layer, gptoss_part *part)
{
    static const char *const parts[] = {
        [GPTOSS_GATE_UP] = "gate_up_proj",          [GPTOSS_GATE_UP_BIAS] = "gate_up_proj_bias",
        [GPTOSS_GATE_UP_BLOCKS] = "gate_up_proj_blocks",
        [GPTOSS_GATE_UP_SCALES] = "gate_up_proj_scales", [GPTOSS_DOWN] = "down_proj",
        [GPTOSS_DOWN_BIAS] = "down_proj_bias",      [GPTOSS_DOWN_BLOCKS] = "down_proj_blocks",
        [GPTOSS_DOWN_SCALES] = "down_proj_scales",
    };
    char part_name[24], again[256];
    if (sscanf(name, "model.layers.%u.mlp.experts.%23[a-z_]", layer, part_name) != 2)
        return false;
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
        snprintf(again, sizeof again, "model.layers.%u.mlp.experts.%s", *layer, parts[i]);
        if (strcmp(again, name) == 0) { /* exactly that spelling: no "+1" or "01" */
            *part = (gptoss_part)i;
            return true;
        }
    }
    return false;
}

static float *add_extra(family *c, const char *name, uint32_t n)
{
    hf_extra_tensor *e = &c->extras[c->n_extras];
    if (!(e->data = malloc((n ? n : 1) * sizeof *e->data))) {
        corral_error_set(c->err, "out of memory");
        return NULL;
    }
    e->name = name;
    e->n = n;
    c->n_extras++;
    return e->data;
}

/* Phi-3's LongRoPE factors (rope_scaling's long_factor and short_factor), one per pair. */
static hf_status make_longrope_factors(family *c)
{
    const hf_params *p = &c->p;
    const json_t *s = json_object_get(c->config, "rope_scaling");
    static const char *const keys[2] = {"long_factor", "short_factor"};
    static const char *const names[2] = {"rope_factors_long.weight", "rope_factors_short.weight"};
    for (int k = 0; k < 2; k++) {
        const json_t *list = json_object_get(s, keys[k]);
        if (!json_is_array(list) || json_array_size(list) != p->head_dim / 2) {
            corral_error_set(c->err, "config.json: rope_scaling's %s must be %u numbers",
                             keys[k], p->head_dim / 2);
            return HF_INVALID;
        }
        float *out = add_extra(c, names[k], p->head_dim / 2);
        if (!out)
            return HF_IO;
        for (uint32_t i = 0; i < p->head_dim / 2; i++) {
            const json_t *v = json_array_get(list, i);
            double d = json_number_value(v);
            if (!json_is_number(v) || !(d > 0) || d > 3.4e38) {
                corral_error_set(c->err, "config.json: rope_scaling's %s[%u] is not a positive "
                                 "number", keys[k], i);
                return HF_INVALID;
            }
            out[i] = (float)d;
        }
    }
    return HF_OK;
}

/* Llama 3's per-frequency RoPE scale (its "llama3" rope_scaling), one factor per pair. */
static hf_status make_rope_freqs(family *c)
{
    const hf_params *p = &c->p;
    if (hf_family_is_gemma4(p->arch)) { /* its global layers' partial rotation */
        hf_extra_tensor *e = &c->extras[c->n_extras];
        if (!(e->data = hf_gemma4_rope_freqs(p, &e->n, c->err)))
            return HF_IO;
        e->name = "rope_freqs.weight";
        c->n_extras++;
        return HF_OK;
    }
    if (p->rope_type && p->arch->family == FAMILY_PHI3 &&
        (!strcmp(p->rope_type, "longrope") || !strcmp(p->rope_type, "su")))
        return make_longrope_factors(c);
    if (!p->rope_type || strcmp(p->rope_type, "llama3") != 0)
        return HF_OK;
    float factor = p->rope_factor > 0 ? p->rope_factor : 8.0f;
    float low = p->low_freq_factor > 0 ? p->low_freq_factor : 1.0f;
    float high = p->high_freq_factor > 0 ? p->high_freq_factor : 4.0f;
    float original = p->rope_original_ctx ? (float)p->rope_original_ctx : 8192.0f;
    float theta = p->has_theta ? p->rope_theta : 10000.0f;
    if (!(high >= low)) { /* equal (Llama 4 Scout's): a step with no band between */
        corral_error_set(c->err, "config.json: rope_scaling's high_freq_factor must not be "
                         "below its low_freq_factor");
        return HF_INVALID;
    }
    float *freqs = add_extra(c, "rope_freqs.weight", p->head_dim / 2);
    if (!freqs)
        return HF_IO;
    float low_wavelen = original / low, high_wavelen = original / high;
    for (uint32_t i = 0; i < p->head_dim / 2; i++) {
        double wavelen = 2 * M_PI * pow(theta, (double)(2 * i) / p->head_dim);
        if (wavelen < high_wavelen) {
            freqs[i] = 1.0f;
        } else if (wavelen > low_wavelen || high == low) {
            freqs[i] = factor;
        } else {
            float smooth = (original / (float)wavelen - low) / (high - low);
            freqs[i] = 1.0f / ((1 - smooth) / factor + smooth);
        }
    }
    return HF_OK;
}

hf_status hf_family_rope_tensors(const json_t *config, const hf_params *p,
                                 hf_extra_tensor extras[2], size_t *n_extras, corral_error *err)
{
    family c = {.config = p->text_config ? p->text_config : config, .section = "", .p = *p,
                .err = err, .extras = extras};
    hf_status status = make_rope_freqs(&c);
    *n_extras = c.n_extras;
    return status;
}

/*
 * Phi-3's window, the context its RoPE was trained for, and the attention factor its scaled
 * RoPE takes (LongRoPE: sqrt(1 + ln(scale) / ln(original)); yarn: 0.1 ln(scale) + 1; at
 * least 1), scale being max_position_embeddings over the original.
 */
static bool write_phi3_keys(family *c, gguf_writer *w, const char *a)
{
    const hf_params *p = &c->p;
    char key[96];
    bool ok = true;
#define KEY(suffix) (snprintf(key, sizeof key, "%s." suffix, a), key)
    if (p->sliding_window)
        ok = gguf_writer_add_u32(w, KEY("attention.sliding_window"), p->sliding_window, c->err);
    uint32_t original = p->rope_original_ctx;
    if (ok && original && !p->rope_type)
        ok = gguf_writer_add_u32(w, KEY("rope.scaling.original_context_length"), original,
                                 c->err);
    if (ok && original && p->n_ctx && p->rope_type) {
        double scale = (double)p->n_ctx / original, factor;
        if (!strcmp(p->rope_type, "yarn"))
            factor = 0.1 * log(scale) + 1.0;
        else
            factor = sqrt(1.0 + log(scale) / log((double)original));
        ok = gguf_writer_add_f32(w, KEY("rope.scaling.attn_factor"),
                                 (float)(factor > 1.0 ? factor : 1.0), c->err);
        if (ok && strcmp(p->rope_type, "yarn") != 0)
            ok = gguf_writer_add_u32(w, KEY("rope.scaling.original_context_length"), original,
                                     c->err);
    }
#undef KEY
    return ok;
}

/* Gemma 2's and 3's attention windows and softcaps, Gemma 3's local RoPE base; the windows
 * of OLMo 3 and Cohere 2. */
static bool write_window_keys(family *c, gguf_writer *w, const char *a)
{
    const hf_params *p = &c->p;
    char key[96];
    bool ok = true;
#define KEY(suffix) (snprintf(key, sizeof key, "%s." suffix, a), key)
    if (p->sliding_window)
        ok = gguf_writer_add_u32(w, KEY("attention.sliding_window"), p->sliding_window, c->err);
    if (ok && p->attn_softcap > 0)
        ok = gguf_writer_add_f32(w, KEY("attn_logit_softcapping"), p->attn_softcap, c->err);
    if (ok && p->final_softcap > 0)
        ok = gguf_writer_add_f32(w, KEY("final_logit_softcapping"), p->final_softcap, c->err);
    /* EmbeddingGemma's local base is rope.freq_base_swa (hf_embed_write_keys), its sliding
     * layers the engine's default, as ollama's converter leaves them */
    bool embedding = hf_family_is_gemma_embedding(p->arch);
    if (ok && p->arch->family == FAMILY_GEMMA3 && !embedding)
        ok = gguf_writer_add_f32(w, KEY("rope.local.freq_base"),
                                 p->rope_local_theta > 0 ? p->rope_local_theta : 10000.0f, c->err);
    if (ok && p->n_sliding_pattern && !embedding)
        ok = gguf_writer_add_array(w, KEY("attention.sliding_window_pattern"), GGUF_TYPE_BOOL,
                                   p->sliding_pattern, p->n_sliding_pattern, c->err);
#undef KEY
    return ok;
}

/* Granite's multipliers and Cohere 2's logit scale, where config.json gives them. */
static bool write_scales(family *c, gguf_writer *w, const char *a)
{
    const hf_params *p = &c->p;
    const f32_key scales[] = {{"embedding_scale", p->embedding_scale},
                              {"residual_scale", p->residual_scale},
                              {"attention.scale", p->attention_scale},
                              {"logit_scale", p->logit_scale}};
    return write_given_f32s(c, w, a, scales, sizeof scales / sizeof scales[0], false);
}

/* Qwen 3.5's Gated DeltaNet sizes (under llama.cpp's ssm.* names), its attention layers'
 * interval and its M-RoPE sections. */
static bool write_qwen35_keys(family *c, gguf_writer *w, const char *a)
{
    const hf_params *p = &c->p;
    char key[96];
#define KEY(suffix) (snprintf(key, sizeof key, "%s." suffix, a), key)
    bool ok = hf_family_is_qwen3next(p->arch) || /* Qwen3-Next's RoPE is plain NeoX */
              gguf_writer_add_array(w, KEY("rope.dimension_sections"), GGUF_TYPE_INT32,
                                    p->rope_sections, 4, c->err);
    ok = ok &&
        gguf_writer_add_u32(w, KEY("ssm.conv_kernel"), p->conv_kernel, c->err) &&
        gguf_writer_add_u32(w, KEY("ssm.state_size"), p->key_head_dim, c->err) &&
        gguf_writer_add_u32(w, KEY("ssm.group_count"), p->key_heads, c->err) &&
        gguf_writer_add_u32(w, KEY("ssm.time_step_rank"), p->value_heads, c->err) &&
        gguf_writer_add_u32(w, KEY("ssm.inner_size"), p->value_heads * p->value_head_dim,
                            c->err) &&
        gguf_writer_add_u32(w, KEY("full_attention_interval"), p->full_attention_interval,
                            c->err);
#undef KEY
    return ok;
}

/* A tower's hyperparameters as ollama's converter writes them: under "<arch>.vision.". */
static bool write_vision_keys(family *c, gguf_writer *w, const char *a)
{
    const hf_vision *v = &c->p.vision;
    char key[96];
#define KEY(suffix) (snprintf(key, sizeof key, "%s." suffix, a), key)
    bool ok = gguf_writer_add_u32(w, KEY("vision.block_count"), v->n_layer, c->err) &&
              gguf_writer_add_u32(w, KEY("vision.embedding_length"), v->n_embd, c->err) &&
              gguf_writer_add_u32(w, KEY("vision.feed_forward_length"), v->n_ff, c->err) &&
              gguf_writer_add_u32(w, KEY("vision.image_size"), v->image_size, c->err) &&
              gguf_writer_add_u32(w, KEY("vision.patch_size"), v->patch_size, c->err) &&
              gguf_writer_add_u32(w, KEY("vision.num_channels"), v->n_channels, c->err) &&
              gguf_writer_add_u32(w, KEY("vision.attention.head_count"), v->n_head, c->err);
    /* pixtral's RMSNorms take a fixed epsilon, which ollama's converter does not write */
    if (ok && hf_family_is_pixtral(c->p.arch)) {
        ok = gguf_writer_add_u32(w, KEY("vision.attention.key_length"), v->head_dim, c->err) &&
             gguf_writer_add_f32(w, KEY("vision.rope.freq_base"), v->rope_theta, c->err) &&
             gguf_writer_add_u32(w, KEY("image_token_index"), v->image_token, c->err) &&
             gguf_writer_add_u32(w, KEY("spatial_merge_size"), v->merge_size, c->err) &&
             gguf_writer_add_bool(w, KEY("mm.projector_bias"), v->projector_bias, c->err);
        if (ok && v->projector_act[0])
            ok = gguf_writer_add_str(w, KEY("mm.projector_hidden_act"), v->projector_act,
                                     strlen(v->projector_act), c->err);
    } else if (ok) {
        ok = gguf_writer_add_f32(w, KEY("vision.attention.layer_norm_epsilon"), v->eps, c->err);
    }
    if (ok && v->tokens_per_image)
        ok = gguf_writer_add_u32(w, KEY("mm.tokens_per_image"), v->tokens_per_image, c->err);
#undef KEY
    return ok;
}

/* Qwen2.5-VL's M-RoPE sections and tower, as ollama's converter writes them. */
static bool write_qwen25vl_keys(family *c, gguf_writer *w, const char *a)
{
    const hf_vision *v = &c->p.vision;
    char key[96];
#define KEY(suffix) (snprintf(key, sizeof key, "%s." suffix, a), key)
    bool ok =
        gguf_writer_add_array(w, KEY("rope.mrope_section"), GGUF_TYPE_INT32,
                              c->p.rope_sections, 3, c->err) &&
        gguf_writer_add_u32(w, KEY("vision.block_count"), v->n_layer, c->err) &&
        gguf_writer_add_u32(w, KEY("vision.embedding_length"), v->n_embd, c->err) &&
        gguf_writer_add_u32(w, KEY("vision.attention.head_count"), v->n_head, c->err) &&
        gguf_writer_add_u32(w, KEY("vision.num_channels"), v->n_channels, c->err) &&
        gguf_writer_add_u32(w, KEY("vision.patch_size"), v->patch_size, c->err) &&
        gguf_writer_add_u32(w, KEY("vision.spatial_merge_size"), v->merge_size, c->err) &&
        gguf_writer_add_u32(w, KEY("vision.spatial_patch_size"), v->spatial_patch_size,
                            c->err) &&
        gguf_writer_add_u32(w, KEY("vision.window_size"), v->window_size, c->err) &&
        gguf_writer_add_f32(w, KEY("vision.attention.layer_norm_epsilon"), v->eps, c->err) &&
        gguf_writer_add_f32(w, KEY("vision.rope.freq_base"), v->rope_theta, c->err) &&
        gguf_writer_add_array(w, KEY("vision.fullatt_block_indexes"), GGUF_TYPE_INT32,
                              v->full_blocks, v->n_full, c->err) &&
        gguf_writer_add_u32(w, KEY("vision.temporal_patch_size"), v->temporal_patch_size,
                            c->err);
#undef KEY
    return ok;
}

/* Qwen3-VL's M-RoPE sections (where config.json lists them: ollama's engine otherwise takes
 * 24, 20, 20) and tower, as ollama's converter writes them. */
static bool write_qwen3vl_keys(family *c, gguf_writer *w, const char *a)
{
    const hf_vision *v = &c->p.vision;
    char key[96];
#define KEY(suffix) (snprintf(key, sizeof key, "%s." suffix, a), key)
    bool ok = !c->p.n_rope_sections ||
              gguf_writer_add_array(w, KEY("rope.mrope_section"), GGUF_TYPE_INT32,
                                    c->p.rope_sections, c->p.n_rope_sections, c->err);
    ok = ok &&
         gguf_writer_add_u32(w, KEY("vision.block_count"), v->n_layer, c->err) &&
         gguf_writer_add_u32(w, KEY("vision.embedding_length"), v->n_embd, c->err) &&
         gguf_writer_add_u32(w, KEY("vision.attention.head_count"), v->n_head, c->err) &&
         gguf_writer_add_u32(w, KEY("vision.num_channels"), v->n_channels, c->err) &&
         gguf_writer_add_u32(w, KEY("vision.patch_size"), v->patch_size, c->err) &&
         gguf_writer_add_u32(w, KEY("vision.spatial_merge_size"), v->merge_size, c->err) &&
         gguf_writer_add_f32(w, KEY("vision.attention.layer_norm_epsilon"), v->eps, c->err) &&
         gguf_writer_add_f32(w, KEY("vision.rope.freq_base"), v->rope_theta, c->err) &&
         gguf_writer_add_u32(w, KEY("vision.temporal_patch_size"), v->temporal_patch_size,
                             c->err) &&
         gguf_writer_add_array(w, KEY("vision.deepstack_visual_indexes"), GGUF_TYPE_INT32,
                               v->deepstack, v->n_deepstack, c->err);
    if (ok && v->shortest_edge)
        ok = gguf_writer_add_u32(w, KEY("vision.shortest_edge"), v->shortest_edge, c->err);
    if (ok && v->longest_edge)
        ok = gguf_writer_add_u32(w, KEY("vision.longest_edge"), v->longest_edge, c->err);
    if (ok && v->has_normalisation)
        ok = gguf_writer_add_array(w, KEY("vision.image_mean"), GGUF_TYPE_FLOAT32, v->image_mean,
                                   3, c->err) &&
             gguf_writer_add_array(w, KEY("vision.image_std"), GGUF_TYPE_FLOAT32, v->image_std,
                                   3, c->err);
#undef KEY
    return ok;
}

/* Gemma 3n's keys as ollama's converter writes them (its head size as head_dim, its local
 * RoPE base as rope.freq_base_local) and the final softcap ollama's engine fixes in code. */
static bool write_gemma3n_keys(family *c, gguf_writer *w, const char *a)
{
    const hf_params *p = &c->p;
    const hf_gemma3n *g = &p->gemma3n;
    char key[96];
#define KEY(suffix) (snprintf(key, sizeof key, "%s." suffix, a), key)
    bool ok =
        gguf_writer_add_u32(w, KEY("altup.active_idx"), g->altup_active, c->err) &&
        gguf_writer_add_bool(w, KEY("altup.correct_scale"), g->correct_scale, c->err) &&
        gguf_writer_add_f32(w, KEY("altup.lr_multiplier"), g->lr_multiplier, c->err) &&
        gguf_writer_add_u32(w, KEY("altup.num_inputs"), g->altup_inputs, c->err) &&
        gguf_writer_add_u32(w, KEY("attention.sliding_window"), p->sliding_window, c->err) &&
        gguf_writer_add_u32(w, KEY("attention.shared_kv_layers"), g->n_kv_shared, c->err) &&
        gguf_writer_add_u32(w, KEY("embedding_length_per_layer_input"), g->n_embd_per_layer,
                            c->err) &&
        gguf_writer_add_u32(w, KEY("head_dim"), p->head_dim, c->err) &&
        gguf_writer_add_f32(w, KEY("rope.freq_base_local"),
                            p->rope_local_theta > 0 ? p->rope_local_theta : 10000.0f, c->err);
    if (ok && p->n_sliding_pattern)
        ok = gguf_writer_add_array(w, KEY("attention.sliding_window_pattern"), GGUF_TYPE_BOOL,
                                   p->sliding_pattern, p->n_sliding_pattern, c->err);
    if (ok && g->sparsity_scale)
        ok = gguf_writer_add_array(w, KEY("activation_sparsity_scale"), GGUF_TYPE_FLOAT32,
                                   g->sparsity_scale, p->n_layer, c->err);
    if (ok && p->final_softcap > 0)
        ok = gguf_writer_add_f32(w, KEY("final_logit_softcapping"), p->final_softcap, c->err);
#undef KEY
    return ok;
}

/* Llama 3.2 Vision's cross-attention layers and tower, as ollama's converter writes them. */
static bool write_mllama_keys(family *c, gguf_writer *w, const char *a)
{
    const hf_params *p = &c->p;
    const hf_vision *v = &p->vision;
    char key[96];
#define KEY(suffix) (snprintf(key, sizeof key, "%s." suffix, a), key)
    bool ok =
        gguf_writer_add_array(w, KEY("attention.cross_attention_layers"), GGUF_TYPE_INT32,
                              p->cross_layers, p->n_cross, c->err) &&
        gguf_writer_add_u32(w, KEY("vision.block_count"), v->n_layer, c->err) &&
        gguf_writer_add_u32(w, KEY("vision.global.block_count"), v->n_global_layer, c->err) &&
        gguf_writer_add_array(w, KEY("vision.intermediate_layers_indices"), GGUF_TYPE_INT32,
                              v->kept, v->n_kept, c->err) &&
        gguf_writer_add_u32(w, KEY("vision.embedding_length"), v->n_embd, c->err) &&
        gguf_writer_add_u32(w, KEY("vision.feed_forward_length"), v->n_ff, c->err) &&
        gguf_writer_add_u32(w, KEY("vision.attention.head_count"), v->n_head, c->err) &&
        gguf_writer_add_f32(w, KEY("vision.attention.layer_norm_epsilon"), v->eps, c->err) &&
        gguf_writer_add_u32(w, KEY("vision.image_size"), v->image_size, c->err) &&
        gguf_writer_add_u32(w, KEY("vision.patch_size"), v->patch_size, c->err) &&
        gguf_writer_add_u32(w, KEY("vision.max_num_tiles"), v->max_tiles, c->err) &&
        gguf_writer_add_u32(w, KEY("vision.num_channels"), v->n_channels, c->err);
#undef KEY
    return ok;
}

/* Llama 4's MoE interleave, QK norm, attention chunk and tower, as ollama's converter writes
 * them (the tower's epsilon as vision.layer_norm_epsilon). */
static bool write_llama4_keys(family *c, gguf_writer *w, const char *a)
{
    const hf_params *p = &c->p;
    const hf_vision *v = &p->vision;
    char key[96];
#define KEY(suffix) (snprintf(key, sizeof key, "%s." suffix, a), key)
    bool ok = gguf_writer_add_u32(w, KEY("interleave_moe_layer_step"), p->moe_step, c->err) &&
              gguf_writer_add_bool(w, KEY("use_qk_norm"), p->qk_norm, c->err) &&
              gguf_writer_add_u32(w, KEY("vision.block_count"), v->n_layer, c->err) &&
              gguf_writer_add_u32(w, KEY("vision.embedding_length"), v->n_embd, c->err) &&
              gguf_writer_add_u32(w, KEY("vision.feed_forward_length"), v->n_ff, c->err) &&
              gguf_writer_add_u32(w, KEY("vision.attention.head_count"), v->n_head, c->err) &&
              gguf_writer_add_u32(w, KEY("vision.image_size"), v->image_size, c->err) &&
              gguf_writer_add_u32(w, KEY("vision.patch_size"), v->patch_size, c->err) &&
              gguf_writer_add_f32(w, KEY("vision.rope.freq_base"), v->rope_theta, c->err) &&
              gguf_writer_add_f32(w, KEY("vision.layer_norm_epsilon"), v->eps, c->err);
    if (ok && p->attention_chunk)
        ok = gguf_writer_add_u32(w, KEY("attention.chunk_size"), p->attention_chunk, c->err);
    if (ok && p->has_head_dim)
        ok = gguf_writer_add_u32(w, KEY("attention.head_dim"), p->head_dim, c->err);
    if (ok && v->pixel_shuffle_ratio > 0)
        ok = gguf_writer_add_f32(w, KEY("vision.pixel_shuffle_ratio"), v->pixel_shuffle_ratio,
                                 c->err);
#undef KEY
    return ok;
}

static bool write_keys(family *c, gguf_writer *w)
{
    const hf_params *p = &c->p;
    const char *a = p->arch->gguf_name;
    corral_error *err = c->err;
    char key[96];
#define KEY(suffix) (snprintf(key, sizeof key, "%s." suffix, a), key)
    bool ok = gguf_writer_add_str(w, "general.architecture", a, strlen(a), err) &&
              gguf_writer_add_u32(w, "general.file_type", c->any_bf16 ? 32 : 1, err) &&
              gguf_writer_add_u32(w, "general.quantization_version", 2, err) &&
              gguf_writer_add_u32(w, KEY("vocab_size"), c->n_vocab, err) &&
              gguf_writer_add_u32(w, KEY("block_count"), p->n_layer, err) &&
              gguf_writer_add_u32(w, KEY("embedding_length"), p->n_embd, err) &&
              (p->ffn_per_layer || /* per layer: hf_nemotron_h_write_keys' */
               (p->gemma3n.ff_per_layer
                    ? gguf_writer_add_array(w, KEY("feed_forward_length"), GGUF_TYPE_UINT32,
                                            p->gemma3n.ff_per_layer, p->n_layer, err)
                    : gguf_writer_add_u32(w, KEY("feed_forward_length"), p->n_ff, err))) &&
              (p->laguna.heads || /* per layer: hf_laguna_write_keys' */
               gguf_writer_add_u32(w, KEY("attention.head_count"), p->n_head, err)) &&
              (p->kv_heads_per_layer || /* per layer: hf_lfm2_write_keys' */
               gguf_writer_add_u32(w, KEY("attention.head_count_kv"), p->n_head_kv, err));
    if (ok && p->n_ctx)
        ok = gguf_writer_add_u32(w, KEY("context_length"), p->n_ctx, err);
    if (ok && p->n_expert)
        ok = gguf_writer_add_u32(w, KEY("expert_count"), p->n_expert, err) &&
             gguf_writer_add_u32(w, KEY("expert_used_count"), p->n_expert_used, err);
    if (ok && p->n_expert && p->n_ff_expert)
        ok = gguf_writer_add_u32(w, KEY("expert_feed_forward_length"), p->n_ff_expert, err);
    if (ok && p->n_expert && p->n_ff_shared)
        ok = gguf_writer_add_u32(w, KEY("expert_shared_feed_forward_length"), p->n_ff_shared,
                                 err);
    arch_family f = p->arch->family;
    bool phi3 = f == FAMILY_PHI3;
    if (ok && (f == FAMILY_LLAMA || phi3 || f == FAMILY_OLMO2 || f == FAMILY_COHERE2 ||
               f == FAMILY_STARCODER2 || f == FAMILY_LLAMA4 || f == FAMILY_MLLAMA ||
               hf_family_is_qwen3vl(p->arch)))
        ok = gguf_writer_add_u32(w, KEY("rope.dimension_count"), p->head_dim, err);
    if (ok && f == FAMILY_QWEN35)
        ok = gguf_writer_add_u32(w, KEY("rope.dimension_count"), p->rope_dims, err) &&
             write_qwen35_keys(c, w, a);
    if (ok && (p->has_head_dim || f == FAMILY_QWEN3 || f == FAMILY_QWEN35 ||
                    f == FAMILY_GEMMA3N || hf_family_is_gemma(p->arch)))
        ok = gguf_writer_add_u32(w, KEY("attention.key_length"), p->head_dim, err) &&
             gguf_writer_add_u32(w, KEY("attention.value_length"), p->head_dim, err);
    if (ok && p->has_theta)
        ok = gguf_writer_add_f32(w, KEY("rope.freq_base"), p->rope_theta, err);
    if (ok && p->has_eps)
        ok = gguf_writer_add_f32(w, KEY("attention.layer_norm_rms_epsilon"), p->rms_eps, err);
    if (ok && p->has_ln_eps &&
        (f == FAMILY_COHERE2 || f == FAMILY_COMMAND_R || f == FAMILY_STARCODER2))
        ok = gguf_writer_add_f32(w, KEY("attention.layer_norm_epsilon"), p->ln_eps, err);
    if (ok && f == FAMILY_COMMAND_R) /* as ollama's converter writes them */
        ok = gguf_writer_add_str(w, KEY("rope.scaling.type"), "none", 4, err) &&
             (!p->n_ctx || gguf_writer_add_u32(w, KEY("max_position_embeddings"), p->n_ctx, err));
    if (ok)
        ok = write_scales(c, w, a);
    if (ok && phi3)
        ok = write_phi3_keys(c, w, a);
    if (ok && p->arch->family == FAMILY_GPTOSS && p->sliding_window)
        ok = gguf_writer_add_u32(w, KEY("attention.sliding_window"), p->sliding_window, err);
    bool factors = p->rope_type && (!strcmp(p->rope_type, "llama3") ||
                                    !strcmp(p->rope_type, "longrope") ||
                                    !strcmp(p->rope_type, "su"));
    if (ok && p->rope_type && !factors) {
        ok = gguf_writer_add_str(w, KEY("rope.scaling.type"), p->rope_type,
                                 strlen(p->rope_type), err);
        if (ok && p->rope_factor > 0)
            ok = gguf_writer_add_f32(w, KEY("rope.scaling.factor"), p->rope_factor, err);
        if (ok && p->rope_original_ctx)
            ok = gguf_writer_add_u32(w, KEY("rope.scaling.original_context_length"),
                                     p->rope_original_ctx, err);
        if (ok && p->rope_attn_factor > 0)
            ok = gguf_writer_add_f32(w, KEY("rope.scaling.attn_factor"), p->rope_attn_factor,
                                     err);
    }
#undef KEY
    if (ok && (hf_family_is_gemma(p->arch) || f == FAMILY_OLMO2 || f == FAMILY_COHERE2))
        ok = write_window_keys(c, w, a);
    if (ok && f == FAMILY_GEMMA3N)
        ok = write_gemma3n_keys(c, w, a);
    if (ok && is_ministral(p->arch))
        ok = write_ministral_keys(c, w, a);
    if (ok && hf_family_is_encoder(p->arch))
        ok = hf_embed_write_keys(p, w, err);
    if (ok && hf_family_is_lfm2(p->arch))
        ok = hf_lfm2_write_keys(p, w, err);
    if (ok && hf_family_is_nemotron_h(p->arch))
        ok = hf_nemotron_h_write_keys(p, w, err);
    if (ok && hf_family_is_deepseek2(p->arch))
        ok = hf_deepseek2_write_keys(p, w, err);
    if (ok && hf_family_is_gemma4(p->arch))
        ok = hf_gemma4_write_keys(p, w, err);
    if (ok && hf_family_is_laguna(p->arch))
        ok = hf_laguna_write_keys(p, w, err);
    if (ok && hf_family_is_glmocr(p->arch))
        ok = hf_glmocr_write_keys(p, w, err);
    if (ok && hf_family_is_deepseekocr(p->arch))
        ok = hf_deepseekocr_write_keys(p, w, err);
    if (ok && hf_family_is_qwen25vl(p->arch))
        ok = write_qwen25vl_keys(c, w, a);
    else if (ok && hf_family_is_qwen3vl(p->arch))
        ok = write_qwen3vl_keys(c, w, a);
    else if (ok && f == FAMILY_LLAMA4)
        ok = write_llama4_keys(c, w, a);
    else if (ok && f == FAMILY_MLLAMA)
        ok = write_mllama_keys(c, w, a);
    else if (ok && p->arch->vision)
        ok = write_vision_keys(c, w, a);
    return ok;
}

bool hf_family_write_keys(const hf_params *p, uint32_t n_vocab, bool any_bf16, gguf_writer *w,
                          corral_error *err)
{
    family c = {.p = *p, .err = err, .n_vocab = n_vocab, .any_bf16 = any_bf16};
    return write_keys(&c, w);
}
