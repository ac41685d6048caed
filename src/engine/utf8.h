/*
 * UTF-8 as the tokenizers see it: llama.cpp's lenient decoder (every byte string decodes to
 * some code points, never an error) and the completeness check the streaming detokenizer
 * needs. Validation in the strict sense is utf8_valid_prefix; encoding is util/text.h's.
 */
#ifndef CORRAL_ENGINE_UTF8_H
#define CORRAL_ENGINE_UTF8_H

#include <stddef.h>
#include <stdint.h>

#define UTF8_REPLACEMENT 0xFFFDu

/*
 * Decode one code point at s[0..len) (len > 0) as llama.cpp does: a bad lead byte, a missing
 * or wrong continuation byte or a cut sequence gives U+FFFD and consumes one byte; overlong
 * forms and surrogates are accepted as decoded. Values above U+10FFFF (lead F4..F7), on which
 * llama.cpp aborts, give U+FFFD and consume the whole sequence. Sets *n_bytes.
 */
uint32_t utf8_decode_lenient(const unsigned char *s, size_t len, size_t *n_bytes);

/* Bytes of the sequence a lead byte starts, by its high nibble only (SPM's symbol rule). */
size_t utf8_len_from_lead(unsigned char lead);

/*
 * Strict (RFC 3629) scan of s[0..len). Returns the length of the longest prefix made of
 * complete valid sequences; *incomplete_tail is set when the remainder is a proper prefix of
 * a valid sequence (more bytes could complete it), and cleared when it is invalid or empty.
 */
size_t utf8_valid_prefix(const unsigned char *s, size_t len, int *incomplete_tail);

#endif
