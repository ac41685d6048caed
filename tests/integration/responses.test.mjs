// End-to-end test of OpenAI's Responses API (/v1/responses) with the published `openai`
// client against a real `corral serve`: text checked against the llama.cpp reference, the
// stream through the client's event accumulator (finalResponse), instructions, function
// calls and their outputs, reasoning items, text.format, and the errors. Run by CTest: node
// responses.test.mjs (env CORRAL_BIN, CORRAL_FIXTURES).
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { CorralServer, answer, callSchema, chatTemplate, expectedCase4, runTests, thinkTemplate,
  thought, toolsTemplate, weatherTool } from './harness.mjs';

const server = await CorralServer.create();
const openai = new OpenAI({ baseURL: `${server.base}/v1`, apiKey: 'unused', maxRetries: 0 });
const tests = [];
const test = (name, fn) => tests.push({ name, fn });

const natasha = 'Natasha looked at him and';
const greedy = { temperature: 0, max_output_tokens: 48 };
const getWeather = { type: 'function', ...weatherTool.function };
const question = 'What is the weather in Paris?';

test('models are imported through the native API', () => server.createTolstoyModels([
  ['tolstoy-chat', { from: 'tolstoy', template: chatTemplate }],
  ['tolstoy-tools', { from: 'tolstoy', template: toolsTemplate }],
  ['tolstoy-think', { from: 'tolstoy', template: thinkTemplate }]]));

test('responses.create gives the reference text; a length stop is incomplete (tools: completed)', async () => {
  const r = await openai.responses.create({ model: 'tolstoy', input: natasha, ...greedy });
  assert.equal(r.object, 'response');
  assert.match(r.id, /^resp_/);
  assert.equal(r.output_text, expectedCase4);
  assert.equal(r.status, 'incomplete');
  assert.deepEqual(r.incomplete_details, { reason: 'max_output_tokens' });
  assert.deepEqual(r.usage, { input_tokens: 6, input_tokens_details: { cached_tokens: 0 },
    output_tokens: 48, output_tokens_details: { reasoning_tokens: 0 }, total_tokens: 54 });
  assert.equal(typeof r.completed_at, 'number');
  assert.equal(r.truncation, 'auto');
  assert.equal(r.max_output_tokens, 48);
  assert.equal(r.output[0].status, 'incomplete');
});

test('a stream goes through the client accumulator to the same response', async () => {
  const stream = openai.responses.stream({ model: 'tolstoy', input: natasha, ...greedy });
  const events = [];
  stream.on('event', (e) => events.push(e));
  const r = await stream.finalResponse();
  assert.equal(r.output_text, expectedCase4);
  assert.equal(events[0].type, 'response.created');
  assert.equal(events.at(-1).type, 'response.incomplete');
  assert.deepEqual(events.map((e) => e.sequence_number), events.map((_, i) => i));
  const text = events.filter((e) => e.type === 'response.output_text.delta').map((e) => e.delta);
  assert.equal(text.join(''), expectedCase4);
});

test('a prompt the runner has from the last request counts as cached_tokens', async () => {
  const again = await openai.responses.create({ model: 'tolstoy', input: natasha, ...greedy });
  assert.equal(again.output_text, expectedCase4);
  assert.equal(again.usage.input_tokens, 6);
  assert.ok(again.usage.input_tokens_details.cached_tokens > 0, JSON.stringify(again.usage));
});

test('truncation disabled refuses an input longer than the context; auto drops old turns', async () => {
  const long = 'the war and the peace '.repeat(80);
  const input = [{ role: 'user', content: long }, { role: 'assistant', content: 'yes' },
    { role: 'user', content: 'Pierre' }];
  await assert.rejects(openai.responses.create({ model: 'tolstoy-chat', input,
    truncation: 'disabled', max_output_tokens: 4 }),
  (e) => e instanceof OpenAI.BadRequestError && /exceeds the context length/.test(e.message));
  const r = await openai.responses.create({ model: 'tolstoy-chat', input, truncation: 'auto',
    max_output_tokens: 4 });
  assert.equal(r.truncation, 'auto');
  assert.ok(r.usage.input_tokens < 100, JSON.stringify(r.usage));
});

test('instructions and message items render as /api/chat renders them', async () => {
  const native = await server.postJson('/api/chat', { model: 'tolstoy-chat', stream: false,
    options: { temperature: 0, num_predict: 24 },
    messages: [{ role: 'system', content: 'The war was over.' }, { role: 'user', content: 'Pierre' }] });
  const r = await openai.responses.create({ model: 'tolstoy-chat', instructions: 'The war was over.',
    input: [{ role: 'user', content: [{ type: 'input_text', text: 'Pierre' }] }],
    temperature: 0, max_output_tokens: 24 });
  assert.equal(r.output_text, native.json.message.content);
  assert.equal(r.instructions, 'The war was over.');
});

test('tools: a call is a function_call item, whole and streamed', async () => {
  const request = { model: 'tolstoy-tools', input: question, tools: [getWeather], temperature: 0,
    max_output_tokens: 240, text: { format: { type: 'json_schema', name: 'call', schema: callSchema } } };
  const r = await openai.responses.create(request);
  assert.equal(r.status, 'completed');
  assert.deepEqual(r.output.map((o) => [o.type, o.name, o.arguments, o.status]),
    [['function_call', 'get_weather', '{"city":"Paris"}', 'completed']]);
  assert.match(r.output[0].call_id, /^call_[a-z0-9]{8}$/);
  const streamed = await openai.responses.stream(request).finalResponse();
  assert.deepEqual(streamed.output.map((o) => [o.type, o.name, o.arguments]),
    [['function_call', 'get_weather', '{"city":"Paris"}']]);
  // a namespace's functions are offered (and called) under "<namespace>.<name>", as ollama
  const namespaced = await openai.responses.create({ ...request,
    tools: [{ type: 'namespace', name: 'meteo', tools: [getWeather] }],
    text: { format: { type: 'json_schema', name: 'call', schema: { ...callSchema,
      properties: { ...callSchema.properties, name: { const: 'meteo.get_weather' } } } } } });
  assert.deepEqual(namespaced.output.map((o) => [o.type, o.name, o.arguments]),
    [['function_call', 'meteo.get_weather', '{"city":"Paris"}']]);
});

test('tools: function_call and function_call_output items round-trip into the prompt', async () => {
  const r = await openai.responses.create({ model: 'tolstoy-tools', tools: [getWeather],
    temperature: 0, max_output_tokens: 1, input: [
      { role: 'user', content: question },
      { type: 'function_call', call_id: 'call_abc12345', name: 'get_weather', arguments: '{"city":"Paris"}' },
      { type: 'function_call_output', call_id: 'call_abc12345', output: '18 degrees' }] });
  const rendered = (await server.postJson('/api/chat', { model: 'tolstoy-tools', tools: [weatherTool],
    _debug_render_only: true, messages: [{ role: 'user', content: question },
      { role: 'assistant', content: '', tool_calls: [{ function: { name: 'get_weather', arguments: { city: 'Paris' } } }] },
      { role: 'tool', tool_name: 'get_weather', content: '18 degrees' }] })).json._debug_info.rendered_template;
  const same = await openai.responses.create({ model: 'tolstoy', input: rendered, temperature: 0,
    max_output_tokens: 1 });
  assert.ok(same.usage.input_tokens > 20);
  assert.equal(r.usage.input_tokens, same.usage.input_tokens);
  // an output of parts (text and images, as tools that return pictures send it): one result
  const call = { type: 'function_call', call_id: 'call_abc12345', name: 'get_weather', arguments: '{"city":"Paris"}' };
  const parts = (output) => openai.responses.create({ model: 'tolstoy-tools', tools: [getWeather],
    temperature: 0, max_output_tokens: 1, input: [{ role: 'user', content: question }, call,
      { type: 'function_call_output', call_id: 'call_abc12345', output }] });
  const joined = (await server.postJson('/api/chat', { model: 'tolstoy-tools', tools: [weatherTool],
    _debug_render_only: true, messages: [{ role: 'user', content: question },
      { role: 'assistant', content: '', tool_calls: [{ function: { name: 'get_weather', arguments: { city: 'Paris' } } }] },
      { role: 'tool', tool_name: 'get_weather', content: '18degrees' }] })).json._debug_info.rendered_template;
  const sameJoined = await openai.responses.create({ model: 'tolstoy', input: joined, temperature: 0,
    max_output_tokens: 1 });
  const text = [{ type: 'input_text', text: '18' }, { type: 'input_text', text: 'degrees' }];
  assert.equal((await parts(text)).usage.input_tokens, sameJoined.usage.input_tokens);
  await assert.rejects(parts([...text, { type: 'input_image', image_url: 'data:image/png;base64,iVBORw0KGgo=' }]),
    (e) => e instanceof OpenAI.BadRequestError && /model does not support images/.test(e.message));
});

test('a reasoning item and the assistant message after it are one turn, as /api/chat has it', async () => {
  // what a client sends back after a reasoning model's answer: the reasoning item (summary
  // empty, the raw reasoning as reasoning_text) and the message item
  const r = await openai.responses.create({ model: 'tolstoy-chat', temperature: 0, max_output_tokens: 1,
    input: [{ role: 'user', content: 'Pierre' },
      { type: 'reasoning', id: 'rs_1', summary: [], content: [{ type: 'reasoning_text', text: 'hm' }] },
      { type: 'message', role: 'assistant', content: [{ type: 'output_text', text: 'Yes.' }] },
      { role: 'user', content: 'And?' }] });
  const rendered = (await server.postJson('/api/chat', { model: 'tolstoy-chat', _debug_render_only: true,
    messages: [{ role: 'user', content: 'Pierre' }, { role: 'assistant', content: 'Yes.', thinking: 'hm' },
      { role: 'user', content: 'And?' }] })).json._debug_info.rendered_template;
  const same = await openai.responses.create({ model: 'tolstoy', input: rendered, temperature: 0,
    max_output_tokens: 1 });
  assert.equal(r.usage.input_tokens, same.usage.input_tokens);
});

test('thinking comes back as a reasoning item; effort none turns it off', async () => {
  const r = await openai.responses.create({ model: 'tolstoy-think', input: natasha, ...greedy });
  assert.deepEqual(r.output.map((o) => o.type), ['reasoning', 'message']);
  assert.equal(r.output[0].summary[0].text, thought);
  assert.equal(r.output_text, answer);
  const streamed = await openai.responses.stream({ model: 'tolstoy-think', input: natasha,
    ...greedy }).finalResponse();
  assert.deepEqual([streamed.output[0].summary[0].text, streamed.output_text], [thought, answer]);
  const off = await openai.responses.create({ model: 'tolstoy-think', input: natasha, ...greedy,
    reasoning: { effort: 'none' } });
  assert.deepEqual(off.output.map((o) => o.type), ['message']);
  assert.equal(off.output_text, expectedCase4);
});

test('errors come in OpenAI shape with the right status', async () => {
  await assert.rejects(openai.responses.create({ model: 'missing', input: 'x' }),
    (e) => e instanceof OpenAI.NotFoundError);
  await assert.rejects(openai.responses.create({ model: 'tolstoy', input: [] }),
    (e) => e instanceof OpenAI.BadRequestError && /at least one item/.test(e.message));
  await assert.rejects(openai.responses.create({ model: 'tolstoy', input: 'x',
    previous_response_id: 'resp_1' }),
  (e) => e instanceof OpenAI.BadRequestError && /previous_response_id is not supported/.test(e.message));
  await assert.rejects(openai.responses.create({ model: 'tolstoy', input: 'x', background: true }),
    (e) => e instanceof OpenAI.BadRequestError && /background is not supported/.test(e.message));
  await assert.rejects(openai.responses.create({ model: 'tolstoy', input: 'x',
    tools: [{ type: 'web_search' }] }),
  (e) => e instanceof OpenAI.BadRequestError && /only function tools/.test(e.message));
  await assert.rejects(openai.responses.create({ model: 'tolstoy', input: [{ role: 'user',
    content: [{ type: 'input_image', image_url: 'data:image/png;base64,AAAA' }] }] }),
  (e) => e instanceof OpenAI.BadRequestError && /model does not support images/.test(e.message));
});

await runTests(server, tests);
