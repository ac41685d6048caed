/*
 * The framing of server-sent events shared by the streaming dialects (sse.h).
 */
#include "server/api/sse.h"

bool sse_data(generation_out *out, json_t *data)
{
    return generation_out_json(out, "data: ", data, "\n\n");
}

bool sse_done(generation_out *out)
{
    return generation_out_text(out, "data: [DONE]\n\n");
}

bool sse_typed_event(generation_out *out, const char *type, json_t *head, json_t *data)
{
    json_t *event = data ? json_pack("{s:s}", "type", type) : NULL;
    bool ok = event && (!head || json_object_update(event, head) == 0) &&
              json_object_update(event, data) == 0;
    json_decref(head);
    json_decref(data);
    if (!ok) {
        json_decref(event);
        return false;
    }
    return generation_out_text(out, "event: ") && generation_out_text(out, type) &&
           generation_out_json(out, "\ndata: ", event, "\n\n");
}
