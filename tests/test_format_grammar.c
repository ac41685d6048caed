/*
 * Structured outputs' grammars (src/server/core/format_grammar.c): for each schema, the grammar
 * the engine parses accepts the JSON texts the schema allows (optional properties left out
 * in every combination, whitespace where JSON has it) and refuses the others (a missing
 * required key, a wrong type, an extra key, too long, trailing whitespace); bad schemas get
 * their message.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "corral/engine.h"
#include "server/core/format_grammar.h"

static corral_grammar *schema_grammar(const char *schema_json)
{
    json_error_t jerr;
    json_t *schema = json_loads(schema_json, JSON_DECODE_ANY, &jerr);
    if (!schema)
        fail_msg("bad test schema %s: %s", schema_json, jerr.text);
    corral_error err = {{0}};
    char *gbnf = format_grammar_from_schema(schema, &err);
    json_decref(schema);
    if (!gbnf)
        fail_msg("%s: %s", schema_json, err.message);
    corral_grammar *g = corral_grammar_create(gbnf, NULL, &err);
    if (!g)
        fail_msg("%s\n%s: %s", schema_json, gbnf, err.message);
    free(gbnf);
    return g;
}

/* Each of valid accepted, each of invalid refused (NULL-terminated lists). */
static void check(const char *schema_json, const char *const *valid, const char *const *invalid)
{
    corral_grammar *g = schema_grammar(schema_json);
    for (; *valid; valid++)
        if (!corral_grammar_accepts(g, *valid, strlen(*valid)))
            fail_msg("%s refused %s", schema_json, *valid);
    for (; *invalid; invalid++)
        if (corral_grammar_accepts(g, *invalid, strlen(*invalid)))
            fail_msg("%s accepted %s", schema_json, *invalid);
    corral_grammar_free(g);
}

#define LIST(...) ((const char *const[]){__VA_ARGS__, NULL})

static void test_object_required_and_optional(void **state)
{
    (void)state;
    check("{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},"
          "\"b\":{\"type\":\"string\"},\"c\":{\"type\":\"boolean\"}},\"required\":[\"b\"]}",
          LIST("{\"b\":\"x\"}", "{\"a\":1,\"b\":\"x\"}", "{\"b\":\"x\",\"c\":true}",
               "{\"a\":-20,\"b\":\"\",\"c\":false}", "{ \"a\" : 1 , \"b\" : \"x\" }",
               "{\n  \"b\": \"x\"\n}"),
          LIST("{}", "{\"a\":1}", "{\"a\":1,\"c\":true}", "{\"b\":\"x\",}", "{,\"b\":\"x\"}",
               "{\"b\":1}", "{\"b\":\"x\",\"d\":1}", "{\"b\":\"x\",\"a\":1}", "{\"b\":\"x\"} ",
               "{\"a\":01,\"b\":\"x\"}", "{\"a\":1.5,\"b\":\"x\"}"));
    /* nothing required: every subset in order, the empty object too */
    check("{\"properties\":{\"a\":{\"type\":\"null\"},\"b\":{\"type\":\"number\"}}}",
          LIST("{}", "{\"a\":null}", "{\"b\":1.5e3}", "{\"a\":null,\"b\":-0.25}", "{ }"),
          LIST("{\"b\":1,\"a\":null}", "{\"a\":null,}", "{\"a\":nul}", "{\"b\":.5}"));
}

static void test_nested_arrays_and_counts(void **state)
{
    (void)state;
    check("{\"type\":\"object\",\"required\":[\"tags\",\"who\"],\"properties\":{"
          "\"tags\":{\"type\":\"array\",\"items\":{\"type\":\"string\",\"maxLength\":3},"
          "\"minItems\":1,\"maxItems\":2},"
          "\"who\":{\"type\":\"object\",\"required\":[\"n\"],\"properties\":{\"n\":{\"type\":"
          "\"integer\"}}}}}",
          LIST("{\"tags\":[\"a\"],\"who\":{\"n\":1}}", "{\"tags\":[\"abc\", \"\"],\"who\":{\"n\":0}}",
               "{\"tags\":[ \"a\" ],\"who\":{ \"n\": 12 }}"),
          LIST("{\"tags\":[],\"who\":{\"n\":1}}", "{\"tags\":[\"a\",\"b\",\"c\"],\"who\":{\"n\":1}}",
               "{\"tags\":[\"abcd\"],\"who\":{\"n\":1}}", "{\"tags\":[\"a\"],\"who\":{}}",
               "{\"tags\":[1],\"who\":{\"n\":1}}"));
    check("{\"type\":\"array\"}", LIST("[]", "[1,\"a\",{\"k\":[null]}]", "[ true , false ]"),
          LIST("[1,]", "[", "{}", "[] "));
    check("{\"type\":\"array\",\"maxItems\":0}", LIST("[]", "[ ]"), LIST("[1]"));
    check("{\"type\":\"string\",\"minLength\":2,\"maxLength\":3}",
          LIST("\"ab\"", "\"abc\"", "\"\\u00e9\\n\"", "\"\xc3\xa9t\xc3\xa9\""),
          LIST("\"a\"", "\"abcd\"", "\"a\"b\"", "\"a\nb\""));
}

static void test_enum_const_and_alternatives(void **state)
{
    (void)state;
    check("{\"enum\":[\"red\",\"say \\\"hi\\\"\",\"back\\\\slash\",3,null,true]}",
          LIST("\"red\"", "\"say \\\"hi\\\"\"", "\"back\\\\slash\"", "3", "null", "true"),
          LIST("\"blue\"", "\"red\" ", "4", "false", "\"say \"hi\"\""));
    check("{\"const\":{\"k\":[1,2]}}", LIST("{\"k\":[1,2]}"), LIST("{\"k\": [1,2]}", "{}"));
    check("{\"anyOf\":[{\"type\":\"integer\"},{\"type\":\"string\",\"maxLength\":1}]}",
          LIST("12", "\"x\""), LIST("\"xy\"", "true"));
    check("{\"oneOf\":[{\"type\":\"boolean\"},{\"type\":\"null\"}]}", LIST("true", "null"),
          LIST("0"));
    check("{\"type\":[\"integer\",\"null\"]}", LIST("5", "null"), LIST("\"5\""));
    check("{\"type\":\"string\",\"nullable\":true}", LIST("\"s\"", "null"), LIST("1"));
    check("{\"allOf\":[{\"type\":\"integer\"}]}", LIST("-7"), LIST("7.5"));
    /* no type: any value, whether nullable or not */
    check("{\"nullable\":true,\"description\":\"d\"}", LIST("null", "1", "\"x\"", "[{}]"),
          LIST("nul"));
}

static void test_enum_reals_as_written(void **state)
{
    (void)state;
    check("{\"enum\":[0.1,1.5,2.0,1e-7]}", LIST("0.1", "1.5", "2.0", "1e-7"),
          LIST("0.10000000000000001", "2", "0.2"));
    check("{\"const\":{\"x\":[0.3]}}", LIST("{\"x\":[0.3]}"),
          LIST("{\"x\":[0.29999999999999999]}"));
}

static void test_tuples(void **state)
{
    (void)state;
    check("{\"type\":\"array\",\"prefixItems\":[{\"type\":\"integer\"},{\"type\":\"string\"}],"
          "\"items\":false}",
          LIST("[1,\"a\"]", "[ 1 , \"a\" ]"), LIST("[\"a\",1]", "[1]", "[1,\"a\",2]", "[]"));
}

static void test_counts_beyond_the_grammar_limit(void **state)
{
    (void)state;
    char long_text[6003];
    memset(long_text, 'a', sizeof long_text - 1);
    long_text[0] = long_text[sizeof long_text - 2] = '"';
    long_text[sizeof long_text - 1] = '\0';
    check("{\"type\":\"string\",\"maxLength\":100000}", LIST("\"\"", long_text), LIST("\"a"));
    check("{\"type\":\"array\",\"maxItems\":5000}", LIST("[]", "[1,2]"), LIST("[1,]"));
}

/* A schema of n optional integer properties p0, p1, ... (malloc'ed JSON text). */
static char *optional_properties(int n)
{
    json_t *properties = json_object();
    for (int i = 0; i < n; i++) {
        char key[16];
        snprintf(key, sizeof key, "p%d", i);
        json_object_set_new(properties, key, json_pack("{s:s}", "type", "number"));
    }
    json_t *schema = json_pack("{s:s,s:o}", "type", "object", "properties", properties);
    char *text = json_dumps(schema, JSON_COMPACT);
    json_decref(schema);
    assert_non_null(text);
    return text;
}

/* The engine expands a bounded number of rules between two characters: as many optional
 * properties as allowed must still leave each combination reachable. */
static void test_many_optional_properties(void **state)
{
    (void)state;
    char *schema = optional_properties(300);
    static char all[8192] = "{";
    for (int i = 0; i < 300; i++)
        snprintf(all + strlen(all), sizeof all - strlen(all), "%s\"p%d\":1.5e3", i ? "," : "", i);
    strcat(all, "}");
    check(schema, LIST("{}", "{\"p0\":1.5e3}", "{\"p299\":1}", "{\"p0\":1,\"p299\":2.5}", all),
          LIST("{\"p299\":1,\"p0\":1}"));
    free(schema);
}

static void test_local_refs_anywhere(void **state)
{
    (void)state;
    /* zod-to-json-schema writes a reused schema as a pointer to its first use */
    check("{\"type\":\"object\",\"required\":[\"home\",\"work\"],\"properties\":{"
          "\"home\":{\"type\":\"object\",\"required\":[\"city\"],\"properties\":{\"city\":{"
          "\"type\":\"string\"}}},\"work\":{\"$ref\":\"#/properties/home\"}}}",
          LIST("{\"home\":{\"city\":\"a\"},\"work\":{\"city\":\"b\"}}"),
          LIST("{\"home\":{\"city\":\"a\"},\"work\":{}}"));
    /* the whole schema, recursively */
    check("{\"type\":\"object\",\"properties\":{\"kids\":{\"type\":\"array\",\"items\":{"
          "\"$ref\":\"#\"}}}}",
          LIST("{}", "{\"kids\":[{},{\"kids\":[]}]}"), LIST("{\"kids\":[1]}"));
    /* ~1 is '/', ~0 is '~'; array indices */
    check("{\"$defs\":{\"a/b~c\":{\"type\":\"integer\"}},\"anyOf\":[{\"type\":\"null\"},"
          "{\"type\":\"array\",\"items\":{\"$ref\":\"#/$defs/a~1b~0c\"}},"
          "{\"type\":\"object\",\"properties\":{\"n\":{\"$ref\":\"#/anyOf/0\"}}}]}",
          LIST("null", "[1,2]", "{\"n\":null}"), LIST("[null]", "{\"n\":1}"));
}

static void test_refs_and_any(void **state)
{
    (void)state;
    /* a recursive definition */
    check("{\"$ref\":\"#/$defs/node\",\"$defs\":{\"node\":{\"type\":\"object\","
          "\"required\":[\"v\"],\"properties\":{\"v\":{\"type\":\"integer\"},"
          "\"next\":{\"$ref\":\"#/$defs/node\"}}}}}",
          LIST("{\"v\":1}", "{\"v\":1,\"next\":{\"v\":2,\"next\":{\"v\":3}}}"),
          LIST("{\"v\":1,\"next\":{}}", "{\"next\":{\"v\":1}}"));
    check("{\"type\":\"object\",\"properties\":{\"p\":{\"$ref\":\"#/definitions/pt\"}},"
          "\"definitions\":{\"pt\":{\"type\":\"array\",\"items\":{\"type\":\"number\"}}}}",
          LIST("{\"p\":[1,2.5]}", "{}"), LIST("{\"p\":[\"x\"]}"));
    check("{}", LIST("{\"any\":[1,{\"x\":null}]}", "\"s\"", "12", "[]"), LIST("{", "nope"));
    check("true", LIST("false", "[null]"), LIST("[null"));
    check("{\"type\":\"object\"}", LIST("{}", "{\"a\":{\"b\":[1]}}"), LIST("[]", "{} "));
}

static void test_json_object_grammar(void **state)
{
    (void)state;
    char *gbnf = format_grammar_json_object();
    assert_non_null(gbnf);
    corral_error err;
    corral_grammar *g = corral_grammar_create(gbnf, NULL, &err);
    assert_non_null(g);
    const char *valid[] = {"{}", "{\"a\": [1, 2.5, \"x\", null, true]}", "{\n\t\"k\": {}\n}"};
    for (size_t i = 0; i < 3; i++)
        assert_true(corral_grammar_accepts(g, valid[i], strlen(valid[i])));
    const char *invalid[] = {"[]", "\"x\"", "{} ", "{\"a\"}", "{\"a\":1,}", "{'a':1}"};
    for (size_t i = 0; i < 6; i++)
        assert_false(corral_grammar_accepts(g, invalid[i], strlen(invalid[i])));
    corral_grammar_free(g);
    free(gbnf);
}

static void expect_refused(const char *schema_json, const char *message)
{
    json_t *schema = json_loads(schema_json, JSON_DECODE_ANY, NULL);
    assert_non_null(schema);
    corral_error err = {{0}};
    char *gbnf = format_grammar_from_schema(schema, &err);
    json_decref(schema);
    if (gbnf)
        fail_msg("%s gave a grammar:\n%s", schema_json, gbnf);
    if (!strstr(err.message, message))
        fail_msg("%s: got \"%s\", want \"%s\"", schema_json, err.message, message);
}

static void test_refused_schemas(void **state)
{
    (void)state;
    expect_refused("{\"type\":\"shape\"}", "format: unsupported schema type \"shape\"");
    expect_refused("{\"type\":7}", "type must be a name");
    expect_refused("{\"type\":\"object\",\"required\":\"a\",\"properties\":{\"a\":{}}}",
                   "required must be an array");
    expect_refused("{\"type\":\"string\",\"minLength\":3,\"maxLength\":2}",
                   "minLength is larger than maxLength");
    expect_refused("{\"type\":\"array\",\"maxItems\":-1}",
                   "maxItems must be a non-negative integer");
    expect_refused("{\"type\":\"string\",\"minLength\":5000}",
                   "minLength above 4096 is not supported");
    expect_refused("{\"type\":\"object\",\"required\":[1]}", "required must be an array");
    expect_refused("{\"$ref\":\"https://example.com/s.json\"}", "unsupported $ref");
    expect_refused("{\"$ref\":\"#/$defs/missing\"}",
                   "$ref \"#/$defs/missing\" points at nothing in the schema");
    expect_refused("{\"$ref\":\"#/$defs/a~2\",\"$defs\":{\"a~2\":{}}}", "points at nothing");
    /* left recursion: the grammar engine would refuse it only once the model is loaded */
    expect_refused("{\"$ref\":\"#/$defs/a\",\"$defs\":{\"a\":{\"$ref\":\"#/$defs/a\"}}}",
                   "$ref \"#/$defs/a\" refers to itself before any '{' or '['");
    expect_refused("{\"$defs\":{\"a\":{\"anyOf\":[{\"type\":\"null\"},{\"$ref\":\"#/$defs/b\"}]},"
                   "\"b\":{\"type\":[\"string\",\"object\"],\"allOf\":[{\"$ref\":\"#/$defs/a\"}]}},"
                   "\"$ref\":\"#/$defs/a\"}",
                   "refers to itself before any");
    expect_refused("{\"$ref\":\"#\"}", "refers to itself before any");
    expect_refused("{\"type\":\"array\",\"prefixItems\":[]}", "prefixItems must be a non-empty");
    char *wide = optional_properties(1001);
    expect_refused(wide, "an object with more than 1000 properties is not supported");
    free(wide);
    expect_refused("{\"enum\":[]}", "enum must be a non-empty array");
    expect_refused("{\"anyOf\":{}}", "anyOf must be a non-empty array");
    expect_refused("{\"allOf\":[{},{}]}", "allOf is supported with one schema only");
    expect_refused("false", "a schema must be an object or true");
    expect_refused("[1]", "a schema must be an object or true");
    char deep[4096] = "";
    for (int i = 0; i < 70; i++)
        strcat(deep, "{\"type\":\"array\",\"items\":");
    strcat(deep, "{}");
    for (int i = 0; i < 70; i++)
        strcat(deep, "}");
    expect_refused(deep, "nested deeper than 64");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_object_required_and_optional),
        cmocka_unit_test(test_nested_arrays_and_counts),
        cmocka_unit_test(test_enum_const_and_alternatives),
        cmocka_unit_test(test_refs_and_any),
        cmocka_unit_test(test_enum_reals_as_written),
        cmocka_unit_test(test_tuples),
        cmocka_unit_test(test_counts_beyond_the_grammar_limit),
        cmocka_unit_test(test_many_optional_properties),
        cmocka_unit_test(test_local_refs_anywhere),
        cmocka_unit_test(test_json_object_grammar),
        cmocka_unit_test(test_refused_schemas),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
