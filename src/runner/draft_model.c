/*
 * The draft model (see draft_model.h). Each sequence's cached tokens are mirrored in
 * `cached`, so the prefix shared with a new history is found without asking the context.
 * Guesses are the draft's argmax: any guess that does not depend on the target's sampling is
 * a valid draft, and the greedy one is the likeliest to be kept.
 */
#include "draft_model.h"

#include <stdlib.h>
#include <string.h>

struct draft_model {
    corral_model *model;
    corral_context *ctx;
    uint32_t n_ctx, n_seq, n_batch, n_vocab;
    corral_token **cached; /* per sequence: the tokens its cells hold, in order */
    size_t *n_cached;
    /* one batch, reused */
    corral_token *tokens;
    int32_t *seq;
    bool *logits;
    size_t *owner; /* request index per batch token */
};

bool draft_model_vocab_matches(const corral_model *target, const corral_model *draft,
                               corral_error *err)
{
    if (corral_vocab_same(corral_model_vocab(target), corral_model_vocab(draft), err))
        return true;
    corral_error_prefix(err, "the draft model's vocabulary is not the model's");
    return false;
}

draft_model *draft_model_create(const char *path, uint32_t n_ctx, uint32_t n_seq, uint32_t n_batch,
                                int n_threads, corral_error *err)
{
    draft_model *d = calloc(1, sizeof *d);
    if (!d) {
        corral_error_set(err, "out of memory");
        return NULL;
    }
    if (!(d->model = corral_model_load(path, err))) {
        corral_error_prefix(err, "draft model");
        free(d);
        return NULL;
    }
    corral_context_params cp;
    corral_context_params_init(&cp);
    uint32_t trained = corral_model_n_ctx_train(d->model);
    cp.n_ctx = n_ctx < trained ? n_ctx : trained;
    cp.n_seq = n_seq;
    cp.n_batch = n_batch;
    cp.n_threads = n_threads;
    if (!(d->ctx = corral_context_create(d->model, &cp, err))) {
        corral_error_prefix(err, "draft model");
        draft_model_free(d);
        return NULL;
    }
    if (corral_context_recurrent(d->ctx)) { /* its guesses would be read again every step */
        corral_error_set(err, "draft model: %s keeps a recurrent state, which cannot take back "
                         "rejected guesses", corral_model_arch(d->model));
        draft_model_free(d);
        return NULL;
    }
    d->n_ctx = corral_context_n_ctx(d->ctx);
    d->n_seq = n_seq;
    d->n_batch = n_batch;
    d->n_vocab = corral_model_n_vocab(d->model);
    d->cached = calloc(n_seq, sizeof *d->cached);
    d->n_cached = calloc(n_seq, sizeof *d->n_cached);
    d->tokens = malloc(n_batch * sizeof *d->tokens);
    d->seq = malloc(n_batch * sizeof *d->seq);
    d->logits = malloc(n_batch * sizeof *d->logits);
    d->owner = malloc(n_batch * sizeof *d->owner);
    bool ok = d->cached && d->n_cached && d->tokens && d->seq && d->logits && d->owner;
    for (uint32_t i = 0; ok && i < n_seq; i++)
        ok = (d->cached[i] = malloc(d->n_ctx * sizeof **d->cached)) != NULL;
    if (!ok) {
        corral_error_set(err, "out of memory");
        draft_model_free(d);
        return NULL;
    }
    return d;
}

void draft_model_free(draft_model *d)
{
    if (!d)
        return;
    for (uint32_t i = 0; d->cached && i < d->n_seq; i++)
        free(d->cached[i]);
    free(d->cached);
    free(d->n_cached);
    free(d->tokens);
    free(d->seq);
    free(d->logits);
    free(d->owner);
    corral_context_free(d->ctx);
    corral_model_free(d->model);
    free(d);
}

const corral_model *draft_model_model(const draft_model *d)
{
    return d->model;
}

/* The length the keep chance a alone gives: a k-th guess while a^k >= DRAFT_KEEP_CHANCE. */
static size_t length_by_keep_chance(double a, size_t cap)
{
    double all_kept = a;
    size_t k = 1;
    while (k < cap && all_kept * a >= DRAFT_KEEP_CHANCE) {
        all_kept *= a;
        k++;
    }
    return k;
}

size_t draft_model_next_length(draft_rate *rate, const draft_costs *costs, size_t n_seqs,
                               size_t drafted, size_t accepted, size_t cap)
{
    draft_rate_record(rate, drafted, accepted);
    if (cap == 0)
        return 0;
    size_t by_chance = length_by_keep_chance(draft_rate_keep_chance(rate), cap);
    return draft_length_by_costs(rate, costs, costs ? &costs->draft_step : NULL, n_seqs,
                                 by_chance, 1, cap);
}

static corral_token argmax(const float *logits, uint32_t n)
{
    uint32_t best = 0;
    for (uint32_t i = 1; i < n; i++)
        if (logits[i] > logits[best])
            best = i;
    return (corral_token)best;
}

/* Cut request r's sequence to what it shares with its history, leaving at least its last
 * token to decode when it asks for guesses (that token's logits give the first). Returns
 * where decoding starts, or SIZE_MAX when the request cannot be served. */
static size_t resume_point(draft_model *d, const draft_request *r)
{
    if (r->seq < 0 || (uint32_t)r->seq >= d->n_seq || r->n_history == 0 ||
        r->n_history + r->max_draft > d->n_ctx)
        return SIZE_MAX;
    const corral_token *c = d->cached[r->seq];
    size_t n = d->n_cached[r->seq], p = 0, most = r->n_history - (r->max_draft ? 1 : 0);
    while (p < n && p < most && c[p] == r->history[p])
        p++;
    p = corral_seq_reusable(d->ctx, r->seq, (uint32_t)p);
    corral_seq_truncate(d->ctx, r->seq, (uint32_t)p);
    d->n_cached[r->seq] = p;
    return p;
}

static bool decode(draft_model *d, size_t n, corral_error *err)
{
    corral_batch b = {.n_tokens = n, .tokens = d->tokens, .seq = d->seq, .logits = d->logits};
    return corral_decode(d->ctx, &b, err);
}

static void add(draft_model *d, size_t *n, size_t owner, int32_t seq, corral_token id, bool logits)
{
    d->tokens[*n] = id;
    d->seq[*n] = seq;
    d->logits[*n] = logits;
    d->owner[*n] = owner;
    (*n)++;
    d->cached[seq][d->n_cached[seq]++] = id;
}

bool draft_model_propose(draft_model *d, draft_request *reqs, size_t n_reqs, corral_error *err)
{
    size_t *next = calloc(n_reqs ? n_reqs : 1, sizeof *next); /* history fed so far */
    if (!next) {
        corral_error_set(err, "out of memory");
        return false;
    }
    for (size_t i = 0; i < n_reqs; i++) {
        reqs[i].n_draft = 0;
        next[i] = resume_point(d, &reqs[i]);
    }
    /* catch up: every history to its end, in batches; the last token of each asks for logits
     * when guesses are wanted */
    bool ok = true;
    for (;;) {
        size_t n = 0;
        for (size_t i = 0; i < n_reqs && n < d->n_batch; i++) {
            draft_request *r = &reqs[i];
            while (next[i] != SIZE_MAX && next[i] < r->n_history && n < d->n_batch) {
                bool last = next[i] + 1 == r->n_history && r->max_draft > 0;
                add(d, &n, i, r->seq, r->history[next[i]++], last);
            }
        }
        if (n == 0)
            break;
        if (!(ok = decode(d, n, err)))
            break;
        for (size_t j = 0; j < n; j++)
            if (d->logits[j]) {
                draft_request *r = &reqs[d->owner[j]];
                r->draft[r->n_draft++] = argmax(corral_get_logits(d->ctx, j), d->n_vocab);
            }
    }
    /* then one token per round: each guess is decoded to give the next, but the last */
    for (size_t round = 1; ok; round++) {
        size_t n = 0;
        for (size_t i = 0; i < n_reqs; i++) {
            draft_request *r = &reqs[i];
            if (next[i] != SIZE_MAX && r->n_draft == round && round < r->max_draft)
                add(d, &n, i, r->seq, r->draft[round - 1], true);
        }
        if (n == 0)
            break;
        if (!(ok = decode(d, n, err)))
            break;
        for (size_t j = 0; j < n; j++) {
            draft_request *r = &reqs[d->owner[j]];
            r->draft[r->n_draft++] = argmax(corral_get_logits(d->ctx, j), d->n_vocab);
        }
    }
    if (!ok) /* the cells are in doubt: start every sequence over next time */
        for (uint32_t s = 0; s < d->n_seq; s++) {
            corral_seq_truncate(d->ctx, (int32_t)s, 0);
            d->n_cached[s] = 0;
        }
    free(next);
    return ok;
}
