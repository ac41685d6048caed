/*
 * Manifests in memory: parsing hostile JSON into a validated corral_manifest, building one,
 * serializing it the way ollama writes it, and finding layers by media type. No files here
 * (store.c reads and writes them). A corral_manifest that exists has only valid digests.
 */
#include "store/store_internal.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

/* Longest "from"/"name" we keep; they are labels, not data. */
#define LAYER_LABEL_MAX 4096u

static bool media_type_valid(const char *s)
{
    size_t len = strnlen(s, CORRAL_MEDIA_TYPE_MAX + 1);
    if (len == 0 || len > CORRAL_MEDIA_TYPE_MAX)
        return false;
    for (size_t i = 0; i < len; i++)
        if (s[i] <= 0x20 || s[i] >= 0x7f)
            return false;
    return true;
}

static void layer_clear(corral_layer *layer)
{
    free(layer->media_type);
    free(layer->from);
    free(layer->name);
    memset(layer, 0, sizeof *layer);
}

corral_manifest *corral_manifest_create(void)
{
    corral_manifest *m = calloc(1, sizeof *m);
    if (!m)
        return NULL;
    m->media_type = strdup(CORRAL_MEDIA_MANIFEST);
    m->config.media_type = strdup(CORRAL_MEDIA_CONFIG);
    if (!m->media_type || !m->config.media_type) {
        corral_manifest_free(m);
        return NULL;
    }
    return m;
}

void corral_manifest_free(corral_manifest *m)
{
    if (!m)
        return;
    free(m->media_type);
    layer_clear(&m->config);
    for (size_t i = 0; i < m->n_layers; i++)
        layer_clear(&m->layers[i]);
    free(m->layers);
    free(m);
}

/* ---- parsing ---- */

/* An optional string member: absent, null or "" leave *out NULL. */
static bool parse_label(json_t *obj, const char *key, char **out, const char *where,
                        corral_error *err)
{
    json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v))
        return true;
    if (!json_is_string(v)) {
        corral_error_set(err, "%s: \"%s\" must be a string", where, key);
        return false;
    }
    if (json_string_length(v) > LAYER_LABEL_MAX) {
        corral_error_set(err, "%s: \"%s\" is longer than %u bytes", where, key, LAYER_LABEL_MAX);
        return false;
    }
    if (json_string_length(v) == 0)
        return true;
    *out = strndup(json_string_value(v), json_string_length(v));
    if (!*out) {
        corral_error_set(err, "out of memory");
        return false;
    }
    return true;
}

static bool parse_layer(json_t *obj, corral_layer *layer, const char *where, corral_error *err)
{
    if (!json_is_object(obj)) {
        corral_error_set(err, "%s must be an object", where);
        return false;
    }
    json_t *media = json_object_get(obj, "mediaType");
    if (!json_is_string(media) || strlen(json_string_value(media)) != json_string_length(media) ||
        !media_type_valid(json_string_value(media))) {
        corral_error_set(err, "%s: \"mediaType\" must be a string of 1 to %u printable characters",
                         where, CORRAL_MEDIA_TYPE_MAX);
        return false;
    }
    json_t *digest = json_object_get(obj, "digest");
    if (!json_is_string(digest)) {
        corral_error_set(err, "%s: \"digest\" must be a string", where);
        return false;
    }
    if (!corral_digest_check(json_string_value(digest), err)) {
        corral_error_prefix(err, "%s: digest", where);
        return false;
    }
    json_t *size = json_object_get(obj, "size");
    if (!json_is_integer(size) || json_integer_value(size) < 0) {
        corral_error_set(err, "%s: \"size\" must be a non-negative integer", where);
        return false;
    }
    memcpy(layer->digest, json_string_value(digest), CORRAL_DIGEST_BUF);
    layer->size_bytes = (uint64_t)json_integer_value(size);
    layer->media_type = strdup(json_string_value(media));
    if (!layer->media_type) {
        corral_error_set(err, "out of memory");
        return false;
    }
    return parse_label(obj, "from", &layer->from, where, err) &&
           parse_label(obj, "name", &layer->name, where, err);
}

static bool parse_root(json_t *root, corral_manifest *m, corral_error *err)
{
    if (!json_is_object(root)) {
        corral_error_set(err, "a manifest must be a JSON object");
        return false;
    }
    json_t *version = json_object_get(root, "schemaVersion");
    if (!json_is_integer(version) || json_integer_value(version) != 2) {
        corral_error_set(err, "\"schemaVersion\" must be 2");
        return false;
    }
    json_t *media = json_object_get(root, "mediaType");
    const char *media_text = json_is_string(media) ? json_string_value(media) : "";
    if (strcmp(media_text, CORRAL_MEDIA_MANIFEST) != 0 &&
        strcmp(media_text, CORRAL_MEDIA_MANIFEST_OCI) != 0) {
        corral_error_set(err, "\"mediaType\" must be \"%s\" or \"%s\"", CORRAL_MEDIA_MANIFEST,
                         CORRAL_MEDIA_MANIFEST_OCI);
        return false;
    }
    m->media_type = strdup(media_text);
    if (!m->media_type) {
        corral_error_set(err, "out of memory");
        return false;
    }
    json_t *config = json_object_get(root, "config");
    if (!config) {
        corral_error_set(err, "\"config\" is missing");
        return false;
    }
    if (!parse_layer(config, &m->config, "config", err))
        return false;

    /* Go writes a nil slice as null: a manifest with no layers. */
    json_t *layers = json_object_get(root, "layers");
    if (json_is_null(layers))
        return true;
    if (!json_is_array(layers)) {
        corral_error_set(err, "\"layers\" must be an array");
        return false;
    }
    size_t n = json_array_size(layers);
    m->layers = n ? calloc(n, sizeof *m->layers) : NULL;
    if (n && !m->layers) {
        corral_error_set(err, "out of memory");
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        char where[32];
        snprintf(where, sizeof where, "layers[%zu]", i);
        m->n_layers = i + 1;
        if (!parse_layer(json_array_get(layers, i), &m->layers[i], where, err))
            return false;
    }
    return true;
}

corral_manifest *corral_manifest_parse(const char *json, size_t len, corral_error *err)
{
    if (len > CORRAL_MANIFEST_MAX_BYTES) {
        corral_error_set(err, "manifest is %zu bytes, more than the limit of %u", len,
                         CORRAL_MANIFEST_MAX_BYTES);
        return NULL;
    }
    json_error_t jerr;
    json_t *root = json_loadb(json, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!root) {
        corral_error_set(err, "manifest is not valid JSON: line %d, column %d: %s", jerr.line,
                         jerr.column, jerr.text);
        return NULL;
    }
    corral_manifest *m = calloc(1, sizeof *m);
    if (!m) {
        corral_error_set(err, "out of memory");
    } else if (!parse_root(root, m, err)) {
        corral_error_prefix(err, "invalid manifest");
        corral_manifest_free(m);
        m = NULL;
    }
    json_decref(root);
    return m;
}

/* ---- building ---- */

static bool layer_fill(corral_layer *layer, const char *media_type, const char *digest,
                       uint64_t size_bytes, const char *from, corral_error *err)
{
    if (!media_type_valid(media_type)) {
        corral_error_set(err, "invalid media type");
        return false;
    }
    if (!corral_digest_check(digest, err))
        return false;
    if (size_bytes > INT64_MAX) {
        corral_error_set(err, "layer size %llu is too large", (unsigned long long)size_bytes);
        return false;
    }
    corral_layer fresh = {.size_bytes = size_bytes};
    memcpy(fresh.digest, digest, CORRAL_DIGEST_BUF);
    fresh.media_type = strdup(media_type);
    fresh.from = from && *from ? strndup(from, LAYER_LABEL_MAX) : NULL;
    if (!fresh.media_type || (from && *from && !fresh.from)) {
        layer_clear(&fresh);
        corral_error_set(err, "out of memory");
        return false;
    }
    *layer = fresh;
    return true;
}

bool corral_manifest_set_config(corral_manifest *m, const char *media_type, const char *digest,
                                uint64_t size_bytes, corral_error *err)
{
    corral_layer fresh;
    if (!layer_fill(&fresh, media_type, digest, size_bytes, NULL, err))
        return false;
    layer_clear(&m->config);
    m->config = fresh;
    return true;
}

bool corral_manifest_add_layer(corral_manifest *m, const char *media_type, const char *digest,
                               uint64_t size_bytes, const char *from, corral_error *err)
{
    corral_layer fresh;
    if (!layer_fill(&fresh, media_type, digest, size_bytes, from, err))
        return false;
    corral_layer *grown = realloc(m->layers, (m->n_layers + 1) * sizeof *m->layers);
    if (!grown) {
        layer_clear(&fresh);
        corral_error_set(err, "out of memory");
        return false;
    }
    m->layers = grown;
    m->layers[m->n_layers++] = fresh;
    return true;
}

/* ---- serializing ---- */

static json_t *layer_json(const corral_layer *layer)
{
    json_t *obj = json_object();
    if (!obj)
        return NULL;
    int failed = json_object_set_new(obj, "mediaType", json_string(layer->media_type));
    failed |= json_object_set_new(obj, "digest", json_string(layer->digest));
    failed |= json_object_set_new(obj, "size", json_integer((json_int_t)layer->size_bytes));
    if (layer->from)
        failed |= json_object_set_new(obj, "from", json_string(layer->from));
    if (layer->name)
        failed |= json_object_set_new(obj, "name", json_string(layer->name));
    if (failed) {
        json_decref(obj);
        return NULL;
    }
    return obj;
}

char *corral_manifest_serialize(const corral_manifest *m, size_t *len, corral_error *err)
{
    if (!corral_digest_is_valid(m->config.digest)) {
        corral_error_set(err, "manifest has no config blob");
        return NULL;
    }
    json_t *root = json_object();
    json_t *layers = json_array();
    int failed = !root || !layers;
    if (!failed) {
        failed |= json_object_set_new(root, "schemaVersion", json_integer(2));
        failed |= json_object_set_new(root, "mediaType", json_string(m->media_type));
        failed |= json_object_set_new(root, "config", layer_json(&m->config));
        for (size_t i = 0; i < m->n_layers && !failed; i++)
            failed |= json_array_append_new(layers, layer_json(&m->layers[i]));
        failed |= json_object_set(root, "layers", layers);
    }
    /* Compact with a final newline: the bytes Go's json.Encoder writes for ollama. */
    char *text = failed ? NULL : json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(layers);
    json_decref(root);
    size_t n = text ? strlen(text) : 0;
    char *out = text ? realloc(text, n + 2) : NULL;
    if (!out) {
        free(text);
        corral_error_set(err, "out of memory serializing a manifest");
        return NULL;
    }
    out[n] = '\n';
    out[n + 1] = '\0';
    *len = n + 1;
    return out;
}

/* ---- queries ---- */

const corral_layer *corral_manifest_find_layer(const corral_manifest *m, const char *media_type,
                                               const corral_layer *after)
{
    size_t start = after ? (size_t)(after - m->layers) + 1 : 0;
    bool also_prompt = strcmp(media_type, CORRAL_MEDIA_TEMPLATE) == 0;
    for (size_t i = start; i < m->n_layers; i++) {
        const char *type = m->layers[i].media_type;
        if (strcmp(type, media_type) == 0 || (also_prompt && strcmp(type, CORRAL_MEDIA_PROMPT) == 0))
            return &m->layers[i];
    }
    return NULL;
}

uint64_t corral_manifest_total_size(const corral_manifest *m)
{
    /* A hostile manifest may claim sizes that add past 2^64; saturate rather than wrap. */
    uint64_t total = m->config.size_bytes;
    for (size_t i = 0; i < m->n_layers; i++)
        if (__builtin_add_overflow(total, m->layers[i].size_bytes, &total))
            return UINT64_MAX;
    return total;
}
