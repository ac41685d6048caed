/*
 * A request body read as the JSON object every JSON endpoint expects, with the one set of
 * messages for a body that is missing, is not JSON, or is JSON but not an object. Each
 * dialect answers the message in its own error shape.
 */
#ifndef CORRAL_SERVER_HTTP_BODY_H
#define CORRAL_SERVER_HTTP_BODY_H

#include <jansson.h>
#include <stddef.h>

#include "server/http/http.h"

/*
 * req's body as a JSON object (a new reference); NULL with the reason in message (size bytes):
 * "missing request body", the JSON parser's message, or "request body must be a JSON object".
 * Every one is the client's mistake: a 400.
 */
json_t *http_body_object(const http_request *req, char *message, size_t size);

#endif
