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
 * digits in threes; a punctuation run takes the newlines and slashes after it. Mistral's
 * tekken is the same split without the contractions and with digits one by one.
 */
#define R_CONTRACTION "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
#define R_GPT4O_CONTRACTION R_CONTRACTION "?"
#define R_CASE_SPLIT(contraction, numbers)                                                     \
    "[^\\r\\n\\p{L}\\p{N}]?(?:(?=\\p{L})[^a-z])*(?:(?=\\p{L})[^A-Z])+" contraction          \
    "|[^\\r\\n\\p{L}\\p{N}]?(?:(?=\\p{L})[^a-z])+(?:(?=\\p{L})[^A-Z])*" contraction         \
    "|" numbers "| ?[^" WS "\\p{L}\\p{N}]+[\\r\\n/]*|[" WS "]*[\\r\\n]+|[" WS "]+(?![^" WS       \
    "])|[" WS "]+"
#define R_GPT4O R_CASE_SPLIT(R_GPT4O_CONTRACTION, "\\p{N}{1,3}")
#define R_TEKKEN R_CASE_SPLIT("", "\\p{N}")

/*
 * DeepSeek's own pre-tokenizers. Where llama.cpp runs a regex without Unicode categories, it
 * first turns every non-ASCII white-space character into a vertical tab, so explicit
 * character ranges never match white space there: the ranges that span some are written
 * here with (?![WS]) before them. Its `$` is the end of the word (\z).
 */

/* deepseek-llm's letters: the cased letters (Lu, Ll, Lt) of the Unicode version its
 * tokenizer was made with, as explicit ranges */
#define DEEPSEEK_LLM_LETTERS \
    "A-Za-z\\x{00B5}\\x{00C0}-\\x{00D6}\\x{00D8}-\\x{00F6}\\x{00F8}-\\x{01BA}" \
    "\\x{01BC}-\\x{01BF}\\x{01C4}-\\x{0293}\\x{0295}-\\x{02AF}\\x{0370}-\\x{0373}" \
    "\\x{0376}\\x{0377}\\x{037B}-\\x{037D}\\x{037F}\\x{0386}\\x{0388}-\\x{038A}\\x{038C}" \
    "\\x{038E}-\\x{03A1}\\x{03A3}-\\x{03F5}\\x{03F7}-\\x{0481}\\x{048A}-\\x{052F}" \
    "\\x{0531}-\\x{0556}\\x{10A0}-\\x{10C5}\\x{13A0}-\\x{13F5}\\x{13F8}-\\x{13FD}" \
    "\\x{1C90}-\\x{1CBA}\\x{1CBD}-\\x{1CBF}\\x{1D00}-\\x{1D2B}\\x{1D6B}-\\x{1D77}" \
    "\\x{1D79}-\\x{1D9A}\\x{1E00}-\\x{1F15}\\x{1F18}-\\x{1F1D}\\x{1F20}-\\x{1F45}" \
    "\\x{1F48}-\\x{1F4D}\\x{1F50}-\\x{1F57}\\x{1F59}\\x{1F5B}\\x{1F5D}\\x{1F5F}-\\x{1F7D}" \
    "\\x{1F80}-\\x{1FB4}\\x{1FB6}-\\x{1FBC}\\x{1FBE}\\x{1FC2}-\\x{1FC4}" \
    "\\x{1FC6}-\\x{1FCC}\\x{1FD0}-\\x{1FD3}\\x{1FD6}-\\x{1FDB}\\x{1FE0}-\\x{1FEC}" \
    "\\x{1FF2}-\\x{1FF4}\\x{1FF6}-\\x{1FFC}\\x{2102}\\x{2107}\\x{210A}-\\x{2113}\\x{2115}" \
    "\\x{2119}-\\x{211D}\\x{2124}\\x{2126}\\x{2128}\\x{212A}-\\x{212D}\\x{212F}-\\x{2134}" \
    "\\x{2139}\\x{213C}-\\x{213F}\\x{2145}-\\x{2149}\\x{214E}\\x{2183}\\x{2184}" \
    "\\x{2C00}-\\x{2C7B}\\x{2C7E}-\\x{2CE4}\\x{2CEB}-\\x{2CEE}\\x{2CF2}\\x{2CF3}" \
    "\\x{A640}-\\x{A66D}\\x{A680}-\\x{A69B}\\x{A722}-\\x{A76F}\\x{A771}-\\x{A787}" \
    "\\x{A78B}-\\x{A78E}\\x{AB70}-\\x{ABBF}\\x{FB00}-\\x{FB06}\\x{FB13}-\\x{FB17}" \
    "\\x{FF21}-\\x{FF3A}\\x{FF41}-\\x{FF5A}\\x{10400}-\\x{1044F}\\x{104B0}-\\x{104D3}" \
    "\\x{104D8}-\\x{104FB}\\x{10C80}-\\x{10CB2}\\x{10CC0}-\\x{10CF2}\\x{118A0}-\\x{118DF}" \
    "\\x{1E900}-\\x{1E943}"

/* Han, the rest of the BMP below it (less white space) and Hangul */
#define DEEPSEEK_CJK "(?:(?![" WS "])[\\x{4E00}-\\x{9FA5}\\x{0800}-\\x{4E00}\\x{AC00}-\\x{D7FF}])+"

/* deepseek-llm: newlines alone; letters and then ASCII and full-width punctuation, each with
 * one white-space character before it; trailing white space; CJK runs; digit runs */
#define R_DEEPSEEK_LLM_LETTERS "[" WS "]?[" DEEPSEEK_LLM_LETTERS "]+"
#define R_DEEPSEEK_LLM_PUNCT                                                                   \
    "[" WS "]?(?:(?![" WS "])[!-/:-~\\x{FF01}-\\x{FF0F}\\x{FF1A}-\\x{FF5E}\\x{2018}-\\x{201F}"  \
    "\\x{3000}-\\x{3002}])+"

/*
 * deepseek-v3: digits in threes, then Han and kana runs, then words: a punctuation mark or
 * symbol may lead ASCII letters; letters and marks with one optional character that is no
 * letter, punctuation or symbol (nor a newline) before them; punctuation and symbol runs
 * with an optional space before and the newlines after; then white space as llama3 has it.
 */
#define R_DEEPSEEK_V3                                                                          \
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\\r\\n\\p{L}\\p{P}\\p{S}]?[\\p{L}" \
    "\\p{M}]+| ?[\\p{P}\\p{S}]+[\\r\\n]*|[" WS "]*[\\r\\n]+|[" WS "]+(?![^" WS "])|[" WS "]+"

/*
 * Letters and combining marks as one run (qwen35; youtu and tiny_aya, whose case-aware
 * classes llama.cpp folds into plain letters), with one optional leading non-letter.
 */
#define R_QWEN35                                                                               \
    R_CONTRACTION "|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^" WS "\\p{L}\\p{M}\\p{N}]+"  \
    "[\\r\\n]*|[" WS "]*[\\r\\n]+|[" WS "]+(?![^" WS "])|[" WS "]+"
#define R_LETTERS_MARKS(numbers)                                                               \
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+" R_GPT4O_CONTRACTION "|" numbers "| ?[^" WS "\\p{L}"  \
    "\\p{N}]+[\\r\\n/]*|[" WS "]*[\\r\\n]+|[" WS "]+(?![^" WS "])|[" WS "]+"

/* youtu splits off Hangul, CJK punctuation, Bopomofo, and Han with kana, runs of each first */
#define R_YOUTU_CJK                                                                            \
    "[\\x{AC00}-\\x{D7A3}\\x{3131}-\\x{318E}]+|[\\x{FF01}\\x{2026}\\x{201C}\\x{201D}\\x{2018}"    \
    "\\x{2019}\\x{2014}\\x{FF1A}\\x{FF1B}\\x{FF0C}\\x{3001}-\\x{303F}\\x{FE30}-\\x{FE4F}]+|"     \
    "[\\x{3105}-\\x{312F}]+|[\\x{4E00}-\\x{9FA5}\\x{3040}-\\x{309F}\\x{30A0}-\\x{30FF}]+"

/* seed-coder: qwen2's split, except that a punctuation run leaves the newlines after it */
#define R_SEED_CODER                                                                           \
    R_CONTRACTION "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^" WS "\\p{L}\\p{N}]+|[" WS          \
    "]*[\\r\\n]+|[" WS "]+(?![^" WS "])|[" WS "]+"

/* viking: a word runs up to white space, a parenthesis, a bar, or a sentence mark (Latin,
 * CJK, Devanagari or Arabic) */
#define R_VIKING                                                                               \
    " ?[^(" WS "|.,!?\\x{2026}\\x{3002}\\x{FF0C}\\x{3001}\\x{0964}\\x{06D4}\\x{060C})]+"

/*
 * tiny_aya's digits: a digit run is cut into threes from the right, and llama.cpp glues
 * whatever precedes a run to its first group (the next regex splits that off again). \G keeps
 * each match where the previous one ended.
 */
#define R_DIGITS_FROM_RIGHT "\\G\\P{N}*+\\p{N}{1,3}(?=(?:\\p{N}{3})*+(?!\\p{N}))"

/*
 * superbpe: digit runs, then an empty match before every group of three counted from the
 * right; nothing else splits, so white space stays inside the words it joins. llama.cpp runs
 * this one without Unicode classes, so its digits are ASCII ones.
 */
#define R_SUPERBPE_GROUPS "(?=(?:[0-9]{3})+(?![0-9]))"

/* kimi-k2: Han runs, then o200k's words without case splits, of letters other than Han */
#define KIMI_HAN                                                                               \
    "\\x{4E00}-\\x{9FFF}\\x{3400}-\\x{4DBF}\\x{20000}-\\x{2A6DF}\\x{2A700}-\\x{2B73F}"            \
    "\\x{2B740}-\\x{2B81F}\\x{2B820}-\\x{2CEAF}\\x{2CEB0}-\\x{2EBEF}\\x{F900}-\\x{FAFF}"          \
    "\\x{2F800}-\\x{2FA1F}"
#define R_KIMI_K2                                                                              \
    "[" KIMI_HAN "]+|[^\\r\\n\\p{L}\\p{N}]?(?:(?![" KIMI_HAN "])\\p{L})+" R_GPT4O_CONTRACTION     \
    "|\\p{N}{1,3}| ?[^" WS "\\p{L}\\p{N}]+[\\r\\n]*|[" WS "]*[\\r\\n]+|[" WS "]+(?![^" WS "])|["  \
    WS "]+"

#define PRETOK_MAX_REGEX 6
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
      "mellum", "exaone4", "mpt", "olmo", "jais", "jina-v1-en", "jina-v2-code", "roberta-bpe",
      NULL},
     {R_GPT2, NULL},
     CLEAN},
    /* the default's, but with the backtick among the punctuation, and a space kept with a
     * number of fewer than three digits */
    {{"falcon", NULL}, {"[\\p{P}\\$\\+<=>\\^~\\|`]+", R_GPT2, "[0-9][0-9][0-9]", NULL}, CLEAN},
    {{"qwen2", "deepseek-r1-qwen", "kormo", "hunyuan", "f2llmv2", NULL},
     {R_QWEN2, NULL},
     NO_CLEAN},
    {{"stablelm2", "megrez", NULL}, {R_QWEN2, NULL}, CLEAN},
    {{"starcoder", "refact", "codeshell", "exaone", "minerva-7b", NULL},
     {"\\p{N}", R_GPT2, NULL},
     CLEAN},
    {{"command-r", NULL}, {"\\p{N}", R_GPT2, NULL}, NO_CLEAN},
    {{"glm4", "chatglm-bpe", NULL}, {R_LLAMA3, NULL}, CLEAN},
    {{"gpt-4o", "llama4", NULL}, {R_GPT4O, NULL}, NO_CLEAN},
    {{"deepseek-llm", NULL},
     {"[\\r\\n]", R_DEEPSEEK_LLM_LETTERS, R_DEEPSEEK_LLM_PUNCT, "[" WS "]+\\z", DEEPSEEK_CJK,
      "\\p{N}+"},
     NO_CLEAN},
    {{"deepseek-coder", NULL},
     {"[\\r\\n]", "[" WS "]?\\p{L}+", "[" WS "]?\\p{P}+", DEEPSEEK_CJK, "\\p{N}", NULL},
     NO_CLEAN},
    /* gemma4: spaces are already U+2581; lines and runs of newlines are the words */
    {{"gemma4", NULL}, {"[^\\n]+|[\\n]+", NULL}, {.add_bos = true, .clean_spaces = true}},
    {{"deepseek-v3", "joyai-llm", NULL},
     {"\\p{N}{1,3}", "[\\x{4E00}-\\x{9FA5}\\x{3040}-\\x{309F}\\x{30A0}-\\x{30FF}]+", R_DEEPSEEK_V3,
      NULL},
     NO_CLEAN},
    {{"tekken", NULL},
     {R_TEKKEN, NULL},
     {.add_bos = true, .ignore_merges = true, .clean_spaces = false}},
    {{"qwen35", NULL}, {R_QWEN35, NULL}, NO_CLEAN},
    {{"smollm", NULL}, {"\\p{N}", R_GPT2, NULL}, NO_CLEAN},
    {{"trillion", "granite-docling", NULL}, {R_GPT2, NULL}, NO_CLEAN},
    {{"youtu", NULL},
     {R_YOUTU_CJK, R_LETTERS_MARKS("\\p{N}"), NULL},
     {.ignore_merges = true, .clean_spaces = false}},
    {{"tiny_aya", NULL}, {R_DIGITS_FROM_RIGHT, R_LETTERS_MARKS("\\p{N}{1,3}"), NULL}, NO_CLEAN},
    {{"superbpe", NULL}, {"\\p{N}+", R_SUPERBPE_GROUPS, NULL}, NO_CLEAN},
    {{"seed-coder", NULL}, {R_SEED_CODER, NULL}, NO_CLEAN},
    {{"viking", NULL}, {R_VIKING, "\\p{N}", NULL}, NO_CLEAN},
    {{"kimi-k2", NULL}, {R_KIMI_K2, NULL}, NO_CLEAN},
    /* laguna: lines and runs of newlines first, then qwen2's split within them */
    {{"laguna", NULL}, {"[^\\n]+|[\\n]+", R_QWEN2, NULL}, NO_CLEAN},
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
        if (match_end == match_start) {
            /* An empty match (superbpe's lookahead) only cuts the word there. */
            if (match_start > pos && !push_word(s, out, n_out, word.start + pos,
                                                match_start - pos, err))
                return false;
            pos = match_start;
            if (match_end >= word.size)
                break;
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
