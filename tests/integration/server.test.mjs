// End-to-end test of `corral serve` with the published `ollama` npm client (issue 7):
// a real server on 127.0.0.1 with a temporary store; models imported through /api/blobs and
// /api/create; list, show, generate and chat (streamed and not, multi-turn), copy, delete,
// structured outputs (format), ps, keep_alive 0, the error statuses, 8 concurrent streams,
// a runner killed mid-stream, and a restart that keeps the store. Run by CTest: node
// server.test.mjs (env CORRAL_BIN, CORRAL_FIXTURES).
import { join } from 'node:path';
import assert from 'node:assert/strict';
import { Ollama } from 'ollama';
import { CorralServer, case1LogSoftmax, case1Prompt, expectedCase4, fixtures, runTests }
  from './harness.mjs';

const server = await CorralServer.create();
const base = server.base;
const tests = [];
const test = (name, fn) => tests.push({ name, fn });

const ollama = new Ollama({ host: base });
const greedy = { temperature: 0, num_predict: 24 };
const chatTemplate = '{{ range .Messages }}{{ if eq .Role "user" }}Q: {{ .Content }}\n{{ else }}A: {{ .Content }}\n{{ end }}{{ end }}A:';

test('create imports an uploaded GGUF and reports progress', async () => {
  const digest = await server.uploadBlob(join(fixtures, 'tiny-tolstoy-f32.gguf'));
  const statuses = [];
  for await (const p of await ollama.create({ model: 'tolstoy', files: { 'model.gguf': digest }, stream: true })) statuses.push(p.status);
  assert.equal(statuses.at(-1), 'success');
  const r = await ollama.create({ model: 'tolstoy-chat', from: 'tolstoy', template: chatTemplate,
    system: 'You are Tolstoy.', parameters: { temperature: 0, stop: ['\nQ:'] } });
  assert.equal(r.status, 'success');
});

test('list shows the models with details', async () => {
  const { models } = await ollama.list();
  const names = models.map((m) => m.name).sort();
  assert.deepEqual(names, ['tolstoy-chat:latest', 'tolstoy:latest']);
  const m = models.find((x) => x.name === 'tolstoy:latest');
  assert.equal(m.details.format, 'gguf');
  assert.equal(m.details.family, 'llama');
  assert.deepEqual(m.details.families, ['llama']);
  assert.deepEqual(models.find((x) => x.name === 'tolstoy-chat:latest').details.families, ['llama']);
  assert.match(m.digest, /^[0-9a-f]{64}$/);
  assert.ok(m.size > 18000000);
});

test('create keeps renderer and parser, show reports them, a model made from it inherits them', async () => {
  const r = await ollama.create({ model: 'tolstoy-rendered', from: 'tolstoy', renderer: 'qwen3-coder', parser: 'qwen3-coder' });
  assert.equal(r.status, 'success');
  const s = await ollama.show({ model: 'tolstoy-rendered' });
  assert.deepEqual([s.renderer, s.parser], ['qwen3-coder', 'qwen3-coder']);
  await ollama.create({ model: 'tolstoy-rendered-2', from: 'tolstoy-rendered', parser: 'harmony' });
  const t = await ollama.show({ model: 'tolstoy-rendered-2' });
  assert.deepEqual([t.renderer, t.parser], ['qwen3-coder', 'harmony']);
  const bad = await fetch(`${server.base}/api/create`, { method: 'POST',
    body: JSON.stringify({ model: 'x', from: 'tolstoy', parser: 7 }) });
  assert.equal(bad.status, 400);
  await ollama.delete({ model: 'tolstoy-rendered' });
  await ollama.delete({ model: 'tolstoy-rendered-2' });
});

test('show returns template, system, parameters and model_info', async () => {
  const s = await ollama.show({ model: 'tolstoy-chat' });
  assert.equal(s.template, chatTemplate);
  assert.equal(s.system, 'You are Tolstoy.');
  assert.match(s.parameters, /temperature\s+0/);
  assert.equal(s.model_info['general.architecture'], 'llama');
  assert.equal(s.model_info['llama.context_length'], 256);
  assert.ok(s.capabilities.includes('completion'));
  // options go into the modelfile over the model's parameters, as the ollama CLI's
  // /show modelfile has a session's /set parameters, and not into parameters
  const set = await ollama.show({ model: 'tolstoy-chat', options: { num_ctx: 128, stop: ['a', 'b'] } });
  assert.match(set.modelfile, /^PARAMETER num_ctx 128$/m);
  assert.match(set.modelfile, /^PARAMETER stop a\nPARAMETER stop b$/m);
  assert.match(set.modelfile, /^PARAMETER temperature 0$/m);
  assert.equal(set.parameters, s.parameters);
  assert.doesNotMatch(s.modelfile, /num_ctx/);
  await assert.rejects(ollama.show({ model: 'tolstoy-chat', options: { num_ctx: 'big' } }),
    (e) => e.status_code === 400 && /option "num_ctx" must be of type/.test(e.error));
  // the tensors come without verbose, as ollama sends them (its CLI shows them with --verbose)
  const embd = s.tensors.find((t) => t.name === 'token_embd.weight');
  assert.deepEqual([embd.type, embd.shape], ['F32', [256, 2048]]);
  // GitHub Copilot Chat labels models by general.basename: it gets the name it asked for
  const asked = async (userAgent) => (await (await fetch(`${base}/api/show`, { method: 'POST',
    headers: { 'User-Agent': userAgent }, body: JSON.stringify({ model: 'Tolstoy-Chat' }) })).json())
    .model_info['general.basename'];
  assert.equal(await asked('GitHubCopilotChat/0.30.0'), 'Tolstoy-Chat');
  assert.equal(await asked('curl/8.0'), undefined);
});

test('generate (not streamed) gives the reference greedy text', async () => {
  const r = await ollama.generate({ model: 'tolstoy', prompt: 'Natasha looked at him and',
    stream: false, options: { temperature: 0, num_predict: 48 } });
  assert.equal(r.response, expectedCase4);
  assert.equal(r.model, 'tolstoy', 'the name as the request gave it, as ollama echoes it');
  assert.equal(r.done, true);
  assert.equal(r.done_reason, 'length');
  assert.equal(r.eval_count, 48);
  assert.ok(r.total_duration > 0 && Array.isArray(r.context));
});

test('generate streams the same text in chunks, with context to continue', async () => {
  let text = '';
  let last;
  for await (const part of await ollama.generate({ model: 'tolstoy', prompt: 'Natasha looked at him and', stream: true, options: { temperature: 0, num_predict: 48 } })) {
    text += part.response;
    last = part;
  }
  assert.equal(text, expectedCase4);
  assert.equal(last.done, true);
  assert.ok(last.load_duration > 0, 'a loaded model still reports its wait for the runner, as ollama');
  const more = await ollama.generate({ model: 'tolstoy', prompt: ' Then', context: last.context, options: greedy });
  assert.ok(more.response.length > 0);
});

test('chat keeps a multi-turn conversation and stops on the model stop string', async () => {
  const messages = [{ role: 'user', content: 'Where is Pierre?' }];
  const first = await ollama.chat({ model: 'tolstoy-chat', messages, options: { num_predict: 32 } });
  assert.equal(first.message.role, 'assistant');
  assert.ok(!first.message.content.includes('\nQ:'));
  messages.push(first.message, { role: 'user', content: 'And Natasha?' });
  let streamed = '';
  for await (const part of await ollama.chat({ model: 'tolstoy-chat', messages, stream: true, options: { num_predict: 32 } })) streamed += part.message.content;
  const whole = await ollama.chat({ model: 'tolstoy-chat', messages, options: { num_predict: 32 } });
  assert.equal(streamed, whole.message.content);
});

const personSchema = { type: 'object', required: ['name', 'age', 'alive', 'title'], properties: {
  name: { type: 'string', maxLength: 12 }, age: { type: 'integer' }, alive: { type: 'boolean' },
  title: { enum: ['prince', 'count', 'princess'] } } };

function checkPerson(text) {
  const p = JSON.parse(text);
  assert.deepEqual(Object.keys(p), ['name', 'age', 'alive', 'title'], text);
  assert.ok(typeof p.name === 'string' && p.name.length <= 12, text);
  assert.ok(Number.isInteger(p.age) && typeof p.alive === 'boolean', text);
  assert.ok(['prince', 'count', 'princess'].includes(p.title), text);
}

test('format: a JSON schema shapes the answer, greedy or sampled, whole or streamed', async () => {
  const prompt = 'Natasha looked at him and';
  const greedyRun = await ollama.generate({ model: 'tolstoy', prompt, format: personSchema,
    options: { temperature: 0, num_predict: 200 } });
  assert.equal(greedyRun.done_reason, 'stop'); /* the grammar ended it, not the limit */
  checkPerson(greedyRun.response);
  for (const seed of [1, 2, 3]) {
    const r = await ollama.generate({ model: 'tolstoy', prompt, format: personSchema,
      options: { temperature: 1, seed, num_predict: 200 } });
    assert.equal(r.done_reason, 'stop');
    checkPerson(r.response);
  }
  let streamed = '';
  for await (const part of await ollama.chat({ model: 'tolstoy-chat', format: personSchema,
    stream: true, messages: [{ role: 'user', content: 'Who is Pierre?' }], options: { num_predict: 200 } }))
    streamed += part.message.content;
  checkPerson(streamed);
});

test('format "json" asks for an object; a bad format is 400', async () => {
  const r = await ollama.generate({ model: 'tolstoy', prompt: 'Pierre', format: 'json',
    options: { temperature: 0, num_predict: 48 } });
  assert.match(r.response, /^\{/);
  if (r.done_reason === 'stop') assert.equal(typeof JSON.parse(r.response), 'object');
  await assert.rejects(ollama.generate({ model: 'tolstoy', prompt: 'x', format: 'xml' }),
    (e) => e.status_code === 400 && /invalid format/.test(e.error));
  await assert.rejects(ollama.generate({ model: 'tolstoy', prompt: 'x', format: { type: 'shape' } }),
    (e) => e.status_code === 400 && /shape/.test(e.error));
});

test('8 concurrent greedy streams each get the text of a lone run', async () => {
  const alone = (await ollama.generate({ model: 'tolstoy', prompt: 'Pierre', options: { temperature: 0, num_predict: 40 } })).response;
  const runs = await Promise.all(Array.from({ length: 8 }, async () => {
    let t = '';
    const client = new Ollama({ host: base });
    for await (const p of await client.generate({ model: 'tolstoy', prompt: 'Pierre', stream: true, options: { temperature: 0, num_predict: 40 } })) t += p.response;
    return t;
  }));
  for (const t of runs) assert.equal(t, alone);
});

test('answers echo the model name as the request spelled it', async () => {
  for (const model of ['tolstoy', 'tolstoy:latest', 'Tolstoy']) {
    const r = await ollama.chat({ model, messages: [{ role: 'user', content: 'x' }], options: { num_predict: 1 } });
    assert.equal(r.model, model);
  }
});

test('a stream brings a chunk per token, as ollama, even when tokens come faster than sent', async () => {
  const parts = [];
  for await (const part of await ollama.generate({ model: 'tolstoy', prompt: 'Natasha looked at him and',
    stream: true, options: { temperature: 0, num_predict: 6 } })) parts.push(part);
  assert.equal(parts.length, 7);
  assert.ok(parts.slice(0, 6).every((p) => !p.done && p.response.length > 0));
  assert.equal(parts.map((p) => p.response).join(''), expectedCase4.split(' ').slice(0, 7).join(' '));
});

test('shift: false ends the answer at the context; truncate: false refuses a long prompt', async () => {
  const options = { temperature: 0, num_ctx: 16, num_predict: 100 };
  const held = await ollama.generate({ model: 'tolstoy', prompt: 'Prince Andrew', shift: false, options });
  assert.equal(held.done_reason, 'length');
  assert.ok(held.prompt_eval_count + held.eval_count <= 16, JSON.stringify(held));
  const shifted = await ollama.generate({ model: 'tolstoy', prompt: 'Prince Andrew', options });
  assert.equal(shifted.eval_count, 100);
  const long = 'Prince Andrew was in a state of the most terrible anxiety about the future of his son';
  await assert.rejects(ollama.generate({ model: 'tolstoy', prompt: long, truncate: false, options }),
    (e) => e.status_code === 400 && /exceeds the context length/.test(e.error));
  await assert.rejects(ollama.chat({ model: 'tolstoy', truncate: false, options,
    messages: [{ role: 'user', content: long }] }), (e) => e.status_code === 400);
  const cut = await ollama.generate({ model: 'tolstoy', prompt: long, options: { ...options, num_predict: 2 } });
  assert.equal(cut.eval_count, 2);
});

test('images on a model without vision are a 400, on generate and chat, as ollama', async () => {
  const image = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==';
  const refused = (e) => e.status_code === 400 && /model does not support images/.test(e.error);
  await assert.rejects(ollama.generate({ model: 'tolstoy', prompt: 'What is this?', images: [image] }), refused);
  await assert.rejects(ollama.chat({ model: 'tolstoy', messages: [{ role: 'user', content: 'What is this?',
    images: [image] }] }), refused);
  const r = await ollama.generate({ model: 'tolstoy', prompt: 'x', images: [], options: { num_predict: 1 } });
  assert.equal(r.eval_count, 1);
});

test('version is the ollama API matched, Corral\'s own beside it and in Server', async () => {
  const r = await fetch(`${server.base}/api/version`);
  const { version, corral_version: own } = await r.json();
  const [major, minor, patch] = version.split('.').map(Number);
  // Codex's --oss mode refuses a server below 0.13.4 (its first with /v1/responses), VS Code's
  // provider one below 0.6.4: both features Corral has
  assert.ok(major > 0 || minor > 13 || (minor === 13 && patch >= 4),
    `clients want an ollama version >= 0.13.4, got ${version}`);
  assert.match(own, /^\d+\.\d+\.\d+$/);
  assert.equal(r.headers.get('server'), `corral/${own}`);
});

test('status says cloud features are off, as ollama does with its cloud disabled', async () => {
  const r = await fetch(`${server.base}/api/status`);
  assert.equal(r.status, 200);
  assert.deepEqual(await r.json(), { cloud: { disabled: true, source: 'config' } });
});

test('ps lists the loaded model with the details UIs show; keep_alive 0 unloads it', async () => {
  const ps = await ollama.ps();
  const loaded = ps.models.find((m) => m.name === 'tolstoy:latest');
  assert.ok(loaded);
  assert.equal(loaded.size_vram, 0);
  assert.deepEqual([loaded.details.format, loaded.details.family, loaded.details.families],
    ['gguf', 'llama', ['llama']]);
  assert.match(loaded.details.parameter_size, /^\d+(\.\d+)?[KMB]$/);
  assert.equal(loaded.details.quantization_level, 'F32');
  const r = await ollama.generate({ model: 'tolstoy', prompt: '', keep_alive: 0 });
  assert.equal(r.done_reason, 'unload');
  for (let i = 0; i < 50 && (await ollama.ps()).models.some((m) => m.name === 'tolstoy:latest'); i++)
    await new Promise((res) => setTimeout(res, 100));
  assert.ok(!(await ollama.ps()).models.some((m) => m.name === 'tolstoy:latest'));
});

test('the newest request sets keep_alive, not the one that ends last', async () => {
  const controller = new AbortController();
  const long = await fetch(`${server.base}/api/generate`, { method: 'POST', signal: controller.signal,
    body: JSON.stringify({ model: 'tolstoy', prompt: 'Prince Andrew', keep_alive: -1,
      options: { num_predict: 100000 } }) });
  const reader = long.body.getReader();
  await reader.read(); // the long answer is streaming
  const r = await ollama.generate({ model: 'tolstoy', prompt: 'x', keep_alive: '1s', options: { num_predict: 1 } });
  assert.equal(r.done, true);
  controller.abort(); // the first request ends last, with its keep_alive of forever
  await reader.read().catch(() => {});
  let loaded = true;
  for (let i = 0; i < 60 && loaded; i++) {
    await new Promise((res) => setTimeout(res, 100));
    loaded = (await ollama.ps()).models.some((m) => m.name === 'tolstoy:latest');
  }
  assert.equal(loaded, false, 'the aborted request kept the model loaded forever');
});

test('copy and delete', async () => {
  await ollama.copy({ source: 'tolstoy', destination: 'tolstoy-copy' });
  assert.ok((await ollama.list()).models.some((m) => m.name === 'tolstoy-copy:latest'));
  await ollama.delete({ model: 'tolstoy-copy' });
  assert.ok(!(await ollama.list()).models.some((m) => m.name === 'tolstoy-copy:latest'));
});

test('suffix: fill-in-the-middle through a template with .Suffix; 400 without one', async () => {
  const fim = '<PRE> {{ .Prompt }} <SUF>{{ .Suffix }} <MID>';
  await ollama.create({ model: 'tolstoy-fim', from: 'tolstoy', template: fim });
  assert.ok((await ollama.show({ model: 'tolstoy-fim' })).capabilities.includes('insert'));
  const render = await fetch(`${base}/api/generate`, { method: 'POST', body: JSON.stringify({
    model: 'tolstoy-fim', prompt: 'Natasha', suffix: 'Pierre.', _debug_render_only: true }) });
  const rendered = await render.json();
  assert.equal(rendered._debug_info.rendered_template, '<PRE> Natasha <SUF>Pierre. <MID>');
  assert.equal(rendered.model, 'tolstoy-fim'); // as asked, as every answer echoes it
  const r = await ollama.generate({ model: 'tolstoy-fim', prompt: 'Natasha', suffix: 'Pierre.',
    options: greedy });
  const same = await ollama.generate({ model: 'tolstoy', prompt: '<PRE> Natasha <SUF>Pierre. <MID>',
    raw: true, options: greedy });
  assert.equal(r.response, same.response);
  await assert.rejects(ollama.generate({ model: 'tolstoy', prompt: 'Natasha', suffix: 'Pierre.' }),
    (e) => e.status_code === 400 && /"tolstoy" does not support insert/.test(e.error));
  await ollama.delete({ model: 'tolstoy-fim' });
});

// The server's default F16 KV cache keeps logits within 1e-2 of PyTorch's (tests/test_forward.c),
// so a log-softmax within 2e-2.
const LOGPROB_TOLERANCE = 2e-2;

test('logprobs: each token\'s log-probability and the top alternatives, whole and streamed', async () => {
  const top = [...case1LogSoftmax.keys()].sort((a, b) => case1LogSoftmax[b] - case1LogSoftmax[a]);
  const r = await ollama.generate({ model: 'tolstoy', prompt: case1Prompt, stream: false,
    logprobs: true, top_logprobs: 5, options: { temperature: 0, num_predict: 4 } });
  assert.equal(r.logprobs.length, 4);
  const [first] = r.logprobs;
  assert.ok(Math.abs(first.logprob - case1LogSoftmax[top[0]]) < LOGPROB_TOLERANCE, first.logprob);
  assert.equal(first.top_logprobs.length, 5);
  first.top_logprobs.forEach((t, i) =>
    assert.ok(Math.abs(t.logprob - case1LogSoftmax[top[i]]) < LOGPROB_TOLERANCE, `${i}: ${t.logprob}`));
  assert.deepEqual(first.top_logprobs[0], { token: first.token, logprob: first.logprob, bytes: first.bytes });
  assert.equal(Buffer.from(first.bytes).toString(), first.token);
  assert.equal(r.logprobs.map((l) => l.token).join(''), r.response);
  const streamed = [];
  for await (const part of await ollama.chat({ model: 'tolstoy', stream: true, logprobs: true,
    messages: [{ role: 'user', content: case1Prompt }], options: { temperature: 0, num_predict: 4 } }))
    streamed.push(...(part.logprobs ?? []));
  assert.equal(streamed.length, 4);
  assert.ok(streamed.every((l) => l.top_logprobs.length === 0));
  const bad = await fetch(`${base}/api/generate`, { method: 'POST',
    body: JSON.stringify({ model: 'tolstoy', prompt: 'x', logprobs: true, top_logprobs: 21 }) });
  assert.equal(bad.status, 400);
  assert.match((await bad.json()).error, /top_logprobs must be between 0 and 20/);
});

test('errors: unknown model 404, bad JSON 400, invalid name 400', async () => {
  await assert.rejects(ollama.generate({ model: 'missing', prompt: 'x' }), (e) => e.status_code === 404 && /not found/.test(e.error));
  await assert.rejects(ollama.show({ model: 'missing' }), (e) => e.status_code === 404);
  await assert.rejects(ollama.chat({ model: 'bad name!', messages: [] }), (e) => e.status_code === 400);
  const bad = await fetch(`${base}/api/chat`, { method: 'POST', body: '{not json' });
  assert.equal(bad.status, 400);
  assert.ok((await bad.json()).error);
  const nul = await fetch(`${base}/api/generate`, { method: 'POST', body: '{"model":"tolstoy","prompt":"a\\u0000b"}' });
  assert.equal(nul.status, 400);
  assert.match((await nul.json()).error, /holds \\u0000 \(NUL\)/);
});

test('a runner killed mid-stream ends the stream with an error; the next request reloads', async () => {
  const stream = await ollama.generate({ model: 'tolstoy', prompt: 'The war', stream: true, options: { num_predict: 100000 } });
  let n = 0;
  let failed = null;
  try {
    for await (const part of stream) {
      if (++n === 20) for (const pid of server.runnerPids()) process.kill(Number(pid), 'SIGKILL');
      if (n > 5000) break;
    }
  } catch (e) { failed = e; }
  assert.ok(failed, 'the stream must end with an error');
  const after = await ollama.generate({ model: 'tolstoy', prompt: 'Natasha looked at him and', options: { temperature: 0, num_predict: 48 } });
  assert.equal(after.response, expectedCase4);
});

test('a restarted server keeps the store; stopping leaves no runner behind', async () => {
  await server.stop();
  assert.deepEqual(server.runnerPids(), []);
  await server.start();
  const names = (await ollama.list()).models.map((m) => m.name).sort();
  assert.deepEqual(names, ['tolstoy-chat:latest', 'tolstoy:latest']);
  const r = await ollama.generate({ model: 'tolstoy', prompt: 'Natasha looked at him and', options: { temperature: 0, num_predict: 48 } });
  assert.equal(r.response, expectedCase4);
});

await runTests(server, tests);
