/*
 * Optional API keys for `corral serve` (CORRAL_API_KEYS, CORRAL_API_KEY_FILE): the set of
 * keys a request may present, and the check of a presented key. Only SHA-256 digests of the
 * keys are kept, and a check compares against every digest in constant time, so neither the
 * keys nor how much of one matched can leak through memory dumps, logs or timing. The key
 * file can be reloaded while requests are being checked (SIGHUP).
 */
#ifndef CORRAL_SERVER_API_KEYS_H
#define CORRAL_SERVER_API_KEYS_H

#include <stdbool.h>
#include <stddef.h>

#include "corral/error.h"

#define API_KEYS_MAX 4096u              /* keys in the list and the file together */
#define API_KEY_MAX_BYTES 512u          /* one key */
#define API_KEY_FILE_MAX_BYTES (1u << 20)

typedef struct api_keys api_keys;

/*
 * Keys from list (comma-separated, may be NULL) and from the file at file_path (one key per
 * line; blank lines and lines starting with '#' are skipped; may be NULL). NULL with err on
 * a malformed key, an unreadable file, or when a list or file was given but holds no key.
 * With neither given, the set is empty and checking is off (api_keys_enabled is false).
 */
api_keys *api_keys_create(const char *list, const char *file_path, corral_error *err);
void api_keys_free(api_keys *keys);

bool api_keys_enabled(const api_keys *keys);

/* Re-read the key file (the list stays). On failure the previous keys stay in force. */
bool api_keys_reload(api_keys *keys, corral_error *err);

/* Whether key (len bytes, not NUL-terminated) is one of the keys. */
bool api_keys_check(api_keys *keys, const char *key, size_t len);

/*
 * The key a request presents: "Authorization: Bearer KEY" (ollama's and OpenAI's clients)
 * or "x-api-key: KEY" (Anthropic's). Returns a pointer into the header and its length, or
 * NULL when neither header carries one.
 */
const char *api_keys_from_headers(const char *authorization, const char *x_api_key,
                                  size_t *len);

#endif
