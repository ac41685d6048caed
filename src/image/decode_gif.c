/*
 * GIF through giflib: the first frame only, on its logical screen, as the reference decoder
 * shows it. Transparent pixels and pixels whose index has no colour come out black; pixels
 * outside the frame get the background colour when the file names one (index > 0) -- with
 * red and blue swapped, as the reference stores its palette in BGR order and copies that
 * entry as is; files almost never have a first frame smaller than the screen, and matching
 * keeps GIF input identical to it.
 */
#include <gif_lib.h>
#include <stdlib.h>
#include <string.h>

#include "image/decoders.h"

typedef struct gif_source {
    const uint8_t *data;
    size_t len;
    size_t pos;
} gif_source;

static int gif_read_from_memory(GifFileType *gif, GifByteType *out, int want)
{
    gif_source *src = gif->UserData;
    if (want < 0)
        return 0;
    size_t n = (size_t)want;
    if (n > src->len - src->pos)
        n = src->len - src->pos; /* a short read makes giflib report a truncated file */
    memcpy(out, src->data + src->pos, n);
    src->pos += n;
    return (int)n;
}

static bool gif_fail(const GifFileType *gif, corral_error *err)
{
    const char *why = GifErrorString(gif->Error);
    corral_error_set(err, "corrupt GIF: %s", why ? why : "unknown error");
    return false;
}

/* Skip extensions up to the first image, keeping the transparent index a graphic control
 * extension gives the next image (-1 for none). */
static bool gif_find_first_image(GifFileType *gif, int *transparent, corral_error *err)
{
    *transparent = -1;
    for (;;) {
        GifRecordType type;
        if (DGifGetRecordType(gif, &type) == GIF_ERROR)
            return gif_fail(gif, err);
        if (type == IMAGE_DESC_RECORD_TYPE)
            return DGifGetImageDesc(gif) == GIF_ERROR ? gif_fail(gif, err) : true;
        if (type == TERMINATE_RECORD_TYPE) {
            corral_error_set(err, "corrupt GIF: no image in the file");
            return false;
        }
        if (type != EXTENSION_RECORD_TYPE) {
            corral_error_set(err, "corrupt GIF: unexpected record");
            return false;
        }
        int code;
        GifByteType *block;
        if (DGifGetExtension(gif, &code, &block) == GIF_ERROR)
            return gif_fail(gif, err);
        if (code == GRAPHICS_EXT_FUNC_CODE && block && block[0] >= 4) {
            GraphicsControlBlock gcb;
            if (DGifExtensionToGCB(block[0], block + 1, &gcb) == GIF_OK)
                *transparent = gcb.TransparentColor;
        }
        while (block)
            if (DGifGetExtensionNext(gif, &block) == GIF_ERROR)
                return gif_fail(gif, err);
    }
}

static bool gif_draw_first_frame(GifFileType *gif, const image_limits *limits, image_rgb **out,
                                 corral_error *err)
{
    if (!image_check_size((uint64_t)(gif->SWidth > 0 ? gif->SWidth : 0),
                          (uint64_t)(gif->SHeight > 0 ? gif->SHeight : 0), limits, err))
        return false;
    int transparent;
    if (!gif_find_first_image(gif, &transparent, err))
        return false;
    const GifImageDesc *desc = &gif->Image;
    uint32_t sw = (uint32_t)gif->SWidth, sh = (uint32_t)gif->SHeight;
    if (desc->Left < 0 || desc->Top < 0 || desc->Width <= 0 || desc->Height <= 0 ||
        (uint64_t)desc->Left + (uint64_t)desc->Width > sw ||
        (uint64_t)desc->Top + (uint64_t)desc->Height > sh) {
        corral_error_set(err, "corrupt GIF: the first frame lies outside the screen");
        return false;
    }
    const ColorMapObject *map = desc->ColorMap ? desc->ColorMap : gif->SColorMap;
    if (!map) {
        corral_error_set(err, "corrupt GIF: no colour table");
        return false;
    }
    image_rgb *image = *out = image_rgb_create(sw, sh, err);
    if (!image)
        return false;
    memset(image->pixels, 0, (size_t)sw * sh * 3);
    int bg = gif->SBackGroundColor;
    if (bg > 0 && gif->SColorMap && bg < gif->SColorMap->ColorCount) {
        const GifColorType *c = &gif->SColorMap->Colors[bg];
        for (uint32_t y = 0; y < sh; y++)
            for (uint32_t x = 0; x < sw; x++) {
                if (x >= (uint32_t)desc->Left && x < (uint32_t)(desc->Left + desc->Width) &&
                    y >= (uint32_t)desc->Top && y < (uint32_t)(desc->Top + desc->Height))
                    continue;
                uint8_t *p = image->pixels + ((size_t)y * sw + x) * 3;
                p[0] = c->Blue, p[1] = c->Green, p[2] = c->Red;
            }
    }
    GifPixelType *line = malloc((size_t)desc->Width);
    if (!line) {
        corral_error_set(err, "out of memory for a GIF line");
        return false;
    }
    /* Interlaced frames send every 8th row from 0, every 8th from 4, every 4th from 2, then
     * every 2nd from 1. */
    static const int start[4] = {0, 4, 2, 1}, step[4] = {8, 8, 4, 2};
    int passes = desc->Interlace ? 4 : 1;
    for (int pass = 0; pass < passes; pass++) {
        int first = desc->Interlace ? start[pass] : 0, stride = desc->Interlace ? step[pass] : 1;
        for (int row = first; row < desc->Height; row += stride) {
            if (DGifGetLine(gif, line, desc->Width) == GIF_ERROR) {
                free(line);
                return gif_fail(gif, err);
            }
            uint8_t *p = image->pixels + ((size_t)(desc->Top + row) * sw + desc->Left) * 3;
            for (int x = 0; x < desc->Width; x++, p += 3) {
                int index = line[x];
                if (index == transparent || index >= map->ColorCount)
                    continue;
                p[0] = map->Colors[index].Red;
                p[1] = map->Colors[index].Green;
                p[2] = map->Colors[index].Blue;
            }
        }
    }
    free(line);
    return true;
}

image_rgb *image_decode_gif(const uint8_t *data, size_t len, const image_limits *limits,
                            corral_error *err)
{
    gif_source src = {.data = data, .len = len};
    int open_error = 0;
    GifFileType *gif = DGifOpen(&src, gif_read_from_memory, &open_error);
    if (!gif) {
        const char *why = GifErrorString(open_error);
        corral_error_set(err, "corrupt GIF: %s", why ? why : "unreadable header");
        return NULL;
    }
    image_rgb *image = NULL;
    bool ok = gif_draw_first_frame(gif, limits, &image, err);
    int close_error;
    DGifCloseFile(gif, &close_error);
    if (!ok) {
        image_rgb_free(image);
        return NULL;
    }
    return image;
}
