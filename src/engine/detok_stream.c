/*
 * Streaming detokenizer: pieces as generation prints them
 * (no leading-space strip, control tokens silent), released only up to the last complete
 * UTF-8 character. A character still being spelled out by later tokens (byte fallback, BPE
 * byte pieces) is held back; bytes that can never form a character become U+FFFD, so every
 * chunk is valid UTF-8. All buffers are sized at creation: pushing never allocates.
 */
#include <stdlib.h>
#include <string.h>

#include "utf8.h"
#include "vocab.h"

#define HELD_MAX 3 /* a lead byte and at most two continuation bytes await the rest */

struct corral_detok_stream {
    const corral_vocab *vocab;
    char *work;      /* held bytes followed by the new piece */
    size_t n_held;
    char *out;       /* what push returns */
    size_t out_cap;
};

static const char replacement[3] = {'\xEF', '\xBF', '\xBD'};

corral_detok_stream *corral_detok_stream_create(const corral_vocab *vocab, corral_error *err)
{
    corral_detok_stream *s = calloc(1, sizeof *s);
    /* Worst case every byte is invalid and grows to a 3-byte U+FFFD. */
    size_t work_cap = HELD_MAX + vocab->max_piece_bytes;
    if (s) {
        s->vocab = vocab;
        s->out_cap = 3 * work_cap;
        s->work = malloc(work_cap);
        s->out = malloc(s->out_cap);
    }
    if (!s || !s->work || !s->out) {
        corral_detok_stream_free(s);
        corral_error_set(err, "out of memory");
        return NULL;
    }
    return s;
}

void corral_detok_stream_free(corral_detok_stream *s)
{
    if (!s)
        return;
    free(s->work);
    free(s->out);
    free(s);
}

const char *corral_detok_stream_push(corral_detok_stream *s, corral_token id, size_t *len)
{
    size_t n = s->n_held;
    if (id >= 0 && (uint32_t)id < s->vocab->n_tokens)
        n += vocab_token_to_piece(s->vocab, id, s->work + n, s->vocab->max_piece_bytes, 0,
                                  false);
    const unsigned char *bytes = (const unsigned char *)s->work;
    size_t pos = 0, out = 0;
    s->n_held = 0;
    while (pos < n) {
        int incomplete;
        size_t valid = utf8_valid_prefix(bytes + pos, n - pos, &incomplete);
        memcpy(s->out + out, bytes + pos, valid);
        out += valid;
        pos += valid;
        if (pos == n)
            break;
        if (incomplete) { /* the rest is the start of a character: keep it for later */
            s->n_held = n - pos;
            memmove(s->work, s->work + pos, s->n_held);
            break;
        }
        memcpy(s->out + out, replacement, 3);
        out += 3;
        pos++;
    }
    *len = out;
    return s->out;
}

const char *corral_detok_stream_finish(corral_detok_stream *s, size_t *len)
{
    *len = 0;
    if (s->n_held > 0) {
        memcpy(s->out, replacement, 3);
        *len = 3;
        s->n_held = 0;
    }
    return s->out;
}
