/*
 * Short runs in the sanitizer build. tests/CMakeLists.txt sets CORRAL_TEST_SHORT=1 for every
 * test of a CORRAL_SANITIZE build. There, a test whose cost is a long sweep of values (many
 * model files, thousands of positions, a whole vocabulary at every step) runs a sample that
 * still takes each of its code paths: the sanitizers look at the memory a path touches, which
 * the sample shows as well as the whole sweep. The release build runs every sweep whole, and
 * every check keeps its tolerance in both.
 */
#ifndef CORRAL_TESTS_SHORT_FIXTURE_H
#define CORRAL_TESTS_SHORT_FIXTURE_H

#include <stdbool.h>
#include <stdlib.h>

static inline bool short_fixture_on(void)
{
    const char *v = getenv("CORRAL_TEST_SHORT");
    return v && v[0] == '1';
}

#endif
