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
    snprintf(message, size, "%s", body ? "request body must be a JSON object" : jerr.text);
    json_decref(body);
    return NULL;
}
