/*
 * The Modelfile `/api/show` writes (modelfile_generate) read back by the parser of
 * `corral create -f` (modelfile_parse): every text a model holds (TEMPLATE, SYSTEM, LICENSE,
 * MESSAGE contents, PARAMETER values) comes back byte for byte, quotes, blanks, backslashes
 * and newlines included.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cli/modelfile.h"
#include "server/models/modelfile_text.h"

static const char *const hostile[] = {
    "plain",
    "/set foo\n\"\"\"x",       /* """ after a newline, more text after it */
    "a\"\"\"b",                /* """ inside one line */
    "\"quoted\"",              /* starts with a quote: bare would drop it */
    "line\nends with a quote\"", /* a quote before the closing one */
    "a\"\nb",                  /* a quote ending a line */
    "a\"  \nb\"\"\"c",         /* and a """ that does not end one */
    "\"",
    "\"\"",
    "\"\"\"",
    "\"\"\"\"",
    "\"\"x",
    "\"\" leading quotes\nand a newline",
    "end\"\"\"",
    "end\"\"\" ",
    "C:\\path\\",
    "back\\slash\\n\n\\\"",
    "\n",
    "\n\n",
    "a\n",
    "\na",
    " edge spaces ",
    "\tedge tabs\t",
    "# not a comment\nFROM /etc/passwd\nSYSTEM injected",
    "h\xc3\xa9llo \xe2\x9c\x93",
};

static const modelfile_command *find(const modelfile *mf, modelfile_kind kind, size_t nth)
{
    for (size_t i = 0; i < mf->n_commands; i++)
        if (mf->commands[i].kind == kind && nth-- == 0)
            return &mf->commands[i];
    return NULL;
}

static void expect_read_back(const modelfile *mf, modelfile_kind kind, size_t nth, const char *want,
                         const char *written)
{
    const modelfile_command *cmd = find(mf, kind, nth);
    if (!cmd)
        fail_msg("command %d #%zu missing from:\n%s", (int)kind, nth, written);
    if (strcmp(cmd->value, want) != 0)
        fail_msg("read back \"%s\" for \"%s\" from:\n%s", cmd->value, want, written);
}

/* Each text as every kind of value, one model per text. */
static void test_hostile_texts_round_trip(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof hostile / sizeof hostile[0]; i++) {
        const char *text = hostile[i];
        model_ref ref = {.model_path = "/models/blobs/sha256-abc", .template_text = (char *)text,
                         .system = (char *)text, .license = (char *)text};
        ref.params = json_pack("{s:[s,s]}", "stop", text, "plain");
        ref.messages = json_pack("[{s:s,s:s},{s:s,s:s}]", "role", "user", "content", text,
                                 "role", "assistant", "content", "");
        char *written = modelfile_generate(&ref);
        assert_non_null(written);
        corral_error err = {{0}};
        modelfile *mf = modelfile_parse(written, strlen(written), &err);
        if (!mf)
            fail_msg("cannot read back (%s):\n%s", err.message, written);
        expect_read_back(mf, MODELFILE_TEMPLATE, 0, text, written);
        expect_read_back(mf, MODELFILE_SYSTEM, 0, text, written);
        expect_read_back(mf, MODELFILE_LICENSE, 0, text, written);
        expect_read_back(mf, MODELFILE_PARAMETER, 0, text, written);
        expect_read_back(mf, MODELFILE_PARAMETER, 1, "plain", written);
        expect_read_back(mf, MODELFILE_MESSAGE, 0, text, written);
        expect_read_back(mf, MODELFILE_MESSAGE, 1, "", written);
        assert_string_equal(find(mf, MODELFILE_MESSAGE, 1)->key, "assistant");
        modelfile_free(mf);
        free(written);
        json_decref(ref.params);
        json_decref(ref.messages);
    }
}

/* What ollama writes stays as ollama writes it where it reads back. */
static void test_ollama_quoting_kept(void **state)
{
    (void)state;
    model_ref ref = {.model_path = "/b", .template_text = "{{ .Prompt }}",
                     .system = "You are \"Mario\".\nBe brief.", .license = "MIT\n"};
    ref.messages = json_pack("[{s:s,s:s}]", "role", "user", "content", " hi");
    char *written = modelfile_generate(&ref);
    assert_non_null(strstr(written, "\nTEMPLATE {{ .Prompt }}\n"));
    assert_non_null(strstr(written, "\nSYSTEM \"\"\"You are \"Mario\".\nBe brief.\"\"\"\n"));
    assert_non_null(strstr(written, "\nLICENSE \"MIT\n\"\n"));
    assert_non_null(strstr(written, "\nMESSAGE user \" hi\"\n"));
    free(written);
    json_decref(ref.messages);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hostile_texts_round_trip),
        cmocka_unit_test(test_ollama_quoting_kept),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
