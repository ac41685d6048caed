/*
 * Stop-string matching on a stream (see stop_matcher.h). The held text is the longest
 * suffix of the output that is a proper prefix of some stop string, so it never exceeds
 * the longest stop string.
 */
#include "stop_matcher.h"

#include <stdlib.h>
#include <string.h>

bool stop_matcher_init(stop_matcher *m, const char *const *stops, size_t n_stops,
                       corral_error *err)
{
    memset(m, 0, sizeof *m);
    m->matched = -1;
    for (size_t i = 0; i < n_stops; i++) {
        size_t len = strlen(stops[i]);
        if (len == 0)
            continue;
        if (m->n_stops == STOP_MAX_STRINGS || len > STOP_MAX_BYTES) {
            corral_error_set(err, m->n_stops == STOP_MAX_STRINGS
                                      ? "too many stop strings (at most %d)"
                                      : "stop string longer than %d bytes",
                             m->n_stops == STOP_MAX_STRINGS ? STOP_MAX_STRINGS : STOP_MAX_BYTES);
            stop_matcher_free(m);
            return false;
        }
        if (!(m->stops[m->n_stops] = strdup(stops[i]))) {
            corral_error_set(err, "out of memory");
            stop_matcher_free(m);
            return false;
        }
        m->stop_len[m->n_stops++] = len;
        m->max_len = len > m->max_len ? len : m->max_len;
    }
    return true;
}

void stop_matcher_free(stop_matcher *m)
{
    for (size_t i = 0; i < m->n_stops; i++)
        free(m->stops[i]);
    free(m->held);
    free(m->out);
    memset(m, 0, sizeof *m);
}

/* Length of the longest suffix of buf that is a proper prefix of a stop string. */
static size_t partial_suffix(const stop_matcher *m, const char *buf, size_t n)
{
    size_t best = 0;
    for (size_t s = 0; s < m->n_stops; s++) {
        size_t max = m->stop_len[s] - 1 < n ? m->stop_len[s] - 1 : n;
        for (size_t k = max; k > best; k--)
            if (memcmp(buf + n - k, m->stops[s], k) == 0) {
                best = k;
                break;
            }
    }
    return best;
}

static const char *release(stop_matcher *m, size_t n, size_t *len)
{
    memcpy(m->out, m->held, n);
    memmove(m->held, m->held + n, m->n_held - n);
    m->n_held -= n;
    m->n_out = n;
    *len = n;
    return m->out;
}

const char *stop_matcher_push(stop_matcher *m, const char *text, size_t n, size_t *len)
{
    *len = 0;
    if (m->stopped)
        return "";
    char *held = realloc(m->held, m->n_held + n + 1);
    char *out = held ? realloc(m->out, m->n_held + n + 1) : NULL;
    if (held)
        m->held = held;
    if (!out) { /* out of memory: stop rather than lose track of text */
        m->stopped = true;
        return "";
    }
    m->out = out;
    memcpy(m->held + m->n_held, text, n);
    m->n_held += n;
    /* the earliest complete stop string wins */
    size_t cut = m->n_held;
    int which = -1;
    for (size_t s = 0; s < m->n_stops; s++) {
        const char *hit = memmem(m->held, m->n_held, m->stops[s], m->stop_len[s]);
        if (hit && (size_t)(hit - m->held) < cut) {
            cut = (size_t)(hit - m->held);
            which = (int)s;
        }
    }
    if (cut < m->n_held) {
        m->stopped = true;
        m->matched = which;
        m->n_held = cut;
        return release(m, cut, len);
    }
    return release(m, m->n_held - partial_suffix(m, m->held, m->n_held), len);
}

const char *stop_matcher_flush(stop_matcher *m, size_t *len)
{
    if (m->stopped || m->n_held == 0) {
        *len = 0;
        return "";
    }
    return release(m, m->n_held, len);
}
