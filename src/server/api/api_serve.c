/* Answering a parsed API request (api_serve.h). */
#include "server/api/api_serve.h"

void api_serve_parsed(server *srv, unsigned status, const char *message, chat_request *request,
                      const generation_shape *shape, void *answer, http_reply *reply)
{
    if (status != 200)
        shape->error(reply, status, message);
    else if (!answer)
        shape->error(reply, 500, "out of memory");
    else
        generation_serve(srv, request, shape, answer, reply);
    chat_request_free(request);
}
