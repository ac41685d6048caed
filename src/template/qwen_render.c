/*
 * The Qwen family's built-in renderers (template/renderer.h), laid out as ollama's `qwen3.5`
 * (and its variants `ornith` and `qwen3.8`), `qwen3-coder`, `qwen3-vl-instruct` and
 * `qwen3-vl-thinking` renderers lay out their prompts:
 * ChatML turns (<|im_start|>ROLE ... <|im_end|>), tool results gathered into one user turn of
 * <tool_response> blocks, a last assistant turn continued rather than closed, and a new
 * assistant turn to end the prompt. They differ in how tools are offered and calls written
 * back: Qwen 3.5 and Qwen3-Coder call as <tool_call> <function=NAME> <parameter=KEY> (tools as
 * JSON lines, or as XML for the coder), Qwen3-VL as a JSON object inside <tool_call>; and in
 * thinking: Qwen 3.5 thinks unless told not to (and then says so with an empty <think>
 * block), Qwen3-VL's thinking variant thinks unless told not to, the others never do. Ornith
 * and Qwen 3.8 keep a think block in every earlier answer, and Qwen 3.8 also takes a single
 * system turn that says how hard to think (qwen35_variant). Images
 * are already marked in the message text (the server's image markers), so text is all they
 * place.
 */
#include <string.h>

#include "template/gorender.h"
#include "template/renderer.h"

#define IM_START "<|im_start|>"
#define IM_END "<|im_end|>"
#define THINK_OPEN "<think>"
#define THINK_CLOSE "</think>"

/* The call format Qwen 3.5 and Qwen3-Coder are told to use, and the rules of it. */
static const char xml_call_help[] =
    "\n</tools>\n\nIf you choose to call a function ONLY reply in the following format with NO "
    "suffix:\n\n<tool_call>\n<function=example_function_name>\n<parameter=example_parameter_1>\n"
    "value_1\n</parameter>\n<parameter=example_parameter_2>\nThis is the value for the second "
    "parameter\nthat can span\nmultiple lines\n</parameter>\n</function>\n</tool_call>\n\n"
    "<IMPORTANT>\nReminder:\n- Function calls MUST follow the specified format: an inner "
    "<function=...></function> block must be nested within <tool_call></tool_call> XML tags\n"
    "- Required parameters MUST be specified\n- You may provide optional reasoning for your "
    "function call in natural language BEFORE the function call, but NOT after\n- If there is "
    "no function call available, answer the question like normal with your current knowledge "
    "and do not tell the user about function calls\n</IMPORTANT>";

/* A span of a string: where it starts and how long it is. */
typedef struct span {
    const char *s;
    size_t n;
} span;

static span field(const json_t *obj, const char *key)
{
    const json_t *v = json_object_get(obj, key);
    return json_is_string(v) ? (span){json_string_value(v), json_string_length(v)} : (span){"", 0};
}

static bool put(tbuf *out, span t)
{
    return tbuf_append(out, t.s, t.n);
}

static bool is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

/* t less the characters at its ends for which drop says so (left, right: which ends). */
static span trim_by(span t, bool (*drop)(char), bool left, bool right)
{
    while (left && t.n > 0 && drop(t.s[0]))
        t.s++, t.n--;
    while (right && t.n > 0 && drop(t.s[t.n - 1]))
        t.n--;
    return t;
}

static span trim(span t)
{
    return trim_by(t, is_space, true, true);
}

static bool is_newline(char c)
{
    return c == '\n';
}

static bool starts_with(span t, const char *prefix)
{
    size_t n = strlen(prefix);
    return t.n >= n && memcmp(t.s, prefix, n) == 0;
}

static bool ends_with(span t, const char *suffix)
{
    size_t n = strlen(suffix);
    return t.n >= n && memcmp(t.s + t.n - n, suffix, n) == 0;
}

/* Where needle first (or last) occurs in t; NULL when it does not. */
static const char *find(span t, const char *needle, bool last)
{
    size_t n = strlen(needle);
    const char *found = NULL;
    for (size_t i = 0; i + n <= t.n && (!found || last); i++)
        if (memcmp(t.s + i, needle, n) == 0)
            found = t.s + i;
    return found;
}

/* Thinking on for true and for the effort levels, as ollama reads a think value. */
static bool think_bool(const json_t *think)
{
    if (json_is_boolean(think))
        return json_is_true(think);
    const char *level = json_string_value(think);
    return level && (strcmp(level, "high") == 0 || strcmp(level, "medium") == 0 ||
                     strcmp(level, "low") == 0 || strcmp(level, "max") == 0);
}

/* think decides when the request sets it (null: unset), else the renderer's default. */
static bool thinking(const json_t *think, bool default_on)
{
    return think && !json_is_null(think) ? think_bool(think) : default_on;
}

/* Whether m is a user message that is a question, not tool results sent back as a user turn
 * (text wrapped in <tool_response> tags; trimmed first when trimmed). */
static bool is_question(const json_t *m, bool trimmed)
{
    span text = field(m, "content");
    if (trimmed)
        text = trim(text);
    return gorender_is_role(m, "user") &&
           !(starts_with(text, "<tool_response>") && ends_with(text, "</tool_response>"));
}

/* The index of the last question (is_question): an assistant turn after it belongs to the
 * current answer. The last message's index when there is none. */
static size_t last_query(const json_t *messages, bool trimmed)
{
    size_t n = json_array_size(messages);
    for (size_t i = n; i-- > 0;)
        if (is_question(json_array_get(messages, i), trimmed))
            return i;
    return n ? n - 1 : 0;
}

static bool has_query(const json_t *messages)
{
    size_t i;
    const json_t *m;
    json_array_foreach(messages, i, m) {
        if (is_question(m, true))
            return true;
    }
    return false;
}

/* A tool result: the first of a run opens a user turn, the last of it closes the turn. */
static bool tool_result(tbuf *out, const json_t *messages, size_t i, span text)
{
    size_t n = json_array_size(messages);
    bool first = i == 0 || !gorender_is_role(json_array_get(messages, i - 1), "tool");
    bool last = i + 1 == n || !gorender_is_role(json_array_get(messages, i + 1), "tool");
    return (!first || tbuf_puts(out, IM_START "user")) && tbuf_puts(out, "\n<tool_response>\n") &&
           put(out, text) && tbuf_puts(out, "\n</tool_response>") &&
           (!last || tbuf_puts(out, IM_END "\n"));
}

/* A call in Qwen's XML form, each argument between <parameter=KEY> and </parameter> lines
 * (Qwen3-Coder's renderer puts the newlines before its lines, Qwen 3.5's after them). */
static bool xml_call(tbuf *out, const json_t *call, bool coder)
{
    const json_t *fn = json_object_get(call, "function");
    bool ok = tbuf_puts(out, "<tool_call>\n<function=") && put(out, field(fn, "name")) &&
              tbuf_puts(out, coder ? ">" : ">\n");
    const char *key;
    const json_t *value;
    json_object_foreach((json_t *)json_object_get(fn, "arguments"), key, value) {
        ok = ok && tbuf_puts(out, coder ? "\n<parameter=" : "<parameter=") &&
             tbuf_puts(out, key) && tbuf_puts(out, ">\n") &&
             gorender_value_text(out, value) &&
             tbuf_puts(out, coder ? "\n</parameter>" : "\n</parameter>\n");
    }
    return ok &&
           tbuf_puts(out, coder ? "\n</function>\n</tool_call>" : "</function>\n</tool_call>");
}

/* The offered tools as JSON, each on a line of its own after a newline. */
static bool json_tool_lines(tbuf *out, const json_t *tools)
{
    bool ok = true;
    size_t i;
    const json_t *tool;
    json_array_foreach(tools, i, tool) {
        ok = ok && tbuf_putc(out, '\n') && gorender_tool_spaced(out, tool, true);
    }
    return ok;
}

/* The prompt's end: a new assistant turn, unless the last message is one being continued. */
static bool generation_prompt(tbuf *out, const char *opening)
{
    return tbuf_puts(out, IM_START "assistant\n") && tbuf_puts(out, opening);
}

static char *finish(tbuf *out, bool ok, const char *name, size_t *len, corral_error *err)
{
    if (!ok) {
        corral_error_set(err,
                         "%s prompt: out of memory, longer than %zu bytes, or a tool's JSON "
                         "nested too deep",
                         name, out->max_bytes);
        tbuf_free(out);
        return NULL;
    }
    return tbuf_take(out, len);
}

static void start(tbuf *out, const corral_template_limits *limits)
{
    corral_template_limits defaults = corral_template_default_limits();
    tbuf_init(out, (limits ? limits : &defaults)->max_output_bytes);
}

/* ---- Qwen 3.5, and its variants Ornith and Qwen 3.8 ---- */

/* How a layout differs from Qwen 3.5's own (ollama's `ornith` and `qwen3.8` renderers are its
 * renderer with these switches). */
typedef struct qwen35_variant {
    const char *name;
    /* every assistant turn gets a think block (empty when it has no thinking), not only
     * those of the answer under way */
    bool every_think_block;
    /* Qwen 3.8: system and developer messages folded into one leading system turn that also
     * carries the reasoning effort's guidance (and is left out when it would be empty); a
     * history with no question refused; think tags in an earlier answer's content kept as
     * text; turns of other roles written as they are */
    bool qwen38;
} qwen35_variant;

static const qwen35_variant qwen35 = {"qwen3.5", false, false};
static const qwen35_variant ornith = {"ornith", true, false};
static const qwen35_variant qwen38 = {"qwen3.8", true, true};

static const char xhigh_effort[] =
    "Reasoning effort is set to xhigh. Please think carefully through the task, validate key "
    "assumptions, consider plausible alternatives, and prioritize correctness, consistency, "
    "and clarity in the final answer.";
static const char low_effort[] =
    "Reasoning effort is set to low. Keep your thinking brief and focused, moving directly to "
    "the conclusion without unnecessary elaboration.";

/* Qwen 3.8's guidance for think: the xhigh one when unset and for high and max, the low one
 * for low, none for true (which asks for medium), medium and false. False when think is no
 * value ollama takes. */
static bool qwen38_effort(const json_t *think, const char **guidance)
{
    *guidance = "";
    if (!think || json_is_null(think)) {
        *guidance = xhigh_effort;
        return true;
    }
    if (json_is_boolean(think))
        return true;
    const char *level = json_string_value(think);
    if (!level)
        return false;
    if (strcmp(level, "low") == 0)
        *guidance = low_effort;
    else if (strcmp(level, "high") == 0 || strcmp(level, "max") == 0)
        *guidance = xhigh_effort;
    else if (strcmp(level, "medium") != 0)
        return false;
    return true;
}

static bool is_instruction(const json_t *m)
{
    return gorender_is_role(m, "system") || gorender_is_role(m, "developer");
}

/*
 * Qwen 3.8's history: it takes one leading system turn and has no developer role, so the
 * trimmed text of every system and developer message (those not blank) is joined by blank
 * lines into one system message put first, the other messages following in order. messages
 * itself (a new reference) when it has none, or only one and that one first; NULL when out of
 * memory or when the joined text is over max_bytes.
 */
static json_t *qwen38_messages(const json_t *messages, size_t max_bytes)
{
    size_t count = 0, i;
    const json_t *m;
    json_array_foreach(messages, i, m) count += is_instruction(m);
    if (count == 0 || (count == 1 && gorender_is_role(json_array_get(messages, 0), "system")))
        return json_incref((json_t *)messages);
    tbuf text;
    tbuf_init(&text, max_bytes);
    bool ok = true;
    json_array_foreach(messages, i, m) {
        span t = trim(field(m, "content"));
        if (ok && is_instruction(m) && t.n > 0)
            ok = (text.len == 0 || tbuf_puts(&text, "\n\n")) && put(&text, t);
    }
    json_t *folded = ok ? json_array() : NULL;
    ok = folded && json_array_append_new(folded, json_pack("{s:s,s:s%}", "role", "system",
                                                            "content", text.len ? text.data : "",
                                                            text.len)) == 0;
    tbuf_free(&text);
    json_array_foreach(messages, i, m) {
        if (ok && !is_instruction(m))
            ok = json_array_append(folded, (json_t *)m) == 0;
    }
    if (!ok)
        json_decref(folded);
    return ok ? folded : NULL;
}

/*
 * An assistant turn's thinking and answer: the message's own thinking when its think block
 * is written, else (unless tagged is false) what content holds before a closing tag (after
 * the last opening one), the answer then the text after that tag.
 */
static void qwen35_parts(const json_t *m, span content, bool own_thinking, bool tagged,
                         span *reasoning, span *answer)
{
    span thought = field(m, "thinking");
    *answer = content;
    *reasoning = (span){"", 0};
    if (own_thinking && thought.n > 0) {
        *reasoning = trim(thought);
        return;
    }
    const char *close = tagged ? find(content, THINK_CLOSE, false) : NULL;
    if (!close)
        return;
    span before = {content.s, (size_t)(close - content.s)};
    const char *open = find(before, THINK_OPEN, true);
    if (open)
        before = (span){open + strlen(THINK_OPEN), (size_t)(close - open) - strlen(THINK_OPEN)};
    *reasoning = trim(before);
    const char *after = close + strlen(THINK_CLOSE);
    *answer = trim_by((span){after, (size_t)(content.s + content.n - after)}, is_newline, true,
                      false);
}

static bool qwen35_assistant(tbuf *out, const json_t *m, span content, bool think_block,
                             bool tagged)
{
    span reasoning, answer;
    qwen35_parts(m, content, think_block, tagged, &reasoning, &answer);
    bool ok = tbuf_puts(out, IM_START "assistant\n");
    if (think_block)
        ok = ok && tbuf_puts(out, THINK_OPEN "\n") && put(out, reasoning) &&
             tbuf_puts(out, "\n" THINK_CLOSE "\n\n");
    ok = ok && put(out, answer);
    size_t j;
    const json_t *call;
    json_array_foreach(json_object_get(m, "tool_calls"), j, call) {
        const char *sep = j > 0 ? "\n" : trim(answer).n > 0 ? "\n\n" : "";
        ok = ok && tbuf_puts(out, sep) && xml_call(out, call, false);
    }
    return ok;
}

/* The system turn: the effort's guidance (Qwen 3.8's; "" for none), the offered tools and
 * the leading system message's text. Qwen 3.5 writes a leading system turn even when empty,
 * Qwen 3.8 (skip_empty) leaves it out. */
static bool qwen35_system(tbuf *out, const json_t *messages, const json_t *tools,
                          const char *guidance, bool skip_empty)
{
    const json_t *first = json_array_get(messages, 0);
    bool has_system = gorender_is_role(first, "system");
    span system = has_system ? trim(field(first, "content")) : (span){"", 0};
    if (json_array_size(tools) == 0) {
        if (!*guidance && (!has_system || (skip_empty && system.n == 0)))
            return true;
        return tbuf_puts(out, IM_START "system\n") && tbuf_puts(out, guidance) &&
               (!*guidance || system.n == 0 || tbuf_puts(out, "\n\n")) && put(out, system) &&
               tbuf_puts(out, IM_END "\n");
    }
    bool ok = tbuf_puts(out, IM_START "system\n") &&
              (!*guidance || (tbuf_puts(out, guidance) && tbuf_puts(out, "\n\n"))) &&
              tbuf_puts(out, "# Tools\n\nYou have access to the following functions:\n\n"
                             "<tools>");
    ok = ok && json_tool_lines(out, tools);
    ok = ok && tbuf_puts(out, xml_call_help);
    if (system.n > 0)
        ok = ok && tbuf_puts(out, "\n\n") && put(out, system);
    return ok && tbuf_puts(out, IM_END "\n");
}

static char *qwen35_layout(const qwen35_variant *v, const json_t *messages, const json_t *tools,
                           const json_t *think, const corral_template_limits *limits,
                           size_t *len, corral_error *err)
{
    tbuf out;
    start(&out, limits);
    const char *guidance = "";
    if (v->qwen38 && !qwen38_effort(think, &guidance)) {
        corral_error_set(err, "%s prompt: think takes true, false, low, medium, high or max",
                         v->name);
        tbuf_free(&out);
        return NULL;
    }
    json_t *history = v->qwen38 ? qwen38_messages(messages, out.max_bytes)
                                : json_incref((json_t *)messages);
    if (!history)
        return finish(&out, false, v->name, len, err);
    size_t n = json_array_size(history), query = last_query(history, true);
    if (v->qwen38 && !has_query(history)) {
        corral_error_set(err, "%s prompt: no user message with a question", v->name);
        tbuf_free(&out);
        json_decref(history);
        return NULL;
    }
    bool thinks = thinking(think, true);
    bool ok = qwen35_system(&out, history, tools, guidance, v->qwen38);
    for (size_t i = 0; ok && i < n; i++) {
        const json_t *m = json_array_get(history, i);
        span content = trim(field(m, "content"));
        bool last = i + 1 == n, prefill = last && gorender_is_role(m, "assistant");
        bool other = v->qwen38 && !gorender_is_role(m, "system") &&
                     !gorender_is_role(m, "assistant") && !gorender_is_role(m, "tool");
        if (gorender_is_role(m, "user") || (gorender_is_role(m, "system") && i != 0) || other)
            ok = tbuf_printf(&out, IM_START "%s\n", gorender_str(m, "role")) &&
                 put(&out, content) && tbuf_puts(&out, IM_END "\n");
        else if (gorender_is_role(m, "assistant"))
            ok = qwen35_assistant(&out, m, content,
                                  v->every_think_block || (thinks && i > query), !v->qwen38) &&
                 (prefill || tbuf_puts(&out, IM_END "\n"));
        else if (gorender_is_role(m, "tool"))
            ok = tool_result(&out, history, i, content);
        if (ok && last && !prefill)
            ok = generation_prompt(&out, thinks ? THINK_OPEN "\n"
                                                : THINK_OPEN "\n\n" THINK_CLOSE "\n\n");
    }
    json_decref(history);
    return finish(&out, ok, v->name, len, err);
}

char *qwen35_render(const json_t *messages, const json_t *tools, const json_t *think,
                    const corral_template_limits *limits, size_t *len, corral_error *err)
{
    return qwen35_layout(&qwen35, messages, tools, think, limits, len, err);
}

char *ornith_render(const json_t *messages, const json_t *tools, const json_t *think,
                    const corral_template_limits *limits, size_t *len, corral_error *err)
{
    return qwen35_layout(&ornith, messages, tools, think, limits, len, err);
}

char *qwen38_render(const json_t *messages, const json_t *tools, const json_t *think,
                    const corral_template_limits *limits, size_t *len, corral_error *err)
{
    return qwen35_layout(&qwen38, messages, tools, think, limits, len, err);
}

/* ---- Qwen3-Coder ---- */

/* A tool's property or parameters as ollama's structs hold them: the fields of order (those
 * the layout has not written already) present, each on a line as <KEY>VALUE</KEY>, the
 * value JSON for an object or array, else as Go prints it. ollama takes them from a Go map,
 * in no fixed order; here they come in its structs' order. */
static bool coder_extra_fields(tbuf *out, const json_t *fields, const char *const *order,
                               size_t n_order)
{
    bool ok = true;
    for (size_t k = 0; ok && k < n_order; k++) {
        const json_t *v = json_object_get(fields, order[k]);
        if (!v || json_is_null(v))
            continue;
        ok = tbuf_printf(out, "\n<%s>", order[k]) && gorender_value_text(out, v) &&
             tbuf_printf(out, "</%s>", order[k]);
    }
    return ok;
}

/* A parameter's type: one name as it is, several as a JSON array. */
static bool coder_type(tbuf *out, const json_t *fields)
{
    const json_t *type = json_object_get(fields, "type");
    return !type || (tbuf_puts(out, "\n<type>") && gorender_value_text(out, type) &&
                     tbuf_puts(out, "</type>"));
}

static bool coder_tool(tbuf *out, const json_t *tool)
{
    const json_t *fn = json_object_get(tool, "function");
    const json_t *params = json_object_get(fn, "parameters");
    bool ok = tbuf_puts(out, "\n<function>\n<name>") && put(out, field(fn, "name")) &&
              tbuf_puts(out, "</name>");
    if (field(fn, "description").n)
        ok = ok && tbuf_puts(out, "\n<description>") && put(out, field(fn, "description")) &&
             tbuf_puts(out, "</description>");
    ok = ok && tbuf_puts(out, "\n<parameters>");
    static const char *const property_extras[] = {"anyOf", "items", "enum", "properties",
                                                  "required"};
    const char *name;
    const json_t *property;
    json_object_foreach((json_t *)json_object_get(params, "properties"), name, property) {
        json_t *fields = ok ? gorender_property_object(property) : NULL;
        ok = fields && tbuf_puts(out, "\n<parameter>\n<name>") && tbuf_puts(out, name) &&
             tbuf_puts(out, "</name>") && coder_type(out, fields);
        if (ok && field(fields, "description").n)
            ok = tbuf_puts(out, "\n<description>") && put(out, field(fields, "description")) &&
                 tbuf_puts(out, "</description>");
        ok = ok && coder_extra_fields(out, fields, property_extras, 5) &&
             tbuf_puts(out, "\n</parameter>");
        json_decref(fields);
    }
    json_t *fields = ok ? gorender_parameters_object(params) : NULL;
    static const char *const parameters_extras[] = {"$defs", "items", "required"};
    ok = fields && coder_extra_fields(out, fields, parameters_extras, 3);
    json_decref(fields);
    return ok && tbuf_puts(out, "\n</parameters>\n</function>");
}

static bool coder_system(tbuf *out, const json_t *messages, const json_t *tools)
{
    span system = {"", 0};
    size_t i;
    const json_t *m;
    json_array_foreach(messages, i, m) {
        if (gorender_is_role(m, "system") && system.n == 0)
            system = field(m, "content");
    }
    bool has_tools = json_array_size(tools) > 0;
    if (system.n == 0 && !has_tools)
        return true;
    bool ok = tbuf_puts(out, IM_START "system\n") &&
              (system.n ? put(out, system)
                        : tbuf_puts(out, "You are Qwen, a helpful AI assistant that can interact "
                                         "with a computer to solve tasks."));
    if (has_tools) {
        ok = ok && tbuf_puts(out, "\n\n# Tools\n\nYou have access to the following functions:"
                                  "\n\n<tools>");
        const json_t *tool;
        json_array_foreach(tools, i, tool) ok = ok && coder_tool(out, tool);
        ok = ok && tbuf_puts(out, xml_call_help);
    }
    return ok && tbuf_puts(out, IM_END "\n");
}

char *qwen3_coder_render(const json_t *messages, const json_t *tools, const json_t *think,
                         const corral_template_limits *limits, size_t *len, corral_error *err)
{
    (void)think; /* Qwen3-Coder does not think */
    tbuf out;
    start(&out, limits);
    bool ok = coder_system(&out, messages, tools);
    json_t *turns = json_array(); /* the messages but the system ones (borrowed) */
    size_t i;
    const json_t *m;
    json_array_foreach(messages, i, m) {
        if (ok && !gorender_is_role(m, "system"))
            ok = turns && json_array_append(turns, (json_t *)m) == 0;
    }
    size_t n = json_array_size(turns);
    for (i = 0; ok && i < n; i++) {
        m = json_array_get(turns, i);
        span content = field(m, "content");
        bool last = i + 1 == n, prefill = last && gorender_is_role(m, "assistant");
        const json_t *calls = json_object_get(m, "tool_calls");
        if (gorender_is_role(m, "assistant") && json_array_size(calls) > 0) {
            ok = tbuf_puts(&out, IM_START "assistant\n") &&
                 (content.n == 0 || (put(&out, content) && tbuf_putc(&out, '\n')));
            size_t j;
            const json_t *call;
            json_array_foreach(calls, j, call) {
                ok = ok && tbuf_putc(&out, '\n') && xml_call(&out, call, true);
            }
            ok = ok && tbuf_puts(&out, IM_END "\n");
        } else if (gorender_is_role(m, "assistant")) {
            ok = tbuf_puts(&out, IM_START "assistant\n") && put(&out, content) &&
                 (prefill || tbuf_puts(&out, IM_END "\n"));
        } else if (gorender_is_role(m, "tool")) {
            ok = tool_result(&out, turns, i, content);
        } else {
            ok = tbuf_printf(&out, IM_START "%s\n", gorender_str(m, "role")) &&
                 put(&out, content) && tbuf_puts(&out, IM_END "\n");
        }
        if (ok && last && !prefill)
            ok = generation_prompt(&out, "");
    }
    json_decref(turns);
    return finish(&out, ok, "qwen3-coder", len, err);
}

/* ---- Qwen3-VL ---- */

static bool vl_system(tbuf *out, const json_t *messages, const json_t *tools)
{
    const json_t *first = json_array_get(messages, 0);
    bool has_system = gorender_is_role(first, "system");
    span system = field(first, "content");
    if (json_array_size(tools) == 0)
        return !has_system || (tbuf_puts(out, IM_START "system\n") && put(out, system) &&
                               tbuf_puts(out, IM_END "\n"));
    bool ok = tbuf_puts(out, IM_START "system\n") &&
              (!has_system || (put(out, system) && tbuf_puts(out, "\n\n"))) &&
              tbuf_puts(out, "# Tools\n\nYou may call one or more functions to assist with the "
                             "user query.\n\nYou are provided with function signatures within "
                             "<tools></tools> XML tags:\n<tools>");
    ok = ok && json_tool_lines(out, tools);
    return ok && tbuf_puts(out, "\n</tools>\n\nFor each function call, return a json object with "
                                "function name and arguments within <tool_call></tool_call> XML "
                                "tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": "
                                "<args-json-object>}\n</tool_call>" IM_END "\n");
}

static bool vl_assistant(tbuf *out, const json_t *m, span content, bool think_block, bool last)
{
    span reasoning = think_block ? field(m, "thinking") : (span){"", 0};
    bool ok = tbuf_puts(out, IM_START "assistant\n");
    if (think_block && (last || reasoning.n > 0)) {
        ok = ok && tbuf_puts(out, THINK_OPEN "\n") &&
             put(out, trim_by(reasoning, is_newline, true, true));
        if (content.n > 0)
            ok = ok && tbuf_puts(out, "\n" THINK_CLOSE "\n\n") &&
                 put(out, trim_by(content, is_newline, true, false));
    } else {
        ok = ok && put(out, content);
    }
    size_t j;
    const json_t *call;
    json_array_foreach(json_object_get(m, "tool_calls"), j, call) {
        const json_t *fn = json_object_get(call, "function");
        ok = ok && ((j == 0 && content.n == 0) || tbuf_putc(out, '\n')) &&
             tbuf_puts(out, "<tool_call>\n{\"name\": \"") && put(out, field(fn, "name")) &&
             tbuf_puts(out, "\", \"arguments\": ") &&
             gorender_arguments_spaced(out, json_object_get(fn, "arguments")) &&
             tbuf_puts(out, "}\n</tool_call>");
    }
    return ok;
}

static char *vl_render(const json_t *messages, const json_t *tools, bool thinks,
                       const corral_template_limits *limits, size_t *len, corral_error *err)
{
    tbuf out;
    start(&out, limits);
    bool ok = vl_system(&out, messages, tools);
    size_t n = json_array_size(messages), query = last_query(messages, false);
    for (size_t i = 0; ok && i < n; i++) {
        const json_t *m = json_array_get(messages, i);
        span content = field(m, "content");
        bool last = i + 1 == n, prefill = last && gorender_is_role(m, "assistant");
        if (gorender_is_role(m, "user") || (gorender_is_role(m, "system") && i != 0))
            ok = tbuf_printf(&out, IM_START "%s\n", gorender_str(m, "role")) &&
                 put(&out, content) && tbuf_puts(&out, IM_END "\n");
        else if (gorender_is_role(m, "assistant"))
            ok = vl_assistant(&out, m, content, thinks && i > query, last) &&
                 (prefill || tbuf_puts(&out, IM_END "\n"));
        else if (gorender_is_role(m, "tool"))
            ok = tool_result(&out, messages, i, content);
        if (ok && last && !prefill)
            ok = generation_prompt(&out, thinks ? THINK_OPEN "\n" : "");
    }
    return finish(&out, ok, "qwen3-vl", len, err);
}

char *qwen3_vl_instruct_render(const json_t *messages, const json_t *tools, const json_t *think,
                               const corral_template_limits *limits, size_t *len,
                               corral_error *err)
{
    return vl_render(messages, tools, thinking(think, false), limits, len, err);
}

char *qwen3_vl_thinking_render(const json_t *messages, const json_t *tools, const json_t *think,
                               const corral_template_limits *limits, size_t *len,
                               corral_error *err)
{
    return vl_render(messages, tools, thinking(think, true), limits, len, err);
}
