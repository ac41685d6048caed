/*
 * Content digests: the one accepted form ("sha256:" + 64 lowercase hex, nothing else) and
 * hashing bytes into it. Every path the store forms from a digest is formed after
 * corral_digest_is_valid said yes, so a digest can never name anything outside blobs/.
 */
#include "store/store_internal.h"

#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool corral_digest_is_valid(const char *digest)
{
    if (strncmp(digest, "sha256:", 7) != 0)
        return false;
    for (size_t i = 7; i < CORRAL_DIGEST_LEN; i++) {
        char c = digest[i];
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
            return false;
    }
    return digest[CORRAL_DIGEST_LEN] == '\0';
}

bool corral_digest_check(const char *digest, corral_error *err)
{
    if (corral_digest_is_valid(digest))
        return true;
    char shown[96];
    store_printable(digest, shown, sizeof shown);
    corral_error_set(err, "invalid digest format: '%s' (want sha256: and 64 lowercase hex digits)",
                     shown);
    return false;
}

void corral_digest_of(const void *data, size_t len, char out[CORRAL_DIGEST_BUF])
{
    unsigned char hash[EVP_MAX_MD_SIZE];
    unsigned int hash_len = 0;
    /* EVP_Digest fails only when libcrypto cannot allocate or lacks SHA-256: not input. */
    if (!EVP_Digest(data, len, hash, &hash_len, EVP_sha256(), NULL) || hash_len != 32) {
        fprintf(stderr, "corral: libcrypto SHA-256 failed\n");
        abort();
    }
    store_digest_format(hash, out);
}

void store_digest_format(const unsigned char hash[32], char out[CORRAL_DIGEST_BUF])
{
    static const char hex[] = "0123456789abcdef";
    memcpy(out, "sha256:", 7);
    for (unsigned i = 0; i < 32; i++) {
        out[7 + 2 * i] = hex[hash[i] >> 4];
        out[8 + 2 * i] = hex[hash[i] & 15];
    }
    out[CORRAL_DIGEST_LEN] = '\0';
}
