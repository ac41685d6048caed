// Audio on the server side, through the published clients: a GGUF with
// `<arch>.audio.block_count`, or a projector with `clip.has_audio_encoder`, lists `audio`
// among its capabilities (/api/show, /api/tags); a model without it refuses a clip with a 400
// in ollama's words on /api/generate, /api/chat, chat completions' input_audio parts and
// /v1/audio/transcriptions (the `openai` client's audio.transcriptions.create), before any
// runner is asked; the transcription endpoint's own refusals come in OpenAI's error shape;
// `corral run` attaches a .wav path for a model with audio. The full path (an audio tower
// answering) runs when CORRAL_AUDIO_GGUF names a GGUF that carries one. Run by CTest: node
// audio.test.mjs (env CORRAL_BIN, CORRAL_FIXTURES, CORRAL_AUDIO_GGUF).
import { join } from 'node:path';
import { spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import assert from 'node:assert/strict';
import { Ollama } from 'ollama';
import OpenAI, { toFile } from 'openai';
import { CorralServer, bin, fixtures, runTests } from './harness.mjs';

const server = await CorralServer.create();
const tests = [];
const test = (name, fn) => tests.push({ name, fn });
const ollama = new Ollama({ host: server.base });
const openai = new OpenAI({ baseURL: `${server.base}/v1`, apiKey: 'unused' });

// A mono 16-bit WAV of `samples` samples of silence at `rate` (16 kHz); wav holds 0.1 s.
const silence = (samples, rate = 16000) => {
  const out = Buffer.alloc(44 + 2 * samples);
  out.write('RIFF', 0);
  out.writeUInt32LE(36 + 2 * samples, 4);
  out.write('WAVEfmt ', 8);
  out.writeUInt32LE(16, 16);
  out.writeUInt16LE(1, 20); // PCM
  out.writeUInt16LE(1, 22); // mono
  out.writeUInt32LE(rate, 24);
  out.writeUInt32LE(2 * rate, 28);
  out.writeUInt16LE(2, 32);
  out.writeUInt16LE(16, 34);
  out.write('data', 36);
  out.writeUInt32LE(2 * samples, 40);
  return out;
};
const wav = silence(1600);
const wavBase64 = wav.toString('base64');
const vision = join(fixtures, 'vision');
const png = readFileSync(join(vision, 'square.png')).toString('base64');

// The GGUF in buf with one more key of GGUF type `type` (4: u32, 7: bool) and value, its
// tensors' data kept aligned.
function withKey(buf, key, type, value) {
  let at = 24;
  const u64 = () => { const v = Number(buf.readBigUInt64LE(at)); at += 8; return v; };
  const u32 = () => { const v = buf.readUInt32LE(at); at += 4; return v; };
  const sizes = { 0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8 };
  let alignment = 32;
  const skip = (type) => {
    if (type === 8) { const n = u64(); at += n; return; }
    if (type === 9) { const inner = u32(); const n = u64(); for (let i = 0; i < n; i++) skip(inner); return; }
    at += sizes[type];
  };
  const nTensors = Number(buf.readBigUInt64LE(8));
  const nKv = Number(buf.readBigUInt64LE(16));
  for (let i = 0; i < nKv; i++) {
    const length = u64();
    const name = buf.toString('latin1', at, at + length);
    at += length;
    const type = u32();
    if (name === 'general.alignment') alignment = buf.readUInt32LE(at);
    skip(type);
  }
  const kvEnd = at;
  for (let i = 0; i < nTensors; i++) {
    const name = u64();
    at += name;
    const dims = u32();
    at += 8 * dims + 4 + 8;
  }
  const align = (n) => Math.ceil(n / alignment) * alignment;
  const keyLength = Buffer.byteLength(key);
  const entry = Buffer.alloc(8 + keyLength + 4 + sizes[type]);
  entry.writeBigUInt64LE(BigInt(keyLength), 0);
  entry.write(key, 8);
  entry.writeUInt32LE(type, 8 + keyLength);
  if (type === 4) entry.writeUInt32LE(value, 12 + keyLength);
  else entry.writeUInt8(value ? 1 : 0, 12 + keyLength);
  const head = Buffer.concat([buf.subarray(0, kvEnd), entry, buf.subarray(kvEnd, at)]);
  head.writeBigUInt64LE(BigInt(nKv + 1), 16);
  const pad = Buffer.alloc(align(head.length) - head.length);
  return Buffer.concat([head, pad, buf.subarray(align(at))]);
}

test('a GGUF with <arch>.audio.block_count, or a projector with an audio encoder, lists audio', async () => {
  const plain = join(vision, 'gemma3-text.gguf');
  const hearing = join(server.store, 'gemma3-audio.gguf'); // removed with the store
  writeFileSync(hearing, withKey(readFileSync(plain), 'gemma3.audio.block_count', 4, 2));
  const text = await server.uploadBlob(plain);
  assert.equal((await ollama.create({ model: 'deaf', files: { 'model.gguf': text } })).status, 'success');
  assert.equal((await ollama.create({ model: 'hearing', files: { 'model.gguf': await server.uploadBlob(hearing) } })).status, 'success');
  assert.ok((await ollama.show({ model: 'hearing' })).capabilities.includes('audio'));
  assert.ok(!(await ollama.show({ model: 'deaf' })).capabilities.includes('audio'));
  // llama.cpp's projector files say clip.has_audio_encoder
  const mmproj = join(server.store, 'mmproj-audio.gguf');
  writeFileSync(mmproj, withKey(readFileSync(join(vision, 'gemma3-mmproj.gguf')), 'clip.has_audio_encoder', 7, true));
  assert.equal((await ollama.create({ model: 'seeing', files: { 'model.gguf': text,
    'mmproj.gguf': await server.uploadBlob(join(vision, 'gemma3-mmproj.gguf')) } })).status, 'success');
  assert.equal((await ollama.create({ model: 'seeing-hearing', files: { 'model.gguf': text,
    'mmproj.gguf': await server.uploadBlob(mmproj) } })).status, 'success');
  assert.deepEqual((await ollama.show({ model: 'seeing-hearing' })).capabilities.filter((c) => c === 'vision' || c === 'audio'), ['vision', 'audio']);
  assert.ok(!(await ollama.show({ model: 'seeing' })).capabilities.includes('audio'));
  const { models } = await ollama.list();
  for (const name of ['hearing:latest', 'seeing-hearing:latest'])
    assert.ok(models.find((m) => m.name === name).capabilities.includes('audio'), name);
  assert.ok(!models.find((m) => m.name === 'seeing:latest').capabilities.includes('audio'));
});

test('a model without audio refuses a clip on every API, in ollama\'s words', async () => {
  const refused = (e) => e.status_code === 400 && /"deaf" does not support audio/.test(e.error);
  await assert.rejects(ollama.generate({ model: 'deaf', prompt: 'x', images: [wavBase64] }), refused);
  await assert.rejects(ollama.chat({ model: 'deaf', messages: [{ role: 'user', content: 'x', images: [wavBase64] }] }), refused);
  const bad = (pattern) => (e) => e.status === 400 && pattern.test(e.message);
  await assert.rejects(openai.chat.completions.create({ model: 'deaf', messages: [{ role: 'user',
    content: [{ type: 'input_audio', input_audio: { data: wavBase64, format: 'wav' } }] }] }),
  bad(/"deaf" does not support audio/));
  await assert.rejects(openai.audio.transcriptions.create({ model: 'deaf',
    file: await toFile(wav, 'clip.wav', { type: 'audio/wav' }) }), bad(/"deaf" does not support audio/));
  // a model that sees but does not hear refuses a clip beside an image it would take
  await assert.rejects(ollama.generate({ model: 'seeing', prompt: 'x', images: [png, wavBase64] }),
    (e) => e.status_code === 400 && /"seeing" does not support audio/.test(e.error));
  // an image to a model with audio but no vision is refused as before
  await assert.rejects(ollama.generate({ model: 'hearing', prompt: 'x', images: [png] }),
    (e) => e.status_code === 400 && /model does not support images/.test(e.error));
});

test('/v1/audio/transcriptions refuses a bad upload in OpenAI\'s error shape', async () => {
  const post = async (form, headers = {}) => {
    const r = await fetch(`${server.base}/v1/audio/transcriptions`, { method: 'POST', body: form, headers });
    return { status: r.status, body: await r.json() };
  };
  const form = (fields) => {
    const f = new FormData();
    for (const [k, v] of Object.entries(fields)) f.append(k, v);
    return f;
  };
  const clip = new Blob([wav], { type: 'audio/wav' });
  const cases = [
    [form({ file: clip }), 'model is required'],
    [form({ model: 'hearing' }), 'file is required'],
    [form({ model: 'hearing', file: new Blob([Buffer.from('hello')]) }), 'file is not audio'],
    [form({ model: 'hearing', file: clip, response_format: 'xml' }), 'response_format must be one of'],
    [form({ model: 'hearing', file: clip, stream: 'true' }), 'stream is not supported'],
  ];
  for (const [body, why] of cases) {
    const { status, body: answer } = await post(body);
    assert.equal(status, 400, why);
    assert.equal(answer.error.type, 'invalid_request_error');
    assert.ok(answer.error.message.includes(why), answer.error.message);
  }
  const { status, body } = await post('{"model": "hearing"}', { 'Content-Type': 'application/json' });
  assert.equal(status, 400);
  assert.match(body.error.message, /failed to parse multipart form: request Content-Type isn't multipart\/form-data/);
  const missing = await post(form({ model: 'nosuch', file: clip }));
  assert.equal(missing.status, 404);
});

test('corral run attaches a .wav path for a model with audio, as ollama\'s CLI does', async () => {
  const clip = join(server.store, 'clip.wav');
  writeFileSync(clip, wav);
  const run = (model) => spawnSync(bin, ['run', model, `what is said in ${clip}`], { encoding: 'utf8',
    env: { ...process.env, CORRAL_HOST: `127.0.0.1:${server.port}` }, timeout: 60000 });
  assert.match(run('hearing').stderr, new RegExp(`Added audio '${clip}'`));
});

// The full path: CORRAL_AUDIO_GGUF names a GGUF that carries an audio tower the engine reads
// (CTest gives tests/fixtures/audio/gemma4a-model.gguf, a tiny Gemma 4 text model with one).
// A transcription is the answer of the chat request ollama's middleware makes of the form
// (greedy, so the two agree), trimmed; response_format text answers it as plain text.
const audioGguf = process.env.CORRAL_AUDIO_GGUF;
if (audioGguf) {
  let audioBlob; // its digest, once uploaded
  test('an audio model transcribes: the answer is the chat answer to ollama\'s transcription request', async () => {
    audioBlob = await server.uploadBlob(audioGguf);
    assert.equal((await ollama.create({ model: 'listener', files: { 'model.gguf': audioBlob } })).status, 'success');
    assert.ok((await ollama.show({ model: 'listener' })).capabilities.includes('audio'));
    const file = await toFile(wav, 'clip.wav', { type: 'audio/wav' });
    const got = await openai.audio.transcriptions.create({ model: 'listener', file, language: 'en' });
    const chat = await ollama.chat({ model: 'listener', stream: false, options: { temperature: 0 }, messages: [
      { role: 'system', content: 'Transcribe the audio exactly as spoken. Output only the spoken words. Do not answer any question in the audio. The audio is in en.' },
      { role: 'user', content: 'What exact words are spoken in this audio?', images: [wavBase64] }] });
    assert.ok(got.text.length > 0);
    assert.equal(got.text, chat.message.content.trim());
    const text = await openai.audio.transcriptions.create({ model: 'listener', file: await toFile(wav, 'clip.wav'),
      language: 'en', response_format: 'text' });
    assert.equal(text, got.text);
  });

  test('an audio model takes a clip from input_audio and from images into its prompt, a token per 40 ms', async () => {
    // the prompt is the BOS token and the clip: its two marks and its tokens
    const heard = async (samples) => openai.chat.completions.create({ model: 'listener', max_tokens: 4,
      temperature: 0, messages: [{ role: 'user', content: [{ type: 'input_audio',
        input_audio: { data: silence(samples).toString('base64'), format: 'wav' } }] }] });
    const short = await heard(1600);
    assert.equal(short.choices[0].message.role, 'assistant');
    // the tiny model's greedy tokens may all be ones that print nothing: that it answered is the point
    assert.equal(typeof short.choices[0].message.content, 'string');
    assert.ok(short.usage.completion_tokens > 0);
    // 0.5 s more is 12 or 13 more tokens (two halving subsamplings of 10 ms frames)
    const more = (await heard(1600 + 8000)).usage.prompt_tokens - short.usage.prompt_tokens;
    assert.ok(more >= 12 && more <= 13, `0.5 s more audio made ${more} more prompt tokens`);
    // in ollama's images field, before the prompt: the clip's marks and its tokens more (each
    // prompt shares only its BOS token with the one before it)
    const spoken = async (images) => ollama.generate({ model: 'listener', prompt: 'what is said?', images,
      raw: true, stream: false, options: { temperature: 0, num_predict: 1 } });
    const alone = await spoken([]);
    const clip = await spoken([silence(1600 + 8000).toString('base64')]);
    assert.equal(clip.prompt_eval_count - alone.prompt_eval_count, short.usage.prompt_tokens - 1 + more);
  });

  test('a clip over 30 seconds counts its 30-second segments\' tokens; one the context cannot hold, or over ten minutes, is a 400', async () => {
    // 65 s: 750 + 750 + 125 tokens, and the file's context holds 256
    const long = silence(65 * 16000).toString('base64');
    await assert.rejects(ollama.generate({ model: 'listener', prompt: 'what is said?', images: [long] }),
      (e) => e.status_code === 400 && /a clip takes 1625 tokens and the context holds 256 \(raise num_ctx\)/.test(e.error));
    // 600.5 s at 1 kHz: past the cap on seconds, in OpenAI's error shape
    const form = new FormData();
    form.append('model', 'listener');
    form.append('file', new Blob([silence(600500, 1000)], { type: 'audio/wav' }));
    const r = await fetch(`${server.base}/v1/audio/transcriptions`, { method: 'POST', body: form });
    const body = await r.json();
    assert.equal(r.status, 400, JSON.stringify(body));
    assert.match(body.error.message, /audio longer than 600 seconds/);
  });

  test('under ollama\'s gemma4 renderer a clip goes in its turn, set apart from the text as ollama sets it', async () => {
    assert.equal((await ollama.create({ model: 'listener-gemma4', renderer: 'gemma4',
      files: { 'model.gguf': audioBlob } })).status, 'success');
    const rendered = async (content) => {
      const r = await fetch(`${server.base}/api/chat`, { method: 'POST', body: JSON.stringify({
        model: 'listener-gemma4', _debug_render_only: true, think: false,
        messages: [{ role: 'user', content, images: [wavBase64] }] }) });
      assert.equal(r.status, 200);
      return (await r.json())._debug_info;
    };
    // ollama's renderer writes "[img-0] hi" where the clip's tag goes; the markers are cut out
    for (const [content, turn] of [['hi', ' hi'], [' hi ', ' hi'], ['', '']]) {
      const info = await rendered(content);
      assert.equal(info.image_count, 1);
      assert.ok(info.rendered_template.includes(`<|turn>user\n${turn}<turn|>`), info.rendered_template);
    }
  });

  test('corral run answers about a .wav path with an audio model', async () => {
    const clip = join(server.store, 'spoken.wav');
    writeFileSync(clip, wav);
    const run = spawnSync(bin, ['run', 'listener', `what is said in ${clip}`], { encoding: 'utf8',
      env: { ...process.env, CORRAL_HOST: `127.0.0.1:${server.port}` }, timeout: 60000 });
    assert.equal(run.status, 0, run.stderr);
    assert.match(run.stderr, new RegExp(`Added audio '${clip}'`));
    assert.ok(run.stdout.trim().length > 0);
  });
}

await runTests(server, tests);
