/*
 * libFuzzer target for multipart/form-data bodies (server/http/multipart.c) and the
 * /v1/audio/transcriptions form read from them (server/api/transcription.c). The input's
 * first line is the Content-Type header, the rest the body (NUL-terminated, as the HTTP layer
 * hands it over). A crash, sanitizer report, leak or hang is a bug, and so is a part whose
 * bytes are not inside the body, a refusal without a message, or a status that is not a
 * client error.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "server/api/transcription.h"
#include "server/http/multipart.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *eol = memchr(data, '\n', size);
    if (!eol)
        return 0;
    char *type = strndup((const char *)data, (size_t)(eol - data));
    size_t len = size - (size_t)(eol + 1 - data);
    char *body = malloc(len + 1);
    multipart_form *form = malloc(sizeof *form);
    if (!type || !body || !form)
        abort();
    memcpy(body, eol + 1, len);
    body[len] = '\0';
    char message[256] = "";
    if (multipart_parse(type, body, len, form, message, sizeof message)) {
        for (size_t i = 0; i < form->n_parts; i++) {
            const multipart_part *p = &form->parts[i];
            if (p->data < body || p->len > len || p->data + p->len > body + len)
                abort();
        }
    } else if (!*message) {
        abort();
    }
    chat_request *req = NULL;
    transcription_answer answer;
    *message = '\0';
    unsigned status = transcription_parse(type, body, len, &req, &answer, message,
                                          sizeof message);
    if (status == 200)
        chat_request_free(req);
    else if (!*message || status < 400 || status >= 500)
        abort();
    free(form);
    free(body);
    free(type);
    return 0;
}
