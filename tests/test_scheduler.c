/*
 * The scheduler's policy (src/server/sched/scheduler.c) driven through its runner_ops seam by
 * a fake runner: no process starts, memory is a number the test sets, a runner "crashes"
 * when the test says so. Loading and sharing a runner, waiting for a slot, 503 past the
 * queue, a waiting request whose client left leaving the queue, keep-alive expiry, LRU eviction under a memory limit and under
 * CORRAL_MAX_LOADED_MODELS, a crashed or failing runner, a load that fails, a reload for
 * other options, and concurrent requests for one model that is still loading.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "server/sched/scheduler.h"

#define GIB (1ull << 30)
#define WAIT_LIMIT_MS 5000

/* ---- the fake runner ---- */

typedef struct fake {
    pthread_mutex_t lock;
    pthread_cond_t changed;
    uint64_t total_bytes; /* the machine's memory */
    uint64_t used_bytes;  /* of the runners started and not yet stopped */
    uint64_t model_bytes[4]; /* by the model's number: "/models/<n>" */
    int starts, stops, kills;
    int stop_requests;
    int requests_before_first_stop; /* stop_requests when stop first ran; -1: not yet */
    char last_stopped[64];
    bool hold_starts;        /* start waits until the test lets it go */
    const char *fail_path;   /* starting this model fails */
    struct fake_process *last_started;
} fake;

typedef struct fake_process {
    fake *f;
    char path[64];
    uint64_t bytes;
    bool crashed;
} fake_process;

static uint64_t model_bytes(fake *f, const char *path)
{
    int n = path[strlen(path) - 1] - '0';
    return n >= 0 && n < 4 && f->model_bytes[n] ? f->model_bytes[n] : GIB;
}

static bool fake_start(void *ctx, const runner_spec *spec, runner_started *out, corral_error *err)
{
    fake *f = ctx;
    pthread_mutex_lock(&f->lock);
    f->starts++;
    pthread_cond_broadcast(&f->changed);
    while (f->hold_starts)
        pthread_cond_wait(&f->changed, &f->lock);
    bool fails = f->fail_path && strcmp(f->fail_path, spec->model_path) == 0;
    fake_process *p = fails ? NULL : calloc(1, sizeof *p);
    if (p) {
        p->f = f;
        snprintf(p->path, sizeof p->path, "%s", spec->model_path);
        p->bytes = model_bytes(f, spec->model_path);
        f->used_bytes += p->bytes;
        out->process = p;
        snprintf(out->socket_path, sizeof out->socket_path, "fake:%s", spec->model_path);
        out->n_ctx = spec->num_ctx / 2; /* as a model trained on a shorter context reports */
        out->n_vocab = 1000;
        f->last_started = p;
    }
    pthread_mutex_unlock(&f->lock);
    if (!p)
        corral_error_set(err, "the fake runner would not start");
    return p != NULL;
}

static bool fake_alive(void *ctx, void *process)
{
    fake *f = ctx;
    pthread_mutex_lock(&f->lock);
    bool alive = !((fake_process *)process)->crashed;
    pthread_mutex_unlock(&f->lock);
    return alive;
}

static void fake_kill(void *ctx, void *process)
{
    fake *f = ctx;
    pthread_mutex_lock(&f->lock);
    f->kills++;
    ((fake_process *)process)->crashed = true;
    pthread_mutex_unlock(&f->lock);
}

static void fake_request_stop(void *ctx, void *process)
{
    (void)process;
    fake *f = ctx;
    pthread_mutex_lock(&f->lock);
    f->stop_requests++;
    pthread_mutex_unlock(&f->lock);
}

static void fake_stop(void *ctx, void *process)
{
    fake *f = ctx;
    fake_process *p = process;
    pthread_mutex_lock(&f->lock);
    if (f->requests_before_first_stop < 0)
        f->requests_before_first_stop = f->stop_requests;
    f->stops++;
    f->used_bytes -= p->bytes;
    snprintf(f->last_stopped, sizeof f->last_stopped, "%s", p->path);
    pthread_cond_broadcast(&f->changed);
    pthread_mutex_unlock(&f->lock);
    free(p);
}

static uint64_t fake_estimate(void *ctx, const runner_spec *spec)
{
    return model_bytes(ctx, spec->model_path);
}

static uint64_t fake_available(void *ctx)
{
    fake *f = ctx;
    pthread_mutex_lock(&f->lock);
    uint64_t free_bytes = f->total_bytes - f->used_bytes;
    pthread_mutex_unlock(&f->lock);
    return free_bytes;
}

static int fake_count(fake *f, const int *counter)
{
    pthread_mutex_lock(&f->lock);
    int n = *counter;
    pthread_mutex_unlock(&f->lock);
    return n;
}

static void fake_release_starts(fake *f)
{
    pthread_mutex_lock(&f->lock);
    f->hold_starts = false;
    pthread_cond_broadcast(&f->changed);
    pthread_mutex_unlock(&f->lock);
}

/* ---- the test's scheduler ---- */

typedef struct fixture {
    fake f;
    server_config config;
    scheduler *sched;
    model_ref models[4]; /* "/models/0" ... "/models/3" */
} fixture;

static int setup(void **state)
{
    fixture *x = calloc(1, sizeof *x);
    pthread_mutex_init(&x->f.lock, NULL);
    pthread_cond_init(&x->f.changed, NULL);
    x->f.total_bytes = 64 * GIB;
    x->f.requests_before_first_stop = -1;
    x->config = (server_config){.keep_alive_ns = 60 * 1000000000ll,
                                .load_timeout_ns = 60 * 1000000000ll,
                                .num_parallel = 2,
                                .max_loaded_models = 3,
                                .max_queue = 8,
                                .default_num_ctx = 4096,
                                .kv_type = CORRAL_KV_F16};
    for (int i = 0; i < 4; i++) {
        char path[32];
        snprintf(path, sizeof path, "/models/%d", i);
        x->models[i].model_path = strdup(path);
        snprintf(x->models[i].display, sizeof x->models[i].display, "model%d:latest", i);
    }
    *state = x;
    return 0;
}

/* The scheduler, once the test has set the config and the fake's memory. */
static scheduler *start(fixture *x)
{
    runner_ops ops = {.ctx = &x->f,
                      .start = fake_start,
                      .alive = fake_alive,
                      .kill = fake_kill,
                      .request_stop = fake_request_stop,
                      .stop = fake_stop,
                      .estimate_bytes = fake_estimate,
                      .available_bytes = fake_available};
    corral_error err = {{0}};
    x->sched = scheduler_create_with(&x->config, &ops, &err);
    assert_non_null(x->sched);
    return x->sched;
}

static int teardown(void **state)
{
    fixture *x = *state;
    scheduler_free(x->sched);
    for (int i = 0; i < 4; i++)
        free(x->models[i].model_path);
    pthread_cond_destroy(&x->f.changed);
    pthread_mutex_destroy(&x->f.lock);
    free(x);
    return 0;
}

static load_request model(fixture *x, int i, int64_t keep_alive_ns)
{
    return (load_request){.ref = &x->models[i], .keep_alive_ns = keep_alive_ns};
}

#define KEEP (60 * 1000000000ll)

static runner_handle *acquire(fixture *x, int i)
{
    load_request req = model(x, i, KEEP);
    unsigned status = 0;
    corral_error err = {{0}};
    runner_handle *r = scheduler_acquire(x->sched, &req, &status, &err);
    if (!r)
        fail_msg("acquire model %d: %u %s", i, status, err.message);
    return r;
}

static size_t n_loaded(fixture *x)
{
    scheduler_entry *entries;
    size_t n = scheduler_list(x->sched, &entries);
    free(entries);
    return n;
}

static bool is_loaded(fixture *x, int i)
{
    scheduler_entry *entries;
    size_t n = scheduler_list(x->sched, &entries);
    bool found = false;
    for (size_t j = 0; j < n; j++)
        found = found || strcmp(entries[j].model_path, x->models[i].model_path) == 0;
    free(entries);
    return found;
}

static unsigned queue_depth(fixture *x)
{
    unsigned depth;
    uint64_t failures;
    scheduler_stats(x->sched, &depth, &failures);
    return depth;
}

static uint64_t failures(fixture *x)
{
    unsigned depth;
    uint64_t n;
    scheduler_stats(x->sched, &depth, &n);
    return n;
}

static void sleep_ms(int ms)
{
    nanosleep(&(struct timespec){.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000l}, NULL);
}

/* Wait until cond holds (checked every millisecond), failing the test after WAIT_LIMIT_MS. */
#define WAIT_FOR(cond)                                                                         \
    do {                                                                                       \
        int waited_ = 0;                                                                       \
        while (!(cond)) {                                                                      \
            if (waited_++ > WAIT_LIMIT_MS)                                                     \
                fail_msg("timed out waiting for %s", #cond);                                   \
            sleep_ms(1);                                                                       \
        }                                                                                      \
    } while (0)

/* A request on its own thread, for the ones that wait. */
typedef struct request_thread {
    fixture *x;
    load_request req;
    runner_handle *got;
    unsigned status;
    corral_error err;
    pthread_t thread;
} request_thread;

static void *request_main(void *arg)
{
    request_thread *t = arg;
    t->got = scheduler_acquire(t->x->sched, &t->req, &t->status, &t->err);
    return NULL;
}

static void request_start(request_thread *t, fixture *x, int i)
{
    *t = (request_thread){.x = x, .req = model(x, i, KEEP)};
    assert_int_equal(pthread_create(&t->thread, NULL, request_main, t), 0);
}

static runner_handle *request_join(request_thread *t)
{
    pthread_join(t->thread, NULL);
    return t->got;
}

/* ---- tests ---- */

/* The first request loads; the next shares the runner while it has a free slot. */
static void test_loads_then_shares(void **state)
{
    fixture *x = *state;
    start(x);
    runner_handle *a = acquire(x, 0);
    runner_handle *b = acquire(x, 0);
    assert_ptr_equal(a, b);
    assert_int_equal(fake_count(&x->f, &x->f.starts), 1);
    assert_string_equal(runner_handle_socket(a), "fake:/models/0");
    assert_int_equal(runner_handle_n_ctx(a), 2048); /* what the runner reported */
    assert_int_equal(runner_handle_n_vocab(a), 1000);
    scheduler_release(x->sched, a);
    scheduler_release(x->sched, b);
    assert_true(is_loaded(x, 0));
    assert_int_equal(fake_count(&x->f, &x->f.stops), 0);
}

/* A request past the runner's slots waits in the queue until one is released. */
static void test_waits_for_a_slot(void **state)
{
    fixture *x = *state;
    x->config.num_parallel = 1;
    start(x);
    runner_handle *a = acquire(x, 0);
    request_thread t;
    request_start(&t, x, 0);
    WAIT_FOR(queue_depth(x) == 1);
    sleep_ms(20);
    assert_int_equal(queue_depth(x), 1); /* still waiting: the one slot is taken */
    scheduler_release(x->sched, a);
    assert_ptr_equal(request_join(&t), a);
    assert_int_equal(fake_count(&x->f, &x->f.starts), 1);
    assert_int_equal(queue_depth(x), 0);
    scheduler_release(x->sched, a);
}

/* Past CORRAL_MAX_QUEUE waiting requests, the next one is a 503 at once. */
static void test_full_queue_is_503(void **state)
{
    fixture *x = *state;
    x->config.num_parallel = 1;
    x->config.max_queue = 1;
    start(x);
    runner_handle *a = acquire(x, 0);
    request_thread t;
    request_start(&t, x, 0);
    WAIT_FOR(queue_depth(x) == 1);
    load_request req = model(x, 0, KEEP);
    unsigned status = 0;
    corral_error err = {{0}};
    assert_null(scheduler_acquire(x->sched, &req, &status, &err));
    assert_int_equal(status, 503);
    assert_non_null(strstr(err.message, "maximum pending requests exceeded"));
    scheduler_release(x->sched, a);
    scheduler_release(x->sched, request_join(&t));
}

static bool flag_is_set(const void *ctx)
{
    return atomic_load((const atomic_bool *)ctx);
}

/* A waiting request whose client has left leaves the queue (499), its place free for the
 * next, while the runner's one slot stays taken. */
static void test_abandoned_request_leaves_the_queue(void **state)
{
    fixture *x = *state;
    x->config.num_parallel = 1;
    x->config.max_queue = 1;
    start(x);
    runner_handle *a = acquire(x, 0);
    atomic_bool left = false;
    request_thread t = {.x = x, .req = model(x, 0, KEEP)};
    t.req.abandoned = flag_is_set;
    t.req.abandoned_ctx = &left;
    assert_int_equal(pthread_create(&t.thread, NULL, request_main, &t), 0);
    WAIT_FOR(queue_depth(x) == 1);
    atomic_store(&left, true);
    WAIT_FOR(queue_depth(x) == 0);
    assert_null(request_join(&t));
    assert_int_equal(t.status, SCHEDULER_ABANDONED);
    request_thread next;
    request_start(&next, x, 0); /* the queue has room again */
    WAIT_FOR(queue_depth(x) == 1);
    scheduler_release(x->sched, a);
    scheduler_release(x->sched, request_join(&next));
    assert_int_equal(fake_count(&x->f, &x->f.starts), 1);
}

/* An idle runner stops once its keep-alive ends; a negative keep-alive keeps it; keep-alive
 * 0 with scheduler_unload (an empty request) stops it at once. */
static void test_keep_alive_expiry(void **state)
{
    fixture *x = *state;
    start(x);
    load_request brief = model(x, 0, 50 * 1000000ll), forever = model(x, 1, -1);
    unsigned status;
    corral_error err;
    runner_handle *a = scheduler_acquire(x->sched, &brief, &status, &err);
    runner_handle *b = scheduler_acquire(x->sched, &forever, &status, &err);
    assert_non_null(a);
    assert_non_null(b);
    sleep_ms(100);
    assert_true(is_loaded(x, 0)); /* busy: the keep-alive starts when it is released */
    scheduler_release(x->sched, a);
    scheduler_release(x->sched, b);
    WAIT_FOR(fake_count(&x->f, &x->f.stops) == 1);
    assert_string_equal(x->f.last_stopped, "/models/0");
    sleep_ms(300); /* past a reaper's round */
    assert_true(is_loaded(x, 1));
    scheduler_unload(x->sched, "/models/1");
    WAIT_FOR(fake_count(&x->f, &x->f.stops) == 2);
    assert_int_equal(n_loaded(x), 0);
}

/* With too little memory for the next model, the least recently used idle runner goes. */
static void test_evicts_lru_under_memory_pressure(void **state)
{
    fixture *x = *state;
    x->f.total_bytes = 10 * GIB;
    x->f.model_bytes[0] = x->f.model_bytes[1] = x->f.model_bytes[2] = 4 * GIB;
    start(x);
    runner_handle *a = acquire(x, 0);
    runner_handle *b = acquire(x, 1);
    scheduler_release(x->sched, b); /* model 1 idle first, but used again below */
    scheduler_release(x->sched, a);
    sleep_ms(2);
    scheduler_release(x->sched, acquire(x, 1)); /* now model 0 is the least recently used */
    runner_handle *c = acquire(x, 2);
    assert_int_equal(fake_count(&x->f, &x->f.stops), 1);
    assert_string_equal(x->f.last_stopped, "/models/0");
    assert_true(is_loaded(x, 1));
    assert_true(is_loaded(x, 2));
    scheduler_release(x->sched, c);
}

/* A busy runner is never evicted; with nothing idle to evict, a model that does not fit in
 * free memory still loads (its weights are mapped, not copied). */
static void test_busy_runner_stays_and_big_model_loads(void **state)
{
    fixture *x = *state;
    x->f.total_bytes = 10 * GIB;
    x->f.model_bytes[0] = x->f.model_bytes[1] = 6 * GIB;
    start(x);
    runner_handle *a = acquire(x, 0);
    runner_handle *b = acquire(x, 1);
    assert_int_equal(fake_count(&x->f, &x->f.starts), 2);
    assert_int_equal(fake_count(&x->f, &x->f.stops), 0);
    scheduler_release(x->sched, a);
    scheduler_release(x->sched, b);
}

/* At CORRAL_MAX_LOADED_MODELS with every runner busy, a new model waits; when one is
 * released it is evicted for the newcomer. */
static void test_max_loaded_models(void **state)
{
    fixture *x = *state;
    x->config.max_loaded_models = 1;
    start(x);
    runner_handle *a = acquire(x, 0);
    request_thread t;
    request_start(&t, x, 1);
    WAIT_FOR(queue_depth(x) == 1);
    sleep_ms(20);
    assert_int_equal(fake_count(&x->f, &x->f.starts), 1);
    scheduler_release(x->sched, a);
    runner_handle *b = request_join(&t);
    assert_non_null(b);
    assert_int_equal(fake_count(&x->f, &x->f.stops), 1);
    assert_string_equal(x->f.last_stopped, "/models/0");
    assert_true(is_loaded(x, 1));
    scheduler_release(x->sched, b);
}

/* A runner that exits on its own is noticed, counted and removed; the next request reloads. */
static void test_crashed_runner(void **state)
{
    fixture *x = *state;
    start(x);
    runner_handle *a = acquire(x, 0);
    scheduler_release(x->sched, a);
    pthread_mutex_lock(&x->f.lock);
    x->f.last_started->crashed = true;
    pthread_mutex_unlock(&x->f.lock);
    WAIT_FOR(fake_count(&x->f, &x->f.stops) == 1);
    assert_int_equal(failures(x), 1);
    scheduler_release(x->sched, acquire(x, 0));
    assert_int_equal(fake_count(&x->f, &x->f.starts), 2);
}

/* A runner that fails a request while another still uses it: new requests get a new
 * runner at once; the failed one stops when its last request ends. */
static void test_failed_runner_is_replaced(void **state)
{
    fixture *x = *state;
    start(x);
    runner_handle *a = acquire(x, 0);
    runner_handle *other = acquire(x, 0);
    scheduler_report_failure(x->sched, a);
    assert_int_equal(fake_count(&x->f, &x->f.kills), 1);
    scheduler_release(x->sched, a);
    runner_handle *b = acquire(x, 0);
    assert_ptr_not_equal(a, b);
    assert_int_equal(fake_count(&x->f, &x->f.starts), 2);
    assert_int_equal(fake_count(&x->f, &x->f.stops), 0); /* other still holds it */
    scheduler_release(x->sched, other);
    WAIT_FOR(fake_count(&x->f, &x->f.stops) == 1);
    assert_int_equal(failures(x), 1);
    scheduler_release(x->sched, b);
}

/* A load that fails is a 500 with the runner's reason; nothing stays loaded. */
static void test_load_failure(void **state)
{
    fixture *x = *state;
    x->f.fail_path = "/models/0";
    start(x);
    load_request req = model(x, 0, KEEP);
    unsigned status = 0;
    corral_error err = {{0}};
    assert_null(scheduler_acquire(x->sched, &req, &status, &err));
    assert_int_equal(status, 500);
    assert_string_equal(err.message, "the fake runner would not start");
    assert_int_equal(n_loaded(x), 0);
    assert_int_equal(queue_depth(x), 0);
    scheduler_release(x->sched, acquire(x, 1));
}

/* The same model asked for with another context length is reloaded once idle. */
static void test_other_options_reload(void **state)
{
    fixture *x = *state;
    start(x);
    scheduler_release(x->sched, acquire(x, 0));
    load_request req = model(x, 0, KEEP);
    req.num_ctx = 8192;
    unsigned status;
    corral_error err;
    runner_handle *r = scheduler_acquire(x->sched, &req, &status, &err);
    assert_non_null(r);
    assert_int_equal(runner_handle_n_ctx(r), 4096);
    assert_int_equal(fake_count(&x->f, &x->f.starts), 2);
    assert_int_equal(fake_count(&x->f, &x->f.stops), 1);
    scheduler_release(x->sched, r);
}

/* Requests for a model that is still loading wait for that load instead of starting
 * another copy. */
static void test_concurrent_loads_of_one_model(void **state)
{
    fixture *x = *state;
    x->f.hold_starts = true;
    start(x);
    request_thread t[2];
    request_start(&t[0], x, 0);
    request_start(&t[1], x, 0);
    WAIT_FOR(fake_count(&x->f, &x->f.starts) == 1 && queue_depth(x) == 2);
    sleep_ms(20);
    assert_int_equal(fake_count(&x->f, &x->f.starts), 1);
    fake_release_starts(&x->f);
    runner_handle *a = request_join(&t[0]), *b = request_join(&t[1]);
    assert_non_null(a);
    assert_ptr_equal(a, b);
    assert_int_equal(fake_count(&x->f, &x->f.starts), 1);
    scheduler_release(x->sched, a);
    scheduler_release(x->sched, b);
}

/* Shutting down asks every runner to stop before waiting for the first: each may take its
 * grace period, and several must not take theirs one after another. */
static void test_shutdown_asks_every_runner_first(void **state)
{
    fixture *x = *state;
    start(x);
    for (int i = 0; i < 3; i++)
        scheduler_release(x->sched, acquire(x, i));
    assert_int_equal(n_loaded(x), 3);
    scheduler_free(x->sched);
    x->sched = NULL;
    assert_int_equal(x->f.stops, 3);
    assert_int_equal(x->f.requests_before_first_stop, 3);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_loads_then_shares, setup, teardown),
        cmocka_unit_test_setup_teardown(test_waits_for_a_slot, setup, teardown),
        cmocka_unit_test_setup_teardown(test_full_queue_is_503, setup, teardown),
        cmocka_unit_test_setup_teardown(test_abandoned_request_leaves_the_queue, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_keep_alive_expiry, setup, teardown),
        cmocka_unit_test_setup_teardown(test_evicts_lru_under_memory_pressure, setup, teardown),
        cmocka_unit_test_setup_teardown(test_busy_runner_stays_and_big_model_loads, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_max_loaded_models, setup, teardown),
        cmocka_unit_test_setup_teardown(test_crashed_runner, setup, teardown),
        cmocka_unit_test_setup_teardown(test_failed_runner_is_replaced, setup, teardown),
        cmocka_unit_test_setup_teardown(test_load_failure, setup, teardown),
        cmocka_unit_test_setup_teardown(test_other_options_reload, setup, teardown),
        cmocka_unit_test_setup_teardown(test_concurrent_loads_of_one_model, setup, teardown),
        cmocka_unit_test_setup_teardown(test_shutdown_asks_every_runner_first, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
