/*
 * The chat page's files, embedded at build time (ui.cmake generates the table from
 * src/server/api/ui/). Internal to src/server/api/; ui.c is the only reader.
 */
#ifndef CORRAL_SERVER_UI_ASSETS_H
#define CORRAL_SERVER_UI_ASSETS_H

#include <stddef.h>

typedef struct ui_asset {
    const char *name; /* file name, e.g. "app.js" */
    const unsigned char *data;
    size_t size;
} ui_asset;

extern const ui_asset ui_assets[];
extern const size_t ui_n_assets;

#endif
