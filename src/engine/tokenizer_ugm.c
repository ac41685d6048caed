/*
 * SentencePiece Unigram tokenization of one raw fragment (tokenizer.ggml.model "t5"), as
 * llama.cpp's UGM tokenizer does it: normalisation through the file's precompiled charsmap
 * (a double-array trie of source strings, longest match wins, and a table of replacements),
 * whitespace handling (U+2581 for spaces, add_space_prefix, remove_extra_whitespaces), then
 * a Viterbi pass over the normalised bytes that picks the tokenization with the highest sum
 * of token scores, one unknown token per code point no token covers. Also the UGM part of the
 * vocabulary: the charsmap read from the file and the prefix tree of the matchable tokens.
 */
#include <float.h>
#include <stdlib.h>
#include <string.h>

#include "util/base64.h"
#include "utf8.h"
#include "vocab.h"

static const char space_marker[3] = {'\xE2', '\x96', '\x81'}; /* U+2581 */
static const char replacement_char[3] = {'\xEF', '\xBF', '\xBD'}; /* U+FFFD */
/* How far below the lowest normal token's score an unknown code point scores. */
#define UNKNOWN_PENALTY 10.0f

/* ---- loading ---- */

/*
 * ollama's snowflake-arctic-embed2 files hold the charsmap as base64, one character a string:
 * decoded into memory the vocabulary owns, as llama.cpp's reading of those files does. NULL
 * with err set when it is not that.
 */
static const uint8_t *decode_charsmap(corral_vocab *v, const gguf_kv *kv, uint64_t *size,
                                      corral_error *err)
{
    char *text = malloc(kv->n);
    if (!text) {
        corral_error_set(err, "out of memory");
        return NULL;
    }
    for (uint64_t i = 0; i < kv->n; i++) {
        gguf_str c = gguf_kv_str(kv, i);
        if (c.size != 1) {
            corral_error_set(err, "tokenizer.ggml.precompiled_charsmap as strings must be base64 "
                             "a character each; element %llu has %llu bytes",
                             (unsigned long long)i, (unsigned long long)c.size);
            free(text);
            return NULL;
        }
        text[i] = c.data[0];
    }
    size_t n = 0;
    uint8_t *blob = util_base64_decode(text, kv->n, kv->n, &n, err);
    free(text);
    if (!blob) {
        corral_error_prefix(err, "tokenizer.ggml.precompiled_charsmap");
        return NULL;
    }
    v->ugm.owned_charsmap = blob;
    *size = n;
    return blob;
}

/*
 * The charsmap blob: a little-endian uint32 size, that many bytes of 32-bit double-array
 * nodes, then NUL-terminated replacement strings. Offsets inside it are checked when used.
 */
static bool load_charsmap(corral_vocab *v, const gguf_file *file, corral_error *err)
{
    const gguf_kv *kv;
    if (!gguf_get_array_opt(file, "tokenizer.ggml.precompiled_charsmap", GGUF_TYPE_COUNT, &kv,
                            err))
        return false;
    if (!kv || kv->n == 0)
        return true; /* no normalisation beyond the whitespace rules */
    const uint8_t *blob = kv->data;
    uint64_t size = kv->n;
    if (kv->elem_type == GGUF_TYPE_STRING) {
        if (!(blob = decode_charsmap(v, kv, &size, err)))
            return false;
    } else if (kv->elem_type != GGUF_TYPE_UINT8 && kv->elem_type != GGUF_TYPE_INT8) {
        corral_error_set(err, "tokenizer.ggml.precompiled_charsmap must be an array of bytes");
        return false;
    }
    if (size < 4) {
        corral_error_set(err, "precompiled_charsmap of %llu bytes has no size header",
                         (unsigned long long)size);
        return false;
    }
    uint64_t trie_bytes = (uint64_t)blob[0] | (uint64_t)blob[1] << 8 | (uint64_t)blob[2] << 16 |
                          (uint64_t)blob[3] << 24;
    /* llama.cpp wants at least one byte of replacements after the trie */
    if (trie_bytes + 4 >= size) {
        corral_error_set(err, "precompiled_charsmap's trie of %llu bytes overruns its %llu bytes",
                         (unsigned long long)trie_bytes, (unsigned long long)size);
        return false;
    }
    v->ugm.nodes = blob + 4;
    v->ugm.n_nodes = (size_t)(trie_bytes / 4);
    v->ugm.replacements = (const char *)blob + 4 + trie_bytes;
    v->ugm.replacements_size = (size_t)(size - 4 - trie_bytes);
    return true;
}

/* Child of node with byte b, or -1. */
static int32_t trie_child(const ugm_trie_node *nodes, int32_t node, unsigned char b)
{
    for (int32_t c = nodes[node].first_child; c >= 0; c = nodes[c].next_sibling)
        if (nodes[c].byte == b)
            return c;
    return -1;
}

static bool is_matchable(uint8_t type)
{
    return type == TOKEN_NORMAL || type == TOKEN_USER_DEFINED || type == TOKEN_UNUSED;
}

/* The prefix tree of normal, user-defined and unused tokens; their lowest normal score. */
static bool build_token_trie(corral_vocab *v, corral_error *err)
{
    size_t cap = 1;
    for (uint32_t id = 0; id < v->n_tokens; id++)
        if (is_matchable(v->type[id]))
            cap += v->text[id].size; /* <= 2^31 tokens of <= 64 KiB: fits size_t */
    if (cap > INT32_MAX) {
        corral_error_set(err, "the vocabulary's tokens are too long in all for a trie");
        return false;
    }
    ugm_trie_node *nodes = malloc(cap * sizeof *nodes);
    if (!nodes) {
        corral_error_set(err, "out of memory");
        return false;
    }
    v->ugm.trie = nodes;
    nodes[0] = (ugm_trie_node){.first_child = -1, .next_sibling = -1, .token = -1};
    int32_t n_nodes = 1;
    float min_score = FLT_MAX;
    for (uint32_t id = 0; id < v->n_tokens; id++) {
        if (!is_matchable(v->type[id]))
            continue;
        if (v->type[id] == TOKEN_NORMAL && v->score[id] < min_score)
            min_score = v->score[id];
        int32_t node = 0;
        vocab_text t = v->text[id];
        for (uint32_t i = 0; i < t.size; i++) {
            unsigned char b = (unsigned char)t.data[i];
            int32_t child = trie_child(nodes, node, b);
            if (child < 0) {
                child = n_nodes++;
                nodes[child] = (ugm_trie_node){.first_child = -1,
                                               .next_sibling = nodes[node].first_child,
                                               .token = -1,
                                               .byte = b};
                nodes[node].first_child = child;
            }
            node = child;
        }
        nodes[node].token = (corral_token)id; /* texts are unique and never empty */
    }
    v->ugm.unknown_score = min_score - UNKNOWN_PENALTY;
    return true;
}

bool ugm_load(corral_vocab *v, const gguf_file *file, corral_error *err)
{
    if (!gguf_get_bool_opt(file, "tokenizer.ggml.remove_extra_whitespaces",
                           &v->ugm.remove_extra_whitespaces, err))
        return false;
    return load_charsmap(v, file, err) && build_token_trie(v, err);
}

void ugm_free(corral_vocab *v)
{
    free(v->ugm.owned_charsmap);
    free(v->ugm.trie);
}

/* ---- normalisation ---- */

static uint32_t charsmap_node(const corral_vocab *v, size_t i)
{
    const uint8_t *p = v->ugm.nodes + 4 * i;
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* A node's BASE: bits 10..30, shifted left by 8 when bit 9 is set. */
static uint32_t node_base(uint32_t node)
{
    return (node >> 10) << ((node & (1u << 9)) >> 6);
}

/*
 * The longest charsmap key that prefixes s[0..len): its length (0 = none) and, in *repl, its
 * replacement. Each step XORs the byte into the current BASE; the node there belongs to
 * this path when its label (bits 0..7, bit 31 clear) is the byte; bit 8 marks a key's end,
 * whose value node (bit 31 set, the rest an offset into the replacements) is BASE away.
 */
static bool charsmap_match(const corral_vocab *v, const char *s, size_t len, size_t *matched,
                           vocab_text *repl, corral_error *err)
{
    *matched = 0;
    if (v->ugm.n_nodes == 0)
        return true;
    uint32_t index = node_base(charsmap_node(v, 0));
    uint32_t value = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == 0)
            break;
        index ^= c;
        if (index >= v->ugm.n_nodes)
            goto out_of_range;
        uint32_t node = charsmap_node(v, index);
        if ((node & ((1u << 31) | 0xFFu)) != c)
            break;
        index ^= node_base(node);
        if (node & (1u << 8)) {
            if (index >= v->ugm.n_nodes)
                goto out_of_range;
            *matched = i + 1;
            value = charsmap_node(v, index) & ~(1u << 31);
        }
    }
    if (*matched == 0)
        return true;
    if (value >= v->ugm.replacements_size) {
        corral_error_set(err, "precompiled_charsmap: replacement offset %u is past its %zu bytes",
                         value, v->ugm.replacements_size);
        return false;
    }
    const char *r = v->ugm.replacements + value;
    const char *nul = memchr(r, '\0', v->ugm.replacements_size - value);
    if (!nul) {
        corral_error_set(err, "precompiled_charsmap: replacement at %u is not terminated", value);
        return false;
    }
    *repl = (vocab_text){r, (uint32_t)(nul - r)};
    return true;
out_of_range:
    corral_error_set(err, "precompiled_charsmap: trie node %u is past its %zu nodes", index,
                     v->ugm.n_nodes);
    return false;
}

/* Bytes of the UTF-8 sequence at s[0..len) by llama.cpp's structural rule, 0 when invalid. */
static size_t sequence_len(const unsigned char *s, size_t len)
{
    size_t n = s[0] < 0x80 ? 1 : s[0] < 0xC0 ? 0 : s[0] < 0xE0 ? 2 : s[0] < 0xF0 ? 3
             : s[0] < 0xF8                   ? 4
                                             : 0;
    if (n == 0 || n > len)
        return 0;
    for (size_t i = 1; i < n; i++)
        if ((s[i] & 0xC0) != 0x80)
            return 0;
    return n;
}

/* The longest user-defined token that prefixes s[0..len): its length, 0 when none. */
static size_t user_defined_match(const corral_vocab *v, const char *s, size_t len)
{
    const ugm_trie_node *nodes = v->ugm.trie;
    size_t best = 0;
    int32_t node = 0;
    for (size_t i = 0; i < len; i++) {
        node = trie_child(nodes, node, (unsigned char)s[i]);
        if (node < 0)
            break;
        if (nodes[node].token >= 0 && v->type[nodes[node].token] == TOKEN_USER_DEFINED)
            best = i + 1;
    }
    return best;
}

/* The normalised bytes, grown in scratch->bytes[0]. */
typedef struct byte_buf {
    tokenize_scratch *scratch;
    size_t n;
} byte_buf;

/* Replacements come from the file and may be long: the normalised text is capped. */
#define UGM_MAX_NORMALIZED_BYTES (4 * VOCAB_MAX_TEXT_BYTES)

static bool buf_put(byte_buf *b, const char *bytes, size_t n, corral_error *err)
{
    if (n > UGM_MAX_NORMALIZED_BYTES - b->n) {
        corral_error_set(err, "the normalised text is over %zu bytes", UGM_MAX_NORMALIZED_BYTES);
        return false;
    }
    if (!tokenize_scratch_bytes(b->scratch, 0, b->n + n, err))
        return false;
    memcpy(b->scratch->bytes[0] + b->n, bytes, n);
    b->n += n;
    return true;
}

static bool normalize(const corral_vocab *v, const char *text, size_t len, byte_buf *out,
                      corral_error *err)
{
    bool merge_spaces = v->ugm.remove_extra_whitespaces;
    bool prefix_pending = v->add_space_prefix, in_word = false;
    for (size_t pos = 0; pos < len;) {
        vocab_text piece;
        size_t used = user_defined_match(v, text + pos, len - pos);
        if (used > 0) {
            piece = (vocab_text){text + pos, (uint32_t)used};
        } else {
            if (!charsmap_match(v, text + pos, len - pos, &used, &piece, err))
                return false;
            if (used == 0) {
                used = sequence_len((const unsigned char *)text + pos, len - pos);
                piece = used ? (vocab_text){text + pos, (uint32_t)used}
                             : (vocab_text){replacement_char, 3};
                used = used ? used : 1;
            }
        }
        for (uint32_t i = 0; i < piece.size; i++) {
            char c = piece.data[i];
            if (c == ' ') {
                in_word = false;
                if (!merge_spaces && !buf_put(out, space_marker, 3, err))
                    return false;
                continue;
            }
            if (!in_word) {
                in_word = true;
                /* merged spaces: one marker before every word, the first included */
                if ((prefix_pending || merge_spaces) && !buf_put(out, space_marker, 3, err))
                    return false;
                prefix_pending = false;
            }
            if (!buf_put(out, &c, 1, err))
                return false;
        }
        pos += used;
    }
    return true;
}

/* ---- Viterbi ---- */

/* The best tokenization of the normalised bytes [0, end): its last token and where it starts. */
typedef struct ugm_best {
    double score;
    uint32_t start;
    corral_token token;
} ugm_best;

static void challenge(ugm_best *best, size_t end, double score, size_t start, corral_token token)
{
    if (score > best[end].score)
        best[end] = (ugm_best){score, (uint32_t)start, token};
}

bool ugm_tokenize_fragment(const corral_vocab *v, const char *text, size_t len,
                           tokenize_scratch *scratch, token_list *out, corral_error *err)
{
    byte_buf norm = {scratch, 0};
    if (!normalize(v, text, len, &norm, err))
        return false;
    size_t n = norm.n;
    if (n == 0)
        return true;
    const char *s = scratch->bytes[0];
    /* best[i] for every normalised prefix length i, in bytes[1] */
    if (!tokenize_scratch_bytes(scratch, 1, (n + 1) * sizeof(ugm_best), err))
        return false;
    ugm_best *best = (ugm_best *)(void *)scratch->bytes[1];
    best[0] = (ugm_best){0.0, 0, v->unk};
    for (size_t i = 1; i <= n; i++)
        best[i] = (ugm_best){-DBL_MAX, 0, v->unk};

    const ugm_trie_node *nodes = v->ugm.trie;
    for (size_t pos = 0; pos < n;) {
        size_t cp_len = utf8_len_from_lead((unsigned char)s[pos]);
        if (cp_len > n - pos)
            cp_len = n - pos;
        bool whole_cp = false;
        double base = best[pos].score;
        int32_t node = 0;
        for (size_t end = pos; end < n;) {
            node = trie_child(nodes, node, (unsigned char)s[end++]);
            if (node < 0)
                break;
            corral_token id = nodes[node].token;
            if (id < 0)
                continue;
            whole_cp |= end - pos == cp_len;
            /* user-defined tokens score 0, above every normal token's log probability */
            double score = v->type[id] == TOKEN_USER_DEFINED ? 0.0 : (double)v->score[id];
            challenge(best, end, base + score, pos, id);
        }
        if (!whole_cp)
            challenge(best, pos + cp_len, base + (double)v->ugm.unknown_score, pos, v->unk);
        pos += cp_len;
    }

    /* walk back from the end; a run of unknown code points is one unknown token */
    size_t first = out->n;
    bool prev_unknown = false;
    for (size_t end = n; end > 0; end = best[end].start) {
        corral_token id = best[end].token;
        bool unknown = id == v->unk;
        if (!(prev_unknown && unknown) && id >= 0 && !token_list_push(out, id, err))
            return false;
        prev_unknown = unknown;
    }
    for (size_t i = first, j = out->n; i + 1 < j; i++, j--) {
        corral_token t = out->ids[i];
        out->ids[i] = out->ids[j - 1];
        out->ids[j - 1] = t;
    }
    return true;
}
