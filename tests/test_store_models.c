/*
 * Manifests by name on disk: the exact ollama paths, write/read round trip with the digest of
 * the file's bytes, refusal of manifests whose blobs are missing, case-insensitive lookups
 * that keep the stored spelling, copy, delete (and its blob cleanup), the newest-first list,
 * and a store laid out by hand the way ~/.ollama/models is.
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
#include "store_fixture.h"

typedef struct fixture {
    char *root;
    corral_store *store;
    char config[CORRAL_DIGEST_BUF];
    char weights[CORRAL_DIGEST_BUF];
} fixture;

static const char config_json[] = "{\"model_format\":\"gguf\",\"model_family\":\"llama\"}";
static const char weights[] = "GGUF pretend weights";

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    f->root = store_fixture_make_root();
    corral_error err = {{0}};
    f->store = corral_store_open(f->root, &err);
    if (!f->store)
        fail_msg("open: %s", err.message);
    assert_int_equal(corral_store_blob_write(f->store, config_json, strlen(config_json), f->config,
                                             &err), CORRAL_STORE_OK);
    assert_int_equal(corral_store_blob_write(f->store, weights, strlen(weights), f->weights, &err),
                     CORRAL_STORE_OK);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    corral_store_close(f->store);
    store_fixture_remove_root(f->root);
    free(f);
    return 0;
}

static corral_model_name name_of(const char *s)
{
    corral_model_name name;
    corral_error err = {{0}};
    if (!corral_model_name_parse(s, &name, &err))
        fail_msg("%s", err.message);
    return name;
}

static corral_manifest *make_manifest(const fixture *f)
{
    corral_error err = {{0}};
    corral_manifest *m = corral_manifest_create();
    assert_true(corral_manifest_set_config(m, CORRAL_MEDIA_CONFIG, f->config, strlen(config_json),
                                           &err));
    assert_true(corral_manifest_add_layer(m, CORRAL_MEDIA_MODEL, f->weights, strlen(weights),
                                          NULL, &err));
    return m;
}

static void write_model(fixture *f, const char *name_text)
{
    corral_error err = {{0}};
    corral_model_name name = name_of(name_text);
    corral_manifest *m = make_manifest(f);
    if (corral_store_manifest_write(f->store, &name, m, &err) != CORRAL_STORE_OK)
        fail_msg("write %s: %s", name_text, err.message);
    corral_manifest_free(m);
}

static void test_models_write_to_ollama_paths_and_read_back(void **state)
{
    fixture *f = *state;
    corral_error err = {{0}};
    write_model(f, "llama3.2:1b");
    write_model(f, "example.com:5000/ns/m:q4");
    assert_true(store_fixture_exists(f->root, "manifests/registry.ollama.ai/library/llama3.2/1b"));
    assert_true(store_fixture_exists(f->root, "manifests/example.com:5000/ns/m/q4"));
    assert_int_equal(store_fixture_count_entries(f->root, "manifests/registry.ollama.ai/library/llama3.2"), 1);

    corral_model_name name = name_of("llama3.2:1b");
    char *path = corral_store_manifest_path(f->store, &name, &err);
    assert_string_equal(path, store_fixture_path(f->root,
                                                 "manifests/registry.ollama.ai/library/llama3.2/1b"));
    free(path);

    corral_manifest *m = NULL;
    char digest[CORRAL_DIGEST_BUF];
    struct timespec modified = {0};
    assert_int_equal(corral_store_manifest_read(f->store, &name, &m, digest, &modified, &err),
                     CORRAL_STORE_OK);
    assert_string_equal(m->config.digest, f->config);
    assert_string_equal(corral_manifest_find_layer(m, CORRAL_MEDIA_MODEL, NULL)->digest,
                        f->weights);
    assert_true(modified.tv_sec > 0);

    /* The digest is that of the bytes on disk, as /api/tags reports it. */
    size_t len;
    char *json = corral_manifest_serialize(m, &len, &err);
    char expect[CORRAL_DIGEST_BUF];
    corral_digest_of(json, len, expect);
    assert_string_equal(digest, expect);
    free(json);
    corral_manifest_free(m);
}

static void test_models_refuse_manifest_with_missing_or_wrong_size_blob(void **state)
{
    fixture *f = *state;
    corral_error err = {{0}};
    corral_model_name name = name_of("m");
    corral_manifest *m = make_manifest(f);
    char absent[CORRAL_DIGEST_BUF];
    corral_digest_of("absent", 6, absent);
    assert_true(corral_manifest_add_layer(m, CORRAL_MEDIA_SYSTEM, absent, 6, NULL, &err));
    assert_int_equal(corral_store_manifest_write(f->store, &name, m, &err), CORRAL_STORE_INVALID);
    assert_non_null(strstr(err.message, "is not in the store"));
    assert_non_null(strstr(err.message, absent));
    corral_manifest_free(m);

    m = make_manifest(f);
    m->layers[0].size_bytes += 1;
    assert_int_equal(corral_store_manifest_write(f->store, &name, m, &err), CORRAL_STORE_INVALID);
    assert_non_null(strstr(err.message, "but the manifest says"));
    corral_manifest_free(m);
    assert_false(store_fixture_exists(f->root, "manifests/registry.ollama.ai"));
}

static void test_models_refuse_invalid_names_before_forming_paths(void **state)
{
    fixture *f = *state;
    corral_error err = {{0}};
    corral_model_name name = name_of("m");
    strcpy(name.namespace, "..");
    corral_manifest *m = make_manifest(f);
    assert_int_equal(corral_store_manifest_write(f->store, &name, m, &err), CORRAL_STORE_INVALID);
    assert_null(corral_store_manifest_path(f->store, &name, &err));
    corral_manifest *out = NULL;
    assert_int_equal(corral_store_manifest_read(f->store, &name, &out, NULL, NULL, &err),
                     CORRAL_STORE_INVALID);
    assert_int_equal(corral_store_manifest_delete(f->store, &name, &err), CORRAL_STORE_INVALID);
    corral_manifest_free(m);
    assert_int_equal(store_fixture_count_entries(f->root, "manifests"), 0);
}

static void test_models_missing_model_is_not_found(void **state)
{
    fixture *f = *state;
    corral_error err = {{0}};
    corral_model_name name = name_of("nothere");
    corral_manifest *m = NULL;
    assert_int_equal(corral_store_manifest_read(f->store, &name, &m, NULL, NULL, &err),
                     CORRAL_STORE_NOT_FOUND);
    assert_string_equal(err.message, "model 'nothere:latest' not found");
    assert_int_equal(corral_store_manifest_delete(f->store, &name, &err), CORRAL_STORE_NOT_FOUND);
    corral_model_name dst = name_of("copy");
    assert_int_equal(corral_store_manifest_copy(f->store, &name, &dst, &err),
                     CORRAL_STORE_NOT_FOUND);
}

static void test_models_match_names_case_insensitively_keeping_disk_spelling(void **state)
{
    fixture *f = *state;
    corral_error err = {{0}};
    write_model(f, "User/Mistral:Latest");
    corral_model_name lower = name_of("user/mistral");
    corral_model_name stored;
    assert_int_equal(corral_store_resolve(f->store, &lower, &stored, &err), CORRAL_STORE_OK);
    assert_string_equal(stored.namespace, "User");
    assert_string_equal(stored.model, "Mistral");
    assert_string_equal(stored.tag, "Latest");
    corral_manifest *m = NULL;
    assert_int_equal(corral_store_manifest_read(f->store, &lower, &m, NULL, NULL, &err),
                     CORRAL_STORE_OK);
    corral_manifest_free(m);

    /* Writing another spelling replaces the stored file: never two names differing in case. */
    write_model(f, "USER/MISTRAL:LATEST");
    write_model(f, "user/mistral:7b");
    corral_store_entry *entries;
    size_t n;
    assert_int_equal(corral_store_list(f->store, &entries, &n, &err), CORRAL_STORE_OK);
    assert_int_equal(n, 2);
    assert_int_equal(store_fixture_count_entries(f->root, "manifests/registry.ollama.ai"), 1);
    assert_true(store_fixture_exists(f->root, "manifests/registry.ollama.ai/User/Mistral/7b"));
    corral_store_list_free(entries, n);
}

static void test_models_copy_shares_blobs_and_delete_removes_only_unshared(void **state)
{
    fixture *f = *state;
    corral_error err = {{0}};
    write_model(f, "src:1");
    corral_model_name src = name_of("src:1"), dst = name_of("other/dst:2");
    assert_int_equal(corral_store_manifest_copy(f->store, &src, &dst, &err), CORRAL_STORE_OK);
    char a[CORRAL_DIGEST_BUF], b[CORRAL_DIGEST_BUF];
    corral_manifest *m = NULL;
    assert_int_equal(corral_store_manifest_read(f->store, &src, &m, a, NULL, &err), CORRAL_STORE_OK);
    corral_manifest_free(m);
    assert_int_equal(corral_store_manifest_read(f->store, &dst, &m, b, NULL, &err), CORRAL_STORE_OK);
    corral_manifest_free(m);
    assert_string_equal(a, b);

    /* Delete the source: blobs stay, the copy still needs them. */
    assert_int_equal(corral_store_manifest_delete(f->store, &src, &err), CORRAL_STORE_OK);
    assert_false(store_fixture_exists(f->root, "manifests/registry.ollama.ai/library"));
    assert_int_equal(corral_store_blob_stat(f->store, f->weights, NULL, &err), CORRAL_STORE_OK);
    assert_int_equal(corral_store_manifest_read(f->store, &src, &m, NULL, NULL, &err),
                     CORRAL_STORE_NOT_FOUND);

    /* Delete the copy (by another spelling): now the blobs and every directory go. */
    corral_model_name upper = name_of("OTHER/DST:2");
    assert_int_equal(corral_store_manifest_delete(f->store, &upper, &err), CORRAL_STORE_OK);
    assert_int_equal(corral_store_blob_stat(f->store, f->weights, NULL, &err),
                     CORRAL_STORE_NOT_FOUND);
    assert_int_equal(corral_store_blob_stat(f->store, f->config, NULL, &err),
                     CORRAL_STORE_NOT_FOUND);
    assert_int_equal(store_fixture_count_entries(f->root, "manifests"), 0);
    assert_int_equal(store_fixture_count_entries(f->root, "blobs"), 0);
}

static void test_models_list_newest_first_with_size_and_digest(void **state)
{
    fixture *f = *state;
    corral_error err = {{0}};
    write_model(f, "old");
    write_model(f, "new");
    write_model(f, "user/mid:v1");
    store_fixture_age(f->root, "manifests/registry.ollama.ai/library/old/latest", 300);
    store_fixture_age(f->root, "manifests/registry.ollama.ai/user/mid/v1", 100);
    /* Things that are not models: garbage at a valid path, a temp file, a bad name. */
    store_fixture_write(f->root, "manifests/registry.ollama.ai/library/junk/latest", "nope", 4);
    store_fixture_write(f->root, "manifests/registry.ollama.ai/library/new/.corral-tmp-abc", "{}", 2);
    store_fixture_write(f->root, "manifests/registry.ollama.ai/bad.ns/m/latest", "{}", 2);

    corral_store_entry *entries = NULL;
    size_t n = 0;
    assert_int_equal(corral_store_list(f->store, &entries, &n, &err), CORRAL_STORE_OK);
    assert_int_equal(n, 3);
    assert_string_equal(entries[0].display, "new:latest");
    assert_string_equal(entries[1].display, "user/mid:v1");
    assert_string_equal(entries[2].display, "old:latest");
    uint64_t size = strlen(config_json) + strlen(weights);
    char *bytes;
    size_t len;
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(entries[i].size_bytes, size);
        assert_int_equal(strlen(entries[i].digest_hex), 64);
        assert_non_null(entries[i].manifest);
    }
    /* Same manifest bytes, same digest: all three were written from the same manifest. */
    assert_string_equal(entries[0].digest_hex, entries[2].digest_hex);
    corral_manifest *m = make_manifest(f);
    bytes = corral_manifest_serialize(m, &len, &err);
    char expect[CORRAL_DIGEST_BUF];
    corral_digest_of(bytes, len, expect);
    assert_string_equal(entries[0].digest_hex, expect + 7);
    free(bytes);
    corral_manifest_free(m);
    corral_store_list_free(entries, n);
    corral_store_list_free(NULL, 0);
}

/* ---- a store as ollama leaves it ---- */

static void put_raw_blob(const char *root, const char *text, char digest[CORRAL_DIGEST_BUF])
{
    corral_digest_of(text, strlen(text), digest);
    char rel[128];
    snprintf(rel, sizeof rel, "blobs/sha256-%s", digest + 7);
    store_fixture_write(root, rel, text, strlen(text));
}

static void put_raw_manifest(const char *root, const char *rel, const char *config,
                             const char *model, size_t model_size)
{
    char json[2048];
    snprintf(json, sizeof json,
             "{\"schemaVersion\":2,\"mediaType\":\"application/vnd.docker.distribution.manifest.v2+json\","
             "\"config\":{\"mediaType\":\"application/vnd.docker.container.image.v1+json\","
             "\"digest\":\"%s\",\"size\":2},\"layers\":[{\"mediaType\":"
             "\"application/vnd.ollama.image.model\",\"digest\":\"%s\",\"size\":%zu}]}\n",
             config, model, model_size);
    store_fixture_write(root, rel, json, strlen(json));
}

static void test_models_lists_a_store_laid_out_like_ollama(void **state)
{
    (void)state;
    /* Built with plain file writes, as ollama's Go code would have left ~/.ollama/models. */
    char *root = store_fixture_make_root();
    char config[CORRAL_DIGEST_BUF], model[CORRAL_DIGEST_BUF];
    put_raw_blob(root, "{}", config);
    put_raw_blob(root, "GGUF", model);
    put_raw_manifest(root, "manifests/registry.ollama.ai/library/tinyllama/latest", config, model, 4);
    put_raw_manifest(root, "manifests/registry.ollama.ai/someone/foo/v1", config, model, 4);
    put_raw_manifest(root, "manifests/localhost:5000/ns/bar/q4_0", config, model, 4);
    store_fixture_write(root, "blobs/sha256-" "ab" "-partial", "x", 1);
    store_fixture_age(root, "manifests/registry.ollama.ai/someone/foo/v1", 20);
    store_fixture_age(root, "manifests/localhost:5000/ns/bar/q4_0", 40);

    corral_error err = {{0}};
    corral_store *store = corral_store_open(root, &err);
    assert_non_null(store);
    corral_store_entry *entries = NULL;
    size_t n = 0;
    assert_int_equal(corral_store_list(store, &entries, &n, &err), CORRAL_STORE_OK);
    assert_int_equal(n, 3);
    assert_string_equal(entries[0].display, "tinyllama:latest");
    assert_string_equal(entries[1].display, "someone/foo:v1");
    assert_string_equal(entries[2].display, "localhost:5000/ns/bar:q4_0");
    assert_int_equal(entries[0].size_bytes, 6);
    corral_store_list_free(entries, n);

    corral_model_name name = name_of("TinyLlama");
    corral_manifest *m = NULL;
    assert_int_equal(corral_store_manifest_read(store, &name, &m, NULL, NULL, &err),
                     CORRAL_STORE_OK);
    uint64_t size = 0;
    assert_int_equal(corral_store_blob_stat(store, m->layers[0].digest, &size, &err),
                     CORRAL_STORE_OK);
    assert_int_equal(size, 4);
    char *path = corral_store_blob_path(store, m->layers[0].digest, &err);
    char rel[128];
    snprintf(rel, sizeof rel, "blobs/sha256-%s", model + 7);
    assert_string_equal(path, store_fixture_path(root, rel));
    free(path);
    corral_manifest_free(m);
    corral_store_close(store);
    store_fixture_remove_root(root);
}

static void test_models_store_root_follows_environment(void **state)
{
    (void)state;
    char buf[4096];
    corral_error err = {{0}};
    setenv("HOME", "/home/someone", 1);
    unsetenv("CORRAL_MODELS");
    unsetenv("OLLAMA_MODELS");
    assert_true(corral_store_default_root(buf, sizeof buf, &err));
    assert_string_equal(buf, "/home/someone/.corral/models");
    setenv("OLLAMA_MODELS", "/srv/ollama", 1);
    assert_true(corral_store_default_root(buf, sizeof buf, &err));
    assert_string_equal(buf, "/srv/ollama");
    setenv("CORRAL_MODELS", "/srv/corral", 1);
    assert_true(corral_store_default_root(buf, sizeof buf, &err));
    assert_string_equal(buf, "/srv/corral");
    assert_false(corral_store_default_root(buf, 4, &err));
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_models_write_to_ollama_paths_and_read_back),
        T(test_models_refuse_manifest_with_missing_or_wrong_size_blob),
        T(test_models_refuse_invalid_names_before_forming_paths),
        T(test_models_missing_model_is_not_found),
        T(test_models_match_names_case_insensitively_keeping_disk_spelling),
        T(test_models_copy_shares_blobs_and_delete_removes_only_unshared),
        T(test_models_list_newest_first_with_size_and_digest),
        cmocka_unit_test(test_models_lists_a_store_laid_out_like_ollama),
        cmocka_unit_test(test_models_store_root_follows_environment),
    };
#undef T
    return cmocka_run_group_tests(tests, NULL, NULL);
}
