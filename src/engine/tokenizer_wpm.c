/*
 * WordPiece (BERT) tokenization of one raw fragment, as llama.cpp does it: accents stripped by
 * the first code point of each character's canonical decomposition, lower-casing, words split
 * at whitespace and around punctuation, ASCII symbols and CJK ideographs, then each word
 * (with its U+2581 word mark) cut greedily into the longest vocabulary pieces, or [UNK] as a
 * whole. Unicode properties come from utf8proc; White_Space is the \t-\r, U+0085 and Z set.
 */
#include <string.h>

#include <utf8proc.h>

#include "util/text.h"
#include "utf8.h"
#include "vocab.h"

static const char word_mark[3] = {'\xE2', '\x96', '\x81'}; /* U+2581 */

/* llama.cpp's one-to-one "NFD" table: a character becomes its decomposition's first code
 * point (é -> e, Å -> A); what does not decompose stays. */
static uint32_t strip_accent(uint32_t cp)
{
    enum { MAX_DECOMPOSED = 8 }; /* canonical decompositions are at most 4 code points */
    utf8proc_int32_t decomposed[MAX_DECOMPOSED];
    utf8proc_ssize_t n = utf8proc_decompose_char((utf8proc_int32_t)cp, decomposed,
                                                 MAX_DECOMPOSED, UTF8PROC_DECOMPOSE, NULL);
    return n > 0 && n <= MAX_DECOMPOSED ? (uint32_t)decomposed[0] : cp;
}

static bool is_whitespace(uint32_t cp, utf8proc_category_t cat)
{
    return (cp >= '\t' && cp <= '\r') || cp == 0x85 || cat == UTF8PROC_CATEGORY_ZS ||
           cat == UTF8PROC_CATEGORY_ZL || cat == UTF8PROC_CATEGORY_ZP;
}

/* Category C as llama.cpp's flags have it: Cc, Cf, Cs and Co (unassigned Cn is not). */
static bool is_other(utf8proc_category_t cat)
{
    return cat == UTF8PROC_CATEGORY_CC || cat == UTF8PROC_CATEGORY_CF ||
           cat == UTF8PROC_CATEGORY_CS || cat == UTF8PROC_CATEGORY_CO;
}

static bool is_cjk(uint32_t cp)
{
    return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) ||
           (cp >= 0x20000 && cp <= 0x2A6DF) || (cp >= 0x2A700 && cp <= 0x2B73F) ||
           (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B920 && cp <= 0x2CEAF) ||
           (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

/* A character that is a word by itself: punctuation, an ASCII symbol, a CJK ideograph. */
static bool is_lone(uint32_t cp, utf8proc_category_t cat)
{
    bool punct = cat >= UTF8PROC_CATEGORY_PC && cat <= UTF8PROC_CATEGORY_PO;
    bool symbol = cat >= UTF8PROC_CATEGORY_SM && cat <= UTF8PROC_CATEGORY_SO;
    return punct || (cp < 0x7F && symbol) || is_cjk(cp);
}

/*
 * word[0..n), which starts with the word mark, as the longest pieces from the left; a
 * position no piece starts at makes the whole word one unk (nothing when there is none).
 */
static bool emit_word(const corral_vocab *v, const char *word, size_t n, token_list *out,
                      corral_error *err)
{
    size_t first = out->n;
    for (size_t i = 0; i < n;) {
        /* llama.cpp tries one byte more than the longest token: harmless, kept for parity */
        size_t j = n - i < v->max_token_bytes + 1 ? n : i + v->max_token_bytes + 1;
        corral_token id = -1;
        while (j > i && (id = token_map_find(&v->token_ids, word + i, j - i)) < 0)
            j--;
        if (id < 0) {
            out->n = first;
            break;
        }
        if (!token_list_push(out, id, err))
            return false;
        i = j;
    }
    if (out->n == first && v->unk >= 0)
        return token_list_push(out, v->unk, err);
    return true;
}

bool wpm_tokenize_fragment(const corral_vocab *v, const char *text, size_t len,
                           tokenize_scratch *scratch, token_list *out, corral_error *err)
{
    /* one word at a time: the mark, then at most 4 bytes per input byte (lower-casing can
     * lengthen a character); len <= VOCAB_MAX_TEXT_BYTES, so no overflow */
    if (!tokenize_scratch_bytes(scratch, 0, sizeof word_mark + 4 * len, err))
        return false;
    char *word = scratch->bytes[0];
    memcpy(word, word_mark, sizeof word_mark);
    size_t n = sizeof word_mark; /* bytes of the word being built, mark included */
    const unsigned char *s = (const unsigned char *)text;
    for (size_t pos = 0; pos < len;) {
        size_t used;
        uint32_t cp = strip_accent(utf8_decode_lenient(s + pos, len - pos, &used));
        pos += used;
        utf8proc_category_t cat = utf8proc_category((utf8proc_int32_t)cp);
        bool ends_word = is_whitespace(cp, cat), lone = !ends_word && is_lone(cp, cat);
        if (!ends_word && (cp == 0 || cp == UTF8_REPLACEMENT || is_other(cat)))
            continue; /* dropped without splitting the word */
        if ((ends_word || lone) && n > sizeof word_mark) {
            if (!emit_word(v, word, n, out, err))
                return false;
            n = sizeof word_mark;
        }
        if (ends_word)
            continue;
        n += text_utf8_encode((uint32_t)utf8proc_tolower((utf8proc_int32_t)cp),
                              (unsigned char *)word + n);
        if (lone) {
            if (!emit_word(v, word, n, out, err))
                return false;
            n = sizeof word_mark;
        }
    }
    return n == sizeof word_mark || emit_word(v, word, n, out, err);
}
