/*
 * The streaming blob writer: chunks go to a temp file in blobs/ and through SHA-256 as they
 * arrive, so an upload of any size costs a constant amount of memory. Only finish, after the
 * size and digest matched and the data is on disk, renames the temp file to the blob's name;
 * every other ending removes it. Adopting a file already written in blobs/ ends the same way,
 * the file hashed by reading it back.
 */
#include "store/store_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct corral_blob_writer {
    corral_store *store;
    EVP_MD_CTX *sha;
    int fd;            /* -1 once closed */
    char *temp_path;   /* NULL once renamed into place or removed */
    uint64_t size_bytes;
    uint64_t max_bytes;
    bool failed;       /* a write failed: the temp file no longer holds the stream */
    bool out_of_space; /* ... because the file system is full (or the quota reached) */
};

corral_blob_writer *corral_blob_writer_create(corral_store *store, uint64_t max_bytes,
                                              corral_error *err)
{
    corral_blob_writer *w = calloc(1, sizeof *w);
    if (!w) {
        corral_error_set(err, "out of memory");
        return NULL;
    }
    w->store = store;
    w->fd = -1;
    w->max_bytes = max_bytes;
    w->sha = EVP_MD_CTX_new();
    char *temp_path = store_join(store->blobs_dir, STORE_TEMP_PREFIX "XXXXXX", NULL);
    if (!w->sha || !temp_path || !EVP_DigestInit_ex(w->sha, EVP_sha256(), NULL)) {
        corral_error_set(err, "out of memory");
        free(temp_path);
        corral_blob_writer_free(w);
        return NULL;
    }
    w->fd = mkostemp(temp_path, O_CLOEXEC);
    if (w->fd < 0) {
        corral_error_set(err, "cannot create a temporary file in '%s': %s", store->blobs_dir,
                         strerror(errno));
        free(temp_path);
        corral_blob_writer_free(w);
        return NULL;
    }
    w->temp_path = temp_path;
    return w;
}

bool corral_blob_writer_write(corral_blob_writer *w, const void *data, size_t len,
                              corral_error *err)
{
    if (w->failed || w->fd < 0) {
        corral_error_set(err, "blob writer: an earlier write failed or the blob is finished");
        return false;
    }
    if (len > w->max_bytes - w->size_bytes) {
        corral_error_set(err, "blob is larger than the limit of %llu bytes",
                         (unsigned long long)w->max_bytes);
        w->failed = true;
        return false;
    }
    const char *p = data;
    size_t left = len;
    while (left > 0) {
        ssize_t n = write(w->fd, p, left);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            w->out_of_space = errno == ENOSPC || errno == EDQUOT;
            corral_error_set(err, "cannot write '%s': %s", w->temp_path, strerror(errno));
            w->failed = true;
            return false;
        }
        p += n;
        left -= (size_t)n;
    }
    if (!EVP_DigestUpdate(w->sha, data, len)) {
        corral_error_set(err, "SHA-256 update failed");
        w->failed = true;
        return false;
    }
    w->size_bytes += len;
    return true;
}

bool corral_blob_writer_out_of_space(const corral_blob_writer *w)
{
    return w->out_of_space;
}

uint64_t corral_blob_writer_size(const corral_blob_writer *w)
{
    return w->size_bytes;
}

/* Close and unlink the temp file: the writer ends with nothing on disk. */
static void discard_temp(corral_blob_writer *w)
{
    if (w->fd >= 0)
        close(w->fd);
    w->fd = -1;
    if (w->temp_path)
        unlink(w->temp_path);
    free(w->temp_path);
    w->temp_path = NULL;
}

static corral_store_status fail(corral_blob_writer *w, corral_store_status status)
{
    discard_temp(w);
    return status;
}

corral_store_status corral_blob_writer_finish(corral_blob_writer *w, const char *expected_digest,
                                              uint64_t expected_size_bytes, corral_error *err)
{
    if (!corral_digest_check(expected_digest, err))
        return fail(w, CORRAL_STORE_INVALID);
    if (w->failed || w->fd < 0) {
        corral_error_set(err, "blob writer: an earlier write failed or the blob is finished");
        return fail(w, CORRAL_STORE_INVALID);
    }
    if (expected_size_bytes != CORRAL_BLOB_SIZE_UNKNOWN && expected_size_bytes != w->size_bytes) {
        corral_error_set(err, "size mismatch: expected %llu bytes, got %llu",
                         (unsigned long long)expected_size_bytes,
                         (unsigned long long)w->size_bytes);
        return fail(w, CORRAL_STORE_INVALID);
    }
    unsigned char hash[EVP_MAX_MD_SIZE];
    unsigned int hash_len = 0;
    if (!EVP_DigestFinal_ex(w->sha, hash, &hash_len) || hash_len != 32) {
        corral_error_set(err, "SHA-256 final failed");
        return fail(w, CORRAL_STORE_IO);
    }
    char actual[CORRAL_DIGEST_BUF];
    store_digest_format(hash, actual);
    if (strcmp(actual, expected_digest) != 0) {
        corral_error_set(err, "digest mismatch: expected %s, got %s", expected_digest, actual);
        return fail(w, CORRAL_STORE_INVALID);
    }

    /* The data is durable before its name appears; ollama's blobs are mode 0644. */
    int write_errno = 0;
    if (fsync(w->fd) != 0 || fchmod(w->fd, 0644) != 0)
        write_errno = errno;
    if (close(w->fd) != 0 && !write_errno)
        write_errno = errno;
    w->fd = -1;
    if (write_errno) {
        w->out_of_space = write_errno == ENOSPC || write_errno == EDQUOT;
        corral_error_set(err, "cannot write '%s': %s", w->temp_path, strerror(write_errno));
        return fail(w, CORRAL_STORE_IO);
    }
    char *final_path = corral_store_blob_path(w->store, expected_digest, err);
    if (!final_path)
        return fail(w, CORRAL_STORE_IO);
    corral_store_status status = CORRAL_STORE_OK;
    if (rename(w->temp_path, final_path) != 0) {
        corral_error_set(err, "cannot rename '%s' to '%s': %s", w->temp_path, final_path,
                         strerror(errno));
        status = fail(w, CORRAL_STORE_IO);
    } else {
        free(w->temp_path);
        w->temp_path = NULL;
        if (!store_fsync_dir(w->store->blobs_dir, err))
            status = CORRAL_STORE_IO;
    }
    free(final_path);
    return status;
}

void corral_blob_writer_free(corral_blob_writer *w)
{
    if (!w)
        return;
    discard_temp(w);
    EVP_MD_CTX_free(w->sha);
    free(w);
}

#define ADOPT_CHUNK_BYTES ((size_t)4 << 20)

/* The SHA-256 and size of the open file fd, read to its end. */
static bool hash_file(int fd, const char *path, char digest[CORRAL_DIGEST_BUF], uint64_t *size,
                      corral_error *err)
{
    EVP_MD_CTX *sha = EVP_MD_CTX_new();
    unsigned char *buf = malloc(ADOPT_CHUNK_BYTES);
    bool ok = sha && buf && EVP_DigestInit_ex(sha, EVP_sha256(), NULL);
    if (!ok)
        corral_error_set(err, "out of memory");
    *size = 0;
    while (ok) {
        ssize_t n = read(fd, buf, ADOPT_CHUNK_BYTES);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            corral_error_set(err, "cannot read '%s': %s", path, strerror(errno));
            ok = false;
        } else if (n == 0) {
            break;
        } else if (!EVP_DigestUpdate(sha, buf, (size_t)n)) {
            corral_error_set(err, "SHA-256 update failed");
            ok = false;
        }
        *size += n > 0 ? (uint64_t)n : 0;
    }
    unsigned char hash[EVP_MAX_MD_SIZE];
    unsigned int hash_len = 0;
    if (ok && (!EVP_DigestFinal_ex(sha, hash, &hash_len) || hash_len != 32)) {
        corral_error_set(err, "SHA-256 final failed");
        ok = false;
    }
    if (ok)
        store_digest_format(hash, digest);
    free(buf);
    EVP_MD_CTX_free(sha);
    return ok;
}

corral_store_status corral_store_blob_adopt(corral_store *store, const char *path,
                                            char digest[CORRAL_DIGEST_BUF],
                                            uint64_t *size_bytes, bool *existed,
                                            corral_error *err)
{
    *existed = false;
    size_t dir_len = strlen(store->blobs_dir);
    if (strncmp(path, store->blobs_dir, dir_len) != 0 || path[dir_len] != '/' ||
        !path[dir_len + 1] || strchr(path + dir_len + 1, '/')) {
        corral_error_set(err, "'%s' is not a file in '%s'", path, store->blobs_dir);
        return CORRAL_STORE_INVALID;
    }
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        corral_error_set(err, "cannot read '%s': %s", path, strerror(errno));
        if (fd >= 0)
            close(fd);
        unlink(path);
        return CORRAL_STORE_IO;
    }
    if (!S_ISREG(st.st_mode)) {
        corral_error_set(err, "'%s' is not a regular file", path);
        close(fd);
        return CORRAL_STORE_INVALID; /* not a file anything wrote: left alone */
    }
    /* the data is durable before its name appears; ollama's blobs are mode 0644 */
    bool ok = hash_file(fd, path, digest, size_bytes, err);
    if (ok && (fsync(fd) != 0 || fchmod(fd, 0644) != 0)) {
        corral_error_set(err, "cannot write '%s': %s", path, strerror(errno));
        ok = false;
    }
    close(fd);
    char *final_path = ok ? corral_store_blob_path(store, digest, err) : NULL;
    corral_store_status status = final_path ? CORRAL_STORE_OK : CORRAL_STORE_IO;
    if (final_path && corral_store_blob_stat(store, digest, NULL, NULL) == CORRAL_STORE_OK) {
        *existed = true;
        status = corral_store_blob_touch(store, digest, err);
    } else if (final_path && rename(path, final_path) != 0) {
        corral_error_set(err, "cannot rename '%s' to '%s': %s", path, final_path,
                         strerror(errno));
        status = CORRAL_STORE_IO;
    } else if (final_path && !store_fsync_dir(store->blobs_dir, err)) {
        status = CORRAL_STORE_IO;
    }
    if (*existed || status != CORRAL_STORE_OK)
        unlink(path);
    free(final_path);
    return status;
}
