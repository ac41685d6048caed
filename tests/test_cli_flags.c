/*
 * Flag values as ollama's command line reads them (src/cli/flags.c): Go's boolean spellings
 * after "=", a bare flag on, anything else refused; a value after a space, after "=", or right
 * after a one-letter flag; --think's levels, empty meaning on.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "cli/flags.h"

static void go_boolean_spellings(void **state)
{
    (void)state;
    static const char *const yes[] = {"1", "t", "T", "TRUE", "true", "True"};
    static const char *const no[] = {"0", "f", "F", "FALSE", "false", "False"};
    for (size_t i = 0; i < 6; i++) {
        bool value = false;
        assert_true(flag_parse_bool(yes[i], &value));
        assert_true(value);
        assert_true(flag_parse_bool(no[i], &value));
        assert_false(value);
    }
    static const char *const refused[] = {"", "yes", "no", "on", "tRUE", "2", "true "};
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        bool value = true;
        assert_false(flag_parse_bool(refused[i], &value));
        assert_true(value); /* untouched */
    }
}

static void boolean_flag_forms(void **state)
{
    (void)state;
    bool value = false;
    assert_int_equal(flag_bool("--verbose", "--verbose", &value), FLAG_SET);
    assert_true(value);
    assert_int_equal(flag_bool("--verbose=false", "--verbose", &value), FLAG_SET);
    assert_false(value);
    assert_int_equal(flag_bool("--verbose=1", "--verbose", &value), FLAG_SET);
    assert_true(value);
    assert_int_equal(flag_bool("--verbose=maybe", "--verbose", &value), FLAG_BAD_VALUE);
    assert_int_equal(flag_bool("--verbose=", "--verbose", &value), FLAG_BAD_VALUE);
    /* a longer flag or another flag is not this one */
    assert_int_equal(flag_bool("--verbosely", "--verbose", &value), FLAG_OTHER);
    assert_int_equal(flag_bool("--verb", "--verbose", &value), FLAG_OTHER);
    assert_int_equal(flag_bool("verbose", "--verbose", &value), FLAG_OTHER);
}

static void value_flag_forms(void **state)
{
    (void)state;
    char *argv[] = {"create", "--file", "-1", "--file=a=b", "-f", "x", "-f=y", "-fz", "--file=",
                    "-q", "--filex", "--file"};
    int argc = sizeof argv / sizeof argv[0], i = 1;
    const char *value = NULL;
    /* the next word even with a dash in front */
    assert_int_equal(flag_value(argc, argv, &i, "--file", 'f', &value), FLAG_SET);
    assert_string_equal(value, "-1");
    assert_int_equal(i, 2);
    i = 3; /* after '=', up to the word's end */
    assert_int_equal(flag_value(argc, argv, &i, "--file", 'f', &value), FLAG_SET);
    assert_string_equal(value, "a=b");
    assert_int_equal(i, 3);
    i = 4;
    assert_int_equal(flag_value(argc, argv, &i, "--file", 'f', &value), FLAG_SET);
    assert_string_equal(value, "x");
    assert_int_equal(i, 5);
    i = 6;
    assert_int_equal(flag_value(argc, argv, &i, "--file", 'f', &value), FLAG_SET);
    assert_string_equal(value, "y");
    i = 7;
    assert_int_equal(flag_value(argc, argv, &i, "--file", 'f', &value), FLAG_SET);
    assert_string_equal(value, "z");
    i = 8;
    assert_int_equal(flag_value(argc, argv, &i, "--file", 'f', &value), FLAG_SET);
    assert_string_equal(value, "");
    i = 9; /* another short flag, a longer name, a flag without a short form */
    assert_int_equal(flag_value(argc, argv, &i, "--file", 'f', &value), FLAG_OTHER);
    i = 10;
    assert_int_equal(flag_value(argc, argv, &i, "--file", 'f', &value), FLAG_OTHER);
    i = 4;
    assert_int_equal(flag_value(argc, argv, &i, "--format", 0, &value), FLAG_OTHER);
    i = 11; /* the last word: no value follows */
    assert_int_equal(flag_value(argc, argv, &i, "--file", 'f', &value), FLAG_BAD_VALUE);
    assert_int_equal(i, 11);
}

static void think_levels(void **state)
{
    (void)state;
    assert_string_equal(flag_think_level(""), "true");
    static const char *const levels[] = {"true", "false", "low", "medium", "high", "max"};
    for (size_t i = 0; i < sizeof levels / sizeof levels[0]; i++)
        assert_string_equal(flag_think_level(levels[i]), levels[i]);
    assert_null(flag_think_level("1"));
    assert_null(flag_think_level("HIGH"));
    assert_null(flag_think_level("extreme"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(go_boolean_spellings),
        cmocka_unit_test(boolean_flag_forms),
        cmocka_unit_test(value_flag_forms),
        cmocka_unit_test(think_levels),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
