/*
 * Speculative decoding's measured step costs (see draft_costs.h).
 */
#include "draft_costs.h"

#include <math.h>

static void record(draft_timing *t, double seconds)
{
    if (!(seconds > 0) || !isfinite(seconds))
        return;
    if (t->seconds == 0) {
        t->seconds = seconds;
        t->spread = 0;
        return;
    }
    double stray = fabs(seconds - t->seconds) / t->seconds;
    t->spread += DRAFT_COSTS_SMOOTHING * ((stray < 1 ? stray : 1) - t->spread);
    double counted = seconds > 2 * t->seconds ? 2 * t->seconds
                     : seconds < t->seconds / 2 ? t->seconds / 2
                                                : seconds;
    t->seconds += DRAFT_COSTS_SMOOTHING * (counted - t->seconds);
}

void draft_costs_record_verify(draft_costs *c, size_t rows, double seconds)
{
    if (rows >= 1 && rows <= DRAFT_COSTS_MAX_ROWS)
        record(&c->verify[rows], seconds);
}

void draft_costs_record_draft_step(draft_costs *c, double seconds)
{
    record(&c->draft_step, seconds);
}

void draft_costs_record_checkpoint(draft_costs *c, double seconds)
{
    record(&c->checkpoint, seconds);
}

double draft_costs_verify(const draft_costs *c, size_t rows, bool *steady)
{
    *steady = false;
    if (rows == 0)
        return 0;
    size_t n = rows <= DRAFT_COSTS_MAX_ROWS ? rows : DRAFT_COSTS_MAX_ROWS;
    size_t below = n, above = n;
    while (below > 0 && c->verify[below].seconds == 0)
        below--;
    while (above <= DRAFT_COSTS_MAX_ROWS && c->verify[above].seconds == 0)
        above++;
    double seconds;
    if (below == 0 && above > DRAFT_COSTS_MAX_ROWS)
        return 0;
    if (below == n) {
        seconds = c->verify[n].seconds;
        *steady = c->verify[n].spread < DRAFT_COSTS_MAX_SPREAD;
    } else if (below > 0 && above <= DRAFT_COSTS_MAX_ROWS) {
        const draft_timing *lo = &c->verify[below], *hi = &c->verify[above];
        double at = (double)(n - below) / (double)(above - below);
        seconds = lo->seconds + at * (hi->seconds - lo->seconds);
        *steady = lo->spread < DRAFT_COSTS_MAX_SPREAD && hi->spread < DRAFT_COSTS_MAX_SPREAD;
    } else {
        const draft_timing *near = &c->verify[below > 0 ? below : above];
        seconds = near->seconds;
        *steady = near->spread < DRAFT_COSTS_MAX_SPREAD;
    }
    return seconds * (double)rows / (double)n;
}
