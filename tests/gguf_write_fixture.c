/* The steps the tests' model writers share (gguf_write_fixture.h). */
#include "gguf_write_fixture.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

bool gguf_write_fixture_copy(gguf_writer *w, int pass, const char *name, const gguf_tensor *t,
                             corral_error *err)
{
    return pass == 0 ? gguf_writer_add_tensor(w, name, t->type, t->n_dims, t->ne, err)
                     : gguf_writer_write_tensor(w, t->data, t->size_bytes, err);
}

void gguf_write_fixture_finish(gguf_writer *w, bool ok, const char *path, corral_error *err)
{
    ok = ok && gguf_writer_finish(w, err);
    gguf_writer_free(w);
    if (!ok)
        fail_msg("writing %s: %s", path, err->message);
}
