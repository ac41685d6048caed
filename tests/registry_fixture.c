/* The registries test_registry pulls from and pushes to; see registry_fixture.h. */
#include "registry_fixture.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "store/store.h"

/* bcrypt of REGISTRY_PASSWORD (docker-registry's htpasswd accepts only bcrypt). */
static const char htpasswd_line[] =
    REGISTRY_USER ":$2b$05$PnJ0Uvh7y9ju1Pf13xkh0Oo./qj6Hhe7jq367EbvEUSYSq4BmRgOC\n";

static void die(const char *what)
{
    perror(what);
    abort();
}

unsigned registry_fixture_free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof addr;
    if (fd < 0 || bind(fd, (struct sockaddr *)&addr, sizeof addr) != 0 ||
        getsockname(fd, (struct sockaddr *)&addr, &len) != 0)
        die("free port");
    close(fd);
    return ntohs(addr.sin_port);
}

bool registry_fixture_port_answers(unsigned port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                               .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    bool ok = fd >= 0 && connect(fd, (struct sockaddr *)&addr, sizeof addr) == 0;
    if (fd >= 0)
        close(fd);
    return ok;
}

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (!f || fputs(text, f) < 0 || fclose(f) != 0)
        die(path);
}

bool real_registry_available(void)
{
    return access(REGISTRY_BINARY, X_OK) == 0;
}

void real_registry_start(real_registry *r, bool basic_auth)
{
    memset(r, 0, sizeof *r);
    const char *tmp = getenv("TMPDIR");
    snprintf(r->dir, sizeof r->dir, "%s/corral-registry-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(r->dir))
        die("mkdtemp");
    r->port = registry_fixture_free_port();
    snprintf(r->host, sizeof r->host, "127.0.0.1:%u", r->port);
    char path[4200], config[16384], auth[4400] = "";
    if (basic_auth) {
        snprintf(path, sizeof path, "%s/htpasswd", r->dir);
        write_text(path, htpasswd_line);
        snprintf(auth, sizeof auth, "auth:\n  htpasswd:\n    realm: corral-test\n    path: %s\n",
                 path);
    }
    snprintf(config, sizeof config,
             "version: 0.1\nlog:\n  level: info\nstorage:\n  filesystem:\n    rootdirectory: "
             "%s/data\n  delete:\n    enabled: true\nhttp:\n  addr: 127.0.0.1:%u\n%s",
             r->dir, r->port, auth);
    snprintf(path, sizeof path, "%s/config.yml", r->dir);
    write_text(path, config);
    char log_path[4200];
    snprintf(log_path, sizeof log_path, "%s/log", r->dir);
    r->pid = fork();
    if (r->pid < 0)
        die("fork");
    if (r->pid == 0) {
        int fd = open(log_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd < 0)
            _exit(127);
        dup2(fd, 1);
        dup2(fd, 2);
        execl(REGISTRY_BINARY, "docker-registry", "serve", path, (char *)NULL);
        _exit(127);
    }
    for (int i = 0; i < 300; i++) {
        if (registry_fixture_port_answers(r->port))
            return;
        usleep(50000);
    }
    fprintf(stderr, "docker-registry did not start; see %s\n", log_path);
    abort();
}

static int remove_tree(const char *dir)
{
    char command[4200];
    snprintf(command, sizeof command, "rm -rf '%s'", dir);
    return system(command);
}

void real_registry_stop(real_registry *r)
{
    if (r->pid > 0) {
        kill(r->pid, SIGTERM);
        waitpid(r->pid, NULL, 0);
        r->pid = 0;
    }
    if (r->dir[0])
        (void)remove_tree(r->dir);
    r->dir[0] = '\0';
}

unsigned long long real_registry_blob_bytes_sent(const real_registry *r, const char *digest,
                                                 long *mark)
{
    char path[4200], needle[128];
    snprintf(path, sizeof path, "%s/log", r->dir);
    snprintf(needle, sizeof needle, "/blobs/%s HTTP/1.1\" ", digest);
    FILE *f = fopen(path, "r");
    if (!f)
        die(path);
    fseek(f, *mark, SEEK_SET);
    unsigned long long total = 0;
    char line[8192];
    while (fgets(line, sizeof line, f)) {
        char *hit = strstr(line, needle);
        if (!hit || !strstr(line, "\"GET "))
            continue;
        unsigned status;
        unsigned long long bytes;
        if (sscanf(hit + strlen(needle), "%u %llu", &status, &bytes) == 2)
            total += bytes;
    }
    *mark = ftell(f);
    fclose(f);
    return total;
}

const char *real_registry_blob_file(const real_registry *r, const char *digest)
{
    static char path[4400];
    const char *hex = digest + strlen("sha256:");
    snprintf(path, sizeof path, "%s/data/docker/registry/v2/blobs/sha256/%.2s/%s/data", r->dir,
             hex, hex);
    return path;
}

/* ---- the fake registry ---- */

static const char fake_config[] = "{\"model_format\":\"gguf\",\"model_family\":\"llama\"}";
static const char fake_template[] = "{{ .Prompt }}";

struct fake_registry {
    fake_mode mode;
    int listen_fd;
    unsigned port;
    char host[64];
    pthread_t thread;
    atomic_bool stopping;
    atomic_uint token_requests, blob_requests, stalls;
    int held_fd;
    atomic_uint connections;
    atomic_uint bytes_sent; /* blob bytes, FAKE_SLOW only */
    char config_digest[CORRAL_DIGEST_BUF], template_digest[CORRAL_DIGEST_BUF];
    char manifest[4096];
    pthread_mutex_t lock;
};

static bool send_all(int fd, const char *data, size_t len)
{
    while (len > 0) {
        ssize_t n = send(fd, data, len, MSG_NOSIGNAL);
        if (n <= 0)
            return false;
        data += n;
        len -= (size_t)n;
    }
    return true;
}

static void reply(int fd, const char *status, const char *headers, const char *body,
                  bool head_only)
{
    char top[2048];
    size_t len = strlen(body);
    int n = snprintf(top, sizeof top,
                     "HTTP/1.1 %s\r\nContent-Length: %zu\r\nConnection: close\r\n%s\r\n", status,
                     len, headers);
    send_all(fd, top, (size_t)n);
    if (!head_only)
        send_all(fd, body, len);
}

/* A blob, honouring "Range: bytes=a-b"; FAKE_STALL_ONCE's first answer stops halfway. */
static void reply_blob(fake_registry *f, int fd, const char *req, const char *blob, bool head)
{
    size_t len = strlen(blob), first = 0, last = len - 1;
    const char *range = strstr(req, "Range: bytes=");
    unsigned long long a, b;
    bool ranged = range && sscanf(range, "Range: bytes=%llu-%llu", &a, &b) == 2 && a <= b &&
                  b < len;
    if (ranged) {
        first = (size_t)a;
        last = (size_t)b;
    }
    char top[512];
    int n = snprintf(top, sizeof top,
                     "HTTP/1.1 %s\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n",
                     ranged ? "206 Partial Content" : "200 OK", last - first + 1);
    send_all(fd, top, (size_t)n);
    if (head)
        return;
    size_t count = last - first + 1;
    if (f->mode == FAKE_STALL_ONCE && atomic_fetch_add(&f->stalls, 1) == 0) {
        send_all(fd, blob + first, count / 2);
        f->held_fd = dup(fd); /* the connection stays open, silent, until the fake stops */
        return;
    }
    if (f->mode == FAKE_SLOW) { /* a byte every 20 ms: long enough for a second pull to join */
        for (size_t i = 0; i < count; i++) {
            if (!send_all(fd, blob + first + i, 1))
                return; /* the client went away */
            atomic_fetch_add(&f->bytes_sent, 1);
            usleep(20000);
        }
        return;
    }
    send_all(fd, blob + first, count);
}

static void serve_one(fake_registry *f, int fd)
{
    char req[16384];
    size_t got = 0;
    while (got < sizeof req - 1) {
        ssize_t n = recv(fd, req + got, sizeof req - 1 - got, 0);
        if (n <= 0)
            return;
        got += (size_t)n;
        req[got] = '\0';
        if (strstr(req, "\r\n\r\n"))
            break;
    }
    char method[16], path[4096];
    if (sscanf(req, "%15s %4095s", method, path) != 2)
        return;
    bool head = strcmp(method, "HEAD") == 0;
    if (strncmp(path, "/token", 6) == 0) {
        atomic_fetch_add(&f->token_requests, 1);
        reply(fd, "200 OK", "Content-Type: application/json\r\n", "{\"token\":\"good-token\"}",
              head);
        return;
    }
    bool open_access = f->mode >= FAKE_HOSTILE_MANIFEST;
    if (!open_access && !strstr(req, "Authorization: Bearer good-token\r\n")) {
        char challenge[512];
        snprintf(challenge, sizeof challenge,
                 "WWW-Authenticate: Bearer realm=\"http://%s:%u/token\",service=\"fake\","
                 "scope=\"repository:test/fake:pull\"\r\n",
                 f->mode == FAKE_BEARER_OTHER_HOST ? "localhost" : "127.0.0.1", f->port);
        reply(fd, "401 Unauthorized", challenge, "{\"errors\":[{\"code\":\"UNAUTHORIZED\"}]}",
              head);
        return;
    }
    if (strcmp(path, "/v2/test/fake/manifests/latest") == 0) {
        pthread_mutex_lock(&f->lock);
        char body[4096];
        memcpy(body, f->manifest, sizeof body);
        pthread_mutex_unlock(&f->lock);
        reply(fd, "200 OK", "Content-Type: " CORRAL_MEDIA_MANIFEST "\r\n", body, head);
        return;
    }
    const char *prefix = "/v2/test/fake/blobs/";
    if (strncmp(path, prefix, strlen(prefix)) == 0) {
        atomic_fetch_add(&f->blob_requests, 1);
        const char *digest = path + strlen(prefix);
        if (strcmp(digest, f->config_digest) == 0)
            reply_blob(f, fd, req, fake_config, head);
        else if (strcmp(digest, f->template_digest) == 0)
            reply_blob(f, fd, req, fake_template, head);
        else
            reply(fd, "404 Not Found", "", "{\"errors\":[{\"code\":\"BLOB_UNKNOWN\"}]}", head);
        return;
    }
    reply(fd, "404 Not Found", "", "{\"errors\":[{\"code\":\"NAME_UNKNOWN\"}]}", head);
}

/* Connections are served concurrently, so two pulls can overlap. */
typedef struct connection {
    fake_registry *f;
    int fd;
} connection;

static void *connection_thread(void *arg)
{
    connection *c = arg;
    serve_one(c->f, c->fd);
    close(c->fd);
    atomic_fetch_sub(&c->f->connections, 1);
    free(c);
    return NULL;
}

static void *fake_thread(void *arg)
{
    fake_registry *f = arg;
    while (!atomic_load(&f->stopping)) {
        struct pollfd p = {.fd = f->listen_fd, .events = POLLIN};
        if (poll(&p, 1, 50) <= 0)
            continue;
        int fd = accept(f->listen_fd, NULL, NULL);
        if (fd < 0)
            continue;
        connection *c = malloc(sizeof *c);
        pthread_t thread;
        if (!c)
            die("malloc");
        *c = (connection){f, fd};
        atomic_fetch_add(&f->connections, 1);
        if (pthread_create(&thread, NULL, connection_thread, c) != 0)
            die("pthread_create");
        pthread_detach(thread);
    }
    while (atomic_load(&f->connections) > 0)
        usleep(1000);
    return NULL;
}

fake_registry *fake_registry_start(fake_mode mode)
{
    fake_registry *f = calloc(1, sizeof *f);
    if (!f)
        die("calloc");
    f->mode = mode;
    f->held_fd = -1;
    pthread_mutex_init(&f->lock, NULL);
    corral_digest_of(fake_config, strlen(fake_config), f->config_digest);
    corral_digest_of(fake_template, strlen(fake_template), f->template_digest);
    snprintf(f->manifest, sizeof f->manifest,
             "{\"schemaVersion\":2,\"mediaType\":\"" CORRAL_MEDIA_MANIFEST "\",\"config\":{"
             "\"mediaType\":\"" CORRAL_MEDIA_CONFIG "\",\"digest\":\"%s\",\"size\":%zu},"
             "\"layers\":[{\"mediaType\":\"" CORRAL_MEDIA_TEMPLATE "\",\"digest\":\"%s\","
             "\"size\":%zu}]}",
             f->config_digest, strlen(fake_config), f->template_digest, strlen(fake_template));
    f->listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof addr;
    if (f->listen_fd < 0 || bind(f->listen_fd, (struct sockaddr *)&addr, sizeof addr) != 0 ||
        listen(f->listen_fd, 16) != 0 ||
        getsockname(f->listen_fd, (struct sockaddr *)&addr, &len) != 0)
        die("fake registry socket");
    f->port = ntohs(addr.sin_port);
    snprintf(f->host, sizeof f->host, "127.0.0.1:%u", f->port);
    if (pthread_create(&f->thread, NULL, fake_thread, f) != 0)
        die("pthread_create");
    return f;
}

void fake_registry_stop(fake_registry *f)
{
    if (!f)
        return;
    atomic_store(&f->stopping, true);
    pthread_join(f->thread, NULL);
    close(f->listen_fd);
    if (f->held_fd >= 0)
        close(f->held_fd);
    pthread_mutex_destroy(&f->lock);
    free(f);
}

const char *fake_registry_host(const fake_registry *f)
{
    return f->host;
}

void fake_registry_set_manifest(fake_registry *f, const char *manifest)
{
    pthread_mutex_lock(&f->lock);
    snprintf(f->manifest, sizeof f->manifest, "%s", manifest);
    pthread_mutex_unlock(&f->lock);
}

const char *fake_registry_manifest(const fake_registry *f)
{
    return f->manifest;
}

unsigned fake_registry_token_requests(const fake_registry *f)
{
    return atomic_load(&((fake_registry *)f)->token_requests);
}

unsigned fake_registry_bytes_sent(const fake_registry *f)
{
    return atomic_load(&((fake_registry *)f)->bytes_sent);
}

unsigned fake_registry_stalls(const fake_registry *f)
{
    return atomic_load(&((fake_registry *)f)->stalls);
}

unsigned fake_registry_blob_requests(const fake_registry *f)
{
    return atomic_load(&((fake_registry *)f)->blob_requests);
}
