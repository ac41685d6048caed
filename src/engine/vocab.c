/*
 * Loading a vocabulary from GGUF `tokenizer.*` metadata (vocab.h): arrays,
 * defaults and overrides in llama.cpp's order, the name-based fix-ups (EOT/EOM/FIM, the EOG
 * set, gpt-oss, phi-3 RSTRIP), the special-token candidate list and the lookup maps. Also
 * the public corral_vocab_* handle and queries.
 */
#include "vocab.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "token_trie.h"
#include "util/checked.h"

/* No real tokenizer has a token this long; the cap bounds every piece buffer. */
#define VOCAB_MAX_TOKEN_BYTES 65536u
/* Largest rendering of one token (BPE's [UNK_BYTE_...] expansion can grow a text). */
#define VOCAB_MAX_PIECE_BYTES ((size_t)16 << 20)

static void warn(const gguf_file *file, const char *fmt, const char *detail)
{
    fprintf(stderr, "warning: %s: ", gguf_path(file));
    fprintf(stderr, fmt, detail);
    fputc('\n', stderr);
}

static bool str_equals(gguf_str s, const char *lit)
{
    size_t n = strlen(lit);
    return s.size == n && memcmp(s.data, lit, n) == 0;
}

static bool load_kind(corral_vocab *v, const gguf_file *file, corral_error *err)
{
    gguf_str model;
    if (!gguf_get_str(file, "tokenizer.ggml.model", &model, err))
        return false;
    gguf_str pre = {0};
    if (!gguf_get_str_opt(file, "tokenizer.ggml.pre", &pre, err))
        return false;
    /* ollama's gemma4 converter names Gemma 4's vocabulary "llama" (SentencePiece's spaces) but
     * writes its merges, and ollama's engine runs it as BPE over those: it is llama.cpp's
     * "gemma4" vocabulary under another name, and tokenizes as that one does */
    if (str_equals(model, "llama") && str_equals(pre, "gemma4") &&
        gguf_find_kv(file, "tokenizer.ggml.merges")) {
        v->kind = VOCAB_BPE;
        v->escape_whitespace = true;
    } else if (str_equals(model, "llama")) {
        v->kind = VOCAB_SPM;
    } else if (str_equals(model, "gpt2")) {
        v->kind = VOCAB_BPE;
    } else if (str_equals(model, "bert")) {
        v->kind = VOCAB_WPM;
    } else if (str_equals(model, "gemma4")) {
        v->kind = VOCAB_BPE;
        v->escape_whitespace = true;
    } else if (str_equals(model, "t5")) {
        v->kind = VOCAB_UGM;
    } else {
        int shown = model.size > 64 ? 64 : (int)model.size;
        corral_error_set(err, "tokenizer.ggml.model '%.*s' is not supported (llama, gpt2, bert, gemma4, t5)",
                         shown, model.data);
        return false;
    }
    return true;
}

/*
 * ollama's gemma3, gemma3n and mllama files keep tokens the text model has no rows for:
 * gemma3's image tokens past token_embd's rows, gemma3n's image and audio tokens past
 * per_layer_token_embd's, mllama's image token past output.weight's (its logits). The
 * vocabulary is cut to the rows, as llama.cpp's reading of the gemma files cuts it; the rows
 * where that applies, else 0.
 */
static uint32_t text_model_rows(const gguf_file *file, uint64_t n_tokens)
{
    gguf_str arch = {0};
    corral_error ignored;
    if (!gguf_get_str_opt(file, "general.architecture", &arch, &ignored))
        return 0;
    const char *rows = str_equals(arch, "gemma3")    ? "token_embd.weight"
                       : str_equals(arch, "gemma3n") ? "per_layer_token_embd.weight"
                       : str_equals(arch, "mllama")  ? "output.weight"
                                                     : NULL;
    const gguf_tensor *t = rows ? gguf_find_tensor(file, rows) : NULL;
    return t && t->ne[1] > 0 && (uint64_t)t->ne[1] < n_tokens ? (uint32_t)t->ne[1] : 0;
}

static bool load_texts(corral_vocab *v, const gguf_file *file, corral_error *err)
{
    const gguf_kv *tokens;
    if (!gguf_get_array(file, "tokenizer.ggml.tokens", GGUF_TYPE_STRING, &tokens, err))
        return false;
    if (tokens->n == 0 || tokens->n > INT32_MAX) {
        corral_error_set(err, "tokenizer.ggml.tokens has %llu entries",
                         (unsigned long long)tokens->n);
        return false;
    }
    uint32_t rows = text_model_rows(file, tokens->n);
    v->n_tokens = rows ? rows : (uint32_t)tokens->n;
    size_t n_empty = 0;
    for (uint32_t id = 0; id < v->n_tokens; id++) {
        gguf_str s = gguf_kv_str(tokens, id);
        if (s.size > VOCAB_MAX_TOKEN_BYTES) {
            corral_error_set(err, "token %u is %zu bytes long (limit %u)", id, s.size,
                             VOCAB_MAX_TOKEN_BYTES);
            return false;
        }
        n_empty += s.size == 0;
    }
    v->text = calloc(v->n_tokens, sizeof *v->text);
    /* "[EMPTY_" + up to 10 digits + "]" */
    v->synth_text = n_empty ? malloc(n_empty * 20) : NULL;
    if (!v->text || (n_empty && !v->synth_text)) {
        corral_error_set(err, "out of memory");
        return false;
    }
    char *synth = v->synth_text;
    for (uint32_t id = 0; id < v->n_tokens; id++) {
        gguf_str s = gguf_kv_str(tokens, id);
        if (s.size == 0) { /* llama.cpp names empty tokens so the text map stays unique */
            int n = snprintf(synth, 20, "[EMPTY_%u]", id);
            v->text[id] = (vocab_text){synth, (uint32_t)n};
            synth += 20;
        } else {
            v->text[id] = (vocab_text){s.data, (uint32_t)s.size};
        }
        if (v->text[id].size > v->max_token_bytes)
            v->max_token_bytes = v->text[id].size;
    }
    int64_t duplicate;
    if (!token_map_init(&v->token_ids, v->text, v->n_tokens, &duplicate)) {
        corral_error_set(err, "out of memory");
        return false;
    }
    if (duplicate >= 0) {
        corral_error_set(err, "token %lld has the same text as an earlier token",
                         (long long)duplicate);
        return false;
    }
    return true;
}

static bool load_scores_and_types(corral_vocab *v, const gguf_file *file, corral_error *err)
{
    const gguf_kv *scores, *types;
    if (!gguf_get_array_opt(file, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, &scores, err) ||
        !gguf_get_array_opt(file, "tokenizer.ggml.token_type", GGUF_TYPE_COUNT, &types, err))
        return false;
    /* the file's count, which text_model_rows may have cut v's below (load_texts read it) */
    uint64_t n_file = gguf_find_kv(file, "tokenizer.ggml.tokens")->n;
    if (scores && scores->n != n_file) {
        corral_error_set(err, "tokenizer.ggml.scores has %llu entries for %llu tokens",
                         (unsigned long long)scores->n, (unsigned long long)n_file);
        return false;
    }
    if (types && (types->n != n_file || !gguf_type_is_integer(types->elem_type))) {
        corral_error_set(err, "tokenizer.ggml.token_type must be %llu integers",
                         (unsigned long long)n_file);
        return false;
    }
    v->score = calloc(v->n_tokens, sizeof *v->score);
    v->type = malloc(v->n_tokens);
    v->flags = calloc(v->n_tokens, 1);
    if (!v->score || !v->type || !v->flags) {
        corral_error_set(err, "out of memory");
        return false;
    }
    for (uint32_t id = 0; id < v->n_tokens; id++) {
        if (scores) {
            float s = gguf_kv_f32(scores, id);
            v->score[id] = isnan(s) ? -INFINITY : s; /* keep the merge order total */
        }
        int64_t t = types ? gguf_kv_i64(types, id) : TOKEN_NORMAL;
        v->type[id] = (uint8_t)(t >= 0 && t <= TOKEN_BYTE ? t : TOKEN_UNDEFINED);
    }
    return true;
}

/* Merge line i is "left right", split at the first space at index >= 1, so a
 * merge whose left half is itself a space survives. */
static bool load_merges(corral_vocab *v, const gguf_file *file, corral_error *err)
{
    const gguf_kv *merges;
    if (!gguf_get_array(file, "tokenizer.ggml.merges", GGUF_TYPE_STRING, &merges, err))
        return false;
    if (merges->n > INT32_MAX) {
        corral_error_set(err, "tokenizer.ggml.merges has too many entries");
        return false;
    }
    uint32_t n = (uint32_t)merges->n;
    v->merge_pairs = calloc(n ? n : 1, sizeof *v->merge_pairs);
    if (!v->merge_pairs) {
        corral_error_set(err, "out of memory");
        return false;
    }
    for (uint32_t i = 0; i < n; i++) {
        gguf_str line = gguf_kv_str(merges, i);
        const char *space = line.size > 1 ? memchr(line.data + 1, ' ', line.size - 1) : NULL;
        if (!space || line.size > UINT32_MAX)
            continue; /* useless line: left.data stays NULL */
        size_t left = (size_t)(space - line.data);
        v->merge_pairs[i].left = (vocab_text){line.data, (uint32_t)left};
        v->merge_pairs[i].right = (vocab_text){space + 1, (uint32_t)(line.size - left - 1)};
    }
    if (!merge_map_init(&v->merges, v->merge_pairs, n)) {
        corral_error_set(err, "out of memory");
        return false;
    }
    return true;
}

/* Token id is text (the first token with that text). */
static bool token_is(const corral_vocab *v, uint32_t id, const char *text)
{
    return token_map_find(&v->token_ids, text, strlen(text)) == (corral_token)id;
}

static bool contains(gguf_str haystack, const char *needle)
{
    size_t n = strlen(needle);
    for (size_t i = 0; i + n <= haystack.size; i++)
        if (memcmp(haystack.data + i, needle, n) == 0)
            return true;
    return false;
}

/*
 * ollama's first Llama 3 files: a llama vocabulary with Llama 3's chat tokens (<|eot_id|> at
 * 128009, <|start_header_id|> at 128006 or in the chat template) that names no pre-tokenizer
 * ("default" or none) or ends sequences with <|end_of_text|> (128001), where the instruct
 * models end their turns with <|eot_id|>. llama.cpp's reading of those files takes Llama 3's
 * pre-tokenizer and <|eot_id|> as the end of sequence and of turn; so does this.
 */
static bool llama3_metadata_gap(const corral_vocab *v, const gguf_file *file, corral_error *err,
                                bool *gap)
{
    gguf_str arch = {0}, pre = {0}, chat = {0};
    uint32_t eos = UINT32_MAX;
    corral_error ignored;
    *gap = false;
    if (!gguf_get_str_opt(file, "general.architecture", &arch, err) ||
        !str_equals(arch, "llama") || !token_is(v, 128009, "<|eot_id|>"))
        return true;
    if (!gguf_get_str_opt(file, "tokenizer.ggml.pre", &pre, err) ||
        !gguf_get_str_opt(file, "tokenizer.chat_template", &chat, err))
        return false;
    (void)gguf_get_u32_opt(file, "tokenizer.ggml.eos_token_id", &eos, &ignored);
    bool markers = token_is(v, 128006, "<|start_header_id|>") ||
                   contains(chat, "<|start_header_id|>") || contains(chat, "<|eot_id|>");
    bool no_pre = pre.size == 0 || str_equals(pre, "default");
    *gap = markers && (no_pre || eos == 128001);
    return true;
}

/* Model defaults, then the pre type's adjustments, applied in llama.cpp's order. */
static bool set_defaults(corral_vocab *v, const gguf_file *file, corral_error *err)
{
    v->bos = v->eos = v->eot = v->eom = v->unk = v->sep = -1;
    if (v->kind == VOCAB_SPM) {
        v->bos = 1;
        v->eos = 2;
        v->unk = 0;
        v->add_bos = true;
        v->add_space_prefix = true;
        return true;
    }
    if (v->kind == VOCAB_UGM) { /* T5's: <pad> 0, </s> 1, <unk> 2; EOS closes the text */
        v->eos = 1;
        v->unk = 2;
        v->add_eos = true;
        return true;
    }
    if (v->kind == VOCAB_WPM) { /* BERT's uncased vocabulary: [UNK] 100, [CLS] 101, [SEP] 102 */
        v->bos = 101;
        v->unk = 100;
        v->sep = 102;
        v->add_bos = true;
        v->clean_spaces = true;
        return true;
    }
    v->bos = v->eos = 11;
    gguf_str pre = {0};
    if (!gguf_get_str_opt(file, "tokenizer.ggml.pre", &pre, err))
        return false;
    if (v->escape_whitespace) { /* its own pre-tokenizer whatever the file says; no default ids */
        v->bos = v->eos = -1;
        pre = (gguf_str){"gemma4", 6};
    }
    /* ollama's first gpt-oss converter wrote pre "default" (its runner split words with
     * o200k's pattern whatever the file said): those files need gpt-4o's */
    gguf_str arch = {0};
    if (!gguf_get_str_opt(file, "general.architecture", &arch, err))
        return false;
    if (str_equals(arch, "gptoss") && (pre.size == 0 || str_equals(pre, "default")))
        pre = (gguf_str){"gpt-4o", 6};
    /* Likewise ollama's mistral3 converter writes "default" (it knows tekken by no name) and
     * its engine splits every mistral3 prompt with tekken's pattern. */
    if (str_equals(arch, "mistral3") && (pre.size == 0 || str_equals(pre, "default")))
        pre = (gguf_str){"tekken", 6};
    /* ollama's GLM-OCR files may say llama-bpe; its runner splits them as chatglm-bpe */
    if (str_equals(arch, "glmocr"))
        pre = (gguf_str){"chatglm-bpe", 11};
    bool llama3_gap;
    if (!llama3_metadata_gap(v, file, err, &llama3_gap))
        return false;
    if (llama3_gap && (pre.size == 0 || str_equals(pre, "default")))
        pre = (gguf_str){"llama-bpe", 9};
    bool unknown;
    v->pre = pretokenizer_create(pre.data, pre.size, &unknown, err);
    if (!v->pre)
        return false;
    if (unknown) {
        char name[65];
        snprintf(name, sizeof name, "%.*s", pre.size > 64 ? 64 : (int)pre.size, pre.data);
        warn(file, "unknown tokenizer.ggml.pre '%s', using the default pre-tokenizer", name);
    }
    pretok_flags flags = pretokenizer_flags(v->pre);
    v->add_bos = flags.add_bos;
    v->ignore_merges = flags.ignore_merges;
    v->clean_spaces = flags.clean_spaces;
    return true;
}

static void override_id(corral_vocab *v, const gguf_file *file, const char *key,
                        corral_token *id)
{
    uint32_t value = UINT32_MAX;
    corral_error ignored;
    if (!gguf_get_u32_opt(file, key, &value, &ignored)) {
        warn(file, "%s is not a token id; ignored", key);
        return;
    }
    if (value == UINT32_MAX)
        return;
    if (value >= v->n_tokens) {
        warn(file, "%s is past the end of the vocabulary; ignored", key);
        return;
    }
    *id = (corral_token)value;
}

/* ollama's glm4moelite files (GLM-4.7-Flash) name its other ends of turn only in
 * eos_token_ids (<|endoftext|>, <|user|>, <|observation|>): as llama.cpp's reading of these
 * files does, the second is the end of turn and the third the end of message, where the file
 * names no such token itself. */
static bool glm4moelite_eog_ids(corral_vocab *v, const gguf_file *file, corral_error *err)
{
    gguf_str arch = {0};
    const gguf_kv *ids = NULL;
    if (!gguf_get_str_opt(file, "general.architecture", &arch, err) ||
        !str_equals(arch, "glm4moelite"))
        return true;
    if (!gguf_get_array_opt(file, "tokenizer.ggml.eos_token_ids", GGUF_TYPE_COUNT, &ids, err))
        return false;
    if (!ids || !gguf_type_is_integer(ids->elem_type))
        return true;
    corral_token *const slots[3] = {NULL, &v->eot, &v->eom};
    const char *const keys[3] = {NULL, "tokenizer.ggml.eot_token_id",
                                 "tokenizer.ggml.eom_token_id"};
    for (uint64_t i = 1; i < 3 && i < ids->n; i++) {
        uint64_t id = gguf_kv_u64(ids, i); /* a negative one is past every vocabulary */
        if (!gguf_find_kv(file, keys[i]) && id < v->n_tokens)
            *slots[i] = (corral_token)id;
    }
    return true;
}

static bool apply_overrides(corral_vocab *v, const gguf_file *file, corral_error *err)
{
    if (!gguf_get_bool_opt(file, "tokenizer.ggml.add_space_prefix", &v->add_space_prefix, err))
        return false;
    /* WordPiece opens the text with [CLS]: ollama's converter names it only as cls */
    if (v->kind == VOCAB_WPM)
        override_id(v, file, "tokenizer.ggml.cls_token_id", &v->bos);
    override_id(v, file, "tokenizer.ggml.bos_token_id", &v->bos);
    override_id(v, file, "tokenizer.ggml.eos_token_id", &v->eos);
    override_id(v, file, "tokenizer.ggml.eot_token_id", &v->eot);
    override_id(v, file, "tokenizer.ggml.eom_token_id", &v->eom);
    if (!glm4moelite_eog_ids(v, file, err))
        return false;
    bool llama3_gap;
    if (!llama3_metadata_gap(v, file, err, &llama3_gap))
        return false;
    if (llama3_gap && (!gguf_find_kv(file, "tokenizer.ggml.eos_token_id") || v->eos == 128001))
        v->eos = 128009;
    if (llama3_gap && (!gguf_find_kv(file, "tokenizer.ggml.eot_token_id") || v->eot == 128001))
        v->eot = 128009;
    override_id(v, file, "tokenizer.ggml.unknown_token_id", &v->unk);
    override_id(v, file, "tokenizer.ggml.seperator_token_id", &v->sep); /* sic */
    if (!gguf_get_bool_opt(file, "tokenizer.ggml.add_bos_token", &v->add_bos, err) ||
        !gguf_get_bool_opt(file, "tokenizer.ggml.add_eos_token", &v->add_eos, err))
        return false;
    /* A model default may lie outside a small vocabulary (gpt2's 11). */
    corral_token *ids[] = {&v->bos, &v->eos, &v->unk, &v->sep};
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++)
        if (*ids[i] >= (corral_token)v->n_tokens)
            *ids[i] = -1;
    return true;
}

static corral_token find_text(const corral_vocab *v, const char *text)
{
    return token_map_find(&v->token_ids, text, strlen(text));
}

/* First of names (in list order, which makes the choice deterministic) that is a token. */
static corral_token find_any(const corral_vocab *v, const char *const *names)
{
    for (; *names; names++) {
        corral_token id = find_text(v, *names);
        if (id >= 0)
            return id;
    }
    return -1;
}

static void force_type(corral_vocab *v, corral_token id, enum token_type type)
{
    if (id >= 0)
        v->type[id] = (uint8_t)type;
}

static void mark_eog(corral_vocab *v, corral_token id)
{
    if (id >= 0)
        v->flags[id] |= TOKEN_FLAG_EOG;
}

static const char *const eot_names[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>",
    "<EOT>", "_<EOT>", "<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>",
    "<end_of_utterance>", NULL};
static const char *const eom_names[] = {"<|eom_id|>", NULL};
static const char *const fim_pad_names[] = {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", NULL};
static const char *const fim_rep_names[] = {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>",
                                            "<REPO>", "<reponame>", NULL};
static const char *const fim_sep_names[] = {"<|file_sep|>", NULL};
static const char *const eog_names[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<end_of_turn>",
    "<|endoftext|>", "<|eom_id|>", "<EOT>", "_<EOT>", "<|end_of_text|>", "<end_of_utterance>",
    "<eos>", "<turn|>", "<|tool_response>", /* gemma4 */
    NULL};
static const char *const gpt_oss_user_defined[] = {"<|channel|>", "<|message|>", "<|start|>",
                                                   "<|constrain|>", NULL};

/* The name-based fix-ups of special ids, in llama.cpp's order. */
static void fix_special_ids(corral_vocab *v, const gguf_file *file)
{
    if (v->eot < 0) {
        v->eot = find_any(v, eot_names);
        if (v->eot >= 0 && v->type[v->eot] != TOKEN_CONTROL)
            force_type(v, v->eot, TOKEN_CONTROL);
    }
    if (v->eom < 0) {
        v->eom = find_any(v, eom_names);
        if (v->eom >= 0)
            force_type(v, v->eom, TOKEN_CONTROL);
    }
    corral_token fim[3] = {-1, -1, -1};
    const char *const fim_keys[3] = {"tokenizer.ggml.fim_pad_token_id",
                                     "tokenizer.ggml.fim_rep_token_id",
                                     "tokenizer.ggml.fim_sep_token_id"};
    const char *const *fim_names[3] = {fim_pad_names, fim_rep_names, fim_sep_names};
    for (int i = 0; i < 3; i++) {
        override_id(v, file, fim_keys[i], &fim[i]);
        if (fim[i] < 0) {
            fim[i] = find_any(v, fim_names[i]);
            force_type(v, fim[i], TOKEN_CONTROL);
        }
        mark_eog(v, fim[i]);
    }
    for (const char *const *name = eog_names; *name; name++) {
        corral_token id = find_text(v, *name);
        force_type(v, id, TOKEN_CONTROL);
        mark_eog(v, id);
    }
    mark_eog(v, v->eos);
    mark_eog(v, v->eot);
    mark_eog(v, v->eom);

    /* gpt-oss: <|end|> only separates messages when <|return|> and <|call|> end turns. */
    corral_token ret = find_text(v, "<|return|>"), call = find_text(v, "<|call|>");
    corral_token end = find_text(v, "<|end|>");
    if (ret >= 0 && call >= 0 && end >= 0) {
        v->flags[end] &= (uint8_t)~TOKEN_FLAG_EOG;
        force_type(v, end, TOKEN_USER_DEFINED);
    }
    for (const char *const *name = gpt_oss_user_defined; *name; name++)
        force_type(v, find_text(v, *name), TOKEN_USER_DEFINED);
}

static bool is_special_type(uint8_t type)
{
    return type == TOKEN_CONTROL || type == TOKEN_USER_DEFINED || type == TOKEN_UNKNOWN;
}

/* phi-3 models eat the whitespace after their special tokens, as llama.cpp does. */
static bool fix_strip_flags(corral_vocab *v, const gguf_file *file, corral_error *err)
{
    gguf_str name = {0};
    if (!gguf_get_str_opt(file, "general.name", &name, err))
        return false;
    char lower[256];
    size_t n = name.size < sizeof lower - 1 ? name.size : sizeof lower - 1;
    for (size_t i = 0; i < n; i++)
        lower[i] = (char)tolower((unsigned char)name.data[i]);
    lower[n] = '\0';
    if (strstr(lower, "phi-3") || strstr(lower, "phi3")) {
        if (find_text(v, "<|endoftext|>") < 0) {
            corral_error_set(err, "a phi-3 vocabulary needs the token <|endoftext|>");
            return false;
        }
        for (uint32_t id = 0; id < v->n_tokens; id++)
            if (is_special_type(v->type[id]))
                v->flags[id] |= TOKEN_FLAG_RSTRIP;
        corral_token eos_text = find_text(v, "</s>");
        if (eos_text >= 0)
            v->flags[eos_text] |= TOKEN_FLAG_RSTRIP;
        const char *const keep[] = {"<unk>", "<s>", "<|endoftext|>"};
        for (size_t i = 0; i < 3; i++) {
            corral_token id = find_text(v, keep[i]);
            if (id >= 0)
                v->flags[id] &= (uint8_t)~TOKEN_FLAG_RSTRIP;
        }
    }
    gguf_str pre = {0};
    if (!gguf_get_str_opt(file, "tokenizer.ggml.pre", &pre, err))
        return false;
    if (str_equals(pre, "jina-v2-de") || str_equals(pre, "jina-v2-es") ||
        str_equals(pre, "jina-v2-code")) {
        corral_token mask = find_text(v, "<mask>");
        if (mask >= 0)
            v->flags[mask] |= TOKEN_FLAG_LSTRIP;
    }
    return true;
}

typedef struct special_key {
    uint32_t size;
    corral_token id;
} special_key;

/* Longest first; llama.cpp's order among equal lengths is unspecified, ours is by id. */
static int compare_specials(const void *a, const void *b)
{
    const special_key *x = a, *y = b;
    if (x->size != y->size)
        return x->size > y->size ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

static bool build_specials(corral_vocab *v, corral_error *err)
{
    size_t n = 0;
    for (uint32_t id = 0; id < v->n_tokens; id++)
        n += is_special_type(v->type[id]);
    special_key *keys = malloc((n ? n : 1) * sizeof *keys);
    v->specials = malloc((n ? n : 1) * sizeof *v->specials);
    if (!keys || !v->specials) {
        free(keys);
        corral_error_set(err, "out of memory");
        return false;
    }
    for (uint32_t id = 0; id < v->n_tokens; id++)
        if (is_special_type(v->type[id]))
            keys[v->n_specials++] = (special_key){v->text[id].size, (corral_token)id};
    qsort(keys, v->n_specials, sizeof *keys, compare_specials);
    for (size_t i = 0; i < v->n_specials; i++)
        v->specials[i] = keys[i].id;
    free(keys);
    return true;
}

/* SPM: <0xHH> then the one-byte text; BPE: the one-byte text; gemma4: <0xHH> (byte 0's
 * too, and no one-byte text where it has none): llama.cpp's byte-token lookups. */
static void build_byte_tokens(corral_vocab *v)
{
    for (int b = 0; b < 256; b++) {
        char name[7];
        snprintf(name, sizeof name, "<0x%02X>", b);
        if (v->escape_whitespace) {
            v->byte_token[b] = find_text(v, name);
            continue;
        }
        corral_token id = v->kind == VOCAB_SPM ? find_text(v, name) : -1;
        /* llama.cpp's SPM fallback builds a C string, so byte 0 looks up "" (never a token). */
        if (id < 0 && !(v->kind == VOCAB_SPM && b == 0)) {
            char one = (char)b;
            id = token_map_find(&v->token_ids, &one, 1);
        }
        v->byte_token[b] = id;
    }
}

static bool check_piece_sizes(corral_vocab *v, corral_error *err)
{
    for (uint32_t id = 0; id < v->n_tokens; id++) {
        size_t n = vocab_token_to_piece(v, (corral_token)id, NULL, 0, 0, true);
        if (n > VOCAB_MAX_PIECE_BYTES) {
            corral_error_set(err, "token %u renders to %zu bytes", id, n);
            return false;
        }
        if (n > v->max_piece_bytes)
            v->max_piece_bytes = n;
    }
    return true;
}

static void vocab_release(corral_vocab *v)
{
    if (!v)
        return;
    token_map_free(&v->token_ids);
    merge_map_free(&v->merges);
    pretokenizer_free(v->pre);
    ugm_free(v);
    free(v->merge_pairs);
    free(v->text);
    free(v->synth_text);
    free(v->score);
    free(v->type);
    free(v->flags);
    free(v->specials);
    token_trie_free(atomic_load(&v->trie));
    gguf_close(v->owned_file);
    free(v);
}

corral_vocab *vocab_load(const gguf_file *file, corral_error *err)
{
    corral_vocab *v = calloc(1, sizeof *v);
    if (!v) {
        corral_error_set(err, "out of memory");
        return NULL;
    }
    bool ok = load_kind(v, file, err) && load_texts(v, file, err) &&
              load_scores_and_types(v, file, err) &&
              (v->kind != VOCAB_BPE || load_merges(v, file, err)) &&
              set_defaults(v, file, err) && apply_overrides(v, file, err) &&
              (v->kind != VOCAB_UGM || ugm_load(v, file, err));
    if (ok && v->escape_whitespace)
        v->add_bos = true; /* as llama.cpp forces it for gemma4, whatever the file says */
    if (ok) {
        fix_special_ids(v, file);
        ok = fix_strip_flags(v, file, err) && build_specials(v, err);
    }
    if (ok) {
        build_byte_tokens(v);
        ok = check_piece_sizes(v, err);
    }
    if (!ok) {
        corral_error_prefix(err, "%s: tokenizer", gguf_path(file));
        vocab_release(v);
        return NULL;
    }
    return v;
}

corral_vocab *corral_vocab_open(const char *gguf_path, corral_error *err)
{
    gguf_file *file = gguf_open(gguf_path, err);
    if (!file)
        return NULL;
    corral_vocab *v = vocab_load(file, err);
    if (!v) {
        gguf_close(file);
        return NULL;
    }
    v->owned_file = file;
    return v;
}

void corral_vocab_free(corral_vocab *vocab)
{
    vocab_release(vocab);
}

size_t corral_vocab_n_tokens(const corral_vocab *vocab)
{
    return vocab->n_tokens;
}

corral_token corral_vocab_bos(const corral_vocab *vocab)
{
    return vocab->bos;
}

corral_token corral_vocab_eos(const corral_vocab *vocab)
{
    return vocab->eos;
}

bool corral_vocab_is_eog(const corral_vocab *vocab, corral_token id)
{
    return id >= 0 && (uint32_t)id < vocab->n_tokens && (vocab->flags[id] & TOKEN_FLAG_EOG);
}

bool corral_vocab_same(const corral_vocab *a, const corral_vocab *b, corral_error *err)
{
    if (a->n_tokens != b->n_tokens) {
        corral_error_set(err, "%u tokens against %u", b->n_tokens, a->n_tokens);
        return false;
    }
    for (uint32_t i = 0; i < a->n_tokens; i++)
        if (a->text[i].size != b->text[i].size || a->type[i] != b->type[i] ||
            memcmp(a->text[i].data, b->text[i].data, a->text[i].size) != 0) {
            corral_error_set(err, "token %u differs", i);
            return false;
        }
    if (a->bos != b->bos || a->eos != b->eos) {
        corral_error_set(err, "the begin or end token differs");
        return false;
    }
    return true;
}

bool token_list_push(token_list *list, corral_token id, corral_error *err)
{
    if (list->n == list->cap) {
        size_t cap = list->cap ? list->cap * 2 : 64, bytes;
        corral_token *grown;
        if (!checked_mul_size(cap, sizeof *grown, &bytes) || !(grown = realloc(list->ids, bytes))) {
            corral_error_set(err, "out of memory");
            return false;
        }
        list->ids = grown;
        list->cap = cap;
    }
    list->ids[list->n++] = id;
    return true;
}
