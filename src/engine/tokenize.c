/*
 * corral_tokenize and corral_tokenize_prompt: special-token partitioning (llama.cpp's:
 * candidates longest first, each one split out of every raw fragment), BOS/EOS (WordPiece:
 * [CLS]/[SEP]), a prompt's single BOS, and dispatch of each raw fragment to the vocabulary's
 * algorithm. Also the per-call scratch buffers the fragment tokenizers share.
 */
#include <stdlib.h>
#include <string.h>

#include "util/checked.h"
#include "vocab.h"

static bool grow(void **buf, size_t *cap, size_t n, size_t elem, corral_error *err)
{
    if (n <= *cap)
        return true;
    size_t want = *cap ? *cap : 256;
    while (want < n)
        want *= 2;
    size_t bytes;
    void *grown;
    if (!checked_mul_size(want, elem, &bytes) || !(grown = realloc(*buf, bytes))) {
        corral_error_set(err, "out of memory");
        return false;
    }
    *buf = grown;
    *cap = want;
    return true;
}

bool tokenize_scratch_bytes(tokenize_scratch *s, int which, size_t n, corral_error *err)
{
    return grow((void **)&s->bytes[which], &s->bytes_cap[which], n, 1, err);
}

bool tokenize_scratch_symbols(tokenize_scratch *s, size_t n, corral_error *err)
{
    return grow((void **)&s->symbols, &s->symbols_cap, n, sizeof *s->symbols, err);
}

void tokenize_scratch_free(tokenize_scratch *s)
{
    if (!s)
        return;
    for (int i = 0; i < 3; i++)
        free(s->bytes[i]);
    free(s->symbols);
    bigram_queue_free(&s->queue);
    pretok_scratch_free(&s->pretok);
    memset(s, 0, sizeof *s);
}

/* A run of raw text (token < 0) or a special token already matched. */
typedef struct fragment {
    corral_token token;
    size_t start, size;
} fragment;

typedef struct fragment_list {
    fragment *items;
    size_t n, cap;
} fragment_list;

static bool fragment_push(fragment_list *list, fragment f, corral_error *err)
{
    if (!grow((void **)&list->items, &list->cap, list->n + 1, sizeof f, err))
        return false;
    list->items[list->n++] = f;
    return true;
}

/* C isspace in the "C" locale, which llama.cpp's strip flags use. */
static bool is_c_space(char c)
{
    return c == ' ' || (c >= '\t' && c <= '\r');
}

/* Split every occurrence of special token id out of raw fragment f into out. */
static bool split_fragment(const corral_vocab *v, corral_token id, const char *text, fragment f,
                           fragment_list *out, corral_error *err)
{
    vocab_text t = v->text[id];
    size_t pos = f.start, end = f.start + f.size;
    for (;;) {
        const char *hit = memmem(text + pos, end - pos, t.data, t.size);
        if (!hit)
            break;
        size_t match = (size_t)(hit - text), left_end = match;
        if (v->flags[id] & TOKEN_FLAG_LSTRIP)
            while (left_end > pos && is_c_space(text[left_end - 1]))
                left_end--;
        if (left_end > pos && !fragment_push(out, (fragment){-1, pos, left_end - pos}, err))
            return false;
        if (!fragment_push(out, (fragment){id, match, t.size}, err))
            return false;
        pos = match + t.size;
        if (v->flags[id] & TOKEN_FLAG_RSTRIP)
            while (pos < end && is_c_space(text[pos]))
                pos++;
    }
    if (pos < end && !fragment_push(out, (fragment){-1, pos, end - pos}, err))
        return false;
    return true;
}

static bool partition(const corral_vocab *v, const char *text, size_t len, bool parse_special,
                      fragment_list lists[2], fragment_list **result, corral_error *err)
{
    int cur = 0;
    if (len > 0 && !fragment_push(&lists[cur], (fragment){-1, 0, len}, err))
        return false;
    for (size_t c = 0; c < v->n_specials; c++) {
        corral_token id = v->specials[c];
        uint8_t type = v->type[id];
        if (!parse_special && (type == TOKEN_CONTROL || type == TOKEN_UNKNOWN))
            continue; /* user-defined tokens are always matched */
        if (!memmem(text, len, v->text[id].data, v->text[id].size))
            continue; /* cheap common case: the token is nowhere in the text */
        fragment_list *in = &lists[cur], *out = &lists[1 - cur];
        out->n = 0;
        for (size_t i = 0; i < in->n; i++) {
            bool ok = in->items[i].token >= 0
                          ? fragment_push(out, in->items[i], err)
                          : split_fragment(v, id, text, in->items[i], out, err);
            if (!ok)
                return false;
        }
        cur = 1 - cur;
    }
    *result = &lists[cur];
    return true;
}

static bool tokenize_fragments(const corral_vocab *v, const char *text,
                               const fragment_list *frags, tokenize_scratch *scratch,
                               token_list *out, corral_error *err)
{
    for (size_t i = 0; i < frags->n; i++) {
        fragment f = frags->items[i];
        bool ok;
        if (f.token >= 0)
            ok = token_list_push(out, f.token, err);
        else if (v->kind == VOCAB_SPM)
            ok = spm_tokenize_fragment(v, text + f.start, f.size, scratch, out, err);
        else if (v->kind == VOCAB_BPE)
            ok = bpe_tokenize_fragment(v, text + f.start, f.size, scratch, out, err);
        else if (v->kind == VOCAB_UGM)
            ok = ugm_tokenize_fragment(v, text + f.start, f.size, scratch, out, err);
        else
            ok = wpm_tokenize_fragment(v, text + f.start, f.size, scratch, out, err);
        if (!ok)
            return false;
    }
    return true;
}

/* corral_tokenize; with prompt, a BOS the text's tokens begin with goes when the vocabulary
 * adds BOS (corral_tokenize_prompt). */
static bool tokenize(const corral_vocab *v, const char *text, size_t len, bool add_special,
                     bool parse_special, bool prompt, corral_token *ids, size_t max_ids,
                     size_t *n_ids, corral_error *err)
{
    *n_ids = 0;
    if (len > VOCAB_MAX_TEXT_BYTES) {
        corral_error_set(err, "text of %zu bytes is over the tokenizer's limit of %zu", len,
                         VOCAB_MAX_TEXT_BYTES);
        return false;
    }
    fragment_list lists[2] = {{0}};
    fragment_list *frags = NULL;
    tokenize_scratch scratch = {0};
    token_list out = {0};
    /* WordPiece always frames the text as [CLS] ... [SEP], whatever add_bos/add_eos say */
    bool wpm = v->kind == VOCAB_WPM;
    corral_token first = wpm || v->add_bos ? v->bos : -1;
    corral_token last = wpm ? v->sep : v->add_eos ? v->eos : -1;
    bool ok = partition(v, text, len, parse_special, lists, &frags, err);
    if (ok && add_special && first >= 0)
        ok = token_list_push(&out, first, err);
    size_t text_start = out.n;
    ok = ok && tokenize_fragments(v, text, frags, &scratch, &out, err);
    if (ok && prompt && first >= 0 && out.n > text_start && out.ids[text_start] == first) {
        memmove(out.ids + text_start, out.ids + text_start + 1,
                (out.n - text_start - 1) * sizeof *out.ids);
        out.n--;
    }
    if (ok && add_special && last >= 0)
        ok = token_list_push(&out, last, err);
    if (ok) {
        size_t n_copy = out.n < max_ids ? out.n : max_ids;
        if (n_copy > 0)
            memcpy(ids, out.ids, n_copy * sizeof *ids);
        *n_ids = out.n;
    }
    free(out.ids);
    free(lists[0].items);
    free(lists[1].items);
    tokenize_scratch_free(&scratch);
    return ok;
}

bool corral_tokenize(const corral_vocab *v, const char *text, size_t len, bool add_special,
                     bool parse_special, corral_token *ids, size_t max_ids, size_t *n_ids,
                     corral_error *err)
{
    return tokenize(v, text, len, add_special, parse_special, false, ids, max_ids, n_ids, err);
}

bool corral_tokenize_prompt(const corral_vocab *v, const char *text, size_t len, bool add_special,
                            corral_token *ids, size_t max_ids, size_t *n_ids, corral_error *err)
{
    return tokenize(v, text, len, add_special, true, true, ids, max_ids, n_ids, err);
}
