/*
 * The chat page (src/server/ui/, embedded by ui.cmake): /ui/ and its files, and / for a
 * browser (a request that accepts text/html; every other client keeps getting ollama's
 * "Ollama is running", see native_basic.c). Pages go out with a Content-Security-Policy that
 * lets them load and call only this server.
 */
#include <string.h>

#include "server/server.h"
#include "server/api/ui_assets.h"

static const ui_asset *find_asset(const char *name)
{
    for (size_t i = 0; i < ui_n_assets; i++)
        if (strcmp(ui_assets[i].name, name) == 0)
            return &ui_assets[i];
    return NULL;
}

static const char *content_type(const char *name)
{
    static const struct { const char *suffix, *type; } types[] = {
        {".html", "text/html; charset=utf-8"},
        {".js", "text/javascript; charset=utf-8"},
        {".css", "text/css; charset=utf-8"},
        {".svg", "image/svg+xml"},
    };
    size_t n = strlen(name);
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        size_t k = strlen(types[i].suffix);
        if (n > k && strcmp(name + n - k, types[i].suffix) == 0)
            return types[i].type;
    }
    return "application/octet-stream";
}

static void reply_asset(http_reply *reply, const char *name)
{
    const ui_asset *asset = find_asset(name);
    if (!asset) {
        http_reply_text(reply, 404, "text/plain", "404 page not found");
        return;
    }
    http_reply_page(reply, content_type(name), asset->data, asset->size);
}

void routes_ui_index(http_reply *reply)
{
    reply_asset(reply, "index.html");
}

static void handle_index(void *ctx, const http_request *req, http_reply *reply)
{
    (void)ctx;
    (void)req;
    routes_ui_index(reply);
}

static void handle_asset(void *ctx, const http_request *req, http_reply *reply)
{
    (void)ctx;
    reply_asset(reply, req->path_param);
}

static const http_route routes[] = {
    {"GET", "/ui", false, handle_index, NULL},
    {"GET", "/ui/", false, handle_index, NULL},
    {"GET", "/ui/", true, handle_asset, NULL},
};

const route_table routes_ui = {routes, sizeof routes / sizeof routes[0]};
