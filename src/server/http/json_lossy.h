/*
 * JSON strings of untrusted bytes: GGUF metadata, and error messages that echo a request's
 * input or were cut by a length limit. Bytes that are not UTF-8 become U+FFFD, as Go's JSON
 * encoder writes them, so such text can always be sent rather than failing the whole reply.
 */
#ifndef CORRAL_SERVER_JSON_LOSSY_H
#define CORRAL_SERVER_JSON_LOSSY_H

#include <jansson.h>
#include <stddef.h>

/* A JSON string of data[0..len); NULL only when out of memory. */
json_t *json_string_lossy(const char *data, size_t len);

#endif
