/*
 * `corral runner` on models with a recurrent state per sequence. On arch/qwen35.gguf with one
 * slot, so that every request reuses what the one before left there: a prompt that shares
 * only part of the cached sequence goes back to the state kept near the end of the last
 * prompt (corral_seq_checkpoint) and answers as on a fresh load, speculative answers
 * notwithstanding; one that continues all of it goes on from the state; a full context ends
 * the answer with "length" instead of a shift; and such a model is refused as a draft model.
 * On every recurrent fixture: speculative decoding (prompt lookup, and a draft model where a
 * dense fixture shares the vocabulary), whose partly rejected drafts send the states back to
 * the step's checkpoint, gives the tokens plain decoding gives, one sequence or four at a
 * time, with and without a grammar.
 */
#include <jansson.h>
#include <pthread.h>
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
    static __thread char buf[1 << 20]; /* requests may run on several threads */
    size_t got = 0;
    for (ssize_t r; (r = recv(fd, buf + got, sizeof buf - got - 1, 0)) > 0;)
        got += (size_t)r;
    close(fd);
    buf[got] = '\0';
    for (char *p = buf, *nl; (nl = strchr(p, '\n')); p = nl + 1) {
        *nl = '\0';
        json_error_t jerr;
        json_t *msg = json_loads(p, JSON_ALLOW_NUL, &jerr); /* a random model's text may hold one */
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

/* A runner of the fixture arch/<model>.gguf with --draft draft and, unless NULL, the draft
 * model arch/<draft_model>.gguf, parallel slots and a context of ctx tokens. */
static bool on_device; /* runners put every layer on the Vulkan device (--gpu-layers -1) */

static void start_with(const char *model_name, const char *draft, const char *draft_model,
                       const char *parallel, const char *ctx)
{
    static int n_started;
    const char *bin = getenv("CORRAL_BIN"), *fixtures = getenv("CORRAL_FIXTURES");
    assert_non_null(bin);
    assert_non_null(fixtures);
    snprintf(socket_path, sizeof socket_path, "/tmp/corral-test-recurrent-%d-%d.sock",
             (int)getpid(), n_started++);
    char model[2048], draft_path[2048];
    snprintf(model, sizeof model, "%s/arch/%s.gguf", fixtures, model_name);
    snprintf(draft_path, sizeof draft_path, "%s/arch/%s.gguf", fixtures,
             draft_model ? draft_model : "");
    const char *argv[24] = {bin,         "runner",  "--model",  model,         "--socket",
                            socket_path, "--ctx",   ctx,        "--parallel",  parallel,
                            "--batch",   "32",      "--threads", "2",          "--draft",
                            draft};
    size_t argc = 16;
    if (draft_model) {
        argv[argc++] = "--draft-model";
        argv[argc++] = draft_path;
    }
    if (on_device) {
        argv[argc++] = "--gpu-layers";
        argv[argc++] = "-1";
    }
    argv[argc] = NULL;
    assert_true(runner_fixture_start(argv, socket_path, &runner_pid));
}

/* qwen35 with prompt lookup and qwen3 (the same vocabulary) as its draft model. */
static void start(void)
{
    start_with("qwen35", "8", "qwen3", "1", "64");
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
 * first one after it. Each answer is speculative (prompt lookup and a draft model), whose
 * step checkpoints leave the prompt's in place. */
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
    /* speculative answers, whose steps went back to their own checkpoints, left the prompt's */
    assert_true(field(&first, "draft_tokens") > 0 && field(&again, "draft_tokens") > 0);
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

/* ---- speculative decoding on every recurrent fixture ---- */

typedef struct spec_run {
    pthread_t thread;
    char line[1024];
    answer a;
} spec_run;

static void *spec_run_one(void *arg)
{
    spec_run *run = arg;
    request(run->line, &run->a);
    return NULL;
}

/* Prompts that repeat themselves, so that prompt lookup drafts; the last under a grammar of
 * a few words the answer then keeps repeating. */
#define SPEC_TOKENS 40
static const char *const spec_prompts[] = {
    "one two three four one two three four one two three four one two",
    "the cat sat on the mat and the cat sat on the mat and the cat",
    "A B C D E F A B C D E F A B C",
    "one two three four one two three four one two",
};
#define SPEC_GRAMMAR "root ::= (\\\" one\\\" | \\\" two\\\" | \\\" three\\\" | \\\" four\\\")+"
enum { N_SPEC = sizeof spec_prompts / sizeof spec_prompts[0] };

/* Every prompt on the current runner, drafts bounded by k (0: the runner's own bound), all
 * at once when concurrent (four slots: four sequences in one batch). */
static void spec_answers(int k, bool concurrent, spec_run *runs)
{
    for (size_t i = 0; i < N_SPEC; i++) {
        char draft[64] = "";
        if (k > 0)
            snprintf(draft, sizeof draft, ",\"draft_num_predict\":%d", k);
        snprintf(runs[i].line, sizeof runs[i].line,
                 "{\"op\":\"completion\",\"prompt\":\"%s\",%s\"options\":{\"temperature\":0,"
                 "\"num_predict\":%d%s}}",
                 spec_prompts[i], i == N_SPEC - 1 ? "\"grammar\":\"" SPEC_GRAMMAR "\"," : "",
                 SPEC_TOKENS, draft);
        if (concurrent)
            assert_int_equal(pthread_create(&runs[i].thread, NULL, spec_run_one, &runs[i]), 0);
        else
            spec_run_one(&runs[i]);
    }
    for (size_t i = 0; concurrent && i < N_SPEC; i++)
        pthread_join(runs[i].thread, NULL);
}

/* A recurrent fixture, and a dense one with its vocabulary to draft with (NULL: none). */
typedef struct recurrent_fixture {
    const char *model, *draft_model;
} recurrent_fixture;

static const recurrent_fixture recurrent_fixtures[] = {
    {"qwen35", "qwen3"}, {"qwen35moe", NULL}, {"qwen3next", NULL}, {"lfm2", NULL},
    {"lfm2moe", NULL}, {"granitehybrid", NULL}, {"granitehybrid-moe", NULL},
    {"nemotron-h", NULL}, {"nemotron-h-moe", NULL},
};

/* The speculative runners against a plain one (--draft 0): prompt lookup up to 8 or 2, four
 * sequences at a time or one; a draft model beside it where there is one. */
typedef struct spec_config {
    const char *draft;
    bool draft_model;
    int k;
    bool concurrent;
} spec_config;

static const spec_config spec_configs[] = {
    {"8", false, 0, true}, {"8", false, 2, false}, {"8", false, 5, true},
    {"0", true, 3, true},  {"4", true, 0, false},
};
enum { N_CONFIGS = sizeof spec_configs / sizeof spec_configs[0] };

/* Every answer of the speculative configurations is plain decoding's for each of the n
 * fixtures, drafts were rejected on each (its states went back to a step's checkpoint and
 * the tokens accepted since were evaluated again in the next batch); returns how many
 * fixtures had drafts accepted too. */
static json_int_t check_speculation(const recurrent_fixture *fixtures, size_t n)
{
    static spec_run plain[N_SPEC], runs[N_CONFIGS][N_SPEC];
    json_int_t models_accepting = 0;
    for (size_t m = 0; m < n; m++) {
        const recurrent_fixture *f = &fixtures[m];
        start_with(f->model, "0", NULL, "4", "256");
        spec_answers(0, true, plain);
        stop();
        json_int_t drafted = 0, accepted = 0, answers_rejected = 0;
        for (size_t c = 0; c < N_CONFIGS; c++) {
            const spec_config *cf = &spec_configs[c];
            if (cf->draft_model && !f->draft_model)
                continue;
            start_with(f->model, cf->draft, cf->draft_model ? f->draft_model : NULL,
                       cf->concurrent ? "4" : "1", "256");
            spec_answers(cf->k, cf->concurrent, runs[c]);
            stop();
            for (size_t i = 0; i < N_SPEC; i++) {
                spec_run *r = &runs[c][i];
                const char *reason = json_string_value(json_object_get(r->a.last, "done_reason"));
                if (!reason || field(&r->a, "eval_count") != field(&plain[i].a, "eval_count") ||
                    !json_equal(json_object_get(r->a.last, "tokens"),
                                json_object_get(plain[i].a.last, "tokens")))
                    fail_msg("%s, config %zu, prompt %zu: the speculative answer differs from "
                             "plain decoding's (%s)",
                             f->model, c, i, reason ? reason : "no done_reason");
                assert_int_equal(r->a.len, plain[i].a.len);
                assert_memory_equal(r->a.text, plain[i].a.text, r->a.len);
                json_int_t d = field(&r->a, "draft_tokens"), a = field(&r->a, "draft_accepted");
                drafted += d;
                accepted += a;
                answers_rejected += d > a;
                json_decref(r->a.last);
            }
        }
        json_int_t generated = 0;
        for (size_t i = 0; i < N_SPEC; i++) {
            assert_true(field(&plain[i].a, "eval_count") > 0);
            generated += field(&plain[i].a, "eval_count");
            json_decref(plain[i].a.last);
        }
        assert_true(generated >= N_SPEC * SPEC_TOKENS / 2);
        /* drafts failed, so the steps went back to their checkpoints and re-fed tokens */
        if (drafted == 0 || answers_rejected == 0)
            fail_msg("%s: %lld drafted, %lld accepted, %lld answers with rejections", f->model,
                     (long long)drafted, (long long)accepted, (long long)answers_rejected);
        models_accepting += accepted > 0;
    }
    return models_accepting;
}

/*
 * Speculative decoding changes no token of a recurrent model: every answer's tokens are plain
 * decoding's, although drafts were rejected (so that states went back to a step's checkpoint
 * and the tokens accepted since were evaluated again in the next batch) as well as accepted
 * (the random fixtures' answers repeat more or less: most hold some guesses).
 */
static void test_runner_recurrent_speculative_decoding_changes_no_token(void **state)
{
    (void)state;
    size_t n = sizeof recurrent_fixtures / sizeof recurrent_fixtures[0];
    assert_true(check_speculation(recurrent_fixtures, n) >= 5);
}

/*
 * The same with every layer on the Vulkan device (test_runner_recurrent.vulkan, lavapipe
 * where no GPU is), whose layers keep the states and both checkpoints: the answers of
 * speculative runners are those of a plain runner on the device. Skipped unless asked for
 * (CORRAL_TEST_DEVICE), as it would run on the CPU without a device.
 */
static void test_runner_recurrent_speculation_on_the_device(void **state)
{
    (void)state;
    if (!getenv("CORRAL_TEST_DEVICE"))
        skip();
    static const recurrent_fixture on_gpu[] = {
        {"qwen35", "qwen3"}, {"qwen3next", NULL}, {"lfm2", NULL}, {"granitehybrid", NULL},
        {"nemotron-h", NULL},
    };
    on_device = true;
    assert_true(check_speculation(on_gpu, sizeof on_gpu / sizeof on_gpu[0]) >= 3);
    on_device = false;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_runner_recurrent_shared_prefix_answers_as_a_fresh_load),
        cmocka_unit_test(test_runner_recurrent_continuation_goes_on_from_the_state),
        cmocka_unit_test(test_runner_recurrent_full_context_ends_the_answer),
        cmocka_unit_test(test_runner_recurrent_model_is_no_draft_model),
        cmocka_unit_test(test_runner_recurrent_speculative_decoding_changes_no_token),
        cmocka_unit_test(test_runner_recurrent_speculation_on_the_device),
    };
    const char *filter = getenv("CORRAL_TEST_FILTER");
    if (filter)
        cmocka_set_test_filter(filter);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
