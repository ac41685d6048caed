/*
 * Byte-level BPE tokenization of one raw fragment, as llama.cpp does it: lenient UTF-8 decoding,
 * the pre-tokenizer's words, the GPT-2 byte <-> code point alphabet, and per word the merge
 * loop (lowest rank first over a linked symbol list with a priority queue: O(n log n)).
 * gemma4's vocabularies (escape_whitespace) merge the text's own characters instead, spaces
 * written as U+2581, and spell what no token covers in <0xXX> byte tokens.
 */
#include <string.h>

#include "utf8.h"
#include "util/text.h"
#include "vocab.h"

/* Bytes that stand for themselves in the GPT-2 alphabet; the other 68 map to U+0100.. */
static bool byte_is_direct(unsigned b)
{
    return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
}

uint32_t bpe_byte_to_cp(unsigned char b)
{
    if (byte_is_direct(b))
        return b;
    if (b <= 0x20)
        return 0x100u + b;        /* 0x00..0x20: 33 bytes */
    if (b <= 0xA0)
        return 0x121u + (b - 0x7F); /* 0x7F..0xA0: 34 bytes */
    return 0x143u;                /* 0xAD */
}

int bpe_cp_to_byte(uint32_t cp)
{
    if (cp < 0x100)
        return byte_is_direct(cp) ? (int)cp : -1;
    if (cp <= 0x120)
        return (int)(cp - 0x100);
    if (cp <= 0x142)
        return (int)(cp - 0x121 + 0x7F);
    if (cp == 0x143)
        return 0xAD;
    return -1;
}

/*
 * Decode text leniently (as llama.cpp does) into two equally long UTF-8 strings: `canonical`,
 * the code points re-encoded as llama.cpp feeds them to BPE, and `regex_safe`, the same but
 * with surrogates (which PCRE2 rejects) moved to U+E000.. (private use: like surrogates, not
 * letters, numbers or spaces, so the pre-tokenizer splits identically). Returns the length.
 */
static size_t decode_fragment(const char *text, size_t len, bool escape_whitespace,
                              char *canonical, char *regex_safe)
{
    size_t n = 0;
    for (size_t pos = 0; pos < len;) {
        unsigned char c = (unsigned char)text[pos];
        if (c == ' ' && escape_whitespace) { /* U+2581: three bytes for one, as an invalid
                                              * byte's U+FFFD */
            memcpy(canonical + n, "\xE2\x96\x81", 3);
            memcpy(regex_safe + n, "\xE2\x96\x81", 3);
            n += 3;
            pos++;
            continue;
        }
        if (c < 0x80) {
            canonical[n] = regex_safe[n] = (char)c;
            n++;
            pos++;
            continue;
        }
        size_t used;
        uint32_t cp = utf8_decode_lenient((const unsigned char *)text + pos, len - pos, &used);
        pos += used;
        unsigned char enc[4];
        size_t size = text_utf8_encode(cp, enc);
        memcpy(canonical + n, enc, size);
        if (cp >= 0xD800 && cp <= 0xDFFF)
            text_utf8_encode(0xE000 + (cp - 0xD800), enc);
        memcpy(regex_safe + n, enc, size);
        n += size;
    }
    return n;
}

static bool queue_pair(const corral_vocab *v, const char *mapped, const merge_symbol *sym,
                       int32_t left, int32_t right, bigram_queue *queue, corral_error *err)
{
    if (left < 0 || right < 0)
        return true;
    const merge_symbol *l = &sym[left], *r = &sym[right];
    int32_t rank = merge_map_find(&v->merges, mapped + l->start, l->size, mapped + r->start,
                                  r->size);
    if (rank < 0)
        return true;
    bigram b = {.priority = rank, .left = left, .right = right, .size = l->size + r->size};
    if (!bigram_queue_push(queue, b)) {
        corral_error_set(err, "out of memory");
        return false;
    }
    return true;
}

/* A symbol whose text is no token (merges and tokens disagree): its single bytes, if tokens. */
static bool emit_symbol(const corral_vocab *v, const char *mapped, const merge_symbol *s,
                        token_list *out, corral_error *err)
{
    corral_token id = token_map_find(&v->token_ids, mapped + s->start, s->size);
    if (id >= 0)
        return token_list_push(out, id, err);
    for (uint32_t i = 0; i < s->size; i++) {
        id = v->byte_token[(unsigned char)mapped[s->start + i]];
        if (id >= 0 && !token_list_push(out, id, err))
            return false;
    }
    return true;
}

/* The merge loop over n linked symbols of `mapped`, then their tokens. */
static bool merge_symbols(const corral_vocab *v, const char *mapped, merge_symbol *sym, size_t n,
                          tokenize_scratch *scratch, token_list *out, corral_error *err)
{
    bigram_queue *queue = &scratch->queue;
    bigram_queue_clear(queue);
    for (size_t i = 1; i < n; i++)
        if (!queue_pair(v, mapped, sym, (int32_t)i - 1, (int32_t)i, queue, err))
            return false;
    bigram b;
    while (bigram_queue_pop(queue, &b)) {
        merge_symbol *left = &sym[b.left], *right = &sym[b.right];
        if (left->size == 0 || right->size == 0 || left->size + right->size != b.size)
            continue; /* stale: one side changed since this pair was queued */
        left->size += right->size;
        right->size = 0;
        left->next = right->next;
        if (right->next >= 0)
            sym[right->next].prev = b.left;
        if (!queue_pair(v, mapped, sym, left->prev, b.left, queue, err) ||
            !queue_pair(v, mapped, sym, b.left, left->next, queue, err))
            return false;
    }
    for (int32_t i = 0; i != -1; i = sym[i].next)
        if (!emit_symbol(v, mapped, &sym[i], out, err))
            return false;
    return true;
}

/* gemma4's word: its characters (canonical UTF-8) as the symbols; a run of newlines that is
 * a token whole is taken whole, as llama.cpp does. */
static bool tokenize_word_utf8(const corral_vocab *v, const char *word, size_t len,
                               tokenize_scratch *scratch, token_list *out, corral_error *err)
{
    size_t newlines = 0;
    while (newlines < len && word[newlines] == '\n')
        newlines++;
    if (newlines == len) {
        corral_token id = token_map_find(&v->token_ids, word, len);
        if (id >= 0)
            return token_list_push(out, id, err);
    }
    if (!tokenize_scratch_symbols(scratch, len, err))
        return false;
    merge_symbol *sym = scratch->symbols;
    size_t n = 0;
    for (size_t pos = 0; pos < len; n++) {
        unsigned char c = (unsigned char)word[pos];
        size_t size = c < 0x80 ? 1 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
        size = size < len - pos ? size : len - pos;
        sym[n] = (merge_symbol){(uint32_t)pos, (uint32_t)size, (int32_t)n - 1, (int32_t)n + 1};
        pos += size;
    }
    sym[n - 1].next = -1;
    return merge_symbols(v, word, sym, n, scratch, out, err);
}

static bool tokenize_word(const corral_vocab *v, const char *word, size_t len,
                          tokenize_scratch *scratch, token_list *out, corral_error *err)
{
    if (v->escape_whitespace)
        return tokenize_word_utf8(v, word, len, scratch, out, err);
    if (!tokenize_scratch_bytes(scratch, 2, 2 * len, err) ||
        !tokenize_scratch_symbols(scratch, len, err))
        return false;
    char *mapped = scratch->bytes[2];
    merge_symbol *sym = scratch->symbols;
    uint32_t n_mapped = 0;
    for (size_t i = 0; i < len; i++) {
        uint32_t cp = bpe_byte_to_cp((unsigned char)word[i]);
        unsigned char enc[4];
        uint32_t size = (uint32_t)text_utf8_encode(cp, enc);
        memcpy(mapped + n_mapped, enc, size);
        sym[i] = (merge_symbol){n_mapped, size, (int32_t)i - 1, (int32_t)i + 1};
        n_mapped += size;
    }
    sym[len - 1].next = -1;

    if (v->ignore_merges) {
        corral_token id = token_map_find(&v->token_ids, mapped, n_mapped);
        if (id >= 0)
            return token_list_push(out, id, err);
    }
    return merge_symbols(v, mapped, sym, len, scratch, out, err);
}

bool bpe_tokenize_fragment(const corral_vocab *v, const char *text, size_t len,
                           tokenize_scratch *scratch, token_list *out, corral_error *err)
{
    size_t max_bytes = 3 * len; /* an invalid byte becomes U+FFFD; len is bounded by caller */
    if (!tokenize_scratch_bytes(scratch, 0, max_bytes, err) ||
        !tokenize_scratch_bytes(scratch, 1, max_bytes, err))
        return false;
    char *canonical = scratch->bytes[0], *regex_safe = scratch->bytes[1];
    size_t n = decode_fragment(text, len, v->escape_whitespace, canonical, regex_safe);

    const pretok_word *words;
    size_t n_words;
    if (!pretokenizer_split(v->pre, regex_safe, n, &scratch->pretok, &words, &n_words, err))
        return false;
    for (size_t i = 0; i < n_words; i++)
        if (!tokenize_word(v, canonical + words[i].start, words[i].size, scratch, out, err))
            return false;
    return true;
}
