/*
 * `corral create MODEL [-f Modelfile] [-q LEVEL]`: parse the Modelfile, resolve FROM / ADAPTER
 * / DRAFT to local GGUF files (a file, or a directory holding them), a FROM directory holding a
 * Hugging Face safetensors checkpoint (the server converts it) or a model name, hash each
 * file with sha256, upload the blobs the server lacks, then POST /api/create with `files` and
 * draw the server's progress. Paths are relative to the Modelfile's directory; `~` is home.
 */
#include <errno.h>
#include <dirent.h>
#include <limits.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "corral/engine.h"

#include "cli/client.h"
#include "cli/commands.h"
#include "cli/flags.h"
#include "cli/modelfile.h"
#include "cli/progress.h"
#include "convert/hf_adapter.h"
#include "convert/hf_convert.h"
#include "util/file.h"

#define MAX_DIR_FILES 64
#define MAX_CHECKPOINT_FILES 1024 /* shards of the largest checkpoints, and their JSON */
#define DIGEST_TEXT 72 /* "sha256:" + 64 hex + NUL */

typedef struct create_args {
    const char *model;
    const char *modelfile_path; /* NULL: ./Modelfile, else "FROM ." */
    const char *quantize;
    const char *draft_quantize;
} create_args;

static void usage(FILE *out)
{
    fputs("Usage: corral create MODEL [flags]\n\n"
          "Create a model from a Modelfile.\n\n"
          "Flags:\n"
          "  -f, --file PATH       the Modelfile (default: ./Modelfile, else FROM .)\n"
          "  -q, --quantize LEVEL  quantize the model (q8_0, q4_0, q4_K_M, q4_K_S, q5_K_M, q6_K)\n"
          "      --draft-quantize LEVEL  quantize the DRAFT model (same levels; its weights\n"
          "                            must be F32, F16 or BF16)\n\n"
          "A value may also follow '=' (--file=PATH, -f=PATH) or a short flag at once (-fPATH).\n\n"
          "A Hugging Face checkpoint (FROM a directory of *.safetensors) is converted when\n"
          "config.json's \"architectures\" names one of these:\n" HF_SUPPORTED_ARCHITECTURES,
          out);
}

/* 0: parsed; 1: --help shown; 2: usage error */
static int parse_args(int argc, char **argv, create_args *a)
{
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
            usage(stdout);
            return 1;
        }
        flag_match match = flag_value(argc, argv, &i, "--file", 'f', &a->modelfile_path);
        if (match == FLAG_OTHER)
            match = flag_value(argc, argv, &i, "--quantize", 'q', &a->quantize);
        if (match == FLAG_OTHER)
            match = flag_value(argc, argv, &i, "--draft-quantize", 0, &a->draft_quantize);
        if (match == FLAG_BAD_VALUE)
            return 2;
        if (match == FLAG_SET)
            continue;
        if (arg[0] == '-' || a->model) {
            fprintf(stderr, "Error: unexpected argument '%s'\n\n", arg);
            usage(stderr);
            return 2;
        }
        a->model = arg;
    }
    if (!a->model) {
        usage(stderr);
        return 2;
    }
    return 0;
}

/* ollama's expandPath: absolute, ~ or ~/x (home), else relative to the Modelfile's directory. */
static bool expand_path(const char *value, const char *base_dir, char *out, size_t size)
{
    int n;
    if (value[0] == '/') {
        n = snprintf(out, size, "%s", value);
    } else if (value[0] == '~' && (value[1] == '\0' || value[1] == '/')) {
        const char *home = getenv("HOME");
        n = snprintf(out, size, "%s%s", home ? home : "", value + 1);
    } else {
        n = snprintf(out, size, "%s/%s", base_dir, value);
    }
    return n >= 0 && (size_t)n < size;
}

static bool sha256_file(const char *path, progress *shown, char out[DIGEST_TEXT],
                        corral_error *err)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        corral_error_set(err, "%s: %s", path, strerror(errno));
        return false;
    }
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    bool ok = ctx && EVP_DigestInit_ex(ctx, EVP_sha256(), NULL);
    static unsigned char chunk[1 << 20];
    size_t n;
    while (ok && (n = fread(chunk, 1, sizeof chunk, f)) > 0) {
        ok = EVP_DigestUpdate(ctx, chunk, n);
        progress_update(shown, "gathering model components", NULL, 0, 0);
    }
    unsigned char digest[32];
    unsigned digest_len = 0;
    ok = ok && !ferror(f) && EVP_DigestFinal_ex(ctx, digest, &digest_len) && digest_len == 32;
    EVP_MD_CTX_free(ctx);
    fclose(f);
    if (!ok) {
        corral_error_set(err, "%s: cannot hash the file", path);
        return false;
    }
    memcpy(out, "sha256:", 7);
    for (unsigned i = 0; i < 32; i++)
        snprintf(out + 7 + 2 * i, 3, "%02x", digest[i]);
    return true;
}

typedef struct upload_view {
    progress *shown;
    char label[64];
    const char *digest;
} upload_view;

static void on_upload(void *user, uint64_t sent, uint64_t total)
{
    upload_view *v = user;
    progress_update(v->shown, v->label, v->digest, total, sent);
}

/* Hash and upload one file; files[key] = digest. */
static bool add_file(corral_client *client, progress *shown, const char *path, const char *key,
                     json_t *files, corral_error *err)
{
    char digest[DIGEST_TEXT];
    if (!sha256_file(path, shown, digest, err))
        return false;
    upload_view view = {shown, "", digest};
    snprintf(view.label, sizeof view.label, "copying file %.12s", digest + 7);
    if (!client_upload_blob(client, path, digest, on_upload, &view, err))
        return false;
    json_object_set_new(files, key, json_string(digest));
    return true;
}

static bool has_suffix(const char *name, const char *suffix)
{
    size_t n = strlen(name), m = strlen(suffix);
    return n >= m && strcasecmp(name + n - m, suffix) == 0;
}

/* Does the directory hold a Hugging Face checkpoint (model*.safetensors)? */
static bool is_checkpoint_directory(const char *dir_path)
{
    DIR *dir = opendir(dir_path);
    bool found = false;
    struct dirent *entry;
    while (dir && !found && (entry = readdir(dir)))
        found = strncmp(entry->d_name, "model", 5) == 0 &&
                has_suffix(entry->d_name, ".safetensors");
    if (dir)
        closedir(dir);
    return found;
}

/* A checkpoint's file as ollama's CLI picks them: weights, JSON files, the tokenizer model and
 * a standalone chat template. */
static bool is_checkpoint_file(const char *name)
{
    return (strncmp(name, "model", 5) == 0 && has_suffix(name, ".safetensors")) ||
           has_suffix(name, ".json") || strcmp(name, "chat_template.jinja") == 0 ||
           strcmp(name, "tokenizer.model") == 0;
}

/*
 * A checkpoint's JSON files one folder down (sentence-transformers' modules keep their
 * configs there: "1_Pooling/config.json"), as ollama's CLI uploads them, and a module's
 * weights there (EmbeddingGemma's "2_Dense/model.safetensors"), keyed by that path.
 */
static bool add_module_files(corral_client *client, progress *shown, const char *dir_path,
                            json_t *files, size_t *added, size_t max_files, corral_error *err)
{
    DIR *dir = opendir(dir_path);
    if (!dir) {
        corral_error_set(err, "%s: %s", dir_path, strerror(errno));
        return false;
    }
    bool ok = true;
    struct dirent *entry;
    while (ok && (entry = readdir(dir))) {
        char folder[PATH_MAX];
        struct stat st;
        if (entry->d_name[0] == '.' ||
            (size_t)snprintf(folder, sizeof folder, "%s/%s", dir_path, entry->d_name) >=
                sizeof folder ||
            stat(folder, &st) != 0 || !S_ISDIR(st.st_mode))
            continue;
        DIR *inner = opendir(folder);
        struct dirent *file;
        while (ok && inner && (file = readdir(inner))) {
            char path[PATH_MAX], key[NAME_MAX * 2 + 2];
            if ((!has_suffix(file->d_name, ".json") &&
                 strcmp(file->d_name, "model.safetensors") != 0) ||
                (size_t)snprintf(path, sizeof path, "%s/%s", folder, file->d_name) >=
                    sizeof path ||
                stat(path, &st) != 0 || !S_ISREG(st.st_mode))
                continue;
            if (++*added > max_files) {
                corral_error_set(err, "%s holds more than %zu checkpoint files", dir_path,
                                 max_files);
                ok = false;
                break;
            }
            snprintf(key, sizeof key, "%s/%s", entry->d_name, file->d_name);
            ok = add_file(client, shown, path, key, files, err);
        }
        if (inner)
            closedir(inner);
    }
    closedir(dir);
    return ok;
}

/* Does the directory hold a PEFT LoRA adapter (adapter_model.safetensors)? */
static bool is_peft_directory(const char *dir_path)
{
    char path[PATH_MAX];
    struct stat st;
    return (size_t)snprintf(path, sizeof path, "%s/" HF_ADAPTER_WEIGHTS, dir_path) <
               sizeof path &&
           stat(path, &st) == 0;
}

/*
 * The files of a directory that Corral reads, keyed by their names: a Hugging Face checkpoint's
 * (FROM) or PEFT adapter's (ADAPTER) for the server to convert when the directory holds one,
 * else its GGUF files.
 */
static bool add_directory(corral_client *client, progress *shown, const char *dir_path,
                          modelfile_kind kind, json_t *files, corral_error *err)
{
    bool from = kind == MODELFILE_FROM;
    bool checkpoint = from && is_checkpoint_directory(dir_path);
    bool peft = kind == MODELFILE_ADAPTER && is_peft_directory(dir_path);
    size_t max_files = checkpoint ? MAX_CHECKPOINT_FILES : MAX_DIR_FILES;
    DIR *dir = opendir(dir_path);
    if (!dir) {
        corral_error_set(err, "%s: %s", dir_path, strerror(errno));
        return false;
    }
    size_t added = 0;
    bool ok = true;
    struct dirent *entry;
    while (ok && (entry = readdir(dir))) {
        if (checkpoint ? !is_checkpoint_file(entry->d_name)
                       : peft ? !hf_is_adapter_file(entry->d_name)
                              : !has_suffix(entry->d_name, ".gguf"))
            continue;
        char path[PATH_MAX];
        struct stat st;
        if ((size_t)snprintf(path, sizeof path, "%s/%s", dir_path, entry->d_name) >= sizeof path ||
            stat(path, &st) != 0 || !S_ISREG(st.st_mode))
            continue;
        if (++added > max_files) {
            corral_error_set(err, "%s holds more than %zu %s files", dir_path, max_files,
                             checkpoint ? "checkpoint" : "GGUF");
            ok = false;
            break;
        }
        ok = add_file(client, shown, path, entry->d_name, files, err);
    }
    closedir(dir);
    if (ok && checkpoint)
        ok = add_module_files(client, shown, dir_path, files, &added, max_files, err);
    if (ok && added == 0) {
        corral_error_set(err, "no GGUF file in directory %s%s", dir_path,
                         from ? " (and no model*.safetensors checkpoint)" : "");
        ok = false;
    }
    return ok;
}

/* A value the user meant as a file: a missing file is then an error, not a model name. */
static bool looks_like_path(const char *value)
{
    return value[0] == '/' || value[0] == '~' || strncmp(value, "./", 2) == 0 ||
           strncmp(value, "../", 3) == 0 || has_suffix(value, ".gguf");
}

/* Is the file at path a vision projector (a GGUF of architecture "clip")? */
static bool is_projector_file(const char *path)
{
    corral_error err;
    corral_model_file *file = corral_model_file_open(path, &err);
    long i = file ? corral_model_file_find_meta(file, "general.architecture") : -1;
    size_t len = 0;
    const char *arch = i >= 0 && corral_model_file_meta_type(file, (size_t)i) == CORRAL_META_STRING
                           ? corral_model_file_meta_string(file, (size_t)i, 0, &len)
                           : NULL;
    bool projector = arch && len == 4 && memcmp(arch, "clip", 4) == 0;
    corral_model_file_close(file);
    return projector;
}

/*
 * A FROM, ADAPTER or DRAFT value: a local file or directory becomes uploaded blobs under
 * files_key; a FROM that names nothing on disk is a model name. A FROM of a vision projector
 * (ollama's `FROM ./mmproj.gguf` beside the model) adds to the model's files, or to the
 * model named by an earlier FROM.
 */
static bool resolve_source(corral_client *client, progress *shown, const modelfile_command *cmd,
                           const char *base_dir, json_t *request, corral_error *err)
{
    static const char *const keys[] = {
        [MODELFILE_FROM] = "files", [MODELFILE_ADAPTER] = "adapters",
        [MODELFILE_DRAFT] = "draft_files",
    };
    char path[PATH_MAX];
    struct stat st;
    if (!expand_path(cmd->value, base_dir, path, sizeof path)) {
        corral_error_set(err, "line %u: path too long", cmd->line);
        return false;
    }
    if (stat(path, &st) != 0) {
        if (cmd->kind == MODELFILE_FROM && errno == ENOENT && !looks_like_path(cmd->value)) {
            json_object_del(request, "files");
            json_object_set_new(request, "from", json_string(cmd->value));
            return true;
        }
        corral_error_set(err, "line %u: %s: %s", cmd->line, cmd->value, strerror(errno));
        return false;
    }
    json_t *files = json_object();
    bool ok = S_ISDIR(st.st_mode) ? add_directory(client, shown, path, cmd->kind, files, err)
                                  : add_file(client, shown, path,
                                             strrchr(path, '/') ? strrchr(path, '/') + 1 : path,
                                             files, err);
    if (!ok) {
        corral_error_prefix(err, "line %u", cmd->line);
        json_decref(files);
        return false;
    }
    bool projector = cmd->kind == MODELFILE_FROM && S_ISREG(st.st_mode) && is_projector_file(path);
    if (cmd->kind == MODELFILE_FROM && !projector)
        json_object_del(request, "from");
    /* every ADAPTER line adds its adapter, a projector joins the model's files; a later FROM
     * or DRAFT replaces the earlier one */
    json_t *earlier = json_object_get(request, keys[cmd->kind]);
    bool peft = json_object_get(files, HF_ADAPTER_WEIGHTS) != NULL;
    if (cmd->kind == MODELFILE_ADAPTER && earlier &&
        (peft || json_object_get(earlier, HF_ADAPTER_WEIGHTS))) {
        corral_error_set(err, "line %u: a safetensors adapter must be the model's only ADAPTER",
                         cmd->line);
        json_decref(files);
        return false;
    }
    if ((cmd->kind == MODELFILE_ADAPTER || projector) && earlier) {
        json_object_update(earlier, files);
        json_decref(files);
    } else {
        json_object_set_new(request, keys[cmd->kind], files);
    }
    return true;
}

static bool on_create_line(void *user, const json_t *line)
{
    progress_update_json(user, line);
    return true;
}

/* The Modelfile to use: -f, else ./Modelfile, else "FROM ." (ollama's default). */
static char *load_modelfile(const create_args *a, char *base_dir, size_t base_size, size_t *len,
                            corral_error *err)
{
    const char *path = a->modelfile_path;
    struct stat st;
    if (!path && stat("Modelfile", &st) != 0) {
        snprintf(base_dir, base_size, ".");
        *len = strlen("FROM .\n");
        return strdup("FROM .\n");
    }
    path = path ? path : "Modelfile";
    const char *slash = strrchr(path, '/');
    if (slash)
        snprintf(base_dir, base_size, "%.*s", (int)(slash == path ? 1 : slash - path), path);
    else
        snprintf(base_dir, base_size, ".");
    return util_read_file(path, MODELFILE_MAX_BYTES, len, err);
}

/* The Modelfile parsed into mf and the request fields that need no files; before any I/O. */
static bool parse_modelfile(const create_args *a, char *base_dir, size_t base_size,
                            modelfile **mf, json_t **request, corral_error *err)
{
    size_t len = 0;
    char *text = load_modelfile(a, base_dir, base_size, &len, err);
    if (!text)
        return false;
    *mf = modelfile_parse(text, len, err);
    free(text);
    *request = *mf ? modelfile_to_request(*mf, stderr, err) : NULL;
    if (*request)
        return true;
    corral_error_prefix(err, "%s", a->modelfile_path ? a->modelfile_path : "Modelfile");
    modelfile_free(*mf);
    *mf = NULL;
    return false;
}

static bool resolve_sources(const create_args *a, const modelfile *mf, const char *base_dir,
                            corral_client *client, progress *shown, json_t *request,
                            corral_error *err)
{
    for (size_t i = 0; i < mf->n_commands; i++) {
        modelfile_kind kind = mf->commands[i].kind;
        if ((kind == MODELFILE_FROM || kind == MODELFILE_ADAPTER || kind == MODELFILE_DRAFT) &&
            !resolve_source(client, shown, &mf->commands[i], base_dir, request, err)) {
            corral_error_prefix(err, "%s", a->modelfile_path ? a->modelfile_path : "Modelfile");
            return false;
        }
    }
    json_object_set_new(request, "model", json_string(a->model));
    if (a->quantize)
        json_object_set_new(request, "quantize", json_string(a->quantize));
    if (a->draft_quantize)
        json_object_set_new(request, "draft_quantize", json_string(a->draft_quantize));
    return true;
}

int cmd_create(int argc, char **argv)
{
    create_args a = {0};
    int parsed = parse_args(argc, argv, &a);
    if (parsed)
        return parsed == 1 ? 0 : 2;
    corral_error err = {{0}};
    char base_dir[PATH_MAX];
    modelfile *mf = NULL;
    json_t *request = NULL;
    if (!parse_modelfile(&a, base_dir, sizeof base_dir, &mf, &request, &err)) {
        fprintf(stderr, "Error: %s\n", err.message);
        return 1;
    }
    bool has_draft = false;
    for (size_t i = 0; i < mf->n_commands; i++)
        has_draft |= mf->commands[i].kind == MODELFILE_DRAFT;
    if (a.draft_quantize && !has_draft) {
        fprintf(stderr, "Error: --draft-quantize requires a DRAFT model\n");
        modelfile_free(mf);
        json_decref(request);
        return 1;
    }
    corral_client *client = client_connect(&err);
    bool ok = client != NULL;
    if (ok) {
        progress *shown = progress_create(stderr);
        ok = resolve_sources(&a, mf, base_dir, client, shown, request, &err) &&
             client_stream(client, "/api/create", request, on_create_line, shown, &err) / 100 == 2;
        progress_free(shown, true);
    }
    modelfile_free(mf);
    json_decref(request);
    client_close(client);
    if (!ok) {
        fprintf(stderr, "Error: %s\n", err.message);
        return 1;
    }
    return 0;
}
