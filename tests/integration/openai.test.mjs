// End-to-end test of the OpenAI-compatible endpoints with the published `openai` npm client:
// a real `corral serve` on 127.0.0.1; /v1/models, /v1/models/:model, /v1/completions and
// /v1/chat/completions (whole and streamed, with usage), checked against the llama.cpp
// reference text and against the native /api/generate and /api/chat answers to the same
// request; response_format (structured outputs); the SSE framing; the errors in OpenAI's
// shape. Run by CTest: node openai.test.mjs (env CORRAL_BIN, CORRAL_FIXTURES).
import { join } from 'node:path';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { CorralServer, case1LogSoftmax, case1Prompt, chatTemplate, expectedCase4, fixtures,
  runTests } from './harness.mjs';

const server = await CorralServer.create();
const base = server.base;
const openai = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'unused', maxRetries: 0 });
const tests = [];
const test = (name, fn) => tests.push({ name, fn });

async function post(path, body) {
  const r = await fetch(`${base}${path}`, { method: 'POST', body: JSON.stringify(body) });
  return { status: r.status, type: r.headers.get('content-type'), text: await r.text() };
}

// The native answer to the same request, and its prompt's token count.
async function native(path, body) {
  const r = await post(path, { ...body, stream: false });
  assert.equal(r.status, 200, r.text);
  return JSON.parse(r.text);
}

async function collect(stream) {
  const chunks = [];
  for await (const c of stream) chunks.push(c);
  return chunks;
}

test('models are imported through the native API', async () => {
  const digest = await server.uploadBlob(join(fixtures, 'tiny-tolstoy-f32.gguf'));
  let r = await post('/api/create', { model: 'tolstoy', files: { 'model.gguf': digest }, stream: false });
  assert.equal(r.status, 200, r.text);
  r = await post('/api/create', { model: 'tolstoy-chat', from: 'tolstoy', template: chatTemplate,
    parameters: { temperature: 0, stop: ['\nQ:'] }, stream: false });
  assert.equal(r.status, 200, r.text);
});

test('models.list and models.retrieve describe the store', async () => {
  const list = [];
  for await (const m of openai.models.list()) list.push(m);
  assert.deepEqual(list.map((m) => m.id).sort(), ['tolstoy-chat:latest', 'tolstoy:latest']);
  const now = Date.now() / 1000;
  for (const m of list) {
    assert.equal(m.object, 'model');
    assert.equal(m.owned_by, 'library');
    assert.ok(Math.abs(m.created - now) < 600, `created ${m.created}`);
  }
  const one = await openai.models.retrieve('tolstoy');
  assert.deepEqual({ id: one.id, object: one.object, owned_by: one.owned_by },
    { id: 'tolstoy', object: 'model', owned_by: 'library' });
  assert.equal((await openai.models.retrieve('tolstoy:latest')).id, 'tolstoy:latest');
  await assert.rejects(openai.models.retrieve('missing'),
    (e) => e instanceof OpenAI.NotFoundError && /model 'missing' not found/.test(e.message));
});

let casePromptTokens; // the reference prompt's token count

test('completions gives the reference greedy text, with usage', async () => {
  const r = await openai.completions.create({ model: 'tolstoy', prompt: 'Natasha looked at him and',
    temperature: 0, max_tokens: 48 });
  assert.equal(r.object, 'text_completion');
  assert.match(r.id, /^cmpl-\d+$/);
  assert.equal(r.model, 'tolstoy');
  assert.equal(r.choices.length, 1);
  assert.equal(r.choices[0].text, expectedCase4);
  assert.equal(r.choices[0].finish_reason, 'length');
  const n = await native('/api/generate', { model: 'tolstoy', prompt: 'Natasha looked at him and',
    options: { temperature: 0, num_predict: 48 } });
  const promptTokens = n.context.length - n.eval_count;
  casePromptTokens = promptTokens;
  const { prompt_tokens_details: details, ...counts } = r.usage;
  assert.deepEqual(counts, { prompt_tokens: promptTokens, completion_tokens: 48,
    total_tokens: promptTokens + 48 });
  assert.ok(details.cached_tokens >= 0 && details.cached_tokens < promptTokens, JSON.stringify(details));
});

test('completions streams the same text; chunks share id and created; usage last', async () => {
  const chunks = await collect(await openai.completions.create({ model: 'tolstoy',
    prompt: 'Natasha looked at him and', temperature: 0, max_tokens: 48, stream: true,
    stream_options: { include_usage: true } }));
  const usage = chunks.pop();
  assert.deepEqual(usage.choices, []);
  // the whole prompt, though the runner found it cached and evaluated only its last token
  assert.deepEqual(usage.usage, { prompt_tokens: casePromptTokens, completion_tokens: 48,
    total_tokens: casePromptTokens + 48,
    prompt_tokens_details: { cached_tokens: casePromptTokens - 1 } });
  assert.equal(chunks.map((c) => c.choices[0].text).join(''), expectedCase4);
  assert.equal(chunks.at(-1).choices[0].finish_reason, 'length');
  assert.ok(chunks.slice(0, -1).every((c) => c.choices[0].finish_reason === null && c.usage === null));
  assert.equal(new Set([...chunks, usage].map((c) => `${c.id} ${c.created}`)).size, 1);
});

test('chat.completions answers as /api/chat does, model parameters and stop included', async () => {
  const messages = [{ role: 'system', content: 'Tolstoy speaks.' },
    { role: 'user', content: 'Where is Pierre?' }];
  const r = await openai.chat.completions.create({ model: 'tolstoy-chat', messages, max_tokens: 32 });
  const n = await native('/api/chat', { model: 'tolstoy-chat', messages, options: { num_predict: 32 } });
  assert.equal(r.object, 'chat.completion');
  assert.match(r.id, /^chatcmpl-\d+$/);
  assert.equal(r.choices[0].message.role, 'assistant');
  assert.equal(r.choices[0].message.content, n.message.content);
  assert.ok(!r.choices[0].message.content.includes('\nQ:'));
  assert.equal(r.choices[0].finish_reason, n.done_reason === 'length' ? 'length' : 'stop');
  assert.equal(r.usage.completion_tokens, n.eval_count);
  assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens);
});

test('chat.completions streams deltas: role first, finish_reason in a chunk of its own', async () => {
  const messages = [{ role: 'user', content: 'And Natasha?' }];
  const whole = await openai.chat.completions.create({ model: 'tolstoy-chat', messages, max_tokens: 24 });
  const chunks = await collect(await openai.chat.completions.create({ model: 'tolstoy-chat',
    messages, max_tokens: 24, stream: true }));
  assert.equal(chunks[0].object, 'chat.completion.chunk');
  assert.equal(chunks[0].choices[0].delta.role, 'assistant');
  assert.ok(chunks.slice(1).every((c) => c.choices[0].delta.role === undefined));
  const last = chunks.pop();
  assert.deepEqual(last.choices[0].delta, {});
  assert.equal(last.choices[0].finish_reason, whole.choices[0].finish_reason);
  assert.equal(chunks.map((c) => c.choices[0].delta.content).join(''), whole.choices[0].message.content);
});

test('stop, seed and sampling fields reach the runner', async () => {
  const prompt = 'Natasha looked at him and';
  const r = await openai.completions.create({ model: 'tolstoy', prompt, temperature: 0,
    max_tokens: 48, stop: [' the'] });
  const cut = expectedCase4.indexOf(' the');
  assert.ok(cut > 0, 'the reference text has " the"');
  assert.equal(r.choices[0].text, expectedCase4.slice(0, cut));
  assert.equal(r.choices[0].finish_reason, 'stop');
  const sampled = { model: 'tolstoy', prompt, temperature: 1.2, top_p: 0.9, seed: 7, max_tokens: 24 };
  const a = await openai.completions.create(sampled);
  const b = await openai.completions.create(sampled);
  const n = await native('/api/generate', { model: 'tolstoy', prompt,
    options: { temperature: 1.2, top_p: 0.9, seed: 7, num_predict: 24 } });
  assert.equal(a.choices[0].text, b.choices[0].text);
  assert.equal(a.choices[0].text, n.response);
  assert.notEqual(a.choices[0].text, expectedCase4.slice(0, a.choices[0].text.length));
});

test('content parts and the developer role are read as ollama reads them', async () => {
  const parts = await openai.chat.completions.create({ model: 'tolstoy-chat', max_tokens: 16,
    messages: [{ role: 'developer', content: 'Tolstoy speaks.' },
      { role: 'user', content: [{ type: 'text', text: 'Where is Pierre?' }] }] });
  const plain = await native('/api/chat', { model: 'tolstoy-chat', options: { num_predict: 16 },
    messages: [{ role: 'system', content: 'Tolstoy speaks.' }, { role: 'user', content: 'Where is Pierre?' }] });
  assert.equal(parts.choices[0].message.content, plain.message.content);
});

test('_debug_render_only answers the rendered prompt in an empty completion, as ollama', async () => {
  const messages = [{ role: 'developer', content: 'Tolstoy speaks.' }, { role: 'user', content: 'Pierre?' }];
  const want = (await native('/api/chat', { model: 'tolstoy-chat', _debug_render_only: true,
    messages: [{ role: 'system', content: 'Tolstoy speaks.' }, { role: 'user', content: 'Pierre?' }] }))
    ._debug_info;
  assert.match(want.rendered_template, /Pierre\?/);
  const chat = JSON.parse((await post('/v1/chat/completions', { model: 'tolstoy-chat', messages,
    _debug_render_only: true })).text);
  assert.deepEqual([chat.object, chat.model, chat._debug_info, chat.usage.completion_tokens],
    ['chat.completion', 'tolstoy-chat', want, 0]);
  const completion = JSON.parse((await post('/v1/completions', { model: 'tolstoy', prompt: 'Pierre',
    _debug_render_only: true })).text);
  assert.deepEqual([completion.object, completion._debug_info.rendered_template],
    ['text_completion', 'Pierre']);
});

test('response_format json_schema and json_object constrain the answer', async () => {
  const schema = { type: 'object', required: ['name', 'rank'], properties: {
    name: { type: 'string', maxLength: 10 }, rank: { type: 'integer' } } };
  const r = await openai.chat.completions.create({ model: 'tolstoy-chat', max_tokens: 120,
    messages: [{ role: 'user', content: 'Who is Pierre?' }],
    response_format: { type: 'json_schema', json_schema: { name: 'person', schema } } });
  assert.equal(r.choices[0].finish_reason, 'stop');
  const p = JSON.parse(r.choices[0].message.content);
  assert.deepEqual(Object.keys(p), ['name', 'rank']);
  assert.ok(typeof p.name === 'string' && p.name.length <= 10 && Number.isInteger(p.rank));
  const o = await openai.chat.completions.create({ model: 'tolstoy-chat', max_tokens: 24,
    messages: [{ role: 'user', content: 'Who is Pierre?' }], response_format: { type: 'json_object' } });
  assert.match(o.choices[0].message.content, /^\{/);
  await assert.rejects(openai.chat.completions.create({ model: 'tolstoy-chat',
    messages: [{ role: 'user', content: 'x' }], response_format: { type: 'yaml' } }),
  (e) => e instanceof OpenAI.BadRequestError && /response_format.type/.test(e.message));
});

test('the stream is text/event-stream and ends with data: [DONE]', async () => {
  const r = await post('/v1/chat/completions', { model: 'tolstoy-chat', max_tokens: 4, stream: true,
    messages: [{ role: 'user', content: 'Hello' }] });
  assert.equal(r.status, 200);
  assert.equal(r.type, 'text/event-stream');
  const events = r.text.split('\n\n');
  assert.equal(events.pop(), '');
  assert.equal(events.pop(), 'data: [DONE]');
  for (const e of events) assert.doesNotThrow(() => JSON.parse(e.replace(/^data: /, '')), e);
  // an empty prompt only loads the model: streamed, that is a stream too, ending at once
  const chunks = await collect(await openai.completions.create({ model: 'tolstoy', prompt: '',
    stream: true }));
  assert.deepEqual(chunks.map((c) => [c.choices[0].text, c.choices[0].finish_reason]), [['', 'stop']]);
});

test('completions with a suffix fill in the middle as /api/generate does', async () => {
  const r = await post('/api/create', { model: 'tolstoy-fim', from: 'tolstoy', stream: false,
    template: '<PRE> {{ .Prompt }} <SUF>{{ .Suffix }} <MID>' });
  assert.equal(r.status, 200, r.text);
  const c = await openai.completions.create({ model: 'tolstoy-fim', prompt: 'Natasha',
    suffix: 'Pierre.', temperature: 0, max_tokens: 16 });
  const n = await native('/api/generate', { model: 'tolstoy-fim', prompt: 'Natasha',
    suffix: 'Pierre.', options: { temperature: 0, num_predict: 16 } });
  assert.equal(c.choices[0].text, n.response);
});

test('chat logprobs: per token, with top_logprobs, whole and streamed', async () => {
  const best = [...case1LogSoftmax.keys()].sort((a, b) => case1LogSoftmax[b] - case1LogSoftmax[a]);
  const request = { model: 'tolstoy', messages: [{ role: 'user', content: case1Prompt }],
    temperature: 0, max_tokens: 3, logprobs: true, top_logprobs: 3 };
  const r = await openai.chat.completions.create(request);
  const { content } = r.choices[0].logprobs;
  assert.equal(content.length, 3);
  assert.equal(content.map((c) => c.token).join(''), r.choices[0].message.content);
  // F16 KV cache: logits within 1e-2 of PyTorch's, so log-softmax within 2e-2
  assert.ok(Math.abs(content[0].logprob - case1LogSoftmax[best[0]]) < 2e-2);
  assert.deepEqual(content[0].top_logprobs.map((t) => t.token)[0], content[0].token);
  assert.equal(content[0].top_logprobs.length, 3);
  const streamed = [];
  for await (const c of await openai.chat.completions.create({ ...request, stream: true }))
    streamed.push(...(c.choices[0]?.logprobs?.content ?? []));
  assert.deepEqual(streamed, content);
  const plain = await openai.chat.completions.create({ ...request, logprobs: false, top_logprobs: undefined });
  assert.equal(plain.choices[0].logprobs, null);
});

test('completions logprobs: the legacy shape, offsets from the prompt\'s start, whole and streamed', async () => {
  const best = [...case1LogSoftmax.keys()].sort((a, b) => case1LogSoftmax[b] - case1LogSoftmax[a]);
  const request = { model: 'tolstoy', prompt: case1Prompt, temperature: 0, max_tokens: 3, logprobs: 2 };
  const r = await openai.completions.create(request);
  const lp = r.choices[0].logprobs;
  assert.equal(lp.tokens.join(''), r.choices[0].text);
  assert.ok(Math.abs(lp.token_logprobs[0] - case1LogSoftmax[best[0]]) < 2e-2);
  assert.equal(lp.top_logprobs[0][lp.tokens[0]], lp.token_logprobs[0]);
  assert.equal(Object.keys(lp.top_logprobs[0]).length, 2);
  assert.deepEqual(lp.text_offset, [0, 1, 2].map((i) => case1Prompt.length + lp.tokens.slice(0, i).join('').length));
  const streamed = { tokens: [], text_offset: [] };
  for await (const c of await openai.completions.create({ ...request, stream: true })) {
    streamed.tokens.push(...(c.choices[0]?.logprobs?.tokens ?? []));
    streamed.text_offset.push(...(c.choices[0]?.logprobs?.text_offset ?? []));
  }
  assert.deepEqual(streamed, { tokens: lp.tokens, text_offset: lp.text_offset });
  const plain = await openai.completions.create({ ...request, logprobs: undefined });
  assert.equal(plain.choices[0].logprobs, null);
});

test('errors come in OpenAI shape with the right status', async () => {
  const isBad = (pattern) => (e) => e instanceof OpenAI.BadRequestError && pattern.test(e.message);
  await assert.rejects(openai.chat.completions.create({ model: 'tolstoy-chat', messages: [] }),
    isBad(/\[\] is too short - 'messages'/));
  await assert.rejects(openai.chat.completions.create({ model: 'missing', messages: [{ role: 'user', content: 'x' }] }),
    (e) => e instanceof OpenAI.NotFoundError && /not found/.test(e.message));
  await assert.rejects(openai.completions.create({ model: 'tolstoy', prompt: ['a', 'b'] }),
    isBad(/prompt must be a string/));
  await assert.rejects(openai.chat.completions.create({ model: 'tolstoy-chat',
    messages: [{ role: 'user', content: 'x' }], tools: [{ type: 'function', function: { name: 'f' } }] }),
  isBad(/"tolstoy-chat" does not support tools/));
  await assert.rejects(openai.chat.completions.create({ model: 'tolstoy-chat', messages: [{ role: 'user',
    content: [{ type: 'image_url', image_url: { url: 'data:image/png;base64,AAAA' } }] }] }),
  isBad(/model does not support images/));
  await assert.rejects(openai.chat.completions.create({ model: 'tolstoy-chat', n: 2,
    messages: [{ role: 'user', content: 'x' }] }), isBad(/n must be 1/));
  await assert.rejects(openai.embeddings.create({ model: 'tolstoy', input: 'x' }),
    isBad(/"tolstoy" does not support embeddings/));
  const r = await post('/v1/chat/completions', { model: 'tolstoy-chat', messages: [{ role: 'user', content: 'x' }],
    temperature: 'hot' });
  assert.equal(r.status, 400);
  assert.deepEqual(JSON.parse(r.text), { error: { message: 'option "temperature" must be of type float32',
    type: 'invalid_request_error', param: null, code: null } });
  const bad = await fetch(`${base}/v1/completions`, { method: 'POST', body: '{not json' });
  assert.equal(bad.status, 400);
  assert.equal((await bad.json()).error.type, 'invalid_request_error');
});

await runTests(server, tests);
