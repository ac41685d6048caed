/*
 * Model names as ollama parses them (types/model/name.go): [scheme://][host/][namespace/]
 * model[:tag], the defaults, the per-part character rules and lengths, case-insensitive
 * equality and the shortest display form. A name that passes here is safe as path components:
 * no part is empty, starts with '.', or holds '/'.
 */
#include "store/store_internal.h"

#include <assert.h>
#include <stdio.h>
#include <string.h>

typedef enum name_part { PART_HOST, PART_NAMESPACE, PART_MODEL, PART_TAG } name_part;

static const char *const part_labels[] = {"host", "namespace", "model", "tag"};

static bool is_word_byte(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

static size_t part_max(name_part kind)
{
    return kind == PART_HOST ? CORRAL_NAME_HOST_MAX : CORRAL_NAME_PART_MAX;
}

/* NULL when s[0..len) is a valid part of this kind, else why not. */
static const char *part_problem(name_part kind, const char *s, size_t len)
{
    if (len == 0)
        return "is empty";
    if (len > part_max(kind))
        return kind == PART_HOST ? "is longer than 350 characters" : "is longer than 80 characters";
    if (!is_word_byte(s[0]))
        return "must start with a letter, a digit or '_'";
    for (size_t i = 1; i < len; i++) {
        char c = s[i];
        if (is_word_byte(c) || c == '-' || c == '_')
            continue;
        if (c == '.' && kind != PART_NAMESPACE)
            continue;
        if (c == ':' && kind == PART_HOST)
            continue;
        if (c == '.')
            return "may not contain '.'";
        return kind == PART_HOST ? "may only contain letters, digits and '_', '-', '.', ':'"
                                 : "may only contain letters, digits and '_', '-', '.'";
    }
    return NULL;
}


static bool set_part(corral_model_name *name, name_part kind, const char *s, size_t len,
                     const char *whole, corral_error *err)
{
    const char *problem = part_problem(kind, s, len);
    if (problem) {
        char shown[96];
        store_printable(whole, shown, sizeof shown);
        corral_error_set(err, "invalid model name '%s': the %s %s", shown, part_labels[kind],
                         problem);
        return false;
    }
    char *fields[] = {name->host, name->namespace, name->model, name->tag};
    char *field = fields[kind];
    memcpy(field, s, len);
    field[len] = '\0';
    return true;
}

/* Index of the last c in s[0..len), or -1. */
static long last_index(const char *s, size_t len, char c)
{
    for (size_t i = len; i > 0; i--)
        if (s[i - 1] == c)
            return (long)(i - 1);
    return -1;
}

bool corral_model_name_parse(const char *s, corral_model_name *out, corral_error *err)
{
    corral_model_name name;
    memset(&name, 0, sizeof name);
    strcpy(name.host, CORRAL_NAME_DEFAULT_HOST);
    strcpy(name.namespace, CORRAL_NAME_DEFAULT_NAMESPACE);
    strcpy(name.tag, CORRAL_NAME_DEFAULT_TAG);

    size_t len = strnlen(s, CORRAL_NAME_STRING_MAX + 16);
    if (len == 0) {
        corral_error_set(err, "invalid model name: the name is empty");
        return false;
    }
    if (len > CORRAL_NAME_STRING_MAX + 8) {
        corral_error_set(err, "invalid model name: longer than %u characters",
                         CORRAL_NAME_STRING_MAX + 8);
        return false;
    }

    /* '/' can never be in a tag, so a ':' before the last '/' belongs to a host:port. */
    long colon = last_index(s, len, ':');
    if (colon > last_index(s, len, '/')) {
        size_t at = (size_t)colon;
        if (!set_part(&name, PART_TAG, s + at + 1, len - at - 1, s, err))
            return false;
        len = at;
    }

    long slash = last_index(s, len, '/');
    if (slash < 0) {
        if (!set_part(&name, PART_MODEL, s, len, s, err))
            return false;
        goto done;
    }
    size_t model_at = (size_t)slash + 1;
    if (!set_part(&name, PART_MODEL, s + model_at, len - model_at, s, err))
        return false;
    len = (size_t)slash;

    slash = last_index(s, len, '/');
    if (slash < 0) {
        if (!set_part(&name, PART_NAMESPACE, s, len, s, err))
            return false;
        goto done;
    }
    size_t ns_at = (size_t)slash + 1;
    if (!set_part(&name, PART_NAMESPACE, s + ns_at, len - ns_at, s, err))
        return false;
    len = (size_t)slash;

    /* Whatever precedes the host: a scheme ("https://") is dropped, as ollama does. */
    const char *host = s;
    const char *scheme_end = memmem(s, len, "://", 3);
    if (scheme_end) {
        host = scheme_end + 3;
        len -= (size_t)(host - s);
    }
    if (!set_part(&name, PART_HOST, host, len, s, err))
        return false;

done:
    *out = name;
    return true;
}

bool corral_model_name_is_valid(const corral_model_name *name)
{
    const char *fields[] = {name->host, name->namespace, name->model, name->tag};
    for (name_part kind = PART_HOST; kind <= PART_TAG; kind++) {
        const char *field = fields[kind];
        size_t len = strnlen(field, part_max(kind) + 1);
        if (part_problem(kind, field, len))
            return false;
    }
    return true;
}

bool store_name_part_is_valid(unsigned level, const char *s)
{
    assert(level <= PART_TAG);
    return part_problem((name_part)level, s, strnlen(s, CORRAL_NAME_HOST_MAX + 1)) == NULL;
}

bool store_ascii_equal_fold(const char *a, const char *b)
{
    for (;; a++, b++) {
        char ca = *a >= 'A' && *a <= 'Z' ? (char)(*a - 'A' + 'a') : *a;
        char cb = *b >= 'A' && *b <= 'Z' ? (char)(*b - 'A' + 'a') : *b;
        if (ca != cb)
            return false;
        if (ca == '\0')
            return true;
    }
}

bool corral_model_name_equal(const corral_model_name *a, const corral_model_name *b)
{
    return store_ascii_equal_fold(a->host, b->host) &&
           store_ascii_equal_fold(a->namespace, b->namespace) &&
           store_ascii_equal_fold(a->model, b->model) && store_ascii_equal_fold(a->tag, b->tag);
}

void corral_model_name_full(const corral_model_name *name, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s/%s/%s:%s", name->host, name->namespace, name->model, name->tag);
}

void corral_model_name_display(const corral_model_name *name, char *buf, size_t cap)
{
    if (!store_ascii_equal_fold(name->host, CORRAL_NAME_DEFAULT_HOST))
        snprintf(buf, cap, "%s/%s/%s:%s", name->host, name->namespace, name->model, name->tag);
    else if (!store_ascii_equal_fold(name->namespace, CORRAL_NAME_DEFAULT_NAMESPACE))
        snprintf(buf, cap, "%s/%s:%s", name->namespace, name->model, name->tag);
    else
        snprintf(buf, cap, "%s:%s", name->model, name->tag);
}
