/*
 * Whole layers of a context on the Vulkan device (gpu.h): the dense blocks (forward.h's
 * pre-norm, sandwich-norm, normed-branches, parallel and encoders' post-norm shapes: RMSNorm
 * or LayerNorm with its bias, optional q/k/v and output biases, per-head or whole q/k norms,
 * post-norms, RoPE or none, grouped-query attention over a causal cache with a sliding
 * window and soft-capped scores where the layer has them, or over an encoder's whole input
 * (its sliding layers' window on either side of a token), ALiBi's distance penalty in place
 * of positions (jina-bert-v2, with jina-v2-code's whole q/k LayerNorms and second norm), and
 * a SwiGLU, GeGLU or GELU FFN;
 * gemma4's sandwich-normed block with each layer's own head width, KV heads, FFN width and
 * RoPE, its per-layer token inputs' branch, and its shared KV layers attending over their
 * source layer's cache); gemma3n's, that block inside AltUp's streams (predicted before and
 * corrected after each layer, the streams carried between layers and the CPU instead of the
 * hidden state, merged after the last layer) with the laurel branch beside its attention and
 * its first layers' sparse FFN gates), their weights uploaded at creation,
 * their F16 or F32 cache on the device, and a micro-batch's pass submitted once: recorded the
 * first time its shape comes (vk_graphs.h), submitted as recorded when it comes again.
 * On full layers every position has its own cell; sliding layers hold the cells the CPU's
 * do, from the sequence's swa_base on, and move them as it moves (the window itself is a
 * mask in the attention). With every layer of a decoder on the device the output layer
 * (final norm and output matrix) is there too, for up to OUTPUT_ROWS tokens a batch.
 * A layer whose FFN is a mixture of experts has it recorded by vk_moe.c. deepseek2's
 * pre-norm block with multi-head latent attention runs in mla.c's absorbed form: the cache
 * row [k_rope | normed latent] under one KV head, each head's per-head products (wk_b before
 * the attention, wv_b after) as expert products whose expert is the head. qwen35's hybrid
 * block (and Qwen3-Next's, its projections grouped by key head uploaded in qwen35's order)
 * runs its Gated DeltaNet layers (delta_net.c's recurrence, each layer's conv windows
 * and state matrices per sequence kept here with their checkpoints, one or two kinds as the
 * context keeps, which gpu_seq_states clears, copies and restores as delta_net.c does the
 * CPU's) and its gated attention; lfm2's its
 * gated short convs (their windows kept the same way) beside its attention layers;
 * granitehybrid's and nemotron_h's Mamba2 layers (mamba2.c's conv, scan and group norm,
 * their windows and scan states kept the same way) beside their attention and FFN layers.
 * mllama's cross-attention layers attend over each sequence's image (cross_attn.h), whose keys
 * and values the CPU projects once per image into the layer's cache here
 * (gpu_cross_set_image); which tokens see an image follows the CPU's state each pass
 * (cross_token_sees_image).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cross_attn.h"
#include "delta_net.h"
#include "forward.h"
#include "gpu.h"
#include "util/log.h"
#include "vk_graphs.h"
#include "vk_moe.h"
#include "vk_ops.h"

/* Tokens of a micro-batch whose logits the device computes (a prompt asks for its last
 * one; a batch asking for more has them computed on the CPU from the hidden states). */
enum { OUTPUT_ROWS = 64 };

/* Parts a matrix larger than one binding is split into, by rows. */
enum { MAX_PARTS = 64 };

/* Words per token of io_tokens: its (sequence, cell) at 2t, and from 2 * n_batch on, the
 * last cell it sees (vk_attention_shape's last_at): its own, or a later one for an image's
 * tokens that see each other both ways and an encoder's input. The attention always reads
 * it, so that a recorded pass serves text and images alike. From CHUNK_AT * n_batch on, the
 * first cell a chunked layer's token sees (vk_op_attention_from's first_at): its chunk's
 * first position's, or the cache's first where that is later, as forward.c's first_visible. */
enum { CHUNK_AT = 3, TOKEN_WORDS = 4 };

/* gemma3n's AltUp streams the device takes (the CPU's reader takes as many). */
enum { MAX_ALTUP = 16 };

typedef struct gpu_weight {
    vk_buffer buf; /* no buffer: the model has no such tensor; else its (first) part */
    vk_buffer *more; /* a split matrix's further parts, n_parts - 1 of them */
    uint32_t n_parts, part_rows; /* rows [p * part_rows, ...) in part p */
    uint32_t type, n_in, n_out;
    size_t row_bytes;
} gpu_weight;

typedef struct gpu_layer {
    gpu_weight attn_norm, wq, wk, wv, wo, ffn_norm, gate, up, down;
    gpu_weight bq, bk, bv, q_norm, k_norm;
    gpu_weight attn_out_gate; /* laguna's softplus gate on the attention's output */
    gpu_weight q_norm_b, k_norm_b; /* whole q/k LayerNorms' biases (jina-bert-v2-code) */
    gpu_weight bo, up_b, down_b, attn_norm_b, ffn_norm_b, post_attn_norm, post_ffn_norm, sinks;
    gpu_weight attn_norm_2, attn_norm_2_b; /* falcon-40b's norm of the attention's input */
    gpu_weight attn_out_norm, attn_out_norm_b, layer_out_norm, layer_out_norm_b; /* encoders */
    gpu_weight wq_a, q_a_norm, wkv_a, kv_a_norm, wk_b, wv_b; /* latent attention */
    gpu_weight inp_gate, per_layer_proj, per_layer_post_norm; /* gemma4's per-layer inputs */
    /* gemma4's around its experts: the router's input scale, the experts' input norm, the
     * dense and the experts' output norms */
    gpu_weight ffn_gate_inp_s, ffn_pre_norm_2, ffn_post_norm_1, ffn_post_norm_2;
    /* gemma3n's AltUp router, predict and correct coefficients and correction scale, and its
     * laurel branch */
    gpu_weight altup_router_norm, altup_router, altup_predict_coef, altup_correct_coef;
    gpu_weight altup_correct_scale, laurel_l, laurel_r, laurel_post_norm;
    /* none on a shared KV layer, which reads its source's; a cross-attention layer's hold
     * each sequence's image (cross_cells cells a sequence), once one came */
    vk_buffer k_cache, v_cache;
    /* a recurrent layer's: a Gated DeltaNet's (qwen35) projections, gates' vectors, output
     * norm and matrix; LFM2's short conv's in_proj and out_proj; a Mamba2 layer's in and out
     * projections, conv bias, group norm, and its heads' dt bias, A and D in one buffer (the
     * three, a float a head each); its conv's taps in F32 (a channel's taps, oldest first),
     * and per sequence its conv window and state matrices (none for LFM2), live and as
     * checkpointed, per checkpoint kind the context keeps (delta_net.h's layout) */
    gpu_weight ssm_qkv, ssm_z, ssm_alpha, ssm_beta, ssm_dt, ssm_a, ssm_norm, ssm_out, ssm_in;
    gpu_weight ssm_conv_b;
    vk_buffer mamba2_heads, conv_kernels, conv_state, state;
    vk_buffer checkpoint_conv[DELTA_NET_CHECKPOINTS], checkpoint_state[DELTA_NET_CHECKPOINTS];
} gpu_layer;

struct gpu_layers {
    vk_device *dev;
    vk_commands cmd; /* its own buffer takes the work of one call: windows' moves, shifts */
    vk_graphs graphs; /* the passes recorded, by shape */
    uint64_t passes;  /* forward passes submitted */
    uint32_t first, n_layer; /* layers [first, n_layer) */
    gpu_layer *layers;       /* n_layer - first */
    vk_moe *moe;             /* their expert FFNs */
    /* the output layer, when every layer is here: norm, matrix, rows (<= OUTPUT_ROWS) */
    bool has_output;
    gpu_weight output_norm, output_norm_b, output, output_b;
    uint32_t output_rows;
    vk_buffer out_ids, logits, io_logits;
    bool f16; /* the caches' type (else F32); their shapes are each layer's (cache_shape) */
    /* sliding layers, when they hold fewer cells than n_ctx (ctx->swa_cells): their tokens
     * (cells counted from swa_base) and, per sequence, the first position they hold, which
     * follows ctx->swa_base (sync_windows) */
    bool compact;
    vk_buffer io_swa_tokens;
    uint32_t *swa_base;
    /* the positions of a chunk of the chunked layers (llama4's: their window), 0 without
     * them; the tokens carry their first cells (CHUNK_AT) */
    uint32_t chunk;
    /* the micro-batch's activations (device-local) and its inputs and output (host-visible) */
    vk_buffer x, xn, q, k, v, attn, gate, up, quants, scales;
    /* the parallel block's normed input, which both branches read; gemma4's dense FFN
     * output beside its experts */
    vk_buffer branch;
    vk_buffer router_in; /* gemma4's router input (rms(x) times its scale / sqrt(E)) */
    vk_buffer io_x, io_tokens, io_cos_sin[MODEL_MAX_ROPE_VARIANTS];
    vk_buffer io_q_temp; /* per token, q's attention temperature (mistral3) */
    /* gemma4's per-layer token inputs: every layer's for each token (ctx->per_layer_in), the
     * layer's gate and its own inputs gathered */
    vk_buffer io_per_layer, per_layer_gate, per_layer_in;
    /* gemma3n: the AltUp streams (n_altup blocks of n_batch rows), as the CPU hands them
     * over (io_streams) and on the device, their predictions, the router's outputs and the
     * coefficients made of them, the laurel branch's low-rank rows, and altup_unembd_proj's
     * slabs (one matrix each, n_altup - 1) */
    vk_buffer io_streams, streams, pred, altup_routed, altup_coef, laurel;
    gpu_weight altup_unembd[MAX_ALTUP - 1];
    vk_buffer gelu_table; /* GeGLU and GELU FFNs: the CPU's fp16 table (vk_op_gelu) */
    vk_buffer alibi_slopes; /* ALiBi's slope per query head (the model's), where it has them */
    /* head_dim_k ones: the unit weight of per-head q/k LayerNorms (ARCH_QK_NORM_HEADS), whose
     * own weights follow as a multiply, and of gemma4's unweighted value norms */
    vk_buffer ones;
    /* latent attention (mla.c): the q latent, the query before absorption, [latent | k_rope]
     * as projected, the heads' non-rotated query parts gathered, their absorbed queries,
     * their values' sums, and the head of each (token, head) row (h, for the per-head
     * products, which take a head's rows as an expert product takes an expert's) */
    vk_buffer mla_q_latent, mla_q, mla_kv, mla_gather, mla_absorbed, mla_out, mla_heads;
    /* Gated DeltaNet layers: the q/k/v projection and conv (channels a token), the gate z,
     * the decay's and strength's logits, then values (a token's value heads), and the heads'
     * outputs; qwen35's gated attention: q's projection with its gates, the gates alone
     * (laguna's attention output gates too, a row per head or per element) */
    vk_buffer delta_qkv, delta_z, delta_alpha, delta_beta, delta_out, q_gate, attn_gate;
    /* cross-attention layers: the cells each sequence's image may fill in their caches (0:
     * no image came yet, and the passes leave the layers out, as the CPU does a batch that
     * sees no image); per token its (sequence, last attended row) as io_tokens has its
     * (sequence, cell), and 1 where it sees its sequence's image, else 0 */
    uint32_t cross_cells;
    vk_buffer io_cross_tokens, io_cross_mask;
    /* work of one call begun in cmd (recurrent states cleared, checkpointed or restored),
     * which the next submission takes ahead of its pass */
    bool call_work;
    /* while a pass is recorded: a branch's output in xn still to be added into x, by the
     * next norm of x with it (residual_and_norm) or before anything else reads x
     * (settle_residual) */
    bool residual_pending;
    uint64_t bytes;
    uint64_t estimate; /* the memory the fitting counted on (gpu_layers_estimate) */
    /* the most bytes one weight buffer holds: the binding range, or less when
     * CORRAL_VULKAN_SPLIT_BYTES says (a test's way to split small models) */
    uint64_t part_bytes;
};

/* ---- what the device layers take ---- */

static bool weight_supported(const weight *w)
{
    return !w->data || (vk_type_supported(w->type) && !w->lora);
}


/* Whether m's layers are nemotron_h's: each one of a Mamba2 mixer, attention or an FFN. */
static bool nemotron_h(const corral_model *m)
{
    return m->arch == &arch_nemotron_h || m->arch == &arch_nemotron_h_moe;
}

/* Why the device cannot run ctx's layers, or NULL when it can. */
static const char *unsupported(const corral_context *ctx, const vk_device *dev)
{
    const corral_model *m = ctx->model;
    const hparams *hp = &m->hp;
    layer_forward_fn block = m->arch->layer;
    bool mla = hp->mla_kv_lora > 0; /* deepseek2's block: pre-norm, the attention latent */
    /* gemma4's is the sandwich-normed block at each layer's own widths (record_attention) */
    bool gemma4 = m->arch == &arch_gemma4;
    /* qwen35's hybrid block, Qwen3-Next's too: Gated DeltaNet layers beside gated attention
     * (record_delta_net, record_gated_attention). lfm2's: gated short convs beside
     * attention, each pre-normed (record_short_conv) */
    bool qwen35 = block == qwen35_layer;
    bool lfm2 = m->arch == &arch_lfm2 || m->arch == &arch_lfm2moe;
    /* granitehybrid's pre-norm block and nemotron_h's one-mixer layers (record_layer's),
     * Mamba2 layers among them (record_mamba2) */
    bool mamba2 = m->arch == &arch_granitehybrid || nemotron_h(m);
    /* mllama's is the llama block beside its cross-attention layers (record_cross_layer) */
    bool mllama = m->arch == &arch_mllama;
    /* jina-bert-v2's is the post-norm block, with jina-v2-code's second norm (record_layer) */
    bool jina = m->arch == &arch_jina_bert_v2;
    /* gemma3n's is gemma4's attention and GeGLU FFN inside AltUp (record_gemma3n_layer) */
    bool gemma3n = m->arch == &arch_gemma3n;
    if (gemma3n && hp->n_altup > MAX_ALTUP)
        return "more AltUp streams than the device takes";
    if (gemma3n && !weight_supported(&m->altup_unembd_proj))
        return "a weight type the device kernels lack, or a LoRA adapter";
    if (!mla && !gemma4 && !gemma3n && !qwen35 && !lfm2 && !mamba2 && !mllama && !jina &&
        ((block != layer_pre_norm && block != layer_sandwich_norm &&
          block != layer_normed_branches && block != layer_parallel &&
          block != layer_post_norm && block != layer_pre_norm_or_parallel) ||
         m->arch->bind_attention))
        return "a block other than the dense ones";
    if (mla && (uint64_t)ctx->n_batch * hp->n_head > dev->max_groups[1])
        return "a batch of more (token, head) rows than the device's dispatch";
    if (m->arch->ffn != FFN_SWIGLU && m->arch->ffn != FFN_GEGLU && !ffn_ungated(m->arch->ffn) &&
        !(hp->n_expert && m->arch->ffn == FFN_SWIGLU_OAI))
        return "an FFN activation the device lacks";
    const char *moe_why = vk_moe_unsupported(m);
    if (moe_why)
        return moe_why;
    if (ctx->kv_type != CORRAL_KV_F16 && ctx->kv_type != CORRAL_KV_F32)
        return "a quantized KV cache";
    if (hp->head_dim_k % 2 || hp->head_dim_v % 2 || hp->n_head % hp->n_head_kv)
        return "heads of an odd width";
    for (uint32_t il = 0; il < hp->n_layer; il++) {
        const layer_weights *l = &m->layers[il];
        if (l->head_dim_k % 2 || l->head_dim_v % 2 || l->n_head % l->n_head_kv)
            return "heads of an odd width";
    }
    /* an expert product dispatches a group per (token, expert) pair */
    uint64_t rows = (uint64_t)ctx->n_batch * (hp->n_expert_used ? hp->n_expert_used : 1);
    if (rows > dev->max_groups[1])
        return "a batch larger than the device's dispatch";
    for (uint32_t il = 0; il < hp->n_layer; il++) {
        const layer_weights *l = &m->layers[il];
        if (l->attn_sinks.data && l->attn_sinks.type != TENSOR_TYPE_F32)
            return "attention sinks other than F32";
        /* the attention kernel reads either from one binding */
        if (l->attn_sinks.data && m->alibi_slopes)
            return "attention sinks beside ALiBi";
        /* the gate's standard deviation divides by its width less one */
        if (l->sparse_gate && l->ffn_gate.n_out < 2)
            return "a sparse FFN gate narrower than two values";
        /* per-head q/k norms run as LayerNorms with a unit weight, then each head's weights */
        if (l->q_norm.n_out > 1 && !(m->arch->tensors & ARCH_LAYER_NORM))
            return "RMS q/k norms with a weight per head";
        const weight *ws[] = {&l->wq,    &l->wk,    &l->wv,   &l->wo,  &l->ffn_gate,
                              &l->ffn_up, &l->ffn_down, &l->wq_a, &l->wkv_a, &l->wk_b,
                              &l->wv_b, &l->ssm_qkv, &l->ssm_z, &l->ssm_alpha, &l->ssm_beta,
                              &l->ssm_out, &l->ssm_in, &l->ssm_ba, &l->inp_gate,
                              &l->per_layer_proj, &l->altup_router, &l->altup_predict_coef,
                              &l->altup_correct_coef, &l->laurel_l, &l->laurel_r};
        for (size_t i = 0; i < sizeof ws / sizeof ws[0]; i++)
            if (!weight_supported(ws[i]))
                return "a weight type the device kernels lack, or a LoRA adapter";
    }
    return NULL;
}

/* Whether the output layer can be here: a type the products take, in one binding. */
static bool output_supported(const corral_context *ctx, const vk_device *dev)
{
    (void)dev; /* a matrix larger than one binding is split */
    const weight *w = &ctx->model->output;
    return vk_type_supported(w->type) && !w->lora;
}

/* ---- memory ---- */

/* The work of one call (cmd's own buffer), begun if it is not yet: what a call records there
 * goes ahead of the next pass in its submission. */
static void begin_call_work(gpu_layers *g)
{
    if (!g->call_work)
        vk_commands_begin(&g->cmd);
    g->call_work = true;
}

/* Transfers (fills, copies) and compute before it done and visible to those after it. */
static void transfer_barrier(vk_commands *c)
{
    VkMemoryBarrier b = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                         .srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT | VK_ACCESS_SHADER_WRITE_BIT,
                         .dstAccessMask = VK_ACCESS_TRANSFER_READ_BIT |
                                          VK_ACCESS_TRANSFER_WRITE_BIT |
                                          VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT};
    VkPipelineStageFlags stages = VK_PIPELINE_STAGE_TRANSFER_BIT |
                                  VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT;
    vk.vkCmdPipelineBarrier(c->cmd, stages, stages, 0, 1, &b, 0, NULL, 0, NULL);
}

/* Whether layer il's cache holds the window's cells only. */
static bool compact_layer(const gpu_layers *g, const corral_context *ctx, uint32_t il)
{
    return g->compact && ctx->model->layers[il].sliding;
}

/* Layer il's key (or value) cache: its own KV heads of its own width (gemma4's global and
 * sliding layers differ in both), over n_ctx cells or, compact, the window's. */
static vk_cache_shape cache_shape(const gpu_layers *g, const corral_context *ctx, uint32_t il,
                                  bool values)
{
    const layer_weights *l = &ctx->model->layers[il];
    uint32_t cells = compact_layer(g, ctx, il) ? ctx->swa_cells : ctx->n_ctx;
    return (vk_cache_shape){l->n_head_kv, values ? l->head_dim_v : l->head_dim_k, cells, g->f16};
}

/* A recurrent layer's buffers of its own, in bytes: its conv's taps and, for all the
 * context's sequences, its conv windows and its state matrices (each again per checkpoint
 * kind the context keeps), as delta_net.c sizes the CPU's: a conv of one tap keeps no window, and
 * LFM2's layers no matrices (ssm_state 0). The model's reader capped the sizes, so the
 * products stay small. */
typedef struct delta_sizes {
    uint64_t channels, kernels, conv, state;
} delta_sizes;

static delta_sizes delta_layer_sizes(const corral_context *ctx)
{
    const hparams *hp = &ctx->model->hp;
    uint64_t S = hp->ssm_head_dim, N = hp->ssm_state, taps = hp->ssm_conv_kernel;
    uint64_t value_width = (uint64_t)hp->ssm_v_heads * S, f = sizeof(float);
    uint64_t channels = value_width + 2 * (uint64_t)hp->ssm_k_heads * N;
    return (delta_sizes){channels, channels * taps * f,
                         (uint64_t)ctx->n_seq * (taps - 1) * channels * f,
                         (uint64_t)ctx->n_seq * value_width * N * f};
}

/* A buffer's size for `bytes` that may be none: a binding needs one float at least. */
static uint64_t at_least_a_float(uint64_t bytes)
{
    return bytes ? bytes : sizeof(float);
}

/* A Mamba2 layer's dt bias, A and D, a float a head each. */
static uint64_t mamba2_heads_bytes(const corral_context *ctx)
{
    return 3 * (uint64_t)ctx->model->hp.ssm_v_heads * sizeof(float);
}

/* Qwen3-Next's projections grouped by key head (delta_net.c's ungroup), as qwen35's: ssm_in's
 * q, k, v and z rows of each key head become ssm_qkv's [q | k | v] and ssm_z's rows, and
 * ssm_ba's betas and alphas of each key head ssm_beta's and ssm_alpha's, each a matrix of
 * its own whose row i is row `row(i)` of `from`. */
enum { GROUPED_PARTS = 4 };

typedef struct grouped_rows {
    const weight *from;
    size_t n_rows;
    int part; /* 0 qkv, 1 z, 2 beta, 3 alpha */
} grouped_rows;

/* The parts layer l uploads from its grouped projections (none where the family's are not
 * grouped): ssm_in's two when the layer has it (the newer files' attn_qkv and attn_gate are
 * in qwen35's order), ssm_ba's two. */
static size_t grouped_parts(const corral_context *ctx, const layer_weights *l,
                            grouped_rows parts[GROUPED_PARTS])
{
    const hparams *hp = &ctx->model->hp;
    size_t n = 0, S = hp->ssm_head_dim, H = hp->ssm_v_heads;
    if (!(ctx->model->arch->tensors & ARCH_SSM_GROUPED))
        return 0;
    if (l->ssm_in.data) {
        parts[n++] = (grouped_rows){&l->ssm_in, (2 * (size_t)hp->ssm_k_heads + H) * S, 0};
        parts[n++] = (grouped_rows){&l->ssm_in, H * S, 1};
    }
    parts[n++] = (grouped_rows){&l->ssm_ba, H, 2};
    parts[n++] = (grouped_rows){&l->ssm_ba, H, 3};
    return n;
}

/* The grouped row that row i of a part comes from (delta_net.c's ungroup, backwards). */
static size_t grouped_row(const hparams *hp, int part, size_t i)
{
    size_t S = hp->ssm_head_dim, G = hp->ssm_k_heads, r = hp->ssm_v_heads / G;
    size_t key_width = G * S, group = 2 * S + 2 * r * S; /* ssm_in's rows of a key head */
    switch (part) {
    case 0: /* q of key head i / S, then k, then the value heads' v */
        if (i < key_width)
            return i / S * group + i % S;
        if (i < 2 * key_width)
            return (i - key_width) / S * group + S + i % S;
        return (i - 2 * key_width) / (r * S) * group + 2 * S + (i - 2 * key_width) % (r * S);
    case 1: /* z of the value heads of key head i / (r S) */
        return i / (r * S) * group + 2 * S + r * S + i % (r * S);
    case 2: /* beta of value head i: its key head's betas come first */
        return i / r * 2 * r + i % r;
    default: /* alpha of value head i, after its key head's betas */
        return i / r * 2 * r + r + i % r;
    }
}

/* The memory upload() allocates for w: a buffer, or one per part of whole rows. */
static uint64_t weight_footprint(const gpu_layers *g, const weight *w)
{
    if (!w->data)
        return 0;
    uint64_t bytes = (uint64_t)w->row_bytes * w->n_out;
    uint64_t part_rows = g->part_bytes / w->row_bytes;
    if (bytes <= g->part_bytes || part_rows == 0)
        return vk_buffer_footprint(g->dev, bytes);
    uint64_t sum = 0;
    for (uint64_t first = 0; first < w->n_out; first += part_rows) {
        uint64_t rows = w->n_out - first < part_rows ? w->n_out - first : part_rows;
        sum += vk_buffer_footprint(g->dev, rows * w->row_bytes);
    }
    return sum;
}

/* Whether w is a cross-attention layer's key or value matrix, which only the CPU's
 * projection of an image reads (cross_attn.c). */
static bool cross_projection(const layer_weights *l, const weight *w)
{
    return l->cross_attn && (w == &l->wk || w == &l->wv);
}

/* The memory of layer il on the device: its weights', its expert FFN's and its cache's. */
static uint64_t layer_bytes(const corral_context *ctx, const gpu_layers *g, uint32_t il)
{
    const layer_weights *l = &ctx->model->layers[il];
    const weight *ws[] = {&l->attn_norm, &l->wq,     &l->wk,     &l->wv, &l->wo,
                          &l->ffn_norm,  &l->ffn_gate, &l->ffn_up, &l->ffn_down, &l->bq,
                          &l->bk,        &l->bv,     &l->q_norm, &l->k_norm, &l->q_norm_b,
                          &l->k_norm_b, &l->bo, &l->ffn_up_b, &l->ffn_down_b, &l->attn_norm_b,
                          &l->ffn_norm_b,
                          &l->post_attn_norm, &l->post_ffn_norm, &l->attn_out_norm,
                          &l->attn_out_norm_b, &l->layer_out_norm, &l->layer_out_norm_b, &l->attn_sinks,
                          &l->wq_a, &l->q_a_norm, &l->wkv_a, &l->kv_a_norm, &l->wk_b, &l->wv_b,
                          &l->attn_norm_2, &l->attn_norm_2_b, &l->inp_gate, &l->per_layer_proj,
                          &l->per_layer_post_norm, &l->ffn_gate_inp_s, &l->ffn_pre_norm_2,
                          &l->ffn_post_norm_1, &l->ffn_post_norm_2, &l->altup_router_norm,
                          &l->altup_router, &l->altup_predict_coef, &l->altup_correct_coef,
                          &l->altup_correct_scale, &l->laurel_l, &l->laurel_r,
                          &l->laurel_post_norm, &l->attn_gate};
    vk_cache_shape ks = cache_shape(g, ctx, il, false), vs = cache_shape(g, ctx, il, true);
    uint64_t sum = 0;
    if (l->recurrent) {
        delta_sizes d = delta_layer_sizes(ctx);
        const weight *ssm[] = {&l->ssm_qkv, &l->ssm_z, &l->ssm_alpha, &l->ssm_beta,
                               &l->ssm_norm, &l->ssm_out, &l->ssm_in, &l->ssm_conv_b};
        for (size_t i = 0; i < sizeof ssm / sizeof ssm[0]; i++)
            sum += weight_footprint(g, ssm[i]);
        if (ctx->model->hp.ssm_mamba2)
            sum += vk_buffer_footprint(g->dev, mamba2_heads_bytes(ctx));
        else
            sum += weight_footprint(g, &l->ssm_dt) + weight_footprint(g, &l->ssm_a);
        grouped_rows parts[GROUPED_PARTS];
        size_t n_parts = grouped_parts(ctx, l, parts);
        for (size_t i = 0; i < n_parts; i++) {
            weight part = *parts[i].from;
            part.n_out = parts[i].n_rows;
            sum += weight_footprint(g, &part);
        }
        sum += vk_buffer_footprint(g->dev, d.kernels) +
               (1 + ctx->n_checkpoints) *
                   (vk_buffer_footprint(g->dev, at_least_a_float(d.conv)) +
                    vk_buffer_footprint(g->dev, at_least_a_float(d.state)));
    } else if (l->cross_attn) { /* its cache of images, made when the first comes */
        vk_cache_shape images = {l->n_head_kv, l->head_dim_k, ctx->image_rows, false};
        if (ctx->image_rows)
            sum += 2 * vk_buffer_footprint(g->dev, vk_cache_bytes(&images, ctx->n_seq));
    } else if (!l->kv_shared) {
        sum += vk_buffer_footprint(g->dev, vk_cache_bytes(&ks, ctx->n_seq)) +
               vk_buffer_footprint(g->dev, vk_cache_bytes(&vs, ctx->n_seq));
    }
    sum += vk_moe_layer_bytes(g->dev, ctx->model, il, g->part_bytes);
    for (size_t i = 0; i < sizeof ws / sizeof ws[0]; i++)
        if (!cross_projection(l, ws[i]))
            sum += weight_footprint(g, ws[i]);
    return sum;
}

static bool buffer(gpu_layers *g, VkDeviceSize size, bool host_visible, vk_buffer *out,
                   corral_error *err)
{
    if (size > g->dev->max_range) {
        corral_error_set(err, "a buffer of %llu bytes is beyond %s's binding range (%llu)",
                         (unsigned long long)size, g->dev->info.name,
                         (unsigned long long)g->dev->max_range);
        return false;
    }
    if (!vk_buffer_create(g->dev, size, host_visible, out, err))
        return false;
    g->bytes += out->allocated;
    return true;
}

/* A weight into one buffer, or, larger than g->part_bytes, into parts of whole rows. */
static bool upload(gpu_layers *g, const weight *w, gpu_weight *out, corral_error *err)
{
    *out = (gpu_weight){.type = w->type, .n_in = (uint32_t)w->n_in, .n_out = (uint32_t)w->n_out,
                        .row_bytes = w->row_bytes, .n_parts = 1, .part_rows = (uint32_t)w->n_out};
    if (!w->data)
        return true;
    if ((uint64_t)w->row_bytes * w->n_out > g->part_bytes) {
        out->part_rows = (uint32_t)(g->part_bytes / w->row_bytes);
        out->n_parts = out->part_rows ? (out->n_out + out->part_rows - 1) / out->part_rows : 0;
        if (out->n_parts == 0 || out->n_parts > MAX_PARTS ||
            !(out->more = calloc(out->n_parts - 1, sizeof *out->more))) {
            corral_error_set(err, "a matrix of %zu rows of %zu bytes does not split into %d "
                             "buffers of %llu bytes", w->n_out, w->row_bytes, MAX_PARTS,
                             (unsigned long long)g->part_bytes);
            out->n_parts = 1;
            return false;
        }
    }
    for (uint32_t part = 0; part < out->n_parts; part++) {
        size_t first = (size_t)part * out->part_rows;
        size_t rows = w->n_out - first < out->part_rows ? w->n_out - first : out->part_rows;
        vk_buffer *b = part ? &out->more[part - 1] : &out->buf;
        if (!buffer(g, rows * w->row_bytes, false, b, err) ||
            !vk_buffer_write(g->dev, b, 0, (const char *)w->data + first * w->row_bytes,
                             rows * w->row_bytes, err))
            return false;
    }
    return true;
}

/* Latent attention's wv_b as mla_v rows a head. The older combined attn_kv_b holds each
 * head's key rows before its value rows: its value rows are gathered into one matrix, so
 * that the per-head product finds a head's rows as an expert product finds an expert's. */
static bool upload_value_rows(gpu_layers *g, const corral_context *ctx, const layer_weights *l,
                              gpu_weight *out, corral_error *err)
{
    const hparams *hp = &ctx->model->hp;
    size_t H = hp->n_head, head_rows = l->wv_b.n_out / H, v = hp->mla_v;
    if (!l->wv_b.data || head_rows == v)
        return upload(g, &l->wv_b, out, err);
    char *rows = malloc(H * v * l->wv_b.row_bytes);
    if (!rows) {
        corral_error_set(err, "out of memory");
        return false;
    }
    for (size_t h = 0; h < H; h++)
        memcpy(rows + h * v * l->wv_b.row_bytes,
               (const char *)l->wv_b.data + (h * head_rows + head_rows - v) * l->wv_b.row_bytes,
               v * l->wv_b.row_bytes);
    weight values = l->wv_b;
    values.data = rows;
    values.n_out = H * v;
    bool ok = upload(g, &values, out, err);
    free(rows);
    return ok;
}

/* A part of Qwen3-Next's grouped projections, its rows gathered in qwen35's order. */
static bool upload_grouped(gpu_layers *g, const corral_context *ctx, const grouped_rows *part,
                           gpu_weight *out, corral_error *err)
{
    const weight *w = part->from;
    char *rows = malloc(part->n_rows * w->row_bytes);
    if (!rows) {
        corral_error_set(err, "out of memory");
        return false;
    }
    for (size_t i = 0; i < part->n_rows; i++)
        memcpy(rows + i * w->row_bytes,
               (const char *)w->data + grouped_row(&ctx->model->hp, part->part, i) * w->row_bytes,
               w->row_bytes);
    weight gathered = *w;
    gathered.data = rows;
    gathered.n_out = part->n_rows;
    bool ok = upload(g, &gathered, out, err);
    free(rows);
    return ok;
}

/* A Mamba2 layer's dt bias, A and D (F32 vectors, the loader checked) into one buffer, in
 * that order, as the scan reads them. */
static bool upload_mamba2_heads(gpu_layers *g, const corral_context *ctx,
                                const layer_weights *l, gpu_layer *gl, corral_error *err)
{
    size_t H = ctx->model->hp.ssm_v_heads, bytes = mamba2_heads_bytes(ctx);
    float *heads = malloc(bytes);
    if (!heads) {
        corral_error_set(err, "out of memory");
        return false;
    }
    memcpy(heads, l->ssm_dt.data, H * sizeof *heads);
    memcpy(heads + H, l->ssm_a.data, H * sizeof *heads);
    memcpy(heads + 2 * H, l->ssm_d.data, H * sizeof *heads);
    bool ok = buffer(g, bytes, false, &gl->mamba2_heads, err) &&
              vk_buffer_write(g->dev, &gl->mamba2_heads, 0, heads, bytes, err);
    free(heads);
    return ok;
}

/* A recurrent layer's weights, its conv's taps as F32 (delta_net.c's copy_kernels), and
 * its states, which start as zeros: every sequence holds nothing (the fills run with the
 * first submission). */
static bool upload_recurrent(gpu_layers *g, const corral_context *ctx, const layer_weights *l,
                             gpu_layer *gl, corral_error *err)
{
    const weight *from[] = {&l->ssm_qkv, &l->ssm_z, &l->ssm_alpha, &l->ssm_beta, &l->ssm_norm,
                            &l->ssm_out, &l->ssm_in, &l->ssm_conv_b, &l->ssm_dt, &l->ssm_a};
    gpu_weight *to[] = {&gl->ssm_qkv, &gl->ssm_z, &gl->ssm_alpha, &gl->ssm_beta, &gl->ssm_norm,
                        &gl->ssm_out, &gl->ssm_in, &gl->ssm_conv_b, &gl->ssm_dt, &gl->ssm_a};
    bool mamba2 = ctx->model->hp.ssm_mamba2; /* its dt bias and A go up with D, below */
    for (size_t i = 0; i < sizeof from / sizeof from[0] - 2 * mamba2; i++)
        if (!upload(g, from[i], to[i], err))
            return false;
    if (mamba2 && !upload_mamba2_heads(g, ctx, l, gl, err))
        return false;
    grouped_rows parts[GROUPED_PARTS];
    size_t n_parts = grouped_parts(ctx, l, parts);
    gpu_weight *part_to[] = {&gl->ssm_qkv, &gl->ssm_z, &gl->ssm_beta, &gl->ssm_alpha};
    for (size_t i = 0; i < n_parts; i++)
        if (!upload_grouped(g, ctx, &parts[i], part_to[parts[i].part], err))
            return false;
    delta_sizes d = delta_layer_sizes(ctx);
    size_t taps = ctx->model->hp.ssm_conv_kernel;
    float *kernels = malloc(d.kernels);
    if (!kernels) {
        corral_error_set(err, "out of memory");
        return false;
    }
    const weight *w = &l->ssm_conv;
    for (size_t c = 0; c < d.channels; c++)
        w->ops->dequantize((const char *)w->data + c * w->row_bytes, kernels + c * taps, taps);
    bool ok = buffer(g, d.kernels, false, &gl->conv_kernels, err) &&
              vk_buffer_write(g->dev, &gl->conv_kernels, 0, kernels, d.kernels, err);
    free(kernels);
    vk_buffer *states[] = {&gl->conv_state, &gl->state, &gl->checkpoint_conv[0],
                           &gl->checkpoint_state[0], &gl->checkpoint_conv[1],
                           &gl->checkpoint_state[1]};
    uint64_t conv = at_least_a_float(d.conv), state = at_least_a_float(d.state);
    uint64_t sizes[] = {conv, state, conv, state, conv, state};
    for (size_t i = 0; ok && i < 2 + 2 * (size_t)ctx->n_checkpoints; i++)
        ok = buffer(g, sizes[i], false, states[i], err);
    if (ok) {
        begin_call_work(g);
        for (size_t i = 0; i < 2; i++)
            vk.vkCmdFillBuffer(g->cmd.cmd, states[i]->buffer, 0, VK_WHOLE_SIZE, 0);
        transfer_barrier(&g->cmd);
    }
    return ok;
}

static bool upload_layer(gpu_layers *g, const corral_context *ctx, uint32_t il, gpu_layer *gl,
                         corral_error *err)
{
    const layer_weights *l = &ctx->model->layers[il];
    const weight *from[] = {&l->attn_norm, &l->wq, &l->wk, &l->wv, &l->wo, &l->ffn_norm,
                            &l->ffn_gate, &l->ffn_up, &l->ffn_down, &l->bq, &l->bk, &l->bv,
                            &l->q_norm, &l->k_norm, &l->q_norm_b, &l->k_norm_b,
                            &l->bo, &l->ffn_up_b, &l->ffn_down_b, &l->attn_norm_b,
                            &l->ffn_norm_b, &l->post_attn_norm, &l->post_ffn_norm,
                            &l->attn_out_norm, &l->attn_out_norm_b, &l->layer_out_norm,
                            &l->layer_out_norm_b, &l->attn_sinks, &l->wq_a, &l->q_a_norm,
                            &l->wkv_a, &l->kv_a_norm, &l->wk_b, &l->attn_norm_2,
                            &l->attn_norm_2_b, &l->inp_gate, &l->per_layer_proj,
                            &l->per_layer_post_norm, &l->ffn_gate_inp_s, &l->ffn_pre_norm_2,
                            &l->ffn_post_norm_1, &l->ffn_post_norm_2, &l->altup_router_norm,
                            &l->altup_router, &l->altup_predict_coef, &l->altup_correct_coef,
                            &l->altup_correct_scale, &l->laurel_l, &l->laurel_r,
                            &l->laurel_post_norm, &l->attn_gate};
    gpu_weight *to[] = {&gl->attn_norm, &gl->wq, &gl->wk, &gl->wv, &gl->wo, &gl->ffn_norm,
                        &gl->gate, &gl->up, &gl->down, &gl->bq, &gl->bk, &gl->bv,
                        &gl->q_norm, &gl->k_norm, &gl->q_norm_b, &gl->k_norm_b,
                        &gl->bo, &gl->up_b, &gl->down_b, &gl->attn_norm_b, &gl->ffn_norm_b,
                        &gl->post_attn_norm, &gl->post_ffn_norm, &gl->attn_out_norm,
                        &gl->attn_out_norm_b, &gl->layer_out_norm, &gl->layer_out_norm_b, &gl->sinks,
                        &gl->wq_a, &gl->q_a_norm, &gl->wkv_a, &gl->kv_a_norm, &gl->wk_b,
                        &gl->attn_norm_2, &gl->attn_norm_2_b, &gl->inp_gate,
                        &gl->per_layer_proj, &gl->per_layer_post_norm, &gl->ffn_gate_inp_s,
                        &gl->ffn_pre_norm_2, &gl->ffn_post_norm_1, &gl->ffn_post_norm_2,
                        &gl->altup_router_norm, &gl->altup_router, &gl->altup_predict_coef,
                        &gl->altup_correct_coef, &gl->altup_correct_scale, &gl->laurel_l,
                        &gl->laurel_r, &gl->laurel_post_norm, &gl->attn_out_gate};
    for (size_t i = 0; i < sizeof from / sizeof from[0]; i++)
        if (!cross_projection(l, from[i]) && !upload(g, from[i], to[i], err))
            return false;
    if (l->cross_attn) /* its cache comes with the first image (gpu_cross_set_image) */
        return true;
    if (!upload_value_rows(g, ctx, l, &gl->wv_b, err))
        return false;
    /* a per-head product reads its heads from one buffer */
    if (gl->wk_b.n_parts > 1 || gl->wv_b.n_parts > 1) {
        corral_error_set(err, "a latent attention's per-head matrix is larger than one buffer "
                         "(%llu bytes)", (unsigned long long)g->part_bytes);
        return false;
    }
    if (l->recurrent)
        return upload_recurrent(g, ctx, l, gl, err);
    vk_cache_shape ks = cache_shape(g, ctx, il, false), vs = cache_shape(g, ctx, il, true);
    return l->kv_shared ||
           (buffer(g, vk_cache_bytes(&ks, ctx->n_seq), false, &gl->k_cache, err) &&
            buffer(g, vk_cache_bytes(&vs, ctx->n_seq), false, &gl->v_cache, err));
}

static bool alloc_scratch(gpu_layers *g, const corral_context *ctx, corral_error *err)
{
    const hparams *hp = &ctx->model->hp;
    uint64_t nb = ctx->n_batch, f = sizeof(float);
    uint64_t q_width = (uint64_t)hp->n_head * hp->head_dim_k;
    uint64_t o_width = (uint64_t)hp->n_head * hp->head_dim_v;
    uint64_t kv_k = 0, kv_v = 0; /* the widest layer's (gemma4's layers have their own) */
    for (uint32_t il = 0; il < hp->n_layer; il++) {
        const layer_weights *l = &ctx->model->layers[il];
        uint64_t k = (uint64_t)l->n_head_kv * l->head_dim_k;
        uint64_t v = (uint64_t)l->n_head_kv * l->head_dim_v;
        kv_k = k > kv_k ? k : kv_k;
        kv_v = v > kv_v ? v : kv_v;
    }
    uint64_t wide = hp->n_embd > o_width ? hp->n_embd : o_width;
    uint64_t widest = wide > hp->n_ff ? wide : hp->n_ff;
    uint64_t value_width = (uint64_t)hp->ssm_v_heads * hp->ssm_head_dim; /* ssm_out's input */
    widest = widest > value_width ? widest : value_width;
    uint64_t H = hp->n_head, qk = (uint64_t)hp->mla_nope + hp->n_rot;
    uint64_t mla_widths[] = {hp->mla_q_lora, H * hp->mla_nope, H * hp->mla_v};
    for (size_t i = 0; hp->mla_kv_lora && i < sizeof mla_widths / sizeof mla_widths[0]; i++)
        widest = widest > mla_widths[i] ? widest : mla_widths[i];
    bool ok = buffer(g, nb * hp->n_embd * f, false, &g->x, err) &&
              buffer(g, nb * wide * f, false, &g->xn, err) &&
              buffer(g, nb * q_width * f, false, &g->q, err) &&
              buffer(g, nb * kv_k * f, false, &g->k, err) &&
              buffer(g, nb * kv_v * f, false, &g->v, err) &&
              buffer(g, nb * o_width * f, false, &g->attn, err) &&
              buffer(g, nb * hp->n_ff * f, false, &g->gate, err) &&
              buffer(g, nb * hp->n_ff * f, false, &g->up, err) &&
              buffer(g, vk_matmul_quants_bytes(nb * widest), false, &g->quants, err) &&
              buffer(g, vk_matmul_scales_bytes(nb * widest), false, &g->scales, err) &&
              buffer(g, nb * hp->n_embd * f, true, &g->io_x, err) &&
              buffer(g, nb * TOKEN_WORDS * sizeof(uint32_t), true, &g->io_tokens, err);
    if (ok && g->compact)
        ok = buffer(g, nb * TOKEN_WORDS * sizeof(uint32_t), true, &g->io_swa_tokens, err);
    bool cross = false;
    for (uint32_t il = 0; il < hp->n_layer; il++)
        cross = cross || ctx->model->layers[il].cross_attn;
    if (ok && cross)
        ok = buffer(g, nb * TOKEN_WORDS * sizeof(uint32_t), true, &g->io_cross_tokens, err) &&
             buffer(g, nb * f, true, &g->io_cross_mask, err);
    if (ok && hp->ssm_mamba2) { /* rows [z | x B C | dt]; z, then the heads' outputs */
        uint64_t row = value_width + delta_layer_sizes(ctx).channels + hp->ssm_v_heads;
        ok = buffer(g, nb * row * f, false, &g->delta_qkv, err) &&
             buffer(g, nb * value_width * f, false, &g->delta_z, err) &&
             buffer(g, nb * value_width * f, false, &g->delta_out, err);
    } else if (ok && hp->ssm_shortconv) { /* LFM2's in_proj rows [b | c | x], then the conv's */
        uint64_t channels = delta_layer_sizes(ctx).channels;
        ok = buffer(g, nb * 3 * channels * f, false, &g->delta_qkv, err) &&
             buffer(g, nb * channels * f, false, &g->delta_out, err);
    } else if (ok && hp->ssm_v_heads) { /* qwen35's Gated DeltaNet and gated attention */
        uint64_t H = hp->ssm_v_heads, channels = delta_layer_sizes(ctx).channels;
        ok = buffer(g, nb * channels * f, false, &g->delta_qkv, err) &&
             buffer(g, nb * value_width * f, false, &g->delta_z, err) &&
             buffer(g, nb * H * f, false, &g->delta_alpha, err) &&
             buffer(g, nb * H * f, false, &g->delta_beta, err) &&
             buffer(g, nb * value_width * f, false, &g->delta_out, err) &&
             buffer(g, nb * 2 * q_width * f, false, &g->q_gate, err) &&
             buffer(g, nb * q_width * f, false, &g->attn_gate, err);
    }
    bool dense_and_experts = hp->n_expert && (ctx->model->arch->tensors & ARCH_DENSE_AND_EXPERTS);
    if (ok && ((ctx->model->arch->tensors &
                (ARCH_PARALLEL | ARCH_FFN_NORM_OPTIONAL | ARCH_ATTN_NORM_2)) ||
               dense_and_experts || hp->n_altup))
        ok = buffer(g, nb * hp->n_embd * f, false, &g->branch, err);
    if (ok && dense_and_experts)
        ok = buffer(g, nb * hp->n_embd * f, false, &g->router_in, err);
    bool l2_qk = false; /* llama4's unweighted q and k norms */
    for (uint32_t il = 0; il < hp->n_layer; il++)
        l2_qk = l2_qk || ctx->model->layers[il].l2_qk;
    if (ok && ((ctx->model->arch->tensors & ARCH_QK_NORM_HEADS) ||
               ctx->model->arch == &arch_gemma4 || hp->n_altup || hp->ssm_mamba2 || l2_qk)) {
        /* a head's width, or a Mamba2 layer's group of channels, whichever is wider */
        uint64_t group = hp->ssm_mamba2 ? value_width / hp->ssm_k_heads : 0;
        uint64_t n_ones = hp->head_dim_k > group ? hp->head_dim_k : group;
        float *ones = malloc(n_ones * sizeof *ones);
        if (!ones) {
            corral_error_set(err, "out of memory");
            return false;
        }
        for (uint64_t i = 0; i < n_ones; i++)
            ones[i] = 1.0f;
        ok = buffer(g, n_ones * f, false, &g->ones, err) &&
             vk_buffer_write(g->dev, &g->ones, 0, ones, n_ones * f, err);
        free(ones);
    }
    if (ok && (ctx->model->arch->tensors & ARCH_ATTN_OUT_GATE)) {
        uint64_t gates = 0; /* the layers' widest gate */
        for (uint32_t il = 0; il < hp->n_layer; il++)
            if (ctx->model->layers[il].attn_gate.n_out > gates)
                gates = ctx->model->layers[il].attn_gate.n_out;
        ok = buffer(g, nb * gates * f, false, &g->attn_gate, err);
    }
    if (ok && hp->attn_temp_scale != 0.0f)
        ok = buffer(g, nb * f, true, &g->io_q_temp, err);
    if (ok && ctx->model->alibi_slopes)
        ok = buffer(g, hp->n_head * f, false, &g->alibi_slopes, err) &&
             vk_buffer_write(g->dev, &g->alibi_slopes, 0, ctx->model->alibi_slopes,
                             hp->n_head * f, err);
    if (ok && hp->n_embd_per_layer) { /* the context makes ctx->per_layer_in later */
        uint64_t P = hp->n_embd_per_layer;
        ok = buffer(g, nb * hp->n_layer * P * f, true, &g->io_per_layer, err) &&
             buffer(g, nb * P * f, false, &g->per_layer_gate, err) &&
             buffer(g, nb * P * f, false, &g->per_layer_in, err);
    }
    if (ok && hp->n_altup) {
        uint64_t A = hp->n_altup, streams = A * nb * hp->n_embd * f;
        ok = buffer(g, streams, true, &g->io_streams, err) &&
             buffer(g, streams, false, &g->streams, err) &&
             buffer(g, streams, false, &g->pred, err) &&
             buffer(g, nb * A * f, false, &g->altup_routed, err) &&
             buffer(g, nb * A * A * f, false, &g->altup_coef, err) &&
             buffer(g, nb * hp->laurel_rank * f, false, &g->laurel, err);
        for (uint32_t s = 1; ok && s < hp->n_altup; s++) {
            weight slab = ctx->model->altup_unembd_proj;
            slab.data = (const uint8_t *)slab.data + (size_t)(s - 1) * hp->n_embd * slab.row_bytes;
            slab.n_out = hp->n_embd;
            ok = upload(g, &slab, &g->altup_unembd[s - 1], err);
        }
    }
    if (ok && (ctx->model->arch->ffn == FFN_GELU || ctx->model->arch->ffn == FFN_GEGLU))
        ok = buffer(g, VK_GELU_TABLE_BYTES, false, &g->gelu_table, err) &&
             vk_buffer_write(g->dev, &g->gelu_table, 0, block_gelu_f16_table(),
                             VK_GELU_TABLE_BYTES, err);
    for (uint32_t r = 0; ok && r < ctx->model->n_rope_variants; r++)
        ok = buffer(g, nb * (hp->n_rot ? hp->n_rot : 1) * f, true, &g->io_cos_sin[r], err);
    if (ok && hp->mla_kv_lora) {
        uint64_t q_lora = hp->mla_q_lora ? hp->mla_q_lora : 1;
        ok = buffer(g, nb * q_lora * f, false, &g->mla_q_latent, err) &&
             buffer(g, nb * H * qk * f, false, &g->mla_q, err) &&
             buffer(g, nb * (hp->mla_kv_lora + hp->n_rot) * f, false, &g->mla_kv, err) &&
             buffer(g, nb * H * hp->mla_nope * f, false, &g->mla_gather, err) &&
             buffer(g, nb * H * hp->mla_kv_lora * f, false, &g->mla_absorbed, err) &&
             buffer(g, nb * H * hp->mla_v * f, false, &g->mla_out, err) &&
             buffer(g, nb * H * sizeof(uint32_t), false, &g->mla_heads, err);
        uint32_t *heads = ok ? malloc(nb * H * sizeof *heads) : NULL;
        if (ok && !heads) {
            corral_error_set(err, "out of memory");
            ok = false;
        }
        for (uint64_t i = 0; ok && i < nb * H; i++)
            heads[i] = (uint32_t)(i % H);
        ok = ok && vk_buffer_write(g->dev, &g->mla_heads, 0, heads, nb * H * sizeof *heads, err);
        free(heads);
    }
    return ok;
}

/* The tokens a batch's output layer takes on the device: OUTPUT_ROWS, or fewer where their
 * logits would not fit one binding. */
static uint32_t output_rows(const gpu_layers *g, const corral_context *ctx)
{
    uint64_t row_floats = ctx->model->hp.n_vocab;
    uint32_t rows = ctx->n_batch < OUTPUT_ROWS ? ctx->n_batch : OUTPUT_ROWS;
    while (rows > 1 && rows * row_floats * sizeof(float) > g->dev->max_range)
        rows /= 2;
    return rows;
}

/* The memory upload_output allocates. */
static uint64_t output_bytes(const gpu_layers *g, const corral_context *ctx)
{
    const corral_model *m = ctx->model;
    uint64_t rows = output_rows(g, ctx), logits_bytes = rows * m->hp.n_vocab * sizeof(float);
    return weight_footprint(g, &m->output_norm) + weight_footprint(g, &m->output_norm_b) +
           weight_footprint(g, &m->output) + weight_footprint(g, &m->output_b) +
           vk_buffer_footprint(g->dev, rows * sizeof(uint32_t)) +
           2 * vk_buffer_footprint(g->dev, logits_bytes);
}

/* The output layer's weights and its buffers (rows, their logits, and a host-visible copy). */
static bool upload_output(gpu_layers *g, const corral_context *ctx, corral_error *err)
{
    const corral_model *m = ctx->model;
    uint64_t row_floats = m->hp.n_vocab;
    uint32_t rows = output_rows(g, ctx);
    g->output_rows = rows;
    uint64_t logits_bytes = rows * row_floats * sizeof(float);
    g->has_output = upload(g, &m->output_norm, &g->output_norm, err) &&
                    upload(g, &m->output_norm_b, &g->output_norm_b, err) &&
                    upload(g, &m->output, &g->output, err) &&
                    upload(g, &m->output_b, &g->output_b, err) &&
                    buffer(g, rows * sizeof(uint32_t), true, &g->out_ids, err) &&
                    buffer(g, logits_bytes, false, &g->logits, err) &&
                    buffer(g, logits_bytes, true, &g->io_logits, err);
    return g->has_output;
}

/* ---- creation ---- */

gpu_layers *gpu_layers_create(const corral_context *ctx, int device, int n_layers,
                              corral_error *err)
{
    const hparams *hp = &ctx->model->hp;
    vk_device *dev = vk_device_open(device, err);
    if (!dev)
        return NULL;
    const char *why = unsupported(ctx, dev);
    if (why) {
        corral_error_set(err, "the GPU layers do not take this %s model: %s",
                         ctx->model->arch->name, why);
        return NULL;
    }
    gpu_layers *g = calloc(1, sizeof *g);
    if (!g) {
        corral_error_set(err, "out of memory");
        return NULL;
    }
    g->dev = dev;
    g->n_layer = hp->n_layer;
    g->part_bytes = dev->max_range;
    const char *split = getenv("CORRAL_VULKAN_SPLIT_BYTES");
    if (split && strtoull(split, NULL, 10) > 0 && strtoull(split, NULL, 10) < g->part_bytes)
        g->part_bytes = strtoull(split, NULL, 10);
    g->f16 = ctx->kv_type == CORRAL_KV_F16;
    g->compact = ctx->swa_cells < ctx->n_ctx;
    for (uint32_t il = 0; il < hp->n_layer; il++)
        if (ctx->model->layers[il].chunked)
            g->chunk = ctx->kv[il].window;
    if (!(g->swa_base = calloc(ctx->n_seq, sizeof *g->swa_base))) {
        corral_error_set(err, "out of memory");
        goto fail;
    }
    if (!vk_commands_create(dev, &g->cmd, err) || !alloc_scratch(g, ctx, err))
        goto fail;
    vk_graphs_init(&g->graphs, &g->cmd);
    /* as many of the last layers as were asked for, or as fit in what the device has free
     * beside the scratch (the layers' and the experts') and, with every layer, the output
     * layer (a tenth kept back for the driver and other processes, and the reserve asked
     * for: a vision tower's blocks) */
    uint32_t most = hp->n_layer - ctx->cpu_layers_min; /* what must stay on the CPU does */
    uint32_t count = n_layers < 0 || (uint32_t)n_layers > most ? most : (uint32_t)n_layers;
    bool encoder = ctx->model->arch->tensors & ARCH_ENCODER; /* no output layer */
    bool output = !encoder && output_supported(ctx, dev);
    uint64_t output_needs = output ? output_bytes(g, ctx) : 0;
    g->estimate = g->bytes + vk_moe_scratch_bytes(dev, ctx);
    uint32_t fit = 0;
    while (fit < count) {
        uint64_t next = g->estimate + layer_bytes(ctx, g, hp->n_layer - 1 - fit);
        uint64_t total = next + (fit + 1 == hp->n_layer ? output_needs : 0);
        if (n_layers < 0 && total + ctx->gpu_reserve_bytes >
                                dev->info.free_bytes - dev->info.free_bytes / 10)
            break;
        g->estimate = next;
        fit++;
    }
    count = fit;
    if (count == hp->n_layer)
        g->estimate += output_needs;
    if (count == 0) {
        corral_error_set(err, "no layer fits in %s's free memory", dev->info.name);
        goto fail;
    }
    g->first = hp->n_layer - count;
    for (uint32_t il = g->first; il < hp->n_layer; il++) {
        const layer_weights *l = &ctx->model->layers[il];
        if (l->kv_shared && l->kv_source < g->first) {
            corral_error_set(err, "layer %u reads layer %u's cache, which %u layers on %s "
                             "would leave on the CPU", il, l->kv_source, count, dev->info.name);
            goto fail;
        }
    }
    if (!(g->layers = calloc(count, sizeof *g->layers))) {
        corral_error_set(err, "out of memory");
        goto fail;
    }
    for (uint32_t il = g->first; il < hp->n_layer; il++)
        if (!upload_layer(g, ctx, il, &g->layers[il - g->first], err))
            goto fail;
    if (g->call_work) { /* the recurrent states' zeros */
        g->call_work = false;
        if (!vk_commands_submit(&g->cmd, err))
            goto fail;
    }
    if (!(g->moe = vk_moe_create(dev, ctx, g->first, g->part_bytes, &g->bytes, err)))
        goto fail;
    if (g->first == 0 && output && !upload_output(g, ctx, err))
        goto fail;
    return g;
fail:
    gpu_layers_free(g);
    return NULL;
}

static void free_weight(vk_device *dev, gpu_weight *w)
{
    vk_buffer_free(dev, &w->buf);
    for (uint32_t part = 1; w->more && part < w->n_parts; part++)
        vk_buffer_free(dev, &w->more[part - 1]);
    free(w->more);
}

void gpu_layers_free(gpu_layers *g)
{
    if (!g)
        return;
    vk_device *dev = g->dev;
    for (uint32_t i = 0; g->layers && i < g->n_layer - g->first; i++) {
        gpu_layer *l = &g->layers[i];
        gpu_weight *ws[] = {&l->attn_norm, &l->wq, &l->wk, &l->wv, &l->wo, &l->ffn_norm,
                            &l->gate, &l->up, &l->down, &l->bq, &l->bk, &l->bv, &l->q_norm,
                            &l->k_norm, &l->q_norm_b, &l->k_norm_b, &l->bo, &l->up_b,
                            &l->down_b, &l->attn_norm_b, &l->ffn_norm_b, &l->post_attn_norm,
                            &l->post_ffn_norm,
                            &l->attn_out_norm, &l->attn_out_norm_b, &l->layer_out_norm,
                            &l->layer_out_norm_b, &l->sinks, &l->wq_a, &l->q_a_norm,
                            &l->wkv_a, &l->kv_a_norm, &l->wk_b, &l->wv_b, &l->attn_norm_2,
                            &l->attn_norm_2_b, &l->inp_gate, &l->per_layer_proj,
                            &l->per_layer_post_norm, &l->ffn_gate_inp_s, &l->ffn_pre_norm_2,
                            &l->ffn_post_norm_1, &l->ffn_post_norm_2, &l->altup_router_norm,
                            &l->altup_router, &l->altup_predict_coef, &l->altup_correct_coef,
                            &l->altup_correct_scale, &l->laurel_l, &l->laurel_r,
                            &l->laurel_post_norm, &l->attn_out_gate};
        for (size_t k = 0; k < sizeof ws / sizeof ws[0]; k++)
            free_weight(dev, ws[k]);
        gpu_weight *ssm[] = {&l->ssm_qkv, &l->ssm_z, &l->ssm_alpha, &l->ssm_beta, &l->ssm_dt,
                             &l->ssm_a, &l->ssm_norm, &l->ssm_out, &l->ssm_in, &l->ssm_conv_b};
        for (size_t k = 0; k < sizeof ssm / sizeof ssm[0]; k++)
            free_weight(dev, ssm[k]);
        vk_buffer *own[] = {&l->k_cache, &l->v_cache, &l->conv_kernels, &l->conv_state,
                            &l->state, &l->checkpoint_conv[0], &l->checkpoint_state[0],
                            &l->checkpoint_conv[1], &l->checkpoint_state[1], &l->mamba2_heads};
        for (size_t k = 0; k < sizeof own / sizeof own[0]; k++)
            if (own[k]->buffer)
                vk_buffer_free(dev, own[k]);
    }
    free(g->layers);
    vk_moe_free(g->moe);
    free_weight(dev, &g->output_norm);
    free_weight(dev, &g->output_norm_b);
    free_weight(dev, &g->output);
    free_weight(dev, &g->output_b);
    vk_buffer *bufs[] = {&g->x, &g->xn, &g->q, &g->k, &g->v, &g->attn, &g->gate, &g->up,
                         &g->quants, &g->scales, &g->io_x, &g->io_tokens, &g->io_cos_sin[0],
                         &g->io_cos_sin[1], &g->out_ids, &g->logits, &g->io_logits,
                         &g->branch, &g->io_q_temp, &g->gelu_table, &g->alibi_slopes,
                         &g->io_swa_tokens,
                         &g->mla_q_latent, &g->mla_q, &g->mla_kv, &g->mla_gather,
                         &g->mla_absorbed, &g->mla_out, &g->mla_heads, &g->ones,
                         &g->io_per_layer, &g->per_layer_gate, &g->per_layer_in,
                         &g->router_in, &g->delta_qkv, &g->delta_z, &g->delta_alpha,
                         &g->delta_beta, &g->delta_out, &g->q_gate, &g->attn_gate,
                         &g->io_cross_tokens, &g->io_cross_mask, &g->io_streams,
                         &g->streams, &g->pred, &g->altup_routed, &g->altup_coef,
                         &g->laurel};
    for (size_t k = 0; k < MAX_ALTUP - 1; k++)
        free_weight(dev, &g->altup_unembd[k]);
    for (size_t k = 0; k < sizeof bufs / sizeof bufs[0]; k++)
        if (bufs[k]->buffer)
            vk_buffer_free(dev, bufs[k]);
    vk_commands_free(&g->cmd);
    free(g->swa_base);
    free(g);
}

uint32_t gpu_layers_first(const gpu_layers *g)
{
    return g->first;
}

const char *gpu_layers_device(const gpu_layers *g)
{
    return g->dev->info.name;
}

uint64_t gpu_layers_bytes(const gpu_layers *g)
{
    return g->bytes;
}

uint64_t gpu_layers_estimate(const gpu_layers *g)
{
    return g->estimate;
}

gpu_layers_stats gpu_layers_get_stats(const gpu_layers *g)
{
    const vk_graph *last = g->graphs.last;
    return (gpu_layers_stats){.recordings = g->graphs.recordings, .passes = g->passes,
                              .dispatches = last ? last->dispatches : 0,
                              .barriers = last ? last->barriers : 0,
                              .submits = __atomic_load_n(&g->dev->submits, __ATOMIC_RELAXED)};
}

/* ---- the forward pass ---- */

static void matmul(gpu_layers *g, const gpu_weight *w, vk_buffer *in, vk_buffer *out,
                   uint32_t n_tokens)
{
    for (uint32_t part = 0; part < w->n_parts; part++) {
        uint32_t first = part * w->part_rows;
        uint32_t rows = w->n_out - first < w->part_rows ? w->n_out - first : w->part_rows;
        vk_op_matmul_rows(&g->cmd, w->type, vk_whole(part ? &w->more[part - 1] : &w->buf),
                          w->row_bytes, vk_whole(in), vk_whole(&g->quants), vk_whole(&g->scales),
                          vk_whole(out), w->n_in, rows, n_tokens, first, w->n_out);
    }
}

/* y += bias on every token's row (no bias: nothing). */
static void add_bias(gpu_layers *g, const gpu_weight *bias, vk_buffer *y, uint32_t n_tokens)
{
    if (bias->buf.buffer)
        vk_op_binary(&g->cmd, VK_ADD, vk_whole(y), vk_whole(&bias->buf), n_tokens * bias->n_in,
                     bias->n_in, 0.0f);
}

/* RMSNorm of each head (or of the whole width, per the norm's length) in place. */
static void norm_spans(gpu_layers *g, const gpu_weight *norm, vk_buffer *x, uint32_t width,
                       uint32_t n_tokens, float eps)
{
    vk_op_rmsnorm(&g->cmd, vk_whole(&norm->buf), vk_whole(x), vk_whole(x), norm->n_in,
                  n_tokens * (width / norm->n_in), eps);
}

/* The same as LayerNorms with their bias (none: bias has no buffer), one weight for every
 * span: the whole q or k of a family whose norms are LayerNorms (jina-bert-v2-code). */
static void layernorm_spans(gpu_layers *g, const gpu_weight *norm, const gpu_weight *bias,
                            vk_buffer *x, uint32_t width, uint32_t n_tokens, float eps)
{
    vk_op_layernorm(&g->cmd, vk_whole(&norm->buf),
                    bias->buf.buffer ? vk_whole(&bias->buf) : (vk_span){0}, vk_whole(x),
                    vk_whole(x), norm->n_in, n_tokens * (width / norm->n_in), eps);
}

/* Each head's LayerNorm (no bias) in place with that head's own weights, as the CPU's
 * layernorm_heads: the unit-weight norm, then the weights (a row of width) as a multiply. A
 * layer without the norm: nothing. */
static void layernorm_heads(gpu_layers *g, const hparams *hp, const gpu_weight *norm,
                            vk_buffer *x, uint32_t width, uint32_t n_tokens)
{
    if (!norm->buf.buffer)
        return;
    uint32_t dk = hp->head_dim_k;
    vk_op_layernorm(&g->cmd, vk_whole(&g->ones), (vk_span){0}, vk_whole(x), vk_whole(x), dk,
                    n_tokens * (width / dk), hp->norm_eps);
    vk_op_binary(&g->cmd, VK_MUL, vk_whole(x), vk_whole(&norm->buf), n_tokens * width, width,
                 0.0f);
}

static void residual(gpu_layers *g, const hparams *hp, uint32_t n)
{
    uint32_t count = n * hp->n_embd;
    if (hp->residual_scale != 1.0f)
        vk_op_binary(&g->cmd, VK_SCALE, vk_whole(&g->xn), (vk_span){0}, count, 0,
                     hp->residual_scale);
    vk_op_binary(&g->cmd, VK_ADD, vk_whole(&g->x), vk_whole(&g->xn), count, count, 0.0f);
}

/* The family's norm of n rows of `in` into out (which may be in): LayerNorm with its bias
 * (none: b has no buffer) for ARCH_LAYER_NORM, else RMSNorm. */
static void block_norm(gpu_layers *g, const corral_model *m, const gpu_weight *w,
                       const gpu_weight *b, vk_buffer *in, vk_buffer *out, uint32_t n)
{
    const hparams *hp = &m->hp;
    if (m->arch->tensors & ARCH_LAYER_NORM)
        vk_op_layernorm(&g->cmd, vk_whole(&w->buf),
                        b->buf.buffer ? vk_whole(&b->buf) : (vk_span){0}, vk_whole(in),
                        vk_whole(out), hp->n_embd, n, hp->norm_eps);
    else
        vk_op_rmsnorm(&g->cmd, vk_whole(&w->buf), vk_whole(in), vk_whole(out), hp->n_embd, n,
                      hp->norm_eps);
}

/* The pending residual (if any) added into x. */
static void settle_residual(gpu_layers *g, const hparams *hp, uint32_t n)
{
    if (g->residual_pending)
        residual(g, hp, n);
    g->residual_pending = false;
}

/* The pending residual (if any) added into x, then the family's norm of x into out: one
 * dispatch where the norm is an RMSNorm and the residual unscaled (which saves the norm a
 * barrier behind the add), which also quantizes out for the products of next_type weights
 * that read it next (TENSOR_TYPE_F32: none, or none known), saving them a dispatch and a
 * barrier of their own (vk_op_rmsnorm_quantize). */
static void residual_and_norm(gpu_layers *g, const corral_model *m, const gpu_weight *w,
                              const gpu_weight *b, vk_buffer *out, uint32_t n,
                              uint32_t next_type)
{
    const hparams *hp = &m->hp;
    if (m->arch->tensors & ARCH_LAYER_NORM || hp->residual_scale != 1.0f)
        settle_residual(g, hp, n);
    if (m->arch->tensors & ARCH_LAYER_NORM) {
        block_norm(g, m, w, b, &g->x, out, n);
        return;
    }
    vk_span residual = g->residual_pending ? vk_whole(&g->xn) : (vk_span){0};
    g->residual_pending = false;
    vk_op_rmsnorm_quantize(&g->cmd, vk_whole(&w->buf), vk_whole(&g->x), residual, vk_whole(out),
                           hp->n_embd, n, hp->norm_eps, next_type, vk_whole(&g->quants),
                           vk_whole(&g->scales));
}

/* The type of the weights whose products read layer il's normed input first, when its mixer
 * is an attention (TENSOR_TYPE_F32 for the recurrent mixers: none known). */
static uint32_t mixer_input_type(const corral_context *ctx, uint32_t il, const gpu_layer *gl)
{
    if (ctx->model->layers[il].recurrent)
        return TENSOR_TYPE_F32;
    return gl->wq_a.buf.buffer ? gl->wq_a.type : gl->wq.type; /* latent attention: wq_a */
}

/* The type of the weights whose products read layer il's FFN input first: the dense FFN's
 * gate (or up); TENSOR_TYPE_F32 for experts, whose router comes first. */
static uint32_t ffn_input_type(const gpu_layers *g, const corral_context *ctx, uint32_t il,
                               const gpu_layer *gl)
{
    if (vk_moe_layer(g->moe, il))
        return TENSOR_TYPE_F32;
    return ffn_ungated(ctx->model->arch->ffn) ? gl->up.type : gl->gate.type;
}

/* rows rows of width floats between strided rows (vk_op_copy_rows). */
static void copy_rows(gpu_layers *g, vk_buffer *src, vk_buffer *dst, uint32_t rows,
                      uint32_t width, uint32_t src_offset, uint32_t src_stride,
                      uint32_t dst_offset, uint32_t dst_stride)
{
    vk_rows r = {rows, width, src_offset, src_stride, dst_offset, dst_stride};
    vk_op_copy_rows(&g->cmd, vk_whole(src), vk_whole(dst), &r);
}

static void store_and_attend(gpu_layers *g, const corral_context *ctx, uint32_t il, uint32_t n,
                             const vk_rope *k_rope);

/* g->xn becomes layer il's self-attention over `in` (forward_attention). */
static void record_attention(gpu_layers *g, const corral_context *ctx, uint32_t il,
                             vk_buffer *in, uint32_t n)
{
    const corral_model *m = ctx->model;
    const hparams *hp = &m->hp;
    const layer_weights *l = &m->layers[il];
    gpu_layer *gl = &g->layers[il - g->first];
    vk_commands *c = &g->cmd;
    uint32_t dk = l->head_dim_k, q_width = l->n_head * dk, k_width = l->n_head_kv * dk;
    bool own_kv = !l->kv_shared; /* else q alone: the keys and values are in the cache */

    matmul(g, &gl->wq, in, &g->q, n);
    if (gl->attn_out_gate.buf.buffer) /* laguna's gate reads the attention's input too */
        matmul(g, &gl->attn_out_gate, in, &g->attn_gate, n);
    if (own_kv)
        matmul(g, &gl->wk, in, &g->k, n);
    if (own_kv && gl->wv.buf.buffer)
        matmul(g, &gl->wv, in, &g->v, n);
    else if (own_kv) /* gemma4's layers without attn_v: the keys as projected serve as values */
        copy_rows(g, &g->k, &g->v, n, k_width, 0, k_width, 0, k_width);
    add_bias(g, &gl->bq, &g->q, n);
    add_bias(g, &gl->bk, &g->k, n);
    add_bias(g, &gl->bv, &g->v, n);
    if (m->arch->tensors & ARCH_QK_NORM_HEADS) {
        layernorm_heads(g, hp, &gl->q_norm, &g->q, q_width, n);
        layernorm_heads(g, hp, &gl->k_norm, &g->k, k_width, n);
    } else if (gl->q_norm.buf.buffer && (m->arch->tensors & ARCH_LAYER_NORM)) {
        layernorm_spans(g, &gl->q_norm, &gl->q_norm_b, &g->q, q_width, n, hp->norm_eps);
        layernorm_spans(g, &gl->k_norm, &gl->k_norm_b, &g->k, k_width, n, hp->norm_eps);
    } else if (gl->q_norm.buf.buffer) {
        norm_spans(g, &gl->q_norm, &g->q, q_width, n, hp->norm_eps);
        if (own_kv)
            norm_spans(g, &gl->k_norm, &g->k, k_width, n, hp->norm_eps);
    }
    /* gemma4_attention's unweighted value norms (gemma3n's too) */
    if (own_kv && (m->arch == &arch_gemma4 || m->arch == &arch_gemma3n))
        vk_op_rmsnorm(c, vk_whole(&g->ones), vk_whole(&g->v), vk_whole(&g->v), l->head_dim_v,
                      n * l->n_head_kv, hp->norm_eps);
    /* the keys are turned as they are stored */
    vk_rope k_rope = {vk_whole(&g->io_cos_sin[l->rope_variant]),
                      l->no_rope ? 0 : ctx->rope[l->rope_variant].n_rot,
                      m->arch->rope == ROPE_NEOX};
    if (!l->no_rope)
        vk_op_rope(c, k_rope.cos_sin, vk_whole(&g->q), n, l->n_head, dk, k_rope.n_rot,
                   k_rope.neox);
    if (l->l2_qk) {
        /* llama4's chunked layers: each head of q and k RMS-normed without a weight after
         * RoPE, so the keys are turned here and stored as they are */
        if (!l->no_rope)
            vk_op_rope(c, k_rope.cos_sin, vk_whole(&g->k), n, l->n_head_kv, dk, k_rope.n_rot,
                       k_rope.neox);
        k_rope.n_rot = 0;
        vk_op_rmsnorm(c, vk_whole(&g->ones), vk_whole(&g->q), vk_whole(&g->q), dk,
                      n * l->n_head, hp->norm_eps);
        vk_op_rmsnorm(c, vk_whole(&g->ones), vk_whole(&g->k), vk_whole(&g->k), dk,
                      n * l->n_head_kv, hp->norm_eps);
    }
    if (hp->q_scale != 1.0f)
        vk_op_binary(c, VK_SCALE, vk_whole(&g->q), (vk_span){0}, n * q_width, 0, hp->q_scale);
    if (hp->attn_temp_scale != 0.0f && !l->no_attn_temp) /* llama4's: its NoPE layers only */
        vk_op_binary(c, VK_MUL_ROWS, vk_whole(&g->q), vk_whole(&g->io_q_temp), n * q_width,
                     q_width, 0.0f);
    store_and_attend(g, ctx, il, n, &k_rope);
    if (gl->attn_out_gate.buf.buffer) { /* a gate per head, or per element */
        uint32_t width = l->n_head * l->head_dim_v;
        vk_op_binary(c, VK_MUL_SOFTPLUS_GROUPS, vk_whole(&g->attn), vk_whole(&g->attn_gate),
                     n * width, width / gl->attn_out_gate.n_out, 0.0f);
    }
    matmul(g, &gl->wo, &g->attn, &g->xn, n);
    add_bias(g, &gl->bo, &g->xn, n);
}

/* The layer's attention from here on: the micro-batch's keys (g->k, turned by k_rope on the
 * way, vk_op_kv_store_rope) and values (g->v) into its cache, and each query head's (g->q)
 * attention over it into g->attn. A shared KV layer stores nothing and attends over its
 * source's cache, which has its own shape. */
static void store_and_attend(gpu_layers *g, const corral_context *ctx, uint32_t il, uint32_t n,
                             const vk_rope *k_rope)
{
    const hparams *hp = &ctx->model->hp;
    const layer_weights *l = &ctx->model->layers[il];
    gpu_layer *gl = &g->layers[il - g->first];
    gpu_layer *cache = l->kv_shared ? &g->layers[l->kv_source - g->first] : gl;
    vk_commands *c = &g->cmd;
    bool compact = compact_layer(g, ctx, il);
    vk_span tokens = vk_whole(compact ? &g->io_swa_tokens : &g->io_tokens);
    vk_cache_shape ks = cache_shape(g, ctx, il, false), vs = cache_shape(g, ctx, il, true);
    if (!l->kv_shared) {
        vk_op_kv_store_rope(c, tokens, vk_whole(&g->k), vk_whole(&gl->k_cache), &ks, n,
                            k_rope);
        vk_op_kv_store(c, tokens, vk_whole(&g->v), vk_whole(&gl->v_cache), &vs, n);
    }
    /* an encoder's sliding layer: n_swa / 2 positions either side, as forward.c's */
    uint32_t around = !hp->causal && l->sliding ? hp->n_swa / 2 + 1 : 0;
    vk_attention_shape shape = {n, l->n_head, l->n_head_kv, l->head_dim_k, l->head_dim_v,
                                ks.n_cells, ks.f16, hp->kq_scale, hp->attn_softcap,
                                ctx->kv[il].window, 2 * ctx->n_batch, around};
    if (l->chunked && g->chunk) /* llama4's: from the token's chunk's first cell */
        vk_op_attention_from(c, tokens, vk_whole(&g->q), vk_whole(&cache->k_cache),
                             vk_whole(&cache->v_cache), vk_whole(&g->attn), &shape,
                             CHUNK_AT * ctx->n_batch);
    else if (gl->sinks.buf.buffer)
        vk_op_attention_sinks(c, tokens, vk_whole(&g->q), vk_whole(&cache->k_cache),
                              vk_whole(&cache->v_cache), vk_whole(&gl->sinks.buf),
                              vk_whole(&g->attn), &shape);
    else if (g->alibi_slopes.buffer)
        vk_op_attention_alibi(c, tokens, vk_whole(&g->q), vk_whole(&cache->k_cache),
                              vk_whole(&cache->v_cache), vk_whole(&g->alibi_slopes),
                              vk_whole(&g->attn), &shape);
    else
        vk_op_attention(c, tokens, vk_whole(&g->q), vk_whole(&cache->k_cache),
                        vk_whole(&cache->v_cache), vk_whole(&g->attn), &shape);
}

/* g->xn becomes layer il's Gated DeltaNet over `in` (delta_net.c's forward_delta_net): the
 * projections, the causal conv through each sequence's window, q's and k's heads
 * L2-normed, the gates, the delta rule through each sequence's states, each head's output
 * RMS-normed and gated by silu(z), and the output matrix. */
static void record_delta_net(gpu_layers *g, const corral_context *ctx, uint32_t il,
                             vk_buffer *in, uint32_t n)
{
    const hparams *hp = &ctx->model->hp;
    gpu_layer *gl = &g->layers[il - g->first];
    vk_commands *c = &g->cmd;
    uint32_t S = hp->ssm_head_dim, H = hp->ssm_v_heads, G = hp->ssm_k_heads;
    uint32_t channels = (uint32_t)delta_layer_sizes(ctx).channels;
    vk_span tokens = vk_whole(&g->io_tokens);
    matmul(g, &gl->ssm_qkv, in, &g->delta_qkv, n);
    matmul(g, &gl->ssm_z, in, &g->delta_z, n);
    matmul(g, &gl->ssm_alpha, in, &g->delta_alpha, n);
    matmul(g, &gl->ssm_beta, in, &g->delta_beta, n);
    vk_op_delta_conv(c, vk_whole(&gl->conv_kernels), tokens, vk_whole(&gl->conv_state),
                     vk_whole(&g->delta_qkv), channels, hp->ssm_conv_kernel, n);
    vk_op_l2norm(c, vk_whole(&g->delta_qkv), S, 2 * G, n, channels, hp->norm_eps);
    vk_op_delta_gates(c, vk_whole(&g->delta_alpha), vk_whole(&g->delta_beta),
                      vk_whole(&gl->ssm_dt.buf), vk_whole(&gl->ssm_a.buf), H, n);
    vk_delta_shape shape = {S, H, G, channels, n, ctx->n_seq,
                            ctx->model->arch->tensors & ARCH_SSM_GROUPED};
    vk_op_delta_rule(c, tokens, vk_whole(&g->delta_qkv), vk_whole(&g->delta_alpha),
                     vk_whole(&g->delta_beta), vk_whole(&gl->state), vk_whole(&g->delta_out),
                     &shape);
    vk_op_rmsnorm(c, vk_whole(&gl->ssm_norm.buf), vk_whole(&g->delta_out),
                  vk_whole(&g->delta_out), S, n * H, hp->norm_eps);
    vk_op_swiglu(c, vk_whole(&g->delta_z), vk_whole(&g->delta_out), n * H * S);
    matmul(g, &gl->ssm_out, &g->delta_z, &g->xn, n);
}

/* g->xn becomes layer il's gated short conv over `in` (arch_lfm2.c's forward_shortconv):
 * in_proj's rows [b | c | x], c * conv(b * x) through each sequence's window, out_proj. */
static void record_short_conv(gpu_layers *g, const corral_context *ctx, uint32_t il,
                              vk_buffer *in, uint32_t n)
{
    gpu_layer *gl = &g->layers[il - g->first];
    uint32_t C = (uint32_t)delta_layer_sizes(ctx).channels;
    matmul(g, &gl->ssm_in, in, &g->delta_qkv, n);
    vk_op_gated_short_conv(&g->cmd, vk_whole(&gl->conv_kernels), vk_whole(&g->io_tokens),
                           vk_whole(&gl->conv_state), vk_whole(&g->delta_qkv), C,
                           ctx->model->hp.ssm_conv_kernel, n);
    copy_rows(g, &g->delta_qkv, &g->delta_out, n, C, 0, 3 * C, 0, C);
    matmul(g, &gl->ssm_out, &g->delta_out, &g->xn, n);
}

/* g->xn becomes layer il's Mamba2 mixer over `in` (mamba2.c's forward_mamba2): the input
 * projection's rows [z | x B C | dt], the conv with its bias through each sequence's window,
 * each head's scan through its sequence's states, y times silu(z), each group of channels
 * RMS-normed with its row of ssm_norm, and the output matrix. */
static void record_mamba2(gpu_layers *g, const corral_context *ctx, uint32_t il, vk_buffer *in,
                          uint32_t n)
{
    const hparams *hp = &ctx->model->hp;
    gpu_layer *gl = &g->layers[il - g->first];
    vk_commands *c = &g->cmd;
    uint32_t H = hp->ssm_v_heads, P = hp->ssm_head_dim, G = hp->ssm_k_heads, width = H * P;
    uint32_t channels = (uint32_t)delta_layer_sizes(ctx).channels;
    vk_mamba2_shape s = {P, H, G, hp->ssm_state, channels, hp->ssm_conv_kernel, n, ctx->n_seq};
    vk_span tokens = vk_whole(&g->io_tokens);
    vk_span bias = gl->ssm_conv_b.buf.buffer ? vk_whole(&gl->ssm_conv_b.buf) : (vk_span){0};
    matmul(g, &gl->ssm_in, in, &g->delta_qkv, n);
    vk_op_mamba2_conv(c, vk_whole(&gl->conv_kernels), bias, tokens, vk_whole(&gl->conv_state),
                      vk_whole(&g->delta_qkv), &s);
    vk_op_mamba2_scan(c, tokens, vk_whole(&g->delta_qkv), vk_whole(&gl->mamba2_heads),
                      vk_whole(&gl->state), vk_whole(&g->delta_out), &s);
    copy_rows(g, &g->delta_qkv, &g->delta_z, n, width, 0, width + channels + H, 0, width);
    vk_op_swiglu(c, vk_whole(&g->delta_z), vk_whole(&g->delta_out), n * width);
    vk_op_rmsnorm(c, vk_whole(&g->ones), vk_whole(&g->delta_z), vk_whole(&g->delta_z),
                  width / G, n * G, hp->norm_eps);
    vk_op_binary(c, VK_MUL, vk_whole(&g->delta_z), vk_whole(&gl->ssm_norm.buf), n * width,
                 width, 0.0f);
    matmul(g, &gl->ssm_out, &g->delta_z, &g->xn, n);
}

/* g->xn becomes qwen35's gated attention over `in` (arch_qwen35.c): q's projection holds
 * per head its q rows and then its gate's; q and k RMS-normed per head and rotated, the
 * attention's output times sigmoid(gate) before attn_output. */
static void record_gated_attention(gpu_layers *g, const corral_context *ctx, uint32_t il,
                                   vk_buffer *in, uint32_t n)
{
    const corral_model *m = ctx->model;
    const hparams *hp = &m->hp;
    const layer_weights *l = &m->layers[il];
    gpu_layer *gl = &g->layers[il - g->first];
    vk_commands *c = &g->cmd;
    uint32_t D = hp->head_dim_k, H = hp->n_head, q_width = H * D;
    matmul(g, &gl->wq, in, &g->q_gate, n);
    copy_rows(g, &g->q_gate, &g->q, n * H, D, 0, 2 * D, 0, D);
    copy_rows(g, &g->q_gate, &g->attn_gate, n * H, D, D, 2 * D, 0, D);
    matmul(g, &gl->wk, in, &g->k, n);
    matmul(g, &gl->wv, in, &g->v, n);
    norm_spans(g, &gl->q_norm, &g->q, q_width, n, hp->norm_eps);
    norm_spans(g, &gl->k_norm, &g->k, l->n_head_kv * D, n, hp->norm_eps);
    vk_rope rope = {vk_whole(&g->io_cos_sin[l->rope_variant]), ctx->rope[l->rope_variant].n_rot,
                    true};
    vk_op_rope(c, rope.cos_sin, vk_whole(&g->q), n, H, D, rope.n_rot, true);
    store_and_attend(g, ctx, il, n, &rope); /* the keys turned as they are stored */
    vk_op_binary(c, VK_MUL_SIGMOID, vk_whole(&g->attn), vk_whole(&g->attn_gate), n * q_width,
                 n * q_width, 0.0f);
    matmul(g, &gl->wo, &g->attn, &g->xn, n);
}

/* A per-head matrix's product (w: rows rows a head) with each (token, head) row of x into
 * y's, as a head's rows were an expert's. */
static void head_product(gpu_layers *g, const gpu_weight *w, vk_buffer *x, vk_buffer *y,
                         uint32_t rows, uint32_t n_rows, uint32_t n_head)
{
    vk_op_matmul_experts(&g->cmd, w->type, vk_whole(&w->buf), w->row_bytes, vk_whole(x),
                         vk_whole(&g->quants), vk_whole(&g->scales), vk_whole(&g->mla_heads),
                         vk_whole(y), w->n_in, rows, n_rows, 1, 0, n_head);
}

/* g->xn becomes layer il's latent attention over `in`, as mla.c's absorbed form: the cache
 * row [k_rope | normed latent] (one KV head) and its value row the latent; each head's query
 * [rotated part | its non-rotated part through wk_b], and its output through wv_b. */
static void record_mla_attention(gpu_layers *g, const corral_context *ctx, uint32_t il,
                                 vk_buffer *in, uint32_t n)
{
    const corral_model *m = ctx->model;
    const hparams *hp = &m->hp;
    const layer_weights *l = &m->layers[il];
    gpu_layer *gl = &g->layers[il - g->first];
    uint32_t H = hp->n_head, rot = hp->n_rot, nope = hp->mla_nope, latent = hp->mla_kv_lora;
    uint32_t dk = hp->head_dim_k, qk = nope + rot;
    if (gl->wq_a.buf.buffer) {
        matmul(g, &gl->wq_a, in, &g->mla_q_latent, n);
        vk_op_rmsnorm(&g->cmd, vk_whole(&gl->q_a_norm.buf), vk_whole(&g->mla_q_latent),
                      vk_whole(&g->mla_q_latent), hp->mla_q_lora, n, hp->norm_eps);
        matmul(g, &gl->wq, &g->mla_q_latent, &g->mla_q, n);
    } else {
        matmul(g, &gl->wq, in, &g->mla_q, n);
    }
    matmul(g, &gl->wkv_a, in, &g->mla_kv, n);
    copy_rows(g, &g->mla_kv, &g->v, n, latent, 0, latent + rot, 0, latent);
    vk_op_rmsnorm(&g->cmd, vk_whole(&gl->kv_a_norm.buf), vk_whole(&g->v), vk_whole(&g->v),
                  latent, n, hp->norm_eps);
    copy_rows(g, &g->v, &g->k, n, latent, 0, latent, rot, dk);
    copy_rows(g, &g->mla_kv, &g->k, n, rot, latent, latent + rot, 0, dk);
    copy_rows(g, &g->mla_q, &g->q, n * H, rot, nope, qk, 0, dk);
    /* the keys' rotated part is turned as they are stored */
    vk_rope k_rope = {vk_whole(&g->io_cos_sin[l->rope_variant]), l->no_rope ? 0 : rot,
                      m->arch->rope == ROPE_NEOX};
    if (!l->no_rope)
        vk_op_rope(&g->cmd, k_rope.cos_sin, vk_whole(&g->q), n, H, dk, rot, k_rope.neox);
    copy_rows(g, &g->mla_q, &g->mla_gather, n * H, nope, 0, qk, 0, nope);
    head_product(g, &gl->wk_b, &g->mla_gather, &g->mla_absorbed, latent, n * H, H);
    copy_rows(g, &g->mla_absorbed, &g->q, n * H, latent, 0, latent, rot, dk);
    store_and_attend(g, ctx, il, n, &k_rope);
    head_product(g, &gl->wv_b, &g->attn, &g->mla_out, hp->mla_v, n * H, H);
    matmul(g, &gl->wo, &g->mla_out, &g->xn, n);
}

/* g->xn becomes layer il's dense FFN over `in` (forward_ffn_dense): gated, or ungated (GELU
 * or ReLU²) with biases. */
static void record_dense_ffn(gpu_layers *g, const corral_context *ctx, uint32_t il,
                             vk_buffer *in, uint32_t n)
{
    const corral_model *m = ctx->model;
    gpu_layer *gl = &g->layers[il - g->first];
    uint32_t count = n * m->layers[il].n_ff;
    if (ffn_ungated(m->arch->ffn)) {
        matmul(g, &gl->up, in, &g->up, n);
        add_bias(g, &gl->up_b, &g->up, n);
        if (m->arch->ffn == FFN_RELU_SQR)
            vk_op_binary(&g->cmd, VK_RELU_SQR, vk_whole(&g->up), (vk_span){0}, count, 0, 0.0f);
        else
            vk_op_gelu(&g->cmd, vk_whole(&g->gelu_table), vk_whole(&g->up), (vk_span){0},
                       count);
        matmul(g, &gl->down, &g->up, &g->xn, n);
        add_bias(g, &gl->down_b, &g->xn, n);
        return;
    }
    matmul(g, &gl->gate, in, &g->gate, n);
    matmul(g, &gl->up, in, &g->up, n);
    if (m->arch->ffn == FFN_GEGLU)
        vk_op_gelu(&g->cmd, vk_whole(&g->gelu_table), vk_whole(&g->gate), vk_whole(&g->up),
                   count);
    else /* quantized for the down product on the way */
        vk_op_swiglu_quantize(&g->cmd, vk_whole(&g->gate), vk_whole(&g->up), count,
                              gl->down.type, vk_whole(&g->quants), vk_whole(&g->scales));
    matmul(g, &gl->down, &g->gate, &g->xn, n);
    add_bias(g, &gl->down_b, &g->xn, n); /* jina-bert-v2's */
}

/* g->xn becomes layer il's FFN over `in` (forward_ffn): its experts, or its dense FFN. */
static void record_ffn(gpu_layers *g, const corral_context *ctx, uint32_t il, vk_buffer *in,
                       uint32_t n)
{
    if (vk_moe_layer(g->moe, il))
        vk_moe_record(g->moe, &g->cmd, ctx, il, in, NULL, vk_whole(&g->gelu_table), &g->xn, n);
    else
        record_dense_ffn(g, ctx, il, in, n);
}

/* g->xn becomes the FFN of a gemma4 layer with experts over x, as arch_gemma4.c's
 * ffn_with_experts: post_norm_1(dense(ffn_norm(x))) + post_norm_2(experts(pre_norm_2(x))),
 * the router reading rms(x) times its input scale / sqrt(E). */
static void record_dense_and_experts(gpu_layers *g, const corral_context *ctx, uint32_t il,
                                     uint32_t n)
{
    const hparams *hp = &ctx->model->hp;
    gpu_layer *gl = &g->layers[il - g->first];
    vk_commands *c = &g->cmd;
    uint32_t E = hp->n_embd;
    block_norm(g, ctx->model, &gl->ffn_norm, &gl->ffn_norm_b, &g->x, &g->xn, n);
    record_dense_ffn(g, ctx, il, &g->xn, n);
    vk_op_rmsnorm(c, vk_whole(&gl->ffn_post_norm_1.buf), vk_whole(&g->xn), vk_whole(&g->branch),
                  E, n, hp->norm_eps);
    vk_op_rmsnorm(c, vk_whole(&gl->ffn_gate_inp_s.buf), vk_whole(&g->x),
                  vk_whole(&g->router_in), E, n, hp->norm_eps);
    vk_op_binary(c, VK_SCALE, vk_whole(&g->router_in), (vk_span){0}, n * E, 0,
                 1.0f / sqrtf((float)E));
    vk_op_rmsnorm(c, vk_whole(&gl->ffn_pre_norm_2.buf), vk_whole(&g->x), vk_whole(&g->xn), E, n,
                  hp->norm_eps);
    vk_moe_record(g->moe, c, ctx, il, &g->xn, &g->router_in, vk_whole(&g->gelu_table), &g->xn,
                  n);
    vk_op_rmsnorm(c, vk_whole(&gl->ffn_post_norm_2.buf), vk_whole(&g->xn), vk_whole(&g->xn), E,
                  n, hp->norm_eps);
    vk_op_binary(c, VK_ADD, vk_whole(&g->xn), vk_whole(&g->branch), n * E, n * E, 0.0f);
}

/* A branch's output in g->xn RMSNormed before its residual, where the layer has the norm. */
static void post_norm(gpu_layers *g, const hparams *hp, const gpu_weight *norm, uint32_t n)
{
    if (norm->buf.buffer)
        vk_op_rmsnorm(&g->cmd, vk_whole(&norm->buf), vk_whole(&g->xn), vk_whole(&g->xn),
                      hp->n_embd, n, hp->norm_eps);
}

/* x = layernorm(x) * w + b in place: an encoder's norm after a residual. */
static void layernorm_x(gpu_layers *g, const hparams *hp, const gpu_weight *w,
                        const gpu_weight *b, uint32_t n)
{
    vk_op_layernorm(&g->cmd, vk_whole(&w->buf), b->buf.buffer ? vk_whole(&b->buf) : (vk_span){0},
                    vk_whole(&g->x), vk_whole(&g->x), hp->n_embd, n, hp->norm_eps);
}

/* One block, as forward.c's: the encoders' post-norm one, the parallel one, or the attention
 * and then the FFN, each on x normed (absent input norms: on x itself), its output
 * post-normed where the layer says. */
static void record_layer(gpu_layers *g, const corral_context *ctx, uint32_t il, uint32_t n)
{
    const corral_model *m = ctx->model;
    const hparams *hp = &m->hp;
    gpu_layer *gl = &g->layers[il - g->first];
    if (m->arch->layer == layer_post_norm || m->arch == &arch_jina_bert_v2) {
        /* jina-v2-code's second norm: x = LN2(LN(x + attn(x)) + x), the input kept in branch */
        bool second_norm = gl->attn_norm_2.buf.buffer;
        settle_residual(g, hp, n);
        if (second_norm)
            copy_rows(g, &g->x, &g->branch, n, hp->n_embd, 0, hp->n_embd, 0, hp->n_embd);
        record_attention(g, ctx, il, &g->x, n);
        residual(g, hp, n);
        layernorm_x(g, hp, &gl->attn_out_norm, &gl->attn_out_norm_b, n);
        if (second_norm) {
            vk_op_binary(&g->cmd, VK_ADD, vk_whole(&g->x), vk_whole(&g->branch),
                         n * hp->n_embd, n * hp->n_embd, 0.0f);
            layernorm_x(g, hp, &gl->attn_norm_2, &gl->attn_norm_2_b, n);
        }
        record_ffn(g, ctx, il, &g->x, n);
        residual(g, hp, n);
        layernorm_x(g, hp, &gl->layer_out_norm, &gl->layer_out_norm_b, n);
        return;
    }
    if (nemotron_h(m)) { /* arch_nemotron_h.c's layer: one mixer on the normed input */
        residual_and_norm(g, m, &gl->attn_norm, &gl->attn_norm_b, &g->xn, n, TENSOR_TYPE_F32);
        if (m->layers[il].recurrent)
            record_mamba2(g, ctx, il, &g->xn, n);
        else if (gl->wq.buf.buffer)
            record_attention(g, ctx, il, &g->xn, n);
        else
            record_ffn(g, ctx, il, &g->xn, n);
        residual(g, hp, n);
        return;
    }
    if (gl->attn_norm_2.buf.buffer) {
        /* falcon-40b: the attention reads a norm of x of its own, in xn, which the FFN's
         * output would overwrite: here the attention's residual comes first */
        residual_and_norm(g, m, &gl->attn_norm, &gl->attn_norm_b, &g->branch, n,
                          TENSOR_TYPE_F32);
        block_norm(g, m, &gl->attn_norm_2, &gl->attn_norm_2_b, &g->x, &g->xn, n);
        record_attention(g, ctx, il, &g->xn, n);
        residual(g, hp, n);
        record_ffn(g, ctx, il, &g->branch, n);
        residual(g, hp, n);
        return;
    }
    if (m->arch->tensors & ARCH_PARALLEL) { /* the FFN's residual first, as layer_parallel */
        residual_and_norm(g, m, &gl->attn_norm, &gl->attn_norm_b, &g->branch, n,
                          TENSOR_TYPE_F32);
        record_ffn(g, ctx, il, &g->branch, n);
        residual(g, hp, n);
        record_attention(g, ctx, il, &g->branch, n);
        residual(g, hp, n);
        return;
    }
    if (m->arch->layer == layer_pre_norm_or_parallel && !gl->ffn_norm.buf.buffer) {
        /* both branches on one norm, the attention's residual first (stablelm 2 12B) */
        residual_and_norm(g, m, &gl->attn_norm, &gl->attn_norm_b, &g->branch, n,
                          TENSOR_TYPE_F32);
        record_attention(g, ctx, il, &g->branch, n);
        residual(g, hp, n);
        record_ffn(g, ctx, il, &g->branch, n);
        residual(g, hp, n);
        return;
    }
    vk_buffer *in = &g->x;
    if (gl->attn_norm.buf.buffer) {
        residual_and_norm(g, m, &gl->attn_norm, &gl->attn_norm_b, &g->xn, n,
                          mixer_input_type(ctx, il, gl));
        in = &g->xn;
    } else {
        settle_residual(g, hp, n);
    }
    if (m->layers[il].recurrent && hp->ssm_mamba2)
        record_mamba2(g, ctx, il, in, n);
    else if (m->layers[il].recurrent && hp->ssm_shortconv)
        record_short_conv(g, ctx, il, in, n);
    else if (m->layers[il].recurrent)
        record_delta_net(g, ctx, il, in, n);
    else if (m->arch->layer == qwen35_layer)
        record_gated_attention(g, ctx, il, in, n);
    else if (hp->mla_kv_lora)
        record_mla_attention(g, ctx, il, in, n);
    else
        record_attention(g, ctx, il, in, n);
    post_norm(g, hp, &gl->post_attn_norm, n);
    g->residual_pending = true;
    in = &g->x;
    if ((m->arch->tensors & ARCH_DENSE_AND_EXPERTS) && vk_moe_layer(g->moe, il)) {
        settle_residual(g, hp, n);
        record_dense_and_experts(g, ctx, il, n);
    } else {
        if (gl->ffn_norm.buf.buffer) {
            residual_and_norm(g, m, &gl->ffn_norm, &gl->ffn_norm_b, &g->xn, n,
                              ffn_input_type(g, ctx, il, gl));
            in = &g->xn;
        } else {
            settle_residual(g, hp, n);
        }
        record_ffn(g, ctx, il, in, n);
    }
    post_norm(g, hp, &gl->post_ffn_norm, n);
    g->residual_pending = true; /* the next layer's norm may take it */
    if (gl->inp_gate.buf.buffer) { /* gemma4_per_layer_branch, then its residual */
        settle_residual(g, hp, n);
        uint32_t P = hp->n_embd_per_layer, all = P * hp->n_layer;
        matmul(g, &gl->inp_gate, &g->x, &g->per_layer_gate, n);
        copy_rows(g, &g->io_per_layer, &g->per_layer_in, n, P, il * P, all, 0, P);
        vk_op_gelu(&g->cmd, vk_whole(&g->gelu_table), vk_whole(&g->per_layer_gate),
                   vk_whole(&g->per_layer_in), n * P);
        matmul(g, &gl->per_layer_proj, &g->per_layer_gate, &g->xn, n);
        post_norm(g, hp, &gl->per_layer_post_norm, n);
        g->residual_pending = true;
    }
    const weight *out_scale = &m->layers[il].out_scale; /* gemma4's, one F32 value */
    if (out_scale->data) {
        settle_residual(g, hp, n);
        vk_op_binary(&g->cmd, VK_SCALE, vk_whole(&g->x), (vk_span){0}, n * hp->n_embd, 0,
                     *(const float *)out_scale->data);
    }
}

/* ---- gemma3n (arch_gemma3n.c's layer_gemma3n) ---- */

/* The n rows of g->streams' stream 0, or of g->x, through layer il's AltUp router into
 * altup_routed (tanh(altup_router . (norm(in) / E))), then through `coef` into altup_coef. */
static void altup_coefficients(gpu_layers *g, const corral_context *ctx, uint32_t il,
                               vk_buffer *in, const gpu_weight *coef, uint32_t n)
{
    const hparams *hp = &ctx->model->hp;
    gpu_layer *gl = &g->layers[il - g->first];
    vk_commands *c = &g->cmd;
    uint32_t E = hp->n_embd, A = hp->n_altup;
    vk_op_rmsnorm(c, vk_whole(&gl->altup_router_norm.buf), vk_whole(in), vk_whole(&g->xn), E, n,
                  hp->norm_eps);
    vk_op_binary(c, VK_SCALE, vk_whole(&g->xn), (vk_span){0}, n * E, 0, 1.0f / (float)E);
    matmul(g, &gl->altup_router, &g->xn, &g->altup_routed, n);
    vk_op_binary(c, VK_TANH, vk_whole(&g->altup_routed), (vk_span){0}, n * A, 0, 0.0f);
    matmul(g, coef, &g->altup_routed, &g->altup_coef, n);
}

/* g->xn becomes layer il's GeGLU FFN over g->xn, its gate sparsified first where the layer
 * says (gemma3n_ffn). */
static void record_gemma3n_ffn(gpu_layers *g, const corral_context *ctx, uint32_t il,
                               uint32_t n)
{
    const layer_weights *l = &ctx->model->layers[il];
    gpu_layer *gl = &g->layers[il - g->first];
    uint32_t F = gl->gate.n_out;
    matmul(g, &gl->gate, &g->xn, &g->gate, n);
    matmul(g, &gl->up, &g->xn, &g->up, n);
    if (l->sparse_gate)
        vk_op_sparse_gate(&g->cmd, vk_whole(&g->gate), F, n, l->sparsity_std_mul);
    vk_op_gelu(&g->cmd, vk_whole(&g->gelu_table), vk_whole(&g->gate), vk_whole(&g->up), n * F);
    matmul(g, &gl->down, &g->gate, &g->xn, n);
}

/* After the last layer: g->x = the mean of stream 0 and, for s > 0, altup_unembd_proj's slab
 * s - 1 . stream s rescaled to stream 0's length (altup_merge), summed in the CPU's order. */
static void record_altup_merge(gpu_layers *g, const corral_context *ctx, uint32_t n)
{
    const hparams *hp = &ctx->model->hp;
    vk_commands *c = &g->cmd;
    uint32_t E = hp->n_embd, stride = ctx->n_batch * E;
    copy_rows(g, &g->streams, &g->x, n, E, 0, E, 0, E);
    for (uint32_t s = 1; s < hp->n_altup; s++) {
        copy_rows(g, &g->streams, &g->xn, n, E, s * stride, E, 0, E);
        matmul(g, &g->altup_unembd[s - 1], &g->xn, &g->branch, n);
        vk_op_match_magnitude(c, vk_whole(&g->streams), vk_whole(&g->branch), E, n);
        vk_op_binary(c, VK_ADD, vk_whole(&g->x), vk_whole(&g->branch), n * E, n * E, 0.0f);
    }
    vk_op_binary(c, VK_SCALE, vk_whole(&g->x), (vk_span){0}, n * E, 0,
                 1.0f / (float)hp->n_altup);
}

/* Layer il over the streams in g->streams: predict them, run the block on the active
 * prediction (the laurel branch beside the attention, the two averaged by 1/sqrt(2) with the
 * attention's residual, then the FFN and its residual, in g->x), correct the streams by the
 * block's output, and add the per-layer input branch of the corrected active stream to the
 * others; after the last layer the streams merged into g->x. */
static void record_gemma3n_layer(gpu_layers *g, const corral_context *ctx, uint32_t il,
                                 uint32_t n)
{
    const corral_model *m = ctx->model;
    const hparams *hp = &m->hp;
    gpu_layer *gl = &g->layers[il - g->first];
    vk_commands *c = &g->cmd;
    uint32_t E = hp->n_embd, A = hp->n_altup, stride = ctx->n_batch * E, count = n * E;
    vk_span active = {g->pred.buffer, 0, (VkDeviceSize)count * sizeof(float)};

    altup_coefficients(g, ctx, il, &g->streams, &gl->altup_predict_coef, n);
    vk_op_altup_predict(c, vk_whole(&g->streams), vk_whole(&g->altup_coef), vk_whole(&g->pred),
                        E, A, n, stride);
    vk_op_rmsnorm(c, vk_whole(&gl->attn_norm.buf), active, vk_whole(&g->xn), E, n,
                  hp->norm_eps);
    /* laurel: branch = xn + norm(laurel_r . laurel_l . xn) */
    matmul(g, &gl->laurel_l, &g->xn, &g->laurel, n);
    matmul(g, &gl->laurel_r, &g->laurel, &g->branch, n);
    vk_op_rmsnorm(c, vk_whole(&gl->laurel_post_norm.buf), vk_whole(&g->branch),
                  vk_whole(&g->branch), E, n, hp->norm_eps);
    vk_op_binary(c, VK_ADD, vk_whole(&g->branch), vk_whole(&g->xn), count, count, 0.0f);
    record_attention(g, ctx, il, &g->xn, n);
    post_norm(g, hp, &gl->post_attn_norm, n);
    vk_op_binary(c, VK_ADD, vk_whole(&g->xn), active, count, count, 0.0f);
    vk_op_binary(c, VK_ADD, vk_whole(&g->xn), vk_whole(&g->branch), count, count, 0.0f);
    vk_op_binary(c, VK_SCALE, vk_whole(&g->xn), (vk_span){0}, count, 0, 1.0f / sqrtf(2.0f));
    copy_rows(g, &g->xn, &g->x, n, E, 0, E, 0, E);
    vk_op_rmsnorm(c, vk_whole(&gl->ffn_norm.buf), vk_whole(&g->x), vk_whole(&g->xn), E, n,
                  hp->norm_eps);
    record_gemma3n_ffn(g, ctx, il, n);
    post_norm(g, hp, &gl->post_ffn_norm, n);
    residual(g, hp, n);
    altup_coefficients(g, ctx, il, &g->x, &gl->altup_correct_coef, n);
    vk_op_altup_correct(c, vk_whole(&g->x), vk_whole(&g->pred), vk_whole(&g->altup_coef),
                        vk_whole(&g->streams), E, A, n, stride);
    /* the per-layer input branch (gemma4_per_layer_branch) on the corrected active stream
     * times altup_correct_scale, added to the other streams */
    uint32_t P = hp->n_embd_per_layer, all = P * hp->n_layer;
    copy_rows(g, &g->streams, &g->xn, n, E, 0, E, 0, E);
    vk_op_binary(c, VK_MUL, vk_whole(&g->xn), vk_whole(&gl->altup_correct_scale.buf), count, E,
                 0.0f);
    matmul(g, &gl->inp_gate, &g->xn, &g->per_layer_gate, n);
    copy_rows(g, &g->io_per_layer, &g->per_layer_in, n, P, il * P, all, 0, P);
    vk_op_gelu(c, vk_whole(&g->gelu_table), vk_whole(&g->per_layer_gate),
               vk_whole(&g->per_layer_in), n * P);
    matmul(g, &gl->per_layer_proj, &g->per_layer_gate, &g->xn, n);
    post_norm(g, hp, &gl->per_layer_post_norm, n);
    vk_op_altup_add(c, vk_whole(&g->xn), vk_whole(&g->streams), E, A, n, stride);
    if (il + 1 == hp->n_layer)
        record_altup_merge(g, ctx, n);
}

/* x += tanh(gate) * xn on the tokens that see their sequence's image (io_cross_mask's 1s);
 * the others' x stays as it was, plus zeros. */
static void gated_residual(gpu_layers *g, const hparams *hp, const weight *gate, uint32_t n)
{
    uint32_t count = n * hp->n_embd;
    vk_op_binary(&g->cmd, VK_MUL_ROWS, vk_whole(&g->xn), vk_whole(&g->io_cross_mask), count,
                 hp->n_embd, 0.0f);
    vk_op_binary(&g->cmd, VK_SCALE, vk_whole(&g->xn), (vk_span){0}, count, 0,
                 tanhf(*(const float *)gate->data));
    vk_op_binary(&g->cmd, VK_ADD, vk_whole(&g->x), vk_whole(&g->xn), count, count, 0.0f);
}

/* A cross-attention layer as cross_attention_layer: q (per-head RMS-normed, no RoPE) over
 * the attended rows of each token's image in the layer's cache (no causal mask), through
 * wo and the attention's gate; then the FFN through the MLP's gate. A token that sees no
 * image reads its sequence's cache as any other (what it holds: zeros or an image gone) and
 * adds nothing. */
static void record_cross_layer(gpu_layers *g, const corral_context *ctx, uint32_t il,
                               uint32_t n)
{
    const corral_model *m = ctx->model;
    const hparams *hp = &m->hp;
    const layer_weights *l = &m->layers[il];
    gpu_layer *gl = &g->layers[il - g->first];
    uint32_t D = l->head_dim_k;
    residual_and_norm(g, m, &gl->attn_norm, &gl->attn_norm_b, &g->xn, n, gl->wq.type);
    matmul(g, &gl->wq, &g->xn, &g->q, n);
    norm_spans(g, &gl->q_norm, &g->q, hp->n_head * D, n, hp->norm_eps);
    vk_attention_shape shape = {n, hp->n_head, l->n_head_kv, D, D, g->cross_cells, false,
                                1.0f / sqrtf((float)D), 0.0f, 0, 2 * ctx->n_batch, 0};
    vk_op_attention(&g->cmd, vk_whole(&g->io_cross_tokens), vk_whole(&g->q),
                    vk_whole(&gl->k_cache), vk_whole(&gl->v_cache), vk_whole(&g->attn), &shape);
    matmul(g, &gl->wo, &g->attn, &g->xn, n);
    gated_residual(g, hp, &l->xattn_gate, n);
    block_norm(g, m, &gl->ffn_norm, &gl->ffn_norm_b, &g->x, &g->xn, n);
    record_dense_ffn(g, ctx, il, &g->xn, n);
    gated_residual(g, hp, &l->xmlp_gate, n);
}

/* On the compact sliding layers of sequence seq, cells [src, src + n) to [dst, dst + n)
 * (dst <= src), keys turned by the first rows of io_cos_sin when rotate: in runs no longer
 * than the distance, lowest first, so that no run reads cells an earlier one wrote (no
 * distance: the cells stay, turned in place). */
static void move_window_cells(gpu_layers *g, const corral_context *ctx, uint32_t seq,
                              uint32_t src, uint32_t dst, uint32_t n, bool rotate)
{
    const corral_model *m = ctx->model;
    uint32_t run = src > dst ? src - dst : n;
    begin_call_work(g);
    for (uint32_t il = g->first; il < g->n_layer; il++) {
        if (!compact_layer(g, ctx, il) || m->layers[il].kv_shared)
            continue; /* a shared KV layer's cells are its source's, moved there */
        const layer_weights *l = &m->layers[il];
        gpu_layer *gl = &g->layers[il - g->first];
        vk_span cs = vk_whole(&g->io_cos_sin[l->rope_variant]);
        vk_cache_shape ks = cache_shape(g, ctx, il, false), vs = cache_shape(g, ctx, il, true);
        for (uint32_t at = 0; at < n; at += run) {
            uint32_t count = n - at < run ? n - at : run;
            vk_shift key = {seq, src + at, dst + at, count, rotate && !l->no_rope,
                            m->arch->rope == ROPE_NEOX, ctx->rope[l->rope_variant].n_rot};
            vk_shift value = key;
            value.rotate = false;
            vk_op_kv_shift(&g->cmd, cs, vk_whole(&gl->k_cache), &ks, &key);
            vk_op_kv_shift(&g->cmd, cs, vk_whole(&gl->v_cache), &vs, &value);
        }
    }
}

/* The compact sliding layers follow the CPU's windows (context.c's slide_windows): where a
 * sequence's swa_base moved up, its cells move down by as much (those beyond what the
 * layers hold are stale, and moved along unread); where it moved down (a truncation past
 * it), the cells from there on are rewritten before any is read.
 * The moves are work of this call only, never of a recorded pass, which would repeat them. */
static void sync_windows(gpu_layers *g, const corral_context *ctx)
{
    if (!g->compact)
        return;
    for (uint32_t s = 0; s < ctx->n_seq; s++) {
        uint32_t from = ctx->swa_base[s] - g->swa_base[s], cells = ctx->swa_cells;
        if (ctx->swa_base[s] > g->swa_base[s] && from < cells)
            move_window_cells(g, ctx, s, from, 0, cells - from, false);
        g->swa_base[s] = ctx->swa_base[s];
    }
}

/* Regions of a copy between buffers with the barriers around it that the compute work
 * needs. */
static void copy_regions(vk_commands *c, vk_buffer *from, vk_buffer *to,
                         const VkBufferCopy *regions, uint32_t n_regions)
{
    VkMemoryBarrier before = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                              .srcAccessMask = VK_ACCESS_HOST_WRITE_BIT | VK_ACCESS_SHADER_WRITE_BIT,
                              .dstAccessMask = VK_ACCESS_TRANSFER_READ_BIT};
    VkMemoryBarrier after = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                             .srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT,
                             .dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_HOST_READ_BIT};
    vk.vkCmdPipelineBarrier(c->cmd, VK_PIPELINE_STAGE_HOST_BIT | VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                            VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1, &before, 0, NULL, 0, NULL);
    vk.vkCmdCopyBuffer(c->cmd, from->buffer, to->buffer, n_regions, regions);
    vk.vkCmdPipelineBarrier(c->cmd, VK_PIPELINE_STAGE_TRANSFER_BIT,
                            VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_HOST_BIT, 0,
                            1, &after, 0, NULL, 0, NULL);
}

/* A copy of the first `bytes` of a buffer (copy_regions). */
static void copy(vk_commands *c, vk_buffer *from, vk_buffer *to, VkDeviceSize bytes)
{
    VkBufferCopy region = {0, 0, bytes};
    copy_regions(c, from, to, &region, 1);
}

/* The output layer on the n_out rows of x (of n) that out_ids names, into the logits buffer.
 * When every row asks (a generation step's), out_ids names them in order (gpu_forward):
 * the norm then reads x itself, the pending residual added on the way. */
static void record_output(gpu_layers *g, const corral_context *ctx, uint32_t n, uint32_t n_out)
{
    const corral_model *m = ctx->model;
    const hparams *hp = &m->hp;
    vk_commands *c = &g->cmd;
    if (n_out == n) {
        residual_and_norm(g, m, &g->output_norm, &g->output_norm_b, &g->xn, n, g->output.type);
    } else {
        settle_residual(g, hp, n);
        vk_op_get_rows(c, TENSOR_TYPE_F32, vk_whole(&g->x), (size_t)hp->n_embd * sizeof(float),
                       vk_whole(&g->out_ids), vk_whole(&g->xn), hp->n_embd, n_out);
        if (m->arch->tensors & ARCH_LAYER_NORM)
            block_norm(g, m, &g->output_norm, &g->output_norm_b, &g->xn, &g->xn, n_out);
        else /* quantized for the output matrix on the way */
            vk_op_rmsnorm_quantize(c, vk_whole(&g->output_norm.buf), vk_whole(&g->xn),
                                   (vk_span){0}, vk_whole(&g->xn), hp->n_embd, n_out,
                                   hp->norm_eps, g->output.type, vk_whole(&g->quants),
                                   vk_whole(&g->scales));
    }
    matmul(g, &g->output, &g->xn, &g->logits, n_out);
    add_bias(g, &g->output_b, &g->logits, n_out); /* phi2's */
}

/* A micro-batch's pass of key's shape: the hidden states up, every device layer, and the
 * logits (or the states) down. It reads what changes from step to step from the io
 * buffers, which gpu_forward writes before each submission, and depends on nothing of ctx
 * but the key and what stays for the context's life (the model, n_batch, the layers'
 * windows), so that it is submitted again as it is whenever the key recurs. */
static void record_pass(gpu_layers *g, const corral_context *ctx, const vk_graph_key *key)
{
    const hparams *hp = &ctx->model->hp;
    uint32_t n = key->n_tokens;
    size_t x_bytes = (size_t)n * hp->n_embd * sizeof(float);
    if (hp->n_altup) { /* gemma3n's layers take the streams: each one's n rows */
        VkBufferCopy regions[MAX_ALTUP];
        for (uint32_t s = 0; s < hp->n_altup; s++) {
            VkDeviceSize at = (VkDeviceSize)s * ctx->n_batch * hp->n_embd * sizeof(float);
            regions[s] = (VkBufferCopy){at, at, x_bytes};
        }
        copy_regions(&g->cmd, &g->io_streams, &g->streams, regions, hp->n_altup);
    } else {
        copy(&g->cmd, &g->io_x, &g->x, x_bytes);
    }
    g->residual_pending = false;
    for (uint32_t il = g->first; il < g->n_layer; il++)
        if (hp->n_altup)
            record_gemma3n_layer(g, ctx, il, n);
        else if (!ctx->model->layers[il].cross_attn)
            record_layer(g, ctx, il, n);
        else if (g->cross_cells) /* else no image yet: nothing to attend to */
            record_cross_layer(g, ctx, il, n);
    if (key->n_logits > 0) {
        record_output(g, ctx, n, key->n_logits);
        copy(&g->cmd, &g->logits, &g->io_logits,
             (size_t)key->n_logits * hp->n_vocab * sizeof(float));
    } else {
        settle_residual(g, hp, n);
        copy(&g->cmd, &g->x, &g->io_x, x_bytes);
    }
}

/* The first n rows of rope variant r's cos/sin into io_cos_sin[r], each of the variant's own
 * n_rot floats as the device's rope reads them: the CPU's rows are hp.n_rot apart, wider
 * where the variant turns fewer dimensions (gemma4's sliding layers). */
static void upload_cos_sin(gpu_layers *g, const corral_context *ctx, uint32_t r, uint32_t n)
{
    size_t width = ctx->model->hp.n_rot, rot = ctx->rope[r].n_rot;
    float *to = g->io_cos_sin[r].mapped;
    if (rot == width) {
        memcpy(to, ctx->rope_cs[r], n * width * sizeof(float));
        return;
    }
    for (size_t t = 0; t < n; t++)
        memcpy(to + t * rot, ctx->rope_cs[r] + t * width, rot * sizeof(float));
}

bool gpu_forward(gpu_layers *g, corral_context *ctx, size_t begin, bool *logits_done,
                 corral_error *err)
{
    const corral_model *m = ctx->model;
    const hparams *hp = &m->hp;
    uint32_t n = (uint32_t)ctx->n_tokens;
    size_t x_bytes = (size_t)n * hp->n_embd * sizeof(float);
    uint32_t *tokens = g->io_tokens.mapped, *swa_tokens = g->io_swa_tokens.mapped;
    for (uint32_t t = 0; t < n; t++) {
        uint32_t seq = ctx->tok_seq[t];
        /* an encoder's input sees itself whole */
        uint32_t last = hp->causal ? ctx->tok_last[t] : n - 1;
        tokens[2 * t] = seq;
        tokens[2 * t + 1] = ctx->tok_pos[t]; /* full layers: a position is its cell */
        tokens[2 * ctx->n_batch + t] = last;
        uint32_t pos = ctx->tok_pos[t], base = ctx->swa_base[seq];
        uint32_t chunk_first = g->chunk ? pos - pos % g->chunk : 0;
        chunk_first = chunk_first > base ? chunk_first : base;
        tokens[CHUNK_AT * ctx->n_batch + t] = chunk_first;
        if (g->compact) { /* the sliding layers' cells begin at the sequence's swa_base */
            swa_tokens[2 * t] = seq;
            swa_tokens[2 * t + 1] = pos - base;
            swa_tokens[2 * ctx->n_batch + t] = last - base;
            swa_tokens[CHUNK_AT * ctx->n_batch + t] = chunk_first - base;
        }
        if (hp->attn_temp_scale != 0.0f)
            ((float *)g->io_q_temp.mapped)[t] = attention_temperature(hp, ctx->tok_pos[t]);
        if (g->cross_cells) {
            uint32_t *cross = g->io_cross_tokens.mapped, n_attended;
            bool sees = cross_token_sees_image(ctx, t, &n_attended);
            uint32_t last_row = sees ? n_attended - 1 : 0;
            cross[2 * t] = seq;
            cross[2 * t + 1] = last_row;
            cross[2 * ctx->n_batch + t] = last_row;
            ((float *)g->io_cross_mask.mapped)[t] = sees ? 1.0f : 0.0f;
        }
    }
    for (uint32_t r = 0; r < m->n_rope_variants; r++)
        upload_cos_sin(g, ctx, r, n);
    if (ctx->per_layer_in) { /* gemma4's, which the CPU's first layer makes when it runs */
        if (g->first == 0)
            gemma4_per_layer_inputs(ctx);
        memcpy(g->io_per_layer.mapped, ctx->per_layer_in,
               (size_t)n * hp->n_layer * hp->n_embd_per_layer * sizeof(float));
    }
    if (hp->n_altup) { /* gemma3n's streams, which the CPU's first layer makes likewise */
        if (g->first == 0)
            gemma3n_altup_streams(ctx);
        size_t stride = (size_t)ctx->n_batch * hp->n_embd;
        for (uint32_t s = 0; s < hp->n_altup; s++)
            memcpy((float *)g->io_streams.mapped + s * stride, ctx->altup + s * stride, x_bytes);
    } else {
        memcpy(g->io_x.mapped, ctx->x, x_bytes);
    }

    /* the tokens that asked for logits, in batch order: their rows follow the chunk's first */
    bool encoder = m->arch->tensors & ARCH_ENCODER; /* no logits */
    uint32_t n_out = 0, *out_ids = g->out_ids.mapped;
    int32_t first_row = -1;
    for (uint32_t t = 0; t < n; t++) {
        int32_t row = encoder ? -1 : ctx->logit_row[begin + t];
        if (row < 0)
            continue;
        if (first_row < 0)
            first_row = row;
        if (g->has_output && n_out < g->output_rows)
            out_ids[n_out] = t;
        n_out++;
    }
    *logits_done = g->has_output && n_out <= g->output_rows;
    size_t logits_bytes = (size_t)n_out * hp->n_vocab * sizeof(float);

    /* this call's work (the recurrent states' since the last pass, the windows' moves),
     * then the pass, in one submission */
    VkCommandBuffer cmds[2];
    uint32_t n_cmds = 0;
    sync_windows(g, ctx);
    if (g->call_work) {
        g->call_work = false;
        if (!vk_commands_end(&g->cmd, err))
            return false;
        cmds[n_cmds++] = g->cmd.cmd;
    }
    vk_graph_key key = {n, *logits_done ? n_out : 0};
    VkCommandBuffer pass = vk_graphs_find(&g->graphs, &key);
    if (!pass) {
        if (!vk_graphs_begin(&g->graphs, &key, err))
            return false;
        record_pass(g, ctx, &key);
        if (!vk_graphs_end(&g->graphs, &pass, err))
            return false;
    }
    cmds[n_cmds++] = pass;
    if (!vk_commands_submit_recorded(&g->cmd, cmds, n_cmds, err))
        return false;
    g->passes++;
    if (!*logits_done) {
        memcpy(ctx->x, g->io_x.mapped, x_bytes);
        return true;
    }
    if (n_out == 0)
        return true;
    float *logits = ctx->logits + (size_t)first_row * hp->n_vocab;
    memcpy(logits, g->io_logits.mapped, logits_bytes);
    if (hp->logit_mult != 1.0f)
        for (size_t i = 0; i < (size_t)n_out * hp->n_vocab; i++)
            logits[i] *= hp->logit_mult;
    if (hp->final_softcap > 0.0f)
        block_softcap(logits, (size_t)n_out * hp->n_vocab, hp->final_softcap);
    return true;
}

/* ---- context shift ---- */

bool gpu_seq_shift(gpu_layers *g, const corral_context *ctx, uint32_t seq, uint32_t from,
                   uint32_t len, uint32_t n_discard, corral_error *err)
{
    const corral_model *m = ctx->model;
    for (uint32_t r = 0; r < m->n_rope_variants; r++)
        upload_cos_sin(g, ctx, r, 1);
    begin_call_work(g);
    sync_windows(g, ctx);
    if (g->compact) {
        /* as corral_seq_shift moves the CPU's sliding layers: the positions from `start` on
         * (old numbering) move down by n_discard, the cells' base from `base` to new_base */
        uint32_t n_keep = from - n_discard, base = g->swa_base[seq];
        uint32_t new_base = base < n_keep ? base : base >= from ? base - n_discard : n_keep;
        uint32_t start = base > from ? base : from;
        if (len > start)
            move_window_cells(g, ctx, seq, start - base, start - n_discard - new_base,
                              len - start, true);
        g->swa_base[seq] = new_base;
    }
    for (uint32_t il = g->first; il < g->n_layer; il++) {
        const layer_weights *l = &m->layers[il];
        gpu_layer *gl = &g->layers[il - g->first];
        if (compact_layer(g, ctx, il) || l->kv_shared || l->cross_attn)
            continue; /* moved above, a shared KV layer's (its source's), or no cache */
        vk_span cs = vk_whole(&g->io_cos_sin[l->rope_variant]);
        vk_cache_shape ks = cache_shape(g, ctx, il, false), vs = cache_shape(g, ctx, il, true);
        /* in runs of at most n_discard cells, lowest first: a run's cells are read before
         * any later run writes over them, and never overlap their own destination */
        for (uint32_t at = from; at < len; at += n_discard) {
            uint32_t n = len - at < n_discard ? len - at : n_discard;
            vk_shift key = {seq, at, at - n_discard, n, !l->no_rope, m->arch->rope == ROPE_NEOX,
                            ctx->rope[l->rope_variant].n_rot};
            vk_shift value = key;
            value.rotate = false;
            vk_op_kv_shift(&g->cmd, cs, vk_whole(&gl->k_cache), &ks, &key);
            vk_op_kv_shift(&g->cmd, cs, vk_whole(&gl->v_cache), &vs, &value);
        }
    }
    g->call_work = false;
    return vk_commands_submit(&g->cmd, err);
}

/* ---- recurrent states ---- */

/* Sequence seq's part of a layer's per-sequence buffer of `bytes` bytes in all. */
static VkBufferCopy seq_part(const corral_context *ctx, uint64_t bytes, uint32_t seq)
{
    uint64_t each = bytes / ctx->n_seq;
    return (VkBufferCopy){(VkDeviceSize)seq * each, (VkDeviceSize)seq * each, each};
}

void gpu_seq_states(gpu_layers *g, const corral_context *ctx, uint32_t seq, enum gpu_states op,
                    corral_checkpoint kind)
{
    delta_sizes d = delta_layer_sizes(ctx);
    bool any = false;
    for (uint32_t il = g->first; il < g->n_layer; il++) {
        if (!ctx->model->layers[il].recurrent)
            continue;
        gpu_layer *gl = &g->layers[il - g->first];
        vk_buffer *live[] = {&gl->conv_state, &gl->state};
        vk_buffer *kept[] = {&gl->checkpoint_conv[kind], &gl->checkpoint_state[kind]};
        uint64_t bytes[] = {d.conv, d.state}; /* either may be none */
        if (!any)
            begin_call_work(g);
        any = true;
        transfer_barrier(&g->cmd); /* after the work recorded before it, passes' too */
        for (size_t i = 0; i < 2; i++) {
            VkBufferCopy part = seq_part(ctx, bytes[i], seq);
            if (part.size == 0)
                continue;
            if (op == GPU_STATES_CLEAR)
                vk.vkCmdFillBuffer(g->cmd.cmd, live[i]->buffer, part.dstOffset, part.size, 0);
            else if (op == GPU_STATES_CHECKPOINT)
                vk.vkCmdCopyBuffer(g->cmd.cmd, live[i]->buffer, kept[i]->buffer, 1, &part);
            else
                vk.vkCmdCopyBuffer(g->cmd.cmd, kept[i]->buffer, live[i]->buffer, 1, &part);
        }
    }
    if (any)
        transfer_barrier(&g->cmd);
}

/* ---- images of the cross-attention layers ---- */

/* The cross-attention layers' caches made to hold `cells` cells a sequence: new buffers,
 * zeroed (a token that sees no image reads them), what each sequence's image held copied
 * over, and the passes recorded on the old ones forgotten. */
static bool grow_cross_caches(gpu_layers *g, const corral_context *ctx, uint32_t cells,
                              corral_error *err)
{
    const corral_model *m = ctx->model;
    uint32_t old = g->cross_cells, n = 0, made = 0, most_kv = 0;
    for (uint32_t il = g->first; il < g->n_layer; il++) {
        const layer_weights *l = &m->layers[il];
        n += 2 * l->cross_attn;
        most_kv = l->cross_attn && l->n_head_kv > most_kv ? l->n_head_kv : most_kv;
    }
    vk_buffer *fresh = calloc(n, sizeof *fresh); /* each layer's keys, then its values */
    VkBufferCopy *regions = calloc((size_t)ctx->n_seq * most_kv, sizeof *regions);
    bool ok = fresh && regions;
    if (!ok)
        corral_error_set(err, "out of memory");
    for (uint32_t il = g->first; ok && il < g->n_layer; il++) {
        const layer_weights *l = &m->layers[il];
        vk_cache_shape shape = {l->n_head_kv, l->head_dim_k, cells, false};
        for (int k = 0; ok && l->cross_attn && k < 2; k++)
            ok = buffer(g, vk_cache_bytes(&shape, ctx->n_seq), false, &fresh[made++], err);
    }
    if (ok) {
        begin_call_work(g);
        for (uint32_t i = 0; i < n; i++)
            vk.vkCmdFillBuffer(g->cmd.cmd, fresh[i].buffer, 0, VK_WHOLE_SIZE, 0);
        transfer_barrier(&g->cmd);
        for (uint32_t il = g->first, i = 0; old && il < g->n_layer; il++) {
            const layer_weights *l = &m->layers[il];
            if (!l->cross_attn)
                continue;
            gpu_layer *gl = &g->layers[il - g->first];
            uint64_t row_bytes = (uint64_t)l->head_dim_k * sizeof(float);
            uint32_t n_spans = ctx->n_seq * l->n_head_kv; /* a (sequence, KV head)'s rows */
            for (uint32_t r = 0; r < n_spans; r++)
                regions[r] = (VkBufferCopy){(uint64_t)r * old * row_bytes,
                                            (uint64_t)r * cells * row_bytes, old * row_bytes};
            vk.vkCmdCopyBuffer(g->cmd.cmd, gl->k_cache.buffer, fresh[i++].buffer, n_spans,
                               regions);
            vk.vkCmdCopyBuffer(g->cmd.cmd, gl->v_cache.buffer, fresh[i++].buffer, n_spans,
                               regions);
        }
        transfer_barrier(&g->cmd);
        g->call_work = false;
        ok = vk_commands_submit(&g->cmd, err);
    }
    /* the new buffers replace the old, or go */
    for (uint32_t il = g->first, i = 0; i < made && il < g->n_layer; il++) {
        if (!m->layers[il].cross_attn)
            continue;
        gpu_layer *gl = &g->layers[il - g->first];
        vk_buffer *caches[] = {&gl->k_cache, &gl->v_cache};
        for (int k = 0; k < 2 && i < made; k++, i++) {
            vk_buffer *gone = ok ? caches[k] : &fresh[i];
            if (gone->buffer) {
                g->bytes -= gone->allocated;
                vk_buffer_free(g->dev, gone);
            }
            if (ok)
                *caches[k] = fresh[i];
        }
    }
    free(fresh);
    free(regions);
    if (ok) {
        g->cross_cells = cells;
        vk_graphs_forget(&g->graphs);
    }
    return ok;
}

bool gpu_cross_set_image(gpu_layers *g, const corral_context *ctx, uint32_t seq, uint32_t il,
                         const float *keys, const float *values, uint32_t n_rows,
                         corral_error *err)
{
    const layer_weights *l = &ctx->model->layers[il];
    gpu_layer *gl = &g->layers[il - g->first];
    if (n_rows > g->cross_cells && !grow_cross_caches(g, ctx, n_rows, err))
        return false;
    size_t head_floats = (size_t)n_rows * l->head_dim_k;
    uint64_t head_stride = (uint64_t)g->cross_cells * l->head_dim_k * sizeof(float);
    for (uint32_t h = 0; h < l->n_head_kv; h++) {
        uint64_t at = ((uint64_t)seq * l->n_head_kv + h) * head_stride;
        if (!vk_buffer_write(g->dev, &gl->k_cache, at, keys + h * head_floats,
                             head_floats * sizeof(float), err) ||
            !vk_buffer_write(g->dev, &gl->v_cache, at, values + h * head_floats,
                             head_floats * sizeof(float), err))
            return false;
    }
    return true;
}
