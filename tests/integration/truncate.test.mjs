// End-to-end test of /api/chat's `truncate` through a real `corral serve` and
// the published `ollama` client: a chat longer than num_ctx loses whole messages, oldest first,
// keeping its system messages and its last message. The tiny model's answer depends on every
// token of its prompt, so a truncated chat is proved to have kept exactly the expected messages
// by answering, greedily, as the explicitly shortened chat does; that shortened chat is the
// longest that fits (the runner takes it whole; with truncate:false one message more is the
// 400 "the input length exceeds the context length", as in ollama). Run by CTest: node
// truncate.test.mjs (env CORRAL_BIN, CORRAL_FIXTURES).
import { join } from 'node:path';
import assert from 'node:assert/strict';
import { Ollama } from 'ollama';
import OpenAI from 'openai';
import { CorralServer, fixtures, runTests } from './harness.mjs';

const server = await CorralServer.create();
const ollama = new Ollama({ host: server.base });
const openai = new OpenAI({ baseURL: `${server.base}/v1`, apiKey: 'unused', maxRetries: 0 });
const tests = [];
const test = (name, fn) => tests.push({ name, fn });

const template = '{{ range .Messages }}{{ .Role }}: {{ .Content }}\n{{ end }}assistant:';
const system = 'You write like Tolstoy.';
const NUM_CTX = 64;
const options = { temperature: 0, num_ctx: NUM_CTX, num_predict: 12 };
const turns = [
  ['user', 'Who is Pierre?'], ['assistant', 'The son of old count Bezukhov.'],
  ['user', 'And Natasha?'], ['assistant', 'The young countess Rostova.'],
  ['user', 'Where is Prince Andrew?'], ['assistant', 'With the army, near Austerlitz.'],
  ['user', 'What did the princess say?'],
].map(([role, content]) => ({ role, content }));
// with the model's SYSTEM, turns from this one on are the longest suffix under NUM_CTX tokens
const FIRST_KEPT = 4;

const chat = (model, messages, extra = {}) =>
  ollama.chat({ model, messages, options, ...extra });

const tooLong = (e) => e.status_code === 400 && /exceeds the context length/.test(e.error);

test('models with a SYSTEM, and with MESSAGE history', async () => {
  const digest = await server.uploadBlob(join(fixtures, 'tiny-tolstoy-f32.gguf'));
  await ollama.create({ model: 'chatty', files: { 'model.gguf': digest }, template, system });
  await ollama.create({ model: 'chatty-history', from: 'chatty', messages: turns.slice(0, FIRST_KEPT) });
  await ollama.create({ model: 'chatty-64', from: 'chatty', parameters: { num_ctx: NUM_CTX } });
});

test('the expected suffix is the longest that fits', async () => {
  const kept = await chat('chatty', turns.slice(FIRST_KEPT), { truncate: false });
  assert.equal(kept.prompt_truncated, undefined);
  await assert.rejects(chat('chatty', turns.slice(FIRST_KEPT - 1), { truncate: false }), tooLong);
});

test('a long chat drops its oldest messages and keeps the system and last ones', async () => {
  const r = await chat('chatty', turns);
  const shortened = await chat('chatty', turns.slice(FIRST_KEPT));
  assert.equal(r.message.content, shortened.message.content);
  assert.equal(r.messages_dropped, FIRST_KEPT);
  assert.equal(r.prompt_truncated, undefined);
  assert.ok(r.prompt_eval_count <= NUM_CTX);
});

test('truncate:false drops no message and refuses a chat that does not fit', async () => {
  await assert.rejects(chat('chatty', turns, { truncate: false }), tooLong);
});

test('system messages among the dropped ones are kept, in order', async () => {
  const note = { role: 'system', content: 'Be brief.' };
  const messages = [...turns.slice(0, 2), note, ...turns.slice(2)];
  const r = await chat('chatty', messages);
  const first = r.messages_dropped + 1; // the model's SYSTEM is message 0
  assert.ok(first > 3, `only ${r.messages_dropped} dropped`);
  const shortened = await chat('chatty',
    [{ role: 'system', content: system }, note, ...messages.slice(first - 1)]);
  assert.equal(shortened.prompt_truncated, undefined);
  assert.equal(r.message.content, shortened.message.content);
  await assert.rejects(chat('chatty',
    [{ role: 'system', content: system }, note, ...messages.slice(first - 2)], { truncate: false }),
  tooLong);
});

test("the model's MESSAGE history is dropped first", async () => {
  const r = await chat('chatty-history', turns.slice(FIRST_KEPT));
  const bare = await chat('chatty', turns.slice(FIRST_KEPT));
  assert.equal(r.messages_dropped, FIRST_KEPT);
  assert.equal(r.message.content, bare.message.content);
});

test('a chat that fits is unchanged', async () => {
  const short = turns.slice(FIRST_KEPT);
  const r = await chat('chatty', short);
  const untouched = await chat('chatty', short, { truncate: false });
  assert.equal(r.messages_dropped, undefined);
  assert.equal(r.message.content, untouched.message.content);
  const rendered = (await server.postJson('/api/chat', { model: 'chatty', messages: turns,
    _debug_render_only: true })).json._debug_info.rendered_template;
  assert.ok(rendered.startsWith(`system: ${system}\nuser: Who is Pierre?\n`));
});

test('a last message longer than the context is kept, and cut by the runner', async () => {
  const long = { role: 'user', content: 'Pierre went to Moscow. '.repeat(20) };
  const r = await chat('chatty', [...turns, long]);
  const alone = await chat('chatty', [long]);
  assert.equal(r.messages_dropped, turns.length);
  assert.ok(r.prompt_truncated > 0);
  assert.equal(r.message.content, alone.message.content);
});

test('OpenAI chat completions truncate the same way', async () => {
  const r = await openai.chat.completions.create({ model: 'chatty-64', messages: turns,
    temperature: 0, max_tokens: 12 });
  const shortened = await chat('chatty', turns.slice(FIRST_KEPT));
  assert.equal(r.choices[0].message.content, shortened.message.content);
});

test('truncate must be a boolean', async () => {
  const r = await server.postJson('/api/chat', { model: 'chatty', messages: turns, truncate: 'yes' });
  assert.equal(r.status, 400);
  assert.match(r.json.error, /truncate/);
});

await runTests(server, tests);
