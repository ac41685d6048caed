/*
 * Everything that looks at all manifests at once: the walk over manifests/<host>/<namespace>/
 * <model>/<tag>, the model list for /api/tags, and the set of digests the manifests reference
 * (for delete and GC). Only entries whose every path component is a valid name part count;
 * temp files and stray files are invisible here.
 */
#include "store/store_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ---- the walk ---- */

typedef struct manifest_walk {
    store_manifest_visitor visit;
    void *ctx;
    corral_model_name name;
} manifest_walk;

static corral_store_status walk_level(manifest_walk *w, const char *dir, unsigned level,
                                      corral_error *err)
{
    DIR *d = opendir(dir);
    if (!d) {
        if (errno == ENOENT || errno == ENOTDIR)
            return CORRAL_STORE_OK;
        corral_error_set(err, "cannot read directory '%s': %s", dir, strerror(errno));
        return CORRAL_STORE_IO;
    }
    char *parts[] = {w->name.host, w->name.namespace, w->name.model, w->name.tag};
    size_t caps[] = {sizeof w->name.host, sizeof w->name.namespace, sizeof w->name.model,
                     sizeof w->name.tag};
    corral_store_status status = CORRAL_STORE_OK;
    for (struct dirent *e = readdir(d); e && status == CORRAL_STORE_OK; e = readdir(d)) {
        if (strlen(e->d_name) >= caps[level] || !store_name_part_is_valid(level, e->d_name))
            continue;
        struct stat st;
        if (fstatat(dirfd(d), e->d_name, &st, 0) != 0)
            continue;
        bool wanted = level < 3 ? S_ISDIR(st.st_mode) : S_ISREG(st.st_mode);
        if (!wanted)
            continue;
        strcpy(parts[level], e->d_name);
        char *path = store_join(dir, e->d_name, NULL);
        if (!path) {
            corral_error_set(err, "out of memory");
            status = CORRAL_STORE_IO;
        } else if (level < 3) {
            status = walk_level(w, path, level + 1, err);
        } else {
            status = w->visit(w->ctx, &w->name, path, err);
        }
        free(path);
    }
    closedir(d);
    return status;
}

corral_store_status store_walk_manifests(const corral_store *store, store_manifest_visitor visit,
                                         void *ctx, corral_error *err)
{
    manifest_walk w = {.visit = visit, .ctx = ctx};
    return walk_level(&w, store->manifests_dir, 0, err);
}

/* ---- the list ---- */

typedef struct entry_list {
    corral_store_entry *entries;
    size_t n, cap;
} entry_list;

static corral_store_status add_entry(void *ctx, const corral_model_name *name, const char *path,
                                     corral_error *err)
{
    entry_list *list = ctx;
    char *bytes;
    size_t len;
    struct timespec modified;
    corral_error skipped;
    if (store_read_file(path, CORRAL_MANIFEST_MAX_BYTES, &bytes, &len, &modified, &skipped) !=
        CORRAL_STORE_OK)
        return CORRAL_STORE_OK;
    corral_manifest *m = corral_manifest_parse(bytes, len, &skipped);
    char digest[CORRAL_DIGEST_BUF];
    corral_digest_of(bytes, len, digest);
    free(bytes);
    if (!m)
        return CORRAL_STORE_OK;

    if (list->n == list->cap) {
        size_t cap = list->cap ? 2 * list->cap : 16;
        corral_store_entry *grown = realloc(list->entries, cap * sizeof *grown);
        if (!grown) {
            corral_manifest_free(m);
            corral_error_set(err, "out of memory listing models");
            return CORRAL_STORE_IO;
        }
        list->entries = grown;
        list->cap = cap;
    }
    corral_store_entry *e = &list->entries[list->n++];
    memset(e, 0, sizeof *e);
    e->name = *name;
    corral_model_name_display(name, e->display, sizeof e->display);
    e->modified = modified;
    e->size_bytes = corral_manifest_total_size(m);
    memcpy(e->digest_hex, digest + 7, 65);
    e->manifest = m;
    return CORRAL_STORE_OK;
}

/* Newest first; equal times by name so the order is stable. */
static int compare_entries(const void *pa, const void *pb)
{
    const corral_store_entry *a = pa, *b = pb;
    if (a->modified.tv_sec != b->modified.tv_sec)
        return a->modified.tv_sec > b->modified.tv_sec ? -1 : 1;
    if (a->modified.tv_nsec != b->modified.tv_nsec)
        return a->modified.tv_nsec > b->modified.tv_nsec ? -1 : 1;
    return strcmp(a->display, b->display);
}

corral_store_status corral_store_list(const corral_store *store, corral_store_entry **entries,
                                      size_t *n_entries, corral_error *err)
{
    entry_list list = {0};
    corral_store_status status = store_walk_manifests(store, add_entry, &list, err);
    if (status != CORRAL_STORE_OK) {
        corral_store_list_free(list.entries, list.n);
        return status;
    }
    if (list.n > 1)
        qsort(list.entries, list.n, sizeof *list.entries, compare_entries);
    *entries = list.entries;
    *n_entries = list.n;
    return CORRAL_STORE_OK;
}

void corral_store_list_free(corral_store_entry *entries, size_t n_entries)
{
    if (!entries)
        return;
    for (size_t i = 0; i < n_entries; i++)
        corral_manifest_free(entries[i].manifest);
    free(entries);
}

/* ---- referenced digests ---- */

static bool set_add(store_digest_set *set, const char *digest)
{
    if (set->n == set->cap) {
        size_t cap = set->cap ? 2 * set->cap : 64;
        void *grown = realloc(set->digests, cap * sizeof *set->digests);
        if (!grown)
            return false;
        set->digests = grown;
        set->cap = cap;
    }
    memcpy(set->digests[set->n++], digest, CORRAL_DIGEST_BUF);
    return true;
}

static corral_store_status add_references(void *ctx, const corral_model_name *name,
                                          const char *path, corral_error *err)
{
    (void)name;
    store_digest_set *set = ctx;
    char *bytes;
    size_t len;
    corral_store_status status =
        store_read_file(path, CORRAL_MANIFEST_MAX_BYTES, &bytes, &len, NULL, err);
    /* Gone since the walk saw it: it references nothing now. */
    if (status == CORRAL_STORE_NOT_FOUND)
        return CORRAL_STORE_OK;
    if (status != CORRAL_STORE_OK)
        return status;
    corral_manifest *m = corral_manifest_parse(bytes, len, err);
    free(bytes);
    if (!m) {
        corral_error_prefix(err, "'%s'", path);
        return CORRAL_STORE_INVALID;
    }
    bool ok = set_add(set, m->config.digest);
    for (size_t i = 0; i < m->n_layers && ok; i++)
        ok = set_add(set, m->layers[i].digest);
    corral_manifest_free(m);
    if (!ok) {
        corral_error_set(err, "out of memory");
        return CORRAL_STORE_IO;
    }
    return CORRAL_STORE_OK;
}

static int compare_digests(const void *a, const void *b)
{
    return strcmp(a, b);
}

corral_store_status store_collect_references(const corral_store *store, store_digest_set *set,
                                             corral_error *err)
{
    corral_store_status status = store_walk_manifests(store, add_references, set, err);
    if (status == CORRAL_STORE_OK && set->n > 1)
        qsort(set->digests, set->n, sizeof *set->digests, compare_digests);
    return status;
}

bool store_digest_set_has(const store_digest_set *set, const char *digest)
{
    return set->n > 0 &&
           bsearch(digest, set->digests, set->n, sizeof *set->digests, compare_digests) != NULL;
}

void store_digest_set_free(store_digest_set *set)
{
    free(set->digests);
    memset(set, 0, sizeof *set);
}
