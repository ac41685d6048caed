// What the npm-client integration tests share: a real `corral serve` on a free 127.0.0.1
// port with a temporary store (env CORRAL_BIN, CORRAL_FIXTURES), GGUF uploads through
// /api/blobs, and a sequential test runner that stops the server and removes the store.
import { spawn, execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import assert from 'node:assert/strict';

export const bin = process.env.CORRAL_BIN;
export const fixtures = process.env.CORRAL_FIXTURES;
assert.ok(bin && fixtures, 'CORRAL_BIN and CORRAL_FIXTURES must be set');

const freePort = () => new Promise((resolve) => {
  const s = createServer();
  s.listen(0, '127.0.0.1', () => { const { port } = s.address(); s.close(() => resolve(port)); });
});

export class CorralServer {
  // env: more settings for the server; headers: sent with the harness's own requests.
  static async create({ env = {}, headers = {} } = {}) {
    const s = new CorralServer();
    s.env = env;
    s.headers = headers;
    s.store = mkdtempSync(join(tmpdir(), 'corral-it-'));
    s.port = await freePort();
    s.base = `http://127.0.0.1:${s.port}`;
    return s;
  }

  async start() {
    this.process = spawn(bin, ['serve'], {
      env: { ...process.env, CORRAL_HOST: `127.0.0.1:${this.port}`, CORRAL_MODELS: this.store,
        CORRAL_KEEP_ALIVE: '5m', CORRAL_NUM_PARALLEL: '4', ...this.env },
      stdio: ['ignore', 'inherit', 'inherit'],
    });
    for (let i = 0; i < 100; i++) {
      try { if ((await fetch(this.base)).ok) return; } catch { /* not up yet */ }
      await new Promise((r) => setTimeout(r, 100));
    }
    throw new Error('server did not start');
  }

  async stop() {
    const exited = new Promise((r) => this.process.on('exit', r));
    this.process.kill('SIGTERM');
    await exited;
  }

  get running() { return this.process && this.process.exitCode === null; }

  runnerPids() {
    try {
      return execFileSync('pgrep', ['-f', `runner --model ${this.store}`]).toString().trim().split('\n').filter(Boolean);
    } catch { return []; }
  }

  // POST body as JSON to path; the status and the parsed answer.
  async postJson(path, body) {
    const r = await fetch(`${this.base}${path}`,
      { method: 'POST', body: JSON.stringify(body), headers: this.headers });
    return { status: r.status, json: await r.json() };
  }

  // tiny-tolstoy-f32.gguf uploaded and created as 'tolstoy', then each [name, extra] of
  // variants created through /api/create (extra: the create request's other fields).
  async createTolstoyModels(variants) {
    const digest = await this.uploadBlob(join(fixtures, 'tiny-tolstoy-f32.gguf'));
    for (const [model, extra] of [['tolstoy', { files: { 'model.gguf': digest } }], ...variants]) {
      const r = await this.postJson('/api/create', { model, ...extra, stream: false });
      assert.equal(r.status, 200, JSON.stringify(r.json));
    }
  }

  // Upload a file as a blob (checking HEAD before and after); its digest.
  async uploadBlob(path) {
    const data = readFileSync(path);
    const digest = 'sha256:' + createHash('sha256').update(data).digest('hex');
    const url = `${this.base}/api/blobs/${digest}`;
    const headers = this.headers;
    assert.equal((await fetch(url, { method: 'HEAD', headers })).status, 404);
    assert.equal((await fetch(url, { method: 'POST', body: data, headers })).status, 201);
    assert.equal((await fetch(url, { method: 'HEAD', headers })).status, 200);
    return digest;
  }
}

// The greedy text the reference gives for [case 4] of tiny-tolstoy-reference.txt.
export const expectedCase4 = JSON.parse(
  readFileSync(join(fixtures, 'tiny-tolstoy-reference.txt'), 'utf8')
    .split('[case 4]')[1].match(/\ntext: (".*")/)[1]);

// [case 1] of the tiny-tolstoy reference: its prompt, and the log-softmax of PyTorch's logits
// at its last position (one per token id).
export const case1Prompt = 'Well, Prince, so Genoa and Lucca are now just family estates of the';
export const case1LogSoftmax = (() => {
  const logits = readFileSync(join(fixtures, 'tiny-tolstoy-logits-case1.txt'), 'utf8').split('\n')
    .filter((l) => l && !l.startsWith('#')).map(Number);
  const max = Math.max(...logits);
  const logZ = max + Math.log(logits.reduce((s, x) => s + Math.exp(x - max), 0));
  return logits.map((x) => x - logZ);
})();

// Q:/A: turns after any system text: a chat template the tiny model answers case 4 through.
export const chatTemplate = '{{ range .Messages }}{{ if eq .Role "system" }}{{ .Content }}\n{{ else if eq .Role "user" }}Q: {{ .Content }}\n{{ else }}A: {{ .Content }}\n{{ end }}{{ end }}A:';

// Tools listed up front, calls written as {"name": …, "parameters": …} (bare JSON, as
// llama3.2's template writes them), results as turns of their own.
export const toolsTemplate = `{{- if .Tools }}Tools:{{ range .Tools }} {{ .Function.Name }}{{ end }}
{{ end }}{{ range .Messages }}{{ if eq .Role "user" }}Q: {{ .Content }}
{{ else if eq .Role "tool" }}Result of {{ .ToolName }}: {{ .Content }}
{{ else if eq .Role "assistant" }}A: {{ if .ToolCalls }}{{ range .ToolCalls }}{"name": "{{ .Function.Name }}", "parameters": {{ .Function.Arguments }}}{{ end }}{{ else }}{{ .Content }}{{ end }}
{{ end }}{{ end }}A:`;

// Thinking between "and" and "countess", two words of the greedy answer to case 4's prompt;
// the prompt is the user's text as it is, so it ends in the opening tag.
export const thinkTemplate = '{{ range .Messages }}{{ if eq .Role "assistant" }}{{ if .Thinking }}and {{ .Thinking }} countess{{ end }}{{ .Content }}{{ else }}{{ .Content }}{{ end }}{{ end }}';
// case 4's reference answer split at those tags
export const thought = expectedCase4.split(' countess')[0].trim();
export const answer = expectedCase4.split(' countess')[1].trimStart();

export const weatherTool = {
  type: 'function',
  function: {
    name: 'get_weather', description: 'The weather in a city',
    parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
  },
};

// The only answer this schema allows is the call get_weather({"city": "Paris"}): the tiny
// model cannot choose to call a tool, so a test makes it.
export const callSchema = {
  type: 'object',
  properties: {
    name: { const: 'get_weather' },
    parameters: { type: 'object', properties: { city: { const: 'Paris' } }, required: ['city'] },
  },
  required: ['name', 'parameters'],
};

// Start server, run each { name, fn } in order, stop, clean up, exit 1 on any failure.
export async function runTests(server, tests) {
  let failures = 0;
  try {
    await server.start();
    for (const { name, fn } of tests) {
      try {
        await fn();
        console.log(`ok   ${name}`);
      } catch (e) {
        failures++;
        console.log(`FAIL ${name}\n     ${e.stack || e}`);
      }
    }
  } finally {
    if (server.running) await server.stop();
    rmSync(server.store, { recursive: true, force: true });
  }
  console.log(failures ? `${failures} of ${tests.length} failed` : `all ${tests.length} passed`);
  process.exit(failures ? 1 : 0);
}
