/*
 * Replacing another program's config file with a backup of the old one (config_file.h).
 */
#include "config_file.h"
#include "util/file.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MAX_CONFIG_BYTES (16u << 20)
#define MAX_BACKUP_ENTRIES 4096

/* The contents of an existing regular file (NULL and *exists false when there is none). */
static char *read_existing(const char *path, size_t *len, bool *exists, corral_error *err)
{
    *exists = false;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        if (errno != ENOENT)
            corral_error_set(err, "cannot read '%s': %s", path, strerror(errno));
        return NULL;
    }
    struct stat st;
    char *data = NULL;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        corral_error_set(err, "'%s' is not a regular file", path);
    } else if ((uint64_t)st.st_size > MAX_CONFIG_BYTES) {
        corral_error_set(err, "'%s' is larger than %u MiB", path, MAX_CONFIG_BYTES >> 20);
    } else if (!(data = malloc((size_t)st.st_size + 1))) {
        corral_error_set(err, "out of memory");
    } else {
        size_t got = 0;
        ssize_t n;
        while (got < (size_t)st.st_size &&
               ((n = read(fd, data + got, (size_t)st.st_size - got)) > 0 ||
                (n < 0 && errno == EINTR)))
            got += n > 0 ? (size_t)n : 0;
        data[got] = '\0';
        *len = got;
        *exists = true;
    }
    close(fd);
    return data;
}

/* Parse "<name>.<seconds>[-<k>]" into an order key; false for another file. */
static bool backup_order(const char *entry, const char *name, uint64_t *seconds, uint64_t *k)
{
    size_t n = strlen(name);
    if (strncmp(entry, name, n) != 0 || entry[n] != '.' || entry[n + 1] < '0' ||
        entry[n + 1] > '9')
        return false;
    char *end;
    *seconds = strtoull(entry + n + 1, &end, 10);
    *k = 0;
    if (*end == '-' && end[1] >= '0' && end[1] <= '9')
        *k = strtoull(end + 1, &end, 10);
    return *end == '\0';
}

/* Remove name's backups in dir beyond the newest CONFIG_FILE_BACKUPS_KEPT. */
static void prune_backups(const char *dir, const char *name)
{
    for (;;) {
        DIR *d = opendir(dir);
        if (!d)
            return;
        size_t count = 0;
        uint64_t oldest_s = UINT64_MAX, oldest_k = UINT64_MAX;
        char oldest[512] = "";
        struct dirent *e;
        while ((e = readdir(d)) && count < MAX_BACKUP_ENTRIES) {
            uint64_t s, k;
            if (!backup_order(e->d_name, name, &s, &k))
                continue;
            count++;
            if (s < oldest_s || (s == oldest_s && k < oldest_k)) {
                oldest_s = s;
                oldest_k = k;
                snprintf(oldest, sizeof oldest, "%s", e->d_name);
            }
        }
        closedir(d);
        char path[4096];
        int n = snprintf(path, sizeof path, "%s/%s", dir, oldest);
        if (count <= CONFIG_FILE_BACKUPS_KEPT || n < 0 || (size_t)n >= sizeof path ||
            unlink(path) != 0)
            return;
    }
}

/* Copy data (the old contents) to a new file in backup_dir; its path into out. */
static bool write_backup(const char *backup_dir, const char *name, const char *data, size_t len,
                         mode_t mode, char *out, size_t out_size, corral_error *err)
{
    if (!util_mkdirs(backup_dir, err))
        return false;
    long long now = (long long)time(NULL);
    for (unsigned k = 0; k < 1000; k++) {
        char path[4096];
        int n = k ? snprintf(path, sizeof path, "%s/%s.%lld-%u", backup_dir, name, now, k)
                  : snprintf(path, sizeof path, "%s/%s.%lld", backup_dir, name, now);
        if (n < 0 || (size_t)n >= sizeof path) {
            corral_error_set(err, "backup path too long in '%s'", backup_dir);
            return false;
        }
        int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode & 0777);
        if (fd < 0 && errno == EEXIST)
            continue;
        if (fd < 0) {
            corral_error_set(err, "cannot create backup '%s': %s", path, strerror(errno));
            return false;
        }
        bool ok = util_write_all(fd, data, len) && fsync(fd) == 0;
        ok = close(fd) == 0 && ok;
        if (!ok) {
            corral_error_set(err, "cannot write backup '%s': %s", path, strerror(errno));
            unlink(path);
            return false;
        }
        if (out)
            snprintf(out, out_size, "%s", path);
        prune_backups(backup_dir, name);
        return true;
    }
    corral_error_set(err, "too many backups of '%s' this second in '%s'", name, backup_dir);
    return false;
}

bool config_file_replace(const char *path, const char *data, size_t len, const char *backup_dir,
                         char *backup_path, size_t backup_size, bool *changed,
                         corral_error *err)
{
    if (backup_path && backup_size)
        backup_path[0] = '\0';
    if (changed)
        *changed = false;
    corral_error read_err = {{0}};
    size_t old_len = 0;
    bool exists;
    char *old = read_existing(path, &old_len, &exists, &read_err);
    if (!exists && read_err.message[0]) {
        corral_error_set(err, "%s", read_err.message);
        return false;
    }
    struct stat st;
    mode_t mode = exists && stat(path, &st) == 0 ? st.st_mode & 0777 : 0600;
    if (exists && old_len == len && memcmp(old, data, len) == 0) {
        free(old);
        return true;
    }
    const char *slash = strrchr(path, '/');
    const char *name = slash ? slash + 1 : path;
    bool ok = !exists || !backup_dir ||
              write_backup(backup_dir, name, old, old_len, mode, backup_path, backup_size, err);
    free(old);
    if (!ok)
        return false;

    char tmp[4096];
    int n = slash ? snprintf(tmp, sizeof tmp, "%.*s/.%s.XXXXXX", (int)(slash - path), path, name)
                  : snprintf(tmp, sizeof tmp, ".%s.XXXXXX", name);
    if (n < 0 || (size_t)n >= sizeof tmp) {
        corral_error_set(err, "path too long: '%s'", path);
        return false;
    }
    int fd = mkostemp(tmp, O_CLOEXEC);
    if (fd < 0) {
        corral_error_set(err, "cannot create a temporary file beside '%s': %s", path,
                         strerror(errno));
        return false;
    }
    ok = fchmod(fd, mode) == 0 && util_write_all(fd, data, len) && fsync(fd) == 0;
    ok = close(fd) == 0 && ok;
    if (!ok || rename(tmp, path) != 0) {
        corral_error_set(err, "cannot write '%s': %s", path, strerror(errno));
        unlink(tmp);
        return false;
    }
    if (changed)
        *changed = true;
    return true;
}
