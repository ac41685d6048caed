/*
 * A multipart/form-data body (RFC 7578, as RFC 2046 frames its parts) read into its fields:
 * the boundary from the Content-Type header, then each part's field name, file name and
 * content type and its bytes, which point into the body (not copied). Bounded for hostile
 * bodies: at most MULTIPART_MAX_PARTS parts, a part's header block at most
 * MULTIPART_MAX_HEADER_BYTES, names and content types at most MULTIPART_MAX_NAME - 1 bytes;
 * the body itself is under the server's body cap already. Lines end in CRLF, as every
 * client library writes them. Each malformed body is the client's mistake: a message for a
 * 400.
 */
#ifndef CORRAL_SERVER_HTTP_MULTIPART_H
#define CORRAL_SERVER_HTTP_MULTIPART_H

#include <stdbool.h>
#include <stddef.h>

#define MULTIPART_MAX_PARTS 32
#define MULTIPART_MAX_HEADER_BYTES 8192
#define MULTIPART_MAX_NAME 256
#define MULTIPART_MAX_BOUNDARY 70 /* RFC 2046's limit */

typedef struct multipart_part {
    char name[MULTIPART_MAX_NAME];         /* the form field's name */
    bool is_file;                          /* the part names a filename (maybe "") */
    char filename[MULTIPART_MAX_NAME];
    char content_type[MULTIPART_MAX_NAME]; /* "" when the part gives none */
    const char *data;                      /* into the body */
    size_t len;
} multipart_part;

typedef struct multipart_form {
    multipart_part parts[MULTIPART_MAX_PARTS];
    size_t n_parts;
} multipart_form;

/*
 * body (len bytes) read as the multipart/form-data that content_type (the request's header,
 * NULL when it sent none) announces, into *form. False with the reason in message, each
 * starting "failed to parse multipart form: " as ollama's do.
 */
bool multipart_parse(const char *content_type, const char *body, size_t len,
                     multipart_form *form, char *message, size_t size);

/* The first part of form whose field is name; NULL when none is. */
const multipart_part *multipart_field(const multipart_form *form, const char *name);

#endif
