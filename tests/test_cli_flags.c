/*
 * Flag values as ollama's command line reads them (src/cli/flags.c): Go's boolean spellings
 * after "=", a bare flag on, anything else refused; --think's levels, empty meaning on.
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
        cmocka_unit_test(think_levels),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
