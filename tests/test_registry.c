/*
 * The registry client against Debian's real docker-registry (push, pull, resume from a
 * partial file, a corrupted blob, htpasswd basic auth) and against a tiny in-test registry
 * (the bearer-token flow, a realm on another host, manifests with hostile digests); and
 * /api/pull through a real `corral serve`. Tests needing docker-registry skip, saying so,
 * when it is not installed (scripts/install-deps.sh installs it).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <curl/curl.h>
#include <dirent.h>
#include <pthread.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "file_fixture.h"
#include "registry/registry.h"
#include "registry_fixture.h"
#include "reference_fixture.h"
#include "store/store.h"
#include "store_fixture.h"

static real_registry open_registry; /* shared by the tests without auth */
static real_registry private_registry; /* behind htpasswd, for one test */
static pid_t server_pid;               /* `corral serve`, for one test */

/* A registry call's status, with its error message shown when it is not the expected one. */
#define assert_registry(call, expected, err)                                                  \
    do {                                                                                      \
        corral_registry_status got_ = (call);                                                 \
        if (got_ != (expected))                                                               \
            print_message("%s -> %d: %s\n", #call, (int)got_, (err)->message);                \
        assert_int_equal(got_, (expected));                                                   \
    } while (0)

/* ---- helpers ---- */

typedef struct model_digests {
    char config[CORRAL_DIGEST_BUF], model[CORRAL_DIGEST_BUF], template[CORRAL_DIGEST_BUF];
    uint64_t model_size;
} model_digests;

/* A store at root holding name: stories260K.gguf as the model layer plus a template. A salt
 * appended to the model gives it a digest no other test shares on the registry. */
static corral_store *make_source_store(const char *root, const char *name, const char *salt,
                                       model_digests *d)
{
    corral_error err;
    corral_store *store = corral_store_open(root, &err);
    assert_non_null(store);
    size_t model_len;
    char *model = file_fixture_read(fixture("stories260K.gguf"), &model_len);
    if (salt) {
        model = realloc(model, model_len + strlen(salt));
        assert_non_null(model);
        memcpy(model + model_len, salt, strlen(salt));
        model_len += strlen(salt);
    }
    static const char template[] = "{{ .System }} {{ .Prompt }}";
    static const char config[] = "{\"model_format\":\"gguf\",\"model_family\":\"llama\","
                                 "\"file_type\":\"F32\",\"architecture\":\"amd64\",\"os\":\"linux\"}";
    assert_int_equal(corral_store_blob_write(store, model, model_len, d->model, &err), 0);
    assert_int_equal(corral_store_blob_write(store, template, strlen(template), d->template, &err),
                     0);
    assert_int_equal(corral_store_blob_write(store, config, strlen(config), d->config, &err), 0);
    d->model_size = model_len;
    free(model);
    corral_manifest *m = corral_manifest_create();
    assert_true(corral_manifest_set_config(m, CORRAL_MEDIA_CONFIG, d->config, strlen(config), &err));
    assert_true(corral_manifest_add_layer(m, CORRAL_MEDIA_MODEL, d->model, model_len, NULL, &err));
    assert_true(corral_manifest_add_layer(m, CORRAL_MEDIA_TEMPLATE, d->template, strlen(template),
                                          NULL, &err));
    corral_model_name parsed;
    assert_true(corral_model_name_parse(name, &parsed, &err));
    assert_int_equal(corral_store_manifest_write(store, &parsed, m, &err), CORRAL_STORE_OK);
    corral_manifest_free(m);
    return store;
}

/* The statuses a transfer reported, each once, in order of first appearance. */
typedef struct recorder {
    char statuses[32][48];
    size_t n;
    unsigned transfer_reports;
    unsigned midway_reports; /* 0 < completed < total */
} recorder;

static bool record(void *ctx, const corral_registry_progress *p)
{
    recorder *r = ctx;
    if (p->digest)
        r->transfer_reports++;
    if (p->digest && p->completed_bytes > 0 && p->completed_bytes < p->total_bytes)
        r->midway_reports++;
    for (size_t i = 0; i < r->n; i++)
        if (strcmp(r->statuses[i], p->status) == 0)
            return true;
    if (r->n < 32)
        snprintf(r->statuses[r->n++], sizeof r->statuses[0], "%s", p->status);
    return true;
}

static bool recorded(const recorder *r, const char *status)
{
    for (size_t i = 0; i < r->n; i++)
        if (strcmp(r->statuses[i], status) == 0)
            return true;
    return false;
}

static corral_registry_options test_options(recorder *r)
{
    /* Small parts so a 1 MB model downloads as several parallel ranged parts. */
    corral_registry_options o = {.insecure = true, .part_min_bytes = 256u << 10, .max_parts = 4,
                                 .backoff_ms = 10, .max_retries = 2};
    if (r) {
        o.progress = record;
        o.progress_ctx = r;
    }
    return o;
}

static void name_for(char *buf, size_t cap, const char *host, const char *repo)
{
    snprintf(buf, cap, "%s/test/%s:latest", host, repo);
}

static const char *blob_file(const char *root, const char *digest, const char *suffix)
{
    static char path[4096];
    snprintf(path, sizeof path, "%s/blobs/sha256-%s%s", root, digest + 7, suffix);
    return path;
}

static bool files_equal(const char *a, const char *b)
{
    size_t la, lb;
    char *da = file_fixture_read(a, &la), *db = file_fixture_read(b, &lb);
    bool same = la == lb && memcmp(da, db, la) == 0;
    free(da);
    free(db);
    return same;
}

/* Entries of root/blobs whose names contain needle. */
static size_t count_blob_entries(const char *root, const char *needle)
{
    char dir_path[4096];
    snprintf(dir_path, sizeof dir_path, "%s/blobs", root);
    DIR *dir = opendir(dir_path);
    assert_non_null(dir);
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(dir)))
        if (e->d_name[0] != '.' || strstr(e->d_name, needle))
            n += strstr(e->d_name, needle) != NULL;
    closedir(dir);
    return n;
}

static int setup_env(void **state)
{
    (void)state;
    /* A developer's own credentials must not change what the tests see. */
    unsetenv("CORRAL_REGISTRY_AUTH");
    setenv("CORRAL_REGISTRY_CREDENTIALS", "/nonexistent/corral-test-credentials.json", 1);
    return 0;
}

#define NEED_REGISTRY()                                                                       \
    do {                                                                                      \
        if (!open_registry.pid) {                                                             \
            print_message("skipped: %s is not installed (scripts/install-deps.sh)\n",         \
                          REGISTRY_BINARY);                                                   \
            skip();                                                                           \
        }                                                                                     \
    } while (0)

/* ---- against docker-registry ---- */

static void test_push_then_pull_gives_identical_manifest_and_blobs(void **state)
{
    (void)state;
    NEED_REGISTRY();
    char name[256];
    name_for(name, sizeof name, open_registry.host, "roundtrip");
    char *src_root = store_fixture_make_root(), *dst_root = store_fixture_make_root();
    model_digests d;
    corral_store *src = make_source_store(src_root, name, NULL, &d);
    corral_error err = {{0}};
    recorder push_log = {0}, pull_log = {0};
    corral_registry_options o = test_options(&push_log);
    assert_registry(corral_registry_push(src, name, &o, &err), CORRAL_REGISTRY_OK, &err);
    assert_true(recorded(&push_log, "retrieving manifest"));
    char status[48];
    snprintf(status, sizeof status, "pushing %.12s", d.model + 7);
    assert_true(recorded(&push_log, status));
    assert_true(recorded(&push_log, "pushing manifest"));
    assert_string_equal(push_log.statuses[push_log.n - 1], "success");

    /* A second push finds every blob there already. */
    assert_registry(corral_registry_push(src, name, &o, &err), CORRAL_REGISTRY_OK, &err);

    corral_store *dst = corral_store_open(dst_root, &err);
    o = test_options(&pull_log);
    assert_registry(corral_registry_pull(dst, name, &o, &err), CORRAL_REGISTRY_OK, &err);
    static const char *const pull_statuses[] = {"pulling manifest", "verifying sha256 digest",
                                                "writing manifest", "success"};
    for (size_t i = 0; i < 4; i++)
        assert_true(recorded(&pull_log, pull_statuses[i]));
    snprintf(status, sizeof status, "pulling %.12s", d.model + 7);
    assert_true(recorded(&pull_log, status));
    assert_string_equal(pull_log.statuses[pull_log.n - 1], "success");

    corral_model_name parsed;
    assert_true(corral_model_name_parse(name, &parsed, &err));
    char *src_manifest = corral_store_manifest_path(src, &parsed, &err);
    char *dst_manifest = corral_store_manifest_path(dst, &parsed, &err);
    assert_true(files_equal(src_manifest, dst_manifest));
    const char *digests[] = {d.config, d.model, d.template};
    for (size_t i = 0; i < 3; i++) {
        char a[4096];
        snprintf(a, sizeof a, "%s", blob_file(src_root, digests[i], ""));
        assert_true(files_equal(a, blob_file(dst_root, digests[i], "")));
    }
    assert_int_equal(count_blob_entries(dst_root, "partial"), 0);

    /* Pulling again fetches no blob: they are all in the store. */
    long mark = 0;
    real_registry_blob_bytes_sent(&open_registry, d.model, &mark);
    assert_registry(corral_registry_pull(dst, name, &o, &err), CORRAL_REGISTRY_OK, &err);
    assert_int_equal(real_registry_blob_bytes_sent(&open_registry, d.model, &mark), 0);

    free(src_manifest);
    free(dst_manifest);
    corral_store_close(src);
    corral_store_close(dst);
    store_fixture_remove_root(src_root);
    store_fixture_remove_root(dst_root);
}

static void write_part_state(const char *root, const char *digest, unsigned n, uint64_t offset,
                             uint64_t size, uint64_t completed)
{
    char suffix[32], json[256];
    snprintf(suffix, sizeof suffix, "-partial-%u", n);
    snprintf(json, sizeof json, "{\"N\":%u,\"Offset\":%llu,\"Size\":%llu,\"Completed\":%llu}", n,
             (unsigned long long)offset, (unsigned long long)size,
             (unsigned long long)completed);
    FILE *f = fopen(blob_file(root, digest, suffix), "w");
    assert_non_null(f);
    fputs(json, f);
    fclose(f);
}

/* What an interrupted pull leaves (ollama's layout): the partial file and part states. The
 * next pull fetches only the missing bytes, counted from the registry's access log. */
static void test_pull_resumes_from_partial_file(void **state)
{
    (void)state;
    NEED_REGISTRY();
    char name[256];
    name_for(name, sizeof name, open_registry.host, "resume");
    char *src_root = store_fixture_make_root(), *dst_root = store_fixture_make_root();
    model_digests d;
    corral_store *src = make_source_store(src_root, name, NULL, &d);
    corral_error err = {{0}};
    corral_registry_options o = test_options(NULL);
    assert_registry(corral_registry_push(src, name, &o, &err), CORRAL_REGISTRY_OK, &err);

    corral_store *dst = corral_store_open(dst_root, &err);
    size_t len;
    char *model = file_fixture_read(blob_file(src_root, d.model, ""), &len);
    uint64_t half = len / 2, second_done = 1000;
    /* Part 0 complete, part 1 partly there, in a pre-sized sparse file. */
    FILE *f = fopen(blob_file(dst_root, d.model, "-partial"), "w");
    assert_non_null(f);
    assert_int_equal(fwrite(model, 1, half + second_done, f), half + second_done);
    assert_int_equal(ftruncate(fileno(f), (off_t)len), 0);
    fclose(f);
    write_part_state(dst_root, d.model, 0, 0, half, half);
    write_part_state(dst_root, d.model, 1, half, len - half, second_done);

    long mark = 0;
    real_registry_blob_bytes_sent(&open_registry, d.model, &mark);
    uint64_t downloaded = corral_registry_downloaded_bytes();
    assert_registry(corral_registry_pull(dst, name, &o, &err), CORRAL_REGISTRY_OK, &err);
    assert_int_equal(real_registry_blob_bytes_sent(&open_registry, d.model, &mark),
                     len - half - second_done);
    /* the process-wide count (the server's corral_pull_bytes_total) has the same bytes, and
     * the config and template blobs, which this store lacked */
    struct stat config, template;
    assert_int_equal(stat(blob_file(src_root, d.config, ""), &config), 0);
    assert_int_equal(stat(blob_file(src_root, d.template, ""), &template), 0);
    assert_int_equal(corral_registry_downloaded_bytes() - downloaded,
                     len - half - second_done + (uint64_t)config.st_size +
                         (uint64_t)template.st_size);
    assert_true(files_equal(blob_file(src_root, d.model, ""), blob_file(dst_root, d.model, "")));
    assert_int_equal(count_blob_entries(dst_root, "partial"), 0);

    /* A partial file whose "completed" bytes are wrong cannot sneak into the store. */
    corral_model_name parsed;
    assert_true(corral_model_name_parse(name, &parsed, &err));
    assert_int_equal(corral_store_manifest_delete(dst, &parsed, &err), CORRAL_STORE_OK);
    model[10] ^= 0x5a;
    f = fopen(blob_file(dst_root, d.model, "-partial"), "w");
    assert_int_equal(fwrite(model, 1, half, f), half);
    assert_int_equal(ftruncate(fileno(f), (off_t)len), 0);
    fclose(f);
    write_part_state(dst_root, d.model, 0, 0, half, half);
    write_part_state(dst_root, d.model, 1, half, len - half, 0);
    assert_registry(corral_registry_pull(dst, name, &o, &err), CORRAL_REGISTRY_INVALID, &err);
    assert_non_null(strstr(err.message, "digest mismatch"));
    assert_false(store_fixture_exists(dst_root, blob_file(dst_root, d.model, "") +
                                                    strlen(dst_root) + 1));
    assert_int_equal(count_blob_entries(dst_root, "partial"), 0);

    free(model);
    corral_store_close(src);
    corral_store_close(dst);
    store_fixture_remove_root(src_root);
    store_fixture_remove_root(dst_root);
}

static void test_pull_of_corrupted_blob_fails_and_leaves_nothing(void **state)
{
    (void)state;
    NEED_REGISTRY();
    char name[256];
    name_for(name, sizeof name, open_registry.host, "corrupt");
    char *src_root = store_fixture_make_root(), *dst_root = store_fixture_make_root();
    model_digests d;
    corral_store *src = make_source_store(src_root, name, "corrupt", &d);
    corral_error err = {{0}};
    corral_registry_options o = test_options(NULL);
    assert_registry(corral_registry_push(src, name, &o, &err), CORRAL_REGISTRY_OK, &err);

    /* The registry's copy of the model changes one byte; its size stays. */
    const char *stored = real_registry_blob_file(&open_registry, d.model);
    FILE *f = fopen(stored, "r+b");
    assert_non_null(f);
    fseek(f, 4096, SEEK_SET);
    int c = fgetc(f);
    fseek(f, 4096, SEEK_SET);
    fputc(c ^ 0xff, f);
    fclose(f);

    corral_store *dst = corral_store_open(dst_root, &err);
    assert_registry(corral_registry_pull(dst, name, &o, &err), CORRAL_REGISTRY_INVALID, &err);
    assert_non_null(strstr(err.message, "digest mismatch"));
    assert_int_equal(count_blob_entries(dst_root, d.model + 7), 0); /* no blob, no partial */
    assert_int_equal(count_blob_entries(dst_root, ".corral-tmp"), 0);
    corral_model_name parsed, resolved;
    assert_true(corral_model_name_parse(name, &parsed, &err));
    assert_int_equal(corral_store_resolve(dst, &parsed, &resolved, &err), CORRAL_STORE_NOT_FOUND);

    corral_store_close(src);
    corral_store_close(dst);
    store_fixture_remove_root(src_root);
    store_fixture_remove_root(dst_root);
}

static void test_basic_auth_works_with_credentials_and_fails_cleanly_without(void **state)
{
    (void)state;
    NEED_REGISTRY();
    real_registry_start(&private_registry, true);
    const real_registry *private = &private_registry;
    char name[256];
    name_for(name, sizeof name, private->host, "private");
    char *src_root = store_fixture_make_root(), *dst_root = store_fixture_make_root();
    model_digests d;
    corral_store *src = make_source_store(src_root, name, NULL, &d);
    corral_store *dst = corral_store_open(dst_root, NULL);
    corral_error err = {{0}};
    corral_registry_options o = test_options(NULL);

    /* No credentials: a clear refusal that says where they go. */
    assert_registry(corral_registry_push(src, name, &o, &err), CORRAL_REGISTRY_UNAUTHORIZED, &err);
    assert_non_null(strstr(err.message, "requires credentials"));
    assert_non_null(strstr(err.message, "CORRAL_REGISTRY_AUTH"));
    assert_registry(corral_registry_pull(dst, name, &o, &err), CORRAL_REGISTRY_UNAUTHORIZED, &err);

    /* A wrong password is refused, not retried forever. */
    char auth[512];
    snprintf(auth, sizeof auth, "other.example=a:b %s=%s:wrong", private->host, REGISTRY_USER);
    setenv("CORRAL_REGISTRY_AUTH", auth, 1);
    assert_registry(corral_registry_push(src, name, &o, &err), CORRAL_REGISTRY_UNAUTHORIZED, &err);
    assert_non_null(strstr(err.message, "refused the credentials"));

    /* From the environment. */
    snprintf(auth, sizeof auth, "%s=%s:%s", private->host, REGISTRY_USER, REGISTRY_PASSWORD);
    setenv("CORRAL_REGISTRY_AUTH", auth, 1);
    assert_registry(corral_registry_push(src, name, &o, &err), CORRAL_REGISTRY_OK, &err);
    unsetenv("CORRAL_REGISTRY_AUTH");

    /* From the credentials file, which must be private. */
    char path[4200], json[512];
    snprintf(path, sizeof path, "%s/credentials.json", dst_root);
    snprintf(json, sizeof json, "{\"%s\":{\"username\":\"%s\",\"password\":\"%s\"}}",
             private->host, REGISTRY_USER, REGISTRY_PASSWORD);
    FILE *f = fopen(path, "w");
    fputs(json, f);
    fclose(f);
    chmod(path, 0644);
    setenv("CORRAL_REGISTRY_CREDENTIALS", path, 1);
    assert_registry(corral_registry_pull(dst, name, &o, &err), CORRAL_REGISTRY_INVALID, &err);
    assert_non_null(strstr(err.message, "chmod 600"));
    chmod(path, 0600);
    assert_registry(corral_registry_pull(dst, name, &o, &err), CORRAL_REGISTRY_OK, &err);
    assert_true(files_equal(blob_file(src_root, d.model, ""), blob_file(dst_root, d.model, "")));

    setup_env(NULL);
    corral_store_close(src);
    corral_store_close(dst);
    store_fixture_remove_root(src_root);
    store_fixture_remove_root(dst_root);
    real_registry_stop(&private_registry);
}

/* ---- against the in-test registry ---- */

static void test_bearer_token_flow_pulls(void **state)
{
    (void)state;
    fake_registry *fake = fake_registry_start(FAKE_BEARER);
    char name[256], *root = store_fixture_make_root();
    name_for(name, sizeof name, fake_registry_host(fake), "fake");
    corral_store *store = corral_store_open(root, NULL);
    corral_error err = {{0}};
    corral_registry_options o = test_options(NULL);
    assert_registry(corral_registry_pull(store, name, &o, &err), CORRAL_REGISTRY_OK, &err);
    assert_true(fake_registry_token_requests(fake) >= 1);
    corral_model_name parsed;
    corral_manifest *m = NULL;
    assert_true(corral_model_name_parse(name, &parsed, &err));
    assert_int_equal(corral_store_manifest_read(store, &parsed, &m, NULL, NULL, &err),
                     CORRAL_STORE_OK);
    assert_non_null(corral_manifest_find_layer(m, CORRAL_MEDIA_TEMPLATE, NULL));
    corral_manifest_free(m);
    corral_store_close(store);
    store_fixture_remove_root(root);
    fake_registry_stop(fake);
}

static void test_bearer_realm_on_another_host_is_refused(void **state)
{
    (void)state;
    fake_registry *fake = fake_registry_start(FAKE_BEARER_OTHER_HOST);
    char name[256], *root = store_fixture_make_root();
    name_for(name, sizeof name, fake_registry_host(fake), "fake");
    corral_store *store = corral_store_open(root, NULL);
    corral_error err = {{0}};
    corral_registry_options o = test_options(NULL);
    assert_registry(corral_registry_pull(store, name, &o, &err), CORRAL_REGISTRY_INVALID, &err);
    assert_non_null(strstr(err.message, "realm on host 'localhost'"));
    assert_int_equal(fake_registry_token_requests(fake), 0);
    corral_store_close(store);
    store_fixture_remove_root(root);
    fake_registry_stop(fake);
}

static void test_manifest_with_hostile_digests_is_refused(void **state)
{
    (void)state;
    static const char *const digests[] = {
        "sha256:../../../../etc/passwd",
        "/etc/passwd",
        "sha256:0123",
        "sha256:0123456789ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef",
        "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef/..",
    };
    fake_registry *fake = fake_registry_start(FAKE_HOSTILE_MANIFEST);
    char name[256], *root = store_fixture_make_root();
    name_for(name, sizeof name, fake_registry_host(fake), "fake");
    corral_store *store = corral_store_open(root, NULL);
    corral_registry_options o = test_options(NULL);
    for (size_t i = 0; i < sizeof digests / sizeof digests[0]; i++) {
        char manifest[1024];
        snprintf(manifest, sizeof manifest,
                 "{\"schemaVersion\":2,\"mediaType\":\"%s\",\"config\":{\"mediaType\":\"%s\","
                 "\"digest\":\"%s\",\"size\":10},\"layers\":[]}",
                 CORRAL_MEDIA_MANIFEST, CORRAL_MEDIA_CONFIG, digests[i]);
        fake_registry_set_manifest(fake, manifest);
        corral_error err = {{0}};
        assert_registry(corral_registry_pull(store, name, &o, &err), CORRAL_REGISTRY_INVALID, &err);
        assert_non_null(strstr(err.message, "digest"));
    }
    assert_int_equal(fake_registry_blob_requests(fake), 0);
    assert_int_equal(store_fixture_count_entries(root, "blobs"), 0);
    corral_store_close(store);
    store_fixture_remove_root(root);
    fake_registry_stop(fake);
}

/* A connection that stops sending is cut by the low-speed limit and the rest fetched again:
 * the pull finishes instead of hanging at 50%. */
static void test_stalled_transfer_is_detected_and_retried(void **state)
{
    (void)state;
    fake_registry *fake = fake_registry_start(FAKE_STALL_ONCE);
    char name[256], *root = store_fixture_make_root();
    name_for(name, sizeof name, fake_registry_host(fake), "fake");
    corral_store *store = corral_store_open(root, NULL);
    corral_error err = {{0}};
    corral_registry_options o = test_options(NULL);
    o.stall_seconds = 1;
    time_t start = time(NULL);
    assert_registry(corral_registry_pull(store, name, &o, &err), CORRAL_REGISTRY_OK, &err);
    assert_true(time(NULL) - start < 10); /* the silent connection is never closed */
    assert_true(fake_registry_stalls(fake) >= 2); /* the stalled answer and the retry */
    corral_model_name parsed, resolved;
    assert_true(corral_model_name_parse(name, &parsed, &err));
    assert_int_equal(corral_store_resolve(store, &parsed, &resolved, &err), CORRAL_STORE_OK);
    corral_store_close(store);
    store_fixture_remove_root(root);
    fake_registry_stop(fake);
}

typedef struct concurrent_pull {
    corral_store *store;
    const char *name;
    recorder log;
    corral_registry_status status;
    corral_error err;
} concurrent_pull;

static void *pull_thread(void *arg)
{
    concurrent_pull *p = arg;
    corral_registry_options o = test_options(&p->log);
    p->status = corral_registry_pull(p->store, p->name, &o, &p->err);
    return NULL;
}

/* Two pulls of one model at once fetch each blob once, and both see its progress. */
static void test_concurrent_pulls_share_one_download(void **state)
{
    (void)state;
    fake_registry *fake = fake_registry_start(FAKE_SLOW);
    char name[256], *root = store_fixture_make_root();
    name_for(name, sizeof name, fake_registry_host(fake), "fake");
    corral_store *store = corral_store_open(root, NULL);
    concurrent_pull pulls[2] = {{.store = store, .name = name}, {.store = store, .name = name}};
    pthread_t threads[2];
    for (int i = 0; i < 2; i++) {
        assert_int_equal(pthread_create(&threads[i], NULL, pull_thread, &pulls[i]), 0);
        usleep(100000); /* the second starts while the first is mid-blob */
    }
    for (int i = 0; i < 2; i++) {
        pthread_join(threads[i], NULL);
        assert_registry(pulls[i].status, CORRAL_REGISTRY_OK, &pulls[i].err);
        assert_true(pulls[i].log.midway_reports > 2); /* the shared download's progress */
    }
    assert_int_equal(fake_registry_blob_requests(fake), 2); /* config + template, once each */
    corral_store_close(store);
    store_fixture_remove_root(root);
    fake_registry_stop(fake);
}

static bool cancel_midway(void *ctx, const corral_registry_progress *p)
{
    (void)ctx;
    return !(p->digest && p->completed_bytes >= 8);
}

/* A pull stopped mid-blob leaves its partial file; the next pull fetches only the rest. */
static void test_interrupted_pull_resumes(void **state)
{
    (void)state;
    fake_registry *fake = fake_registry_start(FAKE_SLOW);
    char name[256], *root = store_fixture_make_root();
    name_for(name, sizeof name, fake_registry_host(fake), "fake");
    corral_store *store = corral_store_open(root, NULL);
    corral_error err = {{0}};
    corral_registry_options o = test_options(NULL);
    o.progress = cancel_midway;
    assert_registry(corral_registry_pull(store, name, &o, &err), CORRAL_REGISTRY_CANCELLED, &err);
    unsigned first_bytes = fake_registry_bytes_sent(fake);
    assert_true(first_bytes >= 8);

    o = test_options(NULL);
    assert_registry(corral_registry_pull(store, name, &o, &err), CORRAL_REGISTRY_OK, &err);
    unsigned second_bytes = fake_registry_bytes_sent(fake) - first_bytes;
    corral_model_name parsed;
    corral_manifest *m = NULL;
    assert_true(corral_model_name_parse(name, &parsed, &err));
    assert_int_equal(corral_store_manifest_read(store, &parsed, &m, NULL, NULL, &err),
                     CORRAL_STORE_OK);
    uint64_t all = corral_manifest_total_size(m);
    corral_manifest_free(m);
    /* Only the few bytes in flight at the cancel are sent twice. */
    assert_true(second_bytes < all);
    assert_true(second_bytes + first_bytes <= all + 4);
    assert_int_equal(count_blob_entries(root, "partial"), 0);
    corral_store_close(store);
    store_fixture_remove_root(root);
    fake_registry_stop(fake);
}

static void test_http_name_needs_insecure(void **state)
{
    (void)state;
    char *root = store_fixture_make_root();
    corral_store *store = corral_store_open(root, NULL);
    corral_error err = {{0}};
    corral_registry_options o = {0};
    assert_registry(corral_registry_pull(store, "http://127.0.0.1:1/test/m:latest", &o, &err), CORRAL_REGISTRY_INVALID, &err);
    assert_string_equal(err.message, "insecure protocol http");
    assert_registry(corral_registry_push(store, "127.0.0.1:1/m:latest", &o, &err), CORRAL_REGISTRY_INVALID, &err);
    assert_non_null(strstr(err.message, "namespace"));
    corral_store_close(store);
    store_fixture_remove_root(root);
}

/* ---- /api/pull through `corral serve` ---- */

typedef struct body_buffer {
    char data[65536];
    size_t len;
} body_buffer;

static size_t collect(char *data, size_t size, size_t n, void *ctx)
{
    body_buffer *b = ctx;
    size_t len = size * n;
    if (len > sizeof b->data - 1 - b->len)
        len = sizeof b->data - 1 - b->len;
    memcpy(b->data + b->len, data, len);
    b->len += len;
    b->data[b->len] = '\0';
    return size * n;
}

static long post_json(unsigned port, const char *path, const char *json, body_buffer *out)
{
    char url[256];
    snprintf(url, sizeof url, "http://127.0.0.1:%u%s", port, path);
    out->len = 0;
    out->data[0] = '\0';
    CURL *curl = curl_easy_init();
    struct curl_slist *headers = curl_slist_append(NULL, "Content-Type: application/json");
    curl_easy_setopt(curl, CURLOPT_URL, url);
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, json);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, out);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT, 60L);
    long status = 0;
    if (curl_easy_perform(curl) == CURLE_OK)
        curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
    curl_slist_free_all(headers);
    curl_easy_cleanup(curl);
    return status;
}

static void stop_server(void)
{
    if (server_pid > 0) {
        kill(server_pid, SIGTERM);
        waitpid(server_pid, NULL, 0);
    }
    server_pid = 0;
}

static void test_server_pull_streams_ollama_statuses(void **state)
{
    (void)state;
    NEED_REGISTRY();
    const char *bin = getenv("CORRAL_BIN");
    if (!bin || access(bin, X_OK) != 0) {
        print_message("skipped: CORRAL_BIN is not set to the corral binary\n");
        skip();
    }
    char name[256];
    name_for(name, sizeof name, open_registry.host, "served");
    char *src_root = store_fixture_make_root(), *srv_root = store_fixture_make_root();
    model_digests d;
    corral_store *src = make_source_store(src_root, name, NULL, &d);
    corral_error err = {{0}};
    corral_registry_options o = test_options(NULL);
    assert_registry(corral_registry_push(src, name, &o, &err), CORRAL_REGISTRY_OK, &err);

    unsigned port = registry_fixture_free_port();
    char host_env[64];
    snprintf(host_env, sizeof host_env, "127.0.0.1:%u", port);
    server_pid = fork();
    assert_true(server_pid >= 0);
    if (server_pid == 0) {
        setenv("CORRAL_HOST", host_env, 1);
        setenv("CORRAL_MODELS", srv_root, 1);
        int null_fd = open("/dev/null", O_WRONLY);
        dup2(null_fd, 1); /* not the test's pipes: a reader would wait for the server */
        dup2(null_fd, 2);
        execl(bin, "corral", "serve", (char *)NULL);
        _exit(127);
    }
    for (int i = 0; i < 200 && !registry_fixture_port_answers(port); i++)
        usleep(50000);
    body_buffer body;
    char json[512];
    snprintf(json, sizeof json, "{\"model\":\"http://%s\"}", name);
    assert_int_equal(post_json(port, "/api/pull", json, &body), 400);
    assert_non_null(strstr(body.data, "insecure protocol http"));

    snprintf(json, sizeof json, "{\"name\":\"%s\",\"insecure\":true}", name);
    assert_int_equal(post_json(port, "/api/pull", json, &body), 200);
    assert_non_null(strstr(body.data, "{\"status\":\"pulling manifest\"}\n"));
    char expected[128];
    snprintf(expected, sizeof expected, "{\"status\":\"pulling %.12s\",\"digest\":\"%s\"", d.model + 7,
             d.model);
    if (!strstr(body.data, expected))
        print_message("no '%s' in:\n%s", expected, body.data);
    assert_non_null(strstr(body.data, expected));
    assert_non_null(strstr(body.data, "{\"status\":\"writing manifest\"}\n"));
    size_t tail = strlen("{\"status\":\"success\"}\n");
    assert_true(body.len >= tail);
    assert_string_equal(body.data + body.len - tail, "{\"status\":\"success\"}\n");
    assert_true(files_equal(blob_file(src_root, d.model, ""), blob_file(srv_root, d.model, "")));

    snprintf(json, sizeof json, "{\"model\":\"%s\",\"insecure\":true,\"stream\":false}", name);
    assert_int_equal(post_json(port, "/api/pull", json, &body), 200);
    assert_string_equal(body.data, "{\"status\":\"success\"}");

    snprintf(json, sizeof json, "{\"model\":\"%s/test/missing:latest\",\"insecure\":true,"
             "\"stream\":false}", open_registry.host);
    assert_int_equal(post_json(port, "/api/pull", json, &body), 500);
    assert_non_null(strstr(body.data, "file does not exist"));

    stop_server();
    corral_store_close(src);
    store_fixture_remove_root(src_root);
    store_fixture_remove_root(srv_root);
}

static int group_setup(void **state)
{
    setup_env(state);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    if (real_registry_available())
        real_registry_start(&open_registry, false);
    else
        print_message("docker-registry is not installed: tests against it will skip\n");
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    stop_server(); /* what a failed test left running */
    real_registry_stop(&private_registry);
    real_registry_stop(&open_registry);
    return 0;
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_push_then_pull_gives_identical_manifest_and_blobs),
        cmocka_unit_test(test_pull_resumes_from_partial_file),
        cmocka_unit_test(test_pull_of_corrupted_blob_fails_and_leaves_nothing),
        cmocka_unit_test(test_basic_auth_works_with_credentials_and_fails_cleanly_without),
        cmocka_unit_test(test_bearer_token_flow_pulls),
        cmocka_unit_test(test_bearer_realm_on_another_host_is_refused),
        cmocka_unit_test(test_manifest_with_hostile_digests_is_refused),
        cmocka_unit_test(test_stalled_transfer_is_detected_and_retried),
        cmocka_unit_test(test_concurrent_pulls_share_one_download),
        cmocka_unit_test(test_interrupted_pull_resumes),
        cmocka_unit_test(test_http_name_needs_insecure),
        cmocka_unit_test(test_server_pull_streams_ollama_statuses),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
