// End-to-end test of harmony, gpt-oss's chat format, through a real `corral serve` with the
// published `ollama`, `openai` and `@anthropic-ai/sdk` clients. The tiny model does not speak
// harmony, so it runs under a model created with the harmony renderer and parser (as
// ollama's RENDERER/PARSER name them), and the answer's channel comes from the prompt: a
// conversation that ends in the assistant's open analysis message is continued there, so the
// model's greedy text is thinking, which must equal that prompt's raw continuation. Calls use
// a template that leaves a call to=functions.get_weather open with its arguments written,
// and a stop string that ends the answer at once, so the parser completes the call at the end.
// The tiny gpt-oss GGUF gets all this from its architecture alone. Run by CTest: node
// harmony.test.mjs (env CORRAL_BIN, CORRAL_FIXTURES).
import { join } from 'node:path';
import assert from 'node:assert/strict';
import { Ollama } from 'ollama';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { CorralServer, fixtures, runTests } from './harness.mjs';

const server = await CorralServer.create();
const ollama = new Ollama({ host: server.base });
const openai = new OpenAI({ baseURL: `${server.base}/v1`, apiKey: 'unused', maxRetries: 0 });
const anthropic = new Anthropic({ baseURL: server.base, apiKey: 'unused', maxRetries: 0 });
const tests = [];
const test = (name, fn) => tests.push({ name, fn });

const greedy = { temperature: 0, num_predict: 16 };
const question = { role: 'user', content: 'Once upon a time' };
// the conversation ends in the assistant's open analysis message
const thinking = [question, { role: 'assistant', content: '', thinking: 'There' }];
const weatherTool = {
  type: 'function',
  function: {
    name: 'get-weather', description: 'The weather in a city',
    parameters: { type: 'object', properties: { city: { type: 'string', description: 'The city' } },
      required: ['city'] },
  },
};

async function rendered(body) {
  const r = await server.postJson('/api/chat', { ...body, _debug_render_only: true });
  assert.equal(r.status, 200, JSON.stringify(r.json));
  return r.json._debug_info.rendered_template;
}

// The model's greedy continuation of prompt as it is.
async function continuation(model, prompt, options = greedy) {
  const r = await server.postJson('/api/generate', { model, prompt, raw: true, stream: false, options });
  assert.equal(r.status, 200);
  return r.json.response;
}

const withDate = (text) => text.replace(/Current date: \d{4}-\d{2}-\d{2}/, 'Current date: DATE');
const system = (reasoning, tools) => '<|start|>system<|message|>You are ChatGPT, a large language '
  + 'model trained by OpenAI.\nKnowledge cutoff: 2024-06\nCurrent date: DATE'
  + (reasoning ? `\n\nReasoning: ${reasoning}` : '')
  + '\n\n# Valid channels: analysis, commentary, final. Channel must be included for every message.'
  + (tools ? "\nCalls to these tools must go to the commentary channel: 'functions'." : '') + '<|end|>';

// The tools as ollama's gpt-oss template reads them (types as lists), then a call to
// get_weather whose arguments the prompt has written already.
const openCall = '{{ range .Tools }}{{ .Function.Name }}({{ range $n, $p := .Function.Parameters.Properties }}'
  + '{{ $n }}: {{ index $p.Type 0 }}{{ end }}) {{ end }}{{ range .Messages }}<|start|>{{ .Role }}<|message|>{{ .Content }}<|end|>{{ end }}'
  + '<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json'
  + '<|message|>{"city": "Paris"}';

test('a model created with the harmony renderer and parser thinks and calls tools', async () => {
  const digest = await server.uploadBlob(join(fixtures, 'tiny-tolstoy-f32.gguf'));
  let r = await server.postJson('/api/create', { model: 'oss', files: { 'model.gguf': digest },
    renderer: 'harmony', parser: 'harmony', stream: false });
  assert.equal(r.status, 200);
  // the parser alone: the template renders (a renderer would outrank it)
  r = await server.postJson('/api/create', { model: 'oss-call', files: { 'model.gguf': digest },
    template: openCall, parser: 'harmony', stream: false });
  assert.equal(r.status, 200);
  const show = await ollama.show({ model: 'oss' });
  assert.deepEqual(show.capabilities, ['completion', 'tools', 'thinking']);
  assert.equal(show.renderer, 'harmony');
  assert.equal(show.parser, 'harmony');
  // a plain model has neither
  r = await server.postJson('/api/create', { model: 'plain', files: { 'model.gguf': digest }, stream: false });
  assert.deepEqual((await ollama.show({ model: 'plain' })).capabilities, ['completion']);
});

test('think sets the reasoning effort of the system message', async () => {
  const tail = '<|start|>user<|message|>Once upon a time<|end|><|start|>assistant';
  for (const [think, level] of [[undefined, 'medium'], [true, 'medium'], ['low', 'low'],
    ['medium', 'medium'], ['high', 'high'], ['max', 'high'], [false, null]]) {
    assert.equal(withDate(await rendered({ model: 'oss', messages: [question], think })),
      system(level, false) + tail, `think ${think}`);
  }
});

test('tools, instructions, calls and results are laid out in harmony', async () => {
  const messages = [{ role: 'system', content: 'Be brief.' }, question,
    { role: 'assistant', content: '', thinking: 'Look it up.',
      tool_calls: [{ function: { name: 'get-weather', arguments: { city: 'Paris' } } }] },
    { role: 'tool', tool_name: 'get-weather', content: '18 degrees' }];
  assert.equal(withDate(await rendered({ model: 'oss', messages, tools: [weatherTool], think: 'low' })),
    system('low', true) + '<|start|>developer<|message|># Tools\n\n## functions\n\n'
    + 'namespace functions {\n\n// The weather in a city\ntype get_weather = (_: {\n'
    + '  // The city\n  city: string,\n}) => any;\n\n} // namespace functions\n\n'
    + '# Instructions\n\nBe brief.<|end|><|start|>user<|message|>Once upon a time<|end|>'
    + '<|start|>assistant<|channel|>analysis<|message|>Look it up.<|end|>'
    + '<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json'
    + '<|message|>{"city":"Paris"}<|call|>'
    + '<|start|>functions.get_weather to=assistant<|message|>18 degrees<|end|><|start|>assistant');
});

test('the analysis channel is /api/chat thinking, whole and streamed', async () => {
  const prompt = await rendered({ model: 'oss', messages: thinking });
  assert.ok(prompt.endsWith('<|start|>assistant<|channel|>analysis<|message|>There'));
  const expected = await continuation('oss', prompt);
  assert.ok(expected.length > 0);
  const r = await ollama.chat({ model: 'oss', messages: thinking, options: greedy });
  assert.equal(r.message.thinking, expected);
  assert.equal(r.message.content, '');
  let streamed = '', content = '';
  for await (const part of await ollama.chat({ model: 'oss', messages: thinking, options: greedy,
    stream: true })) {
    streamed += part.message.thinking ?? '';
    content += part.message.content;
  }
  assert.equal(streamed, expected);
  assert.equal(content, '');
});

test('a continued final message is content', async () => {
  const messages = [question, { role: 'assistant', content: 'There was' }];
  const prompt = await rendered({ model: 'oss', messages });
  assert.ok(prompt.endsWith('<|start|>assistant<|channel|>final<|message|>There was'));
  const r = await ollama.chat({ model: 'oss', messages, options: greedy });
  assert.equal(r.message.content, await continuation('oss', prompt));
  assert.equal(r.message.thinking, undefined);
});

test('format constrains a continued final message from its first token', async () => {
  const messages = [question, { role: 'assistant', content: 'Answer: ' }];
  const format = { type: 'object', properties: { answer: { const: 'yes' } }, required: ['answer'] };
  const r = await ollama.chat({ model: 'oss', messages, format,
    options: { temperature: 0, num_predict: 64 } });
  assert.deepEqual(JSON.parse(r.message.content), { answer: 'yes' });
  assert.equal(r.done_reason, 'stop');
});

test('/api/generate renders and splits harmony too', async () => {
  const r = await ollama.generate({ model: 'oss', prompt: 'Once upon a time', think: 'high',
    options: greedy });
  // the answer starts a new message: the tiny model writes no header, so nothing is said
  assert.equal(r.response, '');
  assert.equal(r.thinking, undefined);
  assert.ok(r.context.length > r.eval_count);
});

test('/v1/chat/completions: reasoning_effort is the effort, the analysis is reasoning', async () => {
  // the prompt's length tells the effort: /api/generate renders the same prompt for one message
  for (const effort of ['low', 'medium', 'high', 'none']) {
    const g = await ollama.generate({ model: 'oss', prompt: 'Once upon a time',
      think: effort === 'none' ? false : effort, options: greedy });
    const c = await openai.chat.completions.create({ model: 'oss', reasoning_effort: effort,
      messages: [question], max_tokens: 16, temperature: 0 });
    assert.equal(c.usage.prompt_tokens, g.context.length - g.eval_count, `effort ${effort}`);
  }
  const messages = [question, { role: 'assistant', content: '', reasoning: 'There' }];
  const expected = await continuation('oss', await rendered({ model: 'oss', messages: thinking }));
  const c = await openai.chat.completions.create({ model: 'oss', messages, max_tokens: 16,
    temperature: 0 });
  assert.equal(c.choices[0].message.reasoning, expected);
  assert.equal(c.choices[0].message.content, '');
  let streamed = '';
  for await (const chunk of await openai.chat.completions.create({ model: 'oss', messages,
    max_tokens: 16, temperature: 0, stream: true }))
    streamed += chunk.choices[0]?.delta?.reasoning ?? '';
  assert.equal(streamed, expected);
});

// A forced call: the server ends the prompt with the call's header, the grammar holds the
// arguments (the city has a maxLength, or the tiny model would fill the string to max_tokens).
const boundedTool = { type: 'function', function: { ...weatherTool.function,
  parameters: { type: 'object', properties: { city: { type: 'string', maxLength: 12 } }, required: ['city'] } } };

test('a tool_choice that forces a call: the header ends the prompt, the arguments follow', async () => {
  for (const [messages, tool_choice] of [[[question], 'required'], [thinking,
    { type: 'function', function: { name: 'get-weather' } }]]) {
    const r = await openai.chat.completions.create({ model: 'oss', messages, tools: [boundedTool],
      tool_choice, max_tokens: 64, temperature: 0 });
    const [choice] = r.choices;
    assert.equal(choice.finish_reason, 'tool_calls', JSON.stringify(choice));
    assert.ok(!choice.message.content);
    assert.equal(choice.message.tool_calls.length, 1);
    assert.equal(choice.message.tool_calls[0].function.name, 'get-weather');
    const args = JSON.parse(choice.message.tool_calls[0].function.arguments);
    assert.deepEqual(Object.keys(args), ['city']);
    assert.ok(typeof args.city === 'string' && [...args.city].length <= 12, args.city);
  }
  const m = await anthropic.messages.create({ model: 'oss', max_tokens: 64, temperature: 0,
    messages: [question], tools: [{ name: 'get-weather', input_schema: boundedTool.function.parameters },
      { name: 'now', input_schema: {} }], tool_choice: { type: 'tool', name: 'get-weather' } });
  assert.equal(m.stop_reason, 'tool_use');
  assert.deepEqual(m.content.map((b) => [b.type, b.name]), [['tool_use', 'get-weather']]);
  // the header names one function before the answer starts: several to choose from is a 400
  const r = await server.postJson('/v1/chat/completions', { model: 'oss', messages: [question],
    tools: [boundedTool, { type: 'function', function: { name: 'now' } }], tool_choice: 'required',
    max_tokens: 16 });
  assert.equal(r.status, 400);
  assert.match(r.json.error.message, /name the function to call, or offer one tool/);
  const counted = await server.postJson('/v1/messages/count_tokens', { model: 'oss',
    messages: [question], tools: [{ name: 'get-weather', input_schema: weatherTool.function.parameters }],
    tool_choice: { type: 'any' } });
  assert.equal(counted.status, 200, JSON.stringify(counted.json));
});

test('/v1/messages: the analysis is a thinking block', async () => {
  const expected = await continuation('oss', await rendered({ model: 'oss', messages: thinking }));
  const m = await anthropic.messages.create({ model: 'oss', max_tokens: 16, temperature: 0,
    messages: [question, { role: 'assistant', content: [{ type: 'thinking', thinking: 'There',
      signature: '' }] }] });
  assert.deepEqual(m.content, [{ type: 'thinking', thinking: expected, signature: '' }]);
});

test('a call to a rewritten tool name comes back under its own name, on every API', async () => {
  const prompt = await rendered({ model: 'oss-call', messages: [question], tools: [weatherTool] });
  assert.ok(prompt.startsWith('get_weather(city: string) <|start|>user'), prompt);
  assert.ok(prompt.endsWith('<|message|>{"city": "Paris"}'));
  // a stop string at the answer's very start: the call is complete as the prompt wrote it
  const stop = [(await continuation('oss-call', prompt)).slice(0, 2)];
  const r = await ollama.chat({ model: 'oss-call', messages: [question], tools: [weatherTool],
    options: { ...greedy, stop } });
  assert.equal(r.message.content, '');
  assert.equal(r.message.tool_calls.length, 1);
  assert.match(r.message.tool_calls[0].id, /^call_[a-z0-9]{8}$/);
  assert.deepEqual(r.message.tool_calls[0].function,
    { index: 0, name: 'get-weather', arguments: { city: 'Paris' } });

  const c = await openai.chat.completions.create({ model: 'oss-call', messages: [question],
    tools: [weatherTool], max_tokens: 16, temperature: 0, stop });
  assert.equal(c.choices[0].finish_reason, 'tool_calls');
  assert.equal(c.choices[0].message.tool_calls[0].function.name, 'get-weather');
  assert.deepEqual(JSON.parse(c.choices[0].message.tool_calls[0].function.arguments),
    { city: 'Paris' });

  const m = await anthropic.messages.create({ model: 'oss-call', max_tokens: 16, temperature: 0,
    messages: [question], stop_sequences: stop,
    tools: [{ name: 'get-weather', description: 'The weather in a city',
      input_schema: weatherTool.function.parameters }] });
  assert.equal(m.stop_reason, 'tool_use');
  assert.equal(m.content.length, 1);
  assert.equal(m.content[0].type, 'tool_use');
  assert.equal(m.content[0].name, 'get-weather');
  assert.deepEqual(m.content[0].input, { city: 'Paris' });
});

test('a gpt-oss GGUF speaks harmony without being told', async () => {
  const digest = await server.uploadBlob(join(fixtures, 'arch', 'gpt-oss.gguf'));
  const r = await server.postJson('/api/create', { model: 'gpt-oss-tiny', files: { 'model.gguf': digest },
    stream: false });
  assert.equal(r.status, 200);
  const show = await ollama.show({ model: 'gpt-oss-tiny' });
  assert.deepEqual(show.capabilities, ['completion', 'tools', 'thinking']);
  assert.equal(withDate(await rendered({ model: 'gpt-oss-tiny', messages: [question], think: 'high' })),
    system('high', false) + '<|start|>user<|message|>Once upon a time<|end|><|start|>assistant');
  // its random weights write no harmony of their own: continued analysis is all thinking
  const prompt = await rendered({ model: 'gpt-oss-tiny', messages: thinking });
  const expected = await continuation('gpt-oss-tiny', prompt);
  assert.ok(expected.length > 0);
  const c = await ollama.chat({ model: 'gpt-oss-tiny', messages: thinking, options: greedy });
  assert.equal(c.message.thinking, expected);
  assert.equal(c.message.content, '');
});

test("a gpt-oss TEMPLATE renders when it writes harmony's tags, and its answers are harmony", async () => {
  const own = '{{ range .Messages }}<|start|>{{ .Role }}<|message|>{{ .Content }}<|end|>{{ end }}'
    + '<|start|>assistant<|channel|>analysis<|message|>';
  for (const [model, template] of [['gpt-oss-own', own], ['gpt-oss-plain', '{{ .Prompt }}']]) {
    const r = await server.postJson('/api/create', { model, from: 'gpt-oss-tiny', template, stream: false });
    assert.equal(r.status, 200);
  }
  const prompt = await rendered({ model: 'gpt-oss-own', messages: [question] });
  assert.equal(prompt, '<|start|>user<|message|>Once upon a time<|end|>'
    + '<|start|>assistant<|channel|>analysis<|message|>');
  assert.deepEqual((await ollama.show({ model: 'gpt-oss-own' })).capabilities,
    ['completion', 'tools', 'thinking']);
  const c = await ollama.chat({ model: 'gpt-oss-own', messages: [question], options: greedy });
  assert.equal(c.message.thinking, await continuation('gpt-oss-own', prompt));
  // a template without harmony's tags is not harmony: gpt-oss still counts as thinking
  assert.deepEqual((await ollama.show({ model: 'gpt-oss-plain' })).capabilities,
    ['completion', 'thinking']);
});

await runTests(server, tests);
