// Images against num_batch and num_ctx, through a real `corral serve` and the published
// `ollama` client, with the tiny gemma3 and qwen2.5-vl fixtures: an image longer than
// num_batch answers as with the default batch; a chat longer than num_ctx drops its oldest
// messages with their images (each image counted at its tokens), keeping the system and last
// messages, exactly as the explicitly shortened chat answers; a prompt with images is never
// cut: one the context cannot hold is a 400 naming the numbers, streamed or not, on chat and
// generate (a generate's context counted), with truncate or without. Run by CTest: node
// vision_limits.test.mjs (env CORRAL_BIN, CORRAL_FIXTURES).
import { join } from 'node:path';
import { readFileSync } from 'node:fs';
import assert from 'node:assert/strict';
import { Ollama } from 'ollama';
import { CorralServer, fixtures, runTests } from './harness.mjs';

const server = await CorralServer.create();
const tests = [];
const test = (name, fn) => tests.push({ name, fn });
const ollama = new Ollama({ host: server.base });

const vision = join(fixtures, 'vision');
const png = readFileSync(join(vision, 'square.png')).toString('base64'); // 9 qwen tokens, 16 gemma3
const wide = readFileSync(join(vision, 'wide.png')).toString('base64'); // 18 qwen tokens
const greedy = { temperature: 0, num_predict: 8, num_ctx: 512 };
const qwenTemplate = '{{ range .Messages }}<|im_start|>{{ .Role }}\n{{ .Content }}<|im_end|>\n{{ end }}<|im_start|>assistant\n';
const tooLong = (pattern) => (e) => e.status_code === 400 && /exceeds the context length/.test(e.error) &&
  pattern.test(e.error);

// A streamed answer read to its end (a 400 rejects before any part).
async function streamed(request) {
  let text = '';
  for await (const part of await request) text += part.message ? part.message.content : part.response;
  return text;
}

test('models: gemma3 and qwen2.5-vl with their projectors', async () => {
  const files = async (model, mmproj) => ({ 'model.gguf': await server.uploadBlob(join(vision, model)),
    'mmproj.gguf': await server.uploadBlob(join(vision, mmproj)) });
  await ollama.create({ model: 'gemma3v', files: await files('gemma3-text.gguf', 'gemma3-mmproj.gguf') });
  await ollama.create({ model: 'qwenv', files: await files('qwen25vl-text.gguf', 'qwen25vl-mmproj.gguf'),
    template: qwenTemplate });
});

test('an image longer than num_batch answers as with the default batch', async () => {
  // gemma3's 16 image tokens see each other: one batch, grown for them
  const ask = (options) => ollama.generate({ model: 'gemma3v', prompt: '[img]Describe the picture.',
    images: [png], options: { ...greedy, ...options } });
  const large = await ask({}), small = await ask({ num_batch: 4 });
  assert.equal(small.response, large.response);
  assert.deepEqual(small.context, large.context);
  assert.equal(small.prompt_eval_count, 34);
  // qwen2.5-vl's 18 causal ones go through batches of 4, their positions kept
  const messages = [{ role: 'user', content: '[img]Describe.', images: [wide] }];
  const qLarge = await ollama.chat({ model: 'qwenv', messages, options: greedy });
  const qSmall = await ollama.chat({ model: 'qwenv', messages, options: { ...greedy, num_batch: 4 } });
  assert.equal(qSmall.message.content, qLarge.message.content);
  assert.equal(await streamed(ollama.chat({ model: 'qwenv', messages, stream: true,
    options: { ...greedy, num_batch: 4 } })), qLarge.message.content);
});

// A system message, two turns with an image each, and a last question. Its suffixes take
// (system included) 142 tokens from the first user message on, 107 from the first answer,
// 88 from the second user message, 63 and 46.
const system = { role: 'system', content: 'Be brief.' };
const turns = [system,
  { role: 'user', content: 'Describe.', images: [wide] }, { role: 'assistant', content: 'A wide one.' },
  { role: 'user', content: 'And this?', images: [png] }, { role: 'assistant', content: 'A square.' },
  { role: 'user', content: 'Which is larger?' }];
const NUM_CTX = 100; // the suffix from the second user message is the longest under it
const small = { ...greedy, num_ctx: NUM_CTX };

test('a chat longer than num_ctx drops its oldest messages with their images', async () => {
  const kept = [system, ...turns.slice(3)];
  const shortened = await ollama.chat({ model: 'qwenv', messages: kept, options: small, truncate: false });
  // one message more does not fit: the image tokens are what make it too long
  await assert.rejects(ollama.chat({ model: 'qwenv', messages: [system, ...turns.slice(2)], options: small,
    truncate: false }), tooLong(/107 tokens \(9 of them for 1 image\) and the context holds 100/));
  const r = await ollama.chat({ model: 'qwenv', messages: turns, options: small });
  assert.equal(r.message.content, shortened.message.content);
  assert.equal(await streamed(ollama.chat({ model: 'qwenv', messages: turns, options: small, stream: true })),
    shortened.message.content);
});

test('a last message whose images cannot fit is a 400 naming the numbers, streamed or not', async () => {
  const last = [system, { role: 'user', content: 'Compare.', images: [wide, png] }];
  const options = { ...greedy, num_ctx: 32 };
  const numbers = /the prompt takes \d+ tokens \(27 of them for 2 images\) and the context holds 32/;
  await assert.rejects(ollama.chat({ model: 'qwenv', messages: last, options }), tooLong(numbers));
  await assert.rejects(streamed(ollama.chat({ model: 'qwenv', messages: last, options, stream: true })),
    tooLong(numbers));
  await assert.rejects(ollama.chat({ model: 'qwenv', messages: [...turns.slice(0, 5), last[1]], options }),
    tooLong(numbers));
  // an image larger than the whole context
  await assert.rejects(ollama.generate({ model: 'gemma3v', prompt: 'x', images: [png],
    options: { ...greedy, num_ctx: 16 } }), tooLong(/an image takes 16 tokens and the context holds 16/));
  // more images than the runner takes in one prompt
  await assert.rejects(ollama.generate({ model: 'gemma3v', prompt: 'x', images: Array(17).fill(png),
    options: greedy }), (e) => e.status_code === 400 && /at most 16 images per request, not 17/.test(e.error));
});

test('generate: images are never truncated, with truncate or without; a context counts', async () => {
  const prompt = '[img]Describe the picture.'; // 34 tokens with its image
  const options = { ...greedy, num_ctx: 34 };
  for (const truncate of [true, false]) {
    await assert.rejects(ollama.generate({ model: 'gemma3v', prompt, images: [png], options, truncate }),
      tooLong(/the prompt takes 34 tokens \(16 of them for 1 image\) and the context holds 34/));
    await assert.rejects(streamed(ollama.generate({ model: 'gemma3v', prompt, images: [png], options,
      truncate, stream: true })), tooLong(/34 tokens/));
  }
  const fits = await ollama.generate({ model: 'gemma3v', prompt, images: [png], options: { ...options, num_ctx: 35 } });
  assert.equal(fits.prompt_eval_count, 34);
  // the earlier answer's context (its text ids: the image is not among them) goes first
  const first = await ollama.generate({ model: 'gemma3v', prompt, images: [png], options: { ...greedy, num_ctx: 64 } });
  const n = first.context.length + 33; // and the prompt again, without BOS
  await assert.rejects(ollama.generate({ model: 'gemma3v', prompt, images: [png], context: first.context,
    options: { ...greedy, num_ctx: n } }), tooLong(new RegExp(`takes ${n} tokens`)));
  const next = await ollama.generate({ model: 'gemma3v', prompt, images: [png], context: first.context,
    options: { ...greedy, num_ctx: n + 1 } });
  assert.equal(next.eval_count, 8);
});

await runTests(server, tests);
