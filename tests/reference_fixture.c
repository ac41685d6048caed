/* Reading the reference fixtures and comparing logits with them (reference_fixture.h). */
#include "reference_fixture.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "file_fixture.h"

const char *fixture(const char *name)
{
    static char path[4][2048];
    static int next;
    const char *dir = getenv("CORRAL_FIXTURES");
    char *p = path[next++ % 4];
    snprintf(p, sizeof path[0], "%s/%s", dir ? dir : "tests/fixtures", name);
    return p;
}

char *read_file(const char *path)
{
    return file_fixture_read(path, NULL);
}

void read_matrix(const char *text, const char *key, float *out, size_t rows, size_t cols)
{
    char header[64];
    snprintf(header, sizeof header, "\n%s %zu %zu\n", key, rows, cols);
    const char *p = strstr(text, header);
    if (!p)
        fail_msg("matrix %s %zu x %zu not found", key, rows, cols);
    p += strlen(header);
    for (size_t i = 0; i < rows * cols; i++) {
        char *end;
        out[i] = strtof(p, &end);
        assert_true(end != p);
        p = end;
    }
}

float max_abs_diff(const float *a, const float *b, size_t n)
{
    float m = 0.0f;
    for (size_t i = 0; i < n; i++) {
        float d = fabsf(a[i] - b[i]);
        if (isnan(d)) /* a NaN on either side must fail any bound, not pass under it */
            return INFINITY;
        m = d > m ? d : m;
    }
    return m;
}

corral_token argmax(const float *logits, size_t n)
{
    size_t best = 0;
    for (size_t i = 1; i < n; i++)
        if (logits[i] > logits[best])
            best = i;
    return (corral_token)best;
}
