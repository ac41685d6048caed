/*
 * Where building a chat request from an API body stands, and the image part the OpenAI
 * dialects share (api_build.h).
 */
#include "server/api/api_build.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool api_refuse(api_build *b, unsigned status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(b->message, b->size, fmt, ap);
    va_end(ap);
    b->status = status;
    return false;
}

bool api_build_image_message(chat_request *req, const char *role, const json_t *url,
                             const char *field, size_t at, size_t k, api_build *b)
{
    chat_message m = {.role = strdup(role), .content = strdup("")};
    char message[160];
    unsigned status = m.role && m.content
                          ? chat_message_add_image_url(&m, json_string_value(url),
                                                       json_string_length(url), message,
                                                       sizeof message)
                          : 500;
    bool ok = status == 200 && chat_request_push_message(req, &m);
    chat_message_clear(&m);
    if (!ok && status == 200)
        return API_OUT_OF_MEMORY(b);
    return ok || api_refuse(b, status, "%s[%zu].content[%zu]: %s", field, at, k,
                            status == 500 ? "out of memory" : message);
}
