/*
 * The CLI's HTTP client against hostile or odd servers: CORRAL_HOST / OLLAMA_HOST parsing
 * ([scheme://]host[:port][/path]), NDJSON split across reads, a final line without its
 * newline, an error line
 * mid-stream, a line past the 8 MB cap, non-JSON lines, error statuses, and the number/time
 * formatting the commands print. The "server" is a thread answering one canned reply.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "cli/client.h"
#include "cli/format.h"

/* ---- address parsing ---- */

static void assert_address(const char *text, const char *url, bool loopback)
{
    client_address a;
    corral_error err = {{0}};
    if (!client_parse_address(text, &a, &err))
        fail_msg("'%s' should parse: %s", text, err.message);
    assert_string_equal(a.url, url);
    assert_int_equal(a.loopback, loopback);
}

static void test_address_follows_ollama_host_rules(void **state)
{
    (void)state;
    assert_address("", "http://127.0.0.1:11434", true);
    assert_address("0.0.0.0", "http://0.0.0.0:11434", true);
    assert_address("localhost:8080", "http://localhost:8080", true);
    assert_address("http://example.com", "http://example.com:80", false);
    assert_address("https://example.com/corral/", "https://example.com:443/corral", false);
    assert_address("ollama.com", "https://ollama.com:443", false);
    assert_address("\"[::1]:9000\"", "http://[::1]:9000", true);
    assert_address("  10.0.0.5:11434 ", "http://10.0.0.5:11434", false);
    assert_address(":8080", "http://127.0.0.1:8080", true);
    assert_address("localhost", "http://localhost:11434", true);
    assert_address("::1", "http://[::1]:11434", true);
    assert_address("::", "http://[::]:11434", true);
    assert_address("http://fd00::5/api", "http://[fd00::5]:80/api", false);
    client_address a;
    corral_error err = {{0}};
    assert_false(client_parse_address("ftp://x", &a, &err));
    assert_false(client_parse_address("host:99999", &a, &err));
    assert_false(client_parse_address("host:12ab", &a, &err));
}

/* ---- a one-reply server ---- */

typedef struct canned {
    int listener;
    const char *head;  /* status line and headers */
    char *body;
    size_t body_len;
    size_t split_at;   /* the body is sent in two writes, split here */
} canned;

static void *serve_once(void *arg)
{
    canned *c = arg;
    int fd = accept(c->listener, NULL, NULL);
    if (fd < 0)
        return NULL;
    char request[65536];
    ssize_t got = 0, n;
    /* read until the end of the headers, then whatever body fits; the reply ignores it */
    while ((n = read(fd, request + got, sizeof request - 1 - (size_t)got)) > 0) {
        got += n;
        request[got] = '\0';
        if (strstr(request, "\r\n\r\n"))
            break;
    }
    char head[512];
    int head_len = snprintf(head, sizeof head, "%s\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n",
                            c->head, c->body_len);
    ssize_t ignored = write(fd, head, (size_t)head_len);
    size_t split = c->split_at < c->body_len ? c->split_at : c->body_len;
    ignored = write(fd, c->body, split);
    usleep(20000);
    for (size_t sent = split; sent < c->body_len; sent += (size_t)ignored) {
        ignored = write(fd, c->body + sent, c->body_len - sent);
        if (ignored <= 0)
            break;
    }
    (void)ignored;
    close(fd);
    return NULL;
}

/* Start the canned server, point CORRAL_HOST at it and open a client. */
static corral_client *start(canned *c, pthread_t *thread)
{
    c->listener = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(bind(c->listener, (struct sockaddr *)&addr, sizeof addr), 0);
    socklen_t len = sizeof addr;
    getsockname(c->listener, (struct sockaddr *)&addr, &len);
    assert_int_equal(listen(c->listener, 1), 0);
    char host[64];
    snprintf(host, sizeof host, "127.0.0.1:%u", ntohs(addr.sin_port));
    setenv("CORRAL_HOST", host, 1);
    pthread_create(thread, NULL, serve_once, c);
    corral_error err = {{0}};
    corral_client *client = client_open(&err);
    assert_non_null(client);
    return client;
}

static void finish(canned *c, pthread_t thread, corral_client *client)
{
    pthread_join(thread, NULL);
    close(c->listener);
    client_close(client);
}

typedef struct collected {
    size_t n_lines;
    char texts[8][64];
    size_t stop_after; /* 0: never stop */
} collected;

static bool collect(void *user, const json_t *line)
{
    collected *got = user;
    const char *text = json_string_value(json_object_get(line, "response"));
    if (got->n_lines < 8)
        snprintf(got->texts[got->n_lines], sizeof got->texts[0], "%s", text ? text : "?");
    got->n_lines++;
    return !got->stop_after || got->n_lines < got->stop_after;
}

static long stream(canned *c, collected *got, corral_error *err)
{
    pthread_t thread;
    corral_client *client = start(c, &thread);
    json_t *body = json_pack("{s:s}", "model", "m");
    long status = client_stream(client, "/api/generate", body, collect, got, err);
    json_decref(body);
    finish(c, thread, client);
    return status;
}

static void test_stream_joins_lines_split_across_reads(void **state)
{
    (void)state;
    static char body[] = "{\"response\":\"Hel\"}\n{\"response\":\"lo\"}\n{\"response\":\"!\",\"done\":true}";
    canned c = {.head = "HTTP/1.1 200 OK\r\nContent-Type: application/x-ndjson", .body = body,
                .body_len = sizeof body - 1, .split_at = 25};
    collected got = {0};
    corral_error err = {{0}};
    assert_int_equal(stream(&c, &got, &err), 200);
    assert_int_equal(got.n_lines, 3); /* the last line has no newline and still counts */
    assert_string_equal(got.texts[0], "Hel");
    assert_string_equal(got.texts[1], "lo");
    assert_string_equal(got.texts[2], "!");
}

static void test_stream_error_line_fails_with_its_message(void **state)
{
    (void)state;
    static char body[] = "{\"response\":\"a\"}\n{\"error\":\"runner crashed\"}\n{\"response\":\"b\"}\n";
    canned c = {.head = "HTTP/1.1 200 OK", .body = body, .body_len = sizeof body - 1};
    collected got = {0};
    corral_error err = {{0}};
    assert_int_equal(stream(&c, &got, &err), 0);
    assert_int_equal(got.n_lines, 1);
    assert_string_equal(err.message, "runner crashed");
}

static void test_stream_refuses_a_line_over_8_mb(void **state)
{
    (void)state;
    size_t len = CLIENT_MAX_LINE_BYTES + 100;
    canned c = {.head = "HTTP/1.1 200 OK", .body = malloc(len), .body_len = len, .split_at = 1000};
    memset(c.body, 'x', len);
    collected got = {0};
    corral_error err = {{0}};
    assert_int_equal(stream(&c, &got, &err), 0);
    assert_int_equal(got.n_lines, 0);
    assert_non_null(strstr(err.message, "longer than 8 MB"));
    free(c.body);
}

static void test_stream_refuses_a_line_that_is_not_json(void **state)
{
    (void)state;
    static char body[] = "<html>proxy error</html>\n";
    canned c = {.head = "HTTP/1.1 200 OK", .body = body, .body_len = sizeof body - 1};
    collected got = {0};
    corral_error err = {{0}};
    assert_int_equal(stream(&c, &got, &err), 0);
    assert_non_null(strstr(err.message, "not a JSON object"));
}

/* A generated NUL byte reaches the client as \u0000 (a random model's byte token): a line
 * like any other, not a stream error. */
static void test_stream_takes_a_nul_in_a_string(void **state)
{
    (void)state;
    static char body[] = "{\"response\":\"a\\u0000b\"}\n{\"response\":\"c\",\"done\":true}\n";
    canned c = {.head = "HTTP/1.1 200 OK", .body = body, .body_len = sizeof body - 1};
    collected got = {0};
    corral_error err = {{0}};
    assert_int_equal(stream(&c, &got, &err), 200);
    assert_int_equal(got.n_lines, 2);
    assert_string_equal(got.texts[0], "a"); /* C text ends at the NUL */
    assert_string_equal(got.texts[1], "c");
}

static void test_stream_stops_when_the_caller_says(void **state)
{
    (void)state;
    static char body[] = "{\"response\":\"1\"}\n{\"response\":\"2\"}\n{\"response\":\"3\"}\n";
    canned c = {.head = "HTTP/1.1 200 OK", .body = body, .body_len = sizeof body - 1};
    collected got = {.stop_after = 2};
    corral_error err = {{0}};
    assert_int_equal(stream(&c, &got, &err), 200);
    assert_int_equal(got.n_lines, 2);
}

static void test_error_status_carries_the_server_message(void **state)
{
    (void)state;
    static char body[] = "{\"error\":\"model 'x' not found\"}";
    canned c = {.head = "HTTP/1.1 404 Not Found", .body = body, .body_len = sizeof body - 1};
    collected got = {0};
    corral_error err = {{0}};
    assert_int_equal(stream(&c, &got, &err), 404);
    assert_string_equal(err.message, "model 'x' not found");

    static char text[] = "bad gateway";
    canned c2 = {.head = "HTTP/1.1 502 Bad Gateway", .body = text, .body_len = sizeof text - 1};
    pthread_t thread;
    corral_client *client = start(&c2, &thread);
    assert_int_equal(client_call(client, "GET", "/api/tags", NULL, NULL, &err), 502);
    assert_string_equal(err.message, "server replied 502: bad gateway");
    finish(&c2, thread, client);
}

static void test_call_refuses_a_reply_that_is_not_json(void **state)
{
    (void)state;
    static char body[] = "{\"models\": [";
    canned c = {.head = "HTTP/1.1 200 OK", .body = body, .body_len = sizeof body - 1};
    pthread_t thread;
    corral_client *client = start(&c, &thread);
    json_t *reply = NULL;
    corral_error err = {{0}};
    assert_int_equal(client_call(client, "GET", "/api/tags", NULL, &reply, &err), 0);
    assert_null(reply);
    assert_non_null(strstr(err.message, "not JSON"));
    finish(&c, thread, client);
}

/* ---- formatting ---- */

static void test_formatting_matches_ollama(void **state)
{
    (void)state;
    char out[64];
    format_bytes(999, out, sizeof out);
    assert_string_equal(out, "999 B");
    format_bytes(1200, out, sizeof out);
    assert_string_equal(out, "1.2 KB");
    format_bytes(18016608, out, sizeof out);
    assert_string_equal(out, "18 MB");
    format_bytes(4700000000ull, out, sizeof out);
    assert_string_equal(out, "4.7 GB");
    format_bytes(2000000, out, sizeof out);
    assert_string_equal(out, "2 MB");
    format_relative_time(1000, 1000 + 2 * 86400 + 5, out, sizeof out);
    assert_string_equal(out, "2 days ago");
    format_relative_time(1000 + 299, 1000, out, sizeof out);
    assert_string_equal(out, "4 minutes from now");
    format_relative_time((time_t)4102444800LL * 2, 1000, out, sizeof out);
    assert_string_equal(out, "Forever");
    format_duration_ns(1500000000, out, sizeof out);
    assert_string_equal(out, "1.5s");
    format_duration_ns(230100000, out, sizeof out);
    assert_string_equal(out, "230.1ms");
    format_duration_ns(62500000000LL, out, sizeof out);
    assert_string_equal(out, "1m2.5s");
    format_eta(80, out, sizeof out);
    assert_string_equal(out, "1m20s");
    format_eta(1e9, out, sizeof out);
    assert_string_equal(out, "99h+");
    time_t t;
    assert_true(format_parse_rfc3339("1970-01-01T01:00:00.5+01:00", &t));
    assert_int_equal(t, 0);
    assert_true(format_parse_rfc3339("2026-11-22T08:00:00Z", &t));
    assert_false(format_parse_rfc3339("yesterday", &t));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_address_follows_ollama_host_rules),
        cmocka_unit_test(test_stream_joins_lines_split_across_reads),
        cmocka_unit_test(test_stream_error_line_fails_with_its_message),
        cmocka_unit_test(test_stream_refuses_a_line_over_8_mb),
        cmocka_unit_test(test_stream_refuses_a_line_that_is_not_json),
        cmocka_unit_test(test_stream_takes_a_nul_in_a_string),
        cmocka_unit_test(test_stream_stops_when_the_caller_says),
        cmocka_unit_test(test_error_status_carries_the_server_message),
        cmocka_unit_test(test_call_refuses_a_reply_that_is_not_json),
        cmocka_unit_test(test_formatting_matches_ollama),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
