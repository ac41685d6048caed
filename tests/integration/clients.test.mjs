// End-to-end test of third-party client libraries against a real `corral serve`: LangChain's
// ChatOllama (@langchain/ollama) and the Vercel AI SDK (`ai`) through its community ollama
// provider (ollama-ai-provider-v2) and its OpenAI-compatible provider on /v1. Each checks what
// its users rely on: the known greedy answer of the tiny model, streaming that arrives in pieces,
// tools that reach the model and come back as calls, and JSON-schema output parsed into an
// object. The tiny model cannot choose to call a tool, so a `format` schema of consts spells
// the call (as tools.test.mjs does). Run by CTest: node clients.test.mjs (env CORRAL_BIN,
// CORRAL_FIXTURES).
import assert from 'node:assert/strict';
import { ChatOllama } from '@langchain/ollama';
import { Output, generateText, jsonSchema, streamText, tool } from 'ai';
import { createOllama } from 'ollama-ai-provider-v2';
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { CorralServer, callSchema, expectedCase4, runTests, toolsTemplate, weatherTool }
  from './harness.mjs';

const server = await CorralServer.create();
const tests = [];
const test = (name, fn) => tests.push({ name, fn });

const prompt = 'Natasha looked at him and';
const question = 'What is the weather in Paris?';
// the model pads a JSON value with whitespace: room enough for the whole object
const roomy = 240;

test('models are imported through the native API', () => server.createTolstoyModels([
  ['tolstoy-tools', { from: 'tolstoy', template: toolsTemplate }]]));

// ---- LangChain ChatOllama ----

const chatOllama = (fields) => new ChatOllama({ baseUrl: server.base, temperature: 0, ...fields });

test('ChatOllama invoke gives the reference greedy text', async () => {
  const m = await chatOllama({ model: 'tolstoy', numPredict: 48 }).invoke(prompt);
  assert.equal(m.content, expectedCase4);
  assert.equal(m.response_metadata.done_reason, 'length');
  assert.equal(m.usage_metadata.output_tokens, 48);
});

test('ChatOllama stream delivers the answer in many chunks that add up to it', async () => {
  const pieces = [];
  for await (const chunk of await chatOllama({ model: 'tolstoy', numPredict: 48 }).stream(prompt)) {
    pieces.push(chunk.content);
  }
  assert.equal(pieces.join(''), expectedCase4);
  assert.ok(pieces.filter(Boolean).length >= 10, `only ${pieces.length} chunks`);
});

test('ChatOllama bindTools sends the tools and gets the call back in tool_calls', async () => {
  const m = await chatOllama({ model: 'tolstoy-tools', numPredict: roomy, format: callSchema })
    .bindTools([weatherTool]).invoke(question);
  assert.equal(m.content, '');
  assert.equal(m.tool_calls.length, 1);
  assert.equal(m.tool_calls[0].name, 'get_weather');
  assert.deepEqual(m.tool_calls[0].args, { city: 'Paris' });
  assert.equal(m.tool_calls[0].type, 'tool_call');
});

test('ChatOllama withStructuredOutput parses a JSON-schema answer into an object', async () => {
  const schema = {
    title: 'weather_call', type: 'object',
    properties: { name: { const: 'get_weather' }, parameters: callSchema.properties.parameters },
    required: ['name', 'parameters'],
  };
  const r = await chatOllama({ model: 'tolstoy', numPredict: roomy })
    .withStructuredOutput(schema).invoke(question);
  assert.deepEqual(r, { name: 'get_weather', parameters: { city: 'Paris' } });
});

// ---- Vercel AI SDK ----

const ollama = createOllama({ baseURL: `${server.base}/api` });
// The ollama provider sends temperature and max_output_tokens at the top level of /api/chat,
// where the ollama API does not read them; sampling goes in its provider options instead.
const ollamaGreedy = { ollama: { options: { temperature: 0, num_predict: 48 } } };
// includeUsage asks for the usage chunk at the end of a stream (stream_options.include_usage);
// supportsStructuredOutputs lets it send an object output's schema as response_format json_schema
const compatible = createOpenAICompatible({ name: 'corral', baseURL: `${server.base}/v1`,
  apiKey: 'unused', includeUsage: true, supportsStructuredOutputs: true });
const callOutput = Output.object({ schema: jsonSchema(callSchema) });
const weather = { get_weather: tool({ description: weatherTool.function.description,
  inputSchema: jsonSchema(weatherTool.function.parameters) }) };
const roomyGreedy = { ollama: { options: { temperature: 0, num_predict: roomy } } };

test('ai generateText through the ollama provider gives the reference greedy text', async () => {
  const r = await generateText({ model: ollama('tolstoy'), prompt, providerOptions: ollamaGreedy,
    maxRetries: 0 });
  assert.equal(r.text, expectedCase4);
  assert.equal(r.finishReason, 'length');
  assert.equal(r.usage.outputTokens, 48);
});

test('ai streamText through the ollama provider streams the same text in pieces', async () => {
  const r = streamText({ model: ollama('tolstoy'), prompt, providerOptions: ollamaGreedy,
    maxRetries: 0 });
  const pieces = [];
  for await (const piece of r.textStream) pieces.push(piece);
  assert.equal(pieces.join(''), expectedCase4);
  assert.ok(pieces.length >= 10, `only ${pieces.length} pieces`);
  assert.equal(await r.finishReason, 'length');
});

test('ai generateText through the ollama provider parses an object output', async () => {
  const r = await generateText({ model: ollama('tolstoy'), prompt: question, output: callOutput,
    providerOptions: roomyGreedy, maxRetries: 0 });
  assert.deepEqual(r.output, { name: 'get_weather', parameters: { city: 'Paris' } });
});

test('ai generateText through the ollama provider with tools returns the call', async () => {
  const r = await generateText({ model: ollama('tolstoy-tools'), prompt: question, tools: weather,
    output: callOutput, providerOptions: roomyGreedy, maxRetries: 0 });
  assert.deepEqual(r.toolCalls.map((c) => [c.toolName, c.input]), [['get_weather', { city: 'Paris' }]]);
  assert.equal(r.finishReason, 'tool-calls');
});

test('ai generateText through the OpenAI-compatible provider gives the reference text', async () => {
  const r = await generateText({ model: compatible.chatModel('tolstoy'), prompt, temperature: 0,
    maxOutputTokens: 48, maxRetries: 0 });
  assert.equal(r.text, expectedCase4);
  assert.equal(r.finishReason, 'length');
  assert.deepEqual([r.usage.inputTokens, r.usage.outputTokens], [6, 48]);
});

test('ai streamText through the OpenAI-compatible provider streams the same text', async () => {
  const r = streamText({ model: compatible.chatModel('tolstoy'), prompt, temperature: 0,
    maxOutputTokens: 48, maxRetries: 0 });
  const pieces = [];
  for await (const piece of r.textStream) pieces.push(piece);
  assert.equal(pieces.join(''), expectedCase4);
  assert.ok(pieces.length >= 10, `only ${pieces.length} pieces`);
  assert.equal(await r.finishReason, 'length');
  assert.equal((await r.usage).outputTokens, 48);
});

test('ai through the OpenAI-compatible provider: object output and a tool call', async () => {
  const o = await generateText({ model: compatible.chatModel('tolstoy'), prompt: question,
    output: callOutput, temperature: 0, maxOutputTokens: roomy, maxRetries: 0 });
  assert.deepEqual(o.output, { name: 'get_weather', parameters: { city: 'Paris' } });
  const t = await generateText({ model: compatible.chatModel('tolstoy-tools'), prompt: question,
    tools: weather, output: callOutput, temperature: 0, maxOutputTokens: roomy, maxRetries: 0 });
  assert.deepEqual(t.toolCalls.map((c) => [c.toolName, c.input]), [['get_weather', { city: 'Paris' }]]);
  assert.equal(t.finishReason, 'tool-calls');
});

// The AI SDK's tool mode: toolChoice names the tool (tool_choice on the wire), no format. The
// tiny model never calls a tool of its own accord; Corral's grammar makes it. (A bounded city:
// the model would fill an unbounded string up to the token limit.)
test('ai through the OpenAI-compatible provider: toolChoice forces the named tool', async () => {
  const city = { type: 'object', properties: { city: { type: 'string', maxLength: 12 } },
    required: ['city'] };
  const tools = { get_weather: tool({ description: 'The weather', inputSchema: jsonSchema(city) }) };
  const free = await generateText({ model: compatible.chatModel('tolstoy-tools'), prompt: question,
    tools, temperature: 0, maxOutputTokens: roomy, maxRetries: 0 });
  assert.deepEqual(free.toolCalls, []);
  const r = await generateText({ model: compatible.chatModel('tolstoy-tools'), prompt: question,
    tools, toolChoice: { type: 'tool', toolName: 'get_weather' }, temperature: 0,
    maxOutputTokens: roomy, maxRetries: 0 });
  assert.deepEqual(r.toolCalls.map((c) => c.toolName), ['get_weather']);
  assert.equal(typeof r.toolCalls[0].input.city, 'string');
  assert.equal(r.finishReason, 'tool-calls');
});

await runTests(server, tests);
