/*
 * LoRA adapters (lora.h): reading a GGUF adapter, checking it against the model it is
 * attached to with the rules llama.cpp applies (an adapter of the model's architecture,
 * tensors in `NAME.lora_a` / `NAME.lora_b` pairs whose shapes fit the model's NAME), and
 * adding B (A x) to the products of the adapted weights.
 */
#include "lora.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "quant_half.h"
#include "tensor_type.h"
#include "util/checked.h"

/* What one corral_model_add_lora attached: its terms and the F32 copies they point into. */
struct lora_adapter {
    lora_term *terms;
    size_t n_terms;
    float *data;
    struct lora_adapter *next;
};

/* ---- the products ---- */

typedef struct lora_job {
    const matrix_product *product;
    const float *x;
} lora_job;

/* Eight partial sums so the compiler can keep them in vector lanes. */
static float dot_f32(const float *a, const float *b, size_t n)
{
    float s[8] = {0};
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (size_t j = 0; j < 8; j++)
            s[j] += a[i + j] * b[i + j];
    for (; i < n; i++)
        s[0] += a[i] * b[i];
    return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

/* One token's row: y += factor * B (A x) for every term of the product's weight. */
static void lora_task(void *arg, size_t t, size_t thread)
{
    (void)thread;
    const lora_job *job = arg;
    const weight *w = job->product->w;
    const float *x = job->x + t * w->n_in;
    float *y = job->product->y + t * w->n_out;
    float ax[LORA_MAX_RANK];
    for (const lora_term *term = w->lora; term; term = term->next) {
        for (size_t k = 0; k < term->rank; k++)
            ax[k] = dot_f32(term->a + k * w->n_in, x, w->n_in);
        for (size_t i = 0; i < w->n_out; i++)
            y[i] += term->factor * dot_f32(term->b + i * term->rank, ax, term->rank);
    }
}

void lora_apply(corral_context *ctx, const matrix_product *products, size_t n_products,
                const float *x, size_t n_tokens)
{
    for (size_t p = 0; p < n_products; p++) {
        if (!products[p].w->lora)
            continue;
        lora_job job = {&products[p], x};
        threadpool_run(ctx->pool, n_tokens, lora_task, &job);
    }
}

/* ---- loading ---- */

static bool str_is(gguf_str s, const char *want)
{
    return s.size == strlen(want) && memcmp(s.data, want, s.size) == 0;
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* general.type, adapter.type and general.architecture. */
static bool check_header(const gguf_file *f, const corral_model *m, float *alpha,
                         corral_error *err)
{
    const char *path = gguf_path(f);
    gguf_str type = {"", 0}, arch = {"", 0};
    if (!gguf_get_str_opt(f, "general.type", &type, err))
        return false;
    if (!str_is(type, "adapter")) {
        corral_error_set(err, "%s is not an adapter (its general.type is '%.*s', not 'adapter')",
                         path, (int)(type.size < 64 ? type.size : 64), type.data);
        return false;
    }
    type = (gguf_str){"", 0};
    if (!gguf_get_str_opt(f, "adapter.type", &type, err))
        return false;
    if (!str_is(type, "lora")) {
        corral_error_set(err, "%s: adapter type '%.*s' is not supported (only 'lora' is)", path,
                         (int)(type.size < 64 ? type.size : 64), type.data);
        return false;
    }
    if (!gguf_get_str(f, "general.architecture", &arch, err))
        return false;
    if (!str_is(arch, m->arch->name)) {
        corral_error_set(err, "%s: the adapter is for architecture '%.*s', the model is '%s'", path,
                         (int)(arch.size < 64 ? arch.size : 64), arch.data, m->arch->name);
        return false;
    }
    *alpha = 0.0f;
    return gguf_get_f32_opt(f, "adapter.lora.alpha", alpha, err);
}

/* A slice of a model weight an adapter's NAME adapts: B's rows [row, row + w->n_out). */
typedef struct lora_target {
    weight *w;
    size_t row;
} lora_target;

/* The weights (slices of a fused one) that base tensor `name` became at load; returns how
 * many (0: not a matrix adapters apply to). */
static size_t find_targets(corral_model *m, const char *name, lora_target out[3])
{
    if (strcmp(name, "output.weight") == 0 && m->output.data != m->tok_embd.data) {
        out[0] = (lora_target){&m->output, 0};
        return 1;
    }
    unsigned il;
    int used = 0;
    char suffix[GGUF_MAX_NAME_BYTES + 1];
    if (sscanf(name, "blk.%u.%63[a-z_].weight%n", &il, suffix, &used) != 2 ||
        (size_t)used != strlen(name) || il >= m->hp.n_layer)
        return 0;
    layer_weights *l = &m->layers[il];
    bool fused_qkv = m->arch->tensors & ARCH_FUSED_QKV;
    bool fused_gate_up = m->arch->tensors & ARCH_FUSED_GATE_UP;
    struct {
        const char *suffix;
        weight *w;
        bool applies;
    } plain[] = {{"attn_q", &l->wq, !fused_qkv},     {"attn_k", &l->wk, !fused_qkv},
                 {"attn_v", &l->wv, !fused_qkv},     {"attn_output", &l->wo, true},
                 {"ffn_gate", &l->ffn_gate, true},   {"ffn_up", &l->ffn_up, !fused_gate_up},
                 {"ffn_down", &l->ffn_down, true}};
    for (size_t i = 0; i < sizeof plain / sizeof plain[0]; i++)
        if (plain[i].applies && plain[i].w->data && strcmp(suffix, plain[i].suffix) == 0) {
            out[0] = (lora_target){plain[i].w, 0};
            return 1;
        }
    if (fused_qkv && strcmp(suffix, "attn_qkv") == 0) {
        out[0] = (lora_target){&l->wq, 0};
        out[1] = (lora_target){&l->wk, l->wq.n_out};
        out[2] = (lora_target){&l->wv, l->wq.n_out + l->wk.n_out};
        return 3;
    }
    if (fused_gate_up && strcmp(suffix, "ffn_up") == 0) {
        out[0] = (lora_target){&l->ffn_gate, 0};
        out[1] = (lora_target){&l->ffn_up, l->ffn_gate.n_out};
        return 2;
    }
    return 0;
}

/* One A/B pair of the adapter, checked against the model's tensor `name`. */
typedef struct lora_pair {
    const gguf_tensor *a, *b;
    const gguf_tensor *base;
    size_t n_targets;
    lora_target targets[3];
} lora_pair;

static bool check_pair_tensor(const gguf_file *f, const gguf_tensor *t, corral_error *err)
{
    if (t->type != TENSOR_TYPE_F32 && t->type != TENSOR_TYPE_F16) {
        corral_error_set(err, "%s: adapter tensor '%s' has type %s (F32 and F16 are supported)",
                         gguf_path(f), t->name, tensor_type_name(t->type));
        return false;
    }
    if (t->ne[2] != 1 || t->ne[3] != 1) {
        corral_error_set(err, "%s: adapter tensor '%s' is not a matrix", gguf_path(f), t->name);
        return false;
    }
    return true;
}

/* Pair the adapter's tensor `a` (NAME.lora_a) with NAME.lora_b and the model's NAME. */
static bool make_pair(const gguf_file *f, corral_model *m, const gguf_tensor *a, lora_pair *pair,
                      corral_error *err)
{
    const char *path = gguf_path(f);
    char name[GGUF_MAX_NAME_BYTES + 1], b_name[GGUF_MAX_NAME_BYTES + 8];
    size_t len = strlen(a->name) - strlen(".lora_a");
    snprintf(name, sizeof name, "%.*s", (int)len, a->name);
    snprintf(b_name, sizeof b_name, "%s.lora_b", name);
    pair->a = a;
    pair->b = gguf_find_tensor(f, b_name);
    if (!pair->b) {
        corral_error_set(err, "%s: adapter tensor '%s' has no '%s'", path, a->name, b_name);
        return false;
    }
    if (!check_pair_tensor(f, a, err) || !check_pair_tensor(f, pair->b, err))
        return false;
    pair->base = gguf_find_tensor(m->file, name);
    if (!pair->base) {
        corral_error_set(err, "%s: adapter tensor '%s' is for '%s', which the model does not have",
                         path, a->name, name);
        return false;
    }
    const int64_t *ne_a = a->ne, *ne_b = pair->b->ne, *ne_w = pair->base->ne;
    if (ne_a[0] != ne_w[0] || ne_b[1] != ne_w[1] || ne_a[1] != ne_b[0] || ne_w[2] != 1 ||
        ne_w[3] != 1) {
        corral_error_set(err, "%s: adapter tensors for '%s' do not fit it: lora_a [%lld, %lld] and lora_b [%lld, %lld] for a [%lld, %lld] matrix",
                         path, name, (long long)ne_a[0], (long long)ne_a[1], (long long)ne_b[0],
                         (long long)ne_b[1], (long long)ne_w[0], (long long)ne_w[1]);
        return false;
    }
    if (ne_a[1] < 1 || ne_a[1] > LORA_MAX_RANK) {
        corral_error_set(err, "%s: adapter tensors for '%s' have rank %lld (1 to %d are supported)",
                         path, name, (long long)ne_a[1], LORA_MAX_RANK);
        return false;
    }
    pair->n_targets = find_targets(m, name, pair->targets);
    if (pair->n_targets == 0) {
        corral_error_set(err, "%s: adapter tensor '%s' is for '%s', which adapters cannot change (only attention, feed-forward and output matrices)",
                         path, a->name, name);
        return false;
    }
    return true;
}

/* Every tensor of the adapter belongs to a pair (norm weights, which llama.cpp skips, aside).
 * Returns the number of pairs, written to pairs when not NULL; SIZE_MAX on an error. */
static size_t collect_pairs(const gguf_file *f, corral_model *m, lora_pair *pairs,
                            corral_error *err)
{
    size_t n = 0;
    for (size_t i = 0; i < gguf_n_tensors(f); i++) {
        const gguf_tensor *t = gguf_tensor_at(f, i);
        if (ends_with(t->name, ".lora_a")) {
            lora_pair pair;
            if (!make_pair(f, m, t, &pair, err))
                return SIZE_MAX;
            if (pairs)
                pairs[n] = pair;
            n++;
        } else if (ends_with(t->name, ".lora_b")) {
            char a_name[GGUF_MAX_NAME_BYTES + 1];
            snprintf(a_name, sizeof a_name, "%.*s.lora_a",
                     (int)(strlen(t->name) - strlen(".lora_b")), t->name);
            if (!gguf_find_tensor(f, a_name)) {
                corral_error_set(err, "%s: adapter tensor '%s' has no '%s'", gguf_path(f),
                                 t->name, a_name);
                return SIZE_MAX;
            }
        } else if (!ends_with(t->name, "_norm.weight")) {
            corral_error_set(err, "%s: adapter tensor '%s' is neither a lora_a nor a lora_b",
                             gguf_path(f), t->name);
            return SIZE_MAX;
        }
    }
    if (n == 0) {
        corral_error_set(err, "%s: the adapter has no lora_a/lora_b tensors", gguf_path(f));
        return SIZE_MAX;
    }
    return n;
}

static void copy_f32(const gguf_tensor *t, float *to)
{
    size_t n = (size_t)gguf_tensor_n_elems(t);
    if (t->type == TENSOR_TYPE_F32) {
        memcpy(to, t->data, n * sizeof(float));
        return;
    }
    const uint16_t *from = t->data;
    for (size_t i = 0; i < n; i++)
        to[i] = quant_f16_to_f32(from[i]);
}

/* The adapter's F32 copies and terms, not yet linked to the weights. */
static struct lora_adapter *build_adapter(const lora_pair *pairs, size_t n_pairs, float alpha,
                                          float scale, corral_error *err)
{
    size_t n_floats = 0, n_terms = 0;
    bool ok = true;
    for (size_t p = 0; p < n_pairs; p++) {
        size_t elems = 0;
        ok = ok && checked_add_size((size_t)gguf_tensor_n_elems(pairs[p].a),
                                    (size_t)gguf_tensor_n_elems(pairs[p].b), &elems) &&
             checked_add_size(n_floats, elems, &n_floats);
        n_terms += pairs[p].n_targets;
    }
    struct lora_adapter *ad = calloc(1, sizeof *ad);
    size_t bytes = 0;
    if (ok && ad && checked_mul_size(n_floats, sizeof(float), &bytes)) {
        ad->data = malloc(bytes ? bytes : 1);
        ad->terms = calloc(n_terms, sizeof *ad->terms);
    }
    if (!ad || !ad->data || !ad->terms) {
        corral_error_set(err, "out of memory for the adapter's %zu values", n_floats);
        if (ad) {
            free(ad->data);
            free(ad->terms);
        }
        free(ad);
        return NULL;
    }
    float *at = ad->data;
    for (size_t p = 0; p < n_pairs; p++) {
        const lora_pair *pair = &pairs[p];
        size_t rank = (size_t)pair->a->ne[1];
        float *a = at, *b = at + gguf_tensor_n_elems(pair->a);
        copy_f32(pair->a, a);
        copy_f32(pair->b, b);
        at = b + gguf_tensor_n_elems(pair->b);
        /* llama.cpp's factor, in float: the user's scale alone when the file has no alpha */
        float factor = alpha != 0.0f ? scale * alpha / (float)rank : scale;
        for (size_t t = 0; t < pair->n_targets; t++)
            ad->terms[ad->n_terms++] = (lora_term){
                .a = a,
                .b = b + pair->targets[t].row * rank,
                .rank = rank,
                .factor = factor,
                .target = pair->targets[t].w,
            };
    }
    return ad;
}

bool corral_model_add_lora(corral_model *m, const char *path, float scale, corral_error *err)
{
    gguf_file *f = gguf_open(path, err);
    if (!f)
        return false;
    float alpha = 0.0f;
    lora_pair *pairs = NULL;
    struct lora_adapter *ad = NULL;
    size_t n_pairs;
    if (!check_header(f, m, &alpha, err) ||
        (n_pairs = collect_pairs(f, m, NULL, err)) == SIZE_MAX)
        goto done;
    if (!(pairs = calloc(n_pairs, sizeof *pairs))) {
        corral_error_set(err, "out of memory");
        goto done;
    }
    collect_pairs(f, m, pairs, err);
    if (!(ad = build_adapter(pairs, n_pairs, alpha, scale, err)))
        goto done;
    /* checked and copied: now link each term after the terms earlier adapters put there, so
     * that they add up in the order they were attached */
    for (size_t i = 0; i < ad->n_terms; i++) {
        lora_term *term = &ad->terms[i];
        const lora_term **link = &term->target->lora;
        while (*link)
            link = (const lora_term **)&(*link)->next;
        *link = term;
    }
    ad->next = m->adapters;
    m->adapters = ad;
done:
    free(pairs);
    gguf_close(f);
    return ad != NULL;
}

bool corral_lora_check(const char *adapter_path, const char *model_path, corral_error *err)
{
    corral_model *m = corral_model_load(model_path, err);
    if (!m)
        return false;
    bool ok = corral_model_add_lora(m, adapter_path, 1.0f, err);
    corral_model_free(m);
    return ok;
}

void lora_free_all(corral_model *m)
{
    while (m->adapters) {
        struct lora_adapter *ad = m->adapters;
        m->adapters = ad->next;
        free(ad->terms);
        free(ad->data);
        free(ad);
    }
}
