/*
 * Credentials for private registries, by host: CORRAL_REGISTRY_AUTH ("host=user:password"
 * entries separated by white space), else the JSON file $CORRAL_REGISTRY_CREDENTIALS or
 * ~/.corral/credentials.json ({"host": {"username": …, "password": …}}), which must not be
 * readable by group or others. Hosts match case-insensitively, port included.
 */
#include "registry/registry_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#define CREDENTIALS_FILE_MAX (1u << 20)

static bool set_pair(const char *user, size_t user_len, const char *password,
                     size_t password_len, char **user_out, char **password_out,
                     corral_error *err)
{
    *user_out = strndup(user, user_len);
    *password_out = strndup(password, password_len);
    if (*user_out && *password_out)
        return true;
    free(*user_out);
    free(*password_out);
    *user_out = *password_out = NULL;
    corral_error_set(err, "out of memory");
    return false;
}

/* true when the variable is set (found or not); *user stays NULL when host is absent. */
static bool find_in_env(const char *value, const char *host, char **user, char **password,
                        corral_error *err)
{
    size_t host_len = strlen(host);
    const char *p = value;
    while (*p) {
        p += strspn(p, " \t\r\n");
        size_t entry_len = strcspn(p, " \t\r\n");
        const char *entry = p;
        p += entry_len;
        if (!entry_len)
            continue;
        const char *eq = memchr(entry, '=', entry_len);
        const char *colon = eq ? memchr(eq, ':', (size_t)(entry + entry_len - eq)) : NULL;
        if (!colon) {
            corral_error_set(err, "CORRAL_REGISTRY_AUTH: an entry is not host=user:password");
            return false;
        }
        if ((size_t)(eq - entry) == host_len && strncasecmp(entry, host, host_len) == 0)
            return set_pair(eq + 1, (size_t)(colon - eq - 1), colon + 1,
                            (size_t)(entry + entry_len - colon - 1), user, password, err);
    }
    return true;
}

/* The file's contents, or NULL with *missing when there is none. */
static char *read_private_file(const char *path, bool *missing, size_t *len, corral_error *err)
{
    *missing = false;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) {
        if (errno == ENOENT) {
            *missing = true;
            return NULL;
        }
        corral_error_set(err, "cannot open the credentials file '%s': %s", path, strerror(errno));
        return NULL;
    }
    struct stat st;
    char *data = NULL;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        corral_error_set(err, "the credentials file '%s' is not a regular file", path);
    } else if (st.st_mode & 077) {
        corral_error_set(err, "the credentials file '%s' is readable by other users; chmod 600 it",
                         path);
    } else if ((uint64_t)st.st_size > CREDENTIALS_FILE_MAX) {
        corral_error_set(err, "the credentials file '%s' is larger than %u bytes", path,
                         CREDENTIALS_FILE_MAX);
    } else if ((data = malloc((size_t)st.st_size + 1))) {
        ssize_t got = read(fd, data, (size_t)st.st_size);
        if (got != st.st_size) {
            corral_error_set(err, "cannot read the credentials file '%s'", path);
            free(data);
            data = NULL;
        } else {
            data[got] = '\0';
            *len = (size_t)got;
        }
    } else {
        corral_error_set(err, "out of memory");
    }
    close(fd);
    return data;
}

static bool find_in_file(const char *path, const char *host, char **user, char **password,
                         corral_error *err)
{
    bool missing;
    size_t len = 0;
    char *data = read_private_file(path, &missing, &len, err);
    if (!data)
        return missing;
    json_error_t jerr;
    json_t *root = json_loadb(data, len, 0, &jerr);
    memset(data, 0, len);
    free(data);
    if (!json_is_object(root)) {
        corral_error_set(err, "the credentials file '%s' is not a JSON object: %s", path,
                         root ? "wrong type" : jerr.text);
        json_decref(root);
        return false;
    }
    bool ok = true;
    const char *key;
    json_t *entry;
    json_object_foreach(root, key, entry) {
        if (strcasecmp(key, host) != 0)
            continue;
        const char *u = json_string_value(json_object_get(entry, "username"));
        const char *pw = json_string_value(json_object_get(entry, "password"));
        if (!u || !pw) {
            corral_error_set(err, "the credentials file '%s': \"%s\" needs \"username\" and "
                                  "\"password\" strings", path, host);
            ok = false;
        } else {
            ok = set_pair(u, strlen(u), pw, strlen(pw), user, password, err);
        }
        break;
    }
    json_decref(root);
    return ok;
}

bool reg_credentials_find(const char *host, char **user, char **password, corral_error *err)
{
    *user = *password = NULL;
    const char *env = getenv("CORRAL_REGISTRY_AUTH");
    if (env && *env) {
        if (!find_in_env(env, host, user, password, err))
            return false;
        if (*user)
            return true;
    }
    const char *file = getenv("CORRAL_REGISTRY_CREDENTIALS");
    char path[4096];
    if (file && *file) {
        snprintf(path, sizeof path, "%s", file);
    } else {
        const char *home = getenv("HOME");
        if (!home || !*home)
            return true;
        int n = snprintf(path, sizeof path, "%s/.corral/credentials.json", home);
        if (n < 0 || (size_t)n >= sizeof path)
            return true;
    }
    return find_in_file(path, host, user, password, err);
}
