/*
 * Ids back to bytes: one token's piece (SPM and WPM U+2581 -> space, <0xHH>
 * bytes, BPE's byte alphabet decoded, control tokens only on request) and whole-sequence
 * detokenization with llama.cpp's leading-space and clean-up rules.
 */
#include <stdlib.h>
#include <string.h>

#include "util/checked.h"
#include "util/text.h"
#include "utf8.h"
#include "vocab.h"

/* Appends to buf[0..size) while there is room and counts every byte regardless. */
typedef struct piece_writer {
    char *buf;
    size_t size, n;
    size_t lstrip; /* leading spaces still to drop */
} piece_writer;

static void put(piece_writer *w, const char *s, size_t len)
{
    while (w->lstrip > 0 && len > 0 && *s == ' ') {
        s++;
        len--;
        w->lstrip--;
    }
    if (len > 0)
        w->lstrip = 0; /* only leading spaces are stripped */
    if (w->n < w->size) {
        size_t room = w->size - w->n;
        memcpy(w->buf + w->n, s, len < room ? len : room);
    }
    w->n += len;
}

/* The byte of an SPM "<0xHH>" token (the hex digits at 3..4), or -1. */
static int spm_byte_value(vocab_text t)
{
    int value = -1;
    for (uint32_t i = 3; i < 5 && i < t.size; i++) {
        int digit = text_hex_digit(t.data[i]);
        if (digit < 0)
            break;
        value = (value < 0 ? 0 : value * 16) + digit;
    }
    return value;
}

static void spm_normal_piece(piece_writer *w, vocab_text t)
{
    size_t start = 0;
    for (size_t i = 0; i + 3 <= t.size; i++) {
        if (memcmp(t.data + i, "\xE2\x96\x81", 3) == 0) {
            put(w, t.data + start, i - start);
            put(w, " ", 1);
            start = i + 3;
            i += 2;
        }
    }
    put(w, t.data + start, t.size - start);
}

/* Each code point back through the GPT-2 alphabet; llama.cpp spells out strays. */
static void bpe_normal_piece(piece_writer *w, vocab_text t)
{
    const unsigned char *s = (const unsigned char *)t.data;
    for (size_t pos = 0; pos < t.size;) {
        size_t used;
        uint32_t cp = utf8_decode_lenient(s + pos, t.size - pos, &used);
        pos += used;
        int byte = bpe_cp_to_byte(cp);
        if (byte >= 0) {
            char c = (char)byte;
            put(w, &c, 1);
            continue;
        }
        unsigned char enc[4];
        size_t n = text_utf8_encode(cp, enc);
        char hex[16];
        put(w, "[UNK_BYTE_0x", 12);
        for (size_t i = 0; i < n; i++) {
            static const char digits[] = "0123456789abcdef";
            hex[2 * i] = digits[enc[i] >> 4];
            hex[2 * i + 1] = digits[enc[i] & 15];
        }
        put(w, hex, 2 * n);
        put(w, t.data, t.size);
        put(w, "]", 1);
    }
}

size_t vocab_token_to_piece(const corral_vocab *v, corral_token id, char *buf, size_t size,
                            size_t lstrip, bool special)
{
    piece_writer w = {buf, size, 0, lstrip};
    vocab_text t = v->text[id];
    switch (v->type[id]) {
    case TOKEN_CONTROL:
    case TOKEN_UNKNOWN:
        if (special)
            put(&w, t.data, t.size);
        break;
    case TOKEN_USER_DEFINED:
        put(&w, t.data, t.size);
        break;
    case TOKEN_NORMAL: /* WordPiece pieces are stored with SPM's U+2581 word marks */
        if (v->kind == VOCAB_BPE && !v->escape_whitespace)
            bpe_normal_piece(&w, t);
        else
            spm_normal_piece(&w, t);
        break;
    case TOKEN_BYTE:
        if (v->kind != VOCAB_BPE || v->escape_whitespace) {
            int byte = spm_byte_value(t);
            if (byte >= 0) {
                char c = (char)byte;
                put(&w, &c, 1);
            }
        }
        break;
    default: /* UNUSED, UNDEFINED */
        break;
    }
    return w.n;
}

size_t corral_token_to_piece(const corral_vocab *v, corral_token id, char *buf, size_t size,
                             bool special)
{
    if (id < 0 || (uint32_t)id >= v->n_tokens)
        return 0;
    return vocab_token_to_piece(v, id, buf, size, 0, special);
}

/*
 * llama.cpp's clean_up_tokenization_spaces, three in-place passes over text[0..n): " ?" " !"
 * " ." " ," lose the space; " ' " becomes "'"; " 's" " 'm" " 're" " 've" lose the space.
 * Each pass compacts left to right, reading the byte before i as it was before the pass.
 */
static size_t clean_punctuation(char *text, size_t n)
{
    size_t out = n ? 1 : 0;
    for (size_t i = 1; i < n; i++) {
        char x = text[i];
        if (text[i - 1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ','))
            out--;
        text[out++] = x;
    }
    return out;
}

static size_t clean_lone_apostrophe(char *text, size_t n)
{
    size_t out = n ? 1 : 0;
    for (size_t i = 1; i < n; i++) {
        char x = text[i];
        if (x == '\'' && i + 1 < n && text[i - 1] == ' ' && text[i + 1] == ' ') {
            out--;
            text[++i] = '\0'; /* llama.cpp marks the skipped space; the next check sees it */
        }
        text[out++] = x;
    }
    return out;
}

static size_t clean_contractions(char *text, size_t n)
{
    size_t out = n ? 1 : 0;
    for (size_t i = 1; i < n; i++) {
        char x = text[i];
        if (text[i - 1] == ' ' && x == '\'' && i + 1 < n) {
            char x1 = text[i + 1], x2 = i + 2 < n ? text[i + 2] : '\0';
            if (x1 == 's' || x1 == 'm' || (x1 == 'r' && x2 == 'e') || (x1 == 'v' && x2 == 'e'))
                out--;
        }
        text[out++] = x;
    }
    return out;
}

bool corral_detokenize(const corral_vocab *v, const corral_token *ids, size_t n_ids,
                       bool remove_special, bool unparse_special, char *text, size_t max_bytes,
                       size_t *n_bytes, corral_error *err)
{
    *n_bytes = 0;
    for (size_t i = 0; i < n_ids; i++) {
        if (ids[i] < 0 || (uint32_t)ids[i] >= v->n_tokens) {
            corral_error_set(err, "token id %d at position %zu is not in the vocabulary (%u)",
                             ids[i], i, v->n_tokens);
            return false;
        }
    }
    bool remove_space = v->add_space_prefix;
    if (remove_special && v->add_bos && n_ids > 0 && ids[0] == v->bos) {
        remove_space = false; /* llama.cpp: " Hello" after BOS keeps its space */
        ids++;
        n_ids--;
    }
    if (remove_special && v->add_eos && n_ids > 0 && ids[n_ids - 1] == v->eos)
        n_ids--;

    size_t total = 0;
    for (size_t i = 0; i < n_ids; i++) {
        size_t n = vocab_token_to_piece(v, ids[i], NULL, 0, i == 0 && remove_space,
                                        unparse_special);
        if (!checked_add_size(total, n, &total)) {
            corral_error_set(err, "detokenized text is too large");
            return false;
        }
    }
    char *all = malloc(total ? total : 1);
    if (!all) {
        corral_error_set(err, "out of memory (%zu bytes of text)", total);
        return false;
    }
    size_t pos = 0;
    for (size_t i = 0; i < n_ids; i++)
        pos += vocab_token_to_piece(v, ids[i], all + pos, total - pos, i == 0 && remove_space,
                                    unparse_special);
    if (v->clean_spaces) {
        pos = clean_punctuation(all, pos);
        pos = clean_lone_apostrophe(all, pos);
        pos = clean_contractions(all, pos);
    }
    if (pos > 0 && max_bytes > 0)
        memcpy(text, all, pos < max_bytes ? pos : max_bytes);
    *n_bytes = pos;
    free(all);
    return true;
}
