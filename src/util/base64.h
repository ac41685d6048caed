/*
 * Base64 (RFC 4648 standard alphabet) encoding, and decoding for data clients send: images in the APIs
 * arrive as base64 strings or data: URLs. Strict as Go's standard decoder (what ollama
 * uses): '=' padding required, no URL-safe letters, no spaces; only CR and LF are skipped,
 * so MIME-style line breaks pass. Bounded: the decoded size is known before allocating and
 * checked against the caller's cap.
 */
#ifndef CORRAL_UTIL_BASE64_H
#define CORRAL_UTIL_BASE64_H

#include <stddef.h>
#include <stdint.h>

#include "corral/error.h"

/* The len bytes of text decoded (malloc'ed, *out_len bytes, at most max_bytes). NULL with err
 * set ("invalid base64: ...", "decoded data larger than N bytes") on any malformed input. An
 * empty text decodes to a non-NULL empty buffer. */
uint8_t *util_base64_decode(const char *text, size_t len, size_t max_bytes, size_t *out_len,
                            corral_error *err);

/* len bytes as base64 with '=' padding, NUL-terminated (malloc'ed); NULL when out of memory
 * or too long to encode. What a client sends an image as. */
char *util_base64_encode(const uint8_t *data, size_t len);

/* A data: URL ("data:image/png;base64,iVBOR...") split and decoded: its media type,
 * lowercased and without parameters, into mime (mime_size bytes, "" when the URL names none),
 * and its base64 payload as util_base64_decode gives it. NULL with err set when the text is
 * not a data: URL ("only data: URLs are accepted"), is not base64-encoded, or does not
 * decode. */
uint8_t *util_data_url_decode(const char *url, size_t len, size_t max_bytes, char *mime,
                              size_t mime_size, size_t *out_len, corral_error *err);

#endif
