/*
 * Answering a registry's 401: parse WWW-Authenticate, then either send Basic credentials
 * (private registries) or fetch a token from the Bearer realm and send it as "Bearer <token>".
 * The realm must be on the registry's own host (and https unless insecure): credentials never
 * leave for a host the user did not name.
 */
#include "registry/registry_internal.h"

#include <jansson.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define CHALLENGE_FIELD_MAX 1024u
#define TOKEN_MAX 8192u

typedef struct challenge {
    char scheme[16];
    char realm[CHALLENGE_FIELD_MAX];
    char service[CHALLENGE_FIELD_MAX];
    char scope[CHALLENGE_FIELD_MAX];
} challenge;

static const char *skip_space(const char *p)
{
    while (*p == ' ' || *p == '\t')
        p++;
    return p;
}

/* One value (quoted-string or token) into out; the position after it, or NULL. */
static const char *parse_value(const char *p, char *out, size_t cap)
{
    size_t n = 0;
    if (*p == '"') {
        for (p++; *p && *p != '"'; p++) {
            if (*p == '\\' && p[1])
                p++;
            if (n + 1 >= cap)
                return NULL;
            out[n++] = *p;
        }
        if (*p != '"')
            return NULL;
        p++;
    } else {
        for (; *p && *p != ',' && *p != ' ' && *p != '\t'; p++) {
            if (n + 1 >= cap)
                return NULL;
            out[n++] = *p;
        }
    }
    out[n] = '\0';
    return p;
}

/* `Scheme key="value", key=value, ...` (the first challenge when there are several). */
static bool parse_challenge(const char *text, challenge *ch)
{
    *ch = (challenge){0};
    const char *p = skip_space(text);
    size_t n = 0;
    while (((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z')) && n + 1 < sizeof ch->scheme)
        ch->scheme[n++] = *p++;
    if (n == 0 || (*p && *p != ' '))
        return false;
    for (;;) {
        p = skip_space(p);
        if (!*p)
            return true;
        const char *key = p;
        while (*p && *p != '=' && *p != ',' && *p != ' ')
            p++;
        size_t key_len = (size_t)(p - key);
        if (*p != '=')
            return key_len > 0; /* the start of a second challenge: stop at the first */
        char value[CHALLENGE_FIELD_MAX];
        if (!(p = parse_value(p + 1, value, sizeof value)))
            return false;
        char *slot = NULL;
        if (key_len == 5 && strncasecmp(key, "realm", 5) == 0)
            slot = ch->realm;
        else if (key_len == 7 && strncasecmp(key, "service", 7) == 0)
            slot = ch->service;
        else if (key_len == 5 && strncasecmp(key, "scope", 5) == 0)
            slot = ch->scope;
        if (slot)
            memcpy(slot, value, strlen(value) + 1);
        p = skip_space(p);
        if (*p == ',')
            p++;
    }
}

/* "Basic base64(user:password)", malloc'ed. */
static char *basic_header(const char *user, const char *password)
{
    char *pair = NULL;
    if (asprintf(&pair, "%s:%s", user, password) < 0)
        return NULL;
    size_t len = strlen(pair);
    char *header = malloc(6 + 4 * ((len + 2) / 3) + 1);
    if (header) {
        memcpy(header, "Basic ", 6);
        EVP_EncodeBlock((unsigned char *)header + 6, (const unsigned char *)pair, (int)len);
    }
    OPENSSL_cleanse(pair, len);
    free(pair);
    return header;
}

static void set_authorization(reg_client *c, char *value)
{
    pthread_mutex_lock(&c->lock);
    free(c->authorization);
    c->authorization = value;
    pthread_mutex_unlock(&c->lock);
}

static void free_credentials(char *user, char *password)
{
    if (password)
        OPENSSL_cleanse(password, strlen(password));
    free(user);
    free(password);
}

static corral_registry_status answer_basic(reg_client *c, corral_error *err)
{
    char *user = NULL, *password = NULL;
    if (!reg_credentials_find(c->host, &user, &password, err))
        return CORRAL_REGISTRY_INVALID;
    if (!user) {
        corral_error_set(err,
                         "unauthorized: %s requires credentials; set CORRAL_REGISTRY_AUTH="
                         "\"%s=user:password\" or add them to ~/.corral/credentials.json",
                         c->host, c->host);
        return CORRAL_REGISTRY_UNAUTHORIZED;
    }
    char *header = basic_header(user, password);
    free_credentials(user, password);
    if (!header) {
        corral_error_set(err, "out of memory");
        return CORRAL_REGISTRY_FAILED;
    }
    set_authorization(c, header);
    return CORRAL_REGISTRY_OK;
}

/* The realm is ours to call: http(s), on the registry's host, https unless insecure. */
static bool realm_is_acceptable(const reg_client *c, const char *realm, corral_error *err)
{
    char realm_host[CORRAL_NAME_HOST_MAX + 1], own_host[CORRAL_NAME_HOST_MAX + 1];
    char own_url[CORRAL_NAME_HOST_MAX + 16];
    snprintf(own_url, sizeof own_url, "%s://%s/", c->scheme, c->host);
    bool is_https = strncasecmp(realm, "https://", 8) == 0;
    bool is_http = strncasecmp(realm, "http://", 7) == 0;
    if ((!is_https && !is_http) || !reg_url_hostname(realm, realm_host, sizeof realm_host) ||
        !reg_url_hostname(own_url, own_host, sizeof own_host)) {
        corral_error_set(err, "the registry's token realm is not an http(s) URL");
        return false;
    }
    if (strcmp(realm_host, own_host) != 0) {
        corral_error_set(err,
                         "refusing the registry's token realm on host '%s': it must be on the "
                         "registry's host '%s'",
                         realm_host, own_host);
        return false;
    }
    if (is_http && !c->opts.insecure && strcmp(c->scheme, "http") != 0) {
        corral_error_set(err, "refusing the registry's plain-http token realm without insecure");
        return false;
    }
    return true;
}

/* The token from {"token": …} or {"access_token": …}: printable, no spaces, bounded. */
static char *token_from_reply(const reg_response *resp, corral_error *err)
{
    json_t *root = json_loadb(resp->body ? resp->body : "", resp->body_len, 0, NULL);
    const char *token = json_string_value(json_object_get(root, "token"));
    if (!token || !*token)
        token = json_string_value(json_object_get(root, "access_token"));
    char *header = NULL;
    size_t len = token ? strlen(token) : 0;
    bool clean = len > 0 && len <= TOKEN_MAX;
    for (size_t i = 0; clean && i < len; i++)
        clean = token[i] > 0x20 && token[i] < 0x7f;
    if (!clean)
        corral_error_set(err, "the registry's token service sent no usable token");
    else if (asprintf(&header, "Bearer %s", token) < 0)
        header = NULL;
    json_decref(root);
    return header;
}

static corral_registry_status answer_bearer(reg_client *c, const challenge *ch, corral_error *err)
{
    if (!realm_is_acceptable(c, ch->realm, err))
        return CORRAL_REGISTRY_INVALID;
    char *url = strdup(ch->realm), *next = NULL;
    if (url && ch->service[0]) {
        next = reg_resolve_url(url, url, "service", ch->service);
        free(url);
        url = next;
    }
    if (url && ch->scope[0]) {
        next = reg_resolve_url(url, url, "scope", ch->scope);
        free(url);
        url = next;
    }
    if (!url) {
        corral_error_set(err, "the registry's token realm is not a usable URL");
        return CORRAL_REGISTRY_INVALID;
    }
    char *user = NULL, *password = NULL, *basic = NULL;
    corral_registry_status status = CORRAL_REGISTRY_FAILED;
    if (!reg_credentials_find(c->host, &user, &password, err)) {
        free(url);
        return CORRAL_REGISTRY_INVALID;
    }
    if (user)
        basic = basic_header(user, password);
    free_credentials(user, password);

    reg_request req = REG_REQUEST_INIT;
    req.method = "GET";
    req.url = url;
    req.authorization = basic;
    reg_response resp = {0};
    for (unsigned attempt = 1;; attempt++) {
        bool sent = reg_send_once(c, &req, &resp, err);
        if (sent && resp.status == 200) {
            char *header = token_from_reply(&resp, err);
            if (header) {
                set_authorization(c, header);
                status = CORRAL_REGISTRY_OK;
            } else {
                status = CORRAL_REGISTRY_INVALID;
            }
            break;
        }
        bool transient = !sent || resp.status >= 500 || resp.status == 429;
        if (!transient || attempt >= c->opts.max_retries) {
            if (sent) {
                reg_describe_failure(&resp, "token request", err);
                status = resp.status == 401 || resp.status == 403 ? CORRAL_REGISTRY_UNAUTHORIZED
                                                                   : CORRAL_REGISTRY_FAILED;
            }
            break;
        }
        reg_backoff(c, attempt);
    }
    reg_response_clear(&resp);
    if (basic)
        OPENSSL_cleanse(basic, strlen(basic));
    free(basic);
    free(url);
    return status;
}

corral_registry_status reg_auth_answer(reg_client *c, const char *text, corral_error *err)
{
    challenge ch;
    if (!parse_challenge(text, &ch)) {
        corral_error_set(err, "unauthorized, and the registry's challenge does not parse");
        return CORRAL_REGISTRY_UNAUTHORIZED;
    }
    if (strcasecmp(ch.scheme, "Basic") == 0)
        return answer_basic(c, err);
    if (strcasecmp(ch.scheme, "Bearer") == 0 && ch.realm[0])
        return answer_bearer(c, &ch, err);
    corral_error_set(err, "unauthorized: unsupported authentication scheme '%.15s'", ch.scheme);
    return CORRAL_REGISTRY_UNAUTHORIZED;
}
