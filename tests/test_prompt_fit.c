/*
 * A chat's history fitted to the context with its images (server/core/prompt_fit.c): with a
 * counter that charges each image marker many tokens, as an image's embeddings cost, the
 * oldest messages go first with their images (the images image_input_extract hands the runner
 * are the kept messages' only), the system messages stay wherever they are, the last message
 * always stays, and one that cannot fit even alone is left for the caller to refuse.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/core/image_input.h"
#include "server/core/prompt_fit.h"
#include "util/base64.h"
#include "util/file.h"

#define IMAGE_TOKENS 50

static char *fixture_base64(const char *name)
{
    char path[2048];
    const char *dir = getenv("CORRAL_FIXTURES");
    snprintf(path, sizeof path, "%s/vision/%s", dir ? dir : "tests/fixtures", name);
    corral_error err;
    size_t len;
    char *data = util_read_file(path, 1 << 20, &len, &err);
    assert_non_null(data);
    char *text = util_base64_encode((const uint8_t *)data, len);
    free(data);
    return text;
}

/* The runner's count, made up: a byte of text a token, an image IMAGE_TOKENS. */
static bool count(void *state, const char *prompt, size_t *n_tokens, corral_error *err)
{
    (void)err;
    char *copy = strdup(prompt);
    json_t *images = image_input_extract(state, copy);
    assert_non_null(images);
    *n_tokens = strlen(copy) + IMAGE_TOKENS * json_array_size(images);
    json_decref(images);
    free(copy);
    return true;
}

typedef struct fitted {
    prompt_window window;
    char *prompt;       /* markers cut out */
    json_t *images;     /* what the runner would get */
    size_t n_tokens;
} fitted;

/* req rendered with the "role: content" template and fitted to limit. */
static fitted fit(const chat_request *req, size_t limit)
{
    model_ref ref = {.template_text = "{{ range .Messages }}{{ .Role }}: {{ .Content }}\n{{ end }}"};
    char message[256];
    image_input in;
    assert_true(image_input_prepare(&in, req, true, message, sizeof message));
    json_t *input = chat_request_template_input(req);
    assert_true(input && image_input_mark(&in, req, input, false));
    fitted out;
    memset(&out, 0, sizeof out);
    corral_output_tags tags;
    corral_error err;
    out.prompt = prompt_build(&ref, input, true, &out.window, &tags, &err);
    assert_non_null(out.prompt);
    assert_true(prompt_fit(&ref, input, &out.window, limit, count, &in, &out.prompt, &err));
    assert_true(count(&in, out.prompt, &out.n_tokens, &err));
    out.images = image_input_extract(&in, out.prompt);
    assert_non_null(out.images);
    json_decref(input);
    image_input_clear(&in);
    return out;
}

static void fitted_free(fitted *f)
{
    free(f->prompt);
    json_decref(f->images);
}

static void add(chat_request *req, const char *role, const char *content, const char *image)
{
    assert_true(chat_request_add_text(req, role, content, strlen(content)));
    if (image)
        assert_true(chat_message_add_image(&req->messages[req->n_messages - 1], image,
                                           strlen(image)));
}

static const char *image_data(const json_t *images, size_t i)
{
    return json_string_value(json_object_get(json_array_get(images, i), "data"));
}

static void test_images_go_with_their_messages(void **state)
{
    (void)state;
    char *square = fixture_base64("square.png"), *wide = fixture_base64("wide.png");
    chat_request *req = chat_request_create(true);
    add(req, "system", "S", NULL);
    add(req, "user", "one", wide);
    add(req, "assistant", "two", NULL);
    add(req, "system", "mid", NULL);
    add(req, "user", "three", square);
    add(req, "assistant", "four", NULL);
    add(req, "user", "five", NULL);
    /* text 86 bytes, and 2 images: 186 tokens */
    fitted f = fit(req, 1000);
    assert_int_equal(f.window.n_dropped, 0);
    assert_int_equal(f.n_tokens, 186);
    assert_int_equal(json_array_size(f.images), 2);
    fitted_free(&f);

    /* the text alone (86) would fit 120; its images do not: "one" goes with its wide image,
     * and "two"; both system messages stay (joined, as ollama's templates join a role's run) */
    f = fit(req, 120);
    assert_int_equal(f.window.first, 3);
    assert_int_equal(f.window.n_dropped, 2);
    assert_int_equal(f.n_tokens, 104);
    assert_string_equal(f.prompt, "system: S\n\nmid\nuser: three\nassistant: four\nuser: five\n");
    assert_int_equal(json_array_size(f.images), 1);
    assert_string_equal(image_data(f.images, 0), square);
    fitted_free(&f);

    /* only the last message fits (with the systems), and no image goes */
    f = fit(req, 40);
    assert_int_equal(f.window.first, 6);
    assert_int_equal(f.n_tokens, 26);
    assert_int_equal(json_array_size(f.images), 0);
    fitted_free(&f);

    /* a last message whose image cannot fit: it stays, over the limit, for the caller */
    add(req, "user", "six", wide);
    f = fit(req, 40);
    assert_int_equal(f.window.first, req->n_messages - 1);
    assert_int_equal(f.n_tokens, 15 + 10 + IMAGE_TOKENS);
    assert_int_equal(json_array_size(f.images), 1);
    assert_string_equal(image_data(f.images, 0), wide);
    fitted_free(&f);
    chat_request_free(req);
    free(square);
    free(wide);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_images_go_with_their_messages),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
