/*
 * The model-management routes of `corral serve` (src/server/api/native_models.c) over real HTTP:
 * the routes run in-process on 127.0.0.1 with a temporary store and no scheduler, and libcurl
 * drives them as a client would — blob upload, create from the stories260K GGUF (and with
 * quantization), tags, show, copy, delete with blob collection, and ollama's error statuses
 * (400 bad input, 404 unknown model or blob).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <curl/curl.h>
#include <dirent.h>
#include <jansson.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/gguf.h"
#include "file_fixture.h"
#include "convert/hf_adapter.h"
#include "hf_fixture.h"
#include "server/server.h"
#include "registry_fixture.h"
#include "store_fixture.h"

static char *g_root;
static server g_server;
static http_server *g_http;
static unsigned g_port;
static char *g_gguf;        /* the stories260K bytes */
static size_t g_gguf_len;
static char g_gguf_digest[CORRAL_DIGEST_BUF];

typedef struct response {
    long status;
    char *body;
    size_t len;
} response;

static size_t collect(char *data, size_t size, size_t n, void *user)
{
    response *r = user;
    size_t bytes = size * n;
    char *grown = realloc(r->body, r->len + bytes + 1);
    assert_non_null(grown);
    memcpy(grown + r->len, data, bytes);
    r->body = grown;
    r->len += bytes;
    r->body[r->len] = '\0';
    return bytes;
}

static response call(const char *method, const char *path, const void *body, size_t len)
{
    response r = {0, calloc(1, 1), 0};
    char url[256];
    snprintf(url, sizeof url, "http://127.0.0.1:%u%s", g_port, path);
    CURL *curl = curl_easy_init();
    assert_non_null(curl);
    curl_easy_setopt(curl, CURLOPT_URL, url);
    curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, method);
    if (strcmp(method, "HEAD") == 0)
        curl_easy_setopt(curl, CURLOPT_NOBODY, 1L);
    if (body) {
        curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
    }
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, &r);
    assert_int_equal(curl_easy_perform(curl), CURLE_OK);
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &r.status);
    curl_easy_cleanup(curl);
    return r;
}

static response call_json(const char *method, const char *path, const char *json)
{
    return call(method, path, json, strlen(json));
}

/* The body as JSON (the last line of an NDJSON body when last_line). */
static json_t *parse(const response *r)
{
    json_error_t jerr;
    json_t *v = json_loads(r->body, 0, &jerr);
    if (!v)
        fail_msg("not JSON (%s): %s", jerr.text, r->body);
    return v;
}

static const char *error_of(json_t *v)
{
    return json_string_value(json_object_get(v, "error"));
}

static void expect_error(const char *method, const char *path, const char *json, long status,
                         const char *message_part)
{
    response r = call_json(method, path, json);
    if (r.status != status)
        fail_msg("%s %s %s: got %ld %s, want %ld", method, path, json, r.status, r.body, status);
    json_t *v = parse(&r);
    if (!error_of(v) || !strstr(error_of(v), message_part))
        fail_msg("%s %s: error '%s' lacks '%s'", method, path, r.body, message_part);
    json_decref(v);
    free(r.body);
}

static unsigned free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(bind(fd, (struct sockaddr *)&addr, sizeof addr), 0);
    socklen_t len = sizeof addr;
    assert_int_equal(getsockname(fd, (struct sockaddr *)&addr, &len), 0);
    close(fd);
    return ntohs(addr.sin_port);
}

/* OLLAMA_HOST=[::1]:0 as ollama takes it: an IPv6 address and a port the system picks; a
 * host name too. */
static void test_listens_on_ipv6_on_a_port_the_system_chooses(void **state)
{
    (void)state;
    int probe = socket(AF_INET6, SOCK_STREAM, 0);
    struct sockaddr_in6 loop6 = {.sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT};
    bool has_ipv6 = probe >= 0 && bind(probe, (struct sockaddr *)&loop6, sizeof loop6) == 0;
    if (probe >= 0)
        close(probe);
    if (!has_ipv6)
        skip(); /* a machine without IPv6 loopback */
    corral_error err = {{0}};
    http_config config = {.host = "::1", .port = 0, .max_body_bytes = 1 << 20};
    http_server *v6 = http_server_start(&config, routes_models.routes, routes_models.n_routes,
                                        &g_server, &err);
    if (!v6)
        fail_msg("%s", err.message);
    unsigned port = http_server_port(v6);
    assert_true(port > 0);
    char url[64];
    snprintf(url, sizeof url, "http://[::1]:%u/api/tags", port);
    response r = {0, calloc(1, 1), 0};
    CURL *curl = curl_easy_init();
    curl_easy_setopt(curl, CURLOPT_URL, url);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, &r);
    assert_int_equal(curl_easy_perform(curl), CURLE_OK);
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &r.status);
    curl_easy_cleanup(curl);
    http_server_stop(v6);
    assert_int_equal(r.status, 200); /* and the Host guard takes [::1] as loopback */
    free(r.body);

    config.host = "localhost"; /* a name, as ollama listens on one (from /etc/hosts: no DNS) */
    http_server *named = http_server_start(&config, routes_models.routes,
                                           routes_models.n_routes, &g_server, &err);
    if (!named)
        fail_msg("%s", err.message);
    assert_true(http_server_port(named) > 0);
    http_server_stop(named);
}

static int setup(void **state)
{
    (void)state;
    const char *fixtures = getenv("CORRAL_FIXTURES");
    char path[4096];
    snprintf(path, sizeof path, "%s/stories260K.gguf", fixtures ? fixtures : "tests/fixtures");
    g_gguf = file_fixture_read(path, &g_gguf_len);
    corral_digest_of(g_gguf, g_gguf_len, g_gguf_digest);
    g_root = store_fixture_make_root();
    corral_error err = {{0}};
    g_server.store = corral_store_open(g_root, &err);
    assert_non_null(g_server.store);
    g_server.sched = NULL; /* these routes must not need it */
    g_port = free_port();
    http_config config = {.host = "127.0.0.1", .port = g_port, .max_body_bytes = 1 << 20};
    g_http = http_server_start(&config, routes_models.routes, routes_models.n_routes, &g_server,
                               &err);
    if (!g_http)
        fail_msg("%s", err.message);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    http_server_stop(g_http);
    corral_store_close(g_server.store);
    store_fixture_remove_root(g_root);
    free(g_gguf);
    curl_global_cleanup();
    return 0;
}

static void upload_gguf(void)
{
    char path[128];
    snprintf(path, sizeof path, "/api/blobs/%s", g_gguf_digest);
    response r = call("POST", path, g_gguf, g_gguf_len);
    assert_true(r.status == 201 || r.status == 200);
    free(r.body);
}

static void create_stories(const char *name)
{
    upload_gguf();
    char body[1024];
    snprintf(body, sizeof body,
             "{\"model\":\"%s\",\"files\":{\"stories260K.gguf\":\"%s\"},"
             "\"template\":\"{{ .System }} {{ .Prompt }}\",\"system\":\"Be brief.\","
             "\"parameters\":{\"temperature\":0.5,\"num_ctx\":128.9,\"stop\":[\"a\",\"b\"],"
             "\"unknown_option\":1},\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],"
             "\"license\":\"MIT\",\"stream\":false}",
             name, g_gguf_digest);
    response r = call_json("POST", "/api/create", body);
    if (r.status != 200)
        fail_msg("create: %ld %s", r.status, r.body);
    free(r.body);
}

/* ---- blobs ---- */

static void test_blob_upload_is_201_then_200_and_head_finds_it(void **state)
{
    (void)state;
    char path[128];
    snprintf(path, sizeof path, "/api/blobs/%s", g_gguf_digest);
    response r = call("POST", path, g_gguf, g_gguf_len);
    assert_true(r.status == 201 || r.status == 200); /* another test may have uploaded it */
    free(r.body);
    r = call("POST", path, g_gguf, g_gguf_len);
    assert_int_equal(r.status, 200);
    free(r.body);
    r = call("HEAD", path, NULL, 0);
    assert_int_equal(r.status, 200);
    free(r.body);
}

static void test_blob_head_unknown_is_404_and_bad_digest_400(void **state)
{
    (void)state;
    response r = call("HEAD", "/api/blobs/sha256:"
                              "0000000000000000000000000000000000000000000000000000000000000000",
                      NULL, 0);
    assert_int_equal(r.status, 404);
    free(r.body);
    r = call("HEAD", "/api/blobs/sha256:1234", NULL, 0);
    assert_int_equal(r.status, 400);
    free(r.body);
    r = call("HEAD", "/api/blobs/..%2F..%2Fetc%2Fpasswd", NULL, 0);
    assert_int_equal(r.status, 400);
    free(r.body);
}

static void test_blob_upload_with_wrong_digest_is_400_and_stores_nothing(void **state)
{
    (void)state;
    const char *path = "/api/blobs/sha256:"
                       "1111111111111111111111111111111111111111111111111111111111111111";
    expect_error("POST", path, "not the right bytes", 400, "digest mismatch");
    response r = call("HEAD", path, NULL, 0);
    assert_int_equal(r.status, 404);
    free(r.body);
}

/* ---- create ---- */

static void test_create_streams_ollama_statuses(void **state)
{
    (void)state;
    upload_gguf();
    char body[512];
    snprintf(body, sizeof body,
             "{\"model\":\"streamed\",\"files\":{\"stories260K.gguf\":\"%s\"},"
             "\"system\":\"streamed system\"}", g_gguf_digest);
    response r = call_json("POST", "/api/create", body);
    assert_int_equal(r.status, 200);
    char expected[256];
    snprintf(expected, sizeof expected, "{\"status\":\"parsing GGUF\"}\n"
             "{\"status\":\"using existing layer %s\"}\n", g_gguf_digest);
    assert_memory_equal(r.body, expected, strlen(expected));
    assert_non_null(strstr(r.body, "{\"status\":\"creating new layer sha256:"));
    const char *tail = "{\"status\":\"writing manifest\"}\n{\"status\":\"success\"}\n";
    assert_true(r.len > strlen(tail));
    assert_string_equal(r.body + r.len - strlen(tail), tail);
    free(r.body);
}

static void test_create_without_stream_answers_only_success(void **state)
{
    (void)state;
    upload_gguf();
    char body[512];
    snprintf(body, sizeof body,
             "{\"name\":\"quiet\",\"files\":{\"m.gguf\":\"%s\"},\"stream\":false}", g_gguf_digest);
    response r = call_json("POST", "/api/create", body);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.body, "{\"status\":\"success\"}");
    free(r.body);
    /* a model without these texts: ollama's show leaves them out (omitempty), not "" */
    r = call_json("POST", "/api/show", "{\"model\":\"quiet\"}");
    assert_int_equal(r.status, 200);
    json_t *show = parse(&r);
    static const char *const absent[] = {"license", "parameters", "template", "system",
                                         "messages"};
    for (size_t i = 0; i < sizeof absent / sizeof absent[0]; i++)
        if (json_object_get(show, absent[i]))
            fail_msg("show has %s: %s", absent[i], r.body);
    assert_non_null(json_object_get(show, "modelfile"));
    json_decref(show);
    free(r.body);
}

static void test_create_from_existing_model_keeps_its_layers(void **state)
{
    (void)state;
    create_stories("base-model");
    response r = call_json("POST", "/api/create",
                           "{\"model\":\"derived\",\"from\":\"base-model\",\"system\":\"Other.\","
                           "\"parameters\":{\"top_k\":7},\"stream\":false}");
    assert_int_equal(r.status, 200);
    free(r.body);
    r = call_json("POST", "/api/show", "{\"model\":\"derived\"}");
    assert_int_equal(r.status, 200);
    json_t *show = parse(&r);
    assert_string_equal(json_string_value(json_object_get(show, "system")), "Other.");
    assert_string_equal(json_string_value(json_object_get(show, "template")),
                        "{{ .System }} {{ .Prompt }}");
    const char *params = json_string_value(json_object_get(show, "parameters"));
    assert_non_null(strstr(params, "top_k                          7"));
    assert_non_null(strstr(params, "temperature                    0.5"));
    json_decref(show);
    free(r.body);
}

/* As ollama: a base model the store lacks is pulled first (here the demo model, which comes
 * from inside the binary), its progress streamed as /api/pull's, without its "success". */
static void test_create_pulls_a_missing_base_model(void **state)
{
    (void)state;
    response r = call_json("POST", "/api/create",
                           "{\"model\":\"terse-tolstoy\",\"from\":\"tiny-tolstoy\","
                           "\"system\":\"Be terse.\"}");
    assert_int_equal(r.status, 200);
    const char *pulling = strstr(r.body, "{\"status\":\"pulling manifest\"}\n");
    const char *blob = strstr(r.body, "\"digest\":\"sha256:");
    const char *success = strstr(r.body, "{\"status\":\"success\"}");
    assert_non_null(pulling);
    assert_non_null(blob);
    assert_non_null(success);
    assert_true(pulling < blob && blob < success);
    assert_null(strstr(success + strlen("{\"status\":\"success\"}"), "success"));
    assert_non_null(strstr(r.body, "\"status\":\"using existing layer sha256:"));
    free(r.body);
    r = call_json("POST", "/api/show", "{\"model\":\"terse-tolstoy\"}");
    assert_int_equal(r.status, 200);
    json_t *show = parse(&r);
    assert_string_equal(json_string_value(json_object_get(show, "system")), "Be terse.");
    json_decref(show);
    free(r.body);
    r = call_json("POST", "/api/show", "{\"model\":\"tiny-tolstoy\"}");
    assert_int_equal(r.status, 200); /* the base stays, as after a pull */
    free(r.body);
}

/* A registry that does not know the base model: 404 before the reply starts, stream or not. */
static void test_create_from_a_model_no_registry_has_is_404(void **state)
{
    (void)state;
    fake_registry *fake = fake_registry_start(FAKE_HOSTILE_MANIFEST);
    char body[512];
    snprintf(body, sizeof body,
             "{\"model\":\"m\",\"from\":\"%s/test/absent\",\"insecure\":true}",
             fake_registry_host(fake));
    char expected[256];
    snprintf(expected, sizeof expected, "model '%s/test/absent' not found",
             fake_registry_host(fake));
    expect_error("POST", "/api/create", body, 404, expected);
    snprintf(body, sizeof body,
             "{\"model\":\"m\",\"from\":\"%s/test/absent\",\"insecure\":true,"
             "\"stream\":false}", fake_registry_host(fake));
    expect_error("POST", "/api/create", body, 404, expected);
    fake_registry_stop(fake);
}

static void test_create_rejects_bad_requests(void **state)
{
    (void)state;
    char body[512];
    expect_error("POST", "/api/create", "{\"model\":\"bad name!\",\"from\":\"x\"}", 400,
                 "invalid model name");
    expect_error("POST", "/api/create", "{\"model\":\"m\"}", 400,
                 "neither 'from' or 'files' was specified");
    /* a base model that is not local is pulled: a host that cannot resolve fails at once */
    expect_error("POST", "/api/create",
                 "{\"model\":\"m\",\"from\":\"no-such-host.invalid/library/none\"}", 502,
                 "no-such-host.invalid");
    expect_error("POST", "/api/create", "", 400, "missing request body");
    expect_error("POST", "/api/create", "{not json", 400, "");
    snprintf(body, sizeof body,
             "{\"model\":\"m\",\"files\":{\"a.gguf\":\"%s\"},\"parameters\":{\"top_k\":\"x\"}}",
             g_gguf_digest);
    expect_error("POST", "/api/create", body, 400, "option \"top_k\" must be of type integer");
    snprintf(body, sizeof body,
             "{\"model\":\"m\",\"files\":{\"a.gguf\":\"%s\"},\"parameters\":{\"stop\":[1]}}",
             g_gguf_digest);
    expect_error("POST", "/api/create", body, 400, "option \"stop\" must be of an array");
    snprintf(body, sizeof body, "{\"model\":\"m\",\"files\":{\"a.gguf\":\"%s\"},"
             "\"quantize\":\"q2_K\"}", g_gguf_digest);
    expect_error("POST", "/api/create", body, 400,
                 "unsupported quantization type q2_K - supported types are Q4_0");
    snprintf(body, sizeof body, "{\"model\":\"m\",\"files\":{\"../a.gguf\":\"%s\"}}",
             g_gguf_digest);
    expect_error("POST", "/api/create", body, 400, "invalid file path");
    expect_error("POST", "/api/create",
                 "{\"model\":\"m\",\"files\":{\"a.gguf\":\"sha256:"
                 "2222222222222222222222222222222222222222222222222222222222222222\"}}",
                 404, "not found");
    snprintf(body, sizeof body, "{\"model\":\"m\",\"files\":{\"a.gguf\":\"%s\"},"
             "\"template\":\"{{ .Prompt \"}", g_gguf_digest);
    expect_error("POST", "/api/create", body, 400, "template error");
    /* a blob that is not a GGUF */
    const char *text = "plain text, not a model";
    char digest[CORRAL_DIGEST_BUF], path[128];
    corral_digest_of(text, strlen(text), digest);
    snprintf(path, sizeof path, "/api/blobs/%s", digest);
    response r = call("POST", path, text, strlen(text));
    assert_int_equal(r.status, 201);
    free(r.body);
    snprintf(body, sizeof body, "{\"model\":\"m\",\"files\":{\"a.gguf\":\"%s\"}}", digest);
    expect_error("POST", "/api/create", body, 400, "not a valid GGUF file");
    /* none of these left a model behind */
    expect_error("POST", "/api/show", "{\"model\":\"m\"}", 404, "model 'm' not found");
}

/* ---- tags and show ---- */

static json_t *find_model(json_t *tags, const char *name)
{
    size_t i;
    json_t *m;
    json_array_foreach(json_object_get(tags, "models"), i, m)
        if (strcmp(json_string_value(json_object_get(m, "name")), name) == 0)
            return m;
    return NULL;
}

static void test_tags_lists_created_model_with_details(void **state)
{
    (void)state;
    create_stories("Tagged");
    response r = call("GET", "/api/tags", NULL, 0);
    assert_int_equal(r.status, 200);
    json_t *tags = parse(&r);
    json_t *m = find_model(tags, "Tagged:latest");
    assert_non_null(m);
    assert_string_equal(json_string_value(json_object_get(m, "model")), "Tagged:latest");
    assert_int_equal(strlen(json_string_value(json_object_get(m, "digest"))), 64);
    assert_true(json_integer_value(json_object_get(m, "size")) > (json_int_t)g_gguf_len);
    const char *modified = json_string_value(json_object_get(m, "modified_at"));
    assert_true(strlen(modified) >= 20 && modified[4] == '-' && modified[10] == 'T');
    json_t *details = json_object_get(m, "details");
    assert_string_equal(json_string_value(json_object_get(details, "format")), "gguf");
    assert_string_equal(json_string_value(json_object_get(details, "family")), "llama");
    assert_string_equal(json_string_value(json_array_get(json_object_get(details, "families"), 0)),
                        "llama");
    assert_string_equal(json_string_value(json_object_get(details, "parameter_size")), "260K");
    assert_string_equal(json_string_value(json_object_get(details, "quantization_level")), "F32");
    assert_int_equal(json_integer_value(json_object_get(details, "context_length")), 512);
    assert_int_equal(json_integer_value(json_object_get(details, "embedding_length")), 64);
    assert_string_equal(json_string_value(json_array_get(json_object_get(m, "capabilities"), 0)),
                        "completion");
    /* newest first */
    json_t *first = json_array_get(json_object_get(tags, "models"), 0);
    assert_string_equal(json_string_value(json_object_get(first, "name")), "Tagged:latest");
    json_decref(tags);
    free(r.body);
    r = call("HEAD", "/api/tags", NULL, 0);
    assert_int_equal(r.status, 200);
    free(r.body);
}

static void test_show_reports_layers_model_info_and_parameters(void **state)
{
    (void)state;
    create_stories("shown");
    /* names match case-insensitively */
    response r = call_json("POST", "/api/show", "{\"name\":\"SHOWN:Latest\"}");
    assert_int_equal(r.status, 200);
    json_t *show = parse(&r);
    assert_string_equal(json_string_value(json_object_get(show, "license")), "MIT");
    assert_string_equal(json_string_value(json_object_get(show, "system")), "Be brief.");
    assert_string_equal(json_string_value(json_object_get(show, "parameters")),
                        "num_ctx                        128\n"
                        "stop                           \"a\"\n"
                        "stop                           \"b\"\n"
                        "temperature                    0.5");
    json_t *msg = json_array_get(json_object_get(show, "messages"), 0);
    assert_string_equal(json_string_value(json_object_get(msg, "role")), "user");
    assert_string_equal(json_string_value(json_object_get(msg, "content")), "hi");
    const char *modelfile = json_string_value(json_object_get(show, "modelfile"));
    assert_non_null(strstr(modelfile, "# Modelfile generated by \"ollama show\"\n"));
    assert_non_null(strstr(modelfile, "# FROM shown:latest\n\nFROM "));
    assert_non_null(strstr(modelfile, "\nTEMPLATE {{ .System }} {{ .Prompt }}\n"));
    assert_non_null(strstr(modelfile, "\nPARAMETER stop a\nPARAMETER stop b\n"));
    assert_non_null(strstr(modelfile, "\nMESSAGE user hi\n"));
    json_t *info = json_object_get(show, "model_info");
    assert_string_equal(json_string_value(json_object_get(info, "general.architecture")), "llama");
    assert_int_equal(json_integer_value(json_object_get(info, "llama.context_length")), 512);
    assert_int_equal(json_integer_value(json_object_get(info, "general.parameter_count")),
                     260032);
    assert_null(json_object_get(info, "general.name"));
    /* arrays are null unless verbose, as ollama sends them */
    assert_true(json_is_null(json_object_get(info, "tokenizer.ggml.tokens")));
    /* tensors with or without verbose, as ollama sends them */
    assert_true(json_array_size(json_object_get(show, "tensors")) >= 1);
    assert_string_equal(json_string_value(json_object_get(json_object_get(show, "details"),
                                                          "family")), "llama");
    json_decref(show);
    free(r.body);

    r = call_json("POST", "/api/show", "{\"model\":\"shown\",\"verbose\":true}");
    assert_int_equal(r.status, 200);
    show = parse(&r);
    info = json_object_get(show, "model_info");
    assert_int_equal(json_array_size(json_object_get(info, "tokenizer.ggml.tokens")), 512);
    json_t *tensor = json_array_get(json_object_get(show, "tensors"), 0);
    assert_non_null(json_object_get(tensor, "name"));
    assert_non_null(json_object_get(tensor, "type"));
    assert_true(json_array_size(json_object_get(tensor, "shape")) >= 1);
    json_decref(show);
    free(r.body);
}

static void test_show_errors(void **state)
{
    (void)state;
    expect_error("POST", "/api/show", "{\"model\":\"nope\"}", 404, "model 'nope' not found");
    expect_error("POST", "/api/show", "{\"model\":\"a b\"}", 400, "invalid model name");
    expect_error("POST", "/api/show", "{}", 400, "model is required");
    expect_error("POST", "/api/show", "[1]", 400, "JSON object");
}

/* ---- create with quantization ---- */

static const char *fixture_path(const char *name)
{
    static char path[4096];
    const char *fixtures = getenv("CORRAL_FIXTURES");
    snprintf(path, sizeof path, "%s/%s", fixtures ? fixtures : "tests/fixtures", name);
    return path;
}

/* Upload a fixture as a blob; its size in *len. */
static void upload_fixture(const char *name, char digest[CORRAL_DIGEST_BUF], size_t *len)
{
    char *data = file_fixture_read(fixture_path(name), len);
    corral_digest_of(data, *len, digest);
    char path[128];
    snprintf(path, sizeof path, "/api/blobs/%s", digest);
    response r = call("POST", path, data, *len);
    assert_true(r.status == 201 || r.status == 200);
    free(r.body);
    free(data);
}

/* A draft model (draft_files, a Modelfile's DRAFT) must share the model's vocabulary: qwen3's
 * tiny file drafts for qwen2's (one BPE vocabulary), stories260K's cannot. */
static void test_create_with_a_draft_model(void **state)
{
    (void)state;
    char model[CORRAL_DIGEST_BUF], draft[CORRAL_DIGEST_BUF], body[1024];
    size_t len;
    upload_fixture("arch/qwen2.gguf", model, &len);
    upload_fixture("arch/qwen3.gguf", draft, &len);
    upload_gguf();
    snprintf(body, sizeof body, "{\"model\":\"drafted\",\"files\":{\"m.gguf\":\"%s\"},"
             "\"draft_files\":{\"d.gguf\":\"%s\"},\"stream\":false}", model, draft);
    response r = call_json("POST", "/api/create", body);
    if (r.status != 200)
        fail_msg("create: %ld %s", r.status, r.body);
    free(r.body);
    r = call_json("POST", "/api/show", "{\"model\":\"drafted\"}");
    assert_int_equal(r.status, 200);
    json_t *show = parse(&r);
    const char *modelfile = json_string_value(json_object_get(show, "modelfile"));
    char line[256];
    snprintf(line, sizeof line, "DRAFT %s/blobs/sha256-%s\n", g_root, draft + 7);
    if (!strstr(modelfile, line))
        fail_msg("no '%s' in %s", line, modelfile);
    json_decref(show);
    free(r.body);
    /* a model made from it keeps the draft */
    r = call_json("POST", "/api/create",
                  "{\"model\":\"drafted2\",\"from\":\"drafted\",\"stream\":false}");
    assert_int_equal(r.status, 200);
    free(r.body);
    r = call_json("POST", "/api/show", "{\"model\":\"drafted2\"}");
    assert_non_null(strstr(r.body, "DRAFT "));
    free(r.body);
    snprintf(body, sizeof body, "{\"model\":\"m\",\"files\":{\"m.gguf\":\"%s\"},"
             "\"draft_files\":{\"d.gguf\":\"%s\"}}", model, g_gguf_digest);
    expect_error("POST", "/api/create", body, 400,
                 "'d.gguf' cannot draft for this model: its vocabulary is not the model's");
    snprintf(body, sizeof body, "{\"model\":\"m\",\"files\":{\"m.gguf\":\"%s\"},"
             "\"draft_files\":{\"d.gguf\":\"%s\"}}", model, model);
    expect_error("POST", "/api/create", body, 400, "must not be the model itself");
    /* new weights of another vocabulary cannot keep the base's draft */
    snprintf(body, sizeof body, "{\"model\":\"m\",\"from\":\"drafted\","
             "\"files\":{\"s.gguf\":\"%s\"}}", g_gguf_digest);
    expect_error("POST", "/api/create", body, 400, "the base model's draft");
    snprintf(body, sizeof body, "{\"model\":\"m\",\"draft_files\":{\"d.gguf\":\"%s\"}}",
             draft);
    expect_error("POST", "/api/create", body, 400, "neither 'from' or 'files' was specified");
    snprintf(body, sizeof body, "{\"model\":\"m\",\"files\":{\"m.gguf\":\"%s\"},"
             "\"draft_quantize\":\"q4_K_M\"}", model);
    expect_error("POST", "/api/create", body, 400, "--draft-quantize requires a DRAFT model");
    snprintf(body, sizeof body, "{\"model\":\"m\",\"files\":{\"m.gguf\":\"%s\"},"
             "\"draft_files\":{\"d.gguf\":\"%s\"},\"draft_quantize\":\"q3_K\"}", model,
             draft);
    expect_error("POST", "/api/create", body, 400, "unsupported quantization type q3_K");
}

/* The objects of an NDJSON body. */
static json_t *parse_lines(const response *r)
{
    json_t *lines = json_array();
    for (const char *line = r->body; *line;) {
        const char *end = strchr(line, '\n');
        assert_non_null(end);
        json_error_t jerr;
        json_t *v = json_loadb(line, (size_t)(end - line), 0, &jerr);
        if (!v)
            fail_msg("not a JSON line (%s): %.*s", jerr.text, (int)(end - line), line);
        json_array_append_new(lines, v);
        line = end + 1;
    }
    return lines;
}

static const char *status_of(const json_t *lines, size_t i)
{
    return json_string_value(json_object_get(json_array_get(lines, i), "status"));
}

static json_t *show_details(const char *model)
{
    char body[256];
    snprintf(body, sizeof body, "{\"model\":\"%s\"}", model);
    response r = call_json("POST", "/api/show", body);
    assert_int_equal(r.status, 200);
    json_t *show = parse(&r);
    free(r.body);
    return show;
}

/* A metadata-only GGUF of architecture arch (its context and embedding lengths, file type 4,
 * and `<arch>.<extra_key>` = extra_value when extra_key is given) uploaded and created as
 * model; its /api/show. show reads no weights. */
static json_t *show_metadata_only_model(const char *model, const char *arch,
                                        const char *extra_key, uint32_t extra_value)
{
    char path[] = "/tmp/corral-test-show-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    char key[3][96];
    snprintf(key[0], sizeof key[0], "%s.context_length", arch);
    snprintf(key[1], sizeof key[1], "%s.embedding_length", arch);
    snprintf(key[2], sizeof key[2], "%s.%s", arch, extra_key ? extra_key : "");
    corral_error err;
    gguf_writer *w = gguf_writer_create();
    assert_non_null(w);
    bool ok = gguf_writer_add_str(w, "general.architecture", arch, strlen(arch), &err) &&
              gguf_writer_add_u32(w, "general.file_type", 4, &err) &&
              gguf_writer_add_u32(w, key[0], 131072, &err) &&
              gguf_writer_add_u32(w, key[1], 2880, &err) &&
              (!extra_key || gguf_writer_add_u32(w, key[2], extra_value, &err)) &&
              gguf_writer_begin(w, path, &err) && gguf_writer_finish(w, &err);
    if (!ok)
        fail_msg("%s", err.message);
    gguf_writer_free(w);
    size_t len;
    char *data = file_fixture_read(path, &len), digest[CORRAL_DIGEST_BUF], url[128], body[512];
    corral_digest_of(data, len, digest);
    snprintf(url, sizeof url, "/api/blobs/%s", digest);
    response r = call("POST", url, data, len);
    assert_true(r.status == 201 || r.status == 200);
    free(r.body);
    snprintf(body, sizeof body,
             "{\"model\":\"%s\",\"files\":{\"m.gguf\":\"%s\"},\"stream\":false}", model,
             digest);
    r = call_json("POST", "/api/create", body);
    if (r.status != 200)
        fail_msg("create: %ld %s", r.status, r.body);
    free(r.body);
    free(data);
    unlink(path);
    return show_details(model);
}

static bool has_capability(json_t *show, const char *name)
{
    size_t i;
    json_t *v;
    json_array_foreach(json_object_get(show, "capabilities"), i, v)
        if (strcmp(json_string_value(v), name) == 0)
            return true;
    return false;
}

/* A GGUF as ollama's first gpt-oss converter labels it (architecture gptoss, file type 4,
 * ollama's MXFP4): /api/show names its family and quantization as ollama does, and harmony
 * (which reads the family) gives it tools and thinking. */
static void test_show_reports_ollama_gptoss_family(void **state)
{
    (void)state;
    json_t *show = show_metadata_only_model("gptoss-blob", "gptoss", NULL, 0);
    json_t *details = json_object_get(show, "details");
    assert_string_equal(json_string_value(json_object_get(details, "family")), "gptoss");
    assert_string_equal(json_string_value(json_object_get(details, "quantization_level")),
                        "MXFP4");
    assert_true(has_capability(show, "tools") && has_capability(show, "thinking"));
    json_decref(show);
}

/* A file that names a vision tower the engine does not read (granite's, under
 * `granite.vision.*`) would refuse images, so /api/show does not offer them; ollama lists
 * vision from the key alone. (A tower it reads is listed: integration_vision; llama4's, which
 * it now reads, integration_vision_llama4.) */
static void test_show_lists_vision_only_for_a_tower_the_engine_reads(void **state)
{
    (void)state;
    json_t *show = show_metadata_only_model("granite-tower", "granite", "vision.block_count", 24);
    assert_true(has_capability(show, "completion"));
    assert_false(has_capability(show, "vision"));
    json_decref(show);
}

static size_t count_quantize_leftovers(void)
{
    DIR *dir = opendir(store_fixture_path(g_root, "blobs"));
    assert_non_null(dir);
    size_t n = 0;
    for (struct dirent *e; (e = readdir(dir));)
        n += e->d_name[0] != '.' && strncmp(e->d_name, "sha256-", 7) != 0;
    closedir(dir);
    return n;
}

static void test_create_quantizes_streaming_ollama_statuses(void **state)
{
    (void)state;
    char digest[CORRAL_DIGEST_BUF], body[512];
    size_t len;
    upload_fixture("tiny-tolstoy-f32.gguf", digest, &len);
    snprintf(body, sizeof body, "{\"model\":\"tolstoy-q4\",\"files\":{\"t.gguf\":\"%s\"},"
             "\"quantize\":\"q4_K_M\"}", digest);
    response r = call_json("POST", "/api/create", body);
    assert_int_equal(r.status, 200);
    json_t *lines = parse_lines(&r);
    size_t n = json_array_size(lines), i = 0;
    assert_string_equal(status_of(lines, i++), "parsing GGUF");
    json_int_t completed = 0;
    for (; i < n && strcmp(status_of(lines, i), "quantizing F32 model to Q4_K_M") == 0; i++) {
        json_t *line = json_array_get(lines, i);
        assert_string_equal(json_string_value(json_object_get(line, "digest")),
                            "0000000000000000000");
        assert_int_equal(json_integer_value(json_object_get(line, "total")), (json_int_t)len);
        json_int_t now = json_integer_value(json_object_get(line, "completed"));
        assert_true(now >= completed);
        completed = now;
    }
    assert_true(i > 2);
    assert_int_equal(completed, (json_int_t)len);
    assert_string_equal(status_of(lines, i++), "verifying conversion");
    /* the new weights are a new layer; the uploaded file is not one */
    const char *layer = status_of(lines, i++);
    assert_non_null(strstr(layer, "creating new layer sha256:"));
    assert_null(strstr(layer, digest));
    assert_string_equal(status_of(lines, n - 2), "writing manifest");
    assert_string_equal(status_of(lines, n - 1), "success");
    char path[128];
    snprintf(path, sizeof path, "/api/blobs/%s", strstr(layer, "sha256:"));
    response head = call("HEAD", path, NULL, 0);
    assert_int_equal(head.status, 200);
    free(head.body);
    json_decref(lines);
    free(r.body);

    json_t *show = show_details("tolstoy-q4");
    assert_string_equal(json_string_value(json_object_get(json_object_get(show, "details"),
                                                          "quantization_level")), "Q4_K_M");
    json_t *info = json_object_get(show, "model_info");
    assert_int_equal(json_integer_value(json_object_get(info, "general.file_type")), 15);
    assert_int_equal(json_integer_value(json_object_get(info, "general.parameter_count")),
                     4492032);
    json_decref(show);
    r = call("GET", "/api/tags", NULL, 0);
    json_t *tags = parse(&r);
    json_t *details = json_object_get(find_model(tags, "tolstoy-q4:latest"), "details");
    assert_string_equal(json_string_value(json_object_get(details, "quantization_level")),
                        "Q4_K_M");
    assert_string_equal(json_string_value(json_object_get(details, "parameter_size")), "4.49M");
    json_decref(tags);
    free(r.body);
    assert_int_equal(count_quantize_leftovers(), 0);
}

/* From an existing model: its other layers stay; the weights are replaced in place. */
static void test_create_quantizes_an_existing_model_without_streaming(void **state)
{
    (void)state;
    create_stories("stories-f32");
    response r = call_json("POST", "/api/create",
                           "{\"model\":\"stories-q4\",\"from\":\"stories-f32\","
                           "\"quantization\":\"q4_k_s\",\"stream\":false}");
    assert_int_equal(r.status, 200);
    assert_string_equal(r.body, "{\"status\":\"success\"}");
    free(r.body);
    json_t *show = show_details("stories-q4");
    assert_string_equal(json_string_value(json_object_get(json_object_get(show, "details"),
                                                          "quantization_level")), "Q4_K_S");
    assert_string_equal(json_string_value(json_object_get(show, "system")), "Be brief.");
    const char *modelfile = json_string_value(json_object_get(show, "modelfile"));
    assert_null(strstr(modelfile, g_gguf_digest + 7)); /* FROM names the new blob */
    json_decref(show);
    show = show_details("stories-f32");
    assert_string_equal(json_string_value(json_object_get(json_object_get(show, "details"),
                                                          "quantization_level")), "F32");
    json_decref(show);
}

/* The quantized file becomes the model's blob by rename: when that fails (a directory in the
 * blob's place) the create fails, and neither the scratch file nor a blob stays. */
static void test_create_that_cannot_store_its_quantized_file_leaves_nothing(void **state)
{
    (void)state;
    char digest[CORRAL_DIGEST_BUF], body[512];
    size_t len;
    upload_fixture("tiny-tolstoy-f32.gguf", digest, &len);
    snprintf(body, sizeof body, "{\"model\":\"tolstoy-q6\",\"files\":{\"t.gguf\":\"%s\"},"
             "\"quantize\":\"q6_K\",\"stream\":false}", digest);
    response r = call_json("POST", "/api/create", body);
    assert_int_equal(r.status, 200);
    free(r.body);
    json_t *show = show_details("tolstoy-q6");
    const char *from = strstr(json_string_value(json_object_get(show, "modelfile")),
                              "/blobs/sha256-");
    assert_non_null(from);
    char blob[128];
    snprintf(blob, sizeof blob, "blobs/%.71s", from + strlen("/blobs/"));
    json_decref(show);
    r = call_json("DELETE", "/api/delete", "{\"model\":\"tolstoy-q6\"}");
    assert_int_equal(r.status, 200);
    free(r.body);
    assert_false(store_fixture_exists(g_root, blob));

    assert_int_equal(mkdir(store_fixture_path(g_root, blob), 0755), 0);
    expect_error("POST", "/api/create", body, 500, "cannot rename");
    assert_int_equal(rmdir(store_fixture_path(g_root, blob)), 0);
    assert_int_equal(count_quantize_leftovers(), 0);
    expect_error("POST", "/api/show", "{\"model\":\"tolstoy-q6\"}", 404, "not found");
}

static void test_create_refuses_to_quantize_a_quantized_model(void **state)
{
    (void)state;
    char digest[CORRAL_DIGEST_BUF], body[512];
    size_t len;
    upload_fixture("quant/rand-e256-Q4_0.gguf", digest, &len);
    snprintf(body, sizeof body, "{\"model\":\"requantized\",\"files\":{\"r.gguf\":\"%s\"},"
             "\"quantize\":\"q4_K_M\"}", digest);
    expect_error("POST", "/api/create", body, 400,
                 "quantization is only supported for F16, BF16 and F32 models");
    expect_error("POST", "/api/show", "{\"model\":\"requantized\"}", 404, "not found");
    assert_int_equal(count_quantize_leftovers(), 0);
}

/* The digest of the blob a model's DRAFT line names (its /api/show modelfile). */
static void draft_digest_of(const char *model, char digest[CORRAL_DIGEST_BUF])
{
    json_t *show = show_details(model);
    const char *modelfile = json_string_value(json_object_get(show, "modelfile"));
    const char *line = strstr(modelfile, "DRAFT ");
    assert_non_null(line);
    const char *blob = strstr(line, "/blobs/sha256-");
    assert_non_null(blob);
    snprintf(digest, CORRAL_DIGEST_BUF, "sha256:%.64s", blob + strlen("/blobs/sha256-"));
    json_decref(show);
}

/* The GGUF file type of a blob in the store. */
static uint32_t blob_file_type(const char *digest)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/blobs/sha256-%s", g_root, digest + 7);
    corral_error err;
    gguf_file *f = gguf_open(path, &err);
    if (!f)
        fail_msg("%s", err.message);
    uint32_t type = 0;
    assert_true(gguf_get_u32(f, "general.file_type", &type, &err));
    gguf_close(f);
    return type;
}

/* draft_quantize (ollama's create --draft-quantize) rewrites the draft's weights as quantize
 * does the model's: after the model's when both are asked, or alone. A quantized draft is
 * refused before anything is written. */
static void test_create_quantizes_the_draft_model(void **state)
{
    (void)state;
    char model[CORRAL_DIGEST_BUF], draft[CORRAL_DIGEST_BUF], body[1024];
    size_t len;
    upload_fixture("arch/qwen2.gguf", model, &len);
    upload_fixture("arch/qwen3.gguf", draft, &len);
    snprintf(body, sizeof body, "{\"model\":\"dq\",\"files\":{\"m.gguf\":\"%s\"},"
             "\"draft_files\":{\"d.gguf\":\"%s\"},\"quantize\":\"q8_0\","
             "\"draft_quantize\":\"q8_0\"}", model, draft);
    response r = call_json("POST", "/api/create", body);
    if (r.status != 200)
        fail_msg("create: %ld %s", r.status, r.body);
    json_t *lines = parse_lines(&r);
    size_t n = json_array_size(lines), model_line = n, draft_line = n;
    for (size_t i = 0; i < n; i++) {
        const char *status = status_of(lines, i);
        if (status && strcmp(status, "quantizing F32 model to Q8_0") == 0 && model_line == n)
            model_line = i;
        if (status && strcmp(status, "quantizing F32 draft model to Q8_0") == 0 &&
            draft_line == n)
            draft_line = i;
    }
    assert_true(model_line < draft_line && draft_line < n);
    assert_string_equal(status_of(lines, n - 1), "success");
    json_decref(lines);
    free(r.body);
    char drafted[CORRAL_DIGEST_BUF];
    draft_digest_of("dq", drafted);
    assert_string_not_equal(drafted, draft);
    assert_int_equal(blob_file_type(drafted), 7); /* Q8_0 */
    json_t *show = show_details("dq");
    assert_string_equal(json_string_value(json_object_get(json_object_get(show, "details"),
                                                          "quantization_level")), "Q8_0");
    json_decref(show);

    /* the draft alone, without streaming: the model's weights stay as they are */
    snprintf(body, sizeof body, "{\"model\":\"dq2\",\"files\":{\"m.gguf\":\"%s\"},"
             "\"draft_files\":{\"d.gguf\":\"%s\"},\"draft_quantize\":\"Q8_0\","
             "\"stream\":false}", model, draft);
    r = call_json("POST", "/api/create", body);
    if (r.status != 200)
        fail_msg("create: %ld %s", r.status, r.body);
    free(r.body);
    char drafted2[CORRAL_DIGEST_BUF];
    draft_digest_of("dq2", drafted2);
    assert_string_equal(drafted2, drafted);
    show = show_details("dq2");
    assert_string_equal(json_string_value(json_object_get(json_object_get(show, "details"),
                                                          "quantization_level")), "F32");
    json_decref(show);

    /* a quantized draft is refused before the reply starts, with the model's quantization too */
    snprintf(body, sizeof body, "{\"model\":\"dq3\",\"files\":{\"m.gguf\":\"%s\"},"
             "\"draft_files\":{\"d.gguf\":\"%s\"},\"quantize\":\"q8_0\","
             "\"draft_quantize\":\"q8_0\"}", model, drafted);
    expect_error("POST", "/api/create", body, 400,
                 "the draft model: quantization is only supported for F16, BF16 and F32 models");
    expect_error("POST", "/api/show", "{\"model\":\"dq3\"}", 404, "not found");
    assert_int_equal(count_quantize_leftovers(), 0);
}

/* ---- Hugging Face checkpoints ---- */

/* Upload every file of a checkpoint directory; the files map of a create request. */
static json_t *upload_checkpoint(const char *dir)
{
    static const char *const names[] = {"config.json", "tokenizer.json", "tokenizer_config.json",
                                        "generation_config.json", "model.safetensors.index.json",
                                        "model-00001-of-00002.safetensors",
                                        "model-00002-of-00002.safetensors", "tokenizer.model",
                                        "modules.json", "1_Pooling/config.json",
                                        "2_Dense/config.json", "2_Dense/model.safetensors",
                                        "3_Dense/config.json", "3_Dense/model.safetensors"};
    json_t *files = json_object();
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (!store_fixture_exists(dir, names[i]))
            continue;
        size_t len;
        char *data = file_fixture_read(store_fixture_path(dir, names[i]), &len);
        char digest[CORRAL_DIGEST_BUF], path[128];
        corral_digest_of(data, len, digest);
        snprintf(path, sizeof path, "/api/blobs/%s", digest);
        response r = call("POST", path, data, len);
        assert_true(r.status == 201 || r.status == 200);
        free(r.body);
        free(data);
        json_object_set_new(files, names[i], json_string(digest));
    }
    return files;
}

static char *create_body(const char *model, json_t *files, const char *quantize)
{
    json_t *req = json_pack("{s:s,s:O}", "model", model, "files", files);
    if (quantize)
        json_object_set_new(req, "quantize", json_string(quantize));
    char *body = json_dumps(req, JSON_COMPACT);
    json_decref(req);
    return body;
}

/* A safetensors checkpoint's files are converted to the model's GGUF, which quantizes. */
static void test_create_converts_a_safetensors_checkpoint(void **state)
{
    (void)state;
    char *dir = store_fixture_make_root();
    hf_fixture_write(fixture_path("arch/qwen2.gguf"), dir, "Qwen2ForCausalLM", SAFETENSORS_F16,
                     hf_fixture_qwen2_regex);
    json_t *files = upload_checkpoint(dir);
    char *body = create_body("qwen2-hf", files, "q8_0");
    response r = call_json("POST", "/api/create", body);
    free(body);
    assert_int_equal(r.status, 200);
    json_t *lines = parse_lines(&r);
    size_t n = json_array_size(lines), i = 0;
    assert_string_equal(status_of(lines, i++), "parsing GGUF");
    /* the conversion streams: total the tensors' bytes, completed growing to it */
    json_int_t total = 0, completed = 0;
    for (; i < n && strcmp(status_of(lines, i), "converting model") == 0; i++) {
        json_t *line = json_array_get(lines, i);
        total = json_integer_value(json_object_get(line, "total"));
        assert_true(json_integer_value(json_object_get(line, "completed")) >= completed);
        completed = json_integer_value(json_object_get(line, "completed"));
    }
    assert_true(total > 0);
    assert_int_equal(completed, total);
    assert_string_equal(status_of(lines, i), "quantizing F16 model to Q8_0");
    assert_string_equal(status_of(lines, n - 1), "success");
    json_decref(lines);
    free(r.body);
    json_t *show = show_details("qwen2-hf");
    json_t *info = json_object_get(show, "model_info");
    assert_string_equal(json_string_value(json_object_get(info, "general.architecture")),
                        "qwen2");
    assert_string_equal(json_string_value(json_object_get(json_object_get(show, "details"),
                                                          "quantization_level")), "Q8_0");
    json_decref(show);

    /* without quantize the model is the converted F16 file */
    body = create_body("qwen2-hf-f16", files, NULL);
    r = call_json("POST", "/api/create", body);
    free(body);
    assert_int_equal(r.status, 200);
    free(r.body);
    show = show_details("qwen2-hf-f16");
    assert_string_equal(json_string_value(json_object_get(json_object_get(show, "details"),
                                                          "quantization_level")), "F16");
    json_decref(show);
    assert_int_equal(count_quantize_leftovers(), 0);
    json_decref(files);
    store_fixture_remove_root(dir);
}

/* Creates model, unquantized, from the checkpoint files uploaded; its /api/show details. */
static json_t *create_and_show(const char *model, json_t *files)
{
    char *body = create_body(model, files, NULL);
    response r = call_json("POST", "/api/create", body);
    free(body);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "{\"status\":\"success\"}"));
    free(r.body);
    return show_details(model);
}

/* A sentence-transformers BERT (its pooling module's config.json one folder down) converts
 * to an embedding model. */
static void test_create_converts_a_bert_checkpoint(void **state)
{
    (void)state;
    char *dir = store_fixture_make_root();
    hf_fixture_write(fixture_path("arch/bert.gguf"), dir, "BertModel", SAFETENSORS_F16, NULL);
    json_t *files = upload_checkpoint(dir);
    json_t *show = create_and_show("bert-hf", files);
    assert_true(has_capability(show, "embedding"));
    json_t *info = json_object_get(show, "model_info");
    assert_int_equal(json_integer_value(json_object_get(info, "bert.pooling_type")), 1);
    json_decref(show);

    /* without the pooling module's config.json the checkpoint is incomplete */
    json_object_del(files, "1_Pooling/config.json");
    char *body = create_body("bert-hf-2", files, NULL);
    expect_error("POST", "/api/create", body, 400,
                 "the checkpoint has no 1_Pooling/config.json");
    free(body);
    json_decref(files);
    store_fixture_remove_root(dir);
}

/* EmbeddingGemma's projections come in their modules' folders. */
static void test_create_converts_an_embeddinggemma_checkpoint(void **state)
{
    (void)state;
    char *dir = store_fixture_make_root();
    hf_fixture_write(fixture_path("arch/gemma-embedding.gguf"), dir, "Gemma3TextModel",
                     SAFETENSORS_BF16, NULL);
    json_t *files = upload_checkpoint(dir);
    json_t *show = create_and_show("embeddinggemma-hf", files);
    assert_true(has_capability(show, "embedding"));
    json_t *info = json_object_get(show, "model_info");
    assert_int_equal(json_integer_value(json_object_get(info,
                                                        "gemma-embedding.dense_2_feat_out")),
                     96);
    json_decref(show);
    json_decref(files);
    store_fixture_remove_root(dir);
}

/* Gemma 3 with its vision tower converts to one file that /api/show lists with vision. */
static void test_create_converts_a_gemma3_vision_checkpoint(void **state)
{
    (void)state;
    char *dir = store_fixture_make_root();
    char text[4096], mmproj[4096];
    snprintf(text, sizeof text, "%s", fixture_path("vision/gemma3-text.gguf"));
    snprintf(mmproj, sizeof mmproj, "%s", fixture_path("vision/gemma3-mmproj.gguf"));
    hf_fixture_write_vision(text, mmproj, dir, 16, SAFETENSORS_BF16);
    json_t *files = upload_checkpoint(dir);
    json_t *show = create_and_show("gemma3-vision-hf", files);
    assert_true(has_capability(show, "vision"));
    assert_string_equal(json_string_value(json_object_get(json_object_get(show, "model_info"),
                                                          "general.architecture")), "gemma3");
    json_decref(show);
    assert_int_equal(count_quantize_leftovers(), 0);
    json_decref(files);
    store_fixture_remove_root(dir);
}

/* What cannot be converted is a 400 that says why, before anything is stored. */
static void test_create_refuses_checkpoints_it_cannot_convert(void **state)
{
    (void)state;
    char *dir = store_fixture_make_root();
    hf_fixture_write(fixture_path("arch/qwen2.gguf"), dir, "GPTNeoXForCausalLM", SAFETENSORS_F16,
                     hf_fixture_qwen2_regex);
    json_t *files = upload_checkpoint(dir);
    char *body = create_body("neox", files, NULL);
    expect_error("POST", "/api/create", body, 400,
                 "unsupported architecture 'GPTNeoXForCausalLM' (`corral create --help` lists "
                 "those Corral converts)");
    free(body);

    /* an adapter is checked against the converted weights, once they exist: without
     * streaming the answer is still the 400 */
    hf_fixture_write(fixture_path("arch/qwen2.gguf"), dir, "Qwen2ForCausalLM", SAFETENSORS_F16,
                     hf_fixture_qwen2_regex);
    json_t *good = upload_checkpoint(dir);
    char adapter[CORRAL_DIGEST_BUF];
    size_t adapter_len;
    upload_fixture("lora/adapter-f32-r4.gguf", adapter, &adapter_len);
    json_t *req = json_pack("{s:s,s:O,s:{s:s},s:b}", "model", "qwen2-adapted", "files", good,
                            "adapters", "a.gguf", adapter, "stream", false);
    body = json_dumps(req, JSON_COMPACT);
    expect_error("POST", "/api/create", body, 400, "'a.gguf'");
    free(body);
    json_decref(req);
    json_decref(good);

    json_object_del(files, "config.json");
    body = create_body("neox", files, NULL);
    expect_error("POST", "/api/create", body, 400, "the checkpoint has no config.json");
    free(body);

    json_object_set_new(files, "extra.gguf", json_string(g_gguf_digest));
    body = create_body("neox", files, NULL);
    expect_error("POST", "/api/create", body, 400,
                 "'extra.gguf' is not part of a safetensors checkpoint");
    free(body);
    expect_error("POST", "/api/show", "{\"model\":\"neox\"}", 404, "not found");
    expect_error("POST", "/api/show", "{\"model\":\"qwen2-adapted\"}", 404, "not found");
    assert_int_equal(count_quantize_leftovers(), 0);
    json_decref(files);
    store_fixture_remove_root(dir);
}

/* Upload a PEFT adapter directory's two files; the adapters map of a create request. */
static json_t *upload_peft_adapter(const char *dir)
{
    static const char *const names[] = {HF_ADAPTER_CONFIG, HF_ADAPTER_WEIGHTS};
    json_t *files = json_object();
    for (size_t i = 0; i < 2; i++) {
        size_t len;
        char *data = file_fixture_read(store_fixture_path(dir, names[i]), &len);
        char digest[CORRAL_DIGEST_BUF], path[128];
        corral_digest_of(data, len, digest);
        snprintf(path, sizeof path, "/api/blobs/%s", digest);
        response r = call("POST", path, data, len);
        assert_true(r.status == 201 || r.status == 200);
        free(r.body);
        free(data);
        json_object_set_new(files, names[i], json_string(digest));
    }
    return files;
}

/* A PEFT adapter (ADAPTER ./dir/) becomes the GGUF adapter hf_adapter_convert writes for the
 * model; what does not fit the model is a 400, and no scratch file stays behind. */
static void test_create_converts_a_peft_adapter(void **state)
{
    (void)state;
    char *dir = store_fixture_make_root();
    char adapter_path[4096], base_path[4096];
    snprintf(adapter_path, sizeof adapter_path, "%s", fixture_path("lora/adapter-f32-r4.gguf"));
    snprintf(base_path, sizeof base_path, "%s", fixture_path("arch/llama-gqa.gguf"));
    hf_fixture_write_adapter(adapter_path, base_path, dir);
    hf_file files[2] = {{HF_ADAPTER_CONFIG, NULL}, {HF_ADAPTER_WEIGHTS, NULL}};
    char paths[2][512];
    for (size_t i = 0; i < 2; i++) {
        snprintf(paths[i], sizeof paths[i], "%s", store_fixture_path(dir, files[i].name));
        files[i].path = paths[i];
    }
    char out[512];
    snprintf(out, sizeof out, "%s", store_fixture_path(dir, "want.gguf"));
    corral_error err = {{0}};
    if (hf_adapter_convert(files, 2, base_path, out, &err) != HF_OK)
        fail_msg("%s", err.message);
    size_t len;
    char *want = file_fixture_read(out, &len), want_digest[CORRAL_DIGEST_BUF];
    corral_digest_of(want, len, want_digest);
    free(want);

    char model[CORRAL_DIGEST_BUF], other[CORRAL_DIGEST_BUF];
    upload_fixture("arch/llama-gqa.gguf", model, &len);
    upload_fixture("tiny-tolstoy-f16.gguf", other, &len);
    json_t *adapters = upload_peft_adapter(dir);
    json_t *req = json_pack("{s:s,s:{s:s},s:O}", "model", "llama-peft", "files", "m.gguf",
                            model, "adapters", adapters);
    char *body = json_dumps(req, JSON_COMPACT);
    response r = call_json("POST", "/api/create", body);
    free(body);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "{\"status\":\"converting adapter\"}"));
    assert_non_null(strstr(r.body, "{\"status\":\"success\"}"));
    free(r.body);
    json_t *show = show_details("llama-peft");
    const char *modelfile = json_string_value(json_object_get(show, "modelfile"));
    char line[160];
    snprintf(line, sizeof line, "sha256-%s\n", want_digest + strlen("sha256:"));
    const char *adapter_line = strstr(modelfile, "\nADAPTER ");
    assert_non_null(adapter_line);
    assert_non_null(strstr(adapter_line, line));
    json_decref(show);

    /* another llama's matrices are not llama-gqa's shapes: the converted adapter does not fit,
     * and is not stored */
    json_object_set_new(json_object_get(req, "files"), "m.gguf", json_string(other));
    json_object_set_new(req, "model", json_string("tolstoy-peft"));
    body = json_dumps(req, JSON_COMPACT);
    size_t blobs = store_fixture_count_entries(g_root, "blobs");
    expect_error("POST", "/api/create", body, 400, "the converted adapter");
    assert_int_equal(store_fixture_count_entries(g_root, "blobs"), blobs);
    free(body);
    /* PEFT's files and a GGUF adapter are not one adapter */
    json_object_set_new(json_object_get(req, "files"), "m.gguf", json_string(model));
    json_object_set_new(json_object_get(req, "adapters"), "extra.gguf", json_string(model));
    body = json_dumps(req, JSON_COMPACT);
    expect_error("POST", "/api/create", body, 400,
                 "'extra.gguf' is not part of a safetensors LoRA adapter");
    free(body);
    expect_error("POST", "/api/show", "{\"model\":\"tolstoy-peft\"}", 404, "not found");
    assert_int_equal(count_quantize_leftovers(), 0);
    json_decref(req);
    json_decref(adapters);
    store_fixture_remove_root(dir);
}

/* ---- copy and delete ---- */

static void test_copy_then_delete_collects_unreferenced_blobs(void **state)
{
    (void)state;
    /* a model with a layer nobody else has */
    upload_gguf();
    char body[512];
    snprintf(body, sizeof body, "{\"model\":\"original\",\"files\":{\"m.gguf\":\"%s\"},"
             "\"system\":\"unique system text 42\",\"stream\":false}", g_gguf_digest);
    response r = call_json("POST", "/api/create", body);
    assert_int_equal(r.status, 200);
    free(r.body);
    const char *system = "unique system text 42";
    char digest[CORRAL_DIGEST_BUF], path[128];
    corral_digest_of(system, strlen(system), digest);
    snprintf(path, sizeof path, "/api/blobs/%s", digest);

    r = call_json("POST", "/api/copy", "{\"source\":\"original\",\"destination\":\"the-copy\"}");
    assert_int_equal(r.status, 200);
    free(r.body);
    r = call_json("POST", "/api/show", "{\"model\":\"the-copy\"}");
    assert_int_equal(r.status, 200);
    free(r.body);

    r = call_json("DELETE", "/api/delete", "{\"model\":\"original\"}");
    assert_int_equal(r.status, 200);
    free(r.body);
    r = call("HEAD", path, NULL, 0);
    assert_int_equal(r.status, 200); /* the copy still uses it */
    free(r.body);
    r = call_json("DELETE", "/api/delete", "{\"name\":\"the-copy\"}");
    assert_int_equal(r.status, 200);
    free(r.body);
    r = call("HEAD", path, NULL, 0);
    assert_int_equal(r.status, 404); /* collected */
    free(r.body);
    expect_error("DELETE", "/api/delete", "{\"model\":\"the-copy\"}", 404,
                 "model 'the-copy' not found");
}

static void test_copy_and_delete_errors(void **state)
{
    (void)state;
    expect_error("POST", "/api/copy", "{\"source\":\"missing\",\"destination\":\"x\"}", 404,
                 "model \"missing\" not found");
    expect_error("POST", "/api/copy", "{\"source\":\"a b\",\"destination\":\"x\"}", 400,
                 "source \"a b\" is invalid");
    expect_error("POST", "/api/copy", "{\"source\":\"a\",\"destination\":\"x/y/z/w\"}", 400,
                 "destination \"x/y/z/w\" is invalid");
    expect_error("DELETE", "/api/delete", "{\"model\":\"bad name\"}", 400, "is invalid");
    expect_error("DELETE", "/api/delete", "{\"model\":\"missing\"}", 404,
                 "model 'missing' not found");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_blob_upload_is_201_then_200_and_head_finds_it),
        cmocka_unit_test(test_blob_head_unknown_is_404_and_bad_digest_400),
        cmocka_unit_test(test_blob_upload_with_wrong_digest_is_400_and_stores_nothing),
        cmocka_unit_test(test_create_streams_ollama_statuses),
        cmocka_unit_test(test_create_without_stream_answers_only_success),
        cmocka_unit_test(test_create_from_existing_model_keeps_its_layers),
        cmocka_unit_test(test_create_pulls_a_missing_base_model),
        cmocka_unit_test(test_create_from_a_model_no_registry_has_is_404),
        cmocka_unit_test(test_create_with_a_draft_model),
        cmocka_unit_test(test_create_quantizes_the_draft_model),
        cmocka_unit_test(test_create_rejects_bad_requests),
        cmocka_unit_test(test_create_quantizes_streaming_ollama_statuses),
        cmocka_unit_test(test_create_quantizes_an_existing_model_without_streaming),
        cmocka_unit_test(test_create_refuses_to_quantize_a_quantized_model),
        cmocka_unit_test(test_create_that_cannot_store_its_quantized_file_leaves_nothing),
        cmocka_unit_test(test_create_converts_a_safetensors_checkpoint),
        cmocka_unit_test(test_create_refuses_checkpoints_it_cannot_convert),
        cmocka_unit_test(test_create_converts_a_peft_adapter),
        cmocka_unit_test(test_create_converts_a_bert_checkpoint),
        cmocka_unit_test(test_create_converts_an_embeddinggemma_checkpoint),
        cmocka_unit_test(test_create_converts_a_gemma3_vision_checkpoint),
        cmocka_unit_test(test_show_reports_ollama_gptoss_family),
        cmocka_unit_test(test_show_lists_vision_only_for_a_tower_the_engine_reads),
        cmocka_unit_test(test_tags_lists_created_model_with_details),
        cmocka_unit_test(test_show_reports_layers_model_info_and_parameters),
        cmocka_unit_test(test_show_errors),
        cmocka_unit_test(test_copy_then_delete_collects_unreferenced_blobs),
        cmocka_unit_test(test_copy_and_delete_errors),
        cmocka_unit_test(test_listens_on_ipv6_on_a_port_the_system_chooses),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
