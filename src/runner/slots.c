/*
 * Slots and the continuous-batching engine loop (see slots.h). Each step: generating slots
 * contribute their pending token, prompting slots fill the rest of the batch with prompt
 * chunks; one corral_decode runs them all; every slot that asked for logits samples. Text
 * goes through the streaming detokenizer (whole UTF-8 characters) and the stop matcher.
 *
 * A generating slot may add a draft after its pending token (prompt_lookup.h): the tokens it
 * guesses come next, each with logits. Sampling goes down the batch as usual; a draft token
 * is kept while it equals what was just sampled from the position before it, and that sample
 * is the answer's next token either way. So the answer is the one plain decoding gives: the
 * engine's logits for a row do not depend on the rows beside it, and each sample draws from
 * the sampler's generator once, in the same order. (With a draft of one certain guess this
 * is the speculative-sampling rule: the guess is kept with its probability, and a rejected
 * one is replaced by a draw from the rest of the distribution.) At the first difference the
 * rest of the draft is dropped and the sequence is cut back.
 *
 * A recurrent model's states (corral_context_recurrent) cannot be cut back part way, so
 * before a batch that verifies a draft they are kept in the sequence's step checkpoint
 * (CORRAL_CHECKPOINT_STEP). When the draft is partly rejected the states go back there, and
 * the tokens accepted since (the pending token and the drafts kept) are evaluated again in
 * the next step's batch, without logits, ahead of the new pending token and its draft: rows
 * of a batch that runs anyway, not a pass of their own. A token's arithmetic does not depend
 * on the rows beside it, so the states are again the ones plain decoding has. A draft fully
 * accepted sends nothing back. Such a step's rows per slot are bounded (rollback_rows) so
 * that every slot's re-fed tokens and pending token fit the next batch.
 */
#include "slots.h"

#include "prompt_lookup.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/checked.h"

int64_t slot_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Add one piece of text (what a token released); the connection thread sends each piece as
 * a message of its own, as ollama streams a chunk per token, even when several wait. */
static bool slot_append_text(slot *s, const char *text, size_t n)
{
    if (n == 0)
        return true;
    if (s->n_pieces == s->cap_pieces) {
        size_t cap = s->cap_pieces ? s->cap_pieces * 2 : 16;
        size_t *grown = realloc(s->piece_ends, cap * sizeof *grown);
        if (!grown)
            return false;
        s->piece_ends = grown;
        s->cap_pieces = cap;
    }
    if (s->n_out + n > s->cap_out) {
        size_t cap = s->cap_out ? s->cap_out : 256;
        while (cap < s->n_out + n)
            cap *= 2;
        char *grown = realloc(s->out, cap);
        if (!grown)
            return false;
        s->out = grown;
        s->cap_out = cap;
    }
    memcpy(s->out + s->n_out, text, n);
    s->n_out += n;
    s->piece_ends[s->n_pieces++] = s->n_out;
    return true;
}

/* Finish the request: release held text unless a stop string ended it. Tokens waiting to be
 * evaluated again are not: the cache ends where the context does. */
static void slot_finish(slot *s, const char *reason)
{
    s->n_cache -= s->n_refeed;
    s->n_refeed = 0;
    if (strcmp(reason, "stop") == 0 || strcmp(reason, "length") == 0) {
        size_t n;
        const char *tail = corral_detok_stream_finish(s->detok, &n);
        const char *text = stop_matcher_push(&s->stops, tail, n, &n);
        slot_append_text(s, text, n);
        text = stop_matcher_flush(&s->stops, &n);
        slot_append_text(s, text, n);
    }
    s->done = true;
    s->done_reason = reason;
    s->t_end_ns = slot_now_ns();
    pthread_cond_broadcast(&s->changed);
}

static void slot_fail(slot *s, const char *message)
{
    snprintf(s->error, sizeof s->error, "%s", message);
    slot_finish(s, "error");
}

/* ---- the engine step ---- */

typedef struct step_batch {
    corral_token *tokens;
    int32_t *seq;
    bool *logits;
    size_t *owner;  /* slot index per batch token */
    size_t *at;     /* for a draft token: the slot's n_cache that keeping it needs;
                     * FED_AGAIN for a token evaluated again (slot.n_refeed); else SIZE_MAX */
    size_t n;
    size_t n_generating; /* slots that added their pending token */
    bool prompt;         /* holds prompt tokens (rows without logits) */
} step_batch;

#define FED_AGAIN (SIZE_MAX - 1)

static void add_token(step_batch *b, size_t owner, int32_t seq, corral_token id, bool logits)
{
    b->tokens[b->n] = id;
    b->seq[b->n] = seq;
    b->logits[b->n] = logits;
    b->owner[b->n] = owner;
    b->at[b->n] = SIZE_MAX;
    b->n++;
}

/* The most rows a recurrent model's slot puts in a verify batch (its re-fed tokens, pending
 * token and draft): a rejection re-feeds at most all but one of them next step, so every
 * slot's re-fed and pending tokens fit a batch. */
static size_t rollback_rows(const slot_pool *pool)
{
    return pool->n_batch / pool->n_slots;
}

/* How many tokens a generating slot may draft this step, batch room aside: its adapted
 * length, bounded by the context (make_room left at least 2 cells: the pending token's and
 * one more), by num_predict (the draft's last token samples one more token) and, for a
 * recurrent model, by rollback_rows. */
static size_t draft_limit(const slot_pool *pool, const slot *s)
{
    if (s->draft_pause > 0) /* its drafts kept failing (prompt_lookup_next_pause) */
        return 0;
    size_t k = s->draft_length;
    if (pool->rollback) {
        size_t rows = rollback_rows(pool), used = s->n_refeed + 1; /* and the pending token */
        size_t room = rows > used ? rows - used : 0;
        k = k < room ? k : room;
    }
    size_t ctx_room = pool->n_ctx - s->n_cache - 2;
    k = k < ctx_room ? k : ctx_room;
    long left = s->num_predict - s->n_generated - 1;
    return left <= 0 ? 0 : (size_t)left < k ? (size_t)left : k;
}

/* After a generating slot's pending token: its draft (the draft model's guess, or prompt
 * lookup's), as room allows. */
static void add_draft(slot_pool *pool, step_batch *b, size_t owner)
{
    slot *s = &pool->slots[owner];
    size_t room = pool->n_batch - b->n, limit = draft_limit(pool, s);
    size_t k = limit < room ? limit : room;
    corral_token draft[SLOT_MAX_DRAFT];
    size_t n = 0;
    if (pool->draft) {
        n = s->n_proposed < k ? s->n_proposed : k;
        memcpy(draft, s->proposed, n * sizeof *draft);
        s->n_proposed = 0;
    } else if (k > 0) {
        /* the history with the pending token last; cache has room past n_cache */
        s->cache[s->n_cache] = s->pending;
        n = prompt_lookup_draft(s->cache, s->n_cache + 1, draft, k);
    }
    /* a recurrent model's states as they are before the draft's batch, unless they are
     * already its step checkpoint (tokens are re-fed from it) */
    if (n > 0 && pool->rollback && s->n_refeed == 0) {
        int64_t start = slot_now_ns();
        if (!corral_seq_checkpoint(pool->ctx, s->seq, CORRAL_CHECKPOINT_STEP))
            n = 0;
        draft_costs_record_checkpoint(&pool->costs, (double)(slot_now_ns() - start) * 1e-9);
    }
    for (size_t j = 0; j < n; j++) {
        add_token(b, owner, s->seq, draft[j], true);
        b->at[b->n - 1] = s->n_cache + 1 + j;
    }
    s->n_drafted += n;
    s->step_drafted = n;
    s->step_accepted = 0;
}

/* The draft model's guesses for every generating slot, one batch per guessed token, with the
 * pool unlocked meanwhile (only this thread touches the slots' caches and contexts). A slot
 * still reading its prompt has the draft read the whole prompt now, before the target's
 * first token: the draft's share of the prompt is prompt work, and its first guesses then
 * wait for nothing but the first token. */
static void propose_drafts(slot_pool *pool)
{
    draft_request *reqs = pool->draft_requests;
    size_t n = 0;
    for (size_t i = 0; i < pool->n_slots; i++) {
        slot *s = &pool->slots[i];
        s->n_proposed = 0;
        if (!s->busy || s->done || s->cancelled || !s->speculate)
            continue;
        if (!s->has_pending && s->n_fed < s->n_prompt) {
            reqs[n++] = (draft_request){.seq = s->seq, .history = s->prompt,
                                        .n_history = s->n_prompt, .max_draft = 0,
                                        .draft = s->proposed};
            continue;
        }
        if (!s->has_pending)
            continue;
        size_t k = draft_limit(pool, s);
        if (k == 0)
            continue;
        s->cache[s->n_cache] = s->pending;
        reqs[n++] = (draft_request){.seq = s->seq, .history = s->cache,
                                    .n_history = s->n_cache + 1, .max_draft = k,
                                    .draft = s->proposed};
    }
    if (n == 0)
        return;
    pthread_mutex_unlock(&pool->lock);
    corral_error err;
    int64_t start = slot_now_ns();
    bool ok = draft_model_propose(pool->draft, reqs, n, &err);
    int64_t elapsed = slot_now_ns() - start;
    pthread_mutex_lock(&pool->lock);
    /* each guess took one step (the first the catch-up's): a step's time, unless a prompt
     * was read too */
    size_t steps = 0;
    bool prompt = false;
    for (size_t i = 0; ok && i < n; i++) {
        pool->slots[reqs[i].seq].n_proposed = reqs[i].n_draft;
        steps = reqs[i].n_draft > steps ? reqs[i].n_draft : steps;
        prompt = prompt || reqs[i].max_draft == 0;
    }
    if (steps > 0 && !prompt)
        draft_costs_record_draft_step(&pool->costs, (double)elapsed * 1e-9 / (double)steps);
}

/* Before a generating slot adds one token: if its sequence is full, shift as ollama does, or
 * end the answer when the request asked for no shift. */
static void make_room(slot_pool *pool, slot *s)
{
    if (s->n_cache + 1 < pool->n_ctx)
        return;
    if (s->no_shift || corral_context_recurrent(pool->ctx)) { /* (runner.c logs why) */
        slot_finish(s, "length");
        return;
    }
    uint32_t keep = s->num_keep < s->n_cache ? s->num_keep : 0;
    uint32_t discard = (uint32_t)(s->n_cache - keep) / 2;
    corral_error err;
    if (discard == 0 || !corral_seq_shift(pool->ctx, s->seq, keep, discard, &err)) {
        slot_fail(s, "cannot shift the context");
        return;
    }
    memmove(s->cache + keep, s->cache + keep + discard,
            (s->n_cache - keep - discard) * sizeof *s->cache);
    s->n_cache -= discard;
    s->n_shifts++;
}

/* Cut the slot's sequence back to the tokens it has cached (engine thread only). */
static void cut_sequence(slot_pool *pool, slot *s)
{
    /* sliding-window layers may not hold the whole prefix: then start over */
    uint32_t keep = corral_seq_reusable(pool->ctx, s->seq, (uint32_t)s->n_cache);
    if (s->busy && keep < s->n_cache) /* an image is evaluated whole or not at all */
        keep = (uint32_t)prompt_images_safe_prefix(s->images, s->n_images, keep);
    corral_seq_truncate(pool->ctx, s->seq, keep);
    s->image_due = false; /* build_batch looks again */
    if (s->busy && !s->done && keep < s->n_cache && s->n_generated > 0 &&
        s->n_cache - keep < rollback_rows(pool) && pool->rollback) {
        /* a recurrent model back at its step checkpoint: the accepted tokens go again */
        s->n_refeed = s->n_cache - keep;
        s->truncate_pending = false;
        return;
    }
    if (s->busy && !s->done && keep < s->n_cache && s->n_generated > 0) {
        /* a draft never reaches back past the window (see corral_seq_reusable) nor a
         * recurrent model's step checkpoint */
        slot_fail(s, "cannot roll back the sequence");
    } else if (s->busy && !s->done && keep < s->n_cache) {
        s->n_prompt_eval += s->n_cache - keep;
        s->n_fed = keep;
    }
    s->n_cache = keep;
    s->truncate_pending = false;
}

/* The first of the slot's images at or after its next prompt token; NULL: none. */
static const prompt_image *next_image(const slot *s)
{
    for (size_t i = 0; i < s->n_images; i++)
        if (s->images[i].at >= s->n_fed)
            return &s->images[i];
    return NULL;
}

static void build_batch(slot_pool *pool, step_batch *b)
{
    b->n = 0;
    b->n_generating = 0;
    b->prompt = false;
    for (size_t i = 0; i < pool->n_slots; i++) {
        slot *s = &pool->slots[i];
        if (s->truncate_pending)
            cut_sequence(pool, s);
        if (!s->busy || s->done)
            continue;
        if (s->cancelled) {
            slot_finish(s, "cancel");
            continue;
        }
        if (s->has_pending) {
            make_room(pool, s);
            if (!s->done) {
                for (size_t j = s->n_cache - s->n_refeed; j < s->n_cache; j++) {
                    add_token(b, i, s->seq, s->cache[j], false);
                    b->at[b->n - 1] = FED_AGAIN;
                }
                add_token(b, i, s->seq, s->pending, true);
                b->n_generating++;
            }
        }
    }
    for (size_t i = 0; i < pool->n_slots && b->n < pool->n_batch; i++) {
        slot *s = &pool->slots[i];
        s->step_drafted = 0;
        if (s->busy && !s->done && s->has_pending && s->speculate)
            add_draft(pool, b, i);
    }
    for (size_t i = 0; i < pool->n_slots && b->n < pool->n_batch; i++) {
        slot *s = &pool->slots[i];
        if (!s->busy || s->done || s->n_fed == s->n_prompt)
            continue;
        size_t k = s->n_prompt - s->n_fed, room = pool->n_batch - b->n;
        k = k < room ? k : room;
        /* up to a checkpoint's length; once there (every token fed is decoded: n_cache is
         * n_fed), the state is kept, then the rest */
        if (s->checkpoint_at > 0 && s->checkpoint_at <= s->n_fed) {
            if (s->checkpoint_at == s->n_fed)
                corral_seq_checkpoint(pool->ctx, s->seq, CORRAL_CHECKPOINT_PROMPT);
            s->checkpoint_at = 0; /* taken, or the prefix kept reaches past it */
        }
        if (s->checkpoint_at > s->n_fed && s->checkpoint_at - s->n_fed < k)
            k = s->checkpoint_at - s->n_fed;
        /* the text up to an image, then the image alone (engine_main decodes it) */
        const prompt_image *image = next_image(s);
        s->image_due = image && image->at == s->n_fed;
        if (image && image->at - s->n_fed < k)
            k = image->at - s->n_fed;
        for (size_t j = 0; j < k; j++) {
            bool last = s->n_fed + j + 1 == s->n_prompt;
            add_token(b, i, s->seq, s->prompt[s->n_fed + j], last);
        }
        s->n_fed += k;
        b->prompt = b->prompt || k > 0;
    }
}

/* Does the text generated so far, ending with piece, hold the grammar's trigger? */
static bool trigger_seen(slot *s, const char *piece, size_t n)
{
    size_t t = strlen(s->grammar_after);
    char window[2 * SLOT_MAX_TRIGGER];
    while (n > 0) {
        size_t take = n < SLOT_MAX_TRIGGER ? n : SLOT_MAX_TRIGGER;
        memcpy(window, s->trigger_tail, s->trigger_tail_len);
        memcpy(window + s->trigger_tail_len, piece, take);
        size_t len = s->trigger_tail_len + take;
        if (memmem(window, len, s->grammar_after, t))
            return true;
        size_t keep = len < t - 1 ? len : t - 1;
        memcpy(s->trigger_tail, window + len - keep, keep);
        s->trigger_tail_len = keep;
        piece += take;
        n -= take;
    }
    return false;
}

/*
 * Follow the answer's first text while it may be opening the thinking: once it has, the
 * thinking runs free and the grammar waits for grammar_after (in the rest of piece too);
 * once it cannot, the opening grammar, now the answer's own, stays.
 */
static void follow_opening(slot *s, const char *piece, size_t n)
{
    size_t len = strlen(s->grammar_open), i = 0;
    for (; i < n && s->open_matched < len; i++) {
        char c = piece[i];
        if (s->open_matched == 0 && (c == ' ' || c == '\t' || c == '\n' || c == '\r'))
            continue;
        if (c != s->grammar_open[s->open_matched]) {
            s->grammar_open[0] = '\0'; /* answering at once, in the grammar */
            s->grammar_after[0] = '\0';
            return;
        }
        s->open_matched++;
    }
    if (s->open_matched < len)
        return;
    s->grammar_open[0] = '\0';
    corral_sampler_set_grammar(s->sampler, NULL);
    if (trigger_seen(s, piece + i, n - i)) {
        s->grammar_after[0] = '\0';
        corral_sampler_set_grammar(s->sampler, s->grammar);
    }
}

/*
 * The log-probability of id under logits (a log-softmax) and the top_logprobs most likely
 * tokens, appended to the slot's unsent records. Ties go to the lower id, as the sampler's.
 */
static bool record_logprob(slot *s, const float *logits, size_t n_vocab, corral_token id)
{
    if (s->n_lps == s->cap_lps) {
        size_t cap = s->cap_lps ? 2 * s->cap_lps : 16;
        token_logprob *grown = realloc(s->lps, cap * sizeof *grown);
        if (!grown)
            return false;
        s->lps = grown;
        s->cap_lps = cap;
    }
    float max = logits[0];
    for (size_t i = 1; i < n_vocab; i++)
        max = logits[i] > max ? logits[i] : max;
    double sum = 0;
    for (size_t i = 0; i < n_vocab; i++)
        sum += exp((double)logits[i] - max);
    float log_z = max + (float)log(sum);
    token_logprob *e = &s->lps[s->n_lps++];
    e->id = id;
    e->logprob = logits[id] - log_z;
    e->n_top = 0;
    unsigned k = s->top_logprobs;
    for (size_t i = 0; i < n_vocab && k > 0; i++) {
        if (e->n_top == k && logits[i] <= logits[e->top_ids[k - 1]])
            continue;
        unsigned at = e->n_top < k ? e->n_top++ : k - 1;
        while (at > 0 && logits[i] > logits[e->top_ids[at - 1]]) {
            e->top_ids[at] = e->top_ids[at - 1];
            at--;
        }
        e->top_ids[at] = (corral_token)i;
    }
    for (unsigned t = 0; t < e->n_top; t++)
        e->top_logprobs[t] = logits[e->top_ids[t]] - log_z;
    return true;
}

static void sample_slot(slot_pool *pool, slot *s, const float *logits)
{
    if (s->t_first_ns == 0)
        s->t_first_ns = slot_now_ns();
    corral_token id = corral_sampler_sample(s->sampler, logits);
    corral_sampler_accept(s->sampler, id);
    s->generated[s->n_generated_ids++] = id;
    s->n_generated++;
    s->has_pending = false;
    if (corral_vocab_is_eog(pool->vocab, id)) {
        slot_finish(s, "stop");
        return;
    }
    if (s->logprobs && !record_logprob(s, logits, corral_model_n_vocab(pool->model), id)) {
        slot_fail(s, "out of memory");
        return;
    }
    size_t n;
    const char *piece = corral_detok_stream_push(s->detok, id, &n);
    if (s->grammar_open[0]) {
        follow_opening(s, piece, n);
    } else if (s->grammar_after[0] && trigger_seen(s, piece, n)) {
        s->grammar_after[0] = '\0';
        corral_sampler_set_grammar(s->sampler, s->grammar);
    }
    const char *text = stop_matcher_push(&s->stops, piece, n, &n);
    if (!slot_append_text(s, text, n)) {
        slot_fail(s, "out of memory");
        return;
    }
    if (s->stops.stopped)
        slot_finish(s, "stop");
    else if (s->n_generated >= s->num_predict)
        slot_finish(s, "length");
    else {
        s->pending = id;
        s->has_pending = true;
    }
    pthread_cond_broadcast(&s->changed);
}

/* A slot whose next prompt part is an image; NULL: none. */
static slot *image_due_slot(slot_pool *pool)
{
    for (size_t i = 0; i < pool->n_slots; i++) {
        slot *s = &pool->slots[i];
        if (s->busy && !s->done && s->image_due)
            return s;
    }
    return NULL;
}

/* Evaluate the slot's next image (its embeddings in place of its pseudo-ids); called and
 * returns with the lock held, which it drops while the engine works. */
static void decode_image(slot_pool *pool, slot *s)
{
    const prompt_image *image = next_image(s);
    corral_error err;
    s->image_due = false;
    pthread_mutex_unlock(&pool->lock);
    bool ok = corral_decode_image(pool->ctx, s->seq, &image->embd, &err);
    pthread_mutex_lock(&pool->lock);
    size_t n = image->embd.n_tokens;
    if (!ok) {
        slot_fail(s, err.message);
        return;
    }
    memcpy(s->cache + s->n_cache, s->prompt + s->n_fed, n * sizeof *s->cache);
    s->n_cache += n;
    s->n_fed += n;
    if (s->n_fed == s->n_prompt && !s->done)
        sample_slot(pool, s, corral_get_logits(pool->ctx, n - 1));
}

static bool any_work(const slot_pool *pool)
{
    for (size_t i = 0; i < pool->n_slots; i++)
        if (pool->slots[i].busy && !pool->slots[i].done)
            return true;
    return false;
}

static void *engine_main(void *arg)
{
    slot_pool *pool = arg;
    step_batch b;
    b.tokens = malloc(pool->n_batch * sizeof *b.tokens);
    b.seq = malloc(pool->n_batch * sizeof *b.seq);
    b.logits = malloc(pool->n_batch * sizeof *b.logits);
    b.owner = malloc(pool->n_batch * sizeof *b.owner);
    b.at = malloc(pool->n_batch * sizeof *b.at);
    pthread_mutex_lock(&pool->lock);
    while (!pool->stopping) {
        if (!any_work(pool)) {
            pthread_cond_wait(&pool->work, &pool->lock);
            continue;
        }
        if (!b.tokens || !b.seq || !b.logits || !b.owner || !b.at) {
            for (size_t i = 0; i < pool->n_slots; i++)
                if (pool->slots[i].busy && !pool->slots[i].done)
                    slot_fail(&pool->slots[i], "out of memory");
            continue;
        }
        if (pool->draft)
            propose_drafts(pool);
        build_batch(pool, &b);
        slot *image_slot = image_due_slot(pool);
        if (b.n == 0 && !image_slot)
            continue;
        pthread_mutex_unlock(&pool->lock);
        corral_error err;
        corral_batch batch = {.n_tokens = b.n, .tokens = b.tokens, .seq = b.seq, .logits = b.logits};
        int64_t start = slot_now_ns();
        bool ok = b.n == 0 || corral_decode(pool->ctx, &batch, &err);
        int64_t elapsed = slot_now_ns() - start;
        pthread_mutex_lock(&pool->lock);
        if (ok && b.n > 0 && !b.prompt) /* pending tokens and drafts: a verify batch */
            draft_costs_record_verify(&pool->costs, b.n, (double)elapsed * 1e-9);
        for (size_t i = 0; i < b.n; i++) {
            slot *s = &pool->slots[b.owner[i]];
            if (!ok) {
                if (!s->done)
                    slot_fail(s, err.message);
                continue;
            }
            if (b.at[i] == FED_AGAIN) { /* in the cache already */
                if (s->n_refeed > 0)
                    s->n_refeed--;
                continue;
            }
            if (b.at[i] != SIZE_MAX) {
                /* a draft token: kept only if it is what plain decoding would feed here */
                if (s->done || !s->has_pending || s->pending != b.tokens[i] ||
                    s->n_cache != b.at[i]) {
                    s->truncate_pending = true; /* its cell is written: cut it off */
                    continue;
                }
                s->step_accepted++;
                s->n_draft_accepted++;
            }
            s->cache[s->n_cache++] = b.tokens[i];
            if (b.logits[i] && !s->done)
                sample_slot(pool, s, corral_get_logits(pool->ctx, i));
        }
        for (size_t i = 0; ok && i < pool->n_slots; i++) {
            slot *s = &pool->slots[i];
            if (s->draft_pause > 0) /* a step without its draft */
                s->draft_pause--;
            if (!s->step_drafted)
                continue;
            size_t length = s->draft_length;
            const draft_costs *costs = pool->draft_by_acceptance ? NULL : &pool->costs;
            size_t next =
                pool->draft ? draft_model_next_length(&s->draft_record, costs,
                                                      b.n_generating, s->step_drafted,
                                                      s->step_accepted, s->draft_cap)
                            : prompt_lookup_next_length(&s->draft_record, costs,
                                                        b.n_generating, s->draft_length,
                                                        s->step_drafted, s->step_accepted,
                                                        s->draft_cap);
            s->draft_pause = prompt_lookup_next_pause(&s->draft_backoff, length, next,
                                                      s->step_drafted, s->step_accepted,
                                                      pool->rollback);
            s->draft_length = next > 0 ? next : 1; /* after the pause, a draft of one probes */
            if (s->truncate_pending) /* now, so a finished slot's cells count true at once */
                cut_sequence(pool, s);
        }
        if (image_slot && image_slot->busy && !image_slot->done && image_slot->image_due)
            decode_image(pool, image_slot);
    }
    pthread_mutex_unlock(&pool->lock);
    free(b.tokens);
    free(b.seq);
    free(b.logits);
    free(b.owner);
    free(b.at);
    return NULL;
}

/* ---- pool ---- */

bool slot_pool_create(slot_pool *pool, corral_model *model, corral_context *ctx,
                      size_t n_slots, uint32_t n_batch, size_t max_draft, draft_model *draft,
                      corral_error *err)
{
    memset(pool, 0, sizeof *pool);
    pool->model = model;
    pool->ctx = ctx;
    pool->vocab = corral_model_vocab(model);
    pool->n_ctx = corral_context_n_ctx(ctx);
    pool->n_batch = n_batch;
    pool->n_slots = n_slots;
    pool->max_draft = max_draft < SLOT_MAX_DRAFT ? max_draft : SLOT_MAX_DRAFT;
    pool->draft = draft;
    pool->rollback = corral_context_recurrent(ctx);
    if (draft && !(pool->draft_requests = calloc(n_slots, sizeof *pool->draft_requests))) {
        corral_error_set(err, "out of memory");
        return false;
    }
    pthread_mutex_init(&pool->lock, NULL);
    pthread_cond_init(&pool->work, NULL);
    pthread_cond_init(&pool->slot_free, NULL);
    pool->slots = calloc(n_slots, sizeof *pool->slots);
    pool->grammars = grammar_cache_create(GRAMMAR_CACHE_ENTRIES, GRAMMAR_CACHE_BYTES);
    if (!pool->slots || !pool->grammars) {
        corral_error_set(err, "out of memory");
        return false;
    }
    for (size_t i = 0; i < n_slots; i++) {
        slot *s = &pool->slots[i];
        s->seq = (int32_t)i;
        pthread_cond_init(&s->changed, NULL);
        s->cache = malloc(pool->n_ctx * sizeof *s->cache);
        if (!s->cache) {
            corral_error_set(err, "out of memory");
            return false;
        }
    }
    if (pthread_create(&pool->engine, NULL, engine_main, pool) != 0) {
        corral_error_set(err, "cannot start the engine thread");
        return false;
    }
    pool->engine_started = true;
    return true;
}

void slot_pool_free(slot_pool *pool)
{
    if (pool->engine_started) {
        pthread_mutex_lock(&pool->lock);
        pool->stopping = true;
        pthread_cond_broadcast(&pool->work);
        pthread_cond_broadcast(&pool->slot_free);
        pthread_mutex_unlock(&pool->lock);
        pthread_join(pool->engine, NULL);
    }
    for (size_t i = 0; pool->slots && i < pool->n_slots; i++) {
        free(pool->slots[i].cache);
        free(pool->slots[i].out);
        free(pool->slots[i].piece_ends);
        free(pool->slots[i].lps);
        pthread_cond_destroy(&pool->slots[i].changed);
    }
    free(pool->slots);
    free(pool->draft_requests);
    grammar_cache_free(pool->grammars);
    pthread_cond_destroy(&pool->work);
    pthread_cond_destroy(&pool->slot_free);
    pthread_mutex_destroy(&pool->lock);
}

static size_t common_prefix(const corral_token *a, size_t na, const corral_token *b, size_t nb)
{
    size_t n = 0;
    while (n < na && n < nb && a[n] == b[n])
        n++;
    return n;
}

/* Idle slot with the longest cached prefix of the prompt; NULL if all are busy. */
static slot *pick_slot(slot_pool *pool, const completion_request *req, size_t *prefix)
{
    slot *best = NULL;
    *prefix = 0;
    for (size_t i = 0; i < pool->n_slots; i++) {
        slot *s = &pool->slots[i];
        if (s->busy)
            continue;
        size_t p = common_prefix(s->cache, s->n_cache, req->tokens, req->n_tokens);
        if (!best || p > *prefix) {
            best = s;
            *prefix = p;
        }
    }
    return best;
}

static void slot_clear_request(slot_pool *pool, slot *s)
{
    free(s->prompt);
    free(s->generated);
    corral_sampler_free(s->sampler);
    grammar_cache_give(pool->grammars, s->grammar);
    grammar_cache_give(pool->grammars, s->opening);
    corral_detok_stream_free(s->detok);
    stop_matcher_free(&s->stops);
    prompt_images_free(s->images, s->n_images);
    s->images = NULL;
    s->n_images = 0;
    s->image_due = false;
    s->prompt = NULL;
    s->generated = NULL;
    s->sampler = NULL;
    s->grammar = NULL;
    s->opening = NULL;
    s->detok = NULL;
}

/* Fresh per-request state; the cache is kept up to the shared prefix. */
static bool slot_start(slot_pool *pool, slot *s, const completion_request *req, size_t prefix,
                       corral_error *err)
{
    size_t n_max = req->num_predict < 0 ? 10 * (size_t)pool->n_ctx : (size_t)req->num_predict;
    bool ok = stop_matcher_init(&s->stops, req->stops, req->n_stops, err);
    if (ok) {
        s->prompt = malloc(req->n_tokens * sizeof *s->prompt);
        s->generated = malloc((n_max + 1) * sizeof *s->generated);
        ok = s->prompt && s->generated;
        if (!ok)
            corral_error_set(err, "out of memory");
    }
    ok = ok && (s->sampler = corral_sampler_create(&req->sampling,
                                                   corral_model_n_vocab(pool->model), err));
    ok = ok && (s->detok = corral_detok_stream_create(pool->vocab, err));
    if (!ok) {
        slot_clear_request(pool, s);
        return false;
    }
    memcpy(s->prompt, req->tokens, req->n_tokens * sizeof *s->prompt);
    s->n_prompt = req->n_tokens;
    /* the last prompt token is always evaluated: its logits start the generation */
    if (prefix >= req->n_tokens)
        prefix = req->n_tokens - 1;
    prefix = prompt_images_safe_prefix(req->images, req->n_images, prefix);
    s->n_cache = prefix;
    s->truncate_pending = true; /* the engine thread owns the context */
    s->n_fed = prefix;
    s->n_prompt_eval = req->n_tokens - prefix;
    size_t tail = SLOT_CHECKPOINT_TAIL;
    s->checkpoint_at = corral_context_recurrent(pool->ctx) && req->n_tokens > tail
                           ? prompt_images_safe_prefix(req->images, req->n_images,
                                                       req->n_tokens - tail)
                           : 0;
    for (size_t i = 0; i < req->n_tokens; i++)
        if (!prompt_is_image_id(req->tokens[i]))
            corral_sampler_accept(s->sampler, req->tokens[i]);
    s->num_predict = (long)n_max;
    s->num_keep = req->num_keep;
    s->no_shift = req->no_shift;
    /* a draft model guesses up to 8 tokens unless asked otherwise; prompt lookup max_draft */
    size_t cap = pool->draft ? 8 : pool->max_draft;
    if (req->draft_num_predict >= 0)
        cap = (size_t)req->draft_num_predict < SLOT_MAX_DRAFT ? (size_t)req->draft_num_predict
                                                               : SLOT_MAX_DRAFT;
    /* a draft could propose an image's pseudo-ids, which only decode_image evaluates */
    s->speculate = cap > 0 && (pool->draft || pool->max_draft > 0) && req->n_images == 0;
    s->draft_cap = cap;
    s->draft_length = cap < 4 ? cap : 4;
    s->draft_pause = s->draft_backoff = 0;
    s->draft_record = (draft_rate){0};
    s->n_proposed = 0;
    s->n_drafted = s->n_draft_accepted = 0;
    s->step_drafted = 0;
    s->n_generated = 0;
    s->n_generated_ids = 0;
    s->has_pending = false;
    s->cancelled = false;
    s->n_out = 0;
    s->n_pieces = 0;
    s->logprobs = req->logprobs;
    s->top_logprobs = req->top_logprobs < SLOT_MAX_TOP_LOGPROBS ? req->top_logprobs
                                                                 : SLOT_MAX_TOP_LOGPROBS;
    s->n_lps = 0;
    s->done = false;
    s->done_reason = NULL;
    s->error[0] = '\0';
    s->n_shifts = 0;
    s->n_truncated = 0;
    s->t_start_ns = slot_now_ns();
    s->t_first_ns = s->t_end_ns = 0;
    s->grammar = req->grammar;
    size_t after = req->grammar_after ? strlen(req->grammar_after) : 0;
    if (after > SLOT_MAX_TRIGGER) /* runner.c refuses longer ones */
        after = 0;
    memcpy(s->grammar_after, req->grammar_after ? req->grammar_after : "", after);
    s->grammar_after[after] = '\0';
    s->trigger_tail_len = 0;
    s->opening = req->opening;
    size_t open = after && req->opening && req->grammar_open ? strlen(req->grammar_open) : 0;
    if (open > SLOT_MAX_TRIGGER) /* runner.c refuses longer ones */
        open = 0;
    memcpy(s->grammar_open, req->grammar_open ? req->grammar_open : "", open);
    s->grammar_open[open] = '\0';
    s->open_matched = 0;
    corral_sampler_set_grammar(s->sampler, open ? s->opening : after ? NULL : s->grammar);
    s->images = req->images;
    s->n_images = req->n_images;
    s->image_due = false;
    s->busy = true;
    return true;
}

slot *slot_pool_submit(slot_pool *pool, const completion_request *req, corral_error *err)
{
    if (req->n_tokens == 0 || req->n_tokens >= pool->n_ctx) {
        corral_error_set(err, "prompt of %zu tokens does not fit the context of %u", req->n_tokens,
                         pool->n_ctx);
        return NULL;
    }
    pthread_mutex_lock(&pool->lock);
    slot *s = NULL;
    size_t prefix = 0;
    while (!pool->stopping && !(s = pick_slot(pool, req, &prefix)))
        pthread_cond_wait(&pool->slot_free, &pool->lock);
    if (!s) {
        corral_error_set(err, "the runner is stopping");
    } else if (!slot_start(pool, s, req, prefix, err)) {
        s = NULL;
    } else {
        pthread_cond_signal(&pool->work);
    }
    pthread_mutex_unlock(&pool->lock);
    return s;
}

void slot_pool_release(slot_pool *pool, slot *s)
{
    pthread_mutex_lock(&pool->lock);
    slot_clear_request(pool, s);
    if (s->done_reason && strcmp(s->done_reason, "error") == 0) {
        s->n_cache = 0; /* the cache may be half-written: forget it */
        s->truncate_pending = true;
    }
    s->busy = false;
    pthread_cond_signal(&pool->slot_free);
    pthread_mutex_unlock(&pool->lock);
}
