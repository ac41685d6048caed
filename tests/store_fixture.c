/* Temporary store roots and hand-made files for the test_store_* programs; see the header. */
#include "store_fixture.h"


#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

char *store_fixture_make_root(void)
{
    const char *tmp = getenv("TMPDIR");
    char template_path[4096];
    snprintf(template_path, sizeof template_path, "%s/corral-store-test-XXXXXX",
             tmp && *tmp ? tmp : "/tmp");
    char *root = mkdtemp(template_path);
    if (!root) {
        perror("mkdtemp");
        abort();
    }
    return strdup(root);
}

static int remove_entry(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    (void)st;
    (void)type;
    (void)ftw;
    return remove(path);
}

void store_fixture_remove_root(char *root)
{
    if (!root)
        return;
    nftw(root, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    free(root);
}

const char *store_fixture_path(const char *root, const char *relative)
{
    static char path[8192];
    snprintf(path, sizeof path, "%s/%s", root, relative);
    return path;
}

static void make_parents(char *path)
{
    for (char *p = path + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        mkdir(path, 0755);
        *p = '/';
    }
}

void store_fixture_write(const char *root, const char *relative, const void *data, size_t len)
{
    char path[8192];
    snprintf(path, sizeof path, "%s/%s", root, relative);
    make_parents(path);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, len, f) != len || fclose(f) != 0) {
        perror(path);
        abort();
    }
}

bool store_fixture_exists(const char *root, const char *relative)
{
    struct stat st;
    return stat(store_fixture_path(root, relative), &st) == 0;
}

void store_fixture_age(const char *root, const char *relative, long seconds_ago)
{
    struct timespec times[2];
    times[0].tv_sec = times[1].tv_sec = time(NULL) - seconds_ago;
    times[0].tv_nsec = times[1].tv_nsec = 0;
    if (utimensat(AT_FDCWD, store_fixture_path(root, relative), times, 0) != 0) {
        perror(relative);
        abort();
    }
}

size_t store_fixture_count_entries(const char *root, const char *relative)
{
    DIR *d = opendir(store_fixture_path(root, relative));
    if (!d)
        return 0;
    size_t n = 0;
    for (struct dirent *e = readdir(d); e; e = readdir(d))
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
            n++;
    closedir(d);
    return n;
}
