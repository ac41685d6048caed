/*
 * Housekeeping: garbage collection of blobs no manifest references, and the start-up prune of
 * what an interrupted write leaves (temp files, ollama's "-partial" downloads, "sha256:" blob
 * names, empty manifest directories). Both honour a minimum age so that files a live writer
 * is still using are left alone.
 */
#include "store/store_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* How deep the empty-directory sweep of manifests/ goes: host/namespace[/kind]/model. */
#define MANIFEST_SWEEP_DEPTH 5

static bool old_enough(const struct stat *st, uint64_t min_age_s)
{
    if (min_age_s == 0)
        return true;
    time_t now = time(NULL);
    return st->st_mtime <= now && (uint64_t)(now - st->st_mtime) >= min_age_s;
}

corral_store_status corral_store_gc(corral_store *store, uint64_t min_age_s, size_t *n_removed,
                                    corral_error *err)
{
    size_t removed = 0;
    store_digest_set refs = {0};
    corral_store_status status = store_collect_references(store, &refs, err);
    if (status != CORRAL_STORE_OK) {
        corral_error_prefix(err, "garbage collection stopped, no blob removed");
        store_digest_set_free(&refs);
        return status;
    }
    DIR *d = opendir(store->blobs_dir);
    if (!d) {
        corral_error_set(err, "cannot read '%s': %s", store->blobs_dir, strerror(errno));
        store_digest_set_free(&refs);
        return CORRAL_STORE_IO;
    }
    for (struct dirent *e = readdir(d); e; e = readdir(d)) {
        char digest[CORRAL_DIGEST_BUF];
        struct stat st;
        if (!store_blob_name_to_digest(e->d_name, digest) || store_digest_set_has(&refs, digest))
            continue;
        if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
            !old_enough(&st, min_age_s))
            continue;
        if (unlinkat(dirfd(d), e->d_name, 0) == 0)
            removed++;
    }
    closedir(d);
    store_digest_set_free(&refs);
    if (n_removed)
        *n_removed = removed;
    return removed && !store_fsync_dir(store->blobs_dir, err) ? CORRAL_STORE_IO : CORRAL_STORE_OK;
}

/*
 * May name go? A download locks "<blob>-partial" while it runs (its "-partial-N" progress
 * files go with it): false while a live pull holds that lock. Else true, with the lock taken
 * in *held (-1 for other files) until the caller has removed name and closes it, so a pull
 * that starts meanwhile waits and then sees its file gone.
 */
static bool lock_unless_live(int dir_fd, const char *name, int *held)
{
    *held = -1;
    const char *mark = strstr(name, "-partial");
    if (!mark)
        return true;
    char partial[256];
    int n = snprintf(partial, sizeof partial, "%.*s-partial", (int)(mark - name), name);
    if (n < 0 || (size_t)n >= sizeof partial)
        return true;
    int fd = openat(dir_fd, partial, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return true;
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        close(fd);
        return false;
    }
    *held = fd;
    return true;
}

/* blobs/: rename "sha256:<hex>" to "sha256-<hex>", remove old files with any other name. */
static corral_store_status prune_blobs(corral_store *store, uint64_t min_age_s, size_t *removed,
                                       corral_error *err)
{
    DIR *d = opendir(store->blobs_dir);
    if (!d) {
        corral_error_set(err, "cannot read '%s': %s", store->blobs_dir, strerror(errno));
        return CORRAL_STORE_IO;
    }
    for (struct dirent *e = readdir(d); e; e = readdir(d)) {
        char digest[CORRAL_DIGEST_BUF];
        struct stat st;
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0 ||
            store_blob_name_to_digest(e->d_name, digest))
            continue;
        if (corral_digest_is_valid(e->d_name)) {
            /* Old ollama versions named blobs after the digest itself. */
            char new_name[CORRAL_DIGEST_BUF];
            memcpy(new_name, e->d_name, sizeof new_name);
            new_name[6] = '-';
            renameat(dirfd(d), e->d_name, dirfd(d), new_name);
            continue;
        }
        int held;
        if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
            !S_ISREG(st.st_mode) || !old_enough(&st, min_age_s) ||
            !lock_unless_live(dirfd(d), e->d_name, &held))
            continue;
        if (unlinkat(dirfd(d), e->d_name, 0) == 0)
            (*removed)++;
        if (held >= 0)
            close(held);
    }
    closedir(d);
    return store_fsync_dir(store->blobs_dir, err) ? CORRAL_STORE_OK : CORRAL_STORE_IO;
}

/* Under dir: remove old temp files, then every directory left empty. True if dir is empty. */
static bool sweep_manifest_dir(int dir_fd, unsigned depth, uint64_t min_age_s, size_t *removed)
{
    DIR *d = fdopendir(dir_fd);
    if (!d) {
        close(dir_fd);
        return false;
    }
    bool empty = true;
    for (struct dirent *e = readdir(d); e; e = readdir(d)) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        struct stat st;
        if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
            empty = false;
            continue;
        }
        bool is_temp = strncmp(e->d_name, STORE_TEMP_PREFIX, strlen(STORE_TEMP_PREFIX)) == 0;
        if (S_ISREG(st.st_mode) && is_temp && old_enough(&st, min_age_s) &&
            unlinkat(dirfd(d), e->d_name, 0) == 0) {
            (*removed)++;
            continue;
        }
        if (S_ISDIR(st.st_mode) && depth < MANIFEST_SWEEP_DEPTH) {
            int child = openat(dirfd(d), e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (child >= 0 && sweep_manifest_dir(child, depth + 1, min_age_s, removed) &&
                unlinkat(dirfd(d), e->d_name, AT_REMOVEDIR) == 0)
                continue;
        }
        empty = false;
    }
    closedir(d);
    return empty;
}

corral_store_status corral_store_prune_partials(corral_store *store, uint64_t min_age_s,
                                                size_t *n_removed, corral_error *err)
{
    size_t removed = 0;
    corral_store_status status = prune_blobs(store, min_age_s, &removed, err);
    int fd = open(store->manifests_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0)
        sweep_manifest_dir(fd, 1, min_age_s, &removed);
    if (n_removed)
        *n_removed = removed;
    return status;
}
