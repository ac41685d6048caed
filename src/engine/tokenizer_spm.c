/*
 * SentencePiece-style tokenization of one raw fragment, as llama.cpp does it: space prefix and
 * U+2581 escaping, one symbol per UTF-8 lead byte, greedy merging of the adjacent pair whose
 * concatenation is the highest-scoring token (a priority queue over a linked symbol list, so
 * O(n log n)), then byte fallback for symbols that are not tokens.
 */
#include <string.h>

#include "utf8.h"
#include "vocab.h"

static const char space_marker[3] = {'\xE2', '\x96', '\x81'}; /* U+2581 */

/* The fragment as SPM sees it: optional leading space, every U+0020 as U+2581. */
static size_t escape_spaces(const corral_vocab *v, const char *text, size_t len, char *out)
{
    size_t n = 0;
    if (v->add_space_prefix) {
        memcpy(out, space_marker, 3);
        n = 3;
    }
    for (size_t i = 0; i < len; i++) {
        if (text[i] == ' ') {
            memcpy(out + n, space_marker, 3);
            n += 3;
        } else {
            out[n++] = text[i];
        }
    }
    return n;
}

static bool queue_pair(const corral_vocab *v, const char *bytes, const merge_symbol *sym,
                       int32_t left, int32_t right, bigram_queue *queue, corral_error *err)
{
    if (left < 0 || right < 0)
        return true;
    uint32_t size = sym[left].size + sym[right].size;
    corral_token id = token_map_find(&v->token_ids, bytes + sym[left].start, size);
    if (id < 0)
        return true;
    bigram b = {.priority = -(double)v->score[id], .left = left, .right = right, .size = size};
    if (!bigram_queue_push(queue, b)) {
        corral_error_set(err, "out of memory");
        return false;
    }
    return true;
}

/*
 * A symbol that is not a token is one unmerged character: spell its bytes. llama.cpp throws
 * when a byte has no token; we emit unk then (or nothing when there is no unk).
 */
static bool emit_symbol(const corral_vocab *v, const char *bytes, const merge_symbol *s,
                        token_list *out, corral_error *err)
{
    corral_token id = token_map_find(&v->token_ids, bytes + s->start, s->size);
    if (id >= 0)
        return token_list_push(out, id, err);
    for (uint32_t i = 0; i < s->size; i++) {
        id = v->byte_token[(unsigned char)bytes[s->start + i]];
        if (id < 0)
            id = v->unk;
        if (id >= 0 && !token_list_push(out, id, err))
            return false;
    }
    return true;
}

bool spm_tokenize_fragment(const corral_vocab *v, const char *text, size_t len,
                           tokenize_scratch *scratch, token_list *out, corral_error *err)
{
    size_t max_bytes = 3 * (len + 1); /* len <= VOCAB_MAX_TEXT_BYTES: no overflow */
    if (!tokenize_scratch_bytes(scratch, 0, max_bytes, err) ||
        !tokenize_scratch_symbols(scratch, max_bytes, err))
        return false;
    char *bytes = scratch->bytes[0];
    size_t n_bytes = escape_spaces(v, text, len, bytes);
    if (n_bytes == 0)
        return true;

    merge_symbol *sym = scratch->symbols;
    int32_t n_sym = 0;
    for (size_t pos = 0; pos < n_bytes; n_sym++) {
        size_t size = utf8_len_from_lead((unsigned char)bytes[pos]);
        if (size > n_bytes - pos)
            size = n_bytes - pos;
        sym[n_sym] = (merge_symbol){(uint32_t)pos, (uint32_t)size, n_sym - 1, n_sym + 1};
        pos += size;
    }
    sym[n_sym - 1].next = -1;

    bigram_queue *queue = &scratch->queue;
    bigram_queue_clear(queue);
    for (int32_t i = 1; i < n_sym; i++)
        if (!queue_pair(v, bytes, sym, i - 1, i, queue, err))
            return false;

    bigram b;
    while (bigram_queue_pop(queue, &b)) {
        merge_symbol *left = &sym[b.left], *right = &sym[b.right];
        if (left->size == 0 || right->size == 0 || left->size + right->size != b.size)
            continue; /* one side was merged away since this pair was queued */
        left->size += right->size;
        right->size = 0;
        left->next = right->next;
        if (right->next >= 0)
            sym[right->next].prev = b.left;
        if (!queue_pair(v, bytes, sym, left->prev, b.left, queue, err) ||
            !queue_pair(v, bytes, sym, b.left, left->next, queue, err))
            return false;
    }

    for (int32_t i = 0; i != -1; i = sym[i].next)
        if (!emit_symbol(v, bytes, &sym[i], out, err))
            return false;
    return true;
}
