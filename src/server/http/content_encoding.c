/*
 * Compressed request bodies (content_encoding.h): zstd, decoded as a stream into a buffer
 * that grows up to the body cap.
 */
#include "server/http/content_encoding.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <zstd.h>

#define ZSTD_WINDOW_LOG_MAX 23 /* 8 MiB */

static bool refuse(unsigned *status, unsigned code, char *message, size_t size, const char *text)
{
    *status = code;
    snprintf(message, size, "%s", text);
    return false;
}

/* in decoded as zstd (one or more frames) into *out, at most cap bytes. */
static bool decode_zstd(const char *in, size_t in_len, size_t cap, char **out, size_t *out_len,
                        unsigned *status, char *message, size_t size)
{
    ZSTD_DStream *stream = ZSTD_createDStream();
    /* A frame declares the window its decoder must hold; a hostile one could ask for up to
     * 128 MiB per request. 8 MiB is what the usual levels use (level 3: 2 MiB). */
    if (stream && ZSTD_isError(ZSTD_DCtx_setParameter(stream, ZSTD_d_windowLogMax,
                                                      ZSTD_WINDOW_LOG_MAX))) {
        ZSTD_freeDStream(stream);
        stream = NULL;
    }
    size_t buf_cap = in_len < cap / 4 ? in_len * 4 + 1024 : cap + 1; /* + 1: the NUL */
    char *buf = malloc(buf_cap);
    if (!stream || !buf) {
        ZSTD_freeDStream(stream);
        free(buf);
        return refuse(status, 500, message, size, "out of memory");
    }
    ZSTD_inBuffer src = {in, in_len, 0};
    ZSTD_outBuffer dst = {buf, buf_cap - 1, 0};
    size_t left = 1; /* 0 once a frame is complete */
    bool ok = true;
    while (ok && (src.pos < src.size || left != 0)) {
        if (dst.pos == dst.size) { /* the buffer is full: grow it, up to cap */
            if (dst.size >= cap) {
                ok = refuse(status, 413, message, size, "request body larger than the limit "
                                                        "once decompressed");
                break;
            }
            size_t grown_cap = buf_cap * 2 > cap + 1 ? cap + 1 : buf_cap * 2;
            char *grown = realloc(buf, grown_cap);
            if (!grown) {
                ok = refuse(status, 500, message, size, "out of memory");
                break;
            }
            buf = grown;
            buf_cap = grown_cap;
            dst.dst = buf;
            dst.size = buf_cap - 1;
        }
        size_t before_in = src.pos, before_out = dst.pos;
        left = ZSTD_decompressStream(stream, &dst, &src);
        if (ZSTD_isError(left)) {
            *status = 400;
            snprintf(message, size, "invalid zstd request body: %s", ZSTD_getErrorName(left));
            ok = false;
        } else if (src.pos == src.size && left != 0 && dst.pos < dst.size &&
                   src.pos == before_in && dst.pos == before_out) {
            ok = refuse(status, 400, message, size, "invalid zstd request body: truncated");
        }
    }
    ZSTD_freeDStream(stream);
    if (!ok) {
        free(buf);
        return false;
    }
    buf[dst.pos] = '\0';
    *out = buf;
    *out_len = dst.pos;
    return true;
}

bool http_body_decode(const char *encoding, const char *in, size_t in_len, size_t cap,
                      char **out, size_t *out_len, unsigned *status, char *message, size_t size)
{
    *out = NULL;
    *out_len = 0;
    if (!encoding || !*encoding || strcasecmp(encoding, "identity") == 0)
        return true;
    if (strcasecmp(encoding, "zstd") == 0)
        return decode_zstd(in, in_len, cap, out, out_len, status, message, size);
    *status = 415;
    snprintf(message, size, "unsupported Content-Encoding %.64s: send the body as it is or as "
                            "zstd", encoding);
    return false;
}
