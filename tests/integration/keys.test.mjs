// API keys (CORRAL_API_KEYS) with the published clients, each the way its users pass a key:
// npm `ollama` through an Authorization header, `openai` and `@anthropic-ai/sdk` through
// apiKey (Bearer and x-api-key). Without the key each gets a 401 it can report. Run by CTest:
// node keys.test.mjs (env CORRAL_BIN, CORRAL_FIXTURES).
import { join } from 'node:path';
import assert from 'node:assert/strict';
import Anthropic from '@anthropic-ai/sdk';
import { Ollama } from 'ollama';
import OpenAI from 'openai';
import { CorralServer, expectedCase4, fixtures, runTests } from './harness.mjs';

const key = 'sk-corral-test-key-0123456789';
const auth = { Authorization: `Bearer ${key}` };
const server = await CorralServer.create({ env: { CORRAL_API_KEYS: key }, headers: auth });
const tests = [];
const test = (name, fn) => tests.push({ name, fn });
const prompt = 'Natasha looked at him and';

test('a model is imported with the key', async () => {
  const digest = await server.uploadBlob(join(fixtures, 'tiny-tolstoy-f32.gguf'));
  const r = await fetch(`${server.base}/api/create`, { method: 'POST', headers: auth,
    body: JSON.stringify({ model: 'tolstoy', files: { 'm.gguf': digest }, stream: false }) });
  assert.equal(r.status, 200, await r.text());
});

test('ollama with the key in its headers generates; without it, a 401', async () => {
  const ollama = new Ollama({ host: server.base, headers: auth });
  const r = await ollama.generate({ model: 'tolstoy', prompt, options: { temperature: 0, num_predict: 48 } });
  assert.equal(r.response, expectedCase4);
  const anonymous = new Ollama({ host: server.base });
  await assert.rejects(anonymous.list(), (e) => e.status_code === 401 && /API key/.test(e.error));
});

test('openai with apiKey chats; with a wrong key, AuthenticationError', async () => {
  const openai = new OpenAI({ baseURL: `${server.base}/v1`, apiKey: key, maxRetries: 0 });
  const c = await openai.completions.create({ model: 'tolstoy', prompt, max_tokens: 48, temperature: 0 });
  assert.equal(c.choices[0].text, expectedCase4);
  const wrong = new OpenAI({ baseURL: `${server.base}/v1`, apiKey: 'sk-wrong', maxRetries: 0 });
  await assert.rejects(wrong.models.list(), OpenAI.AuthenticationError);
});

test('anthropic with apiKey (x-api-key) answers; with a wrong key, AuthenticationError', async () => {
  const anthropic = new Anthropic({ baseURL: server.base, apiKey: key, maxRetries: 0 });
  const m = await anthropic.messages.create({ model: 'tolstoy', max_tokens: 48, temperature: 0,
    messages: [{ role: 'user', content: prompt }] });
  assert.equal(m.content[0].text, expectedCase4);
  const wrong = new Anthropic({ baseURL: server.base, apiKey: 'sk-wrong', maxRetries: 0 });
  await assert.rejects(wrong.messages.create({ model: 'tolstoy', max_tokens: 4,
    messages: [{ role: 'user', content: prompt }] }), Anthropic.AuthenticationError);
});

await runTests(server, tests);
