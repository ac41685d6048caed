// A small Markdown renderer for model answers that builds DOM nodes and sets only
// textContent: nothing a model writes is ever parsed as HTML, so it cannot inject markup or
// scripts. Covers what chat answers use: fenced code (with a copy button), headings, lists,
// block quotes, paragraphs, inline code, bold, italic and http(s) links.
'use strict';

window.renderMarkdown = (function () {
  const inlinePattern = /(`+)([\s\S]*?[^`])\1(?!`)|\*\*([^*]+)\*\*|__([^_]+)__|\*([^*\s][^*]*)\*|_([^_\s][^_]*)_|\[([^\]]+)\]\((https?:\/\/[^\s)]+)\)/g;

  function appendInline(parent, text) {
    let last = 0;
    for (const m of text.matchAll(inlinePattern)) {
      if (m.index > last) parent.append(text.slice(last, m.index));
      let node;
      if (m[1]) { node = document.createElement('code'); node.textContent = m[2]; }
      else if (m[3] || m[4]) { node = document.createElement('strong'); appendInline(node, m[3] || m[4]); }
      else if (m[5] || m[6]) { node = document.createElement('em'); appendInline(node, m[5] || m[6]); }
      else {
        node = document.createElement('a');
        node.href = m[8];
        node.rel = 'noopener noreferrer';
        node.target = '_blank';
        node.textContent = m[7];
      }
      parent.append(node);
      last = m.index + m[0].length;
    }
    if (last < text.length) parent.append(text.slice(last));
  }

  function codeBlock(lines, language) {
    const pre = document.createElement('pre');
    const code = document.createElement('code');
    if (language) code.dataset.language = language;
    code.textContent = lines.join('\n');
    const copy = document.createElement('button');
    copy.className = 'copy';
    copy.type = 'button';
    copy.textContent = 'Copy';
    copy.addEventListener('click', async () => {
      try {
        await navigator.clipboard.writeText(code.textContent);
        copy.textContent = 'Copied';
      } catch {
        copy.textContent = 'Copy failed';
      }
      setTimeout(() => { copy.textContent = 'Copy'; }, 1500);
    });
    pre.append(copy, code);
    return pre;
  }

  // text → a DocumentFragment. An unterminated fence (an answer still streaming) renders as
  // code up to the end.
  return function renderMarkdown(text) {
    const out = document.createDocumentFragment();
    const lines = text.replace(/\r\n?/g, '\n').split('\n');
    let paragraph = [];
    let list = null;
    const flushParagraph = () => {
      if (!paragraph.length) return;
      const p = document.createElement('p');
      paragraph.forEach((line, i) => {
        if (i) p.append(document.createElement('br'));
        appendInline(p, line);
      });
      out.append(p);
      paragraph = [];
    };
    const endList = () => { list = null; };
    for (let i = 0; i < lines.length; i++) {
      const line = lines[i];
      const fence = line.match(/^\s*(```+|~~~+)\s*([\w+-]*)/);
      if (fence) {
        flushParagraph(); endList();
        const body = [];
        for (i++; i < lines.length && !lines[i].trim().startsWith(fence[1]); i++) body.push(lines[i]);
        out.append(codeBlock(body, fence[2]));
        continue;
      }
      const heading = line.match(/^(#{1,6})\s+(.*)$/);
      const item = line.match(/^\s*([-*+]|\d+[.)])\s+(.*)$/);
      const quote = line.match(/^>\s?(.*)$/);
      if (heading) {
        flushParagraph(); endList();
        const h = document.createElement(`h${Math.min(heading[1].length + 2, 6)}`);
        appendInline(h, heading[2]);
        out.append(h);
      } else if (item) {
        flushParagraph();
        const ordered = /\d/.test(item[1]);
        if (!list || (list.tagName === 'OL') !== ordered) {
          list = document.createElement(ordered ? 'ol' : 'ul');
          out.append(list);
        }
        const li = document.createElement('li');
        appendInline(li, item[2]);
        list.append(li);
      } else if (quote) {
        flushParagraph(); endList();
        const q = document.createElement('blockquote');
        appendInline(q, quote[1]);
        out.append(q);
      } else if (!line.trim()) {
        flushParagraph(); endList();
      } else {
        endList();
        paragraph.push(line);
      }
    }
    flushParagraph();
    return out;
  };
})();
