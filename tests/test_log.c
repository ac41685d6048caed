/*
 * The server's log (src/util/log.c), its lines read back from stderr redirected to a file:
 * JSON lines escape quotes, control characters and bytes that are not UTF-8 (U+FFFD), text
 * lines quote values that need it, debug lines appear only with debug on, and the format and
 * level names parse.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log_capture.h"
#include "util/log.h"

/* The line's text after its time field. */
static const char *after_time(const char *line, bool json)
{
    const char *p = strstr(line, json ? "Z\"," : "Z ");
    assert_non_null(p);
    return p + (json ? 3 : 2);
}

static int remove_log(void **state)
{
    (void)state;
    log_capture_remove();
    return 0;
}

static void test_log_json_escapes_everything_outside_plain_text(void **state)
{
    (void)state;
    log_configure(LOG_FORMAT_JSON, false);
    log_capture_begin();
    log_write(LOG_INFO, "request",
              (log_field[]){LOG_STR("path", "/a\"b\\c\n\x01\xff\xc3\xa9"), LOG_INT("status", 404),
                            LOG_NUM("duration_ms", 1.5)},
              3);
    char *line = log_capture_end();
    assert_string_equal(after_time(line, true),
                        "\"level\":\"INFO\",\"msg\":\"request\",\"path\":\"/a\\\"b\\\\c\\n\\u0001"
                        "\\ufffd\xc3\xa9\",\"status\":404,\"duration_ms\":1.5}\n");
    assert_memory_equal(line, "{\"time\":\"", 9);
}

static void test_log_text_quotes_values_that_need_it(void **state)
{
    (void)state;
    log_configure(LOG_FORMAT_TEXT, false);
    log_capture_begin();
    log_write(LOG_WARN, "runner exited",
              (log_field[]){LOG_STR("model", "stories:latest"), LOG_STR("note", "a=b \"c\"\xff"),
                            LOG_STR("empty", "")},
              3);
    char *line = log_capture_end();
    assert_string_equal(after_time(line, false),
                        "level=WARN msg=\"runner exited\" model=stories:latest "
                        "note=\"a=b \\\"c\\\"\\xff\" empty=\"\"\n");
    assert_memory_equal(line, "time=", 5);
}

static void test_log_debug_lines_only_with_debug(void **state)
{
    (void)state;
    log_configure(LOG_FORMAT_TEXT, false);
    log_capture_begin();
    log_write(LOG_DEBUG, "prompt", (log_field[]){LOG_STR("prompt", "secret")}, 1);
    log_printf(LOG_DEBUG, "also %s", "hidden");
    assert_string_equal(log_capture_end(), "");
    assert_false(log_debug_enabled());
    log_configure(LOG_FORMAT_TEXT, true);
    log_capture_begin();
    log_printf(LOG_DEBUG, "shown %d", 1);
    assert_string_equal(after_time(log_capture_end(), false), "level=DEBUG msg=\"shown 1\"\n");
    log_configure(LOG_FORMAT_TEXT, false);
}

static void test_log_format_and_level_names(void **state)
{
    (void)state;
    log_format f = LOG_FORMAT_TEXT;
    assert_true(log_parse_format("JSON", &f));
    assert_int_equal(f, LOG_FORMAT_JSON);
    assert_true(log_parse_format("text", &f));
    assert_int_equal(f, LOG_FORMAT_TEXT);
    assert_false(log_parse_format("xml", &f));
    assert_false(log_parse_format("", &f));
    log_level level = LOG_INFO;
    assert_true(log_parse_level("ERROR", &level));
    assert_int_equal(level, LOG_ERROR);
    assert_true(log_parse_level("DEBUG", &level));
    assert_int_equal(level, LOG_DEBUG);
    assert_false(log_parse_level("warn", &level)); /* as the lines write it: upper case */
    assert_false(log_parse_level("", &level));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_log_json_escapes_everything_outside_plain_text),
        cmocka_unit_test(test_log_text_quotes_values_that_need_it),
        cmocka_unit_test(test_log_debug_lines_only_with_debug),
        cmocka_unit_test(test_log_format_and_level_names),
    };
    return cmocka_run_group_tests(tests, NULL, remove_log);
}
