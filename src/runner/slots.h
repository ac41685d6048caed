/*
 * The runner's slots and the engine loop that drives them. A slot is one KV-cache sequence
 * plus the request using it. Connection threads submit requests and read back text; one
 * engine thread builds each step's batch from all busy slots (their next token, or a chunk
 * of their prompt), decodes it, samples and appends text. All slot state is guarded by
 * slot_pool.lock; the engine thread alone touches the context.
 */
#ifndef CORRAL_RUNNER_SLOTS_H
#define CORRAL_RUNNER_SLOTS_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "corral/engine.h"
#include "draft_model.h"
#include "grammar_cache.h"
#include "prompt_images.h"
#include "stop_matcher.h"

#define SLOT_MAX_TRIGGER 64
#define SLOT_MAX_TOP_LOGPROBS 20
#define SLOT_MAX_DRAFT 16
/* A recurrent model's state is kept this many tokens before a prompt's end: a chat's next
 * prompt repeats this one up to the reply's opening, which the template may write otherwise
 * for a past turn (the thinking it opened dropped, say). */
#define SLOT_CHECKPOINT_TAIL 4

/* A generated token's log-probability under the model's distribution (the raw logits, before
 * any sampling setting), and the most likely tokens at that step. */
typedef struct token_logprob {
    corral_token id;
    float logprob;
    unsigned n_top;
    corral_token top_ids[SLOT_MAX_TOP_LOGPROBS];
    float top_logprobs[SLOT_MAX_TOP_LOGPROBS];
} token_logprob;

typedef struct completion_request {
    corral_token *tokens; /* the whole prompt, owned by the caller until submitted */
    size_t n_tokens;
    corral_sampler_params sampling;
    long num_predict; /* < 0: up to 10 x n_ctx */
    uint32_t num_keep;
    const char *const *stops;
    size_t n_stops;
    corral_grammar *grammar; /* NULL: free text; the slot owns it once submitted */
    /* The grammar applies once the generated text holds this (at most SLOT_MAX_TRIGGER
     * bytes): a thinking model thinks freely, then answers in the grammar. NULL or "":
     * from the first token. */
    const char *grammar_after;
    /* With grammar_after: the model may open its thinking with this text (at most
     * SLOT_MAX_TRIGGER bytes), after optional whitespace, or answer at once. opening is
     * then the grammar of either (corral_grammar_create_opening), the slot owns it, and
     * only when the text opens so does the grammar wait for grammar_after. NULL: it waits
     * from the first token. */
    const char *grammar_open;
    corral_grammar *opening;
    bool logprobs;          /* record each generated token's token_logprob */
    unsigned top_logprobs;  /* with this many alternatives (at most SLOT_MAX_TOP_LOGPROBS) */
    bool no_shift;          /* a full context ends the answer instead of shifting */
    long draft_num_predict; /* longest speculative draft per step; < 0: the runner's default */
    /* the images whose pseudo-ids tokens holds; the slot owns them once submitted */
    prompt_image *images;
    size_t n_images;
} completion_request;

typedef struct slot {
    int32_t seq;
    bool busy;
    corral_token *cache; /* tokens in this sequence's KV cache, in order */
    size_t n_cache;
    bool truncate_pending; /* cut the sequence to n_cache before its next step */
    /* a recurrent model's: the last n_refeed tokens of cache, which the context no longer
     * holds since a partly rejected draft sent its states back to the step's checkpoint;
     * the next step evaluates them again, without logits, ahead of the pending token */
    size_t n_refeed;

    /* the request */
    corral_token *prompt;
    size_t n_prompt, n_fed;
    prompt_image *images; /* evaluated in place of their pseudo-ids in prompt */
    size_t n_images;
    bool image_due;       /* prompt[n_fed] starts an image: the engine decodes it next */
    /* a recurrent model's prompt: the length at which its state is kept (corral_seq_checkpoint)
     * on the way, for the next request that repeats the prompt but not what follows; 0 none */
    size_t checkpoint_at;
    corral_token pending; /* sampled, to be decoded next step */
    bool has_pending;
    corral_sampler *sampler;
    corral_grammar *grammar; /* the sampler's constraint, NULL for free text */
    char grammar_after[SLOT_MAX_TRIGGER + 1]; /* "" once the grammar applies */
    corral_grammar *opening;                   /* the request's, NULL for none */
    char grammar_open[SLOT_MAX_TRIGGER + 1];   /* "" once the answer has opened or not */
    size_t open_matched;                       /* its bytes the text has matched so far */
    char trigger_tail[SLOT_MAX_TRIGGER];      /* the text's last bytes, to match across pieces */
    size_t trigger_tail_len;
    corral_detok_stream *detok;
    stop_matcher stops;
    long num_predict, n_generated;
    uint32_t num_keep;
    bool no_shift;
    bool cancelled;
    /* speculative decoding, by prompt lookup or a draft model (the output stays token for
     * token the same) */
    bool speculate;
    size_t draft_length;   /* how many tokens the next draft may have */
    size_t draft_pause, draft_backoff; /* steps left without a draft; the next pause */
    size_t draft_cap;      /* ... at most */
    draft_rate draft_record; /* how its drafts fared, which sets draft_length */
    corral_token proposed[SLOT_MAX_DRAFT]; /* the draft model's guess for this step */
    size_t n_proposed;
    size_t n_drafted, n_draft_accepted;
    size_t step_drafted, step_accepted; /* this step's draft (engine thread only) */

    /* results, read by the connection thread */
    char *out;
    size_t n_out, cap_out;
    size_t *piece_ends; /* where each token's text ends in out: one message per piece */
    size_t n_pieces, cap_pieces;
    bool logprobs;
    unsigned top_logprobs;
    token_logprob *lps; /* recorded and not yet sent */
    size_t n_lps, cap_lps;
    bool done;
    const char *done_reason;
    char error[CORRAL_ERROR_MAX];
    size_t n_prompt_eval, n_truncated;
    unsigned n_shifts;
    int64_t t_start_ns, t_first_ns, t_end_ns;
    corral_token *generated;
    size_t n_generated_ids;
    pthread_cond_t changed;
} slot;

typedef struct slot_pool {
    corral_model *model;
    corral_context *ctx;
    const corral_vocab *vocab;
    uint32_t n_ctx, n_batch;
    size_t n_slots;
    slot *slots;
    pthread_mutex_t lock;
    pthread_cond_t work;      /* the engine waits here for busy slots */
    pthread_cond_t slot_free; /* submitters wait here for an idle slot */
    size_t max_draft;         /* longest prompt-lookup draft; 0: no prompt lookup */
    draft_model *draft;       /* guesses instead of prompt lookup when set (not owned) */
    draft_request *draft_requests; /* one per slot, for each step's guesses */
    draft_costs costs;        /* what verify batches and draft steps took (engine thread) */
    /* draft lengths follow the acceptance alone, not the measured costs: the same lengths on
     * every machine (runner --draft-by acceptance) */
    bool draft_by_acceptance;
    /* a recurrent model's context: a partly rejected draft goes back to the step's
     * checkpoint and re-feeds what was accepted (slots.c) */
    bool rollback;
    prompt_vision *vision;    /* the projector, NULL: the model takes no images (not owned) */
    grammar_cache *grammars;  /* recent requests' grammars, for the next with the same text */
    bool stopping;
    pthread_t engine;
    bool engine_started;
} slot_pool;

/* max_draft: the longest prompt-lookup draft a request verifies per step (0: none;
 * at most SLOT_MAX_DRAFT). draft: a draft model that guesses instead (NULL: none), its
 * context with one sequence per slot; a request's draft_num_predict bounds either. */
bool slot_pool_create(slot_pool *pool, corral_model *model, corral_context *ctx,
                      size_t n_slots, uint32_t n_batch, size_t max_draft, draft_model *draft,
                      corral_error *err);
/* Stops the engine thread; slots must be idle. */
void slot_pool_free(slot_pool *pool);

/* Wait for an idle slot (the one sharing the longest cached prefix) and start the request.
 * Returns the slot, locked by nobody, which now owns req->grammar, req->opening and
 * req->images; NULL with err when the pool is stopping (they are then still the caller's). */
slot *slot_pool_submit(slot_pool *pool, const completion_request *req, corral_error *err);

/* Give the slot back after its request is done (the connection saw done). */
void slot_pool_release(slot_pool *pool, slot *s);

int64_t slot_now_ns(void);

#endif
