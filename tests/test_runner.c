/*
 * `corral runner` over its Unix socket (runner/protocol.h), as the server uses it: health,
 * greedy completions equal to the tiny-tolstoy reference, stop strings, concurrent requests
 * (more than the slots) each getting the text of a lone run, speculative decoding (prompt
 * lookup and a draft model) giving the tokens plain decoding gives, a grammar after a thinking
 * opening the answer writes or does not, cancellation when the client
 * closes, `context` continuation, prompt truncation, one BOS before a prompt that brings its
 * own, and bad requests.
 */
#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "runner_fixture.h"
#include "short_fixture.h"

static char socket_path[108];
static pid_t runner_pid;

static void send_line(int fd, const char *line)
{
    size_t n = strlen(line);
    assert_int_equal(send(fd, line, n, MSG_NOSIGNAL), (ssize_t)n);
    assert_int_equal(send(fd, "\n", 1, MSG_NOSIGNAL), 1);
}

/* Read the whole answer: the concatenated content and the last line's JSON. */
typedef struct answer {
    char text[65536];
    size_t len;
    json_t *last;
    int n_lines;
} answer;

static void read_answer(int fd, answer *a)
{
    memset(a, 0, sizeof *a);
    static __thread char buf[1 << 20];
    size_t n = 0;
    for (;;) {
        ssize_t r = recv(fd, buf + n, sizeof buf - n - 1, 0);
        if (r <= 0)
            break;
        n += (size_t)r;
    }
    buf[n] = '\0';
    for (char *line = buf, *nl; (nl = strchr(line, '\n')); line = nl + 1) {
        *nl = '\0';
        json_error_t jerr;
        json_t *msg = json_loads(line, 0, &jerr);
        assert_non_null(msg);
        a->n_lines++;
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
}

static void request(const char *json_line, answer *a)
{
    int fd = runner_fixture_connect(socket_path);
    assert_true(fd >= 0);
    send_line(fd, json_line);
    read_answer(fd, a);
    close(fd);
}

static const char *reference_case4 =
    " saw that the countess was not at the first time.\n\"I am afraid,\" she said, \"but I am "
    "not a word of you. I am afraid that I am not able to understand that. I am afraid of him";

#define GREEDY_CASE4 \
    "{\"op\":\"completion\",\"prompt\":\"Natasha looked at him and\"," \
    "\"options\":{\"temperature\":0,\"num_predict\":48}}"

/* Start a runner on a fresh socket path (socket_path, runner_pid); draft: its --draft;
 * draft_model: a fixture for --draft-model, or NULL. Drafts go by acceptance alone, so what a
 * test sees of them is the same on every machine. */
static int spawn_runner(const char *draft, const char *draft_model)
{
    static int n_started;
    const char *bin = getenv("CORRAL_BIN"), *fixtures = getenv("CORRAL_FIXTURES");
    if (!bin || !fixtures)
        return -1;
    snprintf(socket_path, sizeof socket_path, "/tmp/corral-test-runner-%d-%d.sock", (int)getpid(),
             n_started++);
    char model[2048], draft_path[2048];
    snprintf(model, sizeof model, "%s/tiny-tolstoy-f32.gguf", fixtures);
    snprintf(draft_path, sizeof draft_path, "%s/%s", fixtures, draft_model ? draft_model : "");
    const char *const argv[] = {bin, "runner", "--model", model, "--socket", socket_path,
                                "--ctx", "4096", "--parallel", "4", "--batch", "64",
                                "--threads", "2", "--draft-by", "acceptance", "--draft", draft,
                                draft_model ? "--draft-model" : NULL, draft_path, NULL};
    return runner_fixture_start(argv, socket_path, &runner_pid) ? 0 : -1;
}

static int start_runner(void **state)
{
    (void)state;
    return spawn_runner("8", NULL); /* the server's default */
}

static int stop_runner(void **state)
{
    (void)state;
    return runner_fixture_stop(runner_pid);
}

static void test_runner_health_reports_slots_and_capped_context(void **state)
{
    (void)state;
    answer a;
    request("{\"op\":\"health\"}", &a);
    assert_string_equal(json_string_value(json_object_get(a.last, "status")), "ok");
    assert_int_equal(json_integer_value(json_object_get(a.last, "slots")), 4);
    assert_int_equal(json_integer_value(json_object_get(a.last, "n_ctx")), 256); /* trained length */
    json_decref(a.last);
}

static void test_runner_greedy_completion_matches_reference(void **state)
{
    (void)state;
    answer a;
    request(GREEDY_CASE4, &a);
    a.text[a.len] = '\0';
    assert_string_equal(a.text, reference_case4);
    assert_true(json_is_true(json_object_get(a.last, "done")));
    assert_string_equal(json_string_value(json_object_get(a.last, "done_reason")), "length");
    assert_int_equal(json_integer_value(json_object_get(a.last, "eval_count")), 48);
    assert_int_equal(json_array_size(json_object_get(a.last, "tokens")), 6 + 48);
    /* the answer repeats itself ("I am afraid"): prompt lookup drafted and some drafts held,
     * and the text is still the reference's, token for token */
    assert_true(json_integer_value(json_object_get(a.last, "draft_tokens")) > 0);
    assert_true(json_integer_value(json_object_get(a.last, "draft_accepted")) > 0);
    json_decref(a.last);
}

/* The speculative-decoding cases: greedy and sampled prompts, and one under a grammar whose
 * words the answer keeps repeating, so that drafts are offered and held. */
typedef struct spec_case {
    const char *prompt;
    double temperature;
    int seed;
    const char *grammar; /* NULL: none */
} spec_case;

static const spec_case spec_cases[] = {
    {"Natasha looked at him and", 0, 0, NULL},
    {"Natasha looked at him and", 0.9, 7, NULL},
    {"The war", 0, 0, NULL},
    {"\"I am afraid,\" she said", 0, 0, NULL},
    {"Prince Andrew", 0.7, 3, NULL},
    {"Natasha looked at him and",
     0,
     0,
     "root ::= word+\nword ::= \" I\" | \" am\" | \" afraid\" | \" of\" | \" him\" | \" not\" | \",\" | "
     "\" she\" | \" said\" | \".\"\n"},
};
enum { N_SPEC_CASES = sizeof spec_cases / sizeof spec_cases[0] };

/* Tokens each case generates; short runs (short_fixture.h) take half. */
static int spec_tokens(void)
{
    return short_fixture_on() ? 100 : 200;
}

/* One case's request line (the caller frees it); k > 0 bounds the draft (draft_num_predict). */
static char *spec_request(const spec_case *c, int k)
{
    json_t *options = json_pack("{s:f,s:i,s:i}", "temperature", c->temperature, "top_k", 20,
                                "num_predict", spec_tokens());
    if (c->seed)
        json_object_set_new(options, "seed", json_integer(c->seed));
    if (k > 0)
        json_object_set_new(options, "draft_num_predict", json_integer(k));
    json_t *req = json_pack("{s:s,s:s,s:o}", "op", "completion", "prompt", c->prompt, "options",
                            options);
    if (c->grammar)
        json_object_set_new(req, "grammar", json_string(c->grammar));
    char *line = json_dumps(req, JSON_COMPACT);
    json_decref(req);
    assert_non_null(line);
    return line;
}

typedef struct spec_run {
    pthread_t thread;
    char *line;
    answer a;
} spec_run;

static void *spec_run_one(void *arg)
{
    spec_run *run = arg;
    int fd = runner_fixture_connect(socket_path);
    if (fd < 0)
        return NULL;
    send_line(fd, run->line);
    read_answer(fd, &run->a);
    close(fd);
    return NULL;
}

/* Every case on the current runner with drafts bounded by k (0: the runner's own bound); all
 * at once when concurrent (four slots: four sequences decode in one batch, the rest queue). */
static void spec_answers(int k, bool concurrent, spec_run *runs)
{
    for (size_t i = 0; i < N_SPEC_CASES; i++) {
        runs[i].line = spec_request(&spec_cases[i], k);
        if (concurrent)
            pthread_create(&runs[i].thread, NULL, spec_run_one, &runs[i]);
        else
            spec_run_one(&runs[i]);
    }
    for (size_t i = 0; i < N_SPEC_CASES; i++) {
        if (concurrent)
            pthread_join(runs[i].thread, NULL);
        free(runs[i].line);
        assert_non_null(runs[i].a.last);
    }
}

/* Spawn a second runner with these arguments, take the answers, and stop it. */
static void spec_answers_from(const char *draft, const char *draft_model, int k, bool concurrent,
                              spec_run *runs)
{
    char saved[sizeof socket_path];
    memcpy(saved, socket_path, sizeof saved);
    pid_t saved_pid = runner_pid;
    assert_int_equal(spawn_runner(draft, draft_model), 0);
    spec_answers(k, concurrent, runs);
    runner_fixture_stop(runner_pid);
    memcpy(socket_path, saved, sizeof saved);
    runner_pid = saved_pid;
}

static json_int_t spec_field(const spec_run *run, const char *name)
{
    return json_integer_value(json_object_get(run->a.last, name));
}

/* The same tokens and text as plain decoding, and a long enough answer to have drafted. */
static void assert_same_answer(spec_run *a, spec_run *plain)
{
    assert_int_equal(spec_field(a, "eval_count"), spec_field(plain, "eval_count"));
    assert_true(spec_field(plain, "eval_count") >= 20);
    assert_true(json_equal(json_object_get(a->a.last, "tokens"),
                           json_object_get(plain->a.last, "tokens")));
    a->a.text[a->a.len] = plain->a.text[plain->a.len] = '\0';
    assert_string_equal(a->a.text, plain->a.text);
}

/* The speculative configurations, each against a runner without drafts (--draft 0). A NULL
 * draft runs on the suite's runner (prompt lookup up to 8); otherwise a runner of its own is
 * spawned. Short runs take the configurations marked short: between them they still take
 * lookup alone and beside a draft model, one sequence and four. */
typedef struct spec_config {
    const char *draft;       /* --draft; NULL: the suite's runner */
    const char *draft_model; /* --draft-model, or NULL */
    int k;                   /* draft_num_predict; 0: the runner's own bound */
    bool concurrent;         /* four sequences decode in one batch */
    bool in_short_runs;
} spec_config;

static const spec_config spec_configs[] = {
    {NULL, NULL, 0, true, false},                   /* prompt lookup up to 8, four sequences */
    {NULL, NULL, 2, false, true},                   /* prompt lookup up to 2, one sequence */
    {"0", "tiny-tolstoy-f16.gguf", 0, true, false}, /* the F16 copy as a draft model */
    {"0", "tiny-tolstoy-f16.gguf", 3, false, false},
    {"16", "tiny-tolstoy-f16.gguf", 5, true, true}, /* both */
};
enum { N_SPEC_CONFIGS = sizeof spec_configs / sizeof spec_configs[0] };

/* Speculative decoding changes no token: prompt lookup and a draft model (the F16 copy of the
 * model, --draft-model), with several draft lengths, one or four sequences at a time, with and
 * without a grammar, give the answers of a runner without either (--draft 0) — greedy and
 * sampled with a seed alike, since each output token is one draw of the sampler either way. */
static void test_runner_speculative_decoding_changes_no_token(void **state)
{
    (void)state;
    static spec_run runs[N_SPEC_CONFIGS][N_SPEC_CASES], plain[N_SPEC_CASES];
    bool ran[N_SPEC_CONFIGS] = {false};
    for (size_t c = 0; c < N_SPEC_CONFIGS; c++) {
        const spec_config *cf = &spec_configs[c];
        if (short_fixture_on() && !cf->in_short_runs)
            continue;
        if (cf->draft)
            spec_answers_from(cf->draft, cf->draft_model, cf->k, cf->concurrent, runs[c]);
        else
            spec_answers(cf->k, cf->concurrent, runs[c]);
        ran[c] = true;
    }
    spec_answers_from("0", NULL, 0, false, plain);
    json_int_t accepted[N_SPEC_CONFIGS] = {0}, drafted[N_SPEC_CONFIGS] = {0};
    for (size_t i = 0; i < N_SPEC_CASES; i++) {
        assert_null(json_object_get(plain[i].a.last, "draft_tokens"));
        for (size_t c = 0; c < N_SPEC_CONFIGS; c++) {
            if (!ran[c])
                continue;
            assert_true(spec_field(&runs[c][i], "draft_accepted") <=
                        spec_field(&runs[c][i], "draft_tokens"));
            accepted[c] += spec_field(&runs[c][i], "draft_accepted");
            drafted[c] += spec_field(&runs[c][i], "draft_tokens");
            assert_same_answer(&runs[c][i], &plain[i]);
            json_decref(runs[c][i].a.last);
        }
        json_decref(plain[i].a.last);
    }
    /* the first case's greedy answer repeats itself: lookup and the F16 draft must have held
     * more than half an answer's worth of tokens, and the F16 draft agrees with the F32 model
     * almost everywhere. The runners draft by acceptance alone (--draft-by acceptance): by
     * measured costs, a model this small on a slow build may find that no draft pays. */
    for (size_t c = 0; c < N_SPEC_CONFIGS; c++) {
        if (!ran[c])
            continue;
        assert_true(accepted[c] > spec_tokens() / 2);
        if (spec_configs[c].draft_model)
            assert_true((double)accepted[c] >= 0.7 * (double)drafted[c]);
    }
}

/* After the greedy run (the only one so far): its sequence holds its prompt and every generated
 * token but the last, which was sampled and never decoded. */
static void test_runner_health_counts_kv_cells_in_use(void **state)
{
    (void)state;
    answer a;
    request("{\"op\":\"health\"}", &a);
    assert_int_equal(json_integer_value(json_object_get(a.last, "kv_cells")), 4 * 256);
    assert_int_equal(json_integer_value(json_object_get(a.last, "kv_cells_used")), 6 + 48 - 1);
    json_decref(a.last);
}

static void test_runner_stop_string_ends_before_it(void **state)
{
    (void)state;
    answer a;
    request("{\"op\":\"completion\",\"prompt\":\"Natasha looked at him and\","
            "\"options\":{\"temperature\":0,\"num_predict\":48,\"stop\":[\"afraid\"]}}",
            &a);
    a.text[a.len] = '\0';
    assert_string_equal(a.text, " saw that the countess was not at the first time.\n\"I am ");
    assert_string_equal(json_string_value(json_object_get(a.last, "done_reason")), "stop");
    json_decref(a.last);
}

/*
 * A grammar after the thinking, for a model that opens its thinking itself (grammar_open):
 * when the answer opens with it, the text runs free until grammar_after, then follows the
 * grammar; when it does not, the grammar holds from the first token. The greedy text goes
 * " saw that the countess was not ...".
 */
static void test_runner_grammar_after_an_opening_the_answer_writes(void **state)
{
    (void)state;
    answer a;
    request("{\"op\":\"completion\",\"prompt\":\"Natasha looked at him and\","
            "\"grammar\":\"root ::= \\\" was\\\" \\\" not\\\"\\n\","
            "\"grammar_open\":\"saw\",\"grammar_after\":\"countess\","
            "\"options\":{\"temperature\":0,\"num_predict\":48}}",
            &a);
    a.text[a.len] = '\0';
    assert_string_equal(a.text, " saw that the countess was not");
    assert_string_equal(json_string_value(json_object_get(a.last, "done_reason")), "stop");
    json_decref(a.last);
    request("{\"op\":\"completion\",\"prompt\":\"Natasha looked at him and\","
            "\"grammar\":\"root ::= \\\" saw that the countess was\\\"\\n\","
            "\"grammar_open\":\"zzz\",\"grammar_after\":\"countess\","
            "\"options\":{\"temperature\":0,\"num_predict\":48}}",
            &a);
    a.text[a.len] = '\0';
    assert_string_equal(a.text, " saw that the countess was");
    assert_string_equal(json_string_value(json_object_get(a.last, "done_reason")), "stop");
    json_decref(a.last);
}

typedef struct concurrent_run {
    pthread_t thread;
    answer a;
} concurrent_run;

static void *run_case4(void *arg)
{
    concurrent_run *run = arg;
    int fd = runner_fixture_connect(socket_path);
    if (fd < 0)
        return NULL;
    send_line(fd, GREEDY_CASE4);
    read_answer(fd, &run->a);
    close(fd);
    return NULL;
}

/* Eight requests on four slots: queued ones wait, and all match a lone run exactly. */
static void test_runner_concurrent_requests_match_lone_run(void **state)
{
    (void)state;
    static concurrent_run runs[8];
    for (int i = 0; i < 8; i++)
        pthread_create(&runs[i].thread, NULL, run_case4, &runs[i]);
    for (int i = 0; i < 8; i++) {
        pthread_join(runs[i].thread, NULL);
        runs[i].a.text[runs[i].a.len] = '\0';
        assert_string_equal(runs[i].a.text, reference_case4);
        json_decref(runs[i].a.last);
    }
}

static void test_runner_closing_the_connection_cancels(void **state)
{
    (void)state;
    int fd = runner_fixture_connect(socket_path);
    send_line(fd, "{\"op\":\"completion\",\"prompt\":\"The war\",\"options\":{\"num_predict\":100000}}");
    char buf[256];
    assert_true(recv(fd, buf, sizeof buf, 0) > 0); /* generation has started */
    close(fd);
    /* the slot comes back idle within a few tokens */
    for (int i = 0; i < 100; i++) {
        answer a;
        request("{\"op\":\"health\"}", &a);
        json_int_t idle = json_integer_value(json_object_get(a.last, "slots_idle"));
        json_decref(a.last);
        if (idle == 4)
            return;
        usleep(20 * 1000);
    }
    fail_msg("the cancelled request still holds its slot");
}

static void test_runner_context_continues_a_previous_exchange(void **state)
{
    (void)state;
    answer first, second, whole;
    request("{\"op\":\"completion\",\"prompt\":\"Pierre\",\"options\":{\"temperature\":0,"
            "\"num_predict\":4}}",
            &first);
    char *tokens = json_dumps(json_object_get(first.last, "tokens"), JSON_COMPACT);
    char line[4096];
    snprintf(line, sizeof line,
             "{\"op\":\"completion\",\"prompt\":\"\",\"context\":%s,\"options\":{\"temperature\":0,"
             "\"num_predict\":4}}",
             tokens);
    free(tokens);
    request(line, &second);
    request("{\"op\":\"completion\",\"prompt\":\"Pierre\",\"options\":{\"temperature\":0,"
            "\"num_predict\":8}}",
            &whole);
    first.text[first.len] = second.text[second.len] = whole.text[whole.len] = '\0';
    assert_int_equal(first.len + second.len, whole.len);
    assert_memory_equal(first.text, whole.text, first.len);
    assert_memory_equal(second.text, whole.text + first.len, second.len);
    json_decref(first.last);
    json_decref(second.last);
    json_decref(whole.last);
}

static void test_runner_truncates_a_prompt_longer_than_the_context(void **state)
{
    (void)state;
    static char line[65536], prompt[40000];
    prompt[0] = '\0';
    for (int i = 0; i < 100; i++)
        strcat(prompt, "Pierre said that the army ");
    snprintf(line, sizeof line,
             "{\"op\":\"completion\",\"prompt\":\"%s\",\"options\":{\"num_predict\":2}}", prompt);
    answer a;
    request(line, &a);
    assert_true(json_integer_value(json_object_get(a.last, "prompt_truncated")) > 0);
    assert_true(json_is_true(json_object_get(a.last, "done")));
    json_decref(a.last);
}

static void test_runner_tokenize_and_bad_requests(void **state)
{
    (void)state;
    answer a;
    request("{\"op\":\"tokenize\",\"content\":\"Pierre\"}", &a);
    json_t *tokens = json_object_get(a.last, "tokens");
    assert_int_equal(json_array_size(tokens), 2);
    assert_int_equal(json_integer_value(json_array_get(tokens, 1)), 442);
    json_decref(a.last);
    /* a prompt whose text starts with the BOS the vocabulary adds (a template's or renderer's)
     * still starts with one: tokenized, and as a completion's context */
    request("{\"op\":\"tokenize\",\"content\":\"<s>Pierre\"}", &a);
    tokens = json_object_get(a.last, "tokens");
    assert_int_equal(json_array_size(tokens), 2);
    assert_int_equal(json_integer_value(json_array_get(tokens, 0)), 1);
    assert_int_equal(json_integer_value(json_array_get(tokens, 1)), 442);
    json_decref(a.last);
    request("{\"op\":\"completion\",\"prompt\":\"<s>Pierre\",\"options\":{\"num_predict\":1}}",
            &a);
    tokens = json_object_get(a.last, "tokens");
    assert_true(json_array_size(tokens) >= 2);
    assert_int_equal(json_integer_value(json_array_get(tokens, 0)), 1);
    assert_int_equal(json_integer_value(json_array_get(tokens, 1)), 442);
    json_decref(a.last);
    request("{not json", &a);
    assert_non_null(json_object_get(a.last, "error"));
    json_decref(a.last);
    request("{\"op\":\"fly\"}", &a);
    assert_string_equal(json_string_value(json_object_get(a.last, "error")), "unknown op");
    json_decref(a.last);
    request("{\"op\":\"completion\",\"prompt\":\"x\",\"context\":[1,99999]}", &a);
    assert_non_null(json_object_get(a.last, "error"));
    json_decref(a.last);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_runner_health_reports_slots_and_capped_context),
        cmocka_unit_test(test_runner_greedy_completion_matches_reference),
        cmocka_unit_test(test_runner_health_counts_kv_cells_in_use),
        cmocka_unit_test(test_runner_speculative_decoding_changes_no_token),
        cmocka_unit_test(test_runner_stop_string_ends_before_it),
        cmocka_unit_test(test_runner_grammar_after_an_opening_the_answer_writes),
        cmocka_unit_test(test_runner_concurrent_requests_match_lone_run),
        cmocka_unit_test(test_runner_closing_the_connection_cancels),
        cmocka_unit_test(test_runner_context_continues_a_previous_exchange),
        cmocka_unit_test(test_runner_truncates_a_prompt_longer_than_the_context),
        cmocka_unit_test(test_runner_tokenize_and_bad_requests),
    };
    return cmocka_run_group_tests(tests, start_runner, stop_runner);
}
