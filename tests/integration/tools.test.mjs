// End-to-end test of tool calling and thinking through a real `corral serve`, with the
// published `ollama`, `openai` and `@anthropic-ai/sdk` npm clients. The tiny model cannot
// choose to call a tool, so the call is made certain the way a user can: a JSON schema
// (`format` / response_format) whose consts spell the call, or a tool_choice that forces it,
// under a template that writes calls as bare JSON objects (as llama3.2's does), so the
// tool-call parser sees them. Thinking uses a template whose tags are
// words of the model's known greedy answer ("and" … "countess"): the prompt ends with the
// opening tag, so the reference text splits at a known place. Run by CTest: node
// tools.test.mjs (env CORRAL_BIN, CORRAL_FIXTURES).
import { join } from 'node:path';
import assert from 'node:assert/strict';
import { Ollama } from 'ollama';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { CorralServer, answer, callSchema, expectedCase4, fixtures, runTests, thinkTemplate, thought,
  toolsTemplate, weatherTool } from './harness.mjs';

const server = await CorralServer.create();
const ollama = new Ollama({ host: server.base });
const openai = new OpenAI({ baseURL: `${server.base}/v1`, apiKey: 'unused', maxRetries: 0 });
const anthropic = new Anthropic({ baseURL: server.base, apiKey: 'unused', maxRetries: 0 });
const tests = [];
const test = (name, fn) => tests.push({ name, fn });

const question = [{ role: 'user', content: 'What is the weather in Paris?' }];
const greedy = { temperature: 0, num_predict: 48 };
// the model pads a JSON value with whitespace: room enough for the whole call
const roomy = { temperature: 0, num_predict: 240 };
const callId = /^call_[a-z0-9]{8}$/;

test('models with a tool template and a thinking template show their capabilities', async () => {
  const digest = await server.uploadBlob(join(fixtures, 'tiny-tolstoy-f32.gguf'));
  await ollama.create({ model: 'tolstoy', files: { 'model.gguf': digest } });
  await ollama.create({ model: 'tolstoy-tools', from: 'tolstoy', template: toolsTemplate });
  await ollama.create({ model: 'tolstoy-think', from: 'tolstoy', template: thinkTemplate });
  assert.ok((await ollama.show({ model: 'tolstoy-tools' })).capabilities.includes('tools'));
  assert.ok((await ollama.show({ model: 'tolstoy-think' })).capabilities.includes('thinking'));
  assert.ok(!(await ollama.show({ model: 'tolstoy' })).capabilities.includes('tools'));
});

test('chat with tools returns the call in message.tool_calls, with an id', async () => {
  const r = await ollama.chat({ model: 'tolstoy-tools', messages: question, tools: [weatherTool],
    format: callSchema, options: roomy });
  assert.equal(r.message.content, '');
  assert.equal(r.message.tool_calls.length, 1);
  const [call] = r.message.tool_calls;
  assert.match(call.id, callId);
  assert.deepEqual(call.function, { index: 0, name: 'get_weather', arguments: { city: 'Paris' } });
  assert.equal(r.done_reason, 'stop');
});

test('a streamed chat sends the call once it is complete', async () => {
  const calls = [];
  let content = '';
  for await (const part of await ollama.chat({ model: 'tolstoy-tools', messages: question,
    tools: [weatherTool], format: callSchema, options: roomy, stream: true })) {
    content += part.message.content;
    calls.push(...(part.message.tool_calls ?? []));
  }
  assert.equal(content, '');
  assert.deepEqual(calls.map((c) => c.function.arguments), [{ city: 'Paris' }]);
});

test('without tools in the request the same output stays content', async () => {
  const r = await ollama.chat({ model: 'tolstoy-tools', messages: question, format: callSchema,
    options: roomy });
  assert.equal(r.message.tool_calls, undefined);
  assert.deepEqual(JSON.parse(r.message.content), { name: 'get_weather', parameters: { city: 'Paris' } });
});

test('generate reads calls only for a model whose config names a parser, on the final chunk, as ollama', async () => {
  const created = await server.postJson('/api/create', { model: 'tolstoy-parsed', from: 'tolstoy-tools',
    parser: 'qwen3', stream: false });
  assert.equal(created.status, 200, JSON.stringify(created.json));
  const prompt = question[0].content;
  const call = { index: 0, name: 'get_weather', arguments: { city: 'Paris' } };
  const whole = await ollama.generate({ model: 'tolstoy-parsed', prompt, format: callSchema, options: roomy });
  assert.equal(whole.response, '');
  assert.deepEqual(whole.tool_calls.map((c) => c.function), [call]);
  assert.match(whole.tool_calls[0].id, callId);
  const parts = [];
  for await (const part of await ollama.generate({ model: 'tolstoy-parsed', prompt, format: callSchema,
    options: roomy, stream: true })) parts.push(part);
  assert.equal(parts.map((p) => p.response).join(''), '');
  assert.deepEqual(parts.filter((p) => p.tool_calls).map((p) => [p.done, p.tool_calls[0].function]),
    [[true, call]]);
  const plain = await ollama.generate({ model: 'tolstoy-tools', prompt, format: callSchema, options: roomy });
  assert.equal(plain.tool_calls, undefined);
  assert.deepEqual(JSON.parse(plain.response), { name: 'get_weather', parameters: { city: 'Paris' } });
});

test('a tool round trip renders the call and its result into the prompt', async () => {
  const messages = [...question,
    { role: 'assistant', content: '', tool_calls: [{ function: { name: 'get_weather', arguments: { city: 'Paris' } } }] },
    { role: 'tool', tool_name: 'get_weather', content: '18 degrees' }];
  const r = await server.postJson('/api/chat', { model: 'tolstoy-tools', messages, tools: [weatherTool],
    _debug_render_only: true });
  assert.equal(r.status, 200);
  assert.equal(r.json._debug_info.rendered_template,
    'Tools: get_weather\nQ: What is the weather in Paris?\nA: {"name": "get_weather", "parameters": {"city":"Paris"}}\n' +
    'Result of get_weather: 18 degrees\nA:');
});

test('tools for a model whose template has none, and bad tools, are 400', async () => {
  await assert.rejects(ollama.chat({ model: 'tolstoy', messages: question, tools: [weatherTool] }),
    (e) => e.status_code === 400 && /"tolstoy" does not support tools/.test(e.error));
  const r = await server.postJson('/api/chat', { model: 'tolstoy-tools', messages: question, tools: 'x' });
  assert.equal(r.status, 400);
  assert.match(r.json.error, /tools must be an array/);
  for (const tools of [[1], [{ type: 'function', function: 'x' }], [{ function: { name: 'f', parameters: 3 } }]]) {
    const bad = await server.postJson('/api/chat', { model: 'tolstoy-tools', messages: question, tools });
    assert.equal(bad.status, 400, JSON.stringify(tools));
    assert.match(bad.json.error, /tools\[0\] must be/);
  }
});

test('a thinking model thinks by default: thinking and content split at the tags', async () => {
  const r = await ollama.chat({ model: 'tolstoy-think', options: greedy,
    messages: [{ role: 'user', content: 'Natasha looked at him and' }] });
  assert.equal(r.message.thinking, thought);
  assert.equal(r.message.content, answer);
  const g = await ollama.generate({ model: 'tolstoy-think', prompt: 'Natasha looked at him and',
    think: true, options: greedy });
  assert.deepEqual([g.thinking, g.response], [thought, answer]);
});

test('streamed thinking arrives in its own field, then the content', async () => {
  let thinking = '', content = '', sawContent = false;
  for await (const part of await ollama.chat({ model: 'tolstoy-think', stream: true, options: greedy,
    messages: [{ role: 'user', content: 'Natasha looked at him and' }] })) {
    if (part.message.thinking) assert.ok(!sawContent, 'thinking after content');
    thinking += part.message.thinking ?? '';
    content += part.message.content;
    sawContent ||= part.message.content.length > 0;
  }
  assert.deepEqual([thinking, content], [thought, answer]);
});

test('think false leaves the whole answer as content; think on a plain model is 400', async () => {
  const r = await ollama.chat({ model: 'tolstoy-think', think: false, options: greedy,
    messages: [{ role: 'user', content: 'Natasha looked at him and' }] });
  assert.equal(r.message.thinking, undefined);
  assert.equal(r.message.content, expectedCase4);
  await assert.rejects(ollama.chat({ model: 'tolstoy', think: true, messages: question }),
    (e) => e.status_code === 400 && /"tolstoy" does not support thinking/.test(e.error));
  const bad = await server.postJson('/api/chat', { model: 'tolstoy-think', messages: question, think: 'lots' });
  assert.equal(bad.status, 400);
  assert.match(bad.json.error, /invalid think value/);
});

test('earlier turns lose the thinking a client sent back in their content', async () => {
  const messages = [{ role: 'user', content: 'Q1 ' },
    { role: 'assistant', content: 'and my old reasoning countess The answer. ' },
    { role: 'user', content: 'Q2 ' },
    { role: 'assistant', content: 'and current reasoning countess Part' }];
  const r = await server.postJson('/api/chat', { model: 'tolstoy-think', messages, _debug_render_only: true });
  assert.equal(r.json._debug_info.rendered_template,
    'Q1 The answer. Q2 and current reasoning countess Part');
});

test('format on a thinking model: free thinking, then the answer in the schema', async () => {
  const r = await ollama.chat({ model: 'tolstoy-think', options: roomy, format: callSchema,
    messages: [{ role: 'user', content: 'Natasha looked at him and' }] });
  assert.equal(r.message.thinking, thought);
  assert.deepEqual(JSON.parse(r.message.content), { name: 'get_weather', parameters: { city: 'Paris' } });
});

// A template whose prompt does not open the thinking (the model writes the opening tag
// itself, as Qwen3's does): tags "and" and "army". The tiny model goes on from this prompt
// with " and the army, and the army, ...".
const armyTemplate = '{{ range .Messages }}{{ if eq .Role "assistant" }}{{ if .Thinking }}and {{ .Thinking }} army{{ end }}{{ .Content }}{{ else }}{{ .Content }}{{ end }}{{ end }}';
const armyPrompt = 'Well, Prince, so Genoa and Lucca are now just family estates of the government of the army,';

test('format on a thinking model whose prompt does not open the thinking: it thinks, then answers in the schema', async () => {
  await ollama.create({ model: 'tolstoy-think-army', from: 'tolstoy', template: armyTemplate });
  const free = await ollama.chat({ model: 'tolstoy-think-army', options: greedy,
    messages: [{ role: 'user', content: armyPrompt }] });
  assert.equal(free.message.thinking, 'the');
  const r = await ollama.chat({ model: 'tolstoy-think-army', options: roomy, format: callSchema,
    messages: [{ role: 'user', content: armyPrompt }] });
  assert.equal(r.message.thinking, 'the');
  assert.deepEqual(JSON.parse(r.message.content), { name: 'get_weather', parameters: { city: 'Paris' } });
  const none = await ollama.chat({ model: 'tolstoy-think-army', options: roomy, format: callSchema,
    think: false, messages: [{ role: 'user', content: armyPrompt }] });
  assert.equal(none.message.thinking, undefined);
  assert.deepEqual(JSON.parse(none.message.content), { name: 'get_weather', parameters: { city: 'Paris' } });
});

test('OpenAI chat: tool calls with string arguments and finish_reason tool_calls', async () => {
  const request = { model: 'tolstoy-tools', messages: question, tools: [weatherTool],
    temperature: 0, max_tokens: 240,
    response_format: { type: 'json_schema', json_schema: { name: 'call', schema: callSchema } } };
  const r = await openai.chat.completions.create(request);
  const [choice] = r.choices;
  assert.equal(choice.finish_reason, 'tool_calls');
  assert.equal(choice.message.tool_calls.length, 1);
  const [call] = choice.message.tool_calls;
  assert.match(call.id, callId);
  assert.equal(call.type, 'function');
  assert.deepEqual(call.function, { name: 'get_weather', arguments: '{"city":"Paris"}' });

  const chunks = [];
  for await (const c of await openai.chat.completions.create({ ...request, stream: true })) chunks.push(c);
  const deltas = chunks.flatMap((c) => c.choices.flatMap((x) => x.delta.tool_calls ?? []));
  assert.deepEqual(deltas.map((d) => [d.index, d.type, d.function.name, d.function.arguments]),
    [[0, 'function', 'get_weather', '{"city":"Paris"}']]);
  assert.equal(chunks.at(-1).choices[0].finish_reason, 'tool_calls');

  const none = await openai.chat.completions.create({ ...request, tool_choice: 'none' });
  assert.equal(none.choices[0].finish_reason, 'stop');
  assert.equal(none.choices[0].message.tool_calls, undefined);
});

// A forced call needs no format: the grammar built from the tool's parameters leaves the
// model nothing else to write. Without the force, the same request gets prose. (The tiny
// model would fill an unbounded string up to max_tokens: the city has a maxLength.)
const cityTool = { type: 'function', function: { name: 'get_weather', description: 'The weather',
  parameters: { type: 'object', properties: { city: { type: 'string', maxLength: 12 } }, required: ['city'] } } };
const clockTool = { type: 'function', function: { name: 'get_time', description: 'The time',
  parameters: { type: 'object', properties: { zone: { enum: ['UTC', 'CET'] } }, required: ['zone'] } } };
const forced = { model: 'tolstoy-tools', messages: question, tools: [cityTool, clockTool],
  temperature: 0, max_tokens: 240 };

test('OpenAI chat: tool_choice naming a function forces its call, arguments in its schema', async () => {
  const free = await openai.chat.completions.create(forced);
  assert.equal(free.choices[0].message.tool_calls, undefined);
  assert.equal(free.choices[0].finish_reason, 'length');
  const r = await openai.chat.completions.create({ ...forced, parallel_tool_calls: false,
    tool_choice: { type: 'function', function: { name: 'get_weather' } } });
  const [choice] = r.choices;
  assert.equal(choice.finish_reason, 'tool_calls');
  assert.ok(!choice.message.content);
  assert.equal(choice.message.tool_calls.length, 1);
  const [call] = choice.message.tool_calls;
  assert.equal(call.function.name, 'get_weather');
  const args = JSON.parse(call.function.arguments);
  assert.deepEqual(Object.keys(args), ['city']);
  assert.equal(typeof args.city, 'string');

  const clock = await openai.chat.completions.create({ ...forced,
    tool_choice: { type: 'function', function: { name: 'get_time' } } });
  const [time] = clock.choices[0].message.tool_calls;
  assert.equal(time.function.name, 'get_time');
  assert.ok(['UTC', 'CET'].includes(JSON.parse(time.function.arguments).zone));

  const chunks = [];
  for await (const c of await openai.chat.completions.create({ ...forced, stream: true,
    tool_choice: { type: 'function', function: { name: 'get_time' } } })) chunks.push(c);
  const deltas = chunks.flatMap((c) => c.choices.flatMap((x) => x.delta.tool_calls ?? []));
  assert.deepEqual(deltas.map((d) => [d.function.name, d.function.arguments]),
    [['get_time', time.function.arguments]]);
  assert.equal(chunks.at(-1).choices[0].finish_reason, 'tool_calls');
});

test('OpenAI chat: tool_choice required calls one of the tools', async () => {
  const r = await openai.chat.completions.create({ ...forced, tool_choice: 'required' });
  assert.equal(r.choices[0].finish_reason, 'tool_calls');
  assert.equal(r.choices[0].message.tool_calls.length, 1);
  const [call] = r.choices[0].message.tool_calls;
  assert.ok(['get_weather', 'get_time'].includes(call.function.name), call.function.name);
  assert.equal(typeof JSON.parse(call.function.arguments), 'object');
});

test('Anthropic and Responses clients: a forced choice comes back as the tool call', async () => {
  const tools = [{ name: 'get_weather', input_schema: cityTool.function.parameters }];
  const messages = { model: 'tolstoy-tools', max_tokens: 240, temperature: 0, messages: question };
  const named = await anthropic.messages.create({ ...messages, tools,
    tool_choice: { type: 'tool', name: 'get_weather', disable_parallel_tool_use: true } });
  assert.equal(named.stop_reason, 'tool_use');
  assert.deepEqual(named.content.map((b) => [b.type, b.name]), [['tool_use', 'get_weather']]);
  assert.equal(typeof named.content[0].input.city, 'string');
  const any = await anthropic.messages.create({ ...messages, tools, tool_choice: { type: 'any' } });
  assert.equal(any.stop_reason, 'tool_use');

  const r = await openai.responses.create({ model: 'tolstoy-tools', input: question[0].content,
    temperature: 0, max_output_tokens: 240,
    tools: [{ type: 'function', name: 'get_weather', parameters: cityTool.function.parameters }],
    tool_choice: { type: 'function', name: 'get_weather' } });
  const calls = r.output.filter((item) => item.type === 'function_call');
  assert.deepEqual(calls.map((c) => c.name), ['get_weather']);
  assert.equal(typeof JSON.parse(calls[0].arguments).city, 'string');
});

// thinkTemplate's tags, and calls written as bare JSON under "arguments"
const thinkToolsTemplate = '{{ if .Tools }}{{ end }}{{ range .Messages }}{{ if eq .Role "assistant" }}' +
  '{{ if .Thinking }}and {{ .Thinking }} countess{{ end }}{{ if .ToolCalls }}{{ range .ToolCalls }}' +
  '{"name": "{{ .Function.Name }}", "arguments": {{ .Function.Arguments }}}{{ end }}' +
  '{{ else }}{{ .Content }}{{ end }}{{ else }}{{ .Content }}{{ end }}{{ end }}';

test('a forced call on a thinking model: free thinking, then the call', async () => {
  await ollama.create({ model: 'tolstoy-think-tools', from: 'tolstoy', template: thinkToolsTemplate });
  const r = await openai.chat.completions.create({ model: 'tolstoy-think-tools', temperature: 0,
    max_tokens: 240, messages: [{ role: 'user', content: 'Natasha looked at him and' }],
    tools: [clockTool], tool_choice: 'required' });
  const { message } = r.choices[0];
  assert.equal(message.reasoning, thought);
  assert.equal(message.tool_calls.length, 1);
  assert.equal(message.tool_calls[0].function.name, 'get_time');
  assert.ok(['UTC', 'CET'].includes(JSON.parse(message.tool_calls[0].function.arguments).zone));
});

test('a forced choice it cannot meet is a 400 that says why', async () => {
  const refused = async (path, body, pattern) => {
    const r = await server.postJson(path, body);
    assert.equal(r.status, 400, JSON.stringify(body));
    assert.match(JSON.stringify(r.json), pattern);
  };
  const named = { type: 'function', function: { name: 'get_wether' } };
  await refused('/v1/chat/completions', { ...forced, tool_choice: named },
    /tool_choice names the tool \\"get_wether\\", which is not among the tools/);
  await refused('/v1/messages', { model: 'tolstoy-tools', max_tokens: 8, messages: question,
    tools: [{ name: 'get_weather', input_schema: {} }], tool_choice: { type: 'tool', name: 'f' } },
    /tool_choice names the tool \\"f\\"/);
  await refused('/v1/chat/completions', { ...forced, tool_choice: 'required', tools: undefined },
    /the request has no tools/);
  await refused('/v1/chat/completions', { ...forced, tool_choice: 'required',
    response_format: { type: 'json_object' } }, /tool_choice forces a tool call, which a response format/);
  await refused('/v1/chat/completions', { ...forced, model: 'tolstoy', tool_choice: 'required' },
    /"tolstoy\\" does not support tools/);
});

test('OpenAI chat: an assistant call and a tool result render as ollama renders them', async () => {
  const history = [...question,
    { role: 'assistant', content: null, tool_calls: [{ id: 'call_abc12345', type: 'function',
      function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }] },
    { role: 'tool', tool_call_id: 'call_abc12345', content: '18 degrees' }];
  const r = await openai.chat.completions.create({ model: 'tolstoy-tools', messages: history,
    tools: [weatherTool], temperature: 0, max_tokens: 1 });
  // the prompt the native form renders, counted as a completion of that very text
  const native = [...question,
    { role: 'assistant', content: '', tool_calls: [{ function: { name: 'get_weather', arguments: { city: 'Paris' } } }] },
    { role: 'tool', tool_name: 'get_weather', content: '18 degrees' }];
  const rendered = (await server.postJson('/api/chat', { model: 'tolstoy-tools', messages: native,
    tools: [weatherTool], _debug_render_only: true })).json._debug_info.rendered_template;
  assert.match(rendered, /Result of get_weather: 18 degrees/);
  const same = await openai.completions.create({ model: 'tolstoy', prompt: rendered,
    temperature: 0, max_tokens: 1 });
  assert.ok(same.usage.prompt_tokens > 20);
  assert.equal(r.usage.prompt_tokens, same.usage.prompt_tokens);
  // a result in parts (as MCP tools return them) is one result, its text joined by newlines
  const parts = await openai.chat.completions.create({ model: 'tolstoy-tools', tools: [weatherTool],
    temperature: 0, max_tokens: 1, messages: [...history.slice(0, -1), { role: 'tool',
      tool_call_id: 'call_abc12345', content: [{ type: 'text', text: '18' }, { type: 'text', text: 'degrees' }] }] });
  const joined = (await server.postJson('/api/chat', { model: 'tolstoy-tools', tools: [weatherTool],
    _debug_render_only: true, messages: [...native.slice(0, -1),
      { role: 'tool', tool_name: 'get_weather', content: '18\ndegrees' }] })).json._debug_info.rendered_template;
  const sameJoined = await openai.completions.create({ model: 'tolstoy', prompt: joined,
    temperature: 0, max_tokens: 1 });
  assert.equal(parts.usage.prompt_tokens, sameJoined.usage.prompt_tokens);
});

test('OpenAI chat: thinking comes back as reasoning; reasoning_effort none turns it off', async () => {
  const messages = [{ role: 'user', content: 'Natasha looked at him and' }];
  const r = await openai.chat.completions.create({ model: 'tolstoy-think', messages,
    temperature: 0, max_tokens: 48 });
  assert.equal(r.choices[0].message.reasoning, thought);
  assert.equal(r.choices[0].message.content, answer);
  const off = await openai.chat.completions.create({ model: 'tolstoy-think', messages,
    temperature: 0, max_tokens: 48, reasoning_effort: 'none' });
  assert.equal(off.choices[0].message.reasoning, undefined);
  assert.equal(off.choices[0].message.content, expectedCase4);
  let reasoning = '';
  for await (const c of await openai.chat.completions.create({ model: 'tolstoy-think', messages,
    temperature: 0, max_tokens: 48, stream: true })) reasoning += c.choices[0]?.delta?.reasoning ?? '';
  assert.equal(reasoning, thought);
});

// The families whose calls are not JSON: a template writing calls in that syntax gives the
// model tools, and a forced call is sampled under a grammar of the syntax (tool_grammar.c), so
// that the tiny model writes it and the parser reads it back: Qwen3-Coder's and Qwen 3.5's
// <function=...> with raw values, GLM's <arg_key> pairs, Gemma 4's and FunctionGemma's
// call:NAME{...}, DeepSeek's call tokens and Mistral's [ARGS] (both JSON after the name),
// DeepSeek V3's fenced JSON, DeepSeek V3.2's DSML, LFM2's Python calls and MiniMax M3's
// elements.
const xmlToolsTemplate = `{{- if .Tools }}Tools:{{ range .Tools }} {{ .Function.Name }}{{ end }}
{{ end }}{{ range .Messages }}{{ if eq .Role "user" }}Q: {{ .Content }}
{{ else if eq .Role "assistant" }}A: {{ if .ToolCalls }}<tool_call>
{{ range .ToolCalls }}<function={{ .Function.Name }}>
{{ range $k, $v := .Function.Arguments }}<parameter={{ $k }}>
{{ $v }}
</parameter>
{{ end }}</function>
{{ end }}</tool_call>{{ else }}{{ .Content }}{{ end }}
{{ end }}{{ end }}A:`;
const callsTemplate = (calls) => `{{- if .Tools }}Tools:{{ range .Tools }} {{ .Function.Name }}{{ end }}
{{ end }}{{ range .Messages }}{{ if eq .Role "user" }}Q: {{ .Content }}
{{ else if eq .Role "assistant" }}A: {{ if .ToolCalls }}${calls}{{ else }}{{ .Content }}{{ end }}
{{ end }}{{ end }}A:`;
const families = {
  'tolstoy-xml': xmlToolsTemplate,
  'tolstoy-glm': callsTemplate('{{ range .ToolCalls }}<tool_call>{{ .Function.Name }}' +
    '{{ range $k, $v := .Function.Arguments }}<arg_key>{{ $k }}</arg_key>' +
    '<arg_value>{{ $v }}</arg_value>{{ end }}</tool_call>{{ end }}'),
  'tolstoy-gemma4': callsTemplate('{{ range .ToolCalls }}<|tool_call>call:{{ .Function.Name }}' +
    '{}<tool_call|>{{ end }}'),
  'tolstoy-deepseek': callsTemplate('<｜tool▁calls▁begin｜>{{ range .ToolCalls }}<｜tool▁call▁begin｜>' +
    '{{ .Function.Name }}<｜tool▁sep｜>{{ .Function.Arguments }}<｜tool▁call▁end｜>{{ end }}<｜tool▁calls▁end｜>'),
  'tolstoy-mistral': callsTemplate('{{ range .ToolCalls }}[TOOL_CALLS]{{ .Function.Name }}[ARGS]' +
    '{{ .Function.Arguments }}{{ end }}'),
  'tolstoy-dsml': callsTemplate('<｜DSML｜function_calls>\n{{ range .ToolCalls }}<｜DSML｜invoke name="' +
    '{{ .Function.Name }}">\n{{ range $k, $v := .Function.Arguments }}<｜DSML｜parameter name="{{ $k }}" ' +
    'string="true">{{ $v }}</｜DSML｜parameter>\n{{ end }}</｜DSML｜invoke>\n{{ end }}</｜DSML｜function_calls>'),
  'tolstoy-lfm2': callsTemplate('<|tool_call_start|>[{{ range .ToolCalls }}{{ .Function.Name }}(' +
    '{{ range $k, $v := .Function.Arguments }}{{ $k }}={{ $v }}{{ end }}){{ end }}]<|tool_call_end|>'),
  'tolstoy-fenced': callsTemplate('<｜tool▁calls▁begin｜>{{ range .ToolCalls }}<｜tool▁call▁begin｜>function' +
    '<｜tool▁sep｜>{{ .Function.Name }}\n```json\n{{ .Function.Arguments }}\n```<｜tool▁call▁end｜>{{ end }}' +
    '<｜tool▁calls▁end｜>'),
  'tolstoy-functiongemma': callsTemplate('{{ range .ToolCalls }}<start_function_call>call:{{ .Function.Name }}' +
    '{{ "{" }}{{ range $k, $v := .Function.Arguments }}{{ $k }}:<escape>{{ $v }}<escape>{{ end }}' +
    '{{ "}" }}<end_function_call>{{ end }}'),
  'tolstoy-m3': callsTemplate(']<]minimax[>[<tool_call>\n{{ range .ToolCalls }}]<]minimax[>[<invoke name="' +
    '{{ .Function.Name }}">{{ range $k, $v := .Function.Arguments }}]<]minimax[>[<{{ $k }}>{{ $v }}' +
    ']<]minimax[>[</{{ $k }}>{{ end }}]<]minimax[>[</invoke>\n{{ end }}]<]minimax[>[</tool_call>'),
};

test('templates writing calls in their own syntax have tools; a forced call comes back as the call', async () => {
  for (const [model, template] of Object.entries(families)) {
    await ollama.create({ model, from: 'tolstoy', template });
    assert.ok((await ollama.show({ model })).capabilities.includes('tools'), model);
    const free = await ollama.chat({ model, messages: question, tools: [weatherTool], options: greedy });
    assert.equal(free.message.tool_calls, undefined, model);
    assert.ok(free.message.content.length > 0, model);

    const r = await openai.chat.completions.create({ ...forced, model, tool_choice: 'required' });
    assert.equal(r.choices[0].finish_reason, 'tool_calls', model);
    assert.ok(!r.choices[0].message.content, model);
    assert.equal(r.choices[0].message.tool_calls.length, 1, model);
    const [call] = r.choices[0].message.tool_calls;
    const args = JSON.parse(call.function.arguments);
    if (call.function.name === 'get_weather') {
      assert.deepEqual(Object.keys(args), ['city'], model);
      assert.ok(typeof args.city === 'string' && [...args.city].length <= 12, `${model}: ${args.city}`);
    } else {
      assert.equal(call.function.name, 'get_time', model);
      assert.ok(['UTC', 'CET'].includes(args.zone), `${model}: ${args.zone}`);
    }

    const named = await anthropic.messages.create({ model, max_tokens: 240, temperature: 0,
      messages: question, tools: [{ name: 'get_time', input_schema: clockTool.function.parameters }],
      tool_choice: { type: 'tool', name: 'get_time' } });
    assert.equal(named.stop_reason, 'tool_use', model);
    assert.deepEqual(named.content.map((b) => [b.type, b.name]), [['tool_use', 'get_time']], model);
    assert.ok(['UTC', 'CET'].includes(named.content[0].input.zone), model);
  }
});

// Cohere's and Glimmer's built-in renderers, thinking on: the server ends the prompt with what
// opens the call (Cohere's thinking closed empty and <|START_ACTION|>, Glimmer's message
// header), the answer is at once Cohere's action list (its whitespace takes the renderer's
// blank lines) or Glimmer's ATEM block, and each parser, having read that opening first, reads
// the call back.
test('the Cohere and Glimmer renderers: a forced call comes back as the call', async () => {
  for (const renderer of ['cohere', 'glimmer']) {
    const model = `tolstoy-${renderer}`;
    await ollama.create({ model, from: 'tolstoy', renderer, parser: renderer });
    const r = await anthropic.messages.create({ model, max_tokens: 240, temperature: 0,
      messages: question, thinking: { type: 'enabled', budget_tokens: 1024 },
      tools: [{ name: 'get_time', input_schema: clockTool.function.parameters }],
      tool_choice: { type: 'tool', name: 'get_time' } });
    assert.equal(r.stop_reason, 'tool_use', renderer);
    assert.deepEqual(r.content.map((b) => [b.type, b.name]), [['tool_use', 'get_time']], renderer);
    assert.ok(['UTC', 'CET'].includes(r.content[0].input.zone), renderer);
  }
});

await runTests(server, tests);
