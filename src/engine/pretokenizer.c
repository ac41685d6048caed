/*
 * BPE pre-tokenizer table and PCRE2 splitter (pretokenizer.h). Adding a pre-tokenizer is one
 * row in pretok_table. Regexes run in sequence: each one splits every current word further,
 * its matches and the stretches between them all becoming words, and sees only its own word
 * (so lookaheads and `$` stop at the word's end), as llama.cpp's unicode_regex_split does.
 */
#include "pretokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <stdlib.h>
#include <string.h>

#include "util/checked.h"
#include "utf8.h"

/*
 * Unicode White_Space, which llama.cpp means by \s. PCRE2's own \s (UCP) also takes U+180E
 * and its \p{Z} lacks U+0085, hence the explicit class.
 */
#define WS "\\t-\\r\\x{85}\\p{Z}"

#define R_GPT2                                                                                 \
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^" WS "\\p{L}\\p{N}]+|[" WS "]+(?![^" WS   \
    "])"

#define R_LLAMA3_WITH_NUMBERS(numbers)                                                         \
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|" \
    numbers "| ?[^" WS "\\p{L}\\p{N}]+[\\r\\n]*|[" WS "]*[\\r\\n]+|[" WS "]+(?![^" WS "])|["   \
    WS "]+"

#define R_LLAMA3 R_LLAMA3_WITH_NUMBERS("\\p{N}{1,3}")
#define R_QWEN2 R_LLAMA3_WITH_NUMBERS("\\p{N}")

/*
 * o200k (gpt-4o, gpt-oss, llama4) as llama.cpp runs it: a word is an optional non-letter,
 * then letters that are not a-z followed by letters that are not A-Z (or the reverse
 * emphasis), so "HelloWorld" splits in two, and a contraction stays on the word it follows;
 * digits in threes; a punctuation run takes the newlines and slashes after it.
 */
#define R_GPT4O_CONTRACTION "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?"
#define R_GPT4O                                                                                \
    "[^\\r\\n\\p{L}\\p{N}]?(?:(?=\\p{L})[^a-z])*(?:(?=\\p{L})[^A-Z])+" R_GPT4O_CONTRACTION  \
    "|[^\\r\\n\\p{L}\\p{N}]?(?:(?=\\p{L})[^a-z])+(?:(?=\\p{L})[^A-Z])*" R_GPT4O_CONTRACTION \
    "|\\p{N}{1,3}| ?[^" WS "\\p{L}\\p{N}]+[\\r\\n/]*|[" WS "]*[\\r\\n]+|[" WS "]+(?![^" WS    \
    "])|[" WS "]+"

#define PRETOK_MAX_REGEX 4
#define PRETOK_MAX_NAMES 20

typedef struct pretok_row {
    const char *names[PRETOK_MAX_NAMES]; /* names[0] is canonical; NULL-terminated */
    const char *regex[PRETOK_MAX_REGEX]; /* applied in order; NULL-terminated */
    pretok_flags flags;
} pretok_row;

#define CLEAN {.clean_spaces = true}
#define NO_CLEAN {.clean_spaces = false}

/*
 * llama-vocab.cpp's pre-type -> regex lists and vocabulary adjustments, for the families we
 * support. Row 0 is the fallback for absent or unknown names.
 */
static const pretok_row pretok_table[] = {
    {{"default", NULL},
     {"[\\p{P}\\$\\+<=>\\^~\\|]+", R_GPT2, "\\p{N}+", "[0-9][0-9][0-9]"},
     CLEAN},
    {{"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2",
      NULL},
     {R_LLAMA3, NULL},
     {.add_bos = true, .ignore_merges = true, .clean_spaces = true}},
    {{"dbrx", "smaug-bpe", NULL}, {R_LLAMA3, NULL}, CLEAN},
    {{"gpt-2", "phi-2", "jina-es", "jina-de", "jina-v2-es", "jina-v2-de", "gigachat", "a.x-4.0",
      "mellum", "exaone4", "mpt", "olmo", "jais", "trillion", "granite-docling", "jina-v1-en",
      "jina-v2-code", "roberta-bpe", NULL},
     {R_GPT2, NULL},
     CLEAN},
    {{"qwen2", "deepseek-r1-qwen", "kormo", NULL}, {R_QWEN2, NULL}, NO_CLEAN},
    {{"stablelm2", "megrez", "hunyuan", NULL}, {R_QWEN2, NULL}, CLEAN},
    {{"starcoder", "refact", "smollm", "codeshell", "exaone", "minerva-7b", NULL},
     {"\\p{N}", R_GPT2, NULL},
     CLEAN},
    {{"command-r", NULL}, {"\\p{N}", R_GPT2, NULL}, NO_CLEAN},
    {{"glm4", "chatglm-bpe", NULL}, {R_LLAMA3, NULL}, CLEAN},
    {{"gpt-4o", "llama4", NULL}, {R_GPT4O, NULL}, NO_CLEAN},
};

struct pretokenizer {
    const pretok_row *row;
    size_t n_regex;
    pcre2_code *code[PRETOK_MAX_REGEX];
};

static const pretok_row *find_row(const char *name, size_t name_len)
{
    for (size_t r = 0; r < sizeof pretok_table / sizeof pretok_table[0]; r++)
        for (const char *const *n = pretok_table[r].names; *n; n++)
            if (strlen(*n) == name_len && memcmp(*n, name, name_len) == 0)
                return &pretok_table[r];
    return NULL;
}

pretokenizer *pretokenizer_create(const char *name, size_t name_len, bool *unknown_name,
                                  corral_error *err)
{
    const pretok_row *row = name ? find_row(name, name_len) : NULL;
    *unknown_name = name && !row;
    if (!row)
        row = &pretok_table[0];
    pretokenizer *pre = calloc(1, sizeof *pre);
    if (!pre) {
        corral_error_set(err, "out of memory");
        return NULL;
    }
    pre->row = row;
    for (size_t i = 0; i < PRETOK_MAX_REGEX && row->regex[i]; i++) {
        int code;
        PCRE2_SIZE offset;
        pre->code[i] = pcre2_compile((PCRE2_SPTR)row->regex[i], PCRE2_ZERO_TERMINATED,
                                     PCRE2_UTF | PCRE2_UCP, &code, &offset, NULL);
        if (!pre->code[i]) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(code, msg, sizeof msg);
            /* A table regex that does not compile is a bug in this file, but report it. */
            corral_error_set(err, "pre-tokenizer '%s' regex %zu: %s at offset %zu",
                             row->names[0], i, (const char *)msg, (size_t)offset);
            pretokenizer_free(pre);
            return NULL;
        }
        pre->n_regex++;
        /* Without JIT (an unsupported CPU) pcre2_match interprets the same pattern. */
        (void)pcre2_jit_compile(pre->code[i], PCRE2_JIT_COMPLETE);
    }
    return pre;
}

void pretokenizer_free(pretokenizer *pre)
{
    if (!pre)
        return;
    for (size_t i = 0; i < pre->n_regex; i++)
        pcre2_code_free(pre->code[i]);
    free(pre);
}

const char *pretokenizer_name(const pretokenizer *pre)
{
    return pre->row->names[0];
}

pretok_flags pretokenizer_flags(const pretokenizer *pre)
{
    return pre->row->flags;
}

void pretok_scratch_free(pretok_scratch *scratch)
{
    if (!scratch)
        return;
    free(scratch->words[0]);
    free(scratch->words[1]);
    pcre2_match_data_free(scratch->match_data);
    pcre2_match_context_free(scratch->match_context);
    pcre2_jit_stack_free(scratch->jit_stack);
    memset(scratch, 0, sizeof *scratch);
}

#define JIT_STACK_MIN_BYTES (32u * 1024)
#define JIT_STACK_MAX_BYTES (1024u * 1024)

static bool scratch_prepare(pretok_scratch *s, const pretokenizer *pre, corral_error *err)
{
    if (!s->match_data) {
        /* Every pattern in the table has at most one group; size for the largest anyway. */
        uint32_t pairs = 1;
        for (size_t i = 0; i < pre->n_regex; i++) {
            uint32_t groups = 0;
            pcre2_pattern_info(pre->code[i], PCRE2_INFO_CAPTURECOUNT, &groups);
            if (groups + 1 > pairs)
                pairs = groups + 1;
        }
        s->match_data = pcre2_match_data_create(pairs, NULL);
        s->match_context = pcre2_match_context_create(NULL);
        s->jit_stack = pcre2_jit_stack_create(JIT_STACK_MIN_BYTES, JIT_STACK_MAX_BYTES, NULL);
        if (!s->match_data || !s->match_context || !s->jit_stack) {
            corral_error_set(err, "out of memory");
            return false;
        }
        pcre2_jit_stack_assign(s->match_context, NULL, s->jit_stack);
    }
    return true;
}

static bool push_word(pretok_scratch *s, int which, size_t *n, size_t start, size_t size,
                      corral_error *err)
{
    if (*n == s->cap[which]) {
        size_t cap = s->cap[which] ? s->cap[which] * 2 : 256, bytes;
        if (!checked_mul_size(cap, sizeof(pretok_word), &bytes)) {
            corral_error_set(err, "pre-tokenizer: too many words");
            return false;
        }
        pretok_word *grown = realloc(s->words[which], bytes);
        if (!grown) {
            corral_error_set(err, "out of memory");
            return false;
        }
        s->words[which] = grown;
        s->cap[which] = cap;
    }
    s->words[which][(*n)++] = (pretok_word){start, size};
    return true;
}

/* Split one word with one regex, appending the pieces to words[out]. */
static bool split_word(const pcre2_code *code, const char *text, pretok_word word,
                       pretok_scratch *s, int out, size_t *n_out, corral_error *err)
{
    PCRE2_SPTR subject = (PCRE2_SPTR)(text + word.start);
    size_t pos = 0; /* relative to the word; everything before pos has been emitted */
    size_t search = 0;
    while (search < word.size) {
        int rc = pcre2_match(code, subject, word.size, search, PCRE2_NO_UTF_CHECK, s->match_data,
                             s->match_context);
        if (rc == PCRE2_ERROR_NOMATCH)
            break;
        if (rc < 0) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(rc, msg, sizeof msg);
            corral_error_set(err, "pre-tokenizer regex failed: %s", (const char *)msg);
            return false;
        }
        const PCRE2_SIZE *ovector = pcre2_get_ovector_pointer(s->match_data);
        size_t match_start = ovector[0], match_end = ovector[1];
        if (match_end == match_start) { /* no table regex matches empty; be safe anyway */
            search = match_end + utf8_len_from_lead(subject[match_end]);
            continue;
        }
        if (match_start > pos && !push_word(s, out, n_out, word.start + pos,
                                            match_start - pos, err))
            return false;
        if (!push_word(s, out, n_out, word.start + match_start, match_end - match_start, err))
            return false;
        pos = search = match_end;
    }
    if (pos < word.size && !push_word(s, out, n_out, word.start + pos, word.size - pos, err))
        return false;
    return true;
}

bool pretokenizer_split(const pretokenizer *pre, const char *text, size_t len,
                        pretok_scratch *scratch, const pretok_word **words, size_t *n_words,
                        corral_error *err)
{
    if (!scratch_prepare(scratch, pre, err))
        return false;
    int cur = 0;
    size_t n_cur = 0;
    if (len > 0 && !push_word(scratch, cur, &n_cur, 0, len, err))
        return false;
    for (size_t r = 0; r < pre->n_regex; r++) {
        int out = 1 - cur;
        size_t n_out = 0;
        for (size_t i = 0; i < n_cur; i++)
            if (!split_word(pre->code[r], text, scratch->words[cur][i], scratch, out, &n_out,
                            err))
                return false;
        cur = out;
        n_cur = n_out;
    }
    *words = scratch->words[cur];
    *n_words = n_cur;
    return true;
}
