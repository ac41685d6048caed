/*
 * A model's memory from its file (model_memory.h). Each tensor is one of:
 *   - copied at load, anonymous memory that must fit in RAM: a matrix the context repacks for
 *     the level's packed kernels (the dense layer matrices and the output, experts), or
 *     experts in a layout of the file's own (ollama's gptoss) converted once, where the level
 *     does not pack them;
 *   - read in place from the file's mapping, page cache the kernel may reclaim and read
 *     again: the rest. Of those a token reads the dense tensors whole, one row of the token
 *     embeddings (counted as none) and, of the experts, the share it is routed to
 *     (expert_used_count of expert_count).
 * Multi-token prediction layers and tensors (mtp.*), which are not loaded, count as none;
 * latent experts' projections (ffn_latent_*), read in place, are dense tensors a token reads
 * whole. The rules follow what context.c, moe.c and arch_gptoss.c do; the layers a GPU holds
 * are not told apart (the plan is of host memory for a CPU run).
 */
#include "model_memory.h"

#include <stdio.h>
#include <string.h>

#include "quant.h"
#include "tensor_type.h"

/* The part of name after "blk.N.", or NULL when it is not a layer's tensor; N in *layer
 * (UINT64_MAX past it). */
static const char *layer_suffix(const char *name, uint64_t *layer)
{
    if (strncmp(name, "blk.", 4) != 0)
        return NULL;
    const char *p = name + 4;
    if (*p < '0' || *p > '9')
        return NULL;
    *layer = 0;
    while (*p >= '0' && *p <= '9') {
        *layer = *layer < UINT64_MAX / 10 ? *layer * 10 + (uint64_t)(*p - '0') : UINT64_MAX;
        p++;
    }
    return *p == '.' ? p + 1 : NULL;
}

/* A layer matrix the context packs where the level can (context.c's slots). */
static bool is_dense_matrix(const char *suffix)
{
    static const char *const names[] = {"attn_q.weight",      "attn_k.weight",
                                        "attn_v.weight",      "attn_qkv.weight",
                                        "attn_output.weight", "attn_out.weight",
                                        "ffn_gate.weight",    "ffn_up.weight",
                                        "ffn_down.weight",
                                        /* mllama's cross-attention layers' (arch_mllama.c) */
                                        "cross_attn_q_proj.weight", "cross_attn_k_proj.weight",
                                        "cross_attn_v_proj.weight", "cross_attn_o_proj.weight"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(suffix, names[i]) == 0)
            return true;
    return false;
}

/* Experts: a 3-D ffn_*_exps tensor, or one expert's ffn_{gate,up,down}.E.weight. */
static bool is_experts(const char *suffix)
{
    if (strstr(suffix, "_exps.weight"))
        return true;
    static const char *const kinds[] = {"ffn_gate.", "ffn_up.", "ffn_down."};
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        size_t len = strlen(kinds[i]);
        if (strncmp(suffix, kinds[i], len) != 0)
            continue;
        const char *p = suffix + len;
        if (*p < '0' || *p > '9')
            return false;
        while (*p >= '0' && *p <= '9')
            p++;
        return strcmp(p, ".weight") == 0;
    }
    return false;
}

/* Whether the level's packed kernels take rows of n_in elements of t's type, n_rows at a
 * time (ollama's MXFP4 runs as ggml's). */
static bool packable(const gguf_tensor *t, int64_t n_rows)
{
    uint32_t type = t->type == TENSOR_TYPE_MXFP4_OLLAMA ? TENSOR_TYPE_MXFP4 : t->type;
    const quant_ops *ops = quant_ops_active(type);
    return ops && n_rows > 0 && t->ne[0] > 0 && quant_packable(ops, (size_t)t->ne[0], (size_t)n_rows);
}

static uint32_t arch_u32(const gguf_file *file, const char *suffix)
{
    gguf_str arch = {0};
    corral_error err;
    uint32_t v = 0;
    if (!gguf_get_str_opt(file, "general.architecture", &arch, &err) || arch.size == 0)
        return 0;
    char key[256];
    snprintf(key, sizeof key, "%.*s.%s", (int)(arch.size < 128 ? arch.size : 128), arch.data,
             suffix);
    return gguf_get_u32_opt(file, key, &v, &err) ? v : 0;
}

void model_memory_plan(const gguf_file *file, corral_model_memory *out)
{
    *out = (corral_model_memory){0};
    uint32_t n_expert = arch_u32(file, "expert_count");
    uint32_t n_used = arch_u32(file, "expert_used_count");
    bool tied = !gguf_find_tensor(file, "output.weight");
    /* the multi-token prediction layers a converter appends after the trunk (qwen35,
     * glm4moe: nextn_predict_layers) are not loaded */
    uint32_t n_layer = arch_u32(file, "block_count");
    uint32_t n_predict = arch_u32(file, "nextn_predict_layers");
    uint64_t trunk = n_predict > 0 && n_predict < n_layer ? n_layer - n_predict : UINT64_MAX;
    uint64_t dense_mapped = 0;
    for (size_t i = 0; i < gguf_n_tensors(file); i++) {
        const gguf_tensor *t = gguf_tensor_at(file, i);
        uint64_t layer = 0;
        const char *suffix = layer_suffix(t->name, &layer);
        /* ollama's nemotron_h_moe files carry prediction tensors under names of their own */
        if ((suffix && layer >= trunk) || strncmp(t->name, "mtp.", 4) == 0)
            continue;
        uint64_t bytes = t->size_bytes;
        bool copied = false, experts = false;
        if (suffix && is_experts(suffix)) {
            experts = true;
            /* ollama's interleaved gate/up: an expert's gate (or up) is half its rows */
            bool interleaved = strcmp(suffix, "ffn_gate_up_exps.weight") == 0;
            copied = packable(t, interleaved ? t->ne[1] / 2 : t->ne[1]) || interleaved ||
                     t->type == TENSOR_TYPE_MXFP4_OLLAMA;
        } else if (suffix ? is_dense_matrix(suffix)
                          : strcmp(t->name, "output.weight") == 0 ||
                                (tied && strcmp(t->name, "token_embd.weight") == 0)) {
            copied = t->n_dims == 2 && packable(t, t->ne[1]);
        }
        if (copied) {
            out->copied_bytes += bytes;
            continue;
        }
        out->mapped_bytes += bytes;
        if (experts)
            out->mapped_expert_bytes += bytes;
        else if (strcmp(t->name, "token_embd.weight") != 0)
            dense_mapped += bytes;
    }
    uint64_t expert_share = 0;
    if (n_expert > 0 && n_used <= n_expert)
        expert_share = out->mapped_expert_bytes / n_expert * n_used +
                       out->mapped_expert_bytes % n_expert * n_used / n_expert;
    else
        expert_share = out->mapped_expert_bytes; /* no routing keys: count them all */
    out->token_bytes = dense_mapped + expert_share;
}
