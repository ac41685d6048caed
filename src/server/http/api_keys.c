/*
 * API keys (see api_keys.h). The set is a flat array of SHA-256 digests behind a
 * read-write lock: checks take it shared, a reload builds the new array first and swaps it
 * in under the exclusive lock, so a failed reload leaves the old keys untouched.
 */
#include "server/http/api_keys.h"

#include <ctype.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "util/file.h"

#define DIGEST_BYTES 32

typedef struct key_digests {
    uint8_t (*digest)[DIGEST_BYTES];
    size_t count, cap;
} key_digests;

struct api_keys {
    pthread_rwlock_t lock;
    char *file_path;
    key_digests from_list; /* fixed at creation */
    key_digests from_file; /* replaced by a reload */
};

static bool sha256(const char *data, size_t len, uint8_t out[DIGEST_BYTES])
{
    unsigned n = 0;
    return EVP_Digest(data, len, out, &n, EVP_sha256(), NULL) == 1 && n == DIGEST_BYTES;
}

/* Printable ASCII without spaces: what fits in a header and cannot hide a line break. */
static bool key_is_valid(const char *key, size_t len)
{
    if (len == 0 || len > API_KEY_MAX_BYTES)
        return false;
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)key[i] <= ' ' || (unsigned char)key[i] >= 0x7f)
            return false;
    return true;
}

static bool add_key(key_digests *set, size_t others, const char *key, size_t len,
                    const char *where, corral_error *err)
{
    if (!key_is_valid(key, len)) {
        corral_error_set(err, "%s: an API key must be 1 to %u printable characters without "
                              "spaces", where, API_KEY_MAX_BYTES);
        return false;
    }
    if (set->count + others >= API_KEYS_MAX) {
        corral_error_set(err, "%s: more than %u API keys", where, API_KEYS_MAX);
        return false;
    }
    if (set->count == set->cap) {
        size_t cap = set->cap ? set->cap * 2 : 8;
        void *grown = realloc(set->digest, cap * sizeof *set->digest);
        if (!grown) {
            corral_error_set(err, "out of memory");
            return false;
        }
        set->digest = grown;
        set->cap = cap;
    }
    if (!sha256(key, len, set->digest[set->count])) {
        corral_error_set(err, "SHA-256 failed");
        return false;
    }
    set->count++;
    return true;
}

static void trim(const char **start, size_t *len)
{
    while (*len && isspace((unsigned char)**start)) {
        (*start)++;
        (*len)--;
    }
    while (*len && isspace((unsigned char)(*start)[*len - 1]))
        (*len)--;
}

static bool parse_list(key_digests *set, const char *list, corral_error *err)
{
    const char *p = list;
    for (;;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        const char *key = p;
        trim(&key, &len);
        if (len && !add_key(set, 0, key, len, "CORRAL_API_KEYS", err))
            return false;
        if (!comma)
            break;
        p = comma + 1;
    }
    if (set->count == 0) {
        corral_error_set(err, "CORRAL_API_KEYS is set but holds no key");
        return false;
    }
    return true;
}

static bool read_file(const char *path, key_digests *set, size_t others, corral_error *err)
{
    size_t n;
    char *text = util_read_file(path, API_KEY_FILE_MAX_BYTES, &n, err);
    if (!text) {
        corral_error_prefix(err, "CORRAL_API_KEY_FILE");
        return false;
    }
    bool ok = true;
    unsigned line_no = 0;
    for (char *line = text; ok && line < text + n;) {
        char *end = memchr(line, '\n', (size_t)(text + n - line));
        size_t len = end ? (size_t)(end - line) : (size_t)(text + n - line);
        const char *key = line;
        line_no++;
        trim(&key, &len);
        if (len && key[0] != '#') {
            char where[64];
            snprintf(where, sizeof where, "CORRAL_API_KEY_FILE line %u", line_no);
            ok = add_key(set, others, key, len, where, err);
        }
        line = end ? end + 1 : text + n;
    }
    explicit_bzero(text, n);
    free(text);
    if (ok && set->count == 0) {
        corral_error_set(err, "CORRAL_API_KEY_FILE '%s' holds no key", path);
        ok = false;
    }
    return ok;
}

api_keys *api_keys_create(const char *list, const char *file_path, corral_error *err)
{
    api_keys *keys = calloc(1, sizeof *keys);
    if (!keys || pthread_rwlock_init(&keys->lock, NULL) != 0) {
        free(keys);
        corral_error_set(err, "out of memory");
        return NULL;
    }
    if ((list && !parse_list(&keys->from_list, list, err)) ||
        (file_path && !(keys->file_path = strdup(file_path)))) {
        if (file_path && !keys->file_path)
            corral_error_set(err, "out of memory");
        api_keys_free(keys);
        return NULL;
    }
    if (file_path && !read_file(file_path, &keys->from_file, keys->from_list.count, err)) {
        api_keys_free(keys);
        return NULL;
    }
    return keys;
}

void api_keys_free(api_keys *keys)
{
    if (!keys)
        return;
    pthread_rwlock_destroy(&keys->lock);
    free(keys->from_list.digest);
    free(keys->from_file.digest);
    free(keys->file_path);
    free(keys);
}

bool api_keys_enabled(const api_keys *keys)
{
    return keys && (keys->from_list.count > 0 || keys->file_path);
}

bool api_keys_reload(api_keys *keys, corral_error *err)
{
    if (!keys->file_path)
        return true;
    key_digests fresh = {0};
    if (!read_file(keys->file_path, &fresh, keys->from_list.count, err)) {
        free(fresh.digest);
        return false;
    }
    pthread_rwlock_wrlock(&keys->lock);
    key_digests old = keys->from_file;
    keys->from_file = fresh;
    pthread_rwlock_unlock(&keys->lock);
    free(old.digest);
    return true;
}

/* Every digest is compared, whatever matched, so the time says nothing about the key. */
static unsigned match_any(const key_digests *set, const uint8_t digest[DIGEST_BYTES])
{
    unsigned found = 0;
    for (size_t i = 0; i < set->count; i++)
        found |= CRYPTO_memcmp(set->digest[i], digest, DIGEST_BYTES) == 0;
    return found;
}

bool api_keys_check(api_keys *keys, const char *key, size_t len)
{
    uint8_t digest[DIGEST_BYTES];
    if (!key || !key_is_valid(key, len) || !sha256(key, len, digest))
        return false;
    pthread_rwlock_rdlock(&keys->lock);
    unsigned found = match_any(&keys->from_list, digest) | match_any(&keys->from_file, digest);
    pthread_rwlock_unlock(&keys->lock);
    return found != 0;
}

const char *api_keys_from_headers(const char *authorization, const char *x_api_key,
                                  size_t *len)
{
    const char *key = NULL;
    if (authorization && strncasecmp(authorization, "Bearer ", 7) == 0)
        key = authorization + 7;
    else if (x_api_key)
        key = x_api_key;
    if (!key)
        return NULL;
    *len = strlen(key);
    trim(&key, len);
    return *len ? key : NULL;
}
