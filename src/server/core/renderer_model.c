/* Which built-in renderer lays out a model's prompts: see renderer_model.h. */
#include "server/core/renderer_model.h"

#include <pthread.h>
#include <string.h>

#include "util/log.h"

/* Unknown renderer names already warned about: a model's every request would repeat it. Past
 * the table's size, further names go unwarned rather than grow it. */
#define RENDERER_MODEL_MAX_WARNED 32
#define RENDERER_MODEL_MAX_NAME 64

static pthread_mutex_t warned_lock = PTHREAD_MUTEX_INITIALIZER;
static char warned[RENDERER_MODEL_MAX_WARNED][RENDERER_MODEL_MAX_NAME];
static size_t n_warned;

static void warn_unknown(const char *name)
{
    bool first = false;
    pthread_mutex_lock(&warned_lock);
    size_t i = 0;
    while (i < n_warned && strncmp(warned[i], name, RENDERER_MODEL_MAX_NAME - 1) != 0)
        i++;
    if (i == n_warned && n_warned < RENDERER_MODEL_MAX_WARNED) {
        strncpy(warned[n_warned], name, RENDERER_MODEL_MAX_NAME - 1);
        n_warned++;
        first = true;
    }
    pthread_mutex_unlock(&warned_lock);
    if (first) {
        const log_field field = LOG_STR("renderer", name);
        log_write(LOG_WARN,
                  "the model names a renderer Corral does not have: its chat template lays out "
                  "the prompt instead",
                  &field, 1);
    }
}

const corral_renderer *renderer_model_find(const json_t *config, const char *template_text)
{
    const char *name = json_string_value(json_object_get(config, "renderer"));
    if (name && *name && strcmp(name, "harmony") != 0) {
        const corral_renderer *r = corral_renderer_find(name);
        if (r)
            return r;
        warn_unknown(name);
    }
    const char *family = json_string_value(json_object_get(config, "model_family"));
    if (family && strcmp(family, "laguna") == 0 && !template_text)
        return corral_renderer_find("laguna");
    return NULL;
}
