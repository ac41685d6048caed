/*
 * tokenizer.json (+ tokenizer_config.json, generation_config.json) to GGUF tokenizer keys
 * (see hf_tokenizer.h). Ids index the token array, so every id is bounded before use.
 */
#include "convert/hf_tokenizer.h"

#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/base64.h"

enum { TOKEN_NORMAL = 1, TOKEN_UNKNOWN = 2, TOKEN_CONTROL = 3, TOKEN_USER_DEFINED = 4,
       TOKEN_UNUSED = 5 };

/* A SentencePiece precompiled charsmap: XLM-RoBERTa's is a few hundred kilobytes. */
#define MAX_CHARSMAP_BYTES ((size_t)16 << 20)

/* tokenizer_config.json's name for a special token, and GGUF's */
static const struct {
    const char *hf;
    const char *gguf;
} special_names[] = {
    {"bos", "bos"}, {"eos", "eos"}, {"unk", "unknown"}, {"sep", "seperator"},
    {"pad", "padding"}, {"cls", "cls"}, {"mask", "mask"},
};
#define N_SPECIAL (sizeof special_names / sizeof special_names[0])

/* The most "[PAD<id>]" tokens a vocabulary is padded with (ids no token has, up to the largest
 * id or config.json's vocab_size). Checkpoints pad to a round size, a few thousand ids at most;
 * without a bound a few bytes of config.json or tokenizer.json would make millions of tokens. */
#define MAX_PADDING (1u << 16)

/*
 * The SHA-256 of a tokenizer's Split patterns, concatenated, names its pre-tokenizer (as
 * ollama's converter tells them apart); an unknown one falls back to "default".
 */
static const struct {
    const char *sha256;
    const char *name;
} pre_names[] = {
    {"d98f9631be1e9607a9848c26c1f9eac1aa9fc21ac6ba82a2fc0741af9780a48f", "llama-bpe"},
    {"03df5c5863ad70781dcfdef491ead25140f895fe8010964be0daefe27be32b02", "deepseek-llm"},
    {"21cde974d587f0d54dc8d56b183cc1e6239600172035c68fbd6d4b9f8da0576e", "deepseek-coder"},
    {"1ff7f41064896984db5d1bb6ff64fa4bc29007d08c1b439e505b7392777a319e", "qwen2"},
    {"00431aed57e696b747435f734d1e3b9b1bfd931a121fb5cac7129e97c181e9ba", "qwen35"},
    {"b92c0824a58e1d8dc3221cf3e12c433c3a86f57e46d57229993489f0798e7702", "laguna"},
    /* o200k (gpt-oss's harmony tokenizer), which ollama's gpt-oss converter names outright */
    {"2d1b8dc11e89af71459b36004f698ab3693f59fd84f63e8ec2b49564ab857420", "gpt-4o"},
};

typedef struct special_token {
    bool found;      /* named by tokenizer_config.json and among the added tokens */
    uint32_t id;
    bool add_set;
    bool add;
    int32_t *ids;    /* generation_config.json's list, or NULL */
    size_t n_ids;
} special_token;

struct hf_vocab {
    /* "gpt2" (tokenizer.json's BPE), "llama" (SentencePiece, or Gemma 4's BPE), "bert"
     * (WordPiece) or "t5" (Unigram) */
    const char *model;
    bool bpe; /* tokenizer.json's BPE: its merges written, even when it has none */
    bool bos_add_false; /* add_bos_token written false, whether or not there is a bos */
    gguf_str *tokens;
    int32_t *types;
    float *scores;
    uint32_t n;
    gguf_str *merges;
    size_t n_merges;
    char **owned;     /* strings made here (padding names, joined merge pairs) */
    size_t n_owned, owned_cap;
    const char *pre;
    char *chat_template;
    special_token special[N_SPECIAL];
    special_token eog[2]; /* end of turn and of message (hf_vocab_eog_from_eos_ids) */
    /* Unigram's text rules: a space mark before the text, runs of spaces made one, and the
     * charsmap that normalizes the text (NULL when there is none) */
    bool add_space_prefix, remove_extra_whitespaces;
    uint8_t *charsmap;
    size_t charsmap_len;
};

void hf_vocab_free(hf_vocab *v)
{
    if (!v)
        return;
    for (size_t i = 0; i < v->n_owned; i++)
        free(v->owned[i]);
    free(v->owned);
    free(v->tokens);
    free(v->types);
    free(v->scores);
    free(v->merges);
    free(v->chat_template);
    free(v->charsmap);
    for (size_t i = 0; i < N_SPECIAL; i++)
        free(v->special[i].ids);
    free(v);
}

void hf_vocab_eog_from_eos_ids(hf_vocab *v)
{
    const special_token *eos = &v->special[1];
    for (size_t i = 1; i < 3 && i < eos->n_ids; i++) {
        v->eog[i - 1].found = true;
        v->eog[i - 1].id = (uint32_t)eos->ids[i];
    }
}

void hf_vocab_set_pre(hf_vocab *v, const char *pre)
{
    v->pre = pre;
}

void hf_vocab_truncate(hf_vocab *v, uint32_t n)
{
    if (n == 0 || n >= v->n)
        return;
    v->n = n;
    for (size_t s = 0; s < N_SPECIAL; s++) {
        special_token *sp = &v->special[s];
        sp->found = sp->found && sp->id < n;
        size_t kept = 0;
        for (size_t i = 0; i < sp->n_ids; i++)
            if ((uint32_t)sp->ids[i] < n)
                sp->ids[kept++] = sp->ids[i];
        sp->n_ids = kept;
    }
}

uint32_t hf_vocab_count(const hf_vocab *v)
{
    return v->n;
}

/* Keep s (freed on failure); the list doubles as it fills, since a vocabulary's merges may
 * make hundreds of thousands of strings. */
static char *own(hf_vocab *v, char *s)
{
    if (s && v->n_owned == v->owned_cap) {
        size_t cap = v->owned_cap ? v->owned_cap * 2 : 256;
        char **grown = realloc(v->owned, cap * sizeof *grown);
        if (grown) {
            v->owned = grown;
            v->owned_cap = cap;
        }
    }
    if (!s || v->n_owned == v->owned_cap) {
        free(s);
        return NULL;
    }
    return v->owned[v->n_owned++] = s;
}

static bool oom(corral_error *err)
{
    corral_error_set(err, "out of memory");
    return false;
}

static bool valid_id(const json_t *value, uint32_t *out)
{
    if (!json_is_integer(value) || json_integer_value(value) < 0 ||
        json_integer_value(value) >= (json_int_t)HF_MAX_VOCAB)
        return false;
    *out = (uint32_t)json_integer_value(value);
    return true;
}

/* Ids no token has: "[PAD<id>]" of the given type and score. */
static bool fill_gaps(hf_vocab *v, int32_t type, float score, corral_error *err)
{
    for (uint32_t id = 0; id < v->n; id++) {
        if (v->tokens[id].data)
            continue;
        char name[32];
        int len = snprintf(name, sizeof name, "[PAD%u]", id);
        if (!own(v, strdup(name)))
            return oom(err);
        v->tokens[id] = (gguf_str){v->owned[v->n_owned - 1], (size_t)len};
        v->types[id] = type;
        v->scores[id] = score;
    }
    return true;
}

/* *n raised to one past the largest id of the added tokens, each checked. */
static bool reach_added_ids(const json_t *added, uint64_t *n, corral_error *err)
{
    size_t i;
    const json_t *token;
    json_array_foreach(added, i, token) {
        uint32_t id;
        if (!valid_id(json_object_get(token, "id"), &id) ||
            !json_is_string(json_object_get(token, "content"))) {
            corral_error_set(err, "tokenizer.json: added_tokens[%zu] needs a content string and "
                             "an id below %u", i, HF_MAX_VOCAB);
            return false;
        }
        *n = id + 1u > *n ? id + 1u : *n;
    }
    return true;
}

/* Refuses an id space of n that leaves more than MAX_PADDING ids without one of the given
 * tokens (or pieces: `what`). */
static bool check_padding(uint64_t given, uint64_t n, const char *what, corral_error *err)
{
    if (n > given && n - given > MAX_PADDING) {
        corral_error_set(err, "tokenizer.json: its %llu %ss would be padded to %llu ids (the "
                         "largest id or config.json's vocab_size): more than %u ids without a "
                         "%s", (unsigned long long)given, what, (unsigned long long)n,
                         MAX_PADDING, what);
        return false;
    }
    return true;
}

/* v's token, type and score arrays for v->n ids, zeroed. */
static bool alloc_token_arrays(hf_vocab *v, corral_error *err)
{
    if (!(v->tokens = calloc(v->n, sizeof *v->tokens)) ||
        !(v->types = calloc(v->n, sizeof *v->types)) ||
        !(v->scores = calloc(v->n, sizeof *v->scores)))
        return oom(err);
    return true;
}

/* The size of the id space: one past the largest id, or vocab_size if larger. */
static bool count_ids(const json_t *vocab, const json_t *added, uint64_t vocab_size,
                      uint32_t *out, corral_error *err)
{
    uint64_t n = vocab_size;
    const char *text;
    const json_t *id_value;
    json_object_foreach((json_t *)vocab, text, id_value) {
        uint32_t id;
        if (!valid_id(id_value, &id)) {
            corral_error_set(err, "tokenizer.json: token '%.100s' has no id below %u", text,
                             HF_MAX_VOCAB);
            return false;
        }
        n = id + 1u > n ? id + 1u : n;
    }
    if (!reach_added_ids(added, &n, err))
        return false;
    if (n == 0 || n > HF_MAX_VOCAB) {
        corral_error_set(err, "tokenizer.json: %s", n ? "vocab_size is too large"
                                                      : "the vocabulary is empty");
        return false;
    }
    uint64_t given = json_object_size(vocab) + json_array_size(added);
    if (!check_padding(given, n, "token", err))
        return false;
    *out = (uint32_t)n;
    return true;
}

static bool read_tokens(hf_vocab *v, const json_t *model, const json_t *added,
                        uint64_t vocab_size, corral_error *err)
{
    const json_t *vocab = json_object_get(model, "vocab");
    if (!json_is_object(vocab) || (added && !json_is_array(added))) {
        corral_error_set(err, "tokenizer.json: model.vocab must be an object and added_tokens "
                         "an array");
        return false;
    }
    if (!count_ids(vocab, added, vocab_size, &v->n, err))
        return false;
    if (!alloc_token_arrays(v, err))
        return false;
    const char *text;
    const json_t *id_value;
    json_object_foreach((json_t *)vocab, text, id_value) {
        uint32_t id = (uint32_t)json_integer_value(id_value);
        if (v->tokens[id].data) {
            corral_error_set(err, "tokenizer.json: id %u is given to two tokens", id);
            return false;
        }
        v->tokens[id] = (gguf_str){text, strlen(text)};
        v->types[id] = TOKEN_NORMAL;
    }
    size_t i;
    const json_t *token;
    json_array_foreach(added, i, token) { /* an added token replaces the vocabulary's */
        uint32_t id = (uint32_t)json_integer_value(json_object_get(token, "id"));
        const json_t *content = json_object_get(token, "content");
        v->tokens[id] = (gguf_str){json_string_value(content), json_string_length(content)};
        v->types[id] = json_is_true(json_object_get(token, "special")) ? TOKEN_CONTROL
                                                                       : TOKEN_USER_DEFINED;
    }
    for (uint32_t id = 0; id < v->n; id++)
        v->scores[id] = (float)id;
    return fill_gaps(v, TOKEN_USER_DEFINED, -1.0f, err);
}

static bool read_merges(hf_vocab *v, const json_t *model, corral_error *err)
{
    const json_t *merges = json_object_get(model, "merges");
    if (!merges || json_is_null(merges))
        return true;
    if (!json_is_array(merges) || json_array_size(merges) > HF_MAX_VOCAB) {
        corral_error_set(err, "tokenizer.json: model.merges must be an array of at most %u",
                         HF_MAX_VOCAB);
        return false;
    }
    if (json_array_size(merges) && !(v->merges = calloc(json_array_size(merges),
                                                        sizeof *v->merges)))
        return oom(err);
    size_t i;
    const json_t *merge;
    json_array_foreach(merges, i, merge) {
        if (json_is_string(merge)) { /* "a b" */
            v->merges[i] = (gguf_str){json_string_value(merge), json_string_length(merge)};
        } else if (json_is_array(merge) && json_array_size(merge) == 2 &&
                   json_is_string(json_array_get(merge, 0)) &&
                   json_is_string(json_array_get(merge, 1))) { /* ["a", "b"] */
            const json_t *a = json_array_get(merge, 0), *b = json_array_get(merge, 1);
            size_t na = json_string_length(a), nb = json_string_length(b);
            char *joined = malloc(na + nb + 2);
            if (!joined || !own(v, joined))
                return oom(err);
            memcpy(joined, json_string_value(a), na);
            joined[na] = ' ';
            memcpy(joined + na + 1, json_string_value(b), nb);
            joined[na + nb + 1] = '\0';
            v->merges[i] = (gguf_str){joined, na + nb + 1};
        } else {
            corral_error_set(err, "tokenizer.json: merges[%zu] is neither \"a b\" nor [\"a\", "
                             "\"b\"]", i);
            return false;
        }
    }
    v->n_merges = json_array_size(merges);
    return true;
}

static bool name_pre_tokenizer(hf_vocab *v, const json_t *tokenizer, corral_error *err)
{
    v->pre = "default";
    const json_t *parts = json_object_get(json_object_get(tokenizer, "pre_tokenizer"),
                                          "pretokenizers");
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    if (!ctx || !EVP_DigestInit_ex(ctx, EVP_sha256(), NULL)) {
        EVP_MD_CTX_free(ctx);
        return oom(err);
    }
    size_t i;
    const json_t *part;
    json_array_foreach(parts, i, part) {
        const char *type = json_string_value(json_object_get(part, "type"));
        const json_t *regex = json_object_get(json_object_get(part, "pattern"), "Regex");
        if (type && strcmp(type, "Split") == 0 && json_is_string(regex))
            EVP_DigestUpdate(ctx, json_string_value(regex), json_string_length(regex));
    }
    unsigned char digest[32];
    unsigned int len = 0;
    bool ok = EVP_DigestFinal_ex(ctx, digest, &len) && len == 32;
    EVP_MD_CTX_free(ctx);
    if (!ok)
        return oom(err);
    char hex[65];
    for (int b = 0; b < 32; b++)
        snprintf(hex + 2 * b, 3, "%02x", digest[b]);
    for (size_t n = 0; n < sizeof pre_names / sizeof pre_names[0]; n++)
        if (strcmp(hex, pre_names[n].sha256) == 0)
            v->pre = pre_names[n].name;
    return true;
}

static bool read_chat_template(hf_vocab *v, const json_t *config, corral_error *err)
{
    const json_t *t = json_object_get(config, "chat_template");
    const char *text = NULL;
    if (!t || json_is_null(t))
        return true;
    if (json_is_string(t)) {
        text = json_string_value(t);
    } else if (json_is_array(t)) { /* named templates: the "default" one */
        size_t i;
        const json_t *named;
        json_array_foreach(t, i, named) {
            const char *name = json_string_value(json_object_get(named, "name"));
            if (name && strcmp(name, "default") == 0)
                text = json_string_value(json_object_get(named, "template"));
        }
    } else {
        corral_error_set(err, "tokenizer_config.json: chat_template must be a string or a list "
                         "of named templates");
        return false;
    }
    if (text && !(v->chat_template = strdup(text)))
        return oom(err);
    return true;
}

static bool read_specials(hf_vocab *v, const json_t *added, const json_t *config,
                          const json_t *generation, corral_error *err)
{
    for (size_t s = 0; s < N_SPECIAL; s++) {
        special_token *sp = &v->special[s];
        char key[32];
        snprintf(key, sizeof key, "add_%s_token", special_names[s].hf);
        const json_t *add = json_object_get(config, key);
        if (add && !json_is_null(add)) {
            if (!json_is_boolean(add)) {
                corral_error_set(err, "tokenizer_config.json: %s must be true or false", key);
                return false;
            }
            sp->add_set = true;
            sp->add = json_is_true(add);
        }
        snprintf(key, sizeof key, "%s_token", special_names[s].hf);
        const json_t *token = json_object_get(config, key);
        if (json_is_object(token))
            token = json_object_get(token, "content");
        if (!json_is_string(token))
            continue;
        size_t i;
        const json_t *a;
        json_array_foreach(added, i, a) { /* the last one with that content, as a map keeps */
            const json_t *content = json_object_get(a, "content");
            if (json_string_length(content) == json_string_length(token) &&
                memcmp(json_string_value(content), json_string_value(token),
                       json_string_length(token)) == 0) {
                sp->found = true;
                sp->id = (uint32_t)json_integer_value(json_object_get(a, "id"));
            }
        }
        /* a SentencePiece model's own pieces hold its special tokens */
        bool pieces = strcmp(v->model, "llama") == 0 || strcmp(v->model, "t5") == 0;
        for (uint32_t id = 0; !sp->found && pieces && id < v->n; id++)
            if (v->tokens[id].size == json_string_length(token) &&
                memcmp(v->tokens[id].data, json_string_value(token), v->tokens[id].size) == 0) {
                sp->found = true;
                sp->id = id;
            }
        snprintf(key, sizeof key, "%s_token_id", special_names[s].hf);
        const json_t *ids = json_object_get(generation, key);
        if (!sp->found || !json_is_array(ids))
            continue;
        if (json_array_size(ids) > 1024 ||
            !(sp->ids = malloc((json_array_size(ids) ? json_array_size(ids) : 1) *
                               sizeof *sp->ids))) {
            corral_error_set(err, "generation_config.json: %s is too long", key);
            return false;
        }
        const json_t *id;
        json_array_foreach(ids, i, id) {
            uint32_t value;
            if (!valid_id(id, &value) || value >= v->n) {
                corral_error_set(err, "generation_config.json: %s[%zu] is not a token id", key,
                                 i);
                return false;
            }
            sp->ids[i] = (int32_t)value;
        }
        sp->n_ids = json_array_size(ids);
    }
    return true;
}

/* ---- SentencePiece's tokenizer.model: a protobuf ModelProto ---- */

typedef struct proto_reader {
    const uint8_t *p, *end;
} proto_reader;

static bool proto_varint(proto_reader *r, uint64_t *out)
{
    uint64_t v = 0;
    for (int shift = 0; shift < 64 && r->p < r->end; shift += 7) {
        uint8_t b = *r->p++;
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *out = v;
            return true;
        }
    }
    return false;
}

/* The next field: its number, wire type, and for a length-delimited one its bytes. */
static bool proto_field(proto_reader *r, uint32_t *field, uint32_t *wire, uint64_t *value,
                        proto_reader *bytes)
{
    uint64_t key;
    if (!proto_varint(r, &key) || key >> 32)
        return false;
    *field = (uint32_t)(key >> 3);
    *wire = (uint32_t)(key & 7);
    switch (*wire) {
    case 0: return proto_varint(r, value);
    case 1:
    case 5: {
        size_t n = *wire == 1 ? 8 : 4;
        if ((size_t)(r->end - r->p) < n)
            return false;
        *value = 0;
        for (size_t i = 0; i < n; i++)
            *value |= (uint64_t)r->p[i] << (8 * i);
        r->p += n;
        return true;
    }
    case 2:
        if (!proto_varint(r, value) || *value > (uint64_t)(r->end - r->p))
            return false;
        *bytes = (proto_reader){r->p, r->p + *value};
        r->p += *value;
        return true;
    default: return false; /* groups: not in a SentencePiece model */
    }
}

/* Room for n tokens in the three arrays. */
static bool grow(hf_vocab *v, size_t n, corral_error *err)
{
    gguf_str *tokens = realloc(v->tokens, n * sizeof *tokens);
    if (tokens)
        v->tokens = tokens;
    int32_t *types = tokens ? realloc(v->types, n * sizeof *types) : NULL;
    if (types)
        v->types = types;
    float *scores = types ? realloc(v->scores, n * sizeof *scores) : NULL;
    if (!scores)
        return oom(err);
    v->scores = scores;
    return true;
}

/* Append one SentencePiece message: piece (1), score (2, float), type (3, NORMAL if absent). */
static bool add_piece(hf_vocab *v, uint32_t *cap, proto_reader piece, corral_error *err)
{
    if (v->n == *cap) {
        uint32_t more = *cap ? *cap * 2 : 1024;
        if (!grow(v, more, err))
            return false;
        *cap = more;
    }
    gguf_str text = {NULL, 0};
    float score = 0;
    uint64_t type = 1;
    while (piece.p < piece.end) {
        uint32_t field, wire;
        uint64_t value = 0;
        proto_reader bytes = {0};
        if (!proto_field(&piece, &field, &wire, &value, &bytes)) {
            corral_error_set(err, "tokenizer.model: piece %u is malformed", v->n);
            return false;
        }
        if (field == 1 && wire == 2) {
            text = (gguf_str){(const char *)bytes.p, (size_t)value};
        } else if (field == 2 && wire == 5) {
            uint32_t bits = (uint32_t)value;
            memcpy(&score, &bits, 4);
        } else if (field == 3 && wire == 0) {
            type = value;
        }
    }
    if (!text.data || type < 1 || type > 6) {
        corral_error_set(err, "tokenizer.model: piece %u has no text or an unknown type", v->n);
        return false;
    }
    v->tokens[v->n] = text;
    v->scores[v->n] = score;
    v->types[v->n] = (int32_t)type;
    v->n++;
    return true;
}

static bool read_spm(hf_vocab *v, const uint8_t *bytes, size_t len, corral_error *err)
{
    proto_reader r = {bytes, bytes + len};
    uint32_t cap = 0;
    while (r.p < r.end) {
        uint32_t field, wire;
        uint64_t value = 0;
        proto_reader sub = {0};
        if (!proto_field(&r, &field, &wire, &value, &sub)) {
            corral_error_set(err, "tokenizer.model is not a SentencePiece model");
            return false;
        }
        if (field != 1 || wire != 2)
            continue;
        if (v->n == HF_MAX_VOCAB) {
            corral_error_set(err, "tokenizer.model has more than %u pieces", HF_MAX_VOCAB);
            return false;
        }
        if (!add_piece(v, &cap, sub, err))
            return false;
    }
    if (v->n == 0) {
        corral_error_set(err, "tokenizer.model has no pieces");
        return false;
    }
    return true;
}

/* Gemma's turn and tool-call marks, normal pieces in its tokenizer.model, are control tokens
 * as ollama's converter makes them, so that a text cannot spell them. */
static const char *const gemma_marks[] = {
    "<end_of_turn>", "<start_of_turn>", "<start_function_declaration>",
    "<end_function_declaration>", "<start_function_call>", "<end_function_call>",
    "<start_function_response>", "<end_function_response>", "<escape>",
};

/* Gemma's marks and special_tokens_map.json's additional special tokens are control tokens,
 * as ollama reads them. */
static void mark_control_pieces(hf_vocab *v, const json_t *special_tokens_map)
{
    for (uint32_t id = 0; id < v->n; id++)
        for (size_t m = 0; v->types[id] == TOKEN_NORMAL &&
                           m < sizeof gemma_marks / sizeof gemma_marks[0]; m++)
            if (v->tokens[id].size == strlen(gemma_marks[m]) &&
                memcmp(v->tokens[id].data, gemma_marks[m], v->tokens[id].size) == 0)
                v->types[id] = TOKEN_CONTROL;
    size_t i;
    const json_t *t;
    json_array_foreach(json_object_get(special_tokens_map, "additional_special_tokens"), i, t) {
        const json_t *content = json_is_object(t) ? json_object_get(t, "content") : t;
        if (!json_is_string(content))
            continue;
        for (uint32_t id = 0; id < v->n; id++)
            if (v->types[id] == TOKEN_NORMAL && v->tokens[id].size == json_string_length(content) &&
                memcmp(v->tokens[id].data, json_string_value(content), v->tokens[id].size) == 0)
                v->types[id] = TOKEN_CONTROL;
    }
}

typedef struct added_entry {
    uint32_t id;
    const char *content;
} added_entry;

static int by_id(const void *a, const void *b)
{
    uint32_t x = ((const added_entry *)a)->id, y = ((const added_entry *)b)->id;
    return x < y ? -1 : x > y;
}

/*
 * added_tokens.json ({"content": id}): user-defined tokens after the model's pieces, in id
 * order with no gap; one that repeats a piece at its id is already there.
 */
static bool read_added_tokens_json(hf_vocab *v, const json_t *added, corral_error *err)
{
    size_t n = json_object_size(added), k = 0;
    if (n == 0)
        return true;
    added_entry *entries = n <= HF_MAX_VOCAB ? malloc(n * sizeof *entries) : NULL;
    if (!entries)
        return oom(err);
    const char *content;
    const json_t *id_value;
    bool ok = true;
    json_object_foreach((json_t *)added, content, id_value) {
        if (!valid_id(id_value, &entries[k].id)) {
            corral_error_set(err, "added_tokens.json: '%.100s' has no id below %u", content,
                             HF_MAX_VOCAB);
            ok = false;
            break;
        }
        entries[k++].content = content;
    }
    qsort(entries, k, sizeof *entries, by_id);
    for (size_t i = 0; ok && i < k; i++) {
        const added_entry *e = &entries[i];
        size_t len = strlen(e->content);
        if (e->id < v->n) {
            if (v->tokens[e->id].size != len || memcmp(v->tokens[e->id].data, e->content, len)) {
                corral_error_set(err, "added_tokens.json: '%.100s' is not token %u", e->content,
                                 e->id);
                ok = false;
            }
            continue;
        }
        if (e->id != v->n) {
            corral_error_set(err, "added_tokens.json: no token has id %u", v->n);
            ok = false;
        } else if ((ok = grow(v, (size_t)v->n + 1, err))) {
            v->tokens[v->n] = (gguf_str){e->content, len};
            v->types[v->n] = TOKEN_USER_DEFINED;
            v->scores[v->n] = -1000.0f;
            v->n++;
        }
    }
    free(entries);
    return ok;
}

/* The pieces padded to vocab_size. */
static bool pad_to(hf_vocab *v, uint64_t vocab_size, corral_error *err)
{
    if (vocab_size <= v->n)
        return true;
    if (vocab_size - v->n > MAX_PADDING) {
        corral_error_set(err, "config.json: vocab_size %llu is more than %u ids past "
                         "tokenizer.model's %u tokens", (unsigned long long)vocab_size,
                         MAX_PADDING, v->n);
        return false;
    }
    if (!grow(v, (size_t)vocab_size, err))
        return false;
    for (uint64_t id = v->n; id < vocab_size; id++)
        v->tokens[id] = (gguf_str){NULL, 0};
    v->n = (uint32_t)vocab_size;
    return fill_gaps(v, TOKEN_USER_DEFINED, -1.0f, err);
}

static bool check_vocab_size(uint64_t vocab_size, corral_error *err)
{
    if (vocab_size > HF_MAX_VOCAB) {
        corral_error_set(err, "config.json: vocab_size %llu is larger than %u",
                         (unsigned long long)vocab_size, HF_MAX_VOCAB);
        return false;
    }
    return true;
}

hf_vocab *hf_vocab_load_spm(const void *model, size_t model_len, const json_t *tokenizer,
                            const json_t *added_tokens, const json_t *special_tokens_map,
                            const json_t *tokenizer_config, const json_t *generation_config,
                            const char *chat_template, uint64_t vocab_size, corral_error *err)
{
    if (!check_vocab_size(vocab_size, err))
        return NULL;
    hf_vocab *v = calloc(1, sizeof *v);
    if (!v) {
        oom(err);
        return NULL;
    }
    v->model = "llama";
    v->pre = "default";
    const json_t *added = json_object_get(tokenizer, "added_tokens");
    if (!json_is_array(added))
        added = NULL;
    bool ok = read_spm(v, model, model_len, err);
    if (ok)
        mark_control_pieces(v, special_tokens_map);
    ok = ok && read_added_tokens_json(v, added_tokens, err) && pad_to(v, vocab_size, err) &&
         read_chat_template(v, tokenizer_config, err) &&
         read_specials(v, added, tokenizer_config, generation_config, err);
    if (ok && !v->chat_template && chat_template && !(v->chat_template = strdup(chat_template)))
        ok = oom(err);
    if (!ok) {
        hf_vocab_free(v);
        return NULL;
    }
    return v;
}

/* tokenizer.json's BPE over SentencePiece pieces (Llama 2, Mistral): not byte-level BPE. */
static bool is_spm_style(const json_t *tokenizer)
{
    const json_t *model = json_object_get(tokenizer, "model");
    const char *pre = json_string_value(json_object_get(json_object_get(tokenizer,
                                                                        "pre_tokenizer"),
                                                        "type"));
    return json_is_true(json_object_get(model, "byte_fallback")) ||
           (pre && strcmp(pre, "Metaspace") == 0);
}

/*
 * WordPiece's tokens as the "bert" model spells them: a word's first piece with SentencePiece's
 * space mark ("▁"), a continuation ("##ing") without its marker, bracketed tokens ("[CLS]",
 * "[PAD12]") as they are.
 */
static bool mark_word_starts(hf_vocab *v, corral_error *err)
{
    static const char mark[] = "\xe2\x96\x81"; /* U+2581 */
    for (uint32_t id = 0; id < v->n; id++) {
        gguf_str t = v->tokens[id];
        if (t.size >= 2 && t.data[0] == '[' && t.data[t.size - 1] == ']')
            continue;
        if (t.size >= 2 && t.data[0] == '#' && t.data[1] == '#') {
            v->tokens[id] = (gguf_str){t.data + 2, t.size - 2};
            continue;
        }
        char *marked = malloc(t.size + sizeof mark);
        if (!marked || !own(v, marked))
            return oom(err);
        memcpy(marked, mark, sizeof mark - 1);
        memcpy(marked + sizeof mark - 1, t.data, t.size);
        marked[t.size + sizeof mark - 1] = '\0';
        v->tokens[id] = (gguf_str){marked, t.size + sizeof mark - 1};
    }
    return true;
}

/* ---- tokenizer.json's Unigram: SentencePiece's model as the "t5" one ---- */

/* The id space: model.vocab's pairs, the added tokens' ids and vocab_size, whichever reaches
 * furthest, within MAX_PADDING ids of the pairs. */
static bool count_unigram_ids(const json_t *vocab, const json_t *added, uint64_t vocab_size,
                              uint32_t *out, corral_error *err)
{
    uint64_t given = json_array_size(vocab), n = given > vocab_size ? given : vocab_size;
    if (given == 0 || given > HF_MAX_VOCAB) {
        corral_error_set(err, "tokenizer.json: a Unigram model.vocab must hold 1 to %u pieces",
                         HF_MAX_VOCAB);
        return false;
    }
    if (!reach_added_ids(added, &n, err))
        return false;
    if (!check_padding(given, n, "piece", err))
        return false;
    *out = (uint32_t)n;
    return true;
}

/*
 * model.vocab's [piece, score] pairs in id order; the unknown piece (unk_id) of type unknown,
 * the added tokens control (special) or user-defined; ids without a piece "[PAD<id>]", unused,
 * as llama.cpp's converter pads an XLM-RoBERTa vocabulary.
 */
static bool read_unigram_pieces(hf_vocab *v, const json_t *model, const json_t *added,
                                uint64_t vocab_size, corral_error *err)
{
    const json_t *vocab = json_object_get(model, "vocab");
    if (!json_is_array(vocab) || (added && !json_is_array(added))) {
        corral_error_set(err, "tokenizer.json: a Unigram model.vocab must be a list of [piece, "
                         "score] pairs and added_tokens an array");
        return false;
    }
    if (!count_unigram_ids(vocab, added, vocab_size, &v->n, err))
        return false;
    if (!alloc_token_arrays(v, err))
        return false;
    size_t i;
    const json_t *pair;
    json_array_foreach(vocab, i, pair) {
        const json_t *piece = json_array_get(pair, 0), *score = json_array_get(pair, 1);
        double value = json_number_value(score);
        if (!json_is_array(pair) || json_array_size(pair) != 2 || !json_is_string(piece) ||
            !json_is_number(score) || !(value >= -1e30 && value <= 1e30)) {
            corral_error_set(err, "tokenizer.json: model.vocab[%zu] is not a [piece, score] "
                             "pair with a finite score", i);
            return false;
        }
        v->tokens[i] = (gguf_str){json_string_value(piece), json_string_length(piece)};
        v->scores[i] = (float)value;
        v->types[i] = TOKEN_NORMAL;
    }
    const json_t *unk = json_object_get(model, "unk_id");
    uint32_t unk_id = UINT32_MAX;
    if (unk && !json_is_null(unk) && (!valid_id(unk, &unk_id) || unk_id >= json_array_size(vocab))) {
        corral_error_set(err, "tokenizer.json: model.unk_id must be the id of one of "
                         "model.vocab's pieces");
        return false;
    }
    const json_t *token;
    json_array_foreach(added, i, token) { /* an added token replaces the piece */
        uint32_t id = (uint32_t)json_integer_value(json_object_get(token, "id"));
        const json_t *content = json_object_get(token, "content");
        v->tokens[id] = (gguf_str){json_string_value(content), json_string_length(content)};
        v->types[id] = json_is_true(json_object_get(token, "special")) ? TOKEN_CONTROL
                                                                       : TOKEN_USER_DEFINED;
    }
    if (unk_id != UINT32_MAX)
        v->types[unk_id] = TOKEN_UNKNOWN;
    return fill_gaps(v, TOKEN_UNUSED, -10000.0f, err);
}

/* The steps of a normalizer or pre-tokenizer: a Sequence's, or the one step. */
static const json_t *steps_of(const json_t *step, const char *list_key)
{
    const char *type = json_string_value(json_object_get(step, "type"));
    return type && strcmp(type, "Sequence") == 0 ? json_object_get(step, list_key) : NULL;
}

/* A step of a normalizer: the charsmap (Precompiled), runs of spaces made one (a Replace of
 * " {2,}", as transformers writes SentencePiece's remove_extra_whitespaces); a Strip, NFKC or
 * another Replace changes nothing the charsmap does not. */
static bool read_normalizer_step(hf_vocab *v, const json_t *step, corral_error *err)
{
    const char *type = json_string_value(json_object_get(step, "type"));
    if (type && strcmp(type, "Precompiled") == 0) {
        const json_t *map = json_object_get(step, "precompiled_charsmap");
        if (json_is_null(map) || !map || json_string_length(map) == 0)
            return true;
        size_t len = 0;
        free(v->charsmap);
        v->charsmap = json_is_string(map)
                          ? util_base64_decode(json_string_value(map), json_string_length(map),
                                               MAX_CHARSMAP_BYTES, &len, err)
                          : NULL;
        if (!v->charsmap) {
            if (!json_is_string(map))
                corral_error_set(err, "precompiled_charsmap must be a base64 string");
            corral_error_prefix(err, "tokenizer.json");
            return false;
        }
        v->charsmap_len = len;
        return true;
    }
    if (type && strcmp(type, "Replace") == 0) {
        const json_t *regex = json_object_get(json_object_get(step, "pattern"), "Regex");
        if (json_is_string(regex) && strcmp(json_string_value(regex), " {2,}") == 0)
            v->remove_extra_whitespaces = true;
        return true;
    }
    if (type && (strcmp(type, "Strip") == 0 || strcmp(type, "NFKC") == 0))
        return true;
    corral_error_set(err, "tokenizer.json: a Unigram tokenizer's normalizer '%.40s' is not "
                     "converted (Precompiled, Replace, Strip and NFKC are)",
                     type ? type : "(no type)");
    return false;
}

/*
 * The text rules of a Unigram tokenizer: its normalizer (see read_normalizer_step) and its
 * pre-tokenizer, a Metaspace (SentencePiece's "▁" for a space; a space before the text unless
 * add_prefix_space is false or prepend_scheme "never"), with a WhitespaceSplit beside it making
 * runs of spaces one.
 */
static bool read_unigram_text_rules(hf_vocab *v, const json_t *tokenizer, corral_error *err)
{
    const json_t *normalizer = json_object_get(tokenizer, "normalizer");
    const json_t *steps = steps_of(normalizer, "normalizers");
    size_t i;
    const json_t *step;
    if (steps) {
        json_array_foreach(steps, i, step)
            if (!read_normalizer_step(v, step, err))
                return false;
    } else if (normalizer && !json_is_null(normalizer) &&
               !read_normalizer_step(v, normalizer, err)) {
        return false;
    }
    const json_t *pre = json_object_get(tokenizer, "pre_tokenizer");
    const json_t *pre_steps = steps_of(pre, "pretokenizers");
    bool metaspace = false;
    for (i = 0; i < (pre_steps ? json_array_size(pre_steps) : 1); i++) {
        step = pre_steps ? json_array_get(pre_steps, i) : pre;
        const char *type = json_string_value(json_object_get(step, "type"));
        if (type && strcmp(type, "WhitespaceSplit") == 0) {
            v->remove_extra_whitespaces = true;
            continue;
        }
        const json_t *mark = json_object_get(step, "replacement");
        if (!type || strcmp(type, "Metaspace") != 0 ||
            (mark && (!json_is_string(mark) ||
                      strcmp(json_string_value(mark), "\xe2\x96\x81") != 0))) {
            corral_error_set(err, "tokenizer.json: a Unigram tokenizer's pre-tokenizer must be "
                             "a Metaspace with SentencePiece's \"\xe2\x96\x81\" (with a "
                             "WhitespaceSplit or alone), not '%.40s'", type ? type : "(none)");
            return false;
        }
        const json_t *prefix = json_object_get(step, "add_prefix_space");
        const char *scheme = json_string_value(json_object_get(step, "prepend_scheme"));
        v->add_space_prefix = json_is_boolean(prefix) ? json_is_true(prefix)
                              : scheme               ? strcmp(scheme, "never") != 0
                                                     : true;
        metaspace = true;
    }
    if (!metaspace) {
        corral_error_set(err, "tokenizer.json: a Unigram tokenizer needs a Metaspace "
                         "pre-tokenizer");
        return false;
    }
    return true;
}

/*
 * Whether the bos and eos tokens frame a text, where tokenizer_config.json does not say: the
 * post-processor's template for one text (TemplateProcessing's "single") starts with the bos
 * token and ends with the eos token, as XLM-RoBERTa's "<s> $A </s>".
 */
static void read_template_framing(hf_vocab *v, const json_t *tokenizer)
{
    const json_t *post = json_object_get(tokenizer, "post_processor");
    const char *type = json_string_value(json_object_get(post, "type"));
    const json_t *single = json_object_get(post, "single");
    if (!type || strcmp(type, "TemplateProcessing") != 0 || !json_is_array(single) ||
        json_array_size(single) == 0)
        return;
    const json_t *ends[2] = {json_array_get(single, 0),
                             json_array_get(single, json_array_size(single) - 1)};
    special_token *framing[2] = {&v->special[0], &v->special[1]}; /* bos, eos */
    for (int k = 0; k < 2; k++) {
        special_token *sp = framing[k];
        if (!sp->found || sp->add_set)
            continue;
        const json_t *name = json_object_get(json_object_get(ends[k], "SpecialToken"), "id");
        gguf_str text = v->tokens[sp->id];
        sp->add_set = true;
        sp->add = json_is_string(name) && json_string_length(name) == text.size &&
                  memcmp(json_string_value(name), text.data, text.size) == 0;
    }
}

hf_vocab *hf_vocab_load(const json_t *tokenizer, const json_t *tokenizer_config,
                        const json_t *generation_config, const char *chat_template,
                        uint64_t vocab_size, const char *bpe_model, corral_error *err)
{
    const json_t *model = json_object_get(tokenizer, "model");
    const char *type = json_string_value(json_object_get(model, "type"));
    bool wordpiece = type && strcmp(type, "WordPiece") == 0;
    bool unigram = type && strcmp(type, "Unigram") == 0;
    if (!json_is_object(tokenizer) || !type ||
        (strcmp(type, "BPE") != 0 && !wordpiece && !unigram)) {
        corral_error_set(err, "tokenizer.json: Corral converts BPE, WordPiece and Unigram "
                         "tokenizers, not '%.40s'", type ? type : "(no model.type)");
        return NULL;
    }
    bool gpt2 = strcmp(bpe_model, "gpt2") == 0;
    if (!wordpiece && !unigram && gpt2 && is_spm_style(tokenizer)) {
        corral_error_set(err, "tokenizer.json is a SentencePiece tokenizer's BPE (byte fallback, "
                         "Metaspace): give its tokenizer.model too");
        return NULL;
    }
    if (!check_vocab_size(vocab_size, err))
        return NULL;
    hf_vocab *v = calloc(1, sizeof *v);
    if (!v) {
        oom(err);
        return NULL;
    }
    v->model = wordpiece ? "bert" : unigram ? "t5" : gpt2 ? "gpt2" : "llama";
    v->bpe = !wordpiece && !unigram;
    const json_t *added = json_object_get(tokenizer, "added_tokens");
    if (json_is_null(added))
        added = NULL;
    bool ok = unigram ? read_unigram_pieces(v, model, added, vocab_size, err) &&
                            read_unigram_text_rules(v, tokenizer, err)
                      : read_tokens(v, model, added, vocab_size, err) &&
                            (wordpiece ? mark_word_starts(v, err) : read_merges(v, model, err));
    if (!ok || !name_pre_tokenizer(v, tokenizer, err) ||
        !read_chat_template(v, tokenizer_config, err) ||
        !read_specials(v, added, tokenizer_config, generation_config, err)) {
        hf_vocab_free(v);
        return NULL;
    }
    if (unigram)
        read_template_framing(v, tokenizer);
    if (!v->chat_template && chat_template && !(v->chat_template = strdup(chat_template))) {
        hf_vocab_free(v);
        oom(err);
        return NULL;
    }
    return v;
}

void hf_vocab_as_laguna(hf_vocab *v)
{
    free(v->chat_template);
    v->chat_template = NULL;
    v->bos_add_false = true;
}

void hf_vocab_as_glmocr(hf_vocab *v)
{
    int64_t end = hf_vocab_find(v, "<|endoftext|>"), user = hf_vocab_find(v, "<|user|>");
    special_token *set[2] = {&v->special[0], &v->special[2]}; /* bos, unk */
    for (int i = 0; end >= 0 && i < 2; i++) {
        set[i]->found = true;
        set[i]->id = (uint32_t)end;
    }
    if (user >= 0) {
        v->eog[0].found = true;
        v->eog[0].id = (uint32_t)user;
    }
}

int64_t hf_vocab_find(const hf_vocab *v, const char *text)
{
    size_t n = strlen(text);
    for (uint32_t id = 0; id < v->n; id++)
        if (v->tokens[id].size == n && memcmp(v->tokens[id].data, text, n) == 0)
            return id;
    return -1;
}

bool hf_vocab_write(const hf_vocab *v, gguf_writer *w, corral_error *err)
{
    bool ok = gguf_writer_add_str(w, "tokenizer.ggml.model", v->model, strlen(v->model), err) &&
              gguf_writer_add_str(w, "tokenizer.ggml.pre", v->pre, strlen(v->pre), err) &&
              gguf_writer_add_str_array(w, "tokenizer.ggml.tokens", v->tokens, v->n, err) &&
              gguf_writer_add_array(w, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, v->scores,
                                    v->n, err) &&
              gguf_writer_add_array(w, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, v->types,
                                    v->n, err);
    if (ok && v->bpe)
        ok = gguf_writer_add_str_array(w, "tokenizer.ggml.merges", v->merges, v->n_merges, err);
    if (ok && strcmp(v->model, "bert") == 0) /* BERT's two segments, as ollama writes it */
        ok = gguf_writer_add_u32(w, "tokenizer.ggml.token_type_count", 2, err);
    if (ok && strcmp(v->model, "t5") == 0) {
        ok = gguf_writer_add_bool(w, "tokenizer.ggml.add_space_prefix", v->add_space_prefix,
                                  err) &&
             gguf_writer_add_bool(w, "tokenizer.ggml.remove_extra_whitespaces",
                                  v->remove_extra_whitespaces, err);
        if (ok && v->charsmap)
            ok = gguf_writer_add_array(w, "tokenizer.ggml.precompiled_charsmap",
                                       GGUF_TYPE_UINT8, v->charsmap, v->charsmap_len, err);
    }
    if (ok && v->chat_template)
        ok = gguf_writer_add_str(w, "tokenizer.chat_template", v->chat_template,
                                 strlen(v->chat_template), err);
    if (ok && v->bos_add_false)
        ok = gguf_writer_add_bool(w, "tokenizer.ggml.add_bos_token", false, err);
    for (size_t s = 0; ok && s < N_SPECIAL; s++) {
        const special_token *sp = &v->special[s];
        if (!sp->found)
            continue;
        char key[64];
        if (sp->add_set && !(s == 0 && v->bos_add_false)) {
            snprintf(key, sizeof key, "tokenizer.ggml.add_%s_token", special_names[s].gguf);
            ok = gguf_writer_add_bool(w, key, sp->add, err);
        }
        snprintf(key, sizeof key, "tokenizer.ggml.%s_token_id", special_names[s].gguf);
        ok = ok && gguf_writer_add_u32(w, key, sp->id, err);
        if (ok && sp->n_ids) {
            snprintf(key, sizeof key, "tokenizer.ggml.%s_token_ids", special_names[s].gguf);
            ok = gguf_writer_add_array(w, key, GGUF_TYPE_INT32, sp->ids, sp->n_ids, err);
        }
    }
    static const char *const eog_keys[2] = {"tokenizer.ggml.eot_token_id",
                                            "tokenizer.ggml.eom_token_id"};
    for (size_t i = 0; ok && i < 2; i++)
        if (v->eog[i].found)
            ok = gguf_writer_add_u32(w, eog_keys[i], v->eog[i].id, err);
    return ok;
}
