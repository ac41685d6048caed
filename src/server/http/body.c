/*
 * Request bodies as JSON objects (body.h).
 */
#include "server/http/body.h"

#include <stdio.h>

json_t *http_body_object(const http_request *req, char *message, size_t size)
{
    if (!req->body || req->body_len == 0) {
        snprintf(message, size, "missing request body");
        return NULL;
    }
    json_error_t jerr;
    json_t *body = json_loadb(req->body, req->body_len, 0, &jerr);
    if (json_is_object(body))
        return body;
    if (body)
        snprintf(message, size, "request body must be a JSON object");
    else if (json_error_code(&jerr) == json_error_null_character)
        /* Strings travel as C strings from here to the tokenizer: one holding U+0000 would
         * be cut short without a word, so the body is refused instead. */
        snprintf(message, size, "a string in the request body holds \\u0000 (NUL), which Corral "
                                "does not accept");
    else
        snprintf(message, size, "%s", jerr.text);
    json_decref(body);
    return NULL;
}
