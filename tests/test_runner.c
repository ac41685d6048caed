/*
 * `corral runner` over its Unix socket (runner/protocol.h), as the server uses it: health,
 * greedy completions equal to the tiny-tolstoy reference, stop strings, concurrent requests
 * (more than the slots) each getting the text of a lone run, speculative decoding (prompt
 * lookup and a draft model) giving the tokens plain decoding gives, a grammar after a thinking
 * opening the answer writes or does not, cancellation when the client
 * closes, `context` continuation, prompt truncation, and bad requests.
 */
#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
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

static char socket_path[108];
static pid_t runner_pid;

static int connect_runner(void)
{
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    snprintf(addr.sun_path, sizeof addr.sun_path, "%s", socket_path);
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    if (fd >= 0 && connect(fd, (struct sockaddr *)&addr, sizeof addr) == 0)
        return fd;
    if (fd >= 0)
        close(fd);
    return -1;
}

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
    int fd = connect_runner();
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
 * draft_model: a fixture for --draft-model, or NULL. */
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
    runner_pid = fork();
    if (runner_pid == 0) {
        execl(bin, bin, "runner", "--model", model, "--socket", socket_path, "--ctx", "4096",
              "--parallel", "4", "--batch", "64", "--threads", "2", "--draft", draft,
              draft_model ? "--draft-model" : (char *)NULL, draft_path, (char *)NULL);
        _exit(127);
    }
    for (int i = 0; i < 200; i++) { /* up to 20 s under sanitizers */
        int fd = connect_runner();
        if (fd >= 0) {
            close(fd);
            return 0;
        }
        usleep(100 * 1000);
    }
    return -1;
}

static int start_runner(void **state)
{
    (void)state;
    return spawn_runner("8", NULL); /* the server's default */
}

static int stop_runner(void **state)
{
    (void)state;
    kill(runner_pid, SIGTERM);
    int status = 0;
    waitpid(runner_pid, &status, 0);
    /* a clean exit: the runner drained its connections and freed everything */
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
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

static const char *const long_answers[] = {
    "{\"op\":\"completion\",\"prompt\":\"Natasha looked at him and\","
    "\"options\":{\"temperature\":0,\"num_predict\":200}}",
    "{\"op\":\"completion\",\"prompt\":\"Natasha looked at him and\","
    "\"options\":{\"temperature\":0.9,\"top_k\":20,\"seed\":7,\"num_predict\":200}}",
};
enum { N_LONG_ANSWERS = sizeof long_answers / sizeof long_answers[0] };

/* The long answers from a second runner started with these arguments, which is then stopped. */
static void answers_from(const char *draft, const char *draft_model, answer *out)
{
    char saved[sizeof socket_path];
    memcpy(saved, socket_path, sizeof saved);
    pid_t saved_pid = runner_pid;
    assert_int_equal(spawn_runner(draft, draft_model), 0);
    for (size_t i = 0; i < N_LONG_ANSWERS; i++)
        request(long_answers[i], &out[i]);
    kill(runner_pid, SIGTERM);
    waitpid(runner_pid, NULL, 0);
    memcpy(socket_path, saved, sizeof saved);
    runner_pid = saved_pid;
}

static void assert_same_answer(answer *a, answer *b)
{
    assert_int_equal(json_integer_value(json_object_get(a->last, "eval_count")), 200);
    assert_true(json_equal(json_object_get(a->last, "tokens"), json_object_get(b->last, "tokens")));
    a->text[a->len] = b->text[b->len] = '\0';
    assert_string_equal(a->text, b->text);
}

/* Speculative decoding changes no token: prompt lookup (this runner) and a draft model (the
 * F16 copy of the model, --draft-model) give the answers of a runner without (--draft 0),
 * greedy and sampled at temperature 0.9 with a seed (each token is one draw either way). */
static void test_runner_speculative_decoding_changes_no_token(void **state)
{
    (void)state;
    static answer lookup[N_LONG_ANSWERS], drafted[N_LONG_ANSWERS], plain[N_LONG_ANSWERS];
    for (size_t i = 0; i < N_LONG_ANSWERS; i++)
        request(long_answers[i], &lookup[i]);
    answers_from("0", "tiny-tolstoy-f16.gguf", drafted);
    answers_from("0", NULL, plain);
    for (size_t i = 0; i < N_LONG_ANSWERS; i++) {
        assert_true(json_integer_value(json_object_get(lookup[i].last, "draft_accepted")) >
                    (i == 0 ? 50 : 5));
        assert_true(json_integer_value(json_object_get(drafted[i].last, "draft_accepted")) >
                    (i == 0 ? 150 : 30));
        assert_null(json_object_get(plain[i].last, "draft_tokens"));
        assert_same_answer(&lookup[i], &plain[i]);
        assert_same_answer(&drafted[i], &plain[i]);
        json_decref(lookup[i].last);
        json_decref(drafted[i].last);
        json_decref(plain[i].last);
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
    int fd = connect_runner();
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
    int fd = connect_runner();
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
