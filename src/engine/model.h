/*
 * A loaded model: hyper-parameters, weights bound to the GGUF map (never copied), the
 * vocabulary, and the architecture that says which tensors must exist, which extra keys it
 * reads and which block it runs. Every tensor is checked for presence, type and shape at load,
 * so the forward pass trusts them. Families are arch_*.c over forward.h's blocks. Encoder
 * (embedding) families end in a pooled hidden state instead of logits.
 */
#ifndef CORRAL_ENGINE_MODEL_H
#define CORRAL_ENGINE_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "corral/engine.h"
#include "gguf.h"
#include "quant.h"

#define MODEL_MAX_LAYERS 512
#define MODEL_MAX_ROPE_VARIANTS 2
#define MODEL_MAX_EXPERTS 1024
#define MODEL_MAX_EXPERTS_USED 64

enum rope_mode {
    ROPE_NORMAL, /* rotate adjacent pairs (x[2i], x[2i+1]): llama */
    ROPE_NEOX,   /* rotate (x[i], x[i + n_rot/2]): qwen2, qwen3, phi3, gemma */
};

enum ffn_activation {
    FFN_SWIGLU, /* silu(gate) * up */
    FFN_GEGLU,  /* gelu_tanh(gate) * up, as ggml's fp16 table computes it */
    FFN_GELU,   /* gelu_tanh(up + bias), the same table; no gate (bert) */
    FFN_RELU_SQR, /* relu(up + bias)², no gate (nemotron, nemotron_h) */
    /* gpt-oss's experts: min(gate, 7) * sigmoid(1.702 * min(gate, 7)) * (clamp(up, -7, 7) + 1) */
    FFN_SWIGLU_OAI,
};

/* Whether the FFN has up and down only, no gate. */
static inline bool ffn_ungated(enum ffn_activation ffn)
{
    return ffn == FFN_GELU || ffn == FFN_RELU_SQR;
}

/* How an encoder's token states become one embedding: GGUF `<arch>.pooling_type`. */
enum pooling_type {
    POOLING_NONE = 0, /* no pooled output: the last token's state, as ollama takes it */
    POOLING_MEAN = 1,
    POOLING_CLS = 2,  /* the first token's state */
    POOLING_LAST = 3,
};

/* A weight matrix ne = [n_in, n_out] (or a vector when n_out == 1) in the map. A fused tensor
 * is bound once and sliced into row ranges, so the forward pass never sees the fusion. */
typedef struct weight {
    const void *data;  /* NULL when an optional tensor is absent */
    uint32_t type;
    size_t n_in, n_out;
    size_t row_bytes;
    const quant_ops *ops; /* kernels for the active CPU level */
    const struct lora_term *lora; /* adapters' terms to add to its products (lora.h), or NULL */
    /* the rows are a copy the model owns, not the file's mapping: a repacked copy must not
     * release their pages (that would zero them for the next context) */
    bool model_owned;
} weight;

/*
 * An expert matrix's rows where the file's layout is not ggml's: row r of the matrix (every
 * expert's rows, expert after expert) is the file's row_bytes at data + r * stride, in
 * ollama's MXFP4 nibble order when ollama_mxfp4 (TENSOR_TYPE_MXFP4_OLLAMA).
 */
typedef struct expert_source {
    const uint8_t *data; /* NULL: none */
    size_t stride;
    bool ollama_mxfp4;
} expert_source;

/* Rows [first, first + n) of src as ggml's rows of row_bytes each into dst (arch_gptoss.c). */
void expert_source_rows(const expert_source *src, size_t row_bytes, size_t first, size_t n,
                        void *dst);

typedef struct layer_weights {
    weight attn_norm;
    weight wq, wk, wv, wo;  /* row slices of attn_qkv when the file fuses them */
    weight bq, bk, bv;      /* q/k/v biases (F32 vectors), optional */
    weight q_norm, k_norm;  /* per-head RMSNorm weights, optional */
    weight q_norm_b, k_norm_b; /* their biases where they are LayerNorms (jina-bert-v2) */
    weight post_attn_norm;  /* gemma: norm of the attention output before the residual */
    weight ffn_norm;
    weight ffn_gate, ffn_up, ffn_down; /* gate/up are row slices of ffn_up when fused */
    weight post_ffn_norm;   /* gemma */
    /* a mixture-of-experts FFN in place of gate/up/down (hp.n_expert > 0): the router, and
     * every expert's matrix bound as one, expert e being rows [e * n, (e + 1) * n) of the
     * tensor's n_expert * n rows (n: hp.n_ff_exp for gate and up, n_embd for down) */
    weight ffn_gate_inp;
    weight ffn_gate_exps, ffn_up_exps, ffn_down_exps;
    /* where each expert's rows of those begin, when the file stores one 2-D tensor per expert
     * (blk.N.ffn_gate.E.weight: Mixtral files converted before the 3-D form); NULL otherwise */
    const void **gate_exps_rows, **up_exps_rows, **down_exps_rows;
    /* ARCH_EXPERT_BIASES: the router's bias (n_expert), and per expert a bias of each
     * matrix's rows, expert e's at e * rows (F32) */
    weight ffn_gate_inp_b, ffn_gate_exps_b, ffn_up_exps_b, ffn_down_exps_b;
    weight attn_sinks;      /* ARCH_ATTN_SINKS: a logit per query head (F32) */
    /* deepseek2's selection bias added to the router's scores for choosing experts only
     * (exp_probs_b), and a shared expert every token also runs (granitemoe, deepseek2):
     * optional */
    weight exp_probs_b;
    weight ffn_gate_shexp, ffn_up_shexp, ffn_down_shexp;
    weight ffn_gate_inp_shexp; /* ARCH_SHARED_EXPERT_GATE: one row [n_embd] */
    /* latent experts (hp.moe_latent > 0, Nemotron 3 Super): the routed experts run on
     * ffn_latent_down . x ([n_embd, moe_latent]), and their weighted sum goes through
     * ffn_latent_up ([moe_latent, n_embd]) back to n_embd; the router and the shared expert
     * read x itself */
    weight ffn_latent_down, ffn_latent_up;
    /* multi-head latent attention (deepseek2, mla.h): q = wq . rms(wq_a . x) (wq alone on
     * files without a q latent), [latent | k_rope] = wkv_a . x, and per head the matrices
     * that take a query's non-rotated part into the latent (wk_b) and the latent into the
     * head's values (wv_b); wo is attn_output. Files with the older combined attn_kv_b (per
     * head: nope rows of key, then mla_v rows of value) bind wv_b to it, a head's value rows
     * being its last mla_v of wv_b.n_out / n_head, and wk_b to a transposed F32 copy of the
     * key rows that the model owns (owned_k_b). */
    weight wq_a, q_a_norm, wkv_a, kv_a_norm, wk_b, wv_b;
    float *owned_k_b;
    /* experts the file stores in a layout of its own (ollama's gptoss: gate and up rows
     * interleaved in one tensor, ollama's MXFP4 nibble order): where the level packs them,
     * where their rows are in the file (expert_source), converted once by the context's
     * packing; NULL data: the weight's rows are ggml's */
    expert_source gate_exps_src, up_exps_src, down_exps_src;
    /* where the level does not pack them, the model's own copies in ggml's layout; and the
     * gate and up biases split out of an interleaved bias */
    void *owned_gate, *owned_up, *owned_down, *owned_exps_b;
    /* encoders (bert): optional biases, and the LayerNorms after each residual */
    weight bo, ffn_up_b, ffn_down_b;
    weight attn_out_norm, attn_out_norm_b, layer_out_norm, layer_out_norm_b;
    /* LayerNorm biases of the block's input norms (starcoder2) */
    weight attn_norm_b, ffn_norm_b;
    /* ARCH_ATTN_NORM_2: the attention's own LayerNorm of the block input (falcon-40b), attn_norm
     * then feeding the FFN only; empty where the layer has one norm for both */
    weight attn_norm_2, attn_norm_2_b;
    bool sliding;           /* attends to the last hp.n_swa positions only */
    uint8_t rope_variant;   /* index into corral_model.rope */
    bool no_rope;           /* q and k are not rotated at all (smollm3's NoPE layers, the
                             * global layers of cohere2 and of EXAONE 4.0 32B) */
    /* a Gated DeltaNet layer (qwen35, delta_net.h) in place of attention: the q/k/v
     * projection its causal conv runs over (rows q; k; v), the output gate z, the conv's
     * kernels (ssm_conv_kernel taps per channel), the per-head decay (softplus(alpha . x +
     * ssm_dt) * ssm_a) and write strength (sigmoid(beta . x)), the per-head norm of its
     * output and the output projection */
    bool recurrent;
    weight ssm_qkv, ssm_z, ssm_conv, ssm_dt, ssm_a, ssm_beta, ssm_alpha, ssm_norm, ssm_out;
    /* The layer's attention shape and FFN width: hp's, except where a family's layers differ
     * (gemma4's global layers have wider heads and fewer KV heads than its sliding ones, and
     * some of its files widen the FFN of the last layers); hp then holds the widest of each,
     * which the context's scratch is sized for. */
    uint32_t n_head_kv, head_dim_k, head_dim_v, n_ff;
    /* the layer's query heads: hp's, except where attention.head_count has a value per layer
     * (laguna's full and sliding layers differ; model_arch.head_count_per_layer), hp then
     * holding the most */
    uint32_t n_head;
    /* ARCH_ATTN_OUT_GATE: the attention's output, before attn_output, multiplied by
     * softplus(attn_gate . the attention's input), one value per head (n_out n_head) or per
     * element (n_head * head_dim_v) */
    weight attn_gate;
    /* gemma4: the layer's output is multiplied by this one value (optional) */
    weight out_scale;
    /* gemma4's per-layer token inputs (hp.n_embd_per_layer > 0): after the FFN,
     * x += norm(per_layer_proj . (gelu(inp_gate . x) * the layer's input)); gemma3n adds the
     * same of its corrected active stream to its other streams */
    weight inp_gate, per_layer_proj, per_layer_post_norm;
    /* the layer attends over layer kv_source's cache and writes none of its own (gemma4's
     * shared KV layers): the context aliases the two and moves the cells once */
    bool kv_shared;
    uint32_t kv_source;
    /* llama4: a sliding layer whose keys are only its own chunk's (positions floor(pos /
     * n_swa) * n_swa on), its q and k L2-normed after RoPE (l2_qk), and no attention
     * temperature on its q (no_attn_temp) */
    bool chunked, l2_qk, no_attn_temp;
    /* mllama: a cross-attention layer, which reads an image's states (cross_attn.h) and keeps
     * no KV cache: wq, wk, wv, wo and q_norm, k_norm are its cross_attn_* tensors, and its
     * attention's and MLP's outputs are multiplied by tanh of these one-value gates */
    bool cross_attn;
    weight xattn_gate, xmlp_gate;
    /* gemma4's experts beside its dense FFN: the router's per-channel input scale, the
     * experts' input norm, the two branches' output norms, and a scale of each expert's
     * output (F32 [n_expert], optional) */
    weight ffn_gate_inp_s, ffn_pre_norm_2, ffn_post_norm_1, ffn_post_norm_2, ffn_down_exps_s;
    /* a Mamba2 layer (granitehybrid, mamba2.h) uses ssm_conv, ssm_dt (the step's bias),
     * ssm_a, ssm_norm (per group) and ssm_out of the above, and: the input projection (rows
     * z; x B C; dt), the conv's bias (optional) and the per-head skip factor D */
    weight ssm_in, ssm_conv_b, ssm_d;
    /* a Gated DeltaNet layer of Qwen3-Next (ARCH_SSM_GROUPED): beta's and alpha's rows in one
     * matrix, grouped by key head; q, k, v and z may come the same way in ssm_in */
    weight ssm_ba;
    /* gemma3n's AltUp (hp.n_altup > 0): the router over the active stream (with its input
     * norm), the matrices that turn its n_altup outputs into the coefficients that predict
     * every stream from all of them ([n_altup, n_altup^2]) and that correct them ([n_altup,
     * n_altup]), and the scale of the corrected active stream before the per-layer input;
     * the laurel branch (a low-rank pair of projections and its output norm) */
    weight altup_router, altup_router_norm, altup_predict_coef, altup_correct_coef;
    weight altup_correct_scale, laurel_l, laurel_r, laurel_post_norm;
    /* gemma3n: the FFN's gate keeps only what exceeds its mean by sparsity_std_mul of its
     * standard deviations, less that cutoff (activation sparsity) */
    bool sparse_gate;
    float sparsity_std_mul;
} layer_weights;

typedef struct hparams {
    uint32_t n_vocab;
    uint32_t n_ctx_train;
    uint32_t n_embd;
    uint32_t n_layer;
    uint32_t n_ff;
    uint32_t n_head;
    uint32_t n_head_kv;
    uint32_t head_dim_k;   /* key_length: q and k width per head */
    uint32_t head_dim_v;   /* value_length */
    uint32_t n_rot;        /* rope.dimension_count */
    float norm_eps;        /* RMSNorm's, or an encoder's LayerNorm's */
    bool causal;           /* a token sees the positions before it only (else all) */
    float rope_freq_base;
    float rope_freq_scale; /* 1 / linear scaling factor */
    /* rope.scaling.original_context_length (context_length when absent or 0): YaRN's ramp,
     * and LongRoPE's choice between its long and short factors */
    uint32_t n_ctx_orig;
    uint32_t n_swa;        /* sliding window of the layers marked sliding (0: none) */
    float embd_scale;      /* token embeddings are multiplied by this (gemma: sqrt(n_embd)) */
    float q_scale;         /* q is multiplied by this before Q.K (gemma, phi3) */
    float kq_scale;        /* and the scores by this (llama: 1/sqrt(head_dim_k)) */
    float attn_softcap;    /* scores become cap * tanh(s / cap); 0: off */
    float final_softcap;   /* logits likewise; 0: off */
    float residual_scale;  /* each branch output is multiplied by this before its residual (granite) */
    float logit_mult;      /* logits are multiplied by this (granite: 1 / logit_scale;
                            * cohere2: logit_scale) */
    /* q is multiplied by 1 + attn_temp_scale * ln(1 + floor(pos / attn_temp_floor)) after
     * RoPE (mistral3's attention temperature); 0: off */
    float attn_temp_scale;
    uint32_t attn_temp_floor;
    float attn_temp_offset; /* llama4: the steps count from pos + this (1), mistral3's 0 */
    uint32_t n_expert;      /* expert_count: 0 for a dense FFN */
    uint32_t n_expert_used; /* experts each token is routed to */
    uint32_t n_ff_exp;      /* an expert's width (feed_forward_length unless the family says) */
    uint32_t n_ff_shexp;    /* the shared expert's width; 0: none */
    /* the width the routed experts take and give where the layers project into a latent
     * (layer_weights.ffn_latent_down); 0: n_embd, no projections */
    uint32_t moe_latent;
    uint32_t n_layer_dense_lead; /* the first layers have a dense FFN (deepseek2) */
    /* routing (moe.c): scores are a softmax of the router's logits, or each logit's sigmoid;
     * with n_expert_groups > 1 only the experts of the n_group_used groups with the best
     * two scores compete; the chosen scores, divided by their sum when expert_weights_norm,
     * are multiplied by expert_weights_scale */
    bool expert_gating_sigmoid;
    bool expert_weights_norm;
    float expert_weights_scale;
    uint32_t n_expert_groups, n_group_used;
    /* llama4: a chosen expert's weight scales its input instead of its output */
    bool expert_weight_input;
    uint32_t n_moe_layer_step; /* llama4: layers il with (il + 1) % this == 0 have experts;
                                * nomic-bert-moe: those with il % this == 1 */
    /* multi-head latent attention (mla.h): the q latent's width (0: q straight from x), the
     * key/value latent's, and a head's non-rotated query/key width and value width; the
     * cache then holds one row of n_rot + kv latent values per position (head_dim_k, with
     * head_dim_v = the latent and one KV head) */
    uint32_t mla_q_lora, mla_kv_lora, mla_nope, mla_v;
    bool image_bidirectional; /* an image's tokens see each other both ways (gemma3) */
    /* M-RoPE (qwen2vl): rotation pair i takes its angle from the token's t, h, w or 4th
     * position by section (i mod the sections' sum); all 0: one position (plain RoPE) */
    uint32_t mrope_sections[4];
    /* qwen3vl: the sections interleave (pair i is t, h or w by i % 3 while within that
     * section's share), and the first n_deepstack layers' outputs take an image token's
     * deepstack rows (its embedding is n_embd * (1 + n_deepstack) wide) */
    bool mrope_interleaved;
    uint32_t n_deepstack;
    /* Gated DeltaNet layers (qwen35): conv taps, key heads (ssm.group_count) and value heads
     * (ssm.time_step_rank) of ssm_head_dim each; 0 heads: none */
    uint32_t ssm_conv_kernel, ssm_k_heads, ssm_v_heads, ssm_head_dim;
    /* gemma4, gemma3n: the width of each layer's own token input; 0: none */
    uint32_t n_embd_per_layer;
    /* gemma3n: the streams AltUp keeps of each token's state (0: none, one state), and the
     * width of the laurel branch's low-rank projection */
    uint32_t n_altup, laurel_rank;
    /* the columns of a value head's state (ssm_head_dim rows): ssm_head_dim for a Gated
     * DeltaNet; Mamba2 layers (ssm_mamba2) have ssm.state_size, with ssm_k_heads groups of B
     * and C and ssm_v_heads heads of ssm_head_dim = inner_size / heads channels */
    uint32_t ssm_state;
    bool ssm_mamba2;
    /* LFM2's gated short convolutions (arch_lfm2.c): one "head" of n_embd channels, no
     * state matrix (ssm_state 0), only the conv window of ssm_conv_kernel - 1 inputs */
    bool ssm_shortconv;
} hparams;

/* RoPE frequencies of a group of layers (gemma3's sliding layers have their own base). */
typedef struct rope_variant {
    float freq_base;
    float freq_scale;
    /* YaRN (rope.scaling.type yarn): pairs mix interpolated and extrapolated angles along a
     * ramp between two correction dimensions, and cos/sin are multiplied by yarn_mscale.
     * Without it plain (linear) scaling, and the other fields are unused. */
    bool yarn;
    float yarn_mscale;
    float yarn_corr_low, yarn_corr_high; /* the ramp's ends, in pairs */
    /* gemma4's sliding layers rotate fewer dimensions than hp.n_rot (0: hp.n_rot, at most
     * it) and without rope_freqs, which belongs to its global layers */
    uint32_t n_rot;
    bool no_freq_factors;
    /* Without YaRN, rope.scaling.attn_factor: cos/sin are multiplied by it. 0, as a variant
     * an arch adds for its local layers leaves it, means 1. */
    float attn_factor;
} rope_variant;

typedef struct model_arch model_arch;

struct corral_model {
    gguf_file *file;
    const model_arch *arch;
    hparams hp;
    corral_vocab *vocab;
    weight tok_embd;
    weight output_norm;
    weight output_norm_b;  /* the final LayerNorm's bias (starcoder2), or empty */
    weight output;         /* tok_embd when the file has no output.weight */
    weight output_b;       /* ARCH_OUTPUT_BIAS: added to the logits (phi2), or empty */
    const float *rope_freqs; /* per-pair frequency divisors (n_rot/2), or NULL */
    /* gemma4's and gemma3n's per-layer token inputs (hp.n_embd_per_layer > 0): a row of
     * n_embd_per_layer values per layer for each token id, the projection of the embedding
     * into the same shape, and the norm of each layer's share of that projection */
    weight per_layer_tok_embd, per_layer_model_proj, per_layer_proj_norm;
    /* gemma3n: the n_altup - 1 matrices [n_embd, n_embd] that make the extra AltUp streams of
     * the embedding, and those that bring them back before the output norm */
    weight altup_proj, altup_unembd_proj;
    /* LongRoPE (phi3's 128k models): per-pair divisors for contexts longer than n_ctx_orig
     * and for the others, or NULL; rope_freqs, when present, takes precedence */
    const float *rope_factors_long, *rope_factors_short;
    rope_variant rope[MODEL_MAX_ROPE_VARIANTS];
    uint32_t n_rope_variants;
    layer_weights *layers;
    /* encoders: token_types row 0 and position_embd (bert) are added to each token's
     * embedding, which is then LayerNormed; the final states are pooled. A decoder with
     * ARCH_POS_EMBD (starcoder) adds its position's row of position_embd only. */
    weight type_embd, pos_embd, tok_norm, tok_norm_b;
    enum pooling_type pooling;
    /* ARCH_EMBED_DECODER: the pooled vector through dense_out[0], then dense_out[1]
     * (sentence-transformers' Dense modules: n_embd -> width -> n_embd, no bias or
     * activation); empty when the file has none */
    weight dense_out[2];
    /* ALiBi's slope per query head (jina-bert-v2), which the model owns; NULL: none */
    float *alibi_slopes;
    struct lora_adapter *adapters; /* attached by corral_model_add_lora, newest first */
    /* mllama: the token_embd row of its image token (<|image|>, the first token past the
     * output's rows, which the vocabulary is cut to); 0: the model takes no image token */
    uint32_t image_token;
};

/* While loading: the model being filled and where errors go. */
typedef struct model_loader {
    corral_model *model;
    corral_error *err;
} model_loader;

/* `<arch>.<suffix>` keys: a missing optional key leaves *out unchanged. */
bool model_read_u32(model_loader *ld, const char *suffix, uint32_t *out, bool required);
bool model_read_f32(model_loader *ld, const char *suffix, float *out, bool required);
bool model_read_bool(model_loader *ld, const char *suffix, bool *out, bool required);
/* `<arch>.pooling_type` (optional: none) into model->pooling, refusing what corral_embed
 * cannot pool (arch_bert.c). */
bool model_read_pooling(model_loader *ld);
/* A `<arch>.<suffix>` key that is one unsigned integer for every layer or an array of
 * hp.n_layer of them, into out[0..n_layer); a missing optional key leaves out unchanged. */
bool model_read_u32_layers(model_loader *ld, const char *suffix, uint32_t *out, bool required);

/* Optional tensors and fusions an architecture's layers have. */
enum {
    ARCH_QKV_BIAS = 1u << 0,      /* blk.N.attn_{q,k,v}.bias, or attn_qkv.bias when fused */
    ARCH_QK_NORM = 1u << 1,       /* blk.N.attn_{q,k}_norm.weight */
    ARCH_FUSED_QKV = 1u << 2,     /* blk.N.attn_qkv.weight: rows q;k;v */
    ARCH_FUSED_GATE_UP = 1u << 3, /* blk.N.ffn_up.weight: rows gate;up, no ffn_gate */
    /* ARCH_FUSED_GATE_UP's one ffn_up where the file has no ffn_gate, else the two apart
     * (ollama's GLM-OCR files come both ways) */
    ARCH_GATE_UP_EITHER = 1u << 28,
    ARCH_POST_NORMS = 1u << 4,    /* blk.N.post_attention_norm, blk.N.post_ffw_norm */
    ARCH_TIED_OUTPUT = 1u << 5,   /* always token_embd; an output.weight is an error */
    /* an encoder: token_types, token_embd_norm (with bias), LayerNorm eps, attention.causal
     * and pooling_type keys; blocks with post-LayerNorms and optional biases; no output */
    ARCH_ENCODER = 1u << 6,
    /* learned position_embd instead of RoPE (bert, starcoder): a row per trained position,
     * so a decoder's context is capped at context_length (context.c) */
    ARCH_POS_EMBD = 1u << 7,
    /* attn_{q,k}_norm span the whole q / k projection instead of one head (olmo2) */
    ARCH_QK_NORM_FULL = 1u << 8,
    ARCH_NO_PRE_NORMS = 1u << 9, /* no attn_norm / ffn_norm: the block norms its outputs only */
    /* LayerNorm instead of RMSNorm in the blocks and before the output, with the
     * attention.layer_norm_epsilon key (starcoder2, cohere2) */
    ARCH_LAYER_NORM = 1u << 10,
    ARCH_NORM_BIAS = 1u << 11,     /* blk.N.{attn,ffn}_norm.bias and output_norm.bias */
    ARCH_OUTPUT_FFN_BIAS = 1u << 12, /* blk.N.attn_output.bias, blk.N.ffn_{up,down}.bias */
    ARCH_PARALLEL = 1u << 13,     /* attention and FFN both read one normed input (cohere2) */
    /* with ARCH_ENCODER: an embedding model made of a decoder's blocks (gemma-embedding):
     * its pre-norms, RMSNorm epsilon and output_norm (applied before pooling), no
     * token_types or token_embd_norm, and optional dense projections after pooling */
    ARCH_EMBED_DECODER = 1u << 14,
    ARCH_EXPERTS = 1u << 15, /* the FFN must be a mixture of experts (expert_count > 0) */
    /* blk.N.attn_sinks.weight: per head a logit in the attention softmax's denominator */
    ARCH_ATTN_SINKS = 1u << 24,
    /* blk.N.ffn_gate_inp.bias and ffn_{gate,up,down}_exps.bias; the chosen experts' weights
     * are the softmax of their biased router logits (gpt-oss) */
    ARCH_EXPERT_BIASES = 1u << 25,
    /* the FFN's input norm is stored as blk.N.post_attention_norm.weight (gpt-oss) */
    ARCH_FFN_NORM_POST_ATTN = 1u << 26,
    /* q, k and v in one blk.N.attn_qkv.weight (rows q;k;v, biases in attn_qkv.bias) where the
     * file has it, else the three separate tensors: phi2 files come both ways */
    ARCH_QKV_EITHER = 1u << 16,
    ARCH_OUTPUT_BIAS = 1u << 17, /* output.bias added to the logits (phi2) */
    /* optional blk.N.attn_{q,k}_norm.weight of [head_dim, heads]: each head normed (LayerNorm
     * without a bias where the family's norms are LayerNorms) with a weight row of its own
     * (Command R+, stablelm 2 12B) */
    ARCH_QK_NORM_HEADS = 1u << 18,
    /* blk.N.ffn_norm (and its bias) may be absent: that layer's FFN then reads the attention's
     * normed input, its output added after the attention's (stablelm 2 12B) */
    ARCH_FFN_NORM_OPTIONAL = 1u << 19,
    /* blk.N.ffn_gate_inp_shexp.weight: the shared expert's output is scaled per token by the
     * sigmoid of this row's product with the FFN input (qwen2moe) */
    ARCH_SHARED_EXPERT_GATE = 1u << 20,
    /* feed_forward_length and attention.head_count_kv may be per-layer arrays, which the
     * family's read_hparams sets the layers' widths from (gemma4); hp takes the widest */
    ARCH_PER_LAYER_WIDTHS = 1u << 29,
    /* a layer with experts also runs the dense FFN (ffn_gate/up/down) beside them (gemma4's
     * 26B-A4B): both are bound, and the family's block combines them */
    ARCH_DENSE_AND_EXPERTS = 1u << 30,
    /* attention.head_count_kv may be an array with a value per layer: 0 marks a recurrent
     * layer (which the family's read_hparams reads again), the others must agree */
    ARCH_KV_HEADS_PER_LAYER = 1u << 27,
    /* Gated DeltaNet layers whose value heads sit grouped by key head (Qwen3-Next): value head
     * h reads key head h / (value heads / key heads) rather than h mod key heads, and beta and
     * alpha come as one blk.N.ssm_ba, q k v z maybe as one blk.N.ssm_in (delta_net.c) */
    ARCH_SSM_GROUPED = 1u << 21,
    /* optional blk.N.attn_norm_2.{weight,bias} (falcon-40b's ln_attn): where a layer has it,
     * the attention reads that norm of x and the FFN attn_norm's (ARCH_PARALLEL blocks) */
    ARCH_ATTN_NORM_2 = 1u << 22,
    /* blk.N.attn_gate.weight (ollama's files: attn_g): the softplus output gate of laguna's
     * attention (layer_weights.attn_gate) */
    ARCH_ATTN_OUT_GATE = 1u << 23,
    /* the final norm may be token_embd_norm.weight (llama.cpp's LFM2 files) in place of
     * output_norm.weight (ollama's) */
    ARCH_OUTPUT_NORM_TOKEN_EMBD = 1u << 31,
};

/* One block over the batch held in the context (forward.h). */
typedef void (*layer_forward_fn)(corral_context *ctx, uint32_t il);

/* What differs between architectures that share the decoder-block shape. */
struct model_arch {
    const char *name;       /* general.architecture */
    enum rope_mode rope;
    enum ffn_activation ffn;
    unsigned tensors;       /* ARCH_* */
    /* Keys of this family, after the common ones and with layers allocated: soft-caps,
     * sliding layers, scales. NULL when there are none. */
    bool (*read_hparams)(model_loader *ld);
    layer_forward_fn layer;
    /* Binds a layer's attention tensors where the family's differ from the common q/k/v/o
     * (deepseek2's latent attention); NULL: the common ones. */
    bool (*bind_attention)(model_loader *ld, uint32_t il);
    /* Binds a layer's mixture-of-experts FFN where the family's tensors differ from the
     * common ones (ollama's gptoss layout); NULL: the common ones. */
    bool (*bind_moe)(model_loader *ld, uint32_t il);
    /* rope.scaling.type when the file has none (ollama's gptoss files carry YaRN's
     * parameters without naming it); NULL: "none" */
    const char *rope_scaling_default;
    /* feed_forward_length may be absent, n_ff then 0: the family's widths have keys of their
     * own (Qwen 3.5's MoE converters write only the experts' and the shared expert's) */
    bool ffn_length_optional;
    /* ARCH_QK_NORM*: the q/k norms may be absent, layer by layer (jina-bert-v2's files have
     * them for jina-v2-code only); with ARCH_LAYER_NORM their biases are bound too */
    bool qk_norm_optional;
    /* Binds a layer's FFN where the family's layers differ from attention then FFN
     * (nemotron_h's layers are each one mixer or one FFN); NULL: the common ones. */
    bool (*bind_ffn)(model_loader *ld, uint32_t il);
    /* with ARCH_OUTPUT_FFN_BIAS: attn_output.bias and ffn_{up,down}.bias may each be absent,
     * layer by layer (nemotron) */
    bool output_ffn_bias_optional;
    /* the norms' epsilon when the file has none (ollama's gemma3 files with a vision tower
     * write none); 0: the key is required */
    float norm_eps_default;
    /* attention.head_count may be an array with a value per layer (laguna): hp.n_head takes the
     * most, the family's read_hparams sets the layers' own (layer_weights.n_head) */
    bool head_count_per_layer;
    /* YaRN's beta_fast, beta_slow and log multiplier stay llama.cpp's defaults (32, 1, none)
     * whatever the file says: llama.cpp reads none of those keys for laguna, whose ollama
     * files write betas of 0 where the model's config has none */
    bool yarn_default_betas;
    /* The other name a family's files may give the tensor llama.cpp names `name` (ollama's
     * older glmocr files: attn_out for attn_output), in buf, or NULL when it has none; looked
     * up only where the file lacks llama.cpp's name. NULL: no other names. */
    const char *(*tensor_alias)(const char *name, char *buf, size_t size);
    /* token_embd.weight may have rows past the vocabulary, which no token reads (mllama's
     * eight spare rows): the first n_vocab are bound */
    bool token_embd_spare_rows;
};

extern const model_arch arch_llama;
extern const model_arch arch_qwen2;
extern const model_arch arch_qwen3;
extern const model_arch arch_phi3;
extern const model_arch arch_gemma2;
extern const model_arch arch_gemma3;
extern const model_arch arch_bert;
extern const model_arch arch_nomic_bert;
extern const model_arch arch_granite;
extern const model_arch arch_olmo2;
extern const model_arch arch_olmo3;
extern const model_arch arch_smollm3;
extern const model_arch arch_mistral3;
extern const model_arch arch_starcoder2;
extern const model_arch arch_cohere2;
extern const model_arch arch_exaone4;
extern const model_arch arch_glm4;
extern const model_arch arch_glmocr;
extern const model_arch arch_qwen3moe;
extern const model_arch arch_granitemoe;
extern const model_arch arch_gptoss;
extern const model_arch arch_gptoss_ollama;
extern const model_arch arch_deepseek2;
extern const model_arch arch_glm4moelite;
extern const model_arch arch_deepseek2ocr;
extern const model_arch arch_deepseekocr;

/* Tensor `name` bound with the shape and type checks of the common tensors: a matrix of
 * n_mats slabs [n_in, n_out] (model_bind_matrix), or an F32 vector of n_in (model_bind_vector).
 * An absent optional tensor leaves w empty. */
bool model_bind_matrix(model_loader *ld, weight *w, const char *name, size_t n_in, size_t n_out,
                       size_t n_mats, bool required);
bool model_bind_vector(model_loader *ld, weight *w, const char *name, size_t n_in,
                       bool required);
/* Layer il's separate q, k, v and output projections at the widths its heads give: the
 * attention layers of the hybrid families, which bind their own layers. */
bool model_bind_attention_projections(model_loader *ld, uint32_t il);
extern const model_arch arch_qwen2vl;
extern const model_arch arch_qwen25vl;
extern const model_arch arch_gemma;
extern const model_arch arch_command_r;
extern const model_arch arch_exaone;
extern const model_arch arch_qwen35;
extern const model_arch arch_phi2;
extern const model_arch arch_stablelm;
extern const model_arch arch_qwen2moe;
extern const model_arch arch_gemma4;
extern const model_arch arch_qwen35moe;
extern const model_arch arch_granitehybrid;
extern const model_arch arch_gemma_embedding;
extern const model_arch arch_gemma3_embedding_ollama;
extern const model_arch arch_qwen3next;
extern const model_arch arch_nemotron_h;
extern const model_arch arch_nemotron_h_moe;
extern const model_arch arch_llama4;
extern const model_arch arch_mllama;

/* granite's four scalars and its RoPE switch, which granitemoe shares (arch_granite.c). */
bool granite_hparams(model_loader *ld);

/* gemma2 and gemma3 share these (arch_gemma2.c): sqrt(E) embeddings, and llama.cpp's query
 * scale, which differs for the 27B model (recognised, as llama.cpp does, by its layer count). */
void gemma_common_hparams(corral_model *m, uint32_t n_layer_27b);

/* qwen35's keys, mixers and block, which qwen35moe shares with experts in the FFN
 * (arch_qwen35.c). */
bool qwen35_hparams(model_loader *ld);
/* ... qwen35_hparams without the M-RoPE sections, which qwen3next has not */
bool qwen35_linear_hparams(model_loader *ld);
/* qwen35moe's experts' and shared expert's widths (arch_qwen35moe.c), which qwen3next shares */
bool qwen35moe_expert_widths(model_loader *ld);
bool qwen35_bind_attention(model_loader *ld, uint32_t il);
void qwen35_layer(corral_context *ctx, uint32_t il);
extern const model_arch arch_glm4moe;

/* expert_gating_func's values (llama.cpp's) */
enum { GATING_NONE = 0, GATING_SOFTMAX = 1, GATING_SIGMOID = 2 };

/* deepseek2's routing keys, which glm4moe shares (arch_deepseek2.c): leading dense layers,
 * the experts' and the shared experts' widths, the gating (softmax or sigmoid; a file without
 * the key, or with 0, gets sigmoid_default's), the weights' norm and scale, expert groups.
 * Without widths_required, the widths' keys may be absent: hp.n_ff_exp as set before, and
 * n_shared shared experts. */
bool deepseek2_read_routing(model_loader *ld, bool lead_required, bool sigmoid_default,
                            bool widths_required, uint32_t n_shared);
/* ... its expert groups alone (expert_group_count, expert_group_used_count), checked against
 * the experts; lfm2moe shares them */
bool expert_groups_read(model_loader *ld);

/* Mamba2 layers' ssm.* keys into hp, checked, and a Mamba2 layer's tensors (the layer marked
 * recurrent), which granitehybrid and nemotron_h share (arch_granitehybrid.c). */
bool mamba2_hparams(model_loader *ld);
bool mamba2_bind_layer(model_loader *ld, uint32_t il);

extern const model_arch arch_lfm2;
extern const model_arch arch_lfm2moe;
extern const model_arch arch_qwen3vl;
extern const model_arch arch_qwen3vlmoe;
extern const model_arch arch_chatglm;
extern const model_arch arch_internlm2;
extern const model_arch arch_starcoder;
extern const model_arch arch_falcon;
extern const model_arch arch_jina_bert_v2;
extern const model_arch arch_nomic_bert_moe;
extern const model_arch arch_nemotron;
extern const model_arch arch_gemma3n;
extern const model_arch arch_laguna;

/* gemma4's loading steps that gemma3n shares (arch_gemma4.c): the last n_shared layers
 * attending over the cache of the last earlier layer of their kind, checked. */
bool gemma4_share_kv_layers(model_loader *ld, uint32_t n_shared);

/* Whether the interleaved M-RoPE sections (rope.dimension_sections) cover every rotated pair,
 * which makes a text token's rotation NeoX's (arch_qwen35.c); qwen35 and qwen3vl share it.
 * ollama_keys: also rope.mrope_section, and without either ollama's 24, 20, 20. sections:
 * where not NULL, the four sizes taken. */
bool imrope_check_sections(model_loader *ld, bool ollama_keys, uint32_t sections[4]);

/* M-RoPE's sections from the integer array `key` (n_min to 4 sizes adding up to at most
 * n_rot / 2 pairs) into hp.mrope_sections (arch_qwen2vl.c; glm4's too). */
bool mrope_read_sections(model_loader *ld, const char *key, uint64_t n_min);

/* glm4's family as the file asks to be run (arch_glm4.c): glm4 and ollama's glmocr turn with
 * M-RoPE (NeoX's pairs, in sections) where the file gives sections, and are otherwise arch
 * itself; any other arch is returned as it is. */
const model_arch *glm4_rope_variant(const gguf_file *file, const model_arch *arch);

#endif
