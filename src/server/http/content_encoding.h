/*
 * Request bodies sent compressed (Content-Encoding): what the server can read, decoded into
 * plain bytes before any handler sees them. Codex sends its /v1/responses bodies as zstd;
 * decoding is bounded by the same cap as a plain body, so a small compressed body cannot
 * unpack into more memory than a client could have sent plainly.
 */
#ifndef CORRAL_SERVER_HTTP_CONTENT_ENCODING_H
#define CORRAL_SERVER_HTTP_CONTENT_ENCODING_H

#include <stdbool.h>
#include <stddef.h>

/*
 * in (in_len bytes) as sent with Content-Encoding encoding (NULL, "" or "identity": as it
 * is, nothing allocated and *out NULL). "zstd" is decoded into *out (malloc'd, NUL-terminated,
 * *out_len bytes before the NUL), at most cap bytes. false with the HTTP status and message
 * (size bytes): 413 past cap, 400 for data that does not decode, 415 for another encoding,
 * 500 out of memory.
 */
bool http_body_decode(const char *encoding, const char *in, size_t in_len, size_t cap,
                      char **out, size_t *out_len, unsigned *status, char *message, size_t size);

#endif
