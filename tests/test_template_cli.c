/*
 * `corral template render`: prints exactly the rendered prompt (no newline added) for a
 * .gotmpl file, a Jinja file and a GGUF's own chat template (--from), and a template error
 * goes to stderr with status 1 and the template's own message.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

static char dir[] = "/tmp/corral-template-cli.XXXXXX";

static void write_file(const char *name, const char *text)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static char *read_back(const char *name)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    static char buf[65536];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

/* Run `corral template render [--from] FILE < request.json`; returns the exit status. */
static int run_with(const char *option, const char *template_path)
{
    const char *bin = getenv("CORRAL_BIN");
    if (!bin)
        skip();
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "'%s' template render %s '%s' < %s/request.json > %s/out 2> %s/err",
             bin, option, template_path, dir, dir, dir);
    int status = system(cmd);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static int run(const char *template_path)
{
    return run_with("", template_path);
}

static void test_gotmpl_render_prints_exactly_the_prompt(void **state)
{
    (void)state;
    const char *fixtures = getenv("CORRAL_FIXTURES");
    char path[1024];
    snprintf(path, sizeof path, "%s/templates/chatml.gotmpl",
             fixtures ? fixtures : "tests/fixtures");
    write_file("request.json",
               "{\"messages\":[{\"role\":\"user\",\"content\":\"Hello, how are you?\"}]}");
    assert_int_equal(run(path), 0);
    snprintf(path, sizeof path, "%s/templates/testdata/chatml.gotmpl/user",
             fixtures ? fixtures : "tests/fixtures");
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    char want[4096];
    size_t n = fread(want, 1, sizeof want - 1, f);
    want[n] = '\0';
    fclose(f);
    assert_string_equal(read_back("out"), want);
}

static void test_jinja_render_uses_request_variables(void **state)
{
    (void)state;
    write_file("t.jinja", "{{ bos_token }}{% for m in messages %}[{{ m.role }}]{{ m.content }}"
                          "{% endfor %}{% if add_generation_prompt %}[assistant]{% endif %}\n");
    write_file("request.json", "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],"
                               "\"bos_token\":\"<s>\",\"add_generation_prompt\":true}");
    char path[256];
    snprintf(path, sizeof path, "%s/t.jinja", dir);
    assert_int_equal(run(path), 0);
    assert_string_equal(read_back("out"), "<s>[user]hi[assistant]");
}

static void test_from_gguf_renders_the_models_own_chat_template(void **state)
{
    (void)state;
    const char *fixtures = getenv("CORRAL_FIXTURES");
    char path[1024];
    snprintf(path, sizeof path, "%s/vocab-llama3-bpe.gguf", fixtures ? fixtures : "tests/fixtures");
    write_file("request.json",
               "{\"messages\":[{\"role\":\"user\",\"content\":\"Hello\"}],"
               "\"add_generation_prompt\":true,\"bos_token\":\"<|begin_of_text|>\"}");
    assert_int_equal(run_with("--from", path), 0);
    /* the first case of chat-template-llama3-cases.jsonl */
    assert_string_equal(
        read_back("out"),
        "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

static void test_template_error_goes_to_stderr_with_status_1(void **state)
{
    (void)state;
    write_file("bad.jinja", "{{ raise_exception('System role not supported') }}");
    write_file("request.json", "{\"messages\":[]}");
    char path[256];
    snprintf(path, sizeof path, "%s/bad.jinja", dir);
    assert_int_equal(run(path), 1);
    assert_string_equal(read_back("out"), "");
    assert_non_null(strstr(read_back("err"), "System role not supported"));
}

static int setup(void **state)
{
    (void)state;
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gotmpl_render_prints_exactly_the_prompt),
        cmocka_unit_test(test_jinja_render_uses_request_variables),
        cmocka_unit_test(test_from_gguf_renders_the_models_own_chat_template),
        cmocka_unit_test(test_template_error_goes_to_stderr_with_status_1),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
