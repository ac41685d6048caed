/*
 * Where building a chat request from an API body stands, and the image part the OpenAI
 * dialects share (api_build.h).
 */
#include "server/api/api_build.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

bool api_refuse(api_build *b, unsigned status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(b->message, b->size, fmt, ap);
    va_end(ap);
    b->status = status;
    return false;
}

bool api_build_image_url(chat_message *m, const json_t *image_url, const char *where,
                         api_build *b)
{
    const json_t *given = json_is_object(image_url) ? json_object_get(image_url, "url")
                                                    : image_url;
    if (!json_is_string(given))
        return api_refuse(b, 400, "%s: invalid message format: image_url must be a data: URL, "
                                  "or {\"url\": a data: URL}", where);
    const char *url = json_string_value(given);
    size_t len = json_string_length(given);
    if ((len >= 7 && strncasecmp(url, "http://", 7) == 0) ||
        (len >= 8 && strncasecmp(url, "https://", 8) == 0))
        return api_refuse(b, 400, "%s: image URLs are not currently supported, please use "
                                  "base64 encoded data instead", where);
    static const char base64_tag[] = ";base64";
    size_t tag = sizeof base64_tag - 1;
    const char *comma = memchr(url, ',', len);
    if (len < 5 || strncasecmp(url, "data:", 5) != 0 || !comma ||
        (size_t)(comma - url) < 5 + tag || strncasecmp(comma - tag, base64_tag, tag) != 0)
        return api_refuse(b, 400, "%s: invalid image input", where);
    size_t start = (size_t)(comma + 1 - url);
    return chat_message_add_image(m, url + start, len - start) || API_OUT_OF_MEMORY(b);
}

bool api_build_image_message(chat_request *req, const char *role, const json_t *image_url,
                             const char *where, api_build *b)
{
    chat_message m = {.role = strdup(role), .content = strdup("")};
    bool ok = (m.role && m.content) || API_OUT_OF_MEMORY(b);
    ok = ok && api_build_image_url(&m, image_url, where, b) &&
         (chat_request_push_message(req, &m) || API_OUT_OF_MEMORY(b));
    chat_message_clear(&m);
    return ok;
}
