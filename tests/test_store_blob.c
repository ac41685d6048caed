/*
 * Blobs: the streaming writer makes a blob only when size and digest match and leaves no temp
 * file either way; digests are checked before any path exists; GC removes exactly the blobs no
 * manifest references (and stops on an unreadable manifest); the start-up prune removes stale
 * partial files and keeps fresh ones; a file adopted from blobs/ becomes its blob by rename,
 * and a failed adoption leaves nothing.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cmocka.h>

#include "store/store.h"
#include "store_fixture.h"

typedef struct fixture {
    char *root;
    corral_store *store;
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    f->root = store_fixture_make_root();
    corral_error err = {{0}};
    f->store = corral_store_open(f->root, &err);
    if (!f->store)
        fail_msg("open: %s", err.message);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    corral_store_close(f->store);
    store_fixture_remove_root(f->root);
    free(f);
    return 0;
}

static const char payload[] = "the quick brown fox jumps over the lazy dog, several times over";

static void digest_of_text(const char *text, char out[CORRAL_DIGEST_BUF])
{
    corral_digest_of(text, strlen(text), out);
}

static void test_blob_writer_streams_chunks_into_verified_blob(void **state)
{
    fixture *f = *state;
    corral_error err = {{0}};
    char digest[CORRAL_DIGEST_BUF];
    digest_of_text(payload, digest);

    corral_blob_writer *w = corral_blob_writer_create(f->store, UINT64_MAX, &err);
    assert_non_null(w);
    for (size_t at = 0; at < strlen(payload); at += 7) {
        size_t n = strlen(payload) - at < 7 ? strlen(payload) - at : 7;
        assert_true(corral_blob_writer_write(w, payload + at, n, &err));
    }
    assert_int_equal(corral_blob_writer_size(w), strlen(payload));
    assert_int_equal(corral_blob_writer_finish(w, digest, strlen(payload), &err), CORRAL_STORE_OK);
    corral_blob_writer_free(w);

    uint64_t size = 0;
    assert_int_equal(corral_store_blob_stat(f->store, digest, &size, &err), CORRAL_STORE_OK);
    assert_int_equal(size, strlen(payload));
    char name[128];
    snprintf(name, sizeof name, "blobs/sha256-%s", digest + 7);
    assert_true(store_fixture_exists(f->root, name));
    assert_int_equal(store_fixture_count_entries(f->root, "blobs"), 1); /* no temp left */

    char *back = NULL;
    size_t len = 0;
    assert_int_equal(corral_store_blob_read(f->store, digest, 1024, &back, &len, &err),
                     CORRAL_STORE_OK);
    assert_int_equal(len, strlen(payload));
    assert_string_equal(back, payload);
    free(back);
}

static void test_blob_writer_wrong_digest_leaves_no_blob_and_no_temp(void **state)
{
    fixture *f = *state;
    corral_error err = {{0}};
    char other[CORRAL_DIGEST_BUF];
    digest_of_text("something else", other);

    corral_blob_writer *w = corral_blob_writer_create(f->store, UINT64_MAX, &err);
    assert_true(corral_blob_writer_write(w, payload, strlen(payload), &err));
    assert_int_equal(corral_blob_writer_finish(w, other, CORRAL_BLOB_SIZE_UNKNOWN, &err),
                     CORRAL_STORE_INVALID);
    assert_non_null(strstr(err.message, "digest mismatch"));
    assert_non_null(strstr(err.message, other));
    corral_blob_writer_free(w);
    assert_int_equal(corral_store_blob_stat(f->store, other, NULL, &err), CORRAL_STORE_NOT_FOUND);
    assert_int_equal(store_fixture_count_entries(f->root, "blobs"), 0);
}

static void test_blob_writer_wrong_size_leaves_nothing(void **state)
{
    fixture *f = *state;
    corral_error err = {{0}};
    char digest[CORRAL_DIGEST_BUF];
    digest_of_text(payload, digest);
    corral_blob_writer *w = corral_blob_writer_create(f->store, UINT64_MAX, &err);
    assert_true(corral_blob_writer_write(w, payload, strlen(payload), &err));
    assert_int_equal(corral_blob_writer_finish(w, digest, strlen(payload) + 1, &err),
                     CORRAL_STORE_INVALID);
    assert_non_null(strstr(err.message, "size mismatch"));
    corral_blob_writer_free(w);
    assert_int_equal(store_fixture_count_entries(f->root, "blobs"), 0);
}

static void test_blob_writer_rejects_bad_expected_digest_before_any_path(void **state)
{
    fixture *f = *state;
    corral_error err = {{0}};
    corral_blob_writer *w = corral_blob_writer_create(f->store, UINT64_MAX, &err);
    assert_true(corral_blob_writer_write(w, payload, strlen(payload), &err));
    assert_int_equal(corral_blob_writer_finish(w, "sha256:../../manifests/evil", 0, &err),
                     CORRAL_STORE_INVALID);
    assert_non_null(strstr(err.message, "invalid digest format"));
    corral_blob_writer_free(w);
    assert_int_equal(store_fixture_count_entries(f->root, "blobs"), 0);
    assert_int_equal(store_fixture_count_entries(f->root, "manifests"), 0);
    assert_int_equal(store_fixture_count_entries(f->root, ""), 2); /* blobs, manifests */
}

static void test_blob_writer_free_without_finish_removes_temp(void **state)
{
    fixture *f = *state;
    corral_error err = {{0}};
    corral_blob_writer *w = corral_blob_writer_create(f->store, UINT64_MAX, &err);
    assert_true(corral_blob_writer_write(w, payload, 10, &err));
    assert_int_equal(store_fixture_count_entries(f->root, "blobs"), 1);
    corral_blob_writer_free(w);
    assert_int_equal(store_fixture_count_entries(f->root, "blobs"), 0);
    corral_blob_writer_free(NULL);
}

static void test_blob_writer_stops_at_its_cap(void **state)
{
    fixture *f = *state;
    corral_error err = {{0}};
    corral_blob_writer *w = corral_blob_writer_create(f->store, 16, &err);
    assert_true(corral_blob_writer_write(w, payload, 16, &err));
    assert_false(corral_blob_writer_write(w, payload, 1, &err));
    assert_non_null(strstr(err.message, "larger than the limit of 16"));
    char digest[CORRAL_DIGEST_BUF];
    corral_digest_of(payload, 16, digest);
    assert_int_equal(corral_blob_writer_finish(w, digest, CORRAL_BLOB_SIZE_UNKNOWN, &err),
                     CORRAL_STORE_INVALID);
    corral_blob_writer_free(w);
    assert_int_equal(store_fixture_count_entries(f->root, "blobs"), 0);
}

/* A file written in blobs/ becomes its blob by rename: the same inode, nothing left beside it;
 * a second file of the same bytes is removed and the blob kept. */
static void test_blob_adopt_renames_the_file_into_place(void **state)
{
    fixture *f = *state;
    corral_error err = {{0}};
    char want[CORRAL_DIGEST_BUF], digest[CORRAL_DIGEST_BUF];
    digest_of_text(payload, want);
    store_fixture_write(f->root, "blobs/scratch-a", payload, strlen(payload));
    struct stat before, after;
    assert_int_equal(stat(store_fixture_path(f->root, "blobs/scratch-a"), &before), 0);
    char path[4096];
    snprintf(path, sizeof path, "%s", store_fixture_path(f->root, "blobs/scratch-a"));
    uint64_t size = 0;
    bool existed = true;
    if (corral_store_blob_adopt(f->store, path, digest, &size, &existed, &err) != CORRAL_STORE_OK)
        fail_msg("%s", err.message);
    assert_string_equal(digest, want);
    assert_int_equal(size, strlen(payload));
    assert_false(existed);
    assert_false(store_fixture_exists(f->root, "blobs/scratch-a"));
    char *blob = corral_store_blob_path(f->store, digest, &err);
    assert_int_equal(stat(blob, &after), 0);
    free(blob);
    assert_int_equal(after.st_ino, before.st_ino);
    assert_int_equal(after.st_mode & 0777, 0644);
    assert_int_equal(store_fixture_count_entries(f->root, "blobs"), 1);

    store_fixture_write(f->root, "blobs/scratch-b", payload, strlen(payload));
    snprintf(path, sizeof path, "%s", store_fixture_path(f->root, "blobs/scratch-b"));
    assert_int_equal(corral_store_blob_adopt(f->store, path, digest, &size, &existed, &err),
                     CORRAL_STORE_OK);
    assert_true(existed);
    assert_string_equal(digest, want);
    assert_false(store_fixture_exists(f->root, "blobs/scratch-b"));
    assert_int_equal(store_fixture_count_entries(f->root, "blobs"), 1);
    char *text = NULL;
    size_t len = 0;
    assert_int_equal(corral_store_blob_read(f->store, want, 1024, &text, &len, &err),
                     CORRAL_STORE_OK);
    assert_memory_equal(text, payload, strlen(payload));
    free(text);
}

/* A rename that fails leaves neither the file nor a blob; what is not a file of blobs/ is
 * refused and left alone. */
static void test_blob_adopt_failures_leave_nothing_behind(void **state)
{
    fixture *f = *state;
    corral_error err = {{0}};
    char want[CORRAL_DIGEST_BUF], digest[CORRAL_DIGEST_BUF], name[128], path[4096];
    digest_of_text(payload, want);
    snprintf(name, sizeof name, "blobs/sha256-%s", want + strlen("sha256:"));
    assert_int_equal(mkdir(store_fixture_path(f->root, name), 0755), 0); /* in the blob's way */
    store_fixture_write(f->root, "blobs/scratch-a", payload, strlen(payload));
    snprintf(path, sizeof path, "%s", store_fixture_path(f->root, "blobs/scratch-a"));
    uint64_t size;
    bool existed;
    assert_int_equal(corral_store_blob_adopt(f->store, path, digest, &size, &existed, &err),
                     CORRAL_STORE_IO);
    assert_non_null(strstr(err.message, "cannot rename"));
    assert_false(store_fixture_exists(f->root, "blobs/scratch-a"));
    assert_int_equal(store_fixture_count_entries(f->root, "blobs"), 1);

    assert_int_equal(corral_store_blob_adopt(f->store, path, digest, &size, &existed, &err),
                     CORRAL_STORE_IO); /* gone */
    store_fixture_write(f->root, "outside", payload, strlen(payload));
    snprintf(path, sizeof path, "%s", store_fixture_path(f->root, "outside"));
    assert_int_equal(corral_store_blob_adopt(f->store, path, digest, &size, &existed, &err),
                     CORRAL_STORE_INVALID);
    assert_true(store_fixture_exists(f->root, "outside"));
    snprintf(path, sizeof path, "%s", store_fixture_path(f->root, name));
    assert_int_equal(corral_store_blob_adopt(f->store, path, digest, &size, &existed, &err),
                     CORRAL_STORE_INVALID); /* a directory */
    assert_true(store_fixture_exists(f->root, name));
}

static void test_blob_lookups_reject_bad_digests(void **state)
{
    fixture *f = *state;
    corral_error err = {{0}};
    const char *bad = "sha256:../../../etc/passwd";
    assert_int_equal(corral_store_blob_stat(f->store, bad, NULL, &err), CORRAL_STORE_INVALID);
    assert_null(corral_store_blob_path(f->store, bad, &err));
    assert_int_equal(corral_store_blob_touch(f->store, bad, &err), CORRAL_STORE_INVALID);
    char *out;
    size_t len;
    assert_int_equal(corral_store_blob_read(f->store, bad, 10, &out, &len, &err),
                     CORRAL_STORE_INVALID);
    char digest[CORRAL_DIGEST_BUF];
    digest_of_text("absent", digest);
    assert_int_equal(corral_store_blob_stat(f->store, digest, NULL, &err), CORRAL_STORE_NOT_FOUND);
}

static void test_blob_write_is_idempotent_and_read_is_bounded(void **state)
{
    fixture *f = *state;
    corral_error err = {{0}};
    char a[CORRAL_DIGEST_BUF], b[CORRAL_DIGEST_BUF];
    assert_int_equal(corral_store_blob_write(f->store, payload, strlen(payload), a, &err),
                     CORRAL_STORE_OK);
    assert_int_equal(corral_store_blob_write(f->store, payload, strlen(payload), b, &err),
                     CORRAL_STORE_OK);
    assert_string_equal(a, b);
    assert_int_equal(store_fixture_count_entries(f->root, "blobs"), 1);
    char *out = NULL;
    size_t len;
    assert_int_equal(corral_store_blob_read(f->store, a, 8, &out, &len, &err),
                     CORRAL_STORE_INVALID);
    assert_non_null(strstr(err.message, "more than the limit"));
    assert_null(out);
}

/* ---- GC and prune ---- */

static void put_blob(fixture *f, const char *text, char digest[CORRAL_DIGEST_BUF])
{
    corral_error err = {{0}};
    if (corral_store_blob_write(f->store, text, strlen(text), digest, &err) != CORRAL_STORE_OK)
        fail_msg("blob write: %s", err.message);
}

static void put_model(fixture *f, const char *name_text, const char *config, const char *layer)
{
    corral_error err = {{0}};
    corral_model_name name;
    assert_true(corral_model_name_parse(name_text, &name, &err));
    corral_manifest *m = corral_manifest_create();
    assert_true(corral_manifest_set_config(m, CORRAL_MEDIA_CONFIG, config, 2, &err));
    assert_true(corral_manifest_add_layer(m, CORRAL_MEDIA_MODEL, layer, 2, NULL, &err));
    if (corral_store_manifest_write(f->store, &name, m, &err) != CORRAL_STORE_OK)
        fail_msg("manifest write: %s", err.message);
    corral_manifest_free(m);
}

static void test_gc_keeps_referenced_blobs_and_removes_others(void **state)
{
    fixture *f = *state;
    corral_error err = {{0}};
    char config[CORRAL_DIGEST_BUF], shared[CORRAL_DIGEST_BUF], own[CORRAL_DIGEST_BUF],
        orphan[CORRAL_DIGEST_BUF];
    put_blob(f, "c1", config);
    put_blob(f, "s1", shared);
    put_blob(f, "o1", own);
    put_blob(f, "x1", orphan);
    put_model(f, "a", config, shared);
    put_model(f, "b", own, shared);

    size_t removed = 99;
    assert_int_equal(corral_store_gc(f->store, 0, &removed, &err), CORRAL_STORE_OK);
    assert_int_equal(removed, 1);
    assert_int_equal(corral_store_blob_stat(f->store, orphan, NULL, &err), CORRAL_STORE_NOT_FOUND);
    assert_int_equal(corral_store_blob_stat(f->store, config, NULL, &err), CORRAL_STORE_OK);
    assert_int_equal(corral_store_blob_stat(f->store, shared, NULL, &err), CORRAL_STORE_OK);
    assert_int_equal(corral_store_blob_stat(f->store, own, NULL, &err), CORRAL_STORE_OK);
}

static void test_gc_grace_period_spares_fresh_uploads(void **state)
{
    fixture *f = *state;
    corral_error err = {{0}};
    char fresh[CORRAL_DIGEST_BUF], old[CORRAL_DIGEST_BUF];
    put_blob(f, "fresh", fresh);
    put_blob(f, "old", old);
    char name[128];
    snprintf(name, sizeof name, "blobs/sha256-%s", old + 7);
    store_fixture_age(f->root, name, 7200);
    size_t removed = 0;
    assert_int_equal(corral_store_gc(f->store, 3600, &removed, &err), CORRAL_STORE_OK);
    assert_int_equal(removed, 1);
    assert_int_equal(corral_store_blob_stat(f->store, fresh, NULL, &err), CORRAL_STORE_OK);
    assert_int_equal(corral_store_blob_stat(f->store, old, NULL, &err), CORRAL_STORE_NOT_FOUND);
}

static void test_gc_stops_on_unreadable_manifest(void **state)
{
    fixture *f = *state;
    corral_error err = {{0}};
    char orphan[CORRAL_DIGEST_BUF];
    put_blob(f, "maybe referenced", orphan);
    store_fixture_write(f->root, "manifests/registry.ollama.ai/library/broken/latest", "{", 1);
    size_t removed = 99;
    assert_int_equal(corral_store_gc(f->store, 0, &removed, &err), CORRAL_STORE_INVALID);
    assert_non_null(strstr(err.message, "no blob removed"));
    assert_non_null(strstr(err.message, "broken"));
    assert_int_equal(corral_store_blob_stat(f->store, orphan, NULL, &err), CORRAL_STORE_OK);
}

static void test_prune_removes_stale_partials_and_keeps_fresh_ones(void **state)
{
    fixture *f = *state;
    corral_error err = {{0}};
    char blob[CORRAL_DIGEST_BUF];
    put_blob(f, "kept", blob);
    const char *hex = "abababababababababababababababababababababababababababababababab";
    char stale[4][160];
    snprintf(stale[0], sizeof stale[0], "blobs/.corral-tmp-AbC123");
    snprintf(stale[1], sizeof stale[1], "blobs/sha256-%s-partial", hex);
    snprintf(stale[2], sizeof stale[2], "blobs/sha256-%s-partial-0", hex);
    snprintf(stale[3], sizeof stale[3], "manifests/registry.ollama.ai/library/m/.corral-tmp-x1");
    for (size_t i = 0; i < 4; i++) {
        store_fixture_write(f->root, stale[i], "x", 1);
        store_fixture_age(f->root, stale[i], 7200);
    }
    store_fixture_write(f->root, "blobs/.corral-tmp-fresh1", "x", 1);
    /* An old ollama names blobs after the digest itself; it is renamed, not removed. */
    char colon_name[160], dash_name[160];
    snprintf(colon_name, sizeof colon_name, "blobs/sha256:%s", hex);
    snprintf(dash_name, sizeof dash_name, "blobs/sha256-%s", hex);
    store_fixture_write(f->root, colon_name, "y", 1);
    store_fixture_write(f->root, "manifests/example.com/ns/empty/.keep-not", "", 0);
    store_fixture_age(f->root, "manifests/example.com/ns/empty/.keep-not", 7200);

    size_t removed = 0;
    assert_int_equal(corral_store_prune_partials(f->store, 3600, &removed, &err), CORRAL_STORE_OK);
    assert_int_equal(removed, 4);
    for (size_t i = 0; i < 4; i++)
        assert_false(store_fixture_exists(f->root, stale[i]));
    assert_true(store_fixture_exists(f->root, "blobs/.corral-tmp-fresh1"));
    assert_false(store_fixture_exists(f->root, colon_name));
    assert_true(store_fixture_exists(f->root, dash_name));
    assert_int_equal(corral_store_blob_stat(f->store, blob, NULL, &err), CORRAL_STORE_OK);
    /* The directory the temp manifest left is gone; a foreign file keeps its directory. */
    assert_false(store_fixture_exists(f->root, "manifests/registry.ollama.ai"));
    assert_true(store_fixture_exists(f->root, "manifests/example.com/ns/empty/.keep-not"));
    assert_true(store_fixture_exists(f->root, "manifests"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_blob_writer_streams_chunks_into_verified_blob, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_blob_writer_wrong_digest_leaves_no_blob_and_no_temp,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_blob_writer_wrong_size_leaves_nothing, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(
            test_blob_writer_rejects_bad_expected_digest_before_any_path, setup, teardown),
        cmocka_unit_test_setup_teardown(test_blob_writer_free_without_finish_removes_temp, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_blob_writer_stops_at_its_cap, setup, teardown),
        cmocka_unit_test_setup_teardown(test_blob_adopt_renames_the_file_into_place, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_blob_adopt_failures_leave_nothing_behind, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_blob_lookups_reject_bad_digests, setup, teardown),
        cmocka_unit_test_setup_teardown(test_blob_write_is_idempotent_and_read_is_bounded, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_gc_keeps_referenced_blobs_and_removes_others, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_gc_grace_period_spares_fresh_uploads, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_gc_stops_on_unreadable_manifest, setup, teardown),
        cmocka_unit_test_setup_teardown(test_prune_removes_stale_partials_and_keeps_fresh_ones,
                                        setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
