/*
 * Model names and digests: ollama's parsing rules and defaults (cases from ollama's
 * types/model/name.go grammar), case-insensitive equality with the spelling kept, the shortest
 * display form, and the one digest form accepted before any path is formed.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "store/store.h"

static corral_model_name parse_ok(const char *s)
{
    corral_model_name name;
    corral_error err = {{0}};
    if (!corral_model_name_parse(s, &name, &err))
        fail_msg("'%s' should parse: %s", s, err.message);
    assert_true(corral_model_name_is_valid(&name));
    return name;
}

static void assert_parts(const char *s, const char *host, const char *ns, const char *model,
                         const char *tag)
{
    corral_model_name name = parse_ok(s);
    assert_string_equal(name.host, host);
    assert_string_equal(name.namespace, ns);
    assert_string_equal(name.model, model);
    assert_string_equal(name.tag, tag);
}

static void assert_rejected(const char *s, const char *why)
{
    corral_model_name name;
    corral_error err = {{0}};
    if (corral_model_name_parse(s, &name, &err))
        fail_msg("'%s' should be rejected", s);
    assert_non_null(strstr(err.message, "invalid model name"));
    if (why && !strstr(err.message, why))
        fail_msg("'%s': message '%s' lacks '%s'", s, err.message, why);
}

static void test_name_fills_ollama_defaults(void **state)
{
    (void)state;
    assert_parts("llama3.2", "registry.ollama.ai", "library", "llama3.2", "latest");
    assert_parts("llama3.2:1b", "registry.ollama.ai", "library", "llama3.2", "1b");
    assert_parts("user/m", "registry.ollama.ai", "user", "m", "latest");
    assert_parts("user/m:q4_K_M", "registry.ollama.ai", "user", "m", "q4_K_M");
    assert_parts("example.com/ns/m:v1.0", "example.com", "ns", "m", "v1.0");
    assert_parts("mistral:7b-instruct-v0.2-q4_0", "registry.ollama.ai", "library", "mistral",
                 "7b-instruct-v0.2-q4_0");
    assert_parts("_x/_y:_z", "registry.ollama.ai", "_x", "_y", "_z");
}

static void test_name_host_may_carry_port_and_scheme(void **state)
{
    (void)state;
    /* The ':' before the last '/' is the port's, not a tag separator. */
    assert_parts("localhost:5000/ns/m", "localhost:5000", "ns", "m", "latest");
    assert_parts("localhost:5000/ns/m:t", "localhost:5000", "ns", "m", "t");
    assert_parts("https://example.com/ns/m:t", "example.com", "ns", "m", "t");
    assert_parts("http://example.com:8080/ns/m", "example.com:8080", "ns", "m", "latest");
}

static void test_name_rejects_bad_parts(void **state)
{
    (void)state;
    assert_rejected("", "empty");
    assert_rejected(":latest", "model");
    assert_rejected("m:", "tag");
    assert_rejected("ns/", "model");
    assert_rejected("/m", "namespace");
    assert_rejected("a/b/c/d", "host");
    assert_rejected("my.ns/m", "namespace may not contain '.'");
    assert_rejected("-m", "must start");
    assert_rejected(".m", "must start");
    assert_rejected("m:-t", "must start");
    assert_rejected("m:.t", "must start");
    assert_rejected("m:a:b", "model");
    assert_rejected("mo del", "model");
    assert_rejected("mod\xc3\xa8l", "model");
    assert_rejected("m@sha256", "model");
    assert_rejected("localhost:5000/m", "namespace");
    assert_rejected("https://m", NULL);
    assert_rejected("m\nx", NULL);
}

static void test_name_rejects_path_traversal(void **state)
{
    (void)state;
    assert_rejected("../../etc/passwd", NULL);
    assert_rejected("../m", "namespace");
    assert_rejected("ns/..", "model");
    assert_rejected("m:..", "tag");
    assert_rejected("./m", NULL);
    assert_rejected("m/", "model");

    /* A name struct filled by hand is checked again before it forms a path. */
    corral_model_name name = parse_ok("m");
    strcpy(name.model, "..");
    assert_false(corral_model_name_is_valid(&name));
    name = parse_ok("m");
    strcpy(name.tag, "a/b");
    assert_false(corral_model_name_is_valid(&name));
}

static void test_name_enforces_part_lengths(void **state)
{
    (void)state;
    char s[1024];
    memset(s, 'a', 80);
    s[80] = '\0';
    parse_ok(s);
    s[80] = 'a';
    s[81] = '\0';
    assert_rejected(s, "longer than 80");

    memset(s, 'a', 350);
    strcpy(s + 350, "/ns/m:t");
    corral_model_name name = parse_ok(s);
    assert_int_equal(strlen(name.host), 350);
    memset(s, 'a', 351);
    strcpy(s + 351, "/ns/m:t");
    assert_rejected(s, "longer than 350");

    strcpy(s, "m:");
    memset(s + 2, 't', 81);
    s[83] = '\0';
    assert_rejected(s, "tag is longer than 80");
}

static void test_name_matches_case_insensitively_and_keeps_spelling(void **state)
{
    (void)state;
    corral_model_name a = parse_ok("Mistral:Latest");
    corral_model_name b = parse_ok("registry.ollama.ai/library/mistral:latest");
    corral_model_name c = parse_ok("REGISTRY.OLLAMA.AI/LIBRARY/MISTRAL");
    corral_model_name d = parse_ok("mistral:7b");
    assert_string_equal(a.model, "Mistral");
    assert_string_equal(a.tag, "Latest");
    assert_true(corral_model_name_equal(&a, &b));
    assert_true(corral_model_name_equal(&b, &c));
    assert_false(corral_model_name_equal(&a, &d));
}

static void assert_display(const char *s, const char *shortest, const char *full)
{
    corral_model_name name = parse_ok(s);
    char buf[CORRAL_NAME_STRING_MAX];
    corral_model_name_display(&name, buf, sizeof buf);
    assert_string_equal(buf, shortest);
    corral_model_name_full(&name, buf, sizeof buf);
    assert_string_equal(buf, full);
}

static void test_name_display_drops_default_host_and_namespace(void **state)
{
    (void)state;
    assert_display("llama3.2", "llama3.2:latest", "registry.ollama.ai/library/llama3.2:latest");
    assert_display("user/m:t", "user/m:t", "registry.ollama.ai/user/m:t");
    assert_display("example.com/ns/m:t", "example.com/ns/m:t", "example.com/ns/m:t");
    /* A non-default host keeps even the default namespace, as ollama shows it. */
    assert_display("example.com/library/m", "example.com/library/m:latest",
                   "example.com/library/m:latest");
    assert_display("Registry.Ollama.AI/Library/M:T", "M:T", "Registry.Ollama.AI/Library/M:T");
}

static void test_name_longest_full_form_fits(void **state)
{
    (void)state;
    char s[1024];
    const struct { char fill, separator; size_t len; } parts[] = {
        {'h', '/', 350}, {'n', '/', 80}, {'m', ':', 80}, {'t', '\0', 80}};
    size_t at = 0;
    for (size_t i = 0; i < 4; i++) {
        memset(s + at, parts[i].fill, parts[i].len);
        at += parts[i].len;
        s[at++] = parts[i].separator;
    }
    corral_model_name name = parse_ok(s);
    char buf[CORRAL_NAME_STRING_MAX];
    corral_model_name_full(&name, buf, sizeof buf);
    assert_string_equal(buf, s);
}

/* ---- digests ---- */

#define HEX64 "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

static void test_digest_accepts_only_sha256_lowercase_hex(void **state)
{
    (void)state;
    assert_true(corral_digest_is_valid("sha256:" HEX64));
    const char *bad[] = {
        "",
        "sha256:",
        "sha256:" HEX64 "0",                                  /* 65 digits */
        "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcde", /* 63 */
        "sha256:0123456789ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef",
        "sha256-" HEX64,
        "SHA256:" HEX64,
        "sha512:" HEX64,
        HEX64,
        "sha256:../../../../../../../../etc/passwd0123456789abcdef0123456789abcd",
        "sha256:" HEX64 "\n",
        "sha256:0123456789abcdef0123456789abcdef0123456789abcdef012345678/abcde",
        " sha256:" HEX64,
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        corral_error err = {{0}};
        if (corral_digest_is_valid(bad[i]))
            fail_msg("digest %zu '%s' should be rejected", i, bad[i]);
        assert_false(corral_digest_check(bad[i], &err));
        assert_non_null(strstr(err.message, "invalid digest format"));
        assert_null(strchr(err.message, '\n'));
    }
}

static void test_digest_of_matches_fips_vectors(void **state)
{
    (void)state;
    /* FIPS 180-2 test vectors. */
    char out[CORRAL_DIGEST_BUF];
    corral_digest_of("", 0, out);
    assert_string_equal(
        out, "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    corral_digest_of("abc", 3, out);
    assert_string_equal(
        out, "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    assert_true(corral_digest_is_valid(out));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_name_fills_ollama_defaults),
        cmocka_unit_test(test_name_host_may_carry_port_and_scheme),
        cmocka_unit_test(test_name_rejects_bad_parts),
        cmocka_unit_test(test_name_rejects_path_traversal),
        cmocka_unit_test(test_name_enforces_part_lengths),
        cmocka_unit_test(test_name_matches_case_insensitively_and_keeps_spelling),
        cmocka_unit_test(test_name_display_drops_default_host_and_namespace),
        cmocka_unit_test(test_name_longest_full_form_fits),
        cmocka_unit_test(test_digest_accepts_only_sha256_lowercase_hex),
        cmocka_unit_test(test_digest_of_matches_fips_vectors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
