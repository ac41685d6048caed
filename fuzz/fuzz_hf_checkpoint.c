/*
 * libFuzzer target for the Hugging Face checkpoint conversion (src/convert): one input is a
 * checkpoint's files, each after a line "@@ NAME" (NAME one of the files /api/create takes:
 * config.json, the tokenizer's, *.safetensors shards, an encoder's sentence-transformers
 * modules (modules.json, 1_Pooling/config.json, EmbeddingGemma's 2_Dense and 3_Dense), a PEFT
 * adapter's two files). They are written to a scratch directory and converted to a GGUF, and
 * the adapter, when there is one, for that GGUF (or for a fixture's llama base when the model
 * was refused). Every conversion must either give a file that Corral's GGUF reader opens or be
 * refused with a message and leave no output behind, nor any file of its own beside it.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include "convert/hf_adapter.h"
#include "convert/hf_convert.h"
#include "gguf.h"

#define SECTION_MARK "@@ "
#define ADAPTER_BASE CORRAL_FIXTURES_DIR "/arch/llama-gqa.gguf"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The names a section may carry: a client uploads only files it names, and a name is a path
 * in the scratch directory, so no other is written. */
static const char *const known_names[] = {
    "config.json", "tokenizer.json", "tokenizer_config.json", "tokenizer.model",
    "special_tokens_map.json", "generation_config.json", "preprocessor_config.json",
    "processor_config.json", "added_tokens.json", "chat_template.jinja",
    "model.safetensors.index.json", "model.safetensors", "model-00001-of-00002.safetensors",
    "model-00002-of-00002.safetensors", "consolidated.safetensors", "modules.json",
    "1_Pooling/config.json", "2_Dense/config.json", "2_Dense/model.safetensors",
    "3_Dense/config.json", "3_Dense/model.safetensors",
    HF_ADAPTER_CONFIG, HF_ADAPTER_WEIGHTS};
#define N_KNOWN (sizeof known_names / sizeof known_names[0])

/* The folders of the modules' files above, made in the scratch directory once. */
static const char *const module_dirs[] = {"1_Pooling", "2_Dense", "3_Dense"};
#define N_MODULE_DIRS (sizeof module_dirs / sizeof module_dirs[0])

static char scratch[64];
static char paths[N_KNOWN][128];

/* The index of name (len bytes) among known_names, or -1. */
static int known_index(const uint8_t *name, size_t len)
{
    for (size_t i = 0; i < N_KNOWN; i++)
        if (strlen(known_names[i]) == len && memcmp(known_names[i], name, len) == 0)
            return (int)i;
    return -1;
}

static bool is_module_dir(const char *name)
{
    for (size_t i = 0; i < N_MODULE_DIRS; i++)
        if (strcmp(name, module_dirs[i]) == 0)
            return true;
    return false;
}

static void write_file(const char *path, const uint8_t *bytes, size_t len)
{
    FILE *f = fopen(path, "wb");
    if (!f || (len && fwrite(bytes, 1, len, f) != len) || fclose(f) != 0)
        abort(); /* the scratch directory is the harness's: a failure here is no finding */
}

/* Split the input into files; present[i] says which known names it gave (the last of a name
 * wins, as a client's second upload of a file replaces the first). */
static void write_sections(const uint8_t *data, size_t size, bool present[N_KNOWN])
{
    const uint8_t *end = data + size, *p = data;
    size_t mark = strlen(SECTION_MARK);
    while (p < end) {
        if ((size_t)(end - p) < mark || memcmp(p, SECTION_MARK, mark) != 0)
            return;
        const uint8_t *name = p + mark;
        const uint8_t *eol = memchr(name, '\n', (size_t)(end - name));
        if (!eol)
            return;
        const uint8_t *body = eol + 1, *next = end;
        for (const uint8_t *q = body; q + 1 + mark <= end; q++)
            if (q[0] == '\n' && memcmp(q + 1, SECTION_MARK, mark) == 0) {
                next = q;
                break;
            }
        int i = known_index(name, (size_t)(eol - name));
        if (i >= 0) {
            write_file(paths[i], body, (size_t)(next - body));
            present[i] = true;
        }
        p = next < end ? next + 1 : end;
    }
}

/* A finished conversion's file must open; a refused one must say why and leave nothing. */
static void check_outcome(hf_status status, const corral_error *err, const char *out)
{
    if (status == HF_OK) {
        corral_error why;
        gguf_file *f = gguf_open(out, &why);
        if (!f)
            __builtin_trap();
        gguf_close(f);
        return;
    }
    if (strlen(err->message) == 0 || access(out, F_OK) == 0)
        __builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!scratch[0]) {
        const char *tmp = getenv("TMPDIR");
        snprintf(scratch, sizeof scratch, "%.40s/corral-hf.XXXXXX", tmp ? tmp : "/tmp");
        if (!mkdtemp(scratch))
            abort();
        for (size_t i = 0; i < N_KNOWN; i++)
            snprintf(paths[i], sizeof paths[i], "%s/%s", scratch, known_names[i]);
        for (size_t i = 0; i < N_MODULE_DIRS; i++) {
            char dir[128];
            snprintf(dir, sizeof dir, "%s/%s", scratch, module_dirs[i]);
            if (mkdir(dir, 0700) != 0)
                abort();
        }
    }
    bool present[N_KNOWN] = {false};
    write_sections(data, size, present);

    hf_file model[N_KNOWN], adapter[2];
    size_t n_model = 0, n_adapter = 0;
    for (size_t i = 0; i < N_KNOWN; i++) {
        if (!present[i])
            continue;
        hf_file f = {known_names[i], paths[i]};
        if (hf_is_adapter_file(known_names[i]))
            adapter[n_adapter++] = f;
        else
            model[n_model++] = f;
    }

    char out[128], adapter_out[128];
    snprintf(out, sizeof out, "%s/out.gguf", scratch);
    snprintf(adapter_out, sizeof adapter_out, "%s/adapter.gguf", scratch);
    corral_error err = {{0}};
    hf_status status = hf_convert(model, n_model, out, &err);
    check_outcome(status, &err, out);
    if (n_adapter) {
        corral_error adapter_err = {{0}};
        hf_status s = hf_adapter_convert(adapter, n_adapter,
                                         status == HF_OK ? out : ADAPTER_BASE, adapter_out,
                                         &adapter_err);
        check_outcome(s, &adapter_err, adapter_out);
    }

    unlink(out);
    unlink(adapter_out);
    for (size_t i = 0; i < N_KNOWN; i++)
        if (present[i])
            unlink(paths[i]);
    DIR *dir = opendir(scratch);
    if (!dir)
        abort();
    for (struct dirent *e; (e = readdir(dir));)
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0 &&
            !is_module_dir(e->d_name))
            __builtin_trap(); /* a conversion's temporary file left behind */
    closedir(dir);
    return 0;
}
