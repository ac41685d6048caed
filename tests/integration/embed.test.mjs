// End-to-end test of embeddings through a real `corral serve`: /api/embed and the legacy
// /api/embeddings with the published `ollama` client, /v1/embeddings with the `openai` client
// (base64, its default, and float), on the tiny bert, nomic-bert, jina-bert-v2 and
// gemma-embedding fixtures, checked against llama.cpp's pooled vectors in
// tests/fixtures/arch/*.json (gemma-embedding's and jina-bert-v2's in their .ref.txt) within the engine's own tolerance, 1e-4 (see tests/test_forward.c);
// batches, dimensions, truncation and the error statuses. Run by
// CTest: node embed.test.mjs (env CORRAL_BIN, CORRAL_FIXTURES).
import { readFileSync } from 'node:fs';
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

const reference = (name) => JSON.parse(readFileSync(join(fixtures, 'arch', `${name}.json`), 'utf8'));
const bert = reference('bert');
const nomic = reference('nomic-bert');
const TOLERANCE = 1e-4;

// A reference made by tools/archref/peer.c embed (NAME.ref.txt): the input text, its ids and
// the pooled vector, normalised and raw.
function refText(name) {
  const text = readFileSync(join(fixtures, 'arch', `${name}.ref.txt`), 'utf8');
  const values = (key) => text.match(new RegExp(`^${key} (.*)$`, 'm'))[1].split(' ').slice(1).map(Number);
  return { input_text: text.match(/^# input_text: "(.*)"$/m)[1], input_ids: values('input_ids'),
    embedding: values('embedding'), embedding_raw: values('embedding_raw') };
}
const gemma = refText('gemma-embedding');
const jina = refText('jina-bert-v2');

function assertClose(got, want, what) {
  assert.equal(got.length, want.length, `${what}: length`);
  for (let i = 0; i < want.length; i++)
    assert.ok(Math.abs(got[i] - want[i]) <= TOLERANCE * Math.max(1, Math.abs(want[i])),
      `${what}[${i}]: ${got[i]} vs ${want[i]}`);
}
const norm = (v) => Math.sqrt(v.reduce((s, x) => s + x * x, 0));

test('embedding models are imported and show the embedding capability', async () => {
  for (const [model, file] of [['bert', 'arch/bert.gguf'], ['nomic', 'arch/nomic-bert.gguf'],
    ['jina', 'arch/jina-bert-v2.gguf'], ['tolstoy', 'tiny-tolstoy-f32.gguf']]) {
    const digest = await server.uploadBlob(join(fixtures, file));
    await ollama.create({ model, files: { 'model.gguf': digest } });
  }
  assert.deepEqual((await ollama.show({ model: 'bert' })).capabilities, ['embedding']);
});

test('embed gives llama.cpp\'s normalised vector and the token count', async () => {
  for (const [model, ref] of [['bert', bert], ['nomic', nomic], ['jina', jina]]) {
    const r = await ollama.embed({ model, input: ref.input_text });
    assert.equal(r.model, model);
    assert.equal(r.embeddings.length, 1);
    assertClose(r.embeddings[0], ref.embedding, model);
    assert.equal(r.prompt_eval_count, ref.input_ids.length);
    assert.ok(r.total_duration > 0);
    const again = await ollama.embed({ model, input: 'x' });
    assert.ok(again.load_duration > 0, 'a loaded model still reports its wait for the runner');
  }
});

test('a batch embeds each input alone; dimensions cuts and normalises again', async () => {
  const r = await ollama.embed({ model: 'bert', input: [bert.input_text, 'hello world'] });
  assert.equal(r.embeddings.length, 2);
  assertClose(r.embeddings[0], bert.embedding, 'batch[0]');
  const alone = await ollama.embed({ model: 'bert', input: 'hello world' });
  assertClose(r.embeddings[1], alone.embeddings[0], 'batch[1]');
  for (const v of r.embeddings) assert.ok(Math.abs(norm(v) - 1) < 1e-5);
  const cut = await ollama.embed({ model: 'bert', input: bert.input_text, dimensions: 16 });
  assert.equal(cut.embeddings[0].length, 16);
  const head = bert.embedding.slice(0, 16);
  assertClose(cut.embeddings[0], head.map((x) => x / norm(head)), 'dimensions 16');
});

test('the legacy embeddings endpoint gives the pooled vector unnormalised', async () => {
  const r = await ollama.embeddings({ model: 'bert', prompt: bert.input_text });
  assertClose(r.embedding, bert.embedding_raw, 'legacy');
  const empty = await server.postJson('/api/embeddings', { model: 'bert', prompt: '' });
  assert.deepEqual([empty.status, empty.json], [200, { embedding: [] }]);
});

test('OpenAI embeddings: base64 (the client default) and float, with usage', async () => {
  const r = await openai.embeddings.create({ model: 'nomic', input: [nomic.input_text, 'x'] });
  assert.equal(r.object, 'list');
  assert.deepEqual(r.data.map((d) => [d.object, d.index]), [['embedding', 0], ['embedding', 1]]);
  assertClose(r.data[0].embedding, nomic.embedding, 'base64');
  assert.equal(r.usage.prompt_tokens, nomic.input_ids.length + 3);
  const float = await openai.embeddings.create({ model: 'nomic', input: nomic.input_text,
    encoding_format: 'float', dimensions: 8 });
  const head = nomic.embedding.slice(0, 8);
  assertClose(float.data[0].embedding, head.map((x) => x / norm(head)), 'float, dimensions 8');
  // the format's name in any case, as ollama reads it
  const upper = await server.postJson('/v1/embeddings', { model: 'nomic', input: 'x',
    encoding_format: 'BASE64', dimensions: 8 });
  assert.deepEqual([upper.status, typeof upper.json.data[0].embedding], [200, 'string']);
});

test('long inputs are cut to the context unless truncate is false', async () => {
  const long = Array(80).fill('the quick brown fox').join(' ');
  const cut = await ollama.embed({ model: 'bert', input: long });
  assert.equal(cut.prompt_eval_count, bert.metadata['bert.context_length']);
  assert.ok(Math.abs(norm(cut.embeddings[0]) - 1) < 1e-5);
  await assert.rejects(ollama.embed({ model: 'bert', input: long, truncate: false }),
    (e) => e.status_code === 400 && /input length exceeds the context length/.test(e.error));
});

test('EmbeddingGemma: llama.cpp\'s vector through /api/embed and /v1/embeddings', async () => {
  const digest = await server.uploadBlob(join(fixtures, 'arch/gemma-embedding.gguf'));
  await ollama.create({ model: 'gemma-embed', files: { 'model.gguf': digest } });
  const show = await ollama.show({ model: 'gemma-embed' });
  assert.deepEqual(show.capabilities, ['embedding']);
  assert.equal(show.model_info['general.architecture'], 'gemma-embedding');
  const r = await ollama.embed({ model: 'gemma-embed', input: gemma.input_text });
  assertClose(r.embeddings[0], gemma.embedding, 'gemma-embedding');
  assert.equal(r.prompt_eval_count, gemma.input_ids.length);
  const o = await openai.embeddings.create({ model: 'gemma-embed', input: gemma.input_text,
    encoding_format: 'float' });
  assertClose(o.data[0].embedding, gemma.embedding, 'gemma-embedding (OpenAI)');
  const legacy = await ollama.embeddings({ model: 'gemma-embed', prompt: gemma.input_text });
  assertClose(legacy.embedding, gemma.embedding_raw, 'gemma-embedding (legacy)');
});

test('errors: a generative model, a bad input, an embedding model asked to chat', async () => {
  await assert.rejects(ollama.embed({ model: 'tolstoy', input: 'x' }),
    (e) => e.status_code === 400 && /"tolstoy" does not support embeddings/.test(e.error));
  const bad = await server.postJson('/api/embed', { model: 'bert', input: [1, 2] });
  assert.deepEqual([bad.status, bad.json.error], [400, 'invalid input type']);
  const legacy = await server.postJson('/api/embeddings', { model: 'bert', prompt: ['a', 'b'] });
  assert.deepEqual([legacy.status, legacy.json.error], [400, 'invalid input type']);
  const truncate = await server.postJson('/api/embed', { model: 'bert', input: 'a', truncate: 'no' });
  assert.deepEqual([truncate.status, truncate.json.error], [400, 'truncate must be a boolean']);
  const many = await server.postJson('/api/embed', { model: 'bert', input: Array(2049).fill('a') });
  assert.equal(many.status, 400);
  assert.match(many.json.error, /too many inputs: at most 2048/);
  await assert.rejects(ollama.chat({ model: 'bert', messages: [{ role: 'user', content: 'x' }] }),
    (e) => e.status_code === 400 && /"bert" does not support chat/.test(e.error));
  await assert.rejects(openai.embeddings.create({ model: 'missing', input: 'x' }),
    (e) => e instanceof OpenAI.NotFoundError);
  const empty = await ollama.embed({ model: 'nomic', input: [] });
  assert.deepEqual(empty.embeddings, []);
  const emptyText = await ollama.embed({ model: 'nomic', input: '' });
  assert.deepEqual(emptyText.embeddings, [], 'an empty string only loads, as in ollama');
  assert.ok((await ollama.ps()).models.some((m) => m.name === 'nomic:latest'));
});

await runTests(server, tests);
