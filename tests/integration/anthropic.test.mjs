// End-to-end test of Anthropic's Messages API (/v1/messages) with the published
// `@anthropic-ai/sdk` client against a real `corral serve`: text answers checked against the
// llama.cpp reference and the native /api/chat answer, streaming through the SDK's event
// accumulator, system prompts, tool_use / tool_result round trips, thinking blocks,
// structured outputs (output_config.format) and the errors in Anthropic's shape. Run by CTest:
// node anthropic.test.mjs (env CORRAL_BIN, CORRAL_FIXTURES).
import assert from 'node:assert/strict';
import Anthropic from '@anthropic-ai/sdk';
import { CorralServer, answer, callSchema, chatTemplate, expectedCase4, runTests, thinkTemplate,
  thought, toolsTemplate, weatherTool } from './harness.mjs';

const server = await CorralServer.create();
const anthropic = new Anthropic({ baseURL: server.base, apiKey: 'unused', maxRetries: 0 });
const tests = [];
const test = (name, fn) => tests.push({ name, fn });

const natasha = [{ role: 'user', content: 'Natasha looked at him and' }];
const getWeather = { name: weatherTool.function.name, description: weatherTool.function.description,
  input_schema: weatherTool.function.parameters };
const question = [{ role: 'user', content: 'What is the weather in Paris?' }];

test('models are imported through the native API', () => server.createTolstoyModels([
  ['tolstoy-chat', { from: 'tolstoy', template: chatTemplate }],
  ['tolstoy-tools', { from: 'tolstoy', template: toolsTemplate }],
  ['tolstoy-think', { from: 'tolstoy', template: thinkTemplate }]]));

test('models.list and models.retrieve get Anthropic\'s model objects from /v1/models', async () => {
  const page = await anthropic.models.list();
  const ids = page.data.map((m) => m.id).sort();
  assert.deepEqual(ids, ['tolstoy-chat:latest', 'tolstoy-think:latest', 'tolstoy-tools:latest',
    'tolstoy:latest']);
  const m = page.data.find((x) => x.id === 'tolstoy:latest');
  assert.equal(m.type, 'model');
  assert.equal(m.display_name, 'tolstoy:latest');
  assert.ok(Date.now() - Date.parse(m.created_at) < 3600e3, m.created_at);
  assert.equal(page.has_more, false);
  assert.deepEqual([page.first_id, page.last_id], [page.data[0].id, page.data.at(-1).id]);
  const one = await anthropic.models.retrieve('tolstoy');
  assert.deepEqual([one.type, one.id, one.display_name], ['model', 'tolstoy', 'tolstoy']);
  await assert.rejects(anthropic.models.retrieve('missing'),
    (e) => e instanceof Anthropic.NotFoundError && e.error.error.type === 'not_found_error');
  // without anthropic-version the same path answers OpenAI's list, as before
  const openai = await (await fetch(`${server.base}/v1/models`)).json();
  assert.equal(openai.object, 'list');
  assert.equal(openai.data[0].object, 'model');
});

test('messages.create gives the reference greedy text, stop_reason and usage', async () => {
  const m = await anthropic.messages.create({ model: 'tolstoy', max_tokens: 48, temperature: 0,
    messages: natasha });
  assert.equal(m.type, 'message');
  assert.equal(m.role, 'assistant');
  assert.equal(m.model, 'tolstoy');
  assert.match(m.id, /^msg_/);
  assert.deepEqual(m.content, [{ type: 'text', text: expectedCase4 }]);
  assert.equal(m.stop_reason, 'max_tokens');
  assert.deepEqual(m.usage, { input_tokens: 6, output_tokens: 48 });
  const short = await anthropic.messages.create({ model: 'tolstoy', max_tokens: 48,
    temperature: 0, messages: natasha, stop_sequences: ['countess'] });
  assert.deepEqual([short.stop_reason, short.stop_sequence], ['stop_sequence', 'countess']);
  assert.equal(short.content[0].text, ' saw that the ');
  const streamed = await anthropic.messages.stream({ model: 'tolstoy', max_tokens: 48,
    temperature: 0, messages: natasha, stop_sequences: ['countess'] }).finalMessage();
  assert.deepEqual([streamed.stop_reason, streamed.stop_sequence], ['stop_sequence', 'countess']);
  const ended = await anthropic.messages.create({ model: 'tolstoy-tools', max_tokens: 240,
    temperature: 0, messages: [{ role: 'user', content: 'x' }],
    output_config: { format: { type: 'json_schema', schema: { const: 1 } } } });
  assert.deepEqual([ended.stop_reason, ended.stop_sequence], ['end_turn', null]);
});

test('a stream goes through the SDK accumulator to the same message', async () => {
  const stream = anthropic.messages.stream({ model: 'tolstoy', max_tokens: 48, temperature: 0,
    messages: natasha });
  const events = [];
  stream.on('streamEvent', (e) => events.push(e.type));
  const m = await stream.finalMessage();
  assert.deepEqual(m.content, [{ type: 'text', text: expectedCase4 }]);
  assert.equal(m.stop_reason, 'max_tokens');
  assert.equal(m.usage.output_tokens, 48);
  assert.deepEqual(events.slice(0, 3), ['message_start', 'content_block_start', 'content_block_delta']);
  assert.deepEqual(events.slice(-3), ['content_block_stop', 'message_delta', 'message_stop']);
});

test('a stream of messages that are all empty loads the model and ends at once, in events', async () => {
  const stream = anthropic.messages.stream({ model: 'tolstoy', max_tokens: 8,
    messages: [{ role: 'user', content: [{ type: 'text', text: '' }] }] });
  const events = [];
  stream.on('streamEvent', (e) => events.push(e.type));
  const m = await stream.finalMessage();
  assert.deepEqual([m.content, m.stop_reason], [[], 'end_turn']);
  assert.deepEqual(events, ['message_start', 'message_delta', 'message_stop']);
});

test('a raw stream counts the prompt in message_start as in its final usage', async () => {
  const tools = { model: 'tolstoy-tools', max_tokens: 240, temperature: 0, messages: question,
    tools: [getWeather], output_config: { format: { type: 'json_schema', schema: callSchema } } };
  // text from the first piece on; a tool call held back until it is whole
  for (const request of [{ model: 'tolstoy', max_tokens: 8, temperature: 0, messages: natasha }, tools]) {
    const r = await fetch(`${server.base}/v1/messages`, { method: 'POST', headers: server.headers,
      body: JSON.stringify({ ...request, stream: true }) });
    assert.equal(r.status, 200);
    const events = (await r.text()).split('\n\n').filter(Boolean).map((e) => {
      const [, type, data] = e.match(/^event: (\S+)\ndata: (.*)$/s);
      return { type, data: JSON.parse(data) };
    });
    const start = events.find((e) => e.type === 'message_start').data.message.usage;
    const end = events.find((e) => e.type === 'message_delta').data.usage;
    assert.ok(end.input_tokens > 0, JSON.stringify(end));
    assert.deepEqual(start, { input_tokens: end.input_tokens, output_tokens: 0 });
  }
});

test('system (a string or text blocks) renders as /api/chat renders it', async () => {
  const native = await server.postJson('/api/chat', { model: 'tolstoy-chat', stream: false,
    options: { temperature: 0, num_predict: 24 },
    messages: [{ role: 'system', content: 'The war was over.' }, { role: 'user', content: 'Pierre' }] });
  for (const system of ['The war was over.', [{ type: 'text', text: 'The war was over.' }]]) {
    const m = await anthropic.messages.create({ model: 'tolstoy-chat', max_tokens: 24,
      temperature: 0, system, messages: [{ role: 'user', content: 'Pierre' }] });
    assert.equal(m.content[0].text, native.json.message.content);
  }
});

test('a text document is read as its title and text among the message\'s texts; a PDF is a line saying it is left out', async () => {
  const native = await server.postJson('/api/chat', { model: 'tolstoy-chat', stream: false,
    options: { temperature: 0, num_predict: 24 },
    messages: [{ role: 'user', content: 'Pierre\n\nWar and Peace\n\nThe war was over.' }] });
  const m = await anthropic.messages.create({ model: 'tolstoy-chat', max_tokens: 24, temperature: 0,
    messages: [{ role: 'user', content: [{ type: 'text', text: 'Pierre' }, { type: 'document',
      title: 'War and Peace', source: { type: 'text', media_type: 'text/plain', data: 'The war was over.' } }] }] });
  assert.equal(m.content[0].text, native.json.message.content);
  const counted = await anthropic.messages.countTokens({ model: 'tolstoy-chat',
    messages: [{ role: 'user', content: 'Pierre\n\nWar and Peace\n\nThe war was over.' }] });
  assert.equal(m.usage.input_tokens, counted.input_tokens);
  // a PDF is not read: the model is told it was left out, and the request still runs
  const pdf = await anthropic.messages.create({ model: 'tolstoy-chat', max_tokens: 4, temperature: 0,
    messages: [{ role: 'user', content: [{ type: 'document', source: { type: 'base64',
      media_type: 'application/pdf', data: 'JVBERi0xLjQ=' } }] }] });
  const told = await server.postJson('/api/chat', { model: 'tolstoy-chat', stream: false,
    options: { temperature: 0, num_predict: 4 }, messages: [{ role: 'user',
      content: '[document left out: this server reads only text documents, not PDFs or files]' }] });
  assert.equal(pdf.content[0].text, told.json.message.content);
});

test('tools: a call comes back as a tool_use block, whole and streamed', async () => {
  const request = { model: 'tolstoy-tools', max_tokens: 240, temperature: 0, messages: question,
    tools: [getWeather], output_config: { format: { type: 'json_schema', schema: callSchema } } };
  const m = await anthropic.messages.create(request);
  assert.equal(m.stop_reason, 'tool_use');
  assert.equal(m.content.length, 1);
  const [block] = m.content;
  assert.equal(block.type, 'tool_use');
  assert.match(block.id, /^call_[a-z0-9]{8}$/);
  assert.deepEqual([block.name, block.input], ['get_weather', { city: 'Paris' }]);
  const streamed = await anthropic.messages.stream(request).finalMessage();
  assert.equal(streamed.stop_reason, 'tool_use');
  assert.deepEqual(streamed.content.map((b) => [b.type, b.name, b.input]),
    [['tool_use', 'get_weather', { city: 'Paris' }]]);
});

test('tools: tool_use and tool_result round-trip into the prompt', async () => {
  const history = [...question,
    { role: 'assistant', content: [{ type: 'tool_use', id: 'call_abc12345', name: 'get_weather', input: { city: 'Paris' } }] },
    { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'call_abc12345', content: '18 degrees' }] }];
  const m = await anthropic.messages.create({ model: 'tolstoy-tools', max_tokens: 1,
    temperature: 0, messages: history, tools: [getWeather] });
  const rendered = (await server.postJson('/api/chat', { model: 'tolstoy-tools', tools: [weatherTool],
    _debug_render_only: true, messages: [...question,
      { role: 'assistant', content: '', tool_calls: [{ function: { name: 'get_weather', arguments: { city: 'Paris' } } }] },
      { role: 'tool', tool_name: 'get_weather', content: '18 degrees' }] })).json._debug_info.rendered_template;
  const same = await anthropic.messages.create({ model: 'tolstoy', max_tokens: 1, temperature: 0,
    messages: [{ role: 'user', content: rendered }] });
  assert.ok(same.usage.input_tokens > 20);
  assert.equal(m.usage.input_tokens, same.usage.input_tokens);
});

test('tools: a tool_result of text and image blocks is a tool message with its images', async () => {
  // What a client's screenshot or image-reading tool sends back: text joined as ollama joins it, the
  // image on the tool message (a model without a projector refuses it, so it was carried).
  const history = [...question,
    { role: 'assistant', content: [{ type: 'tool_use', id: 'call_abc12345', name: 'get_weather', input: { city: 'Paris' } }] },
    { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'call_abc12345',
      content: [{ type: 'text', text: '18' }, { type: 'text', text: ' degrees' }] }] }];
  const m = await anthropic.messages.create({ model: 'tolstoy-tools', max_tokens: 1,
    temperature: 0, messages: history, tools: [getWeather] });
  const rendered = (await server.postJson('/api/chat', { model: 'tolstoy-tools', tools: [weatherTool],
    _debug_render_only: true, messages: [...question,
      { role: 'assistant', content: '', tool_calls: [{ function: { name: 'get_weather', arguments: { city: 'Paris' } } }] },
      { role: 'tool', tool_name: 'get_weather', content: '18 degrees' }] })).json._debug_info.rendered_template;
  const same = await anthropic.messages.create({ model: 'tolstoy', max_tokens: 1, temperature: 0,
    messages: [{ role: 'user', content: rendered }] });
  assert.equal(m.usage.input_tokens, same.usage.input_tokens);
  const image = { type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'iVBORw0KGgo=' } };
  history[2].content[0].content.push(image);
  await assert.rejects(anthropic.messages.create({ model: 'tolstoy-tools', max_tokens: 1,
    messages: history, tools: [getWeather] }),
  (e) => e instanceof Anthropic.BadRequestError && /model does not support images/.test(e.message));
});

test('count_tokens counts the prompt the same request makes, tools, system and history included', async () => {
  const request = { model: 'tolstoy-tools', system: 'Answer briefly.', tools: [getWeather], messages: [...question,
    { role: 'assistant', content: [{ type: 'tool_use', id: 'call_abc12345', name: 'get_weather', input: { city: 'Paris' } }] },
    { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'call_abc12345', content: '18 degrees' }] }] };
  const counted = await anthropic.messages.countTokens(request);
  const m = await anthropic.messages.create({ ...request, max_tokens: 1, temperature: 0 });
  assert.ok(counted.input_tokens > 20);
  assert.deepEqual(counted, { input_tokens: m.usage.input_tokens });
  // Claude Code asks with ?beta=true through the beta client
  const beta = await anthropic.beta.messages.countTokens({ model: 'tolstoy', messages: natasha });
  assert.equal(beta.input_tokens, 6);
  await assert.rejects(anthropic.messages.countTokens({ model: 'missing', messages: natasha }),
    (e) => e instanceof Anthropic.NotFoundError && e.error.error.type === 'not_found_error');
  await assert.rejects(anthropic.messages.countTokens({ model: 'tolstoy', messages: [] }),
    (e) => e instanceof Anthropic.BadRequestError && /at least one message/.test(e.message));
});

test('thinking: a thinking block before the text; disabled leaves it out', async () => {
  const m = await anthropic.messages.create({ model: 'tolstoy-think', max_tokens: 48,
    temperature: 0, messages: natasha, thinking: { type: 'enabled', budget_tokens: 1024 } });
  assert.deepEqual(m.content.map((b) => b.type), ['thinking', 'text']);
  assert.deepEqual([m.content[0].thinking, m.content[1].text], [thought, answer]);
  assert.equal(m.content[0].signature, '');
  const streamed = await anthropic.messages.stream({ model: 'tolstoy-think', max_tokens: 48,
    temperature: 0, messages: natasha }).finalMessage();
  assert.deepEqual(streamed.content.map((b) => b.thinking ?? b.text), [thought, answer]);
  const off = await anthropic.messages.create({ model: 'tolstoy-think', max_tokens: 48,
    temperature: 0, messages: natasha, thinking: { type: 'disabled' } });
  assert.deepEqual(off.content, [{ type: 'text', text: expectedCase4 }]);
  // thinking asked of a model that cannot think is dropped, as ollama does
  const plain = await anthropic.messages.create({ model: 'tolstoy', max_tokens: 48,
    temperature: 0, messages: natasha, thinking: { type: 'enabled', budget_tokens: 1024 } });
  assert.deepEqual(plain.content, [{ type: 'text', text: expectedCase4 }]);
  // output_config.effort is a think level: the thinking model thinks, the other drops it
  for (const model of ['tolstoy-think', 'tolstoy']) {
    const effort = await anthropic.messages.create({ model, max_tokens: 48, temperature: 0,
      messages: natasha, output_config: { effort: 'low' } });
    assert.deepEqual(effort.content.map((b) => b.thinking ?? b.text),
      model === 'tolstoy' ? [expectedCase4] : [thought, answer]);
  }
});

test('errors come in Anthropic shape with the right status', async () => {
  await assert.rejects(anthropic.messages.create({ model: 'tolstoy', max_tokens: 0, messages: natasha }),
    (e) => e instanceof Anthropic.BadRequestError && e.error.type === 'error' &&
      e.error.error.type === 'invalid_request_error' && /max_tokens/.test(e.error.error.message) &&
      /^req_\d+$/.test(e.error.request_id));
  await assert.rejects(anthropic.messages.create({ model: 'missing', max_tokens: 8, messages: natasha }),
    (e) => e instanceof Anthropic.NotFoundError && e.error.error.type === 'not_found_error');
  await assert.rejects(anthropic.messages.create({ model: 'tolstoy', max_tokens: 8, messages: [{ role: 'user',
    content: [{ type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'AAAA' } }] }] }),
  (e) => e instanceof Anthropic.BadRequestError && /model does not support images/.test(e.message));
  await assert.rejects(anthropic.messages.create({ model: 'tolstoy', max_tokens: 8, messages: natasha,
    tools: [getWeather] }), (e) => e instanceof Anthropic.BadRequestError && /does not support tools/.test(e.message));
  await assert.rejects(anthropic.messages.create({ model: 'tolstoy', max_tokens: 8, messages: [] }),
    (e) => e instanceof Anthropic.BadRequestError && /at least one message/.test(e.message));
  await assert.rejects(anthropic.messages.create({ model: 'tolstoy', max_tokens: 8,
    messages: [{ role: 'user', content: [{ type: 'text', text: 5 }] }] }),
  (e) => e instanceof Anthropic.BadRequestError && /content\.0\.text: must be a string/.test(e.message));
});

await runTests(server, tests);
