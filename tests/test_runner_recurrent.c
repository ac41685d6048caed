/*
 * `corral runner` on a model with a recurrent state per sequence (arch/qwen35.gguf), one
 * slot, so that every request reuses what the one before left there: a prompt that shares
 * only part of the cached sequence goes back to the state kept near the end of the last
 * prompt (corral_seq_checkpoint) and answers as on a fresh load; one that continues all of
 * it goes on from the state; speculative decoding (prompt
 * lookup and a draft model), asked for, stays off; a full context ends the answer with
 * "length" instead of a shift; and such a model is refused as a draft model.
 */
#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "corral/engine.h"
#include "runner/draft_model.h"
#include "runner_fixture.h"

static char socket_path[108];
static pid_t runner_pid;

typedef struct answer {
    char text[16384];
    size_t len;
    json_t *last;
} answer;

static void request(const char *line, answer *a)
{
    memset(a, 0, sizeof *a);
    int fd = runner_fixture_connect(socket_path);
    assert_true(fd >= 0);
    size_t n = strlen(line);
    assert_int_equal(send(fd, line, n, MSG_NOSIGNAL), (ssize_t)n);
    assert_int_equal(send(fd, "\n", 1, MSG_NOSIGNAL), 1);
    static char buf[1 << 20];
    size_t got = 0;
    for (ssize_t r; (r = recv(fd, buf + got, sizeof buf - got - 1, 0)) > 0;)
        got += (size_t)r;
    close(fd);
    buf[got] = '\0';
    for (char *p = buf, *nl; (nl = strchr(p, '\n')); p = nl + 1) {
        *nl = '\0';
        json_error_t jerr;
        json_t *msg = json_loads(p, 0, &jerr);
        assert_non_null(msg);
        json_t *content = json_object_get(msg, "content");
        if (json_is_string(content)) {
            size_t k = json_string_length(content);
            assert_true(a->len + k < sizeof a->text);
            memcpy(a->text + a->len, json_string_value(content), k);
            a->len += k;
        }
        json_decref(a->last);
        a->last = msg;
    }
    assert_non_null(a->last);
    a->text[a->len] = '\0';
}

static json_int_t field(const answer *a, const char *key)
{
    return json_integer_value(json_object_get(a->last, key));
}

/* A greedy completion of prompt, n tokens. */
static void complete(const char *prompt, int n, answer *a)
{
    char line[512];
    snprintf(line, sizeof line,
             "{\"op\":\"completion\",\"prompt\":\"%s\",\"options\":{\"temperature\":0,"
             "\"num_predict\":%d}}",
             prompt, n);
    request(line, a);
}

/* --draft 8 and --draft-model ask for speculative decoding, which must stay off. */
static void start(void)
{
    static int n_started;
    const char *bin = getenv("CORRAL_BIN"), *fixtures = getenv("CORRAL_FIXTURES");
    assert_non_null(bin);
    assert_non_null(fixtures);
    snprintf(socket_path, sizeof socket_path, "/tmp/corral-test-recurrent-%d-%d.sock",
             (int)getpid(), n_started++);
    char model[2048], draft[2048];
    snprintf(model, sizeof model, "%s/arch/qwen35.gguf", fixtures);
    snprintf(draft, sizeof draft, "%s/arch/qwen3.gguf", fixtures); /* the same vocabulary */
    const char *const argv[] = {bin,         "runner",  "--model",  model,         "--socket",
                                socket_path, "--ctx",   "64",       "--parallel",  "1",
                                "--batch",   "32",      "--threads", "2",          "--draft",
                                "8",         "--draft-model", draft, NULL};
    assert_true(runner_fixture_start(argv, socket_path, &runner_pid));
}

static void stop(void)
{
    assert_int_equal(runner_fixture_stop(runner_pid), 0);
}

#define FIRST "The dog and the fox were in"
#define SECOND "The dog and the fox were out"

/* The tokens two answers' "tokens" (prompt and answer) share at their start. */
static json_int_t shared_tokens(const answer *a, const answer *b)
{
    json_t *x = json_object_get(a->last, "tokens"), *y = json_object_get(b->last, "tokens");
    size_t n = 0;
    while (n < json_array_size(x) && n < json_array_size(y) &&
           json_integer_value(json_array_get(x, n)) == json_integer_value(json_array_get(y, n)))
        n++;
    return (json_int_t)n;
}

/* The second prompt shares the first's beginning but not what the slot holds after it: it
 * goes back to the state kept 4 tokens before the first prompt's end (or to nothing, when
 * the prompts part before that), reads the rest, and answers as on a fresh load; so does the
 * first one after it. */
static void test_runner_recurrent_shared_prefix_answers_as_a_fresh_load(void **state)
{
    (void)state;
    answer first, second, again, fresh;
    start();
    complete(FIRST, 12, &first);
    complete(SECOND, 12, &second);
    complete(FIRST, 12, &again);
    stop();
    start();
    complete(SECOND, 12, &fresh);
    stop();
    assert_true(first.len > 0 && second.len > 0);
    assert_string_equal(again.text, first.text);
    assert_string_equal(second.text, fresh.text);
    /* what each kept: its predecessor's checkpoint, when the two prompts share it */
    json_int_t n_first = field(&first, "prompt_eval_count"), n_second = field(&fresh, "prompt_eval_count");
    json_int_t shared = shared_tokens(&first, &second);
    json_int_t kept_second = n_first - 4 <= shared ? n_first - 4 : 0;
    json_int_t kept_again = n_second - 4 <= shared ? n_second - 4 : 0;
    assert_true(kept_second > 0 && kept_again > 0); /* the prompts were chosen so */
    assert_int_equal(field(&second, "prompt_eval_count"), n_second - kept_second);
    assert_int_equal(field(&again, "prompt_eval_count"), n_first - kept_again);
    /* no draft was made */
    assert_null(json_object_get(first.last, "draft_tokens"));
    assert_null(json_object_get(again.last, "draft_tokens"));
    answer *all[] = {&first, &second, &again, &fresh};
    for (size_t i = 0; i < 4; i++)
        json_decref(all[i]->last);
}

/* A request whose context continues the whole cached sequence goes on from the state: the
 * two halves are the whole answer, and the second reads only its new tokens. */
static void test_runner_recurrent_continuation_goes_on_from_the_state(void **state)
{
    (void)state;
    answer half, rest, whole;
    start();
    complete(FIRST, 6, &half);
    char *tokens = json_dumps(json_object_get(half.last, "tokens"), JSON_COMPACT);
    char line[4096];
    snprintf(line, sizeof line,
             "{\"op\":\"completion\",\"prompt\":\"\",\"context\":%s,\"options\":{\"temperature\":0,"
             "\"num_predict\":6}}",
             tokens);
    free(tokens);
    request(line, &rest);
    complete(FIRST, 12, &whole);
    stop();
    assert_int_equal(half.len + rest.len, whole.len);
    assert_memory_equal(half.text, whole.text, half.len);
    assert_memory_equal(rest.text, whole.text + half.len, rest.len);
    assert_int_equal(field(&rest, "prompt_eval_count"), 1); /* the token sampled last */
    json_decref(half.last);
    json_decref(rest.last);
    json_decref(whole.last);
}

/* At a full context the answer ends ("length") rather than shifting the sequence. */
static void test_runner_recurrent_full_context_ends_the_answer(void **state)
{
    (void)state;
    answer a;
    start();
    request("{\"op\":\"completion\",\"prompt\":\"" FIRST "\",\"options\":{\"temperature\":0,"
            "\"num_predict\":200}}",
            &a);
    stop();
    const char *reason = json_string_value(json_object_get(a.last, "done_reason"));
    assert_non_null(reason); /* a failed request ends with an error instead */
    assert_string_equal(reason, "length");
    assert_int_equal(field(&a, "context_shifts"), 0);
    assert_true(field(&a, "eval_count") < 64);
    assert_true(field(&a, "prompt_eval_count") + field(&a, "eval_count") >= 63);
    json_decref(a.last);
}

/* Nor can such a model be the draft model of another: its guesses cannot be taken back. */
static void test_runner_recurrent_model_is_no_draft_model(void **state)
{
    (void)state;
    char path[2048];
    snprintf(path, sizeof path, "%s/arch/qwen35.gguf", getenv("CORRAL_FIXTURES"));
    corral_error err;
    assert_null(draft_model_create(path, 64, 1, 32, 1, &err));
    assert_non_null(strstr(err.message, "recurrent state"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_runner_recurrent_shared_prefix_answers_as_a_fresh_load),
        cmocka_unit_test(test_runner_recurrent_continuation_goes_on_from_the_state),
        cmocka_unit_test(test_runner_recurrent_full_context_ends_the_answer),
        cmocka_unit_test(test_runner_recurrent_model_is_no_draft_model),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
