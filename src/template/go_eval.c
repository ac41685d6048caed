/*
 * Evaluator for the Go text/template subset: walks a go_tree over JSON data, keeping the
 * variable stack, dot, and break/continue signals. Every node and loop iteration costs a
 * sandbox step, named-template calls are depth-limited, and output is bounded by the tbuf.
 */
#include <stdlib.h>
#include <string.h>

#include "template/go_template.h"
#include "template/valuefmt.h"

typedef struct go_var {
    const char *name;
    json_t *value; /* owned reference */
} go_var;

typedef enum go_signal { SIGNAL_NONE, SIGNAL_BREAK, SIGNAL_CONTINUE } go_signal;

typedef struct go_exec {
    const go_tree *tree;
    tsandbox *sb;
    tbuf *out;
    go_var *vars;
    size_t n_vars, cap_vars;
    size_t var_base;  /* variables below this belong to a calling template */
    size_t cut_after; /* nodes later in the document are not rendered */
    go_signal signal;
} go_exec;

static const char *type_name(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        return "map";
    case JSON_ARRAY:
        return "slice";
    case JSON_STRING:
        return "string";
    case JSON_INTEGER:
        return "int";
    case JSON_REAL:
        return "float64";
    case JSON_TRUE:
    case JSON_FALSE:
        return "bool";
    default:
        return "nil";
    }
}

static bool push_var(go_exec *ex, const char *name, json_t *value, size_t pos)
{
    if (ex->n_vars == ex->cap_vars) {
        size_t cap = ex->cap_vars ? ex->cap_vars * 2 : 16;
        go_var *vars = realloc(ex->vars, cap * sizeof *vars);
        if (!vars)
            return tsandbox_fail(ex->sb, pos, "out of memory");
        ex->vars = vars;
        ex->cap_vars = cap;
    }
    ex->vars[ex->n_vars++] = (go_var){name, json_incref(value)};
    return true;
}

static void pop_vars(go_exec *ex, size_t mark)
{
    while (ex->n_vars > mark)
        json_decref(ex->vars[--ex->n_vars].value);
}

static go_var *find_var(go_exec *ex, const char *name)
{
    for (size_t i = ex->n_vars; i > ex->var_base; i--)
        if (strcmp(ex->vars[i - 1].name, name) == 0)
            return &ex->vars[i - 1];
    return NULL;
}

static bool assign_var(go_exec *ex, const char *name, json_t *value, size_t pos)
{
    go_var *var = find_var(ex, name);
    if (!var)
        return tsandbox_fail(ex->sb, pos, "undefined variable: $%s", name);
    json_t *old = var->value;
    var->value = json_incref(value);
    json_decref(old);
    return true;
}

/*
 * The JSON name ollama's structs give a Go field: ToolCalls -> tool_calls, ToolCallID ->
 * tool_call_id, AnyOf -> anyOf, Defs -> $defs. Lets templates read request JSON directly.
 */
static const char *json_name(const char *field, char *buf, size_t size)
{
    if (strcmp(field, "AnyOf") == 0)
        return "anyOf";
    if (strcmp(field, "Defs") == 0)
        return "$defs";
    size_t k = 0;
    for (size_t i = 0; field[i] && k + 2 < size; i++) {
        char c = field[i];
        bool upper = c >= 'A' && c <= 'Z';
        bool prev_lower = i > 0 && field[i - 1] >= 'a' && field[i - 1] <= 'z';
        if (upper && prev_lower)
            buf[k++] = '_';
        buf[k++] = upper ? (char)(c - 'A' + 'a') : c;
    }
    buf[k] = '\0';
    return buf;
}

static json_t *object_field(json_t *obj, const char *field)
{
    json_t *v = json_object_get(obj, field);
    if (!v) {
        char buf[128];
        v = json_object_get(obj, json_name(field, buf, sizeof buf));
    }
    return v;
}

/* Follow .A.B from v (consumed); missing keys give null. */
static json_t *walk_fields(go_exec *ex, json_t *v, char **fields, size_t n, size_t pos)
{
    for (size_t i = 0; i < n && v; i++) {
        json_t *next;
        if (json_is_object(v)) {
            next = object_field(v, fields[i]);
            next = next ? json_incref(next) : json_null();
        } else if (json_is_null(v)) {
            next = json_null();
        } else {
            tsandbox_fail(ex->sb, pos, "can't evaluate field %s in type %s", fields[i],
                          type_name(v));
            next = NULL;
        }
        json_decref(v);
        v = next;
    }
    return v;
}

static json_t *eval_pipe(go_exec *ex, const go_pipe *pipe, json_t *dot, bool apply_decl);

static json_t *eval_arg(go_exec *ex, const go_arg *arg, json_t *dot)
{
    if (!tsandbox_step(ex->sb, arg->pos))
        return NULL;
    json_t *v;
    switch (arg->kind) {
    case GO_ARG_DOT:
    case GO_ARG_FIELD:
        v = json_incref(dot);
        break;
    case GO_ARG_VAR: {
        go_var *var = find_var(ex, arg->name);
        if (!var) {
            tsandbox_fail(ex->sb, arg->pos, "undefined variable: $%s", arg->name);
            return NULL;
        }
        v = json_incref(var->value);
        break;
    }
    case GO_ARG_STRING:
        v = json_stringn_nocheck(arg->str, arg->str_len);
        break;
    case GO_ARG_INT:
        v = json_integer(arg->int_value);
        break;
    case GO_ARG_FLOAT:
        v = json_real(arg->float_value);
        break;
    case GO_ARG_BOOL:
        v = json_boolean(arg->bool_value);
        break;
    case GO_ARG_NIL:
        v = json_null();
        break;
    case GO_ARG_PIPE:
        if (!tsandbox_enter(ex->sb, arg->pos))
            return NULL;
        v = eval_pipe(ex, arg->pipe, dot, false);
        tsandbox_leave(ex->sb);
        if (!v)
            return NULL;
        break;
    case GO_ARG_FUNC:
        v = go_call(arg->func, NULL, 0, ex->sb, arg->pos);
        if (!v)
            return NULL;
        break;
    default:
        v = NULL;
    }
    if (!v) {
        tsandbox_fail(ex->sb, arg->pos, "out of memory");
        return NULL;
    }
    return walk_fields(ex, v, arg->fields, arg->n_fields, arg->pos);
}

/* and/or: evaluate operands left to right, stopping at the first that decides. */
static json_t *eval_and_or(go_exec *ex, const go_cmd *cmd, json_t *dot, json_t *piped)
{
    bool is_and = cmd->args[0]->func == GO_FUNC_AND;
    size_t n = cmd->n_args - 1 + (piped ? 1 : 0);
    if (n == 0) {
        json_decref(piped);
        tsandbox_fail(ex->sb, cmd->pos, "wrong number of args for %s: want at least 1 got 0",
                      is_and ? "and" : "or");
        return NULL;
    }
    json_t *v = NULL;
    for (size_t i = 0; i < n; i++) {
        json_decref(v);
        v = i + 1 < cmd->n_args ? eval_arg(ex, cmd->args[i + 1], dot) : json_incref(piped);
        if (!v)
            break;
        if (tvalue_truth(v) != is_and)
            break;
    }
    json_decref(piped);
    return v;
}

/* One command of a pipeline; piped is the previous command's value (consumed) or NULL. */
static json_t *eval_cmd(go_exec *ex, const go_cmd *cmd, json_t *dot, json_t *piped)
{
    const go_arg *head = cmd->args[0];
    if (head->kind != GO_ARG_FUNC) {
        if (piped) {
            json_decref(piped);
            tsandbox_fail(ex->sb, cmd->pos, "can't give argument to non-function");
            return NULL;
        }
        return eval_arg(ex, head, dot);
    }
    if (head->func == GO_FUNC_AND || head->func == GO_FUNC_OR)
        return eval_and_or(ex, cmd, dot, piped);
    size_t n = cmd->n_args - 1 + (piped ? 1 : 0);
    json_t **args = calloc(n ? n : 1, sizeof *args);
    if (!args) {
        json_decref(piped);
        tsandbox_fail(ex->sb, cmd->pos, "out of memory");
        return NULL;
    }
    bool ok = true;
    for (size_t i = 1; i < cmd->n_args && ok; i++)
        ok = (args[i - 1] = eval_arg(ex, cmd->args[i], dot)) != NULL;
    if (piped)
        args[n - 1] = piped;
    json_t *v = ok ? go_call(head->func, args, n, ex->sb, head->pos) : NULL;
    for (size_t i = 0; i < n; i++)
        json_decref(args[i]);
    free(args);
    return v;
}

static json_t *eval_pipe(go_exec *ex, const go_pipe *pipe, json_t *dot, bool apply_decl)
{
    json_t *v = NULL;
    for (size_t i = 0; i < pipe->n_cmds; i++) {
        v = eval_cmd(ex, pipe->cmds[i], dot, v);
        if (!v)
            return NULL;
    }
    if (apply_decl && pipe->decl != GO_DECL_NONE) {
        bool ok = pipe->decl == GO_DECL_DEFINE ? push_var(ex, pipe->vars[0], v, pipe->pos)
                                               : assign_var(ex, pipe->vars[0], v, pipe->pos);
        if (!ok) {
            json_decref(v);
            return NULL;
        }
    }
    return v;
}

static bool render_list(go_exec *ex, const go_list *list, json_t *dot);

static bool set_range_var(go_exec *ex, const go_pipe *pipe, size_t i, json_t *value)
{
    if (pipe->decl == GO_DECL_DEFINE)
        return push_var(ex, pipe->vars[i], value, pipe->pos);
    return assign_var(ex, pipe->vars[i], value, pipe->pos);
}

/* One iteration: bind variables, render the body; false on error. */
static bool range_step(go_exec *ex, const go_node *node, json_t *key, json_t *elem)
{
    if (!tsandbox_step(ex->sb, node->pos))
        return false;
    size_t mark = ex->n_vars;
    const go_pipe *pipe = node->pipe;
    bool ok = true;
    if (pipe->n_vars == 1)
        ok = set_range_var(ex, pipe, 0, elem);
    else if (pipe->n_vars == 2)
        ok = set_range_var(ex, pipe, 0, key) && set_range_var(ex, pipe, 1, elem);
    ok = ok && render_list(ex, &node->body, elem);
    pop_vars(ex, mark);
    return ok;
}

static int compare_keys(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Go ranges over maps in sorted key order. */
static bool range_object(go_exec *ex, const go_node *node, json_t *obj)
{
    size_t n = json_object_size(obj);
    const char **keys = malloc(n * sizeof *keys);
    if (!keys)
        return tsandbox_fail(ex->sb, node->pos, "out of memory");
    size_t k = 0;
    const char *key;
    json_t *item;
    json_object_foreach(obj, key, item) keys[k++] = key;
    qsort(keys, k, sizeof *keys, compare_keys);
    bool ok = true;
    for (size_t i = 0; i < k && ok; i++) {
        json_t *key_value = json_string_nocheck(keys[i]);
        ok = key_value && range_step(ex, node, key_value, json_object_get(obj, keys[i]));
        json_decref(key_value);
        if (ex->signal == SIGNAL_BREAK) {
            ex->signal = SIGNAL_NONE;
            break;
        }
        ex->signal = SIGNAL_NONE;
    }
    free(keys);
    return ok;
}

static bool render_range(go_exec *ex, const go_node *node, json_t *dot)
{
    json_t *v = eval_pipe(ex, node->pipe, dot, false);
    if (!v)
        return false;
    bool ok = true;
    size_t count = 0;
    if (json_is_array(v)) {
        count = json_array_size(v);
        for (size_t i = 0; i < count && ok; i++) {
            json_t *index = json_integer((json_int_t)i);
            ok = range_step(ex, node, index, json_array_get(v, i));
            json_decref(index);
            if (ex->signal == SIGNAL_BREAK) {
                ex->signal = SIGNAL_NONE;
                break;
            }
            ex->signal = SIGNAL_NONE;
        }
    } else if (json_is_object(v)) {
        count = json_object_size(v);
        ok = range_object(ex, node, v);
    } else if (json_is_integer(v)) {
        json_int_t limit = json_integer_value(v);
        count = limit > 0 ? (size_t)limit : 0;
        for (json_int_t i = 0; i < limit && ok; i++) {
            json_t *index = json_integer(i);
            ok = range_step(ex, node, index, index);
            json_decref(index);
            if (ex->signal == SIGNAL_BREAK) {
                ex->signal = SIGNAL_NONE;
                break;
            }
            ex->signal = SIGNAL_NONE;
        }
    } else if (!json_is_null(v)) {
        ok = tsandbox_fail(ex->sb, node->pos, "range can't iterate over %s", type_name(v));
    }
    json_decref(v);
    if (ok && count == 0 && node->else_body.n)
        ok = render_list(ex, &node->else_body, dot);
    return ok;
}

static bool render_if_with(go_exec *ex, const go_node *node, json_t *dot)
{
    size_t mark = ex->n_vars;
    json_t *v = eval_pipe(ex, node->pipe, dot, true);
    if (!v)
        return false;
    bool ok;
    if (tvalue_truth(v))
        ok = render_list(ex, &node->body, node->kind == GO_NODE_WITH ? v : dot);
    else
        ok = render_list(ex, &node->else_body, dot);
    json_decref(v);
    pop_vars(ex, mark);
    return ok;
}

static bool render_template_call(go_exec *ex, const go_node *node, json_t *dot)
{
    const go_define *def = NULL;
    for (size_t i = ex->tree->n_defines; i > 0 && !def; i--)
        if (strcmp(ex->tree->defines[i - 1]->name, node->name) == 0)
            def = ex->tree->defines[i - 1];
    if (!def)
        return tsandbox_fail(ex->sb, node->pos, "no such template \"%s\"", node->name);
    json_t *v = node->pipe ? eval_pipe(ex, node->pipe, dot, false) : json_null();
    if (!v)
        return false;
    if (!tsandbox_enter(ex->sb, node->pos)) {
        json_decref(v);
        return false;
    }
    size_t saved_base = ex->var_base, mark = ex->n_vars;
    ex->var_base = ex->n_vars;
    bool ok = push_var(ex, "", v, node->pos) && render_list(ex, &def->body, v);
    pop_vars(ex, mark);
    ex->var_base = saved_base;
    tsandbox_leave(ex->sb);
    json_decref(v);
    return ok;
}

static bool emit(go_exec *ex, size_t pos, bool ok)
{
    if (!ok)
        return tsandbox_fail(ex->sb, pos, "output exceeds %zu bytes", ex->out->max_bytes);
    return true;
}

static bool render_node(go_exec *ex, const go_node *node, json_t *dot)
{
    switch (node->kind) {
    case GO_NODE_TEXT:
        return emit(ex, node->pos, tbuf_append(ex->out, node->text, node->text_len));
    case GO_NODE_ACTION: {
        json_t *v = eval_pipe(ex, node->pipe, dot, true);
        if (!v)
            return false;
        bool ok = node->pipe->decl != GO_DECL_NONE || emit(ex, node->pos, tfmt_go(ex->out, v));
        json_decref(v);
        return ok;
    }
    case GO_NODE_IF:
    case GO_NODE_WITH:
        return render_if_with(ex, node, dot);
    case GO_NODE_RANGE:
        return render_range(ex, node, dot);
    case GO_NODE_BREAK:
        ex->signal = SIGNAL_BREAK;
        return true;
    case GO_NODE_CONTINUE:
        ex->signal = SIGNAL_CONTINUE;
        return true;
    case GO_NODE_TEMPLATE:
        return render_template_call(ex, node, dot);
    }
    return false;
}

static bool render_list(go_exec *ex, const go_list *list, json_t *dot)
{
    for (size_t i = 0; i < list->n; i++) {
        if (list->items[i]->seq > ex->cut_after)
            return true;
        if (!tsandbox_step(ex->sb, list->items[i]->pos))
            return false;
        if (!render_node(ex, list->items[i], dot))
            return false;
        if (ex->signal != SIGNAL_NONE)
            return true;
    }
    return true;
}

bool go_render(const go_tree *tree, const json_t *data, size_t cut_after, tsandbox *sb, tbuf *out)
{
    json_t *dot = data ? (json_t *)data : json_null();
    go_exec ex = {.tree = tree, .sb = sb, .out = out, .cut_after = cut_after};
    bool ok = push_var(&ex, "", dot, 0) && render_list(&ex, &tree->root, dot);
    pop_vars(&ex, 0);
    free(ex.vars);
    return ok && !sb->failed;
}
