/*
 * The store's root and its manifests by name: opening the layout, resolving a name to the
 * spelling on disk (case-insensitive, part by part), and reading, writing, copying and
 * deleting manifests. Blobs are blob.c's, the walk over all manifests list.c's, GC gc.c's.
 */
#include "store/store_internal.h"
#include "util/file.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

bool corral_store_default_root(char *buf, size_t cap, corral_error *err)
{
    const char *env = getenv("CORRAL_MODELS");
    if (!env || !*env)
        env = getenv("OLLAMA_MODELS");
    int n;
    if (env && *env) {
        n = snprintf(buf, cap, "%s", env);
    } else {
        const char *home = getenv("HOME");
        if (!home || !*home) {
            corral_error_set(err, "cannot find the model store: set CORRAL_MODELS or HOME");
            return false;
        }
        n = snprintf(buf, cap, "%s/.corral/models", home);
    }
    if (n < 0 || (size_t)n >= cap) {
        corral_error_set(err, "the model store path is longer than %zu bytes", cap - 1);
        return false;
    }
    return true;
}

corral_store *corral_store_open(const char *root, corral_error *err)
{
    if (!root || !*root) {
        corral_error_set(err, "the model store path is empty");
        return NULL;
    }
    corral_store *store = calloc(1, sizeof *store);
    if (store) {
        store->root = strdup(root);
        store->manifests_dir = store_join(root, "manifests", NULL);
        store->blobs_dir = store_join(root, "blobs", NULL);
    }
    if (!store || !store->root || !store->manifests_dir || !store->blobs_dir) {
        corral_error_set(err, "out of memory");
        corral_store_close(store);
        return NULL;
    }
    if (!util_mkdirs(store->manifests_dir, err) || !util_mkdirs(store->blobs_dir, err)) {
        corral_error_prefix(err, "model store '%s'", root);
        corral_store_close(store);
        return NULL;
    }
    return store;
}

void corral_store_close(corral_store *store)
{
    if (!store)
        return;
    free(store->root);
    free(store->manifests_dir);
    free(store->blobs_dir);
    free(store);
}

const char *corral_store_root(const corral_store *store)
{
    return store->root;
}

/* ---- resolving a name to its spelling on disk ---- */

static bool stat_is(const struct stat *st, bool want_dir)
{
    return want_dir ? S_ISDIR(st->st_mode) : S_ISREG(st->st_mode);
}

/* The entry of dir equal to part ignoring case (the exact spelling first), of the wanted
 * type, into found. false when there is none. */
static bool find_entry(const char *dir, const char *part, bool want_dir, char *found, size_t cap)
{
    char *exact = store_join(dir, part, NULL);
    struct stat st;
    bool exact_ok = exact && stat(exact, &st) == 0 && stat_is(&st, want_dir);
    free(exact);
    if (exact_ok) {
        snprintf(found, cap, "%s", part);
        return true;
    }
    DIR *d = opendir(dir);
    if (!d)
        return false;
    bool ok = false;
    for (struct dirent *e = readdir(d); e && !ok; e = readdir(d)) {
        if (!store_ascii_equal_fold(e->d_name, part) || strlen(e->d_name) >= cap)
            continue;
        if (fstatat(dirfd(d), e->d_name, &st, 0) != 0)
            continue;
        if (stat_is(&st, want_dir)) {
            snprintf(found, cap, "%s", e->d_name);
            ok = true;
        }
    }
    closedir(d);
    return ok;
}

/* stored = name with each leading part that exists on disk in its disk spelling; returns
 * how many parts (0-4) exist. The rest keep name's spelling. */
static int resolve_parts(const corral_store *store, const corral_model_name *name,
                         corral_model_name *stored)
{
    *stored = *name;
    const char *want[] = {name->host, name->namespace, name->model, name->tag};
    char *spelling[] = {stored->host, stored->namespace, stored->model, stored->tag};
    size_t caps[] = {sizeof stored->host, sizeof stored->namespace, sizeof stored->model,
                     sizeof stored->tag};
    char *dir = strdup(store->manifests_dir);
    int level = 0;
    for (; dir && level < 4; level++) {
        if (!find_entry(dir, want[level], level < 3, spelling[level], caps[level]))
            break;
        char *next = store_join(dir, spelling[level], NULL);
        free(dir);
        dir = next;
    }
    free(dir);
    return level;
}

static bool name_check(const corral_model_name *name, corral_error *err)
{
    if (corral_model_name_is_valid(name))
        return true;
    corral_error_set(err, "invalid model name");
    return false;
}

static void set_not_found(const corral_model_name *name, corral_error *err)
{
    char shown[CORRAL_NAME_STRING_MAX];
    corral_model_name_display(name, shown, sizeof shown);
    corral_error_set(err, "model '%s' not found", shown);
}

corral_store_status corral_store_resolve(const corral_store *store, const corral_model_name *name,
                                         corral_model_name *stored, corral_error *err)
{
    if (!name_check(name, err))
        return CORRAL_STORE_INVALID;
    corral_model_name found;
    if (resolve_parts(store, name, &found) < 4) {
        set_not_found(name, err);
        return CORRAL_STORE_NOT_FOUND;
    }
    *stored = found;
    return CORRAL_STORE_OK;
}

char *corral_store_manifest_path(const corral_store *store, const corral_model_name *name,
                                 corral_error *err)
{
    if (!name_check(name, err))
        return NULL;
    char *path = store_join(store->manifests_dir, name->host, name->namespace, name->model,
                            name->tag, NULL);
    if (!path)
        corral_error_set(err, "out of memory");
    return path;
}

/* ---- reading ---- */

/* The bytes of name's manifest (found case-insensitively), unparsed. */
static corral_store_status read_manifest_bytes(const corral_store *store,
                                               const corral_model_name *name, char **bytes,
                                               size_t *len, struct timespec *modified,
                                               corral_error *err)
{
    corral_model_name stored;
    corral_store_status status = corral_store_resolve(store, name, &stored, err);
    if (status != CORRAL_STORE_OK)
        return status;
    char *path = corral_store_manifest_path(store, &stored, err);
    if (!path)
        return CORRAL_STORE_IO;
    status = store_read_file(path, CORRAL_MANIFEST_MAX_BYTES, bytes, len, modified, err);
    free(path);
    /* Removed between resolve and open: the model is gone, say so plainly. */
    if (status == CORRAL_STORE_NOT_FOUND)
        set_not_found(name, err);
    return status;
}

corral_store_status corral_store_manifest_read(const corral_store *store,
                                               const corral_model_name *name,
                                               corral_manifest **out,
                                               char raw_digest[CORRAL_DIGEST_BUF],
                                               struct timespec *modified, corral_error *err)
{
    char *bytes;
    size_t len;
    corral_store_status status = read_manifest_bytes(store, name, &bytes, &len, modified, err);
    if (status != CORRAL_STORE_OK)
        return status;
    corral_manifest *m = corral_manifest_parse(bytes, len, err);
    if (m && raw_digest)
        corral_digest_of(bytes, len, raw_digest);
    free(bytes);
    if (!m) {
        char shown[CORRAL_NAME_STRING_MAX];
        corral_model_name_display(name, shown, sizeof shown);
        corral_error_prefix(err, "model '%s'", shown);
        return CORRAL_STORE_INVALID;
    }
    *out = m;
    return CORRAL_STORE_OK;
}

/* ---- writing ---- */

static corral_store_status check_blob(const corral_store *store, const corral_layer *layer,
                                      const char *where, corral_error *err)
{
    uint64_t size;
    corral_store_status status = corral_store_blob_stat(store, layer->digest, &size, err);
    if (status == CORRAL_STORE_NOT_FOUND) {
        corral_error_set(err, "%s %s (%s) is not in the store", where, layer->digest,
                         layer->media_type);
        return CORRAL_STORE_INVALID;
    }
    if (status == CORRAL_STORE_OK && size != layer->size_bytes) {
        corral_error_set(err, "%s %s is %llu bytes but the manifest says %llu", where,
                         layer->digest, (unsigned long long)size,
                         (unsigned long long)layer->size_bytes);
        return CORRAL_STORE_INVALID;
    }
    return status;
}

corral_store_status corral_store_manifest_write_raw(corral_store *store,
                                                    const corral_model_name *name,
                                                    const char *json, size_t len,
                                                    corral_error *err)
{
    if (!name_check(name, err))
        return CORRAL_STORE_INVALID;
    corral_manifest *m = corral_manifest_parse(json, len, err);
    if (!m)
        return CORRAL_STORE_INVALID;
    corral_store_status status = check_blob(store, &m->config, "config", err);
    for (size_t i = 0; i < m->n_layers && status == CORRAL_STORE_OK; i++)
        status = check_blob(store, &m->layers[i], "layer", err);
    corral_manifest_free(m);
    if (status != CORRAL_STORE_OK)
        return status;

    corral_model_name stored;
    resolve_parts(store, name, &stored);
    char *path = corral_store_manifest_path(store, &stored, err);
    char *dir = path ? store_dirname(path) : NULL;
    if (path && !dir)
        corral_error_set(err, "out of memory");
    status = dir && util_mkdirs(dir, err) && store_write_file_atomic(path, json, len, err)
                 ? CORRAL_STORE_OK
                 : CORRAL_STORE_IO;
    free(dir);
    free(path);
    return status;
}

corral_store_status corral_store_manifest_write(corral_store *store, const corral_model_name *name,
                                                const corral_manifest *m, corral_error *err)
{
    size_t len;
    char *json = corral_manifest_serialize(m, &len, err);
    if (!json)
        return CORRAL_STORE_INVALID;
    corral_store_status status = corral_store_manifest_write_raw(store, name, json, len, err);
    free(json);
    return status;
}

corral_store_status corral_store_manifest_copy(corral_store *store, const corral_model_name *src,
                                               const corral_model_name *dst, corral_error *err)
{
    if (!name_check(dst, err))
        return CORRAL_STORE_INVALID;
    char *bytes;
    size_t len;
    corral_store_status status = read_manifest_bytes(store, src, &bytes, &len, NULL, err);
    if (status != CORRAL_STORE_OK)
        return status;
    status = corral_store_manifest_write_raw(store, dst, bytes, len, err);
    free(bytes);
    return status;
}

/* ---- deleting ---- */

/* rmdir the model, namespace and host directories above a removed manifest while empty. */
static void remove_empty_parents(const corral_store *store, const corral_model_name *stored)
{
    char *dirs[] = {
        store_join(store->manifests_dir, stored->host, stored->namespace, stored->model, NULL),
        store_join(store->manifests_dir, stored->host, stored->namespace, NULL),
        store_join(store->manifests_dir, stored->host, NULL),
    };
    bool removing = true;
    for (size_t i = 0; i < 3; i++) {
        removing = removing && dirs[i] && rmdir(dirs[i]) == 0;
        free(dirs[i]);
    }
}

/* Unlink the blobs of m that no manifest on disk references any more. */
static void remove_orphaned_layers(corral_store *store, const corral_manifest *m)
{
    store_digest_set refs = {0};
    corral_error ignored;
    /* If another manifest cannot be read we cannot know what it shares: keep every blob and
     * leave them to a later corral_store_gc, which reports the bad manifest. */
    if (store_collect_references(store, &refs, &ignored) != CORRAL_STORE_OK) {
        store_digest_set_free(&refs);
        return;
    }
    for (size_t i = 0; i <= m->n_layers; i++) {
        const char *digest = i < m->n_layers ? m->layers[i].digest : m->config.digest;
        if (store_digest_set_has(&refs, digest))
            continue;
        char *path = corral_store_blob_path(store, digest, &ignored);
        if (path)
            unlink(path);
        free(path);
    }
    store_digest_set_free(&refs);
    store_fsync_dir(store->blobs_dir, &ignored);
}

corral_store_status corral_store_manifest_delete(corral_store *store,
                                                 const corral_model_name *name,
                                                 corral_error *err)
{
    corral_model_name stored;
    corral_store_status status = corral_store_resolve(store, name, &stored, err);
    if (status != CORRAL_STORE_OK)
        return status;
    char *path = corral_store_manifest_path(store, &stored, err);
    if (!path)
        return CORRAL_STORE_IO;
    char *bytes = NULL;
    size_t len = 0;
    corral_manifest *m = NULL;
    corral_error ignored;
    /* A manifest that does not parse is still deleted; only its blobs stay (for GC). */
    if (store_read_file(path, CORRAL_MANIFEST_MAX_BYTES, &bytes, &len, NULL, &ignored) ==
        CORRAL_STORE_OK)
        m = corral_manifest_parse(bytes, len, &ignored);
    free(bytes);

    if (unlink(path) != 0) {
        corral_error_set(err, "cannot remove '%s': %s", path, strerror(errno));
        status = errno == ENOENT ? CORRAL_STORE_NOT_FOUND : CORRAL_STORE_IO;
    } else {
        char *dir = store_dirname(path);
        if (dir)
            store_fsync_dir(dir, &ignored);
        free(dir);
        remove_empty_parents(store, &stored);
        if (m)
            remove_orphaned_layers(store, m);
    }
    corral_manifest_free(m);
    free(path);
    return status;
}
