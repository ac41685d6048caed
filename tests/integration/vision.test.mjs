// Images end to end (issue 43): the tiny gemma3, qwen2.5-vl, mistral3, qwen3-vl and minicpm-v
// fixtures imported as ollama's
// CLI sends a text GGUF with its projector, then images through the published clients:
// `ollama` (generate and chat), `openai` (image_url data URLs on chat completions and
// input_image on responses) and `@anthropic-ai/sdk` (base64 image blocks). Where the prompt
// renders as the reference's, the greedy ids are llama.cpp's; a text-only model, remote URLs,
// bad base64 and broken images are 400s. Run by CTest: node vision.test.mjs (env CORRAL_BIN,
// CORRAL_FIXTURES).
import { join } from 'node:path';
import { readFileSync } from 'node:fs';
import { crc32 } from 'node:zlib';
import assert from 'node:assert/strict';
import { Ollama } from 'ollama';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { CorralServer, fixtures, runTests } from './harness.mjs';

const server = await CorralServer.create();
const tests = [];
const test = (name, fn) => tests.push({ name, fn });
const ollama = new Ollama({ host: server.base });
const openai = new OpenAI({ baseURL: `${server.base}/v1`, apiKey: 'unused' });
const anthropic = new Anthropic({ baseURL: server.base, apiKey: 'unused' });

const vision = join(fixtures, 'vision');
const png = readFileSync(join(vision, 'square.png')).toString('base64');
const wide = readFileSync(join(vision, 'wide.png')).toString('base64');
const jpeg = readFileSync(join(vision, 'square-jpeg.jpg')).toString('base64');
// The references' 16 greedy ids (llama.cpp's, EOS ignored).
const greedyIds = (name) => readFileSync(join(vision, `${name}.ref.txt`), 'utf8')
  .match(/^greedy_ids (.*)$/m)[1].split(' ').map(Number);
const greedy = { temperature: 0, num_predict: 16, num_ctx: 512 };
// ollama's template for the qwen fixture: its chat format, the image where [img] is.
const qwenTemplate = '{{ range .Messages }}<|im_start|>{{ .Role }}\n{{ .Content }}<|im_end|>\n{{ end }}<|im_start|>assistant\n';
// gemma3's reference prompt is the image then the text: every message's content in a row.
const rowTemplate = '{{ if .Messages }}{{ range .Messages }}{{ .Content }}{{ end }}{{ else }}{{ .Prompt }}{{ end }}';

test('create takes a text GGUF and its projector from files; show lists vision and projector_info', async () => {
  const files = async (model, mmproj) => ({ 'model.gguf': await server.uploadBlob(join(vision, model)),
    'mmproj.gguf': await server.uploadBlob(join(vision, mmproj)) });
  const gemma = await files('gemma3-text.gguf', 'gemma3-mmproj.gguf');
  const qwen = await files('qwen25vl-text.gguf', 'qwen25vl-mmproj.gguf');
  assert.equal((await ollama.create({ model: 'gemma3v', files: gemma, template: rowTemplate })).status, 'success');
  assert.equal((await ollama.create({ model: 'qwenv', files: qwen, template: qwenTemplate })).status, 'success');
  assert.equal((await ollama.create({ model: 'qwenv-raw', from: 'qwenv', template: '{{ .Prompt }}' })).status, 'success');
  const tolstoy = await server.uploadBlob(join(fixtures, 'tiny-tolstoy-f32.gguf'));
  assert.equal((await ollama.create({ model: 'tolstoy', files: { 'model.gguf': tolstoy } })).status, 'success');
  const show = await ollama.show({ model: 'gemma3v' });
  assert.ok(show.capabilities.includes('vision'), JSON.stringify(show.capabilities));
  assert.equal(show.projector_info['general.architecture'], 'clip');
  assert.ok(!(await ollama.show({ model: 'tolstoy' })).capabilities.includes('vision'));
  const { models } = await ollama.list();
  assert.ok(models.find((m) => m.name === 'qwenv:latest').capabilities.includes('vision'));
  const manifest = JSON.parse(readFileSync(join(server.store, 'manifests/registry.ollama.ai/library/gemma3v/latest'), 'utf8'));
  assert.ok(manifest.layers.some((l) => l.mediaType === 'application/vnd.ollama.image.projector'));
  // a projector that does not fit the model (another width) is refused at create
  await assert.rejects(ollama.create({ model: 'mixed', files: { 'model.gguf': tolstoy,
    'mmproj.gguf': qwen['mmproj.gguf'] } }), (e) => e.status_code === 400 && /mmproj\.gguf/.test(e.error));
  await assert.rejects(ollama.create({ model: 'alone', files: { 'mmproj.gguf': qwen['mmproj.gguf'] } }),
    (e) => e.status_code === 400 && /needs a model/.test(e.error));
});

test('generate ([img] where the reference puts the image) gives the gemma3 reference greedy ids', async () => {
  for (const [image, ref] of [[png, 'gemma3.square'], [wide, 'gemma3.wide'], [jpeg, 'gemma3.square-jpeg']]) {
    const r = await ollama.generate({ model: 'gemma3v', prompt: '[img]Describe the picture.',
      images: [image], options: greedy });
    assert.equal(r.eval_count, 16);
    if (image === png) assert.equal(r.prompt_eval_count, 2 + 16 + 16); // BOS <start_of_image>, the image, the text
    assert.deepEqual(r.context.slice(-16), greedyIds(ref), ref);
  }
});

// ollama's own gemma3 is one GGUF carrying the tower (written by CTest's
// vision_onefile_fixture from the pair): imported alone it is vision-capable without a
// projector layer and answers as the pair does.
test('a single GGUF carrying its own tower (ollama\'s layout) answers as the pair does', async () => {
  const single = await server.uploadBlob(process.env.CORRAL_ONEFILE_GGUF);
  assert.equal((await ollama.create({ model: 'gemma3one', files: { 'model.gguf': single },
    template: rowTemplate })).status, 'success');
  const show = await ollama.show({ model: 'gemma3one' });
  assert.ok(show.capabilities.includes('vision'), JSON.stringify(show.capabilities));
  assert.equal(show.projector_info, undefined);
  assert.equal(show.model_info['gemma3.vision.block_count'], 2);
  const manifest = JSON.parse(readFileSync(join(server.store, 'manifests/registry.ollama.ai/library/gemma3one/latest'), 'utf8'));
  assert.ok(!manifest.layers.some((l) => l.mediaType === 'application/vnd.ollama.image.projector'));
  for (const [image, ref] of [[png, 'gemma3.square'], [wide, 'gemma3.wide']]) {
    const r = await ollama.generate({ model: 'gemma3one', prompt: '[img]Describe the picture.',
      images: [image], options: greedy });
    assert.deepEqual(r.context.slice(-16), greedyIds(ref), ref);
  }
  const pair = await ollama.chat({ model: 'gemma3v', options: greedy,
    messages: [{ role: 'user', content: '[img]Describe the picture.', images: [png] }] });
  const one = await ollama.chat({ model: 'gemma3one', options: greedy,
    messages: [{ role: 'user', content: '[img]Describe the picture.', images: [png] }] });
  assert.equal(one.message.content, pair.message.content);
  // a tower with a tensor of the wrong shape is refused at create, naming it
  const bad = await server.uploadBlob(process.env.CORRAL_ONEFILE_GGUF.replace(/\.gguf$/, '-bad.gguf'));
  await assert.rejects(ollama.create({ model: 'gemma3bad', files: { 'model.gguf': bad } }),
    (e) => e.status_code === 400 && /vision tower.*v\.blk\.1\.attn_q\.weight/.test(e.error));
});

const qwenPrompt = '<|im_start|>user\n[img]Describe.<|im_end|>\n<|im_start|>assistant\n';
let qwenAnswer;

test('ollama\'s single-file qwen25vl (text and tower in one GGUF) answers as the pair does', async () => {
  const single = await server.uploadBlob(process.env.CORRAL_ONEFILE_GGUF.replace('gemma3-single', 'qwen25vl-single'));
  assert.equal((await ollama.create({ model: 'qwenone', files: { 'model.gguf': single },
    template: '{{ .Prompt }}' })).status, 'success');
  assert.ok((await ollama.show({ model: 'qwenone' })).capabilities.includes('vision'));
  for (const [image, ref] of [[png, 'qwen25vl.square'], [wide, 'qwen25vl.wide']]) {
    const r = await ollama.generate({ model: 'qwenone', prompt: qwenPrompt, images: [image], options: greedy });
    assert.deepEqual(r.context.slice(-16), greedyIds(ref), ref);
  }
});

test('generate gives the qwen2.5-vl reference greedy ids for the square and wide PNGs', async () => {
  for (const [image, ref] of [[png, 'qwen25vl.square'], [wide, 'qwen25vl.wide']]) {
    const r = await ollama.generate({ model: 'qwenv-raw', prompt: qwenPrompt, images: [image], options: greedy });
    if (image === png) assert.equal(r.prompt_eval_count, 34); // 25 text tokens and 9 of the image
    assert.deepEqual(r.context.slice(-16), greedyIds(ref), ref);
    if (image === png) qwenAnswer = r.response;
  }
});

// minicpm-v: a qwen2 text model with a "resampler" projector (MiniCPM-V 2.6's layout). Its
// image is <image>, the resampler's 8 tokens, </image>; the reference's prompt is
// "Describe [img] now" with no template around it.
test('minicpm-v (resampler projector) gives the reference greedy ids on generate and chat', async () => {
  const files = { 'model.gguf': await server.uploadBlob(join(vision, 'minicpmv-text.gguf')),
    'mmproj.gguf': await server.uploadBlob(join(vision, 'minicpmv-mmproj.gguf')) };
  assert.equal((await ollama.create({ model: 'minicpmv', files, template: rowTemplate })).status, 'success');
  const show = await ollama.show({ model: 'minicpmv' });
  assert.ok(show.capabilities.includes('vision'), JSON.stringify(show.capabilities));
  assert.equal(show.projector_info['clip.projector_type'], 'resampler');
  const small = readFileSync(join(vision, 'minicpmv-small.png')).toString('base64');
  const want = greedyIds('minicpmv.small');
  const r = await ollama.generate({ model: 'minicpmv', prompt: 'Describe [img] now', images: [small], options: greedy });
  assert.equal(r.prompt_eval_count, 9 + 8 + 4); // "Describe <image>", the image, "</image> now"
  assert.deepEqual(r.context.slice(-16), want);
  const chat = await ollama.chat({ model: 'minicpmv', options: greedy,
    messages: [{ role: 'user', content: 'Describe [img] now', images: [small] }] });
  assert.equal(chat.message.content, r.response);
  const openaiChat = await openai.chat.completions.create({ model: 'minicpmv', temperature: 0, max_tokens: 16,
    messages: [{ role: 'user', content: [{ type: 'text', text: 'Describe ' },
      { type: 'image_url', image_url: { url: `data:image/png;base64,${small}` } }, { type: 'text', text: ' now' }] }] });
  assert.equal(openaiChat.usage.completion_tokens, 16);
  // larger than the tower's 32 x 32: an overview and slices, each <slice> ... </slice>, rows
  // ending in a newline. 40 x 20 is cut without resizing differently in any llama.cpp (its
  // overview is itself, its slices a bicubic resize both versions share): the reference's ids
  const wide40 = readFileSync(join(vision, 'minicpmv-wide.png')).toString('base64');
  const sliced = await ollama.generate({ model: 'minicpmv', prompt: 'Describe [img] now', images: [wide40], options: greedy });
  assert.equal(sliced.prompt_eval_count, 41); // 9 + 8 + "</image><slice>" 2 + 8 + "</slice><slice>" 2 + 8 + 4
  assert.deepEqual(sliced.context.slice(-16), greedyIds('minicpmv.wide'));
  // 96 x 96: a 3 x 3 grid after the overview, as llama.cpp lays it out: the context's text ids
  // (images' tokens are not ids) are "Describe <image>", "</image><slice>", six
  // "</slice><slice>", two "</slice>\n<slice>" and "</slice> now"
  const grid = await ollama.generate({ model: 'minicpmv', prompt: 'Describe [img] now', images: [png], options: greedy });
  const text = grid.context.slice(0, -grid.eval_count);
  assert.deepEqual(text, [35, 286, 66, 81, 72, 65, 68, 220, 307, 308, 309, 310, 309, 310, 309,
    310, 198, 309, 310, 309, 310, 309, 310, 198, 309, 310, 309, 310, 309, 310, 220, 77, 289]);
});

// Mistral Small 3.x's layout (projector pixtral): the merged rows with [IMG_BREAK] between
// them, then the text [IMG_END]; a 40 x 24 PNG is 5 x 3 merged tokens and 2 breaks.
test('a mistral3 text GGUF with its pixtral projector, or ollama\'s single file, gives llama.cpp\'s greedy ids', async () => {
  const files = { 'model.gguf': await server.uploadBlob(join(vision, 'mistral3-text.gguf')),
    'mmproj.gguf': await server.uploadBlob(join(vision, 'mistral3-mmproj.gguf')) };
  assert.equal((await ollama.create({ model: 'mistral3v', files, template: '{{ .Prompt }}' })).status, 'success');
  assert.equal((await ollama.show({ model: 'mistral3v' })).projector_info['clip.projector_type'], 'pixtral');
  const image = readFileSync(join(vision, 'mistral3-wide.png')).toString('base64');
  const r = await ollama.generate({ model: 'mistral3v', prompt: '[INST]Look: [img] What is it?[/INST]',
    images: [image], options: greedy });
  assert.equal(r.prompt_eval_count, 12 + 17 + 17); // the reference's chunks: text, image, text
  assert.deepEqual(r.context.slice(-16), greedyIds('mistral3.wide'));
  // the same pair as ollama's single mistral3 GGUF (test_vision_pixtral writes it): vision
  // without a projector layer, the same answer
  const single = await server.uploadBlob(process.env.CORRAL_ONEFILE_GGUF.replace('gemma3-single', 'mistral3-single'));
  assert.equal((await ollama.create({ model: 'mistral3one', files: { 'model.gguf': single },
    template: '{{ .Prompt }}' })).status, 'success');
  const show = await ollama.show({ model: 'mistral3one' });
  assert.ok(show.capabilities.includes('vision') && !show.projector_info, JSON.stringify(show.capabilities));
  const one = await ollama.generate({ model: 'mistral3one', prompt: '[INST]Look: [img] What is it?[/INST]',
    images: [image], options: greedy });
  assert.equal(one.prompt_eval_count, 46);
  assert.deepEqual(one.context.slice(-16), greedyIds('mistral3.wide'));
});

test('qwen3-vl: a text GGUF with its qwen3vl_merger projector gives the reference greedy ids', async () => {
  const files = { 'model.gguf': await server.uploadBlob(join(vision, 'qwen3vl-text.gguf')),
    'mmproj.gguf': await server.uploadBlob(join(vision, 'qwen3vl-mmproj.gguf')) };
  assert.equal((await ollama.create({ model: 'qwen3v', files, template: '{{ .Prompt }}' })).status, 'success');
  assert.ok((await ollama.show({ model: 'qwen3v' })).capabilities.includes('vision'));
  // 6 + 20 text tokens around 3 x 3 and 4 x 3 merged tokens (the embeddings and logits behind
  // these ids, deepstack rows included, are checked against llama.cpp's in test_vision_qwen3vl)
  for (const [name, tokens] of [['square', 9], ['wide', 12]]) {
    const image = readFileSync(join(vision, `qwen3vl-${name}.png`)).toString('base64');
    const r = await ollama.generate({ model: 'qwen3v', images: [image], options: greedy,
      prompt: '<|im_start|>user\n[img]What is this?<|im_end|>\n<|im_start|>assistant\n' });
    // the second prompt reuses the first's 6 cached tokens before the image
    assert.equal(r.prompt_eval_count, (name === 'square' ? 26 : 20) + tokens, name);
    assert.deepEqual(r.context.slice(-16), greedyIds(`qwen3vl.${name}`), name);
  }
});

test('ollama\'s single-file qwen3vl (tower, deepstack mergers and text in one GGUF) answers as the pair does', async () => {
  const single = await server.uploadBlob(process.env.CORRAL_ONEFILE_GGUF.replace('gemma3-single', 'qwen3vl-single'));
  assert.equal((await ollama.create({ model: 'qwen3one', files: { 'model.gguf': single },
    template: '{{ .Prompt }}' })).status, 'success');
  const show = await ollama.show({ model: 'qwen3one' });
  assert.ok(show.capabilities.includes('vision'));
  assert.equal(show.projector_info, undefined); // its own projector: no projector layer
  for (const name of ['square', 'wide']) {
    const image = readFileSync(join(vision, `qwen3vl-${name}.png`)).toString('base64');
    const r = await ollama.generate({ model: 'qwen3one', images: [image], options: greedy,
      prompt: '<|im_start|>user\n[img]What is this?<|im_end|>\n<|im_start|>assistant\n' });
    assert.deepEqual(r.context.slice(-16), greedyIds(`qwen3vl.${name}`), name);
  }
});

test('chat renders the same prompt and answers the same; the next turn reuses the image', async () => {
  const messages = [{ role: 'user', content: '[img]Describe.', images: [png] }];
  const r = await ollama.chat({ model: 'qwenv', messages, options: greedy });
  assert.equal(r.message.content, qwenAnswer);
  // The next turn keeps the first turn's cells, the image's among them: it evaluates at least
  // 27 tokens fewer than the same turn with the wide image in place of the square one (18
  // tokens of the new image, 9 of the reused one, and the text between them).
  const next = (image) => ollama.chat({ model: 'qwenv', options: greedy, messages: [
    { ...messages[0], images: [image] }, { role: 'assistant', content: 'Sure.' }, { role: 'user', content: 'More.' }] });
  const reused = await next(png), other = await next(wide);
  assert.ok(other.prompt_eval_count - reused.prompt_eval_count >= 27,
    `${reused.prompt_eval_count} vs ${other.prompt_eval_count}`);
  // the same answer streamed, and an image without [img] goes before the text
  let streamed = '';
  for await (const part of await ollama.chat({ model: 'qwenv', messages, options: greedy, stream: true }))
    streamed += part.message.content;
  assert.equal(streamed, r.message.content);
  const front = await ollama.chat({ model: 'qwenv', options: greedy,
    messages: [{ role: 'user', content: 'Describe.', images: [png] }] });
  assert.equal(front.eval_count, 16);
});

test('openai image_url, responses input_image and anthropic image blocks answer as generate does', async () => {
  const ask = async (prompt) => (await ollama.generate({ model: 'gemma3v', prompt, images: [png], options: greedy })).response;
  // OpenAI chat's parts are messages of their own, merged as ollama merges same-role messages
  const merged = await ask('[img]\n\nDescribe the picture.');
  const reference = await ask('[img]Describe the picture.');
  const dataUrl = `data:image/png;base64,${png}`;
  const chat = await openai.chat.completions.create({ model: 'gemma3v', temperature: 0, max_tokens: 16,
    messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: dataUrl } },
      { type: 'text', text: 'Describe the picture.' }] }] });
  assert.equal(chat.choices[0].message.content, merged);
  const resp = await openai.responses.create({ model: 'gemma3v', temperature: 0, max_output_tokens: 16,
    input: [{ role: 'user', content: [{ type: 'input_image', image_url: dataUrl, detail: 'auto' },
      { type: 'input_text', text: 'Describe the picture.' }] }] });
  // Responses' parts and Anthropic's blocks make one message: the image in front of its text,
  // the reference's prompt
  assert.equal(resp.output_text, reference);
  const msg = await anthropic.messages.create({ model: 'gemma3v', max_tokens: 16, temperature: 0,
    messages: [{ role: 'user', content: [{ type: 'image', source: { type: 'base64', media_type: 'image/png', data: png } },
      { type: 'text', text: 'Describe the picture.' }] }] });
  assert.equal(msg.content[0].text, reference);
  assert.equal(msg.usage.input_tokens, 34);
});

test('remote image URLs are 400s, never fetched; a text-only model is a 400 on every API', async () => {
  const bad = (pattern) => (e) => e.status === 400 && pattern.test(e.message);
  await assert.rejects(openai.chat.completions.create({ model: 'gemma3v', messages: [{ role: 'user',
    content: [{ type: 'image_url', image_url: { url: 'http://127.0.0.1:1/a.png' } }] }] }), bad(/image URLs are not currently supported/));
  await assert.rejects(openai.responses.create({ model: 'gemma3v', input: [{ role: 'user',
    content: [{ type: 'input_image', image_url: 'https://example.com/a.png', detail: 'auto' }] }] }), bad(/image URLs are not currently supported/));
  await assert.rejects(anthropic.messages.create({ model: 'gemma3v', max_tokens: 4, messages: [{ role: 'user',
    content: [{ type: 'image', source: { type: 'url', url: 'https://example.com/a.png' } }] }] }), bad(/Only base64 images are supported/));
  const dataUrl = `data:image/png;base64,${png}`;
  await assert.rejects(openai.chat.completions.create({ model: 'tolstoy', messages: [{ role: 'user',
    content: [{ type: 'image_url', image_url: { url: dataUrl } }] }] }), bad(/model does not support images/));
  await assert.rejects(anthropic.messages.create({ model: 'tolstoy', max_tokens: 4, messages: [{ role: 'user',
    content: [{ type: 'image', source: { type: 'base64', media_type: 'image/png', data: png } }] }] }),
  bad(/model does not support images/));
  await assert.rejects(openai.chat.completions.create({ model: 'gemma3v', messages: [{ role: 'user',
    content: [{ type: 'image_url', image_url: { url: 'data:image/png;base64,%%%' } }] }] }), bad(/invalid image data/));
});

test('a text-only model, bad base64 and broken images are 400s; the server stays up', async () => {
  const refused = (pattern) => (e) => e.status_code === 400 && pattern.test(e.error);
  await assert.rejects(ollama.generate({ model: 'tolstoy', prompt: 'x', images: [png] }),
    refused(/model does not support images/));
  await assert.rejects(ollama.chat({ model: 'tolstoy', messages: [{ role: 'user', content: 'x', images: [png] }] }),
    refused(/model does not support images/));
  await assert.rejects(ollama.generate({ model: 'gemma3v', prompt: 'x', images: ['not base64!'] }),
    refused(/invalid image data/));
  const truncated = readFileSync(join(vision, 'square.png')).subarray(0, 200).toString('base64');
  await assert.rejects(ollama.generate({ model: 'gemma3v', prompt: 'x', images: [truncated] }), refused(/image 0/));
  await assert.rejects(ollama.generate({ model: 'gemma3v', prompt: 'x', images: [Buffer.from('hello').toString('base64')] }),
    refused(/image 0/));
  // a PNG header claiming 50,000 x 50,000 pixels is refused before any pixel is allocated
  const chunk = (type, data) => {
    const body = Buffer.concat([Buffer.from(type), data]);
    const out = Buffer.alloc(12 + data.length);
    out.writeUInt32BE(data.length, 0);
    body.copy(out, 4);
    out.writeUInt32BE(crc32(body), 8 + data.length);
    return out;
  };
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(50000, 0);
  ihdr.writeUInt32BE(50000, 4);
  ihdr.set([8, 2, 0, 0, 0], 8);
  const huge = Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk('IHDR', ihdr), chunk('IEND', Buffer.alloc(0))]).toString('base64');
  await assert.rejects(ollama.generate({ model: 'gemma3v', prompt: 'x', images: [huge] }), refused(/image 0/));
  const r = await ollama.generate({ model: 'gemma3v', prompt: '[img]Describe the picture.', raw: true,
    images: [png], options: greedy });
  assert.equal(r.eval_count, 16);
});

await runTests(server, tests);
