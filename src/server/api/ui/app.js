// Corral's chat page: conversations kept in this browser (localStorage), the installed models
// from /api/tags, pulls through /api/pull and answers streamed from /api/chat, all on this
// server's own API. Errors from the server are shown in the page.
'use strict';

const $ = (id) => document.getElementById(id);
const STORE_KEY = 'corral.chats.v1';
const CURRENT_KEY = 'corral.current';
const API_KEY_KEY = 'corral.apiKey';

let chats = [];
let current = null;          // the chat shown
let models = [];             // /api/tags entries
const capabilities = {};     // model name → its /api/show capabilities
let running = null;          // { controller, message } while an answer streams

// ---- storage ----

function load() {
  try { chats = JSON.parse(localStorage.getItem(STORE_KEY)) || []; } catch { chats = []; }
  current = chats.find((c) => c.id === localStorage.getItem(CURRENT_KEY)) || chats[0] || newChat();
  $('key-input').value = localStorage.getItem(API_KEY_KEY) || '';
}

function save() {
  try {
    localStorage.setItem(STORE_KEY, JSON.stringify(chats));
    localStorage.setItem(CURRENT_KEY, current.id);
  } catch (e) {
    showError(`Could not keep the conversation in this browser: ${e.message}`);
  }
}

function newChat() {
  const chat = { id: `${Date.now().toString(36)}${Math.random().toString(36).slice(2, 7)}`,
    title: 'New chat', model: current ? current.model : '', system: '', temperature: '',
    numCtx: '', maxTokens: '', messages: [] };
  chats.unshift(chat);
  return chat;
}

// ---- the server's API ----

function headers() {
  const h = { 'Content-Type': 'application/json' };
  const key = $('key-input').value.trim();
  if (key) h.Authorization = `Bearer ${key}`;
  return h;
}

async function api(path, body, signal) {
  const response = await fetch(path, body === undefined ? { headers: headers() }
    : { method: 'POST', headers: headers(), body: JSON.stringify(body), signal });
  if (!response.ok) {
    let message = `${response.status} ${response.statusText}`;
    try { message = (await response.json()).error || message; } catch { /* not JSON */ }
    if (response.status === 401) message += ' (set the API key in Settings)';
    if (response.status === 503) message = `The server is busy: ${message}`;
    throw new Error(message);
  }
  return response;
}

// The objects of an NDJSON stream, as they arrive.
async function* ndjson(response) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffered = '';
  for (;;) {
    const { value, done } = await reader.read();
    buffered += decoder.decode(value || new Uint8Array(), { stream: !done });
    let newline;
    while ((newline = buffered.indexOf('\n')) >= 0) {
      const line = buffered.slice(0, newline).trim();
      buffered = buffered.slice(newline + 1);
      if (line) yield JSON.parse(line);
    }
    if (done) break;
  }
  if (buffered.trim()) yield JSON.parse(buffered);
}

// ---- errors ----

function showError(message) {
  $('error').textContent = message;
  $('error').hidden = false;
}

function clearError() { $('error').hidden = true; }

// ---- models and pulls ----

function formatSize(bytes) {
  const units = ['B', 'KB', 'MB', 'GB', 'TB'];
  let i = 0;
  for (; bytes >= 1000 && i < units.length - 1; i++) bytes /= 1000;
  return `${bytes.toFixed(i ? 1 : 0)} ${units[i]}`;
}

async function refreshModels() {
  try {
    models = (await (await api('/api/tags')).json()).models || [];
  } catch (e) {
    showError(`Could not list the models: ${e.message}`);
    return;
  }
  const select = $('model-select');
  select.replaceChildren();
  if (!models.length) select.append(new Option('No models: pull one', ''));
  for (const m of models) {
    const details = [formatSize(m.size), m.details && m.details.family].filter(Boolean).join(', ');
    select.append(new Option(`${m.name} (${details})`, m.name));
  }
  if (!models.some((m) => m.name === current.model)) current.model = models.length ? models[0].name : '';
  select.value = current.model;
}

async function pull() {
  const name = $('pull-input').value.trim();
  if (!name) return;
  clearError();
  const progress = $('pull-progress');
  const status = $('pull-status');
  progress.hidden = false;
  progress.removeAttribute('value');
  $('pull-button').disabled = true;
  try {
    const response = await api('/api/pull', { model: name, stream: true,
      insecure: $('pull-insecure').checked });
    for await (const update of ndjson(response)) {
      if (update.error) throw new Error(update.error);
      status.textContent = update.status;
      if (update.total) {
        progress.max = update.total;
        progress.value = update.completed || 0;
      }
    }
    progress.max = 1;
    progress.value = 1;
    await refreshModels();
    const bare = name.replace(/^[a-z]+:\/\//i, '');
    const pulled = models.find((m) => [bare, `${bare}:latest`].some((n) =>
      m.name === n || m.name.endsWith(`/${n}`)));
    if (pulled) selectModel(pulled.name);
    $('pull-input').value = '';
  } catch (e) {
    status.textContent = '';
    progress.hidden = true;
    showError(`Pull of ${name} failed: ${e.message}`);
  } finally {
    $('pull-button').disabled = false;
  }
}

function selectModel(name) {
  current.model = name;
  $('model-select').value = name;
  save();
}

async function modelCapabilities(name) {
  if (!capabilities[name]) {
    const show = await (await api('/api/show', { model: name })).json();
    capabilities[name] = show.capabilities || [];
  }
  return capabilities[name];
}

// ---- rendering ----

function renderChatList() {
  const list = $('chat-list');
  list.replaceChildren();
  for (const chat of chats) {
    const li = document.createElement('li');
    li.classList.toggle('current', chat === current);
    const title = document.createElement('button');
    title.className = 'title';
    title.textContent = chat.title;
    title.title = chat.title;
    title.addEventListener('click', () => switchTo(chat));
    const rename = document.createElement('button');
    rename.className = 'small';
    rename.textContent = 'Rename';
    rename.addEventListener('click', () => startRename(li, chat));
    const remove = document.createElement('button');
    remove.className = 'small';
    remove.textContent = 'Delete';
    remove.addEventListener('click', () => deleteChat(chat));
    li.append(title, rename, remove);
    list.append(li);
  }
}

function startRename(li, chat) {
  const input = document.createElement('input');
  input.value = chat.title;
  const finish = (keep) => {
    if (keep && input.value.trim()) chat.title = input.value.trim();
    save();
    renderChatList();
  };
  input.addEventListener('keydown', (e) => {
    if (e.key === 'Enter') finish(true);
    if (e.key === 'Escape') finish(false);
  });
  input.addEventListener('blur', () => finish(true));
  li.replaceChildren(input);
  input.focus();
  input.select();
}

function deleteChat(chat) {
  if (running && current === chat) stop();
  chats = chats.filter((c) => c !== chat);
  if (current === chat) current = chats[0] || newChat();
  save();
  renderAll();
}

function switchTo(chat) {
  if (running) stop();
  current = chat;
  save();
  renderAll();
  $('layout').classList.remove('drawer');
}

function messageElement(message) {
  const div = document.createElement('div');
  div.className = `message ${message.role}`;
  if (message.role === 'assistant') div.dataset.testid = 'message-assistant';
  else div.dataset.testid = 'message-user';
  updateMessageElement(div, message);
  return div;
}

function updateMessageElement(div, message) {
  const parts = [];
  if (message.thinking) {
    const details = document.createElement('details');
    const summary = document.createElement('summary');
    summary.textContent = message.content ? 'Thought' : 'Thinking…';
    const thinking = document.createElement('div');
    thinking.className = 'thinking';
    thinking.textContent = message.thinking;
    details.append(summary, thinking);
    details.open = div.querySelector('details')?.open || false;
    parts.push(details);
  }
  const body = document.createElement('div');
  body.className = 'body';
  if (message.role === 'assistant') body.append(renderMarkdown(message.content));
  else body.textContent = message.content;
  parts.push(body);
  if (message.stopped) {
    const note = document.createElement('div');
    note.className = 'stopped';
    note.textContent = 'stopped';
    parts.push(note);
  }
  div.replaceChildren(...parts);
}

function renderMessages() {
  const box = $('messages');
  box.replaceChildren(...current.messages.map(messageElement));
  box.scrollTop = box.scrollHeight;
}

function renderSettings() {
  $('system-input').value = current.system;
  $('temperature-input').value = current.temperature;
  $('context-input').value = current.numCtx;
  $('max-tokens-input').value = current.maxTokens || '';
}

function renderAll() {
  renderChatList();
  renderMessages();
  renderSettings();
  if (models.some((m) => m.name === current.model)) $('model-select').value = current.model;
  else if (models.length) selectModel(models[0].name);
}

function setRunning(value) {
  running = value;
  $('send-button').hidden = !!value;
  $('stop-button').hidden = !value;
}

// ---- chatting ----

function requestMessages() {
  const messages = current.system ? [{ role: 'system', content: current.system }] : [];
  for (const m of current.messages) {
    if (m.role === 'user' || (m.role === 'assistant' && m.content)) {
      messages.push({ role: m.role, content: m.content });
    }
  }
  return messages;
}

function requestOptions() {
  const options = {};
  const temperature = parseFloat(current.temperature);
  const numCtx = parseInt(current.numCtx, 10);
  const maxTokens = parseInt(current.maxTokens, 10);
  if (!Number.isNaN(temperature)) options.temperature = temperature;
  if (!Number.isNaN(numCtx) && numCtx > 0) options.num_ctx = numCtx;
  if (!Number.isNaN(maxTokens) && maxTokens > 0) options.num_predict = maxTokens;
  return options;
}

async function send() {
  const text = $('prompt-input').value;
  if (!text.trim() || running) return;
  if (!current.model) {
    showError('Choose a model first, or pull one.');
    return;
  }
  clearError();
  $('prompt-input').value = '';
  const chat = current;
  chat.messages.push({ role: 'user', content: text });
  if (chat.title === 'New chat') chat.title = text.trim().slice(0, 40);
  const body = { model: chat.model, messages: requestMessages(), options: requestOptions(), stream: true };
  const message = { role: 'assistant', content: '', thinking: '' };
  chat.messages.push(message);
  save();
  renderChatList();
  renderMessages();
  const div = $('messages').lastElementChild;
  const controller = new AbortController();
  setRunning({ controller, message });
  let frame = 0;
  const redraw = () => {
    if (frame) return;
    frame = requestAnimationFrame(() => {
      frame = 0;
      if (current === chat) {
        updateMessageElement(div, message);
        $('messages').scrollTop = $('messages').scrollHeight;
      }
    });
  };
  try {
    if ((await modelCapabilities(chat.model)).includes('thinking')) body.think = true;
    const response = await api('/api/chat', body, controller.signal);
    for await (const chunk of ndjson(response)) {
      if (chunk.error) throw new Error(chunk.error);
      if (chunk.message) {
        message.content += chunk.message.content || '';
        message.thinking += chunk.message.thinking || '';
        redraw();
      }
    }
  } catch (e) {
    if (e.name === 'AbortError') message.stopped = true;
    else showError(e.message);
    if (!message.content && !message.thinking && !message.stopped) chat.messages.pop();
  } finally {
    setRunning(null);
    save();
    if (current === chat) renderMessages();
  }
}

function stop() {
  if (running) running.controller.abort();
}

// ---- wiring ----

function bind() {
  $('composer').addEventListener('submit', (e) => { e.preventDefault(); send(); });
  $('prompt-input').addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      send();
    }
  });
  $('stop-button').addEventListener('click', stop);
  $('new-chat').addEventListener('click', () => switchTo(newChat()));
  $('model-select').addEventListener('change', (e) => selectModel(e.target.value));
  $('pull-button').addEventListener('click', pull);
  $('pull-input').addEventListener('keydown', (e) => { if (e.key === 'Enter') pull(); });
  $('toggle-sidebar').addEventListener('click', () => $('layout').classList.toggle('drawer'));
  $('toggle-settings').addEventListener('click', () => {
    const panel = $('settings');
    panel.hidden = !panel.hidden;
    $('toggle-settings').setAttribute('aria-expanded', String(!panel.hidden));
  });
  $('system-input').addEventListener('change', (e) => { current.system = e.target.value; save(); });
  $('temperature-input').addEventListener('change', (e) => { current.temperature = e.target.value; save(); });
  $('context-input').addEventListener('change', (e) => { current.numCtx = e.target.value; save(); });
  $('max-tokens-input').addEventListener('change', (e) => { current.maxTokens = e.target.value; save(); });
  $('key-input').addEventListener('change', (e) => {
    localStorage.setItem(API_KEY_KEY, e.target.value.trim());
    refreshModels();
  });
}

load();
bind();
renderAll();
refreshModels().then(renderAll);
