/*
 * corral_template: one parsed template of either language, and the render entry point that
 * sets up the sandbox and output buffer around the engine. See template.h.
 */
#include "template/template.h"

#include <stdint.h>
#include <stdlib.h>

#include "template/go_template.h"
#include "template/jinja_template.h"
#include "template/sandbox.h"
#include "template/tbuf.h"

struct corral_template {
    corral_template_syntax syntax;
    go_tree *go;
    jinja_tree *jinja;
};

corral_template *corral_template_parse(corral_template_syntax syntax, const char *src, size_t len,
                                       corral_error *err)
{
    corral_template *tmpl = calloc(1, sizeof *tmpl);
    if (!tmpl) {
        corral_error_set(err, "out of memory");
        return NULL;
    }
    tmpl->syntax = syntax;
    if (syntax == CORRAL_TEMPLATE_GO)
        tmpl->go = go_parse(src, len, err);
    else
        tmpl->jinja = jinja_parse(src, len, err);
    if (!tmpl->go && !tmpl->jinja) {
        free(tmpl);
        return NULL;
    }
    return tmpl;
}

void corral_template_free(corral_template *tmpl)
{
    if (!tmpl)
        return;
    go_tree_free(tmpl->go);
    jinja_tree_free(tmpl->jinja);
    free(tmpl);
}

corral_template_syntax corral_template_syntax_of(const corral_template *tmpl)
{
    return tmpl->syntax;
}

char *corral_template_render(const corral_template *tmpl, const json_t *vars,
                             const corral_template_limits *limits, size_t *len, corral_error *err)
{
    tsandbox sb;
    tbuf out;
    bool ok;
    if (tmpl->go) {
        tsandbox_init(&sb, tmpl->go->src, tmpl->go->src_len, limits, err);
        tbuf_init(&out, sb.max_bytes);
        ok = go_render(tmpl->go, vars, SIZE_MAX, &sb, &out);
    } else {
        tsandbox_init(&sb, jinja_tree_source(tmpl->jinja), jinja_tree_source_len(tmpl->jinja),
                      limits, err);
        tbuf_init(&out, sb.max_bytes);
        ok = jinja_render(tmpl->jinja, vars, &sb, &out);
    }
    if (!ok) {
        if (!sb.failed)
            corral_error_set(err, "template render failed");
        tbuf_free(&out);
        return NULL;
    }
    char *text = tbuf_take(&out, len);
    if (!text)
        corral_error_set(err, "out of memory");
    return text;
}

bool corral_template_uses_field(const corral_template *tmpl, const char *name)
{
    return tmpl->go && go_tree_uses_field(tmpl->go, name);
}

const go_tree *corral_template_go_tree(const corral_template *tmpl)
{
    return tmpl->go;
}

const jinja_tree *corral_template_jinja_tree(const corral_template *tmpl)
{
    return tmpl->jinja;
}
