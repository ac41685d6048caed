/*
 * bench_serve: generation through a real `corral serve` with 1, 2, 4 and 8 concurrent greedy
 * clients, the measure of the runner's continuous batching. It starts its own server on a free
 * loopback port with a temporary store, imports the model (/api/blobs + /api/create), warms
 * it up, then per client count runs that many /api/generate streams at once and prints the
 * aggregate generation speed, each stream's speed, time to first token, and whether every
 * stream's text equals the lone stream's (the batch invariance the runner promises).
 * Usage: bench_serve CORRAL_BIN MODEL.gguf [-c 1,2,4,8] [-n TOKENS] [-p PROMPT]
 */
#include <arpa/inet.h>
#include <curl/curl.h>
#include <ftw.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { MAX_CLIENTS = 64, MAX_COUNTS = 16 };

typedef struct stream {
    const char *url;
    const char *body;
    pthread_barrier_t *start;
    char line[1 << 16]; /* the NDJSON line being received */
    size_t line_len;
    char *text;         /* generated text */
    size_t text_len;
    double t_begin, t_first, t_end; /* seconds */
    long eval_count;
    double eval_seconds;
    bool ok;
} stream;

static double now_seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* ---- the server ---- */

static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof addr;
    int port = -1;
    if (fd >= 0 && bind(fd, (struct sockaddr *)&addr, sizeof addr) == 0 &&
        getsockname(fd, (struct sockaddr *)&addr, &len) == 0)
        port = ntohs(addr.sin_port);
    if (fd >= 0)
        close(fd);
    return port;
}

static pid_t start_server(const char *corral, const char *dir, int port, int n_parallel)
{
    char host[64], models[4200], log[4200], parallel[16];
    snprintf(host, sizeof host, "127.0.0.1:%d", port);
    snprintf(models, sizeof models, "%s/models", dir);
    snprintf(log, sizeof log, "%s/server.log", dir);
    snprintf(parallel, sizeof parallel, "%d", n_parallel);
    pid_t pid = fork();
    if (pid == 0) {
        setenv("CORRAL_HOST", host, 1);
        setenv("CORRAL_MODELS", models, 1);
        setenv("CORRAL_NUM_PARALLEL", parallel, 1);
        setenv("CORRAL_KEEP_ALIVE", "-1", 1);
        if (!freopen(log, "w", stdout) || !freopen(log, "a", stderr))
            _exit(127);
        execl(corral, corral, "serve", (char *)NULL);
        _exit(127);
    }
    return pid;
}

static size_t discard(char *data, size_t size, size_t n, void *user)
{
    (void)data;
    (void)user;
    return size * n;
}

/* POST body (or the file upload) to url; the HTTP status, 0 when the request failed. */
static long post(const char *url, const char *body, FILE *upload, long long upload_bytes)
{
    CURL *curl = curl_easy_init();
    if (!curl)
        return 0;
    curl_easy_setopt(curl, CURLOPT_URL, url);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, discard);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT, 600L);
    if (upload) {
        curl_easy_setopt(curl, CURLOPT_UPLOAD, 1L);
        curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, "POST");
        curl_easy_setopt(curl, CURLOPT_READDATA, upload);
        curl_easy_setopt(curl, CURLOPT_INFILESIZE_LARGE, (curl_off_t)upload_bytes);
    } else if (body) {
        curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body);
    }
    long status = 0;
    if (curl_easy_perform(curl) == CURLE_OK)
        curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_cleanup(curl);
    return status;
}

static bool wait_for_server(const char *base)
{
    for (int i = 0; i < 200; i++) {
        CURL *curl = curl_easy_init();
        long status = 0;
        curl_easy_setopt(curl, CURLOPT_URL, base);
        curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, discard);
        if (curl_easy_perform(curl) == CURLE_OK)
            curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
        curl_easy_cleanup(curl);
        if (status == 200)
            return true;
        usleep(50 * 1000);
    }
    return false;
}

/* "sha256:<hex>" of a file. */
static bool file_digest(const char *path, char out[72], long long *bytes)
{
    FILE *f = fopen(path, "rb");
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    bool ok = f && md && EVP_DigestInit_ex(md, EVP_sha256(), NULL);
    static unsigned char buf[1 << 20];
    size_t n;
    *bytes = 0;
    while (ok && (n = fread(buf, 1, sizeof buf, f)) > 0) {
        ok = EVP_DigestUpdate(md, buf, n);
        *bytes += (long long)n;
    }
    unsigned char hash[32];
    ok = ok && !ferror(f) && EVP_DigestFinal_ex(md, hash, NULL);
    if (ok) {
        strcpy(out, "sha256:");
        for (int i = 0; i < 32; i++)
            sprintf(out + 7 + 2 * i, "%02x", hash[i]);
    }
    EVP_MD_CTX_free(md);
    if (f)
        fclose(f);
    return ok;
}

static bool import_model(const char *base, const char *path)
{
    char digest[72], url[256];
    long long bytes;
    if (!file_digest(path, digest, &bytes)) {
        fprintf(stderr, "bench_serve: cannot read %s\n", path);
        return false;
    }
    FILE *f = fopen(path, "rb");
    snprintf(url, sizeof url, "%s/api/blobs/%s", base, digest);
    long status = f ? post(url, NULL, f, bytes) : 0;
    if (f)
        fclose(f);
    if (status != 201 && status != 200) {
        fprintf(stderr, "bench_serve: blob upload answered %ld\n", status);
        return false;
    }
    char body[256];
    snprintf(body, sizeof body,
             "{\"model\":\"bench\",\"files\":{\"model.gguf\":\"%s\"},\"stream\":false}", digest);
    snprintf(url, sizeof url, "%s/api/create", base);
    status = post(url, body, NULL, 0);
    if (status != 200)
        fprintf(stderr, "bench_serve: create answered %ld\n", status);
    return status == 200;
}

/* ---- one streaming client ---- */

static void take_line(stream *s)
{
    s->line[s->line_len] = '\0';
    json_t *msg = json_loads(s->line, 0, NULL);
    s->line_len = 0;
    if (!msg)
        return;
    const char *piece = json_string_value(json_object_get(msg, "response"));
    size_t n = piece ? strlen(piece) : 0;
    if (n > 0) {
        if (s->t_first == 0)
            s->t_first = now_seconds();
        char *grown = realloc(s->text, s->text_len + n + 1);
        if (grown) {
            memcpy(grown + s->text_len, piece, n + 1);
            s->text = grown;
            s->text_len += n;
        }
    }
    if (json_is_true(json_object_get(msg, "done"))) {
        s->eval_count = (long)json_integer_value(json_object_get(msg, "eval_count"));
        s->eval_seconds = (double)json_integer_value(json_object_get(msg, "eval_duration")) * 1e-9;
        s->ok = s->eval_count > 0;
    }
    json_decref(msg);
}

static size_t on_stream_data(char *data, size_t size, size_t n, void *user)
{
    stream *s = user;
    for (size_t i = 0; i < size * n; i++) {
        if (data[i] == '\n')
            take_line(s);
        else if (s->line_len + 1 < sizeof s->line)
            s->line[s->line_len++] = data[i];
    }
    return size * n;
}

static void *run_stream(void *arg)
{
    stream *s = arg;
    CURL *curl = curl_easy_init();
    if (!curl)
        return NULL;
    curl_easy_setopt(curl, CURLOPT_URL, s->url);
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, s->body);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_stream_data);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, s);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT, 1800L);
    pthread_barrier_wait(s->start);
    s->t_begin = now_seconds();
    if (curl_easy_perform(curl) != CURLE_OK)
        s->ok = false;
    s->t_end = now_seconds();
    curl_easy_cleanup(curl);
    return NULL;
}

static int compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Run n_clients streams at once; print one table row. lone: the one-client text, or NULL. */
static bool run_clients(const char *url, const char *body, int n_clients, char **lone)
{
    static stream streams[MAX_CLIENTS];
    pthread_t threads[MAX_CLIENTS];
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, (unsigned)n_clients);
    for (int i = 0; i < n_clients; i++) {
        streams[i] = (stream){.url = url, .body = body, .start = &start};
        pthread_create(&threads[i], NULL, run_stream, &streams[i]);
    }
    for (int i = 0; i < n_clients; i++)
        pthread_join(threads[i], NULL);
    pthread_barrier_destroy(&start);

    bool ok = true, same = true;
    long tokens = 0;
    double first_token = 1e300, last_end = 0, ttft[MAX_CLIENTS], rate_sum = 0;
    for (int i = 0; i < n_clients; i++) {
        stream *s = &streams[i];
        ok = ok && s->ok && s->t_first > 0;
        tokens += s->eval_count;
        first_token = s->t_first < first_token ? s->t_first : first_token;
        last_end = s->t_end > last_end ? s->t_end : last_end;
        ttft[i] = s->t_first - s->t_begin;
        rate_sum += s->eval_seconds > 0 ? (double)s->eval_count / s->eval_seconds : 0;
        if (!*lone && i == 0 && s->text)
            *lone = strdup(s->text);
        same = same && s->text && *lone && strcmp(s->text, *lone) == 0;
    }
    if (!ok) {
        fprintf(stderr, "bench_serve: a stream with %d clients failed (see the server log)\n",
                n_clients);
    } else {
        qsort(ttft, (size_t)n_clients, sizeof ttft[0], compare_doubles);
        printf("%7d %10.1f %10.1f %10.1f %9.0f %9.0f %s\n", n_clients,
               (double)tokens / (last_end - first_token), rate_sum / n_clients,
               (double)tokens / (last_end - streams[0].t_begin), ttft[n_clients / 2] * 1e3,
               ttft[n_clients - 1] * 1e3, same ? "yes" : "NO");
    }
    for (int i = 0; i < n_clients; i++)
        free(streams[i].text);
    return ok;
}

/* ---- main ---- */

static int parse_counts(const char *text, int *counts)
{
    int n = 0;
    char *copy = strdup(text), *save = NULL;
    for (char *tok = strtok_r(copy, ",", &save); tok && n < MAX_COUNTS;
         tok = strtok_r(NULL, ",", &save)) {
        int c = atoi(tok);
        if (c < 1 || c > MAX_CLIENTS) {
            n = -1;
            break;
        }
        counts[n++] = c;
    }
    free(copy);
    return n;
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

int main(int argc, char **argv)
{
    int counts[MAX_COUNTS] = {1, 2, 4, 8}, n_counts = 4, n_predict = 64;
    const char *prompt = "The history of the world in one paragraph:";
    if (argc < 3) {
        fprintf(stderr, "Usage: bench_serve CORRAL_BIN MODEL.gguf [-c 1,2,4,8] [-n TOKENS] "
                        "[-p PROMPT]\n");
        return 2;
    }
    for (int i = 3; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "-c") == 0)
            n_counts = parse_counts(argv[i + 1], counts);
        else if (strcmp(argv[i], "-n") == 0)
            n_predict = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "-p") == 0)
            prompt = argv[i + 1];
        else
            n_counts = -1;
    }
    if (n_counts <= 0 || n_predict < 1) {
        fprintf(stderr, "bench_serve: bad arguments (client counts 1..%d, -n >= 1)\n",
                MAX_CLIENTS);
        return 2;
    }
    int max_clients = 1;
    for (int i = 0; i < n_counts; i++)
        max_clients = counts[i] > max_clients ? counts[i] : max_clients;

    char dir[] = "/tmp/corral-bench-serve.XXXXXX";
    int port = free_port();
    if (!mkdtemp(dir) || port < 0) {
        perror("bench_serve: temporary directory or port");
        return 1;
    }
    curl_global_init(CURL_GLOBAL_DEFAULT);
    char base[64], url[96];
    snprintf(base, sizeof base, "http://127.0.0.1:%d", port);
    snprintf(url, sizeof url, "%s/api/generate", base);
    pid_t server = start_server(argv[1], dir, port, max_clients);
    int status = 1;
    json_t *request = json_pack("{s:s, s:s, s:{s:i, s:i, s:i}}", "model", "bench", "prompt",
                                prompt, "options", "temperature", 0, "num_predict", n_predict,
                                "seed", 1);
    char *body = json_dumps(request, JSON_COMPACT);
    json_decref(request);
    char *lone = NULL;
    if (server > 0 && body && wait_for_server(base) && import_model(base, argv[2]) &&
        post(url, "{\"model\":\"bench\",\"prompt\":\"warm up\",\"options\":{\"num_predict\":4}}",
             NULL, 0) == 200) {
        printf("model %s, %d tokens per stream, %d slots\n", argv[2], n_predict, max_clients);
        printf("clients  agg tg t/s  per-stream  agg total  ttft med  ttft max  same text\n");
        status = 0;
        if (counts[0] != 1) /* the lone run every other row is compared with */
            status = run_clients(url, body, 1, &lone) ? 0 : 1;
        for (int i = 0; i < n_counts && status == 0; i++)
            status = run_clients(url, body, counts[i], &lone) ? 0 : 1;
        printf("(agg tg: tokens / time from the first first token to the last end; agg total\n"
               " includes the prompts; ttft in ms; same text: every stream equals the lone one)\n");
    } else {
        fprintf(stderr, "bench_serve: the server did not start or import the model; log in %s\n",
                dir);
    }
    free(lone);
    free(body);
    if (server > 0) {
        kill(server, SIGTERM);
        waitpid(server, NULL, 0);
    }
    if (status == 0)
        nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    curl_global_cleanup();
    return status;
}
