/*
 * Manifests in memory: a manifest as ollama writes it parses; building and serializing gives
 * ollama's bytes and parses back to the same thing; each kind of malformed manifest is refused
 * with its own message; layers are found by media type (template also finds legacy prompt).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "store/store.h"

#define D1 "sha256:1111111111111111111111111111111111111111111111111111111111111111"
#define D2 "sha256:2222222222222222222222222222222222222222222222222222222222222222"
#define D3 "sha256:3333333333333333333333333333333333333333333333333333333333333333"

/* The shape of a manifest ollama pulls for llama3.2 (digests shortened to fixed patterns). */
static const char ollama_manifest[] =
    "{\"schemaVersion\":2,\"mediaType\":\"application/vnd.docker.distribution.manifest.v2+json\","
    "\"config\":{\"mediaType\":\"application/vnd.docker.container.image.v1+json\","
    "\"digest\":\"" D1 "\",\"size\":561},"
    "\"layers\":["
    "{\"mediaType\":\"application/vnd.ollama.image.model\",\"digest\":\"" D2 "\","
    "\"size\":2019377376},"
    "{\"mediaType\":\"application/vnd.ollama.image.license\",\"digest\":\"" D3 "\",\"size\":7711},"
    "{\"mediaType\":\"application/vnd.ollama.image.license\",\"digest\":\"" D1 "\",\"size\":6016},"
    "{\"mediaType\":\"application/vnd.ollama.image.prompt\",\"digest\":\"" D2 "\",\"size\":1429},"
    "{\"mediaType\":\"application/vnd.ollama.image.params\",\"digest\":\"" D3 "\",\"size\":96}"
    "]}\n";

static corral_manifest *parse_ok(const char *json)
{
    corral_error err = {{0}};
    corral_manifest *m = corral_manifest_parse(json, strlen(json), &err);
    if (!m)
        fail_msg("should parse: %s", err.message);
    return m;
}

static void test_manifest_parses_ollama_pull(void **state)
{
    (void)state;
    corral_manifest *m = parse_ok(ollama_manifest);
    assert_string_equal(m->media_type, CORRAL_MEDIA_MANIFEST);
    assert_string_equal(m->config.media_type, CORRAL_MEDIA_CONFIG);
    assert_string_equal(m->config.digest, D1);
    assert_int_equal(m->config.size_bytes, 561);
    assert_int_equal(m->n_layers, 5);
    assert_int_equal(m->layers[0].size_bytes, 2019377376u);
    assert_null(m->layers[0].from);
    assert_int_equal(corral_manifest_total_size(m), 561u + 2019377376u + 7711 + 6016 + 1429 + 96);
    corral_manifest_free(m);
}

static void test_manifest_finds_layers_by_media_type(void **state)
{
    (void)state;
    corral_manifest *m = parse_ok(ollama_manifest);
    const corral_layer *model = corral_manifest_find_layer(m, CORRAL_MEDIA_MODEL, NULL);
    assert_ptr_equal(model, &m->layers[0]);
    assert_null(corral_manifest_find_layer(m, CORRAL_MEDIA_MODEL, model));

    const corral_layer *license = corral_manifest_find_layer(m, CORRAL_MEDIA_LICENSE, NULL);
    assert_ptr_equal(license, &m->layers[1]);
    license = corral_manifest_find_layer(m, CORRAL_MEDIA_LICENSE, license);
    assert_ptr_equal(license, &m->layers[2]);
    assert_null(corral_manifest_find_layer(m, CORRAL_MEDIA_LICENSE, license));

    /* The legacy "prompt" layer is the template. */
    assert_ptr_equal(corral_manifest_find_layer(m, CORRAL_MEDIA_TEMPLATE, NULL), &m->layers[3]);
    assert_ptr_equal(corral_manifest_find_layer(m, CORRAL_MEDIA_PARAMS, NULL), &m->layers[4]);
    assert_null(corral_manifest_find_layer(m, CORRAL_MEDIA_SYSTEM, NULL));
    assert_null(corral_manifest_find_layer(m, CORRAL_MEDIA_PROJECTOR, NULL));
    corral_manifest_free(m);
}

static void test_manifest_serializes_as_ollama_and_round_trips(void **state)
{
    (void)state;
    corral_error err = {{0}};
    corral_manifest *m = corral_manifest_create();
    assert_non_null(m);
    assert_true(corral_manifest_set_config(m, CORRAL_MEDIA_CONFIG, D1, 10, &err));
    assert_true(corral_manifest_add_layer(m, CORRAL_MEDIA_MODEL, D2, 1234, "llama3.2", &err));
    assert_true(corral_manifest_add_layer(m, CORRAL_MEDIA_SYSTEM, D3, 5, NULL, &err));

    size_t len = 0;
    char *json = corral_manifest_serialize(m, &len, &err);
    assert_non_null(json);
    /* Go's json.Encoder output for ollama's Manifest struct: compact, fields in struct order,
     * "from" omitted when empty, a final newline. */
    const char *want =
        "{\"schemaVersion\":2,\"mediaType\":\"application/vnd.docker.distribution.manifest.v2+json\","
        "\"config\":{\"mediaType\":\"application/vnd.docker.container.image.v1+json\","
        "\"digest\":\"" D1 "\",\"size\":10},"
        "\"layers\":[{\"mediaType\":\"application/vnd.ollama.image.model\",\"digest\":\"" D2 "\","
        "\"size\":1234,\"from\":\"llama3.2\"},"
        "{\"mediaType\":\"application/vnd.ollama.image.system\",\"digest\":\"" D3 "\","
        "\"size\":5}]}\n";
    assert_string_equal(json, want);
    assert_int_equal(len, strlen(want));

    corral_manifest *back = parse_ok(json);
    assert_int_equal(back->n_layers, 2);
    assert_string_equal(back->layers[0].from, "llama3.2");
    assert_null(back->layers[1].from);
    assert_string_equal(back->layers[1].digest, D3);
    assert_int_equal(back->layers[0].size_bytes, 1234);
    corral_manifest_free(back);
    free(json);
    corral_manifest_free(m);
}

static void test_manifest_builder_rejects_bad_digest_and_no_config(void **state)
{
    (void)state;
    corral_error err = {{0}};
    corral_manifest *m = corral_manifest_create();
    size_t len;
    assert_null(corral_manifest_serialize(m, &len, &err));
    assert_non_null(strstr(err.message, "no config"));
    assert_false(corral_manifest_add_layer(m, CORRAL_MEDIA_MODEL, "sha256:../../x", 1, NULL, &err));
    assert_non_null(strstr(err.message, "invalid digest format"));
    assert_false(corral_manifest_add_layer(m, "", D1, 1, NULL, &err));
    assert_int_equal(m->n_layers, 0);
    corral_manifest_free(m);
    corral_manifest_free(NULL);
}

static void test_manifest_accepts_null_layers_as_written_by_go(void **state)
{
    (void)state;
    corral_manifest *m = parse_ok(
        "{\"schemaVersion\":2,\"mediaType\":\"application/vnd.docker.distribution.manifest.v2+json\","
        "\"config\":{\"mediaType\":\"application/vnd.docker.container.image.v1+json\","
        "\"digest\":\"" D1 "\",\"size\":3},\"layers\":null,\"annotations\":{\"x\":1}}");
    assert_int_equal(m->n_layers, 0);
    corral_manifest_free(m);
}

/* A manifest with one piece replaced; each must fail with its own message. */
typedef struct bad_case {
    const char *json;
    const char *message;
} bad_case;

#define HEAD "{\"schemaVersion\":2,\"mediaType\":\"" CORRAL_MEDIA_MANIFEST "\","
#define CONFIG "\"config\":{\"mediaType\":\"" CORRAL_MEDIA_CONFIG "\",\"digest\":\"" D1 "\",\"size\":1},"
#define LAYER(fields) "\"layers\":[{\"mediaType\":\"" CORRAL_MEDIA_MODEL "\",\"digest\":\"" D2 "\",\"size\":2}," fields "]}"

static void test_manifest_rejects_malformed_each_with_its_error(void **state)
{
    (void)state;
    const bad_case cases[] = {
        {"", "not valid JSON"},
        {"{\"schemaVersion\":2,", "not valid JSON"},
        {"[]", "must be a JSON object"},
        {"{\"schemaVersion\":1,\"mediaType\":\"" CORRAL_MEDIA_MANIFEST "\"," CONFIG
         "\"layers\":[]}", "\"schemaVersion\" must be 2"},
        {"{\"schemaVersion\":\"2\",\"mediaType\":\"" CORRAL_MEDIA_MANIFEST "\"," CONFIG
         "\"layers\":[]}", "\"schemaVersion\" must be 2"},
        {"{\"schemaVersion\":2," CONFIG "\"layers\":[]}", "\"mediaType\" must be"},
        {"{\"schemaVersion\":2,\"mediaType\":\"text/html\"," CONFIG "\"layers\":[]}",
         "\"mediaType\" must be"},
        {HEAD "\"layers\":[]}", "\"config\" is missing"},
        {HEAD "\"config\":[],\"layers\":[]}", "config must be an object"},
        {HEAD "\"config\":{\"mediaType\":\"" CORRAL_MEDIA_CONFIG "\",\"digest\":\"sha256:"
              "ABCDEF1111111111111111111111111111111111111111111111111111111111\",\"size\":1},"
              "\"layers\":[]}", "config: digest: invalid digest format"},
        {HEAD "\"config\":{\"mediaType\":\"" CORRAL_MEDIA_CONFIG "\",\"size\":1},\"layers\":[]}",
         "config: \"digest\" must be a string"},
        {HEAD CONFIG "\"layers\":{}}", "\"layers\" must be an array"},
        {HEAD CONFIG LAYER("{\"mediaType\":\"x\",\"digest\":\"sha256:../../../etc/passwd\",\"size\":1}"),
         "layers[1]: digest: invalid digest format"},
        {HEAD CONFIG LAYER("{\"digest\":\"" D3 "\",\"size\":1}"),
         "layers[1]: \"mediaType\" must be"},
        {HEAD CONFIG LAYER("{\"mediaType\":\"a b\",\"digest\":\"" D3 "\",\"size\":1}"),
         "layers[1]: \"mediaType\" must be"},
        {HEAD CONFIG LAYER("{\"mediaType\":\"x\",\"digest\":\"" D3 "\",\"size\":-1}"),
         "layers[1]: \"size\" must be a non-negative integer"},
        {HEAD CONFIG LAYER("{\"mediaType\":\"x\",\"digest\":\"" D3 "\",\"size\":\"1\"}"),
         "layers[1]: \"size\" must be a non-negative integer"},
        {HEAD CONFIG LAYER("{\"mediaType\":\"x\",\"digest\":\"" D3 "\"}"),
         "layers[1]: \"size\" must be a non-negative integer"},
        {HEAD CONFIG LAYER("{\"mediaType\":\"x\",\"digest\":\"" D3 "\",\"size\":1,\"from\":7}"),
         "layers[1]: \"from\" must be a string"},
        {HEAD CONFIG LAYER("7"), "layers[1] must be an object"},
        {HEAD "\"schemaVersion\":2," CONFIG "\"layers\":[]}", "not valid JSON"}, /* duplicate key */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        corral_error err = {{0}};
        corral_manifest *m = corral_manifest_parse(cases[i].json, strlen(cases[i].json), &err);
        if (m)
            fail_msg("case %zu should be rejected: %s", i, cases[i].json);
        if (!strstr(err.message, cases[i].message))
            fail_msg("case %zu: message '%s' lacks '%s'", i, err.message, cases[i].message);
    }
}

static void test_manifest_rejects_oversized_input_unparsed(void **state)
{
    (void)state;
    size_t len = CORRAL_MANIFEST_MAX_BYTES + 1;
    char *big = malloc(len);
    assert_non_null(big);
    memset(big, ' ', len);
    corral_error err = {{0}};
    assert_null(corral_manifest_parse(big, len, &err));
    assert_non_null(strstr(err.message, "more than the limit"));
    free(big);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_manifest_parses_ollama_pull),
        cmocka_unit_test(test_manifest_finds_layers_by_media_type),
        cmocka_unit_test(test_manifest_serializes_as_ollama_and_round_trips),
        cmocka_unit_test(test_manifest_builder_rejects_bad_digest_and_no_config),
        cmocka_unit_test(test_manifest_accepts_null_layers_as_written_by_go),
        cmocka_unit_test(test_manifest_rejects_malformed_each_with_its_error),
        cmocka_unit_test(test_manifest_rejects_oversized_input_unparsed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
