/*
 * The table of ollama's generation options and the type check shared by every endpoint that takes
 * `options`. The messages are ollama's (api.Options.FromMap) so clients see the same text.
 */
#include "options/options.h"

#include <float.h>
#include <stdbool.h>
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

/* Most tokens a context (and so a batch, a kept prefix, a penalty window) can hold: the
 * runner refuses more. */
#define MAX_TOKENS (1ll << 24)
#define MAX_BATCH (1ll << 16) /* the engine's largest batch */
/* num_thread's max: the online CPUs, read when an option is checked. */
#define MAX_IS_CORES (-1ll)

static const option_info option_table[] = {
    {"num_ctx", OPTION_INT, BOUND_REJECT, 0, MAX_TOKENS}, /* 0: the server's default */
    {"num_batch", OPTION_INT, BOUND_REJECT, 0, MAX_BATCH},
    {"num_gpu", OPTION_INT, BOUND_NONE, 0, 0},  /* layers on a GPU (docs/GPU.md) */
    {"main_gpu", OPTION_INT, BOUND_NONE, 0, 0},
    {"use_mmap", OPTION_BOOL, BOUND_NONE, 0, 0},
    {"num_thread", OPTION_INT, BOUND_SATURATE, 0, MAX_IS_CORES}, /* 0: one per core */
    {"draft_num_predict", OPTION_INT, BOUND_NONE, 0, 0},
    {"num_keep", OPTION_INT, BOUND_SATURATE, -1, MAX_TOKENS},
    {"seed", OPTION_INT, BOUND_NONE, 0, 0},
    {"num_predict", OPTION_INT, BOUND_NONE, 0, 0}, /* < 0: no limit */
    {"top_k", OPTION_INT, BOUND_SATURATE, 0, INT32_MAX}, /* 0: every token */
    {"top_p", OPTION_FLOAT, BOUND_NONE, 0, 0},
    {"min_p", OPTION_FLOAT, BOUND_NONE, 0, 0},
    {"typical_p", OPTION_FLOAT, BOUND_NONE, 0, 0},
    {"repeat_last_n", OPTION_INT, BOUND_SATURATE, -1, MAX_TOKENS}, /* -1: the context */
    {"temperature", OPTION_FLOAT, BOUND_NONE, 0, 0},
    {"repeat_penalty", OPTION_FLOAT, BOUND_NONE, 0, 0},
    {"presence_penalty", OPTION_FLOAT, BOUND_NONE, 0, 0},
    {"frequency_penalty", OPTION_FLOAT, BOUND_NONE, 0, 0},
    {"stop", OPTION_STRING_ARRAY, BOUND_NONE, 0, 0},
};

#define N_OPTIONS (sizeof option_table / sizeof option_table[0])

const option_info *options_find(const char *name)
{
    for (size_t i = 0; i < N_OPTIONS; i++)
        if (strcmp(option_table[i].name, name) == 0)
            return &option_table[i];
    return NULL;
}

const option_info *options_all(size_t *n_options)
{
    *n_options = N_OPTIONS;
    return option_table;
}

const char *option_type_name(option_type type)
{
    switch (type) {
    case OPTION_INT: return "integer";
    case OPTION_FLOAT: return "float32";
    case OPTION_BOOL: return "boolean";
    case OPTION_STRING_ARRAY: return "array";
    }
    return "unknown";
}

static long long online_cpus(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? n : 1;
}

/* v within opt's range: the same, saturated, or false with err. */
static bool bound_int(const option_info *opt, json_int_t *v, corral_error *err)
{
    if (opt->bound == BOUND_NONE)
        return true;
    long long max = opt->max == MAX_IS_CORES ? online_cpus() : opt->max;
    if (*v >= opt->min && *v <= max)
        return true;
    if (opt->bound == BOUND_SATURATE) {
        *v = *v < opt->min ? opt->min : max;
        return true;
    }
    corral_error_set(err, "option \"%s\" must be between %lld and %lld", opt->name, opt->min,
                     max);
    return false;
}

/* Go's int64(f) truncates; outside int64 it is undefined in C, so such values are refused. */
static json_t *normalize_int(const option_info *opt, const json_t *value, corral_error *err)
{
    json_int_t v;
    if (json_is_integer(value)) {
        v = json_integer_value(value);
    } else if (json_is_real(value)) {
        double truncated = trunc(json_real_value(value));
        if (!(truncated >= -9223372036854775808.0 && truncated < 9223372036854775808.0)) {
            corral_error_set(err, "option \"%s\" is out of range for an integer", opt->name);
            return NULL;
        }
        v = (json_int_t)truncated;
    } else {
        corral_error_set(err, "option \"%s\" must be of type integer", opt->name);
        return NULL;
    }
    return bound_int(opt, &v, err) ? json_integer(v) : NULL;
}

/* Go decodes a float32 option and refuses a number beyond float32's range, as this does. */
static json_t *normalize_float(const option_info *opt, const json_t *value, corral_error *err)
{
    if (!json_is_number(value)) {
        corral_error_set(err, "option \"%s\" must be of type float32", opt->name);
        return NULL;
    }
    double v = json_number_value(value);
    if (!(fabs(v) <= FLT_MAX)) {
        corral_error_set(err, "option \"%s\" is out of range for float32", opt->name);
        return NULL;
    }
    return json_real(v);
}

static json_t *normalize_string_array(const option_info *opt, const json_t *value,
                                      corral_error *err)
{
    if (!json_is_array(value)) {
        corral_error_set(err, "option \"%s\" must be of type array", opt->name);
        return NULL;
    }
    size_t i;
    const json_t *item;
    json_array_foreach(value, i, item) {
        if (!json_is_string(item)) {
            corral_error_set(err, "option \"%s\" must be of an array of strings", opt->name);
            return NULL;
        }
    }
    return json_deep_copy(value);
}

static json_t *normalize_value(const option_info *opt, const json_t *value, corral_error *err)
{
    switch (opt->type) {
    case OPTION_INT:
        return normalize_int(opt, value, err);
    case OPTION_FLOAT:
        return normalize_float(opt, value, err);
    case OPTION_BOOL:
        if (json_is_boolean(value))
            return json_boolean(json_is_true(value));
        break;
    case OPTION_STRING_ARRAY:
        return normalize_string_array(opt, value, err);
    }
    corral_error_set(err, "option \"%s\" must be of type %s", opt->name,
                     option_type_name(opt->type));
    return NULL;
}

json_t *options_normalize(const json_t *options, corral_error *err)
{
    json_t *out = json_object();
    if (!out) {
        corral_error_set(err, "out of memory");
        return NULL;
    }
    if (!options || json_is_null(options))
        return out;
    if (!json_is_object(options)) {
        corral_error_set(err, "options must be a JSON object");
        json_decref(out);
        return NULL;
    }
    const char *key;
    const json_t *value;
    json_object_foreach((json_t *)options, key, value) {
        const option_info *opt = options_find(key);
        if (!opt || json_is_null(value))
            continue; /* ollama ignores unknown keys (old clients send removed ones) */
        json_t *normalized = normalize_value(opt, value, err);
        if (!normalized) {
            json_decref(out);
            return NULL;
        }
        if (json_object_set_new(out, key, normalized) != 0) {
            corral_error_set(err, "out of memory");
            json_decref(out);
            return NULL;
        }
    }
    return out;
}
