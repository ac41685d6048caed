/*
 * Auto-detection of a built-in template from a GGUF's Jinja chat template: the built-in
 * whose known Jinja sources (templates/index.json) are closest by edit distance wins, as in
 * ollama, if the distance is under CORRAL_TEMPLATE_DETECT_MAX_DISTANCE. The distance is
 * computed over code points in a diagonal band of that width, so work stays linear in the
 * template's length whatever a hostile file holds.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "template/template.h"

/* Decode UTF-8 into code points (invalid bytes count as themselves); caller frees. */
static uint32_t *code_points(const char *s, size_t n, size_t *count)
{
    uint32_t *cps = malloc((n ? n : 1) * sizeof *cps);
    if (!cps)
        return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        size_t len = c < 0x80 ? 1 : c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 1;
        if (i + len > n)
            len = 1;
        uint32_t cp = len == 1 ? c : (uint32_t)(c & (0x7f >> len));
        for (size_t j = 1; j < len; j++)
            cp = (cp << 6) | ((unsigned char)s[i + j] & 0x3f);
        cps[k++] = cp;
        i += len;
    }
    *count = k;
    return cps;
}

/* Levenshtein distance of a and b if it is at most limit, else limit + 1. */
static size_t banded_distance(const uint32_t *a, size_t n, const uint32_t *b, size_t m,
                              size_t limit)
{
    size_t over = limit + 1;
    if ((n > m ? n - m : m - n) > limit)
        return over;
    size_t *prev = malloc((m + 1) * sizeof *prev), *cur = malloc((m + 1) * sizeof *cur);
    if (!prev || !cur) {
        free(prev);
        free(cur);
        return over;
    }
    for (size_t j = 0; j <= m; j++)
        prev[j] = j <= limit ? j : over;
    for (size_t i = 1; i <= n; i++) {
        size_t lo = i > limit ? i - limit : 1, hi = i + limit < m ? i + limit : m;
        size_t row_min = over;
        cur[0] = i <= limit ? i : over;
        if (lo > 1)
            cur[lo - 1] = over;
        for (size_t j = lo; j <= hi; j++) {
            size_t best = prev[j - 1] + (a[i - 1] != b[j - 1]);
            if (prev[j] + 1 < best)
                best = prev[j] + 1;
            if (cur[j - 1] + 1 < best)
                best = cur[j - 1] + 1;
            cur[j] = best > over ? over : best;
            if (cur[j] < row_min)
                row_min = cur[j];
        }
        if (hi < m)
            cur[hi + 1] = over;
        if (row_min > limit && cur[0] > limit) {
            free(prev);
            free(cur);
            return over;
        }
        size_t *t = prev;
        prev = cur;
        cur = t;
    }
    size_t d = prev[m] > over ? over : prev[m];
    free(prev);
    free(cur);
    return d;
}

const char *corral_template_detect(const json_t *index, const char *chat_template, size_t len)
{
    size_t n;
    uint32_t *target = code_points(chat_template, len, &n);
    if (!target)
        return NULL;
    const char *best_name = NULL;
    size_t best = CORRAL_TEMPLATE_DETECT_MAX_DISTANCE;
    for (size_t i = 0; i < json_array_size(index) && best > 0; i++) {
        const json_t *entry = json_array_get(index, i);
        const json_t *src = json_object_get(entry, "template");
        const char *name = json_string_value(json_object_get(entry, "name"));
        if (!json_is_string(src) || !name)
            continue;
        size_t m;
        uint32_t *candidate = code_points(json_string_value(src), json_string_length(src), &m);
        if (!candidate)
            continue;
        size_t d = banded_distance(target, n, candidate, m, best - 1);
        if (d < best) {
            best = d;
            best_name = name;
        }
        free(candidate);
    }
    free(target);
    return best_name;
}
