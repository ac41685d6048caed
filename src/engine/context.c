/*
 * An inference context: the KV cache of up to n_seq sequences, the scratch planned once for
 * n_batch tokens, the thread pool, and decoding a batch of tokens from any mix of sequences
 * through the model's blocks (forward.c). Full layers give each sequence n_ctx cells, so a
 * position is its cell; sliding-window layers keep only the last window (plus a batch) of
 * positions, compacting as the sequence grows. Sequence operations edit the cache. An
 * encoder's context caches nothing and takes one whole input per call (embed.c).
 */
#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cross_attn.h"
#include "delta_net.h"
#include "forward.h"
#include "gpu.h"
#include "mla.h"
#include "moe.h"
#include "util/checked.h"
#include "util/log.h"

/* ---- creation ---- */

static void *alloc_floats(size_t n, bool *ok)
{
    size_t bytes;
    void *p = NULL;
    if (*ok && checked_mul_size(n ? n : 1, sizeof(float), &bytes))
        p = calloc(1, bytes);
    *ok = *ok && p != NULL;
    return p;
}

static size_t max_act_bytes(const corral_model *m, size_t n_tokens)
{
    size_t max = quant_act_row_bytes(m->output.type, m->output.n_in);
    const weight *globals[] = {&m->per_layer_model_proj, &m->altup_proj, &m->altup_unembd_proj};
    for (size_t i = 0; i < sizeof globals / sizeof globals[0]; i++) {
        size_t b = globals[i]->data ? quant_act_row_bytes(globals[i]->type, globals[i]->n_in) : 0;
        max = b > max ? b : max;
    }
    for (uint32_t il = 0; il < m->hp.n_layer; il++) {
        const layer_weights *l = &m->layers[il];
        const weight *ws[] = {&l->wq,       &l->wk,     &l->wv,       &l->wo,
                              &l->ffn_gate, &l->ffn_up, &l->ffn_down, &l->ffn_gate_inp,
                              &l->ffn_gate_shexp, &l->ffn_up_shexp, &l->ffn_down_shexp,
                              &l->wq_a, &l->wkv_a, &l->ssm_qkv, &l->ssm_z, &l->ssm_beta,
                              &l->ssm_alpha, &l->ssm_out, &l->inp_gate, &l->per_layer_proj,
                              &l->altup_router, &l->altup_predict_coef, &l->altup_correct_coef,
                              &l->laurel_l, &l->laurel_r, &l->ffn_latent_down,
                              &l->ffn_latent_up};
        for (size_t i = 0; i < sizeof ws / sizeof ws[0]; i++) {
            size_t b = quant_act_row_bytes(ws[i]->type, ws[i]->n_in);
            max = b > max ? b : max;
        }
    }
    size_t total;
    return checked_mul_size(max, n_tokens, &total) ? total : 0;
}

/* Each pool thread's copy of a small batch's quantized input (forward.h), in one block. */
static bool alloc_thread_acts(corral_context *ctx, size_t n_threads, size_t widest)
{
    size_t tokens = ctx->n_batch < THREAD_ACT_TOKENS ? ctx->n_batch : THREAD_ACT_TOKENS;
    size_t act = max_act_bytes(ctx->model, tokens), sums, per_thread, total;
    if (!act || !checked_mul_size(tokens, quant_packed_sums_bytes(widest), &sums))
        return false;
    act = (act + 63) / 64 * 64;
    sums = (sums + 63) / 64 * 64;
    if (!checked_add_size(act, sums, &per_thread) ||
        !checked_mul_size(per_thread, n_threads, &total))
        return false;
    ctx->thread_acts = aligned_alloc(alignof(thread_act), n_threads * sizeof *ctx->thread_acts);
    ctx->thread_act_memory = aligned_alloc(64, total);
    if (!ctx->thread_acts || !ctx->thread_act_memory)
        return false;
    for (size_t i = 0; i < n_threads; i++) {
        char *base = (char *)ctx->thread_act_memory + i * per_thread;
        ctx->thread_acts[i] = (thread_act){.job = 0, .act = base, .sums = base + act};
    }
    return true;
}

/* ---- packed weights ---- */

static const weight *layer_matrix(const layer_weights *l, enum layer_matrix which)
{
    const weight *ws[LM_COUNT] = {&l->wq, &l->wk, &l->wv, &l->wo, &l->ffn_gate, &l->ffn_up,
                                  &l->ffn_down};
    return ws[which];
}

/* Entry i of ctx->packed: the i-th layer matrix, then the output. */
static const weight *packed_slot_weight(const corral_model *m, size_t i)
{
    if (i == (size_t)m->hp.n_layer * LM_COUNT)
        return &m->output;
    return layer_matrix(&m->layers[i / LM_COUNT], (enum layer_matrix)(i % LM_COUNT));
}

enum { PACK_ROWS_PER_TASK = 16 * MATMUL_TASK_ROWS };

/* Every packed matrix split into tasks; slot s owns tasks [first[s], first[s + 1]). */
typedef struct pack_job {
    const corral_model *model;
    void *const *dst;
    const size_t *block_bytes;
    const size_t *first;
} pack_job;

static void pack_task(void *arg, size_t task, size_t thread)
{
    (void)thread;
    const pack_job *job = arg;
    size_t s = 0;
    while (task >= job->first[s + 1])
        s++;
    const weight *w = packed_slot_weight(job->model, s);
    size_t begin = (task - job->first[s]) * PACK_ROWS_PER_TASK;
    size_t end = begin + PACK_ROWS_PER_TASK < w->n_out ? begin + PACK_ROWS_PER_TASK : w->n_out;
    for (size_t b = begin; b < end; b += MATMUL_TASK_ROWS) {
        size_t rows = end - b < MATMUL_TASK_ROWS ? end - b : MATMUL_TASK_ROWS;
        quant_pack_rows(w->ops, (const char *)w->data + b * w->row_bytes, w->n_in, 0, rows,
                        (char *)job->dst[s] + b / MATMUL_TASK_ROWS * job->block_bytes[s]);
    }
}

/* Whether layer il's gate and up share one copy, their blocks interleaved (forward.h): both
 * packed by the same kernels, which the gated job then runs as one. */
static bool gate_up_interleave(const corral_model *m, size_t il)
{
    const weight *gate = &m->layers[il].ffn_gate, *up = &m->layers[il].ffn_up;
    return gate->data && up->data && gate->ops == up->ops && gate->n_in == up->n_in &&
           gate->n_out == up->n_out && quant_packable(gate->ops, gate->n_in, gate->n_out);
}

/*
 * The file's pages of a repacked matrix are not read again: drop them from this process so
 * that memory holds one copy of the weights, not two (a page touched again re-faults from the
 * file). Safe because weights always point into the model's read-only file mapping, never
 * into anonymous memory, where MADV_DONTNEED would zero them. Pages shared with neighbouring
 * tensors are kept.
 */
void release_file_pages(const void *data, size_t bytes)
{
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t begin = ((uintptr_t)data + page - 1) & ~(page - 1);
    uintptr_t end = ((uintptr_t)data + bytes) & ~(page - 1);
    if (end > begin)
        madvise((void *)begin, end - begin, MADV_DONTNEED);
}

/*
 * Memory that is streamed once per token, on 2 MiB pages where the kernel gives them
 * (transparent huge pages on request): 4 KiB pages cost a TLB miss every 4 KiB of the weight
 * stream, which slows a 1-token matmul from memory measurably. *bytes is rounded up to
 * whole huge pages.
 */
enum { HUGE_PAGE_BYTES = 2u << 20 };

void *alloc_huge(size_t *bytes)
{
    if (!checked_add_size(*bytes, HUGE_PAGE_BYTES - 1, bytes))
        return NULL;
    *bytes &= ~(size_t)(HUGE_PAGE_BYTES - 1);
    void *p = aligned_alloc(HUGE_PAGE_BYTES, *bytes);
#ifdef MADV_HUGEPAGE
    if (p)
        madvise(p, *bytes, MADV_HUGEPAGE); /* advice only: without it, 4 KiB pages */
#endif
    return p;
}

/*
 * bytes of zeros at a huge-page boundary, mapped but not committed: each page is made on its
 * first write. NULL when the address space is short.
 */
static void *map_lazy(size_t bytes, lazy_mapping *m)
{
    size_t span;
    if (!checked_add_size(bytes, HUGE_PAGE_BYTES, &span))
        return NULL;
    void *p = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    m->base = p;
    m->bytes = span;
    uintptr_t at = ((uintptr_t)p + HUGE_PAGE_BYTES - 1) & ~(uintptr_t)(HUGE_PAGE_BYTES - 1);
#ifdef MADV_HUGEPAGE
    madvise((void *)at, bytes, MADV_HUGEPAGE); /* advice only: without it, 4 KiB pages */
#endif
    return (void *)at;
}

static void unmap_lazy(lazy_mapping *m)
{
    if (m->base)
        munmap(m->base, m->bytes);
    m->base = NULL;
}

/*
 * Copies of the matrices the level's packed kernels take, in one allocation of their total
 * size; the file's pages of those tensors are then released. A matrix whose shape does not
 * fit keeps its rows in the model's mapping.
 */
static bool pack_weights(corral_context *ctx, corral_error *err)
{
    const corral_model *m = ctx->model;
    size_t n_slots = (size_t)m->hp.n_layer * LM_COUNT + 1, total = 0;
    ctx->packed = calloc(n_slots, sizeof *ctx->packed);
    ctx->packed_block_bytes = calloc(n_slots, sizeof *ctx->packed_block_bytes);
    void **dst = calloc(n_slots, sizeof *dst);
    size_t *first = calloc(n_slots + 1, sizeof *first), *offset = calloc(n_slots, sizeof *offset);
    bool ok = ctx->packed && ctx->packed_block_bytes && dst && first && offset;
    /* the layers on a GPU never multiply on the CPU */
    size_t cpu_slots = (size_t)(ctx->gpu ? gpu_layers_first(ctx->gpu) : m->hp.n_layer) * LM_COUNT;
    for (size_t s = 0; ok && s < n_slots; s++) {
        const weight *w = packed_slot_weight(m, s);
        first[s + 1] = first[s];
        ctx->packed_block_bytes[s] = MATMUL_TASK_ROWS * w->row_bytes;
        if (!w->data || (s < n_slots - 1 && s >= cpu_slots) ||
            !quant_packable(w->ops, w->n_in, w->n_out))
            continue;
        first[s + 1] += (w->n_out + PACK_ROWS_PER_TASK - 1) / PACK_ROWS_PER_TASK;
        size_t bytes = w->row_bytes * w->n_out, which = s % LM_COUNT;
        if (s < n_slots - 1 && (which == LM_GATE || which == LM_UP) &&
            gate_up_interleave(m, s / LM_COUNT)) {
            /* the gate's slot holds both, its last block padded to full size; the up's
             * blocks start one block in */
            ctx->packed_block_bytes[s] *= 2;
            if (which == LM_UP) {
                offset[s] = offset[s - 1] + MATMUL_TASK_ROWS * w->row_bytes;
                continue;
            }
            size_t n_blocks = (w->n_out + MATMUL_TASK_ROWS - 1) / MATMUL_TASK_ROWS;
            ok = checked_mul_size(n_blocks, ctx->packed_block_bytes[s], &bytes);
        }
        offset[s] = total;
        ok = ok && checked_add_size(total, (bytes + 63) & ~(size_t)63, &total);
    }
    if (ok && total > 0)
        ok = (ctx->packed_memory = alloc_huge(&total)) != NULL;
    if (ok && total > 0) {
        for (size_t s = 0; s < n_slots; s++)
            if (first[s + 1] > first[s])
                ctx->packed[s] = dst[s] = (char *)ctx->packed_memory + offset[s];
        pack_job job = {m, dst, ctx->packed_block_bytes, first};
        threadpool_run(ctx->pool, first[n_slots], pack_task, &job);
        for (size_t s = 0; s < n_slots; s++)
            if (dst[s]) {
                const weight *w = packed_slot_weight(m, s);
                release_file_pages(w->data, w->row_bytes * w->n_out);
            }
    }
    free(dst);
    free(first);
    free(offset);
    if (!ok)
        corral_error_set(err, "cannot allocate %zu bytes for the repacked weights", total);
    return ok;
}

/*
 * Cells per sequence of every layer, and the cache itself. A sliding layer needs the window
 * before a batch's first token plus the batch: n_swa + n_batch - 1 cells (llama.cpp keeps
 * n_swa + n_ubatch), or n_ctx if that is smaller. An encoder caches nothing: its one batch's
 * keys and values serve one layer's attention and are overwritten by the next, so all its
 * layers share the cells of one.
 */
static bool alloc_kv_cache(corral_context *ctx, bool no_sliding_window, corral_error *err)
{
    const corral_model *m = ctx->model;
    const hparams *hp = &m->hp;
    uint64_t swa_cells = (uint64_t)hp->n_swa + ctx->n_batch - 1;
    /* without sliding layers nothing slides: a window of n_swa 0 would move swa_base past
     * every batch and make no earlier prefix reusable (corral_seq_reusable) */
    bool any_sliding = false;
    for (uint32_t il = 0; il < hp->n_layer; il++)
        any_sliding = any_sliding || m->layers[il].sliding;
    ctx->swa_cells = no_sliding_window || !any_sliding || swa_cells > ctx->n_ctx
                         ? ctx->n_ctx
                         : (uint32_t)swa_cells;
    ctx->kv = calloc(hp->n_layer, sizeof *ctx->kv);
    ctx->seq_len = calloc(ctx->n_seq, sizeof *ctx->seq_len);
    ctx->swa_base = calloc(ctx->n_seq, sizeof *ctx->swa_base);
    uint32_t n_cached = m->arch->tensors & ARCH_ENCODER ? 1 : hp->n_layer;
    size_t k_bytes = 0, v_bytes = 0;
    bool ok = ctx->kv && ctx->seq_len && ctx->swa_base;
    for (uint32_t il = 0; ok && il < hp->n_layer; il++) {
        kv_layer *kv = &ctx->kv[il];
        const layer_weights *l = &m->layers[il];
        bool sliding = l->sliding;
        kv->n_cells = sliding ? ctx->swa_cells : ctx->n_ctx;
        kv->n_key_tiles = (uint32_t)(((uint64_t)kv->n_cells + KV_KEY_TILE - 1) / KV_KEY_TILE);
        kv->window = sliding && !no_sliding_window ? hp->n_swa : 0;
        kv->n_head_kv = l->n_head_kv;
        kv->key_tile_bytes = kv_key_tile_bytes(ctx->kv_type, l->head_dim_k);
        kv->value_row_bytes = kv_value_row_bytes(ctx->kv_type, l->head_dim_v);
        /* a cross-attention layer (mllama) attends to no earlier tokens: it keeps no cache */
        if (il >= n_cached || l->kv_shared || l->cross_attn)
            continue;
        /* bytes in whole tiles and rows; every layer's start stays aligned as they are */
        size_t tiles = (size_t)kv->n_key_tiles * ctx->n_seq * l->n_head_kv;
        size_t rows = (size_t)kv->n_cells * ctx->n_seq * l->n_head_kv;
        size_t layer_k, layer_v;
        ok = checked_mul_size(tiles, kv->key_tile_bytes, &layer_k) &&
             checked_mul_size(rows, kv->value_row_bytes, &layer_v) &&
             checked_add_size(k_bytes, layer_k, &k_bytes) &&
             checked_add_size(v_bytes, layer_v, &v_bytes);
    }
    if (ok) {
        /* Reserved, not committed: a cell's page comes (zeroed, a huge page where the kernel
         * has one: 4 KiB pages missed the TLB on long contexts) when a token is first written
         * there, so idle slots and the unused end of a context cost no memory. */
        ctx->k_cache = map_lazy(k_bytes, &ctx->k_mapping);
        ctx->v_cache = map_lazy(v_bytes, &ctx->v_mapping);
    }
    if (!ok || !ctx->k_cache || !ctx->v_cache) {
        corral_error_set(err, "cannot allocate the KV cache for %u tokens x %u sequences",
                         ctx->n_ctx, ctx->n_seq);
        return false;
    }
    size_t k_offset = 0, v_offset = 0;
    for (uint32_t il = 0; il < hp->n_layer; il++) {
        kv_layer *kv = &ctx->kv[il];
        if (il >= n_cached) {
            *kv = ctx->kv[0];
            continue;
        }
        if (m->layers[il].kv_shared) { /* an earlier layer's, set above */
            *kv = ctx->kv[m->layers[il].kv_source];
            continue;
        }
        if (m->layers[il].cross_attn) /* none: k and v stay NULL, never read */
            continue;
        kv->k = ctx->k_cache + k_offset;
        kv->v = ctx->v_cache + v_offset;
        k_offset += (size_t)kv->n_key_tiles * ctx->n_seq * kv->n_head_kv * kv->key_tile_bytes;
        v_offset += (size_t)kv->n_cells * ctx->n_seq * kv->n_head_kv * kv->value_row_bytes;
    }
    return true;
}

static const char *const kv_type_names[] = {
    [CORRAL_KV_F16] = "f16", [CORRAL_KV_F32] = "f32", [CORRAL_KV_Q8_0] = "q8_0",
    [CORRAL_KV_Q4_0] = "q4_0"};

bool corral_kv_type_parse(const char *name, corral_kv_type *type)
{
    for (size_t i = 0; i < sizeof kv_type_names / sizeof kv_type_names[0]; i++)
        if (name && strcasecmp(name, kv_type_names[i]) == 0) {
            *type = (corral_kv_type)i;
            return true;
        }
    return false;
}

const char *corral_kv_type_name(corral_kv_type type)
{
    assert((size_t)type < sizeof kv_type_names / sizeof kv_type_names[0]);
    return kv_type_names[type];
}

uint64_t corral_kv_type_bytes(corral_kv_type type, uint64_t n_components)
{
    return kv_value_row_bytes(type, n_components);
}

void corral_context_params_init(corral_context_params *p)
{
    *p = (corral_context_params){.n_ctx = 4096, .n_batch = 512, .n_seq = 1, .n_threads = 0,
                                 .kv_type = CORRAL_KV_F16, .no_sliding_window = false,
                                 .n_gpu_layers = 0, .gpu_device = -1};
}

/* Whether a layer of m runs a dense FFN, in the buffers the context makes for it (experts have
 * their own, moe.c): any layer of a dense model; of one with experts, its leading dense
 * layers, llama4's between its expert layers, or a dense FFN beside the experts
 * (ARCH_DENSE_AND_EXPERTS). */
static bool has_dense_ffn(const corral_model *m)
{
    if (m->hp.n_expert == 0 || (m->arch->tensors & ARCH_DENSE_AND_EXPERTS))
        return true;
    for (uint32_t il = 0; il < m->hp.n_layer; il++)
        if (m->layers[il].ffn_up.data && !m->layers[il].ffn_gate_inp.data)
            return true;
    return false;
}

/*
 * An encoder's context evaluates one whole input per call (corral_embed): its batch is its
 * context, capped at the trained length (bert has no position embeddings beyond it; ollama
 * caps num_ctx there too), one sequence, keys and values in F32 as ggml's cache-less
 * attention keeps them, and no sliding windows.
 */
static corral_context_params encoder_params(const corral_model *m, const corral_context_params *p)
{
    corral_context_params e = *p;
    if (m->hp.n_ctx_train > 0 && e.n_ctx > m->hp.n_ctx_train)
        e.n_ctx = m->hp.n_ctx_train;
    e.n_batch = e.n_ctx;
    e.n_seq = 1;
    e.kv_type = CORRAL_KV_F32;
    e.no_sliding_window = true;
    return e;
}

corral_context *corral_context_create(const corral_model *m, const corral_context_params *params,
                                      corral_error *err)
{
    const hparams *hp = &m->hp;
    corral_context_params encoder, capped;
    const corral_context_params *p = params;
    if (m->arch->tensors & ARCH_ENCODER) {
        encoder = encoder_params(m, params);
        p = &encoder;
    } else if (m->pos_embd.data && params->n_ctx > hp->n_ctx_train) {
        /* learned positions end with their table: no cell may hold a position past it */
        capped = *params;
        capped.n_ctx = hp->n_ctx_train;
        p = &capped;
        log_printf(LOG_INFO, "context of %u capped at %s's %u learned positions", params->n_ctx,
                   m->arch->name, hp->n_ctx_train);
    }
    if (p->n_ctx < 1 || p->n_seq < 1 || p->n_batch < 1 || p->n_seq > CONTEXT_MAX_SEQ ||
        p->n_ctx > (1u << 24) || p->n_batch > (1u << 16)) {
        corral_error_set(err, "invalid context size: n_ctx %u, n_seq %u, n_batch %u", p->n_ctx,
                         p->n_seq, p->n_batch);
        return NULL;
    }
    if ((unsigned)p->kv_type > CORRAL_KV_Q4_0) {
        corral_error_set(err, "invalid KV cache type %d", (int)p->kv_type);
        return NULL;
    }
    for (uint32_t il = 0; il < hp->n_layer; il++) {
        const layer_weights *l = &m->layers[il];
        if (!kv_type_fits(p->kv_type, l->head_dim_k) || !kv_type_fits(p->kv_type, l->head_dim_v)) {
            corral_error_set(err,
                             "a %s KV cache needs head dimensions that are multiples of 32 up to "
                             "8192 (this model's: %u and %u)",
                             corral_kv_type_name(p->kv_type), l->head_dim_k, l->head_dim_v);
            return NULL;
        }
    }
    corral_context *ctx = calloc(1, sizeof *ctx);
    if (!ctx) {
        corral_error_set(err, "out of memory");
        return NULL;
    }
    ctx->model = m;
    ctx->n_ctx = p->n_ctx;
    ctx->n_seq = p->n_seq;
    ctx->n_checkpoints = p->step_checkpoints ? 2 : 1;
    ctx->cpu_layers_min = p->images ? hp->n_deepstack : 0;
    ctx->image_rows = p->images ? cross_image_rows(m) : 0;
    ctx->gpu_reserve_bytes = p->gpu_reserve_bytes;
    ctx->n_batch = p->n_batch;
    ctx->kv_type = p->kv_type;
    for (uint32_t r = 0; r < m->n_rope_variants; r++)
        ctx->rope[r] = rope_params_make(m, r, p->n_ctx);
    block_geglu_prepare();
    size_t n_threads = p->n_threads > 0 ? (size_t)p->n_threads : threadpool_physical_cores();
    if (!(ctx->pool = threadpool_create(n_threads, err)))
        goto fail;

    if (!alloc_kv_cache(ctx, p->no_sliding_window, err))
        goto fail;
    /* before the repacking, which the layers on a GPU do without */
    if (p->n_gpu_layers != 0) {
        corral_error why = {0};
        /* a warning when layers were asked for by number; "as many as fit" is every load's
         * default, and on a machine without a GPU none fit as a matter of course */
        if (!(ctx->gpu = gpu_layers_create(ctx, p->gpu_device, p->n_gpu_layers, &why)))
            log_printf(p->n_gpu_layers > 0 ? LOG_WARN : LOG_INFO, "running on the CPU: %s",
                       why.message);
    }
    if (!pack_weights(ctx, err) || !moe_context_init(ctx, err) || !mla_context_init(ctx, err) ||
        !delta_net_context_init(ctx, err))
        goto fail;
    bool cross_ok;
    ctx->cross = cross_context_create(m, ctx->n_seq,
                                      ctx->gpu ? gpu_layers_first(ctx->gpu) : hp->n_layer,
                                      threadpool_size(ctx->pool), &cross_ok, err);
    if (!cross_ok)
        goto fail;

    size_t nb = ctx->n_batch;
    size_t q_width = (size_t)hp->n_head * hp->head_dim_k;
    size_t kv_k = (size_t)hp->n_head_kv * hp->head_dim_k;
    size_t kv_v = (size_t)hp->n_head_kv * hp->head_dim_v;
    size_t o_width = (size_t)hp->n_head * hp->head_dim_v;
    size_t wide = hp->n_embd > o_width ? hp->n_embd : o_width;
    bool ok = true;
    ctx->x = alloc_floats(nb * hp->n_embd, &ok);
    ctx->xn = alloc_floats(nb * wide, &ok);
    ctx->q = alloc_floats(nb * q_width, &ok);
    ctx->k = alloc_floats(nb * kv_k, &ok);
    ctx->v = alloc_floats(nb * kv_v, &ok);
    ctx->attn = alloc_floats(nb * o_width, &ok);
    size_t n_ff = has_dense_ffn(m) ? hp->n_ff : 0;
    /* qwen35's gated attention projects q and its gate here (arch_qwen35.c) */
    size_t gate_width = hp->ssm_v_heads > 0 && 2 * q_width > n_ff ? 2 * q_width : n_ff;
    /* laguna's attention output gates (ARCH_ATTN_OUT_GATE) are projected here too */
    for (uint32_t il = 0; il < hp->n_layer; il++)
        if (m->layers[il].attn_gate.n_out > gate_width)
            gate_width = m->layers[il].attn_gate.n_out;
    ctx->gate = alloc_floats(nb * gate_width, &ok);
    ctx->up = alloc_floats(nb * n_ff, &ok);
    if ((m->arch->tensors & (ARCH_PARALLEL | ARCH_FFN_NORM_OPTIONAL | ARCH_ATTN_NORM_2)) ||
        hp->n_altup) /* gemma3n: the laurel branch; jina-bert-v2: the layer's input */
        ctx->branch = alloc_floats(nb * hp->n_embd, &ok);
    else if (hp->n_expert && (m->arch->tensors & ARCH_DENSE_AND_EXPERTS)) /* the dense output and the router's input */
        ctx->branch = alloc_floats(2 * nb * hp->n_embd, &ok);
    for (uint32_t r = 0; r < m->n_rope_variants; r++)
        ctx->rope_cs[r] = alloc_floats(nb * hp->n_rot, &ok);
    /* the attention of the query heads of one KV head over all n_ctx cells, from the last
     * lane of a key tile: the most chunks a call can have (hp's head widths are the widest
     * layer's; the most query heads a KV head has, the fewest KV heads') */
    uint32_t fewest_kv_heads = hp->n_head_kv;
    for (uint32_t il = 0; il < hp->n_layer; il++)
        if (m->layers[il].n_head_kv < fewest_kv_heads)
            fewest_kv_heads = m->layers[il].n_head_kv;
    attention_shape widest_call = {.n_heads = hp->n_head / fewest_kv_heads,
                                   .n_queries = ATTENTION_GROUP_TOKENS,
                                   .n_cells = ctx->n_ctx,
                                   .head_dim_k = hp->head_dim_k,
                                   .head_dim_v = hp->head_dim_v,
                                   .first_lane = KV_KEY_TILE - 1};
    ctx->attn_scratch_floats = attention_scratch_floats(&widest_call);
    ctx->attn_scratch = alloc_floats(n_threads * ctx->attn_scratch_floats, &ok);
    widest_call.n_queries = 1; /* a token's chunks are shared among threads one token at a time */
    if (fewest_kv_heads < n_threads) {
        ctx->attn_max_chunks = attention_chunks(&widest_call);
        ctx->attn_parts = alloc_floats(n_threads * ctx->attn_max_chunks *
                                           attention_state_floats(&widest_call), &ok);
    }
    ctx->tok_seq = calloc(nb, sizeof *ctx->tok_seq);
    ctx->tok_pos = calloc(nb, sizeof *ctx->tok_pos);
    ctx->tok_last = calloc(nb, sizeof *ctx->tok_last);
    if (m->hp.mrope_sections[0] + m->hp.mrope_sections[1] + m->hp.mrope_sections[2] +
        m->hp.mrope_sections[3]) {
        ctx->mrope_next = calloc((size_t)ctx->n_seq * ctx->n_ctx, sizeof *ctx->mrope_next);
        ctx->mrope_cs = alloc_floats(4 * (size_t)hp->n_rot, &ok);
        ok = ok && ctx->mrope_next;
    }
    ctx->attn_groups = calloc(nb + 1, sizeof *ctx->attn_groups);
    if (hp->n_embd_per_layer) {
        ctx->tok_id = calloc(nb, sizeof *ctx->tok_id);
        ctx->per_layer_in = alloc_floats(nb * hp->n_layer * hp->n_embd_per_layer, &ok);
        /* also one token's row of per_layer_token_embd, dequantized, before the first layer */
        size_t all = (size_t)hp->n_layer * hp->n_embd_per_layer;
        ctx->per_layer_gate = alloc_floats(nb * hp->n_embd_per_layer > all ? nb * hp->n_embd_per_layer : all, &ok);
        ok = ok && ctx->tok_id;
    }
    if (hp->n_altup) {
        size_t streams = (size_t)hp->n_altup * nb * hp->n_embd;
        ctx->altup = alloc_floats(streams, &ok);
        ctx->altup_pred = alloc_floats(streams, &ok);
        ctx->altup_coef = alloc_floats(nb * (hp->n_altup + (size_t)hp->n_altup * hp->n_altup), &ok);
        ctx->laurel = alloc_floats(nb * hp->laurel_rank, &ok);
    }
    size_t act_bytes = max_act_bytes(m, nb);
    ctx->act = act_bytes ? malloc(act_bytes) : NULL;
    /* the widest input of any product: gemma3n's per-layer inputs and laurel rank, and the
     * latent of latent experts, may pass the others */
    size_t widest = n_ff > wide ? n_ff : wide;
    widest = hp->n_embd_per_layer > widest ? hp->n_embd_per_layer : widest;
    widest = hp->laurel_rank > widest ? hp->laurel_rank : widest;
    widest = hp->moe_latent > widest ? hp->moe_latent : widest;
    ctx->act_sums = alloc_floats(nb * quant_packed_sums_bytes(widest) / sizeof(float), &ok);
    if (ok && !alloc_thread_acts(ctx, n_threads, widest))
        ok = false;
    if (!ok || !ctx->act || !ctx->tok_seq || !ctx->tok_pos || !ctx->tok_last ||
        !ctx->attn_groups) {
        corral_error_set(err, "cannot allocate activations for a batch of %u tokens", ctx->n_batch);
        goto fail;
    }
    return ctx;
fail:
    corral_context_free(ctx);
    return NULL;
}

void corral_context_free(corral_context *ctx)
{
    if (!ctx)
        return;
    moe_context_free(ctx->moe);
    mla_context_free(ctx->mla);
    delta_net_context_free(ctx->delta);
    cross_context_free(ctx->cross);
    gpu_layers_free(ctx->gpu);
    threadpool_free(ctx->pool);
    free(ctx->kv);
    unmap_lazy(&ctx->k_mapping);
    unmap_lazy(&ctx->v_mapping);
    free(ctx->seq_len);
    free(ctx->swa_base);
    float *buffers[] = {ctx->x,    ctx->xn,         ctx->q,          ctx->k,
                        ctx->v,    ctx->attn,       ctx->gate,       ctx->up,
                        ctx->attn_scratch, ctx->attn_parts, ctx->rope_cs[0], ctx->rope_cs[1],
                        ctx->logits,       ctx->branch};
    for (size_t i = 0; i < sizeof buffers / sizeof buffers[0]; i++)
        free(buffers[i]);
    free(ctx->act);
    free(ctx->act_sums);
    free(ctx->thread_acts);
    free(ctx->thread_act_memory);
    free(ctx->packed);
    free(ctx->packed_block_bytes);
    free(ctx->packed_memory);
    free(ctx->tok_seq);
    free(ctx->tok_pos);
    free(ctx->tok_last);
    free(ctx->tok_id);
    free(ctx->per_layer_in);
    free(ctx->per_layer_gate);
    free(ctx->altup);
    free(ctx->altup_pred);
    free(ctx->altup_coef);
    free(ctx->laurel);
    free(ctx->mrope_next);
    free(ctx->mrope_cs);
    free(ctx->attn_groups);
    free(ctx->logit_row);
    free(ctx);
}

/* ---- decode ---- */

static bool reserve_outputs(corral_context *ctx, size_t n_batch_tokens, size_t n_rows,
                            corral_error *err)
{
    size_t n_vocab = ctx->model->hp.n_vocab, bytes;
    if (n_rows > ctx->logits_cap_rows) {
        float *grown = NULL;
        if (checked_mul_size(n_rows, n_vocab * sizeof(float), &bytes))
            grown = realloc(ctx->logits, bytes);
        if (!grown) {
            corral_error_set(err, "cannot allocate logits for %zu tokens", n_rows);
            return false;
        }
        ctx->logits = grown;
        ctx->logits_cap_rows = n_rows;
    }
    if (n_batch_tokens > ctx->logit_row_cap) {
        int32_t *grown = realloc(ctx->logit_row, n_batch_tokens * sizeof *grown);
        if (!grown) {
            corral_error_set(err, "out of memory");
            return false;
        }
        ctx->logit_row = grown;
        ctx->logit_row_cap = n_batch_tokens;
    }
    return true;
}

static bool wants_logits(const corral_batch *batch, size_t i)
{
    return batch->logits ? batch->logits[i] : i + 1 == batch->n_tokens;
}

/*
 * Before a chunk's keys are stored: on sliding layers, make each sequence's cells hold the
 * window before its first token in the chunk plus all its tokens, dropping older positions.
 * Positions of one sequence rise in batch order, and the cells hold [base, first).
 */
static void slide_windows(corral_context *ctx)
{
    if (ctx->swa_cells == ctx->n_ctx)
        return;
    uint32_t first[CONTEXT_MAX_SEQ], end[CONTEXT_MAX_SEQ];
    bool present[CONTEXT_MAX_SEQ] = {false};
    for (size_t t = 0; t < ctx->n_tokens; t++) {
        uint32_t s = ctx->tok_seq[t];
        if (!present[s])
            first[s] = ctx->tok_pos[t];
        present[s] = true;
        end[s] = ctx->tok_pos[t] + 1;
    }
    const corral_model *m = ctx->model;
    /* the device's layers follow when gpu_forward sees the new bases */
    uint32_t n_cpu_layers = ctx->gpu ? gpu_layers_first(ctx->gpu) : m->hp.n_layer;
    for (uint32_t s = 0; s < ctx->n_seq; s++) {
        uint32_t base = ctx->swa_base[s];
        if (!present[s] || end[s] - base <= ctx->swa_cells)
            continue;
        /* end - first <= n_batch, so this is above base and leaves room for the chunk */
        uint32_t new_base = first[s] - (m->hp.n_swa - 1);
        uint32_t n_move = first[s] - new_base, from = new_base - base;
        for (uint32_t il = 0; il < n_cpu_layers; il++) {
            if (!m->layers[il].sliding || m->layers[il].kv_shared)
                continue;
            kv_move_cells(ctx, il, s, 0, from, n_move);
        }
        ctx->swa_base[s] = new_base;
    }
}

/* M-RoPE's cos/sin row for a token at rotary positions (t, h, w) and 0: pair i from the
 * cache of the position its section names, as ggml's multi-section RoPE does; interleaved
 * (qwen3vl), sector s takes t, h or w by s % 3 while s is within 3 times that section's
 * size, else the 4th. */
static void mrope_cache(corral_context *ctx, const rope_params *rope, const uint32_t pos[3],
                        float *cos_sin)
{
    const hparams *hp = &ctx->model->hp;
    const uint32_t *sec = hp->mrope_sections;
    uint32_t n_sect = sec[0] + sec[1] + sec[2] + sec[3];
    for (int p = 0; p < 4; p++)
        rope_cache(rope, p < 3 ? (float)pos[p] : 0.0f, ctx->mrope_cs + p * hp->n_rot);
    for (uint32_t i = 0; i < hp->n_rot / 2; i++) {
        uint32_t sector = i % n_sect;
        int p;
        if (hp->mrope_interleaved)
            p = sector < 3 * sec[sector % 3] ? (int)(sector % 3) : 3;
        else
            p = sector < sec[0]                            ? 0
                : sector < sec[0] + sec[1]                 ? 1
                : sector < sec[0] + sec[1] + sec[2]        ? 2
                                                           : 3;
        cos_sin[2 * i] = ctx->mrope_cs[p * hp->n_rot + 2 * i];
        cos_sin[2 * i + 1] = ctx->mrope_cs[p * hp->n_rot + 2 * i + 1];
    }
}

/* What a batch of an image's tokens carries instead of ids (corral_decode_image). */
typedef struct image_rows {
    /* a row per token, used as it is: n_embd values, then n_embd per deepstack layer */
    const float *embd;
    const uint32_t *rope; /* M-RoPE models: per token (t, h, w); else NULL */
    bool causal;          /* a clip's rows: causal whatever the family does for images */
} image_rows;

static void embed_tokens(corral_context *ctx, const corral_batch *batch, size_t begin,
                         const uint32_t *positions, const image_rows *image)
{
    const corral_model *m = ctx->model;
    const hparams *hp = &m->hp;
    size_t E = hp->n_embd;
    ctx->bidirectional = image && !image->causal && hp->image_bidirectional;
    for (size_t t = 0; t < ctx->n_tokens; t++) {
        corral_token id = batch->tokens[begin + t];
        if (ctx->tok_id)
            ctx->tok_id[t] = image ? 0 : id;
        ctx->tok_seq[t] = batch->seq ? (uint32_t)batch->seq[begin + t] : 0;
        ctx->tok_pos[t] = positions[begin + t];
        ctx->tok_last[t] = ctx->bidirectional ? positions[begin + ctx->n_tokens - 1]
                                              : ctx->tok_pos[t];
        float *x = ctx->x + t * E;
        if (image) {
            memcpy(x, image->embd + (begin + t) * E * (1 + hp->n_deepstack), E * sizeof *x);
        } else {
            const uint8_t *row =
                (const uint8_t *)m->tok_embd.data + (size_t)id * m->tok_embd.row_bytes;
            m->tok_embd.ops->dequantize(row, x, E);
            if (hp->embd_scale != 1.0f)
                for (size_t i = 0; i < E; i++)
                    x[i] *= hp->embd_scale;
        }
        if (m->pos_embd.data) {
            /* the position's learned row (starcoder): the context is capped at the table's
             * rows, so tok_pos < n_ctx is one of them; xn is free until the layers run */
            float *row = ctx->xn + t * E;
            m->pos_embd.ops->dequantize((const uint8_t *)m->pos_embd.data +
                                            (size_t)ctx->tok_pos[t] * m->pos_embd.row_bytes,
                                        row, E);
            for (size_t i = 0; i < E; i++)
                x[i] += row[i];
        }
        for (uint32_t r = 0; r < m->n_rope_variants; r++) {
            float *cs = ctx->rope_cs[r] + t * hp->n_rot;
            if (ctx->mrope_next) {
                uint32_t seq = ctx->tok_seq[t], cell = ctx->tok_pos[t];
                uint32_t p = cell ? ctx->mrope_next[(size_t)seq * ctx->n_ctx + cell - 1] : 0;
                uint32_t text[3] = {p, p, p};
                mrope_cache(ctx, &ctx->rope[r], image ? image->rope + 3 * (begin + t) : text, cs);
            } else {
                rope_cache(&ctx->rope[r], (float)ctx->tok_pos[t], cs);
            }
        }
    }
}

/* Run tokens [begin, begin + n) of batch; their positions are already assigned. False
 * (err set) only when the GPU's submission fails. */
static bool forward_chunk(corral_context *ctx, const corral_batch *batch, size_t begin, size_t n,
                          const uint32_t *positions, const image_rows *image, corral_error *err)
{
    const corral_model *m = ctx->model;
    const hparams *hp = &m->hp;
    size_t E = hp->n_embd;
    ctx->n_tokens = n;
    embed_tokens(ctx, batch, begin, positions, image);
    slide_windows(ctx);
    uint32_t n_cpu_layers = ctx->gpu ? gpu_layers_first(ctx->gpu) : hp->n_layer;
    size_t row = E * (1 + (size_t)hp->n_deepstack);
    for (uint32_t il = 0; il < n_cpu_layers; il++) {
        m->arch->layer(ctx, il);
        /* deepstack: layer il's output takes the image token's row il + 1 (corral_decode_image
         * keeps these layers on the CPU) */
        for (size_t t = 0; image && il < hp->n_deepstack && t < n; t++) {
            const float *ds = image->embd + (begin + t) * row + (il + 1) * E;
            float *x = ctx->x + t * E;
            for (size_t i = 0; i < E; i++)
                x[i] += ds[i];
        }
    }
    bool logits_done = false;
    if (ctx->gpu && !gpu_forward(ctx->gpu, ctx, begin, &logits_done, err))
        return false;
    if (logits_done)
        return true;

    /* logits only for the tokens that asked, compacted into xn */
    size_t n_out = 0;
    for (size_t t = 0; t < n; t++) {
        if (ctx->logit_row[begin + t] < 0)
            continue;
        if (m->arch->tensors & ARCH_LAYER_NORM)
            block_layernorm(ctx->x + t * E, m->output_norm.data, m->output_norm_b.data, E,
                            hp->norm_eps, ctx->xn + n_out * E);
        else
            block_rmsnorm(ctx->x + t * E, m->output_norm.data, E, hp->norm_eps,
                          ctx->xn + n_out * E);
        n_out++;
    }
    if (n_out == 0)
        return true;
    /* rows are assigned in batch order, so this chunk's first output row is known */
    size_t first_row = 0;
    for (size_t t = 0; t < n; t++)
        if (ctx->logit_row[begin + t] >= 0) {
            first_row = (size_t)ctx->logit_row[begin + t];
            break;
        }
    float *logits = ctx->logits + first_row * hp->n_vocab;
    size_t output_slot = (size_t)hp->n_layer * LM_COUNT;
    const matrix_product output = {&m->output, ctx->packed[output_slot],
                                   ctx->packed_block_bytes[output_slot],
                                   logits};
    forward_matmul(ctx, &output, 1, ctx->xn, n_out);
    if (m->output_b.data)
        for (size_t t = 0; t < n_out; t++)
            for (size_t i = 0; i < hp->n_vocab; i++)
                logits[t * hp->n_vocab + i] += ((const float *)m->output_b.data)[i];
    if (hp->logit_mult != 1.0f)
        for (size_t i = 0; i < n_out * hp->n_vocab; i++)
            logits[i] *= hp->logit_mult;
    if (hp->final_softcap > 0.0f)
        block_softcap(logits, n_out * hp->n_vocab, hp->final_softcap);
    return true;
}

/* Record the rotary position after a cell of an M-RoPE model: the text token there took the
 * one after its predecessor's; an image's cells take `image_next` (0: not an image). */
static void mrope_record(corral_context *ctx, uint32_t seq, uint32_t cell, uint32_t image_next)
{
    uint32_t *next = ctx->mrope_next + (size_t)seq * ctx->n_ctx;
    next[cell] = image_next ? image_next : (cell ? next[cell - 1] : 0) + 1;
}

/* corral_decode, and with image (its rows in place of the ids) corral_decode_image's batch;
 * image_next: what mrope_record takes for its cells. */
static bool decode_batch(corral_context *ctx, const corral_batch *batch, const image_rows *image,
                         uint32_t image_next, corral_error *err)
{
    size_t n = batch->n_tokens;
    if (ctx->model->arch->tensors & ARCH_ENCODER) {
        corral_error_set(err, "%s is an embedding model: it has no logits to decode (see "
                         "corral_embed)", ctx->model->arch->name);
        return false;
    }
    if (n == 0) {
        corral_error_set(err, "empty batch");
        return false;
    }
    uint32_t *positions = malloc(n * sizeof *positions);
    uint32_t *grow = calloc(ctx->n_seq, sizeof *grow);
    size_t n_rows = 0;
    bool ok = positions && grow;
    if (!ok)
        corral_error_set(err, "out of memory");
    for (size_t i = 0; i < n && ok; i++) {
        corral_token id = batch->tokens[i];
        int32_t seq = batch->seq ? batch->seq[i] : 0;
        if (id < 0 || (uint32_t)id >= ctx->model->hp.n_vocab) {
            corral_error_set(err, "token %d at batch index %zu is outside the vocabulary (%u tokens)",
                             id, i, ctx->model->hp.n_vocab);
            ok = false;
        } else if (seq < 0 || (uint32_t)seq >= ctx->n_seq) {
            corral_error_set(err, "sequence %d at batch index %zu does not exist (%u sequences)",
                             seq, i, ctx->n_seq);
            ok = false;
        } else if (ctx->seq_len[seq] + grow[seq] >= ctx->n_ctx) {
            corral_error_set(err, "context full: sequence %d already holds %u of %u tokens", seq,
                             ctx->seq_len[seq] + grow[seq], ctx->n_ctx);
            ok = false;
        } else {
            positions[i] = ctx->seq_len[seq] + grow[seq]++;
            n_rows += wants_logits(batch, i);
            if (ctx->mrope_next)
                mrope_record(ctx, (uint32_t)seq, positions[i], image ? image_next : 0);
        }
    }
    ok = ok && reserve_outputs(ctx, n, n_rows, err);
    if (ok) {
        size_t row = 0;
        for (size_t i = 0; i < n; i++)
            ctx->logit_row[i] = wants_logits(batch, i) ? (int32_t)row++ : -1;
        for (size_t begin = 0; begin < n && ok; begin += ctx->n_batch) {
            size_t chunk = n - begin < ctx->n_batch ? n - begin : ctx->n_batch;
            ok = forward_chunk(ctx, batch, begin, chunk, positions, image, err);
        }
    }
    if (ok) {
        for (uint32_t s = 0; s < ctx->n_seq; s++)
            ctx->seq_len[s] += grow[s];
        ctx->n_last_batch = n;
    }
    free(positions);
    free(grow);
    return ok;
}

bool corral_decode(corral_context *ctx, const corral_batch *batch, corral_error *err)
{
    return decode_batch(ctx, batch, NULL, 0, err);
}

/*
 * mllama's image: one token in the sequence (the image token's row of token_embd) and, for
 * the cross-attention layers, its states, image->n_embd / n_embd rows of the text model's
 * width, the first n_attended of them the tokens after it attend to.
 */
static bool decode_cross_image(corral_context *ctx, int32_t seq, const corral_image_embd *image,
                               corral_error *err)
{
    const corral_model *m = ctx->model;
    const hparams *hp = &m->hp;
    uint32_t n_rows = image->n_embd / hp->n_embd;
    if (image->n_tokens != 1 || image->n_embd % hp->n_embd != 0 || n_rows == 0 ||
        n_rows > CROSS_MAX_ROWS || image->n_attended == 0 || image->n_attended > n_rows) {
        corral_error_set(err, "an image of %zu tokens of %u values (%u attended) does not fit "
                         "%s, which takes one token of its states' rows of %u values",
                         image->n_tokens, image->n_embd, image->n_attended, m->arch->name,
                         hp->n_embd);
        return false;
    }
    if (!m->image_token) {
        corral_error_set(err, "%s: the file has no image token (<|image|>) past its vocabulary",
                         m->arch->name);
        return false;
    }
    uint32_t at = ctx->seq_len[seq];
    if (at + 1 >= ctx->n_ctx) {
        corral_error_set(err, "context full: sequence %d already holds %u of %u tokens", seq, at,
                         ctx->n_ctx);
        return false;
    }
    float *row = malloc(hp->n_embd * sizeof *row);
    if (!row) {
        corral_error_set(err, "out of memory");
        return false;
    }
    m->tok_embd.ops->dequantize((const uint8_t *)m->tok_embd.data +
                                    (size_t)m->image_token * m->tok_embd.row_bytes,
                                row, hp->n_embd);
    corral_token id = 0; /* any valid id: the row replaces it */
    corral_batch batch = {.n_tokens = 1, .tokens = &id, .seq = &seq};
    image_rows rows = {row, NULL, false};
    bool ok = cross_seq_set_image(ctx, (uint32_t)seq, image->data, n_rows, image->n_attended,
                                  at, err) &&
              decode_batch(ctx, &batch, &rows, 0, err);
    if (!ok)
        cross_seq_truncate(ctx->cross, (uint32_t)seq, at);
    free(row);
    return ok;
}

bool corral_decode_image(corral_context *ctx, int32_t seq, const corral_image_embd *image,
                         corral_error *err)
{
    const hparams *hp = &ctx->model->hp;
    if (ctx->model->arch->tensors & ARCH_ENCODER) {
        corral_error_set(err, "%s is an embedding model: it takes no images", ctx->model->arch->name);
        return false;
    }
    if (seq < 0 || (uint32_t)seq >= ctx->n_seq) {
        corral_error_set(err, "sequence %d does not exist (%u sequences)", seq, ctx->n_seq);
        return false;
    }
    if (ctx->cross)
        return decode_cross_image(ctx, seq, image, err);
    size_t n = image->n_tokens;
    uint64_t width = (uint64_t)hp->n_embd * (1 + (uint64_t)hp->n_deepstack);
    if (image->n_embd != width || n == 0 || (uint64_t)image->nx * image->ny != n) {
        corral_error_set(err, "an image of %zu embeddings of %u values in a %u x %u grid does "
                         "not fit this model (%llu values)", n, image->n_embd, image->nx,
                         image->ny, (unsigned long long)width);
        return false;
    }
    /* the deepstack rows go into the first layers' outputs on the CPU; the GPU's layers
     * take none */
    if (hp->n_deepstack && ctx->gpu && gpu_layers_first(ctx->gpu) < hp->n_deepstack) {
        corral_error_set(err, "%s takes an image's deepstack features in its first %u layers, "
                         "which run on the GPU here (%s) and cannot take them: offload at most "
                         "%u of its %u layers to take images", ctx->model->arch->name,
                         hp->n_deepstack, gpu_layers_device(ctx->gpu),
                         hp->n_layer - hp->n_deepstack, hp->n_layer);
        return false;
    }
    /* tokens that see each other both ways must be in one chunk; causal ones may span chunks,
     * their positions assigned up front */
    if (hp->image_bidirectional && !image->causal && n > ctx->n_batch) {
        corral_error_set(err, "an image of %zu tokens is larger than the batch (%u tokens)", n,
                         ctx->n_batch);
        return false;
    }
    corral_token *ids = calloc(n, sizeof *ids); /* any valid id: the rows replace them */
    int32_t *seqs = malloc(n * sizeof *seqs);
    uint32_t *rope = ctx->mrope_next ? malloc(3 * n * sizeof *rope) : NULL;
    if (!ids || !seqs || (ctx->mrope_next && !rope)) {
        free(ids);
        free(seqs);
        free(rope);
        corral_error_set(err, "out of memory");
        return false;
    }
    uint32_t image_next = 0;
    uint32_t cell = ctx->seq_len[seq];
    if (rope) {
        /* token (x, y) of the grid at (p0, p0 + y, p0 + x); the text after it goes on at
         * p0 + max(nx, ny) */
        uint32_t p0 = cell ? ctx->mrope_next[(size_t)seq * ctx->n_ctx + cell - 1] : 0;
        for (size_t i = 0; i < n; i++) {
            rope[3 * i] = p0;
            rope[3 * i + 1] = p0 + (uint32_t)(i / image->nx);
            rope[3 * i + 2] = p0 + (uint32_t)(i % image->nx);
        }
        image_next = p0 + (image->nx > image->ny ? image->nx : image->ny);
    }
    for (size_t i = 0; i < n; i++)
        seqs[i] = seq;
    corral_batch batch = {.n_tokens = n, .tokens = ids, .seq = seqs};
    image_rows rows = {image->data, rope, image->causal};
    bool ok = decode_batch(ctx, &batch, &rows, image_next, err);
    free(ids);
    free(seqs);
    free(rope);
    return ok;
}

const float *corral_get_logits(const corral_context *ctx, size_t i)
{
    if (i >= ctx->n_last_batch || ctx->logit_row[i] < 0)
        return NULL;
    return ctx->logits + (size_t)ctx->logit_row[i] * ctx->model->hp.n_vocab;
}

/* ---- sequence operations ---- */

uint32_t corral_seq_length(const corral_context *ctx, int32_t seq)
{
    return seq >= 0 && (uint32_t)seq < ctx->n_seq ? ctx->seq_len[seq] : 0;
}

uint32_t corral_context_gpu_layers(const corral_context *ctx)
{
    return ctx->gpu ? ctx->model->hp.n_layer - gpu_layers_first(ctx->gpu) : 0;
}

const char *corral_context_gpu_device(const corral_context *ctx)
{
    return ctx->gpu ? gpu_layers_device(ctx->gpu) : "";
}

uint64_t corral_context_gpu_bytes(const corral_context *ctx)
{
    return ctx->gpu ? gpu_layers_bytes(ctx->gpu) : 0;
}

uint32_t corral_context_n_ctx(const corral_context *ctx)
{
    return ctx->n_ctx;
}

bool corral_context_recurrent(const corral_context *ctx)
{
    return ctx->delta != NULL;
}

void corral_seq_truncate(corral_context *ctx, int32_t seq, uint32_t n_keep)
{
    if (seq < 0 || (uint32_t)seq >= ctx->n_seq || n_keep >= ctx->seq_len[seq])
        return;
    if (ctx->delta) /* a recurrent state goes back to a checkpoint, or to nothing */
        n_keep = delta_net_seq_restore(ctx, (uint32_t)seq, n_keep);
    ctx->seq_len[seq] = n_keep;
    cross_seq_truncate(ctx->cross, (uint32_t)seq, n_keep);
    /* sliding layers that no longer hold any kept position restart at the next one */
    if (ctx->swa_base[seq] > n_keep)
        ctx->swa_base[seq] = n_keep;
}

bool corral_seq_checkpoint(corral_context *ctx, int32_t seq, corral_checkpoint kind)
{
    if (seq < 0 || (uint32_t)seq >= ctx->n_seq || (uint32_t)kind >= DELTA_NET_CHECKPOINTS)
        return false;
    if (!ctx->delta)
        return true;
    if ((uint32_t)kind >= ctx->delta->n_checkpoints)
        return false;
    if (ctx->seq_len[seq] > 0)
        delta_net_seq_checkpoint(ctx, (uint32_t)seq, kind, ctx->seq_len[seq]);
    return true;
}

uint32_t corral_seq_reusable(const corral_context *ctx, int32_t seq, uint32_t n_keep)
{
    if (seq < 0 || (uint32_t)seq >= ctx->n_seq)
        return 0;
    n_keep = n_keep < ctx->seq_len[seq] ? n_keep : ctx->seq_len[seq];
    if (ctx->delta) /* a recurrent state goes on from its end, a checkpoint, or nothing */
        return n_keep == ctx->seq_len[seq]
                   ? n_keep
                   : delta_net_seq_checkpoint_len(ctx->delta, (uint32_t)seq, n_keep);
    uint32_t window = ctx->model->hp.n_swa;
    if (ctx->swa_cells == ctx->n_ctx || n_keep < window)
        return ctx->swa_base[seq] == 0 || n_keep == 0 ? n_keep : 0;
    /* the next token at n_keep sees [n_keep - window + 1, n_keep) */
    return n_keep - window + 1 >= ctx->swa_base[seq] ? n_keep : 0;
}

/* Re-rotate the cached keys of one cell by delta positions (RoPE angles add). */
static void rerotate_key(corral_context *ctx, const rope_params *rope, const float *cos_sin,
                         uint32_t layer, uint32_t seq, uint32_t cell)
{
    const layer_weights *l = &ctx->model->layers[layer];
    float *row = ctx->k; /* scratch: no decode runs during a shift */
    kv_read_key(ctx, layer, seq, cell, row);
    rope_apply(rope, cos_sin, row, l->n_head_kv, l->head_dim_k);
    kv_write_key(ctx, layer, seq, cell, row);
}

/*
 * One layer of a shift: the positions from `from` on (old numbering) move down by n_discard.
 * The cells hold [base, len) before and start at new_base after.
 */
static void shift_layer(corral_context *ctx, uint32_t il, uint32_t seq, uint32_t base,
                        uint32_t new_base, uint32_t from, uint32_t len, uint32_t n_discard)
{
    uint32_t n_move = len - from, src = from - base, dst = from - n_discard - new_base;
    kv_move_cells(ctx, il, seq, dst, src, n_move);
    if (ctx->model->layers[il].no_rope)
        return; /* keys without positions: nothing to turn */
    uint32_t variant = ctx->model->layers[il].rope_variant;
    for (uint32_t c = dst; c < dst + n_move; c++)
        rerotate_key(ctx, &ctx->rope[variant], ctx->rope_cs[variant], il, seq, c);
}

bool corral_seq_shift(corral_context *ctx, int32_t seq, uint32_t n_keep, uint32_t n_discard,
                      corral_error *err)
{
    if (seq < 0 || (uint32_t)seq >= ctx->n_seq) {
        corral_error_set(err, "sequence %d does not exist", seq);
        return false;
    }
    if (ctx->delta) {
        corral_error_set(err, "%s keeps a recurrent state per sequence, which cannot be shifted",
                         ctx->model->arch->name);
        return false;
    }
    uint32_t len = ctx->seq_len[seq];
    if (n_discard == 0 || n_keep > len || n_discard > len - n_keep) {
        corral_error_set(err, "cannot discard %u tokens after %u of %u", n_discard, n_keep, len);
        return false;
    }
    const corral_model *m = ctx->model;
    /* The kept cells after the discarded ones move back by as many positions as the
     * discarded cells spanned: n_discard, or with M-RoPE what their rotary positions span (an
     * image spans its grid's longer side). Every section of an M-RoPE position moves by the
     * same amount, so the keys turn as plain RoPE's do. */
    uint32_t *next = ctx->mrope_next ? ctx->mrope_next + (size_t)seq * ctx->n_ctx : NULL;
    uint32_t span = n_discard;
    if (next)
        span = next[n_keep + n_discard - 1] - (n_keep ? next[n_keep - 1] : 0);
    for (uint32_t r = 0; r < m->n_rope_variants; r++) { /* scratch: no decode runs now */
        /* a pure turn: YaRN's magnitude is already in the cached keys */
        rope_params turn = ctx->rope[r];
        turn.mscale = 1.0f;
        rope_cache(&turn, -(float)span, ctx->rope_cs[r]);
    }
    /* sliding layers hold [swa_base, len): what survives of it stays contiguous */
    uint32_t end_discard = n_keep + n_discard, swa_base = ctx->swa_base[seq];
    uint32_t new_swa_base = swa_base < n_keep         ? swa_base
                            : swa_base >= end_discard ? swa_base - n_discard
                                                      : n_keep;
    uint32_t n_cpu_layers = ctx->gpu ? gpu_layers_first(ctx->gpu) : m->hp.n_layer;
    for (uint32_t il = 0; il < n_cpu_layers; il++) {
        if (m->layers[il].kv_shared)
            continue; /* its cells are its source's, shifted there */
        if (m->layers[il].cross_attn)
            continue; /* no cache */
        if (m->layers[il].sliding)
            shift_layer(ctx, il, (uint32_t)seq, swa_base, new_swa_base,
                        swa_base > end_discard ? swa_base : end_discard, len, n_discard);
        else
            shift_layer(ctx, il, (uint32_t)seq, 0, 0, end_discard, len, n_discard);
    }
    if (ctx->gpu && !gpu_seq_shift(ctx->gpu, ctx, (uint32_t)seq, end_discard, len, n_discard, err))
        return false;
    ctx->swa_base[seq] = new_swa_base;
    ctx->seq_len[seq] = len - n_discard;
    cross_seq_shift(ctx->cross, (uint32_t)seq, n_keep, n_discard);
    if (next) {
        memmove(next + n_keep, next + n_keep + n_discard,
                (size_t)(len - n_keep - n_discard) * sizeof *next);
        for (uint32_t c = n_keep; c < len - n_discard; c++)
            next[c] -= span;
    }
    return true;
}
