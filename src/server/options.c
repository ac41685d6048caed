/*
 * The table of ollama's generation options and the type check shared by every endpoint that takes
 * `options`. The messages are ollama's (api.Options.FromMap) so clients see the same text.
 */
#include "options.h"

#include <math.h>
#include <string.h>

static const option_info option_table[] = {
    {"num_ctx", OPTION_INT},
    {"num_batch", OPTION_INT},
    {"num_gpu", OPTION_INT},
    {"main_gpu", OPTION_INT},
    {"use_mmap", OPTION_BOOL},
    {"num_thread", OPTION_INT},
    {"draft_num_predict", OPTION_INT},
    {"num_keep", OPTION_INT},
    {"seed", OPTION_INT},
    {"num_predict", OPTION_INT},
    {"top_k", OPTION_INT},
    {"top_p", OPTION_FLOAT},
    {"min_p", OPTION_FLOAT},
    {"typical_p", OPTION_FLOAT},
    {"repeat_last_n", OPTION_INT},
    {"temperature", OPTION_FLOAT},
    {"repeat_penalty", OPTION_FLOAT},
    {"presence_penalty", OPTION_FLOAT},
    {"frequency_penalty", OPTION_FLOAT},
    {"stop", OPTION_STRING_ARRAY},
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

/* Go's int64(f) truncates; outside int64 it is undefined in C, so such values are refused. */
static json_t *normalize_int(const option_info *opt, const json_t *value, corral_error *err)
{
    if (json_is_integer(value))
        return json_integer(json_integer_value(value));
    if (json_is_real(value)) {
        double truncated = trunc(json_real_value(value));
        if (truncated >= -9223372036854775808.0 && truncated < 9223372036854775808.0)
            return json_integer((json_int_t)truncated);
        corral_error_set(err, "option \"%s\" is out of range for an integer", opt->name);
        return NULL;
    }
    corral_error_set(err, "option \"%s\" must be of type integer", opt->name);
    return NULL;
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
        if (json_is_number(value))
            return json_real(json_number_value(value));
        break;
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
