/*
 * The Modelfile parser and request builder of `corral create`: every
 * instruction, ollama's quoting rules, parameters type-checked by the option table, and
 * errors that name the line they are about.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "cli/modelfile.h"

static modelfile *parse_ok(const char *text)
{
    corral_error err = {{0}};
    modelfile *mf = modelfile_parse(text, strlen(text), &err);
    if (!mf)
        fail_msg("should parse: %s", err.message);
    return mf;
}

static void assert_parse_error(const char *text, const char *message)
{
    corral_error err = {{0}};
    modelfile *mf = modelfile_parse(text, strlen(text), &err);
    if (mf)
        fail_msg("should fail with '%s'", message);
    if (!strstr(err.message, message))
        fail_msg("expected '%s' in '%s'", message, err.message);
}

static void assert_request_error(const char *text, const char *message)
{
    modelfile *mf = parse_ok(text);
    corral_error err = {{0}};
    json_t *request = modelfile_to_request(mf, NULL, &err);
    modelfile_free(mf);
    if (request)
        fail_msg("should fail with '%s'", message);
    if (!strstr(err.message, message))
        fail_msg("expected '%s' in '%s'", message, err.message);
}

static void test_modelfile_parses_every_instruction(void **state)
{
    (void)state;
    modelfile *mf = parse_ok("FROM llama3\nPARAMETER top_k 5\nTEMPLATE t\nSYSTEM s\n"
                             "ADAPTER a.gguf\nLICENSE l\nMESSAGE user hi\nREQUIRES 0.14.0\n"
                             "RENDERER r\nPARSER p\nDRAFT d.gguf\n");
    static const modelfile_kind kinds[] = {
        MODELFILE_FROM,    MODELFILE_PARAMETER, MODELFILE_TEMPLATE, MODELFILE_SYSTEM,
        MODELFILE_ADAPTER, MODELFILE_LICENSE,   MODELFILE_MESSAGE,  MODELFILE_REQUIRES,
        MODELFILE_RENDERER, MODELFILE_PARSER,   MODELFILE_DRAFT,
    };
    assert_int_equal(mf->n_commands, 11);
    for (size_t i = 0; i < 11; i++) {
        assert_int_equal(mf->commands[i].kind, kinds[i]);
        assert_int_equal(mf->commands[i].line, i + 1);
    }
    assert_string_equal(mf->commands[1].key, "top_k");
    assert_string_equal(mf->commands[1].value, "5");
    assert_string_equal(mf->commands[6].key, "user");
    assert_string_equal(mf->commands[6].value, "hi");
    modelfile_free(mf);
}

static void test_modelfile_names_are_case_insensitive_and_comments_skipped(void **state)
{
    (void)state;
    modelfile *mf = parse_ok("\xEF\xBB\xBF# a comment\r\n  from base  \r\n\r\nSyStEm hello there  \r\n");
    assert_int_equal(mf->n_commands, 2);
    assert_string_equal(mf->commands[0].value, "base");
    assert_int_equal(mf->commands[1].kind, MODELFILE_SYSTEM);
    assert_string_equal(mf->commands[1].value, "hello there");
    assert_int_equal(mf->commands[1].line, 4);
    modelfile_free(mf);
}

static void test_modelfile_quoted_values_span_lines(void **state)
{
    (void)state;
    modelfile *mf = parse_ok("FROM x\nTEMPLATE \"\"\"{{ .System }}\n{{ .Prompt }}\"\"\"\n"
                             "SYSTEM \"He said \"hi\" twice\"\nPARAMETER stop \"<end>\"\n"
                             "LICENSE \"\"\"\nline\n\"\"\"\nMESSAGE assistant ok\n");
    assert_string_equal(mf->commands[1].value, "{{ .System }}\n{{ .Prompt }}");
    assert_string_equal(mf->commands[2].value, "He said \"hi\" twice");
    assert_string_equal(mf->commands[3].value, "<end>");
    assert_string_equal(mf->commands[4].value, "\nline\n");
    assert_int_equal(mf->commands[5].line, 9);
    modelfile_free(mf);
    /* a """ with more text on its line is part of the value, as ollama reads it */
    mf = parse_ok("FROM x\nMESSAGE user \"\"\"/set foo\n\"\"\"x\"\"\"\n"
                  "SYSTEM \"\"\"a\"\"\" b\"\"\"\n");
    assert_string_equal(mf->commands[1].value, "/set foo\n\"\"\"x");
    assert_string_equal(mf->commands[2].value, "a\"\"\" b");
    modelfile_free(mf);
}

static void test_modelfile_errors_name_the_line(void **state)
{
    (void)state;
    assert_parse_error("FROM x\n\nFORM y\n", "line 3: command must be one of");
    assert_parse_error("FROM x\nSYSTEM \"\"\"open\nnever closed\n", "line 2: unterminated \"\"\"");
    assert_parse_error("FROM x\nSYSTEM \"open\n", "line 2: unterminated \"");
    assert_parse_error("FROM x\nTEMPLATE \"\"\"a\"\"\" junk\n", "line 2: unterminated \"\"\"");
    assert_parse_error("FROM x\nMESSAGE robot hi\n", "line 2: message role must be one of");
    assert_parse_error("FROM x\nPARAMETER top_k\n", "line 2: PARAMETER needs a name");
    assert_parse_error("FROM\n", "line 1: FROM needs a value");
    assert_parse_error("# only a comment\nSYSTEM hi\n", "no FROM line");
    static const char with_nul[] = "FROM x\nSYSTEM a\0b\n";
    corral_error err = {{0}};
    assert_null(modelfile_parse(with_nul, sizeof with_nul - 1, &err));
    assert_string_equal(err.message, "line 2: NUL byte (is this a binary file?)");
}

/* Found by fuzz_modelfile: a value that is not UTF-8 cannot be a JSON string, and the request
 * silently lacked it (a Latin-1 SYSTEM line vanished from the created model). */
static void test_modelfile_must_be_utf8(void **state)
{
    (void)state;
    assert_parse_error("FROM x\nSYSTEM caf\xe9\n", "line 2: not UTF-8 text");
    assert_parse_error("FROM x\n\nMESSAGE user \xe2\x98\n", "line 3: not UTF-8 text");
    assert_parse_error("FROM x\nTEMPLATE \"\"\"a\n\xed\xa0\x80\"\"\"\n", "line 3: not UTF-8 text");
    modelfile *mf = parse_ok("\xef\xbb\xbf" "FROM x\nSYSTEM caf\xc3\xa9 \xe2\x98\x95\n");
    corral_error err = {{0}};
    json_t *request = modelfile_to_request(mf, NULL, &err);
    modelfile_free(mf);
    assert_non_null(request);
    assert_string_equal(json_string_value(json_object_get(request, "system")),
                        "caf\xc3\xa9 \xe2\x98\x95");
    json_decref(request);
    json_t *v;
    assert_int_equal(modelfile_parameter_value("stop", "\xff", &v, &err), PARAMETER_INVALID);
    assert_string_equal(err.message, "invalid value for parameter stop: not UTF-8 text");
}

static void test_parameters_are_type_checked(void **state)
{
    (void)state;
    json_t *v;
    corral_error err = {{0}};
    assert_int_equal(modelfile_parameter_value("num_ctx", "4096", &v, &err), PARAMETER_OK);
    assert_true(json_is_integer(v) && json_integer_value(v) == 4096);
    json_decref(v);
    assert_int_equal(modelfile_parameter_value("temperature", "0.5", &v, &err), PARAMETER_OK);
    assert_true(json_is_real(v) && json_real_value(v) == 0.5);
    json_decref(v);
    assert_int_equal(modelfile_parameter_value("use_mmap", "False", &v, &err), PARAMETER_OK);
    assert_true(json_is_false(v));
    json_decref(v);
    assert_int_equal(modelfile_parameter_value("stop", "###", &v, &err), PARAMETER_OK);
    assert_true(json_is_array(v) && json_array_size(v) == 1);
    json_decref(v);
    assert_int_equal(modelfile_parameter_value("mirostat", "1", &v, &err), PARAMETER_DEPRECATED);
    assert_int_equal(modelfile_parameter_value("num_ctx", "2k", &v, &err), PARAMETER_INVALID);
    assert_string_equal(err.message, "invalid int value '2k' for parameter num_ctx");
    assert_int_equal(modelfile_parameter_value("top_p", "high", &v, &err), PARAMETER_INVALID);
    assert_int_equal(modelfile_parameter_value("top_p", "nan", &v, &err), PARAMETER_INVALID);
    assert_int_equal(modelfile_parameter_value("use_mmap", "maybe", &v, &err), PARAMETER_INVALID);
    assert_int_equal(modelfile_parameter_value("tempature", "1", &v, &err), PARAMETER_INVALID);
    assert_string_equal(err.message, "unknown parameter 'tempature'");
}

static void test_request_collects_every_field(void **state)
{
    (void)state;
    modelfile *mf = parse_ok("FROM x\nPARAMETER stop a\nPARAMETER temperature 0\nPARAMETER stop b\n"
                             "PARAMETER low_vram true\nSYSTEM one\nSYSTEM two\nLICENSE L1\n"
                             "LICENSE L2\nMESSAGE user q\nMESSAGE assistant r\nREQUIRES v0.9\n");
    corral_error err = {{0}};
    json_t *request = modelfile_to_request(mf, NULL, &err);
    modelfile_free(mf);
    assert_non_null(request);
    char *text = json_dumps(request, JSON_SORT_KEYS | JSON_COMPACT);
    assert_string_equal(text,
                        "{\"license\":[\"L1\",\"L2\"],\"messages\":[{\"content\":\"q\",\"role\":"
                        "\"user\"},{\"content\":\"r\",\"role\":\"assistant\"}],\"parameters\":"
                        "{\"stop\":[\"a\",\"b\"],\"temperature\":0.0},\"requires\":\"0.9\","
                        "\"system\":\"two\"}");
    free(text);
    json_decref(request);
}

static void test_request_errors_name_the_line(void **state)
{
    (void)state;
    assert_request_error("FROM x\n\nPARAMETER num_predict lots\n",
                         "line 3: invalid int value 'lots' for parameter num_predict");
    assert_request_error("FROM x\nPARAMETER seed 1\nPARAMETER nope 1\n",
                         "line 3: unknown parameter 'nope'");
    assert_request_error("FROM x\nREQUIRES 1.x\n", "line 2: requires must be a valid semver");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_modelfile_parses_every_instruction),
        cmocka_unit_test(test_modelfile_names_are_case_insensitive_and_comments_skipped),
        cmocka_unit_test(test_modelfile_quoted_values_span_lines),
        cmocka_unit_test(test_modelfile_errors_name_the_line),
        cmocka_unit_test(test_modelfile_must_be_utf8),
        cmocka_unit_test(test_parameters_are_type_checked),
        cmocka_unit_test(test_request_collects_every_field),
        cmocka_unit_test(test_request_errors_name_the_line),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
