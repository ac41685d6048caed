/*
 * What Corral knows of each Hugging Face architecture it converts (see hf_convert.h for the
 * list): config.json read into its GGUF hyperparameters, its tensor names renamed to GGUF's,
 * which tensors it has, its experts' names, the RoPE factor tensors its config defines, and
 * the GGUF metadata keys it writes (llama.cpp's and ollama's for that architecture).
 */
#ifndef CORRAL_CONVERT_HF_FAMILY_H
#define CORRAL_CONVERT_HF_FAMILY_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "convert/hf_convert.h"
#include "gguf.h"

typedef enum arch_family {
    FAMILY_LLAMA,  /* HF rotates halves; GGUF's llama pairs neighbours: Q/K rows permuted */
    FAMILY_QWEN2,  /* q/k/v biases */
    FAMILY_QWEN3,  /* per-head q/k norms */
    FAMILY_GEMMA,  /* norms stored as w - 1 (Gemma's RMSNorm scales by 1 + w) */
    FAMILY_GEMMA2, /* gemma's, with norms after attention and around the FFN, softcaps */
    FAMILY_GEMMA3, /* gemma2's, with q/k norms and a local RoPE base */
    FAMILY_PHI3,   /* fused q/k/v and gate/up; LongRoPE's factors as tensors */
    FAMILY_GPTOSS, /* attention biases and sinks; experts fused per layer, MXFP4 or not */
    FAMILY_OLMO2,  /* norms after attention and the FFN only; q/k norms over all heads */
    FAMILY_COHERE2, /* one LayerNorm (weight only) before attention and FFN; logit scale */
    FAMILY_COMMAND_R, /* cohere2's block without its window; Command R+'s per-head q/k norms */
    FAMILY_STARCODER2, /* LayerNorms with biases, biases everywhere, a plain two-layer FFN */
    FAMILY_QWEN35, /* Qwen 3.5 and Qwen3-Next: Gated DeltaNet layers and gated attention */
    FAMILY_LLAMA4, /* Llama's layers (Q/K in GGUF's order already), every few an MoE layer */
    FAMILY_GEMMA3N, /* Gemma 3's blocks (norms as they are) with AltUp, LAuReL, per-layer inputs */
    FAMILY_MLLAMA, /* Llama's layers and cross-attention layers to a gated, tiled tower */
    FAMILY_BERT,   /* an encoder: hf_family_embed.c's */
    FAMILY_LFM2,   /* short convolutions and attention: hf_family_lfm2.c's */
    FAMILY_NEMOTRON_H, /* Mamba2, attention and FFN layers: hf_family_nemotron_h.c's */
    FAMILY_DEEPSEEK2,  /* multi-head latent attention: hf_family_deepseek2.c's */
    FAMILY_GEMMA4, /* sliding and global layers of two widths: hf_family_gemma4.c's */
    FAMILY_LAGUNA, /* gated attention, heads per layer, experts: hf_family_laguna.c's */
    FAMILY_GLMOCR, /* GLM-4's layers with M-RoPE and a tower: hf_family_glmocr.c's */
    FAMILY_DEEPSEEKOCR, /* experts and SAM + CLIP towers: hf_family_deepseekocr.c's */
} arch_family;

typedef struct hf_arch {
    const char *hf_name;
    const char *gguf_name;
    arch_family family;
    bool vision; /* a text model under text_config with a vision tower under vision_config */
} hf_arch;

/* A vision tower's hyperparameters (config.json's vision_config), as ollama writes them. */
typedef struct hf_vision {
    uint32_t n_layer, n_embd, n_ff, n_head, image_size, patch_size, n_channels;
    uint32_t tokens_per_image; /* config.json's mm_tokens_per_image; 0 when absent */
    float eps;
    /* Mistral 3's pixtral tower: its head size and RoPE base, config.json's merge square,
     * image token, whether the projector has biases and its activation ("" when absent) */
    uint32_t head_dim, merge_size, image_token;
    float rope_theta;
    bool projector_bias;
    char projector_act[32];
    /* Qwen2.5-VL's: its spatial patch size, attention window, temporal patch size and the
     * blocks that attend to the whole image (n_full of them) */
    uint32_t spatial_patch_size, window_size, temporal_patch_size;
    int32_t full_blocks[64];
    uint32_t n_full;
    /* Qwen3-VL's: the blocks whose states its deepstack mergers take (n_deepstack of them),
     * and preprocessor_config.json's normalisation and image size bounds (when given) */
    int32_t deepstack[64];
    uint32_t n_deepstack;
    float image_mean[3], image_std[3];
    bool has_normalisation;
    uint32_t shortest_edge, longest_edge;
    /* Llama 4's: its pixel shuffle (config.json's pixel_shuffle_ratio, 0 when absent) */
    float pixel_shuffle_ratio;
    /* Llama 3.2 Vision's: its global blocks, the blocks whose states it keeps (n_kept), the
     * tiles of an image */
    uint32_t n_global_layer, max_tiles, n_kept;
    int32_t kept[64];
} hf_vision;

/* Gemma 3n's (config.json's names in the comments) */
typedef struct hf_gemma3n {
    uint32_t n_embd_per_layer;      /* hidden_size_per_layer_input */
    uint32_t altup_inputs, altup_active; /* altup_num_inputs, altup_active_idx */
    uint32_t n_kv_shared;           /* num_kv_shared_layers */
    float coef_clip, lr_multiplier; /* altup_coef_clip (0: none), altup_lr_multiplier */
    bool correct_scale;             /* altup_correct_scale */
    float *sparsity_scale;          /* activation_sparsity_pattern's normal quantiles, per layer */
    uint32_t *ff_per_layer;         /* intermediate_size as a list (NULL: one width) */
} hf_gemma3n;

/* Gemma 4's (config.json's names in the comments) */
typedef struct hf_gemma4 {
    uint32_t global_head_dim;   /* global_head_dim: the global layers' head width */
    uint32_t n_global_kv_heads; /* num_global_key_value_heads */
    uint32_t n_kv_shared;       /* num_kv_shared_layers */
    uint32_t n_embd_per_layer;  /* hidden_size_per_layer_input (0: none) */
    bool k_eq_v;                /* attention_k_eq_v: the global layers have no v_proj */
    /* rope_parameters' full_attention and sliding_attention, each when given */
    bool has_full_rope, has_swa_rope;
    float rope_theta, rope_theta_swa, partial_rotary;
    /* audio_config, when it gives the tower's layers (n_audio_layer 0: no audio tower) */
    uint32_t n_audio_layer;  /* num_hidden_layers */
    uint32_t n_audio_embd;   /* hidden_size */
    uint32_t n_audio_head;   /* num_attention_heads */
    uint32_t audio_kernel;   /* conv_kernel_size (0: not written) */
    float audio_eps;         /* rms_norm_eps, 1e-6 when absent */
} hf_gemma4;

/* LFM2-VL's image settings, each where config.json (top) and processor_config.json's
 * image_processor (proc) give it: 0 (a flag: -1) when absent; ollama's converter takes the
 * first given, then its default. */
enum {
    LFM2VL_DOWNSAMPLE,  /* downsample_factor */
    LFM2VL_MIN_TILES,   /* min_tiles */
    LFM2VL_MAX_TILES,   /* max_tiles */
    LFM2VL_TILE_SIZE,   /* tile_size */
    LFM2VL_MIN_TOKENS,  /* min_image_tokens */
    LFM2VL_MAX_TOKENS,  /* max_image_tokens */
    LFM2VL_N_COUNTS,
};
enum { LFM2VL_SPLIT, LFM2VL_THUMBNAIL, LFM2VL_N_FLAGS }; /* do_image_splitting, use_thumbnail */
typedef struct hf_lfm2vl {
    uint32_t top[LFM2VL_N_COUNTS], proc[LFM2VL_N_COUNTS];
    int8_t top_flag[LFM2VL_N_FLAGS], proc_flag[LFM2VL_N_FLAGS];
    int8_t special_tokens; /* use_image_special_tokens */
    bool use_layernorm;    /* projector_use_layernorm */
    uint32_t encoder_patch, image_token, proc_height, proc_width;
    float tolerance, proc_tolerance; /* max_pixels_tolerance */
    float mean[3], std[3];           /* the image processor's, when it gives both */
    bool has_normalisation;
    /* the vocabulary's <|image_start|>, <|image_end|> and <|img_thumbnail|> (-1: none) */
    int64_t start_token, end_token, thumbnail_token;
} hf_lfm2vl;

/* One kind of layer's RoPE (Laguna's rope_parameters; config.json's names in the comments):
 * 0 (a type: NULL) where config.json is silent. */
typedef struct hf_rope_params {
    const char *type; /* rope_type, or type */
    float theta, factor, beta_fast, beta_slow, attention_factor, partial; /* rope_theta, ...,
                                                                          partial_rotary_factor */
    uint32_t original_ctx; /* original_max_position_embeddings */
} hf_rope_params;

/* Laguna's */
typedef struct hf_laguna {
    uint32_t *heads;          /* num_attention_heads_per_layer (NULL: one count) */
    hf_rope_params full, swa; /* the global layers' and the sliding ones' */
    float partial;            /* partial_rotary_factor, or full's */
    bool norm_topk;           /* norm_topk_prob (true when absent) */
    float routed_scale;       /* moe_routed_scaling_factor */
    bool layer_types;         /* whether config.json lists them (sliding_pattern) */
} hf_laguna;

/* GLM-OCR's (config.json's and preprocessor_config.json's names in the comments) */
typedef struct hf_glmocr {
    uint32_t nextn;           /* num_nextn_predict_layers, after the trunk's */
    float rope_theta, partial; /* rope_parameters' (or the text config's partial factor) */
    int32_t mrope[8];         /* rope_parameters' mrope_section (n_mrope of them) */
    uint32_t n_mrope;
    uint32_t out_hidden, min_pixels, max_pixels; /* out_hidden_size; size's edges */
    uint32_t pre_patch, pre_temporal, pre_merge; /* the preprocessor's sizes (0: absent) */
    float mean[3], std[3];
    bool has_mean, has_std;
    /* image_token_id, image_start_token_id, image_end_token_id, video_token_id,
     * video_start_token_id, video_end_token_id */
    uint32_t tokens[6];
} hf_glmocr;

/* DeepSeek-OCR's SAM tower (vision_config.width.sam_vit_b; its CLIP tower is hf_params'
 * vision) */
typedef struct hf_sam {
    uint32_t n_layer, n_embd, n_head; /* layers, width, heads */
    int32_t global[64];               /* global_attn_indexes (n_global of them) */
    uint32_t n_global;
} hf_sam;

/* config.json's hyperparameters, as the GGUF keys need them */
typedef struct hf_params {
    const hf_arch *arch;
    uint32_t n_layer, n_embd, n_ff, n_head, n_head_kv, head_dim, n_ctx;
    uint32_t n_expert, n_expert_used, n_ff_expert; /* a mixture of experts: n_expert > 0 */
    uint32_t n_ff_shared; /* a shared expert's width (Qwen 3.5's); 0 when absent */
    uint64_t vocab_size;
    bool has_head_dim, has_theta, has_eps, has_ln_eps;
    float rope_theta, rms_eps, ln_eps; /* RMSNorm's epsilon, LayerNorm's */
    const char *rope_type; /* rope_scaling's, or NULL */
    float rope_factor, low_freq_factor, high_freq_factor;
    float rope_attn_factor; /* yarn's attention_factor; 0 when absent */
    /* Granite's multipliers, Cohere 2's logit scale; 0 when absent */
    float embedding_scale, residual_scale, attention_scale, logit_scale;
    uint32_t rope_original_ctx;
    bool qk_norm; /* Command R+'s per-head q/k LayerNorms (use_qk_norm), Llama 4's QK norm */
    /* Ministral 3's YaRN (rope_parameters' beta_fast, beta_slow, mscale_all_dim; DeepSeek V3's
     * 0.1 mscale_all_dim) and its attention temperature (llama_4_scaling_beta); negative when
     * absent */
    float yarn_beta_fast, yarn_beta_slow, yarn_log_multiplier, temperature_scale;
    /* an encoder's pooling (0 none, 1 mean, 2 CLS) and whether its embeddings are normalized,
     * from sentence-transformers' modules */
    uint32_t pooling_type;
    bool normalize;
    /* nomic-bert-moe's: experts in each layer L with L % moe_every == 1 (moe_every_n_layers),
     * and its token types (type_vocab_size) */
    uint32_t moe_every, n_token_types;
    uint32_t dense_in[2], dense_out[2]; /* EmbeddingGemma's two projections */
    /* LFM2's and Nemotron-H's key/value heads per layer (0: a convolution or Mamba2 layer),
     * LFM2's leading dense layers before the experts, the experts' weights scale (0 when
     * absent) */
    uint32_t *kv_heads_per_layer;
    uint32_t n_dense_lead;
    float expert_weights_scale;
    /* Nemotron-H's: each layer's kind (hybrid_override_pattern: 'M' Mamba2, '*' attention,
     * '-' FFN, 'E' experts) and FFN width (0 but for '-' and 'E'), its Mamba2 sizes, its
     * shared experts and expert groups, whether the chosen experts' weights are normalized */
    char *layer_kinds;
    uint32_t *ffn_per_layer;
    uint32_t ssm_state, ssm_groups, ssm_heads, ssm_head_dim;
    uint32_t n_shared_experts, expert_groups, expert_groups_used;
    bool expert_weights_norm;
    /* DeepSeek V3's and GLM-4 MoE Lite's latent attention: its q (0: none) and kv ranks and its
     * heads' parts; their experts' scoring (scoring_func: 1 softmax, 2 sigmoid, 0 absent) */
    uint32_t q_lora_rank, kv_lora_rank, qk_nope_dim, qk_rope_dim, v_head_dim;
    uint32_t expert_gating;
    /* Gemma's */
    uint32_t sliding_window;
    float attn_softcap, final_softcap, rope_local_theta;
    uint8_t *sliding_pattern; /* per layer: 1 for a sliding-window layer */
    uint32_t n_sliding_pattern;
    /* a model with a vision tower: its text model's config (config.json with text_config's
     * keys over it, Gemma 3's defaults filled in), which rope_type points into, and its tower */
    json_t *text_config;
    hf_vision vision;
    /* Qwen 3.5's Gated DeltaNet layers (config.json's linear_*): the conv kernel, key heads
     * (each of key_head_dim), value heads (each of value_head_dim); every
     * full_attention_interval-th layer is attention, rotated on rope_dims of its head_dim
     * (M-RoPE, rope_sections) */
    uint32_t conv_kernel, key_heads, key_head_dim, value_heads, value_head_dim;
    uint32_t full_attention_interval, rope_dims;
    int32_t rope_sections[4];
    uint32_t n_rope_sections; /* how many config.json lists (0: none, the defaults above) */
    /* Llama 4's: an MoE layer every moe_step, its attention chunk (0 absent); its QK norm is
     * qk_norm */
    uint32_t moe_step, attention_chunk;
    hf_gemma3n gemma3n;
    hf_gemma4 gemma4;
    hf_lfm2vl lfm2vl;
    hf_laguna laguna;
    hf_glmocr glmocr;
    hf_sam sam;
    /* Llama 3.2 Vision's cross-attention layers (n_cross of them) */
    int32_t cross_layers[256];
    uint32_t n_cross;
} hf_params;

/*
 * Qwen 3.5's checkpoints keep each key head's value heads together (value head v of key head
 * k at k * per_key + v); llama.cpp's GGUF tiles them (at v * key_heads + k), which is what
 * Corral's engine reads. A tensor so reordered has its value heads in rows [first, first +
 * value_heads * head_size) (in columns when columns), head_size rows (columns) each; size is
 * what its Hugging Face shape[0] (its last dimension when columns) must be.
 */
typedef struct hf_v_order {
    uint64_t first, size;
    uint32_t head_size;
    bool columns;
} hf_v_order;

/* How the tensor (its GGUF name) is reordered; false when it is not. */
bool hf_family_v_order(const hf_params *p, const char *name, hf_v_order *order);

/* Qwen 3.5 MoE's, Qwen3-VL MoE's and Llama 4's experts, one tensor per layer and part
 * ("model.language_model.layers.L.mlp.experts.gate_up_proj", Llama 4's
 * "language_model.model.layers.L.feed_forward.experts.gate_up_proj": Qwen 3.5's [experts,
 * 2 n_ff, n_embd], gate's rows then up's, the others' [experts, n_embd, 2 n_ff], gate's
 * columns then up's; ".down_proj": Qwen 3.5's [experts, n_embd, n_ff], the others' [experts,
 * n_ff, n_embd]): which layer, and whether it is down's. False for any other name. */
bool hf_family_parse_packed_experts(const hf_arch *a, const char *name, unsigned *layer,
                                    bool *down);

/* Gemma 3n's numbered AltUp projections ("model.language_model.altup_projections.I.weight",
 * "...altup_unembed_projections.I.weight"), each stacked (I outermost) into one GGUF tensor:
 * its name into stack (cap bytes), I and the stack's size. False for any other name. */
bool hf_family_parse_stacked(const hf_params *p, const char *name, char *stack, size_t cap,
                             uint32_t *index, uint32_t *count);

/* The bound Gemma 3n's AltUp coefficients are clamped to (0: none) for a tensor (GGUF name). */
float hf_family_clamp(const hf_params *p, const char *gguf_name);

/* Whether a checkpoint's tensor is left out (Qwen 3.5's vision tower and its multi-token
 * prediction layers, DeepSeek V3's past num_hidden_layers, Gemma 3n's towers, Gemma 4's audio
 * tower without audio_config, GLM-OCR's layers past its prediction layers). */
bool hf_family_skipped_tensor(const hf_params *p, const char *name);

/* Whether a tensor is stored as w - 1 and converted to 1 + w (Gemma's and Qwen 3.5's norms). */
bool hf_family_adds_one(const hf_arch *a, const char *gguf_name);

/* An F32 vector made from config.json: Llama 3's rope_freqs, Phi-3's LongRoPE factors. */
typedef struct hf_extra_tensor {
    const char *name;
    float *data;
    uint32_t n;
} hf_extra_tensor;

/*
 * config.json (an object) into *p: the architecture (HF_INVALID naming it when Corral does not
 * convert it) and every hyperparameter the GGUF needs, each checked for type and range.
 * Free with hf_family_params_free.
 */
hf_status hf_family_read_config(const json_t *config, hf_params *p, corral_error *err);
void hf_family_params_free(hf_params *p);

/* The tensors config.json's rope_scaling defines (at most 2; a model with a vision tower:
 * text_config's), into extras; free their data. */
hf_status hf_family_rope_tensors(const json_t *config, const hf_params *p,
                                 hf_extra_tensor extras[2], size_t *n_extras, corral_error *err);

/* The architecture Corral converts to GGUF architecture gguf_name (the first listed), or NULL. */
const hf_arch *hf_family_by_gguf_name(const char *gguf_name);

/* A Hugging Face tensor name as GGUF's, into out (cap bytes, cut short if longer); a vision
 * tower's and its projector's under ollama's names ("v.blk.0.layer_norm1.weight",
 * "mm.mm_input_projection.weight"). */
void hf_family_rename(const hf_arch *a, const char *in, char *out, size_t cap);

/* Whether a GGUF name is one of the architecture's tensors (experts' stacks aside). */
bool hf_family_known_tensor(const hf_params *p, const char *name);

/* The row of renames (n pairs of a Hugging Face name piece and its GGUF piece) whose first
 * piece begins s, or NULL. */
const char *const *hf_family_rename_in(const char *const (*renames)[2], size_t n,
                                       const char *s);
/* in with every piece the n renames know replaced, left to right (the first row that begins
 * each position), into out (cap bytes, cut short past it). */
void hf_family_rename_by(const char *const (*renames)[2], size_t n, const char *in, char *out,
                         size_t cap);
/* Whether rest is one of the n parts followed by ".weight" or ".bias". */
bool hf_family_weight_or_bias(const char *rest, const char *const *parts, size_t n);

/* Whether s is one of the n names. */
bool hf_family_listed(const char *s, const char *const *names, size_t n);

/* What follows "blk.N." in a GGUF name, with N (below p->n_layer, written as the converter
 * writes it: not "blk.01." or "blk.+1.") in *layer; NULL for any other name. */
const char *hf_family_layer_suffix(const hf_params *p, const char *name, unsigned *layer);

/* A positive integer key of config: absent (refused when required, else *out left as it is)
 * or 1 to max. */
bool hf_family_read_count(const json_t *config, const char *key, bool required, uint32_t max,
                          uint32_t *out, corral_error *err);

/*
 * An expert's matrix ("model.layers.L.mlp.experts.E.gate_proj.weight", Mixtral's
 * "model.layers.L.block_sparse_moe.experts.E.w1.weight", LFM2's
 * "model.layers.L.feed_forward.experts.E.w1.weight", Nemotron-H's
 * "backbone.layers.L.mixer.experts.E.up_proj.weight"): which layer, expert and GGUF kind
 * (gate, up, down). False for any other name.
 */
bool hf_family_parse_expert(const char *name, unsigned *layer, unsigned *expert,
                            const char **kind);

/* gpt-oss's experts: one tensor per layer and part, gate and up interleaved row by row */
typedef enum gptoss_part {
    GPTOSS_GATE_UP,        /* [experts, n_embd, 2 n_ff]: gate and up, transposed */
    GPTOSS_GATE_UP_BIAS,   /* [experts, 2 n_ff] */
    GPTOSS_GATE_UP_BLOCKS, /* [experts, 2 n_ff, n_embd / 32, 16]: MXFP4's E2M1 pairs */
    GPTOSS_GATE_UP_SCALES, /* [experts, 2 n_ff, n_embd / 32]: MXFP4's E8M0 scales */
    GPTOSS_DOWN,           /* [experts, n_ff, n_embd]: transposed */
    GPTOSS_DOWN_BIAS,      /* [experts, n_embd] */
    GPTOSS_DOWN_BLOCKS,    /* [experts, n_embd, n_ff / 32, 16] */
    GPTOSS_DOWN_SCALES,    /* [experts, n_embd, n_ff / 32] */
} gptoss_part;

/* "model.layers.L.mlp.experts.gate_up_proj_blocks" and the like: which layer and part.
 * False for any other name. */
bool hf_family_parse_gptoss_experts(const char *name, unsigned *layer, gptoss_part *part);

/* Qwen3-Next: Qwen 3.5's family, its projections fused, its value heads kept grouped. */
bool hf_family_is_qwen3next(const hf_arch *a);

/* Mistral 3: a Llama text model with a pixtral tower. */
bool hf_family_is_pixtral(const hf_arch *a);

/* Qwen2.5-VL: a Qwen2 text model with M-RoPE and its windowed tower. */
bool hf_family_is_qwen25vl(const hf_arch *a);

/* Llama 3.2 Vision: a Llama text model with cross-attention layers and a gated, tiled tower. */
bool hf_family_is_mllama(const hf_arch *a);

/* Whether the architecture's packed experts are stored [experts, in, out] (Qwen3-VL MoE's,
 * Llama 4's). */
bool hf_family_experts_transposed(const hf_arch *a);

/* Qwen3-VL: a Qwen3 (or Qwen3 MoE) text model with interleaved M-RoPE and a deepstack tower. */
bool hf_family_is_qwen3vl(const hf_arch *a);

/* Qwen3-VL's preprocessor_config.json (an object): its normalisation and image size bounds,
 * into p's tower. */
hf_status hf_family_read_preprocessor(const json_t *preprocessor, hf_params *p,
                                      corral_error *err);

/* The pre-tokenizer the architecture's converter names whatever tokenizer.json's patterns
 * (LFM2's "lfm2", DeepSeek V3's "deepseek-v3", GLM-4 MoE Lite's "glm4", Gemma 4's "gemma4",
 * Laguna's "laguna", GLM-OCR's "chatglm-bpe", as ollama's write them), or NULL. */
const char *hf_family_pre_tokenizer(const hf_arch *a);

/* The tokenizer model a tokenizer.json BPE is written as: Gemma 4's "llama" (its BPE over
 * SentencePiece pieces, as ollama's converter names it), every other's "gpt2". */
const char *hf_family_bpe_model(const hf_arch *a);

/* Gemma's families store RMSNorm weights as w - 1. */
bool hf_family_is_gemma(const hf_arch *a);

/* general.* and the architecture's keys (the tokenizer's are hf_vocab_write's). */
bool hf_family_write_keys(const hf_params *p, uint32_t n_vocab, bool any_bf16, gguf_writer *w,
                          corral_error *err);

#endif
