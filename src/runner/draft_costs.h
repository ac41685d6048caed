/*
 * What speculative decoding's steps cost on this machine, measured as the runner goes: the
 * wall time of the target's verify batches by row count (1 row is a plain step) and of one
 * draft model step, each smoothed. The draft length weighs what a longer draft may gain
 * against these (draft_model_next_length); how a batch's cost grows with its rows belongs
 * to the target's type, the CPU and the thread count, so it is measured rather than assumed.
 */
#ifndef CORRAL_RUNNER_DRAFT_COSTS_H
#define CORRAL_RUNNER_DRAFT_COSTS_H

#include <stdbool.h>
#include <stddef.h>

/* Batches of up to this many rows are timed by their own row count; larger ones are not. */
#define DRAFT_COSTS_MAX_ROWS 64
/* The weight of a new sample in a smoothed time. */
#define DRAFT_COSTS_SMOOTHING 0.25
/* A time whose samples stray from it by this share or more on average (smoothed) is too
 * noisy to choose by. */
#define DRAFT_COSTS_MAX_SPREAD 0.25

/* One smoothed time: a sample moves it by DRAFT_COSTS_SMOOTHING of the difference, counted
 * as at most twice or at least half the time so far (a thread preempted once should not
 * count as a batch that costs ten); spread follows how far the raw samples stray. */
typedef struct draft_timing {
    double seconds; /* 0: never measured */
    double spread;
} draft_timing;

typedef struct draft_costs {
    draft_timing verify[DRAFT_COSTS_MAX_ROWS + 1]; /* by row count; [0] unused */
    draft_timing draft_step;
    /* a recurrent target's: copying a sequence's states to its step checkpoint before a
     * draft's batch (0: never measured, or a target that cuts back anywhere) */
    draft_timing checkpoint;
} draft_costs;

/* A target batch of rows rows, every one with logits, took seconds. */
void draft_costs_record_verify(draft_costs *c, size_t rows, double seconds);
/* One draft model step (a batch of one guess per sequence) took seconds. */
void draft_costs_record_draft_step(draft_costs *c, double seconds);
/* One step checkpoint of a recurrent target's sequence took seconds. */
void draft_costs_record_checkpoint(draft_costs *c, double seconds);

/*
 * The estimated seconds of a verify batch of rows rows: its own smoothed time when measured;
 * between two measured row counts, on the line between them; past the largest measured,
 * that one's time (what a few more rows add is not assumed until seen: the draft length
 * then tries them once); below the smallest, that one's time; past DRAFT_COSTS_MAX_ROWS,
 * in proportion to the rows. 0 when no batch is measured. *steady: whether the samples
 * behind the estimate stray less than DRAFT_COSTS_MAX_SPREAD.
 */
double draft_costs_verify(const draft_costs *c, size_t rows, bool *steady);

#endif
