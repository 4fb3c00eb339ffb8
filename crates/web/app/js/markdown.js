// A small Markdown renderer that builds DOM nodes: model text is hostile input, so nothing here
// ever parses HTML. Every piece of text reaches the page through `textContent`, links only
// keep http(s)/mailto targets, and images are shown as links (no remote fetch from model text).
// Covers what models write: headings, paragraphs, emphasis, code spans, fenced code with
// highlighting, lists (nested by indent, task boxes), block quotes, tables, rules, links.

import { highlight } from './highlight.js';

const el = (tag, className, text) => {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
};

/** Renders `source` into a fresh DocumentFragment. */
export function renderMarkdown(source) {
  const fragment = document.createDocumentFragment();
  const lines = String(source ?? '').replace(/\r\n?/g, '\n').split('\n');
  renderBlocks(lines, fragment);
  return fragment;
}

function renderBlocks(lines, parent) {
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    if (/^\s*$/.test(line)) {
      i++;
      continue;
    }
    const fence = line.match(/^(\s*)(`{3,}|~{3,})\s*([\w+#.-]*)/);
    if (fence) {
      const marker = fence[2];
      const body = [];
      i++;
      while (i < lines.length && !lines[i].trimStart().startsWith(marker)) {
        body.push(lines[i].slice(Math.min(fence[1].length, lines[i].length - lines[i].trimStart().length)));
        i++;
      }
      i++;
      parent.append(codeBlock(body.join('\n'), fence[3]));
      continue;
    }
    const heading = line.match(/^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$/);
    if (heading) {
      const node = el(`h${heading[1].length}`);
      inline(heading[2], node);
      parent.append(node);
      i++;
      continue;
    }
    if (/^\s{0,3}([-*_])(\s*\1){2,}\s*$/.test(line)) {
      parent.append(el('hr'));
      i++;
      continue;
    }
    if (/^\s{0,3}>/.test(line)) {
      const body = [];
      while (i < lines.length && /^\s{0,3}>/.test(lines[i])) {
        body.push(lines[i].replace(/^\s{0,3}>\s?/, ''));
        i++;
      }
      const quote = el('blockquote');
      renderBlocks(body, quote);
      parent.append(quote);
      continue;
    }
    if (isTableStart(lines, i)) {
      i = table(lines, i, parent);
      continue;
    }
    if (listMarker(line)) {
      i = list(lines, i, parent);
      continue;
    }
    const body = [];
    while (
      i < lines.length &&
      !/^\s*$/.test(lines[i]) &&
      !/^\s*(`{3,}|~{3,})/.test(lines[i]) &&
      !/^\s{0,3}#{1,6}\s/.test(lines[i]) &&
      !/^\s{0,3}>/.test(lines[i]) &&
      !(body.length && listMarker(lines[i])) &&
      !isTableStart(lines, i)
    ) {
      body.push(lines[i]);
      i++;
    }
    const paragraph = el('p');
    body.forEach((text, n) => {
      if (n > 0) {
        if (/ {2,}$/.test(body[n - 1]) || /\\$/.test(body[n - 1])) paragraph.append(el('br'));
        else paragraph.append(' ');
      }
      inline(text.replace(/\\$/, '').trim(), paragraph);
    });
    parent.append(paragraph);
  }
}

function codeBlock(code, lang) {
  const wrap = el('div', 'code-block');
  const bar = el('div', 'code-bar');
  bar.append(el('span', 'code-lang', lang || 'text'));
  const copy = el('button', 'code-copy', 'Copy');
  copy.type = 'button';
  copy.setAttribute('aria-label', 'Copy code');
  copy.addEventListener('click', () => {
    navigator.clipboard?.writeText(code).then(
      () => {
        copy.textContent = 'Copied';
        setTimeout(() => (copy.textContent = 'Copy'), 1200);
      },
      () => {},
    );
  });
  bar.append(copy);
  const pre = el('pre');
  const node = el('code');
  if (lang) node.dataset.lang = lang;
  node.append(highlight(code, lang));
  pre.append(node);
  wrap.append(bar, pre);
  return wrap;
}

function listMarker(line) {
  return line.match(/^(\s*)([-*+]|\d{1,9}[.)])\s+(.*)$/);
}

function list(lines, start, parent) {
  const first = listMarker(lines[start]);
  const indent = first[1].length;
  const ordered = /\d/.test(first[2]);
  const node = el(ordered ? 'ol' : 'ul');
  if (ordered) {
    const n = parseInt(first[2], 10);
    if (n !== 1) node.start = n;
  }
  let i = start;
  while (i < lines.length) {
    const marker = listMarker(lines[i]);
    if (!marker || marker[1].length !== indent || /\d/.test(marker[2]) !== ordered) break;
    const item = el('li');
    const body = [marker[3]];
    i++;
    while (i < lines.length) {
      const next = lines[i];
      if (/^\s*$/.test(next)) {
        if (i + 1 < lines.length && (lines[i + 1].match(/^\s*/)[0].length > indent)) {
          body.push('');
          i++;
          continue;
        }
        break;
      }
      const nested = listMarker(next);
      if (nested && nested[1].length <= indent) break;
      if (!nested && next.match(/^\s*/)[0].length <= indent && !/^\s{2,}/.test(next)) {
        body.push(next);
        i++;
        continue;
      }
      body.push(next.slice(Math.min(next.match(/^\s*/)[0].length, indent + 2)));
      i++;
    }
    const task = body[0].match(/^\[([ xX])\]\s+(.*)$/);
    if (task) {
      const box = el('input');
      box.type = 'checkbox';
      box.disabled = true;
      box.checked = task[1] !== ' ';
      box.setAttribute('aria-label', box.checked ? 'done' : 'not done');
      item.append(box, ' ');
      body[0] = task[2];
      item.classList.add('task');
    }
    if (body.length === 1) inline(body[0], item);
    else {
      const rest = el('div');
      renderBlocks(body, rest);
      if (rest.childNodes.length === 1 && rest.firstChild.tagName === 'P') {
        item.append(...rest.firstChild.childNodes);
      } else {
        item.append(...rest.childNodes);
      }
    }
    node.append(item);
  }
  parent.append(node);
  return i;
}

function splitRow(line) {
  let row = line.trim();
  if (row.startsWith('|')) row = row.slice(1);
  if (row.endsWith('|') && !row.endsWith('\\|')) row = row.slice(0, -1);
  const cells = [];
  let cell = '';
  let code = false;
  for (let i = 0; i < row.length; i++) {
    const c = row[i];
    if (c === '\\' && row[i + 1] === '|') {
      cell += '|';
      i++;
    } else if (c === '`') {
      code = !code;
      cell += c;
    } else if (c === '|' && !code) {
      cells.push(cell.trim());
      cell = '';
    } else cell += c;
  }
  cells.push(cell.trim());
  return cells;
}

function isTableStart(lines, i) {
  if (i + 1 >= lines.length || !lines[i].includes('|')) return false;
  return /^\s*\|?\s*:?-{1,}:?\s*(\|\s*:?-{1,}:?\s*)*\|?\s*$/.test(lines[i + 1]) && lines[i + 1].includes('-');
}

function table(lines, start, parent) {
  const header = splitRow(lines[start]);
  const aligns = splitRow(lines[start + 1]).map((spec) =>
    spec.startsWith(':') && spec.endsWith(':') ? 'center' : spec.endsWith(':') ? 'right' : spec.startsWith(':') ? 'left' : '',
  );
  const wrap = el('div', 'table-wrap');
  const node = el('table');
  const head = el('thead');
  const row = el('tr');
  header.forEach((text, n) => {
    const th = el('th');
    if (aligns[n]) th.style.textAlign = aligns[n];
    inline(text, th);
    row.append(th);
  });
  head.append(row);
  node.append(head);
  const body = el('tbody');
  let i = start + 2;
  while (i < lines.length && lines[i].includes('|') && !/^\s*$/.test(lines[i])) {
    const tr = el('tr');
    const cells = splitRow(lines[i]);
    header.forEach((_, n) => {
      const td = el('td');
      if (aligns[n]) td.style.textAlign = aligns[n];
      inline(cells[n] ?? '', td);
      tr.append(td);
    });
    body.append(tr);
    i++;
  }
  node.append(body);
  wrap.append(node);
  parent.append(wrap);
  return i;
}

/** Only these link targets survive; anything else (javascript:, data:, vbscript:) is text. */
export function safeUrl(url) {
  const trimmed = String(url).trim();
  if (/^(https?:|mailto:)/i.test(trimmed)) return trimmed;
  if (/^#[\w-]*$/.test(trimmed)) return trimmed;
  return null;
}

const INLINE = [
  // code span
  { re: /^(`+)([\s\S]*?[^`])\1(?!`)/, make: (m) => el('code', null, m[2].replace(/^ (.*) $/, '$1')) },
  // escaped punctuation
  { re: /^\\([!-/:-@[-`{-~])/, make: (m) => document.createTextNode(m[1]) },
  // image: shown as a link, never fetched
  {
    re: /^!\[([^\]]*)\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/,
    make: (m) => link(`image: ${m[1] || m[2]}`, m[2]),
  },
  // link
  {
    re: /^\[((?:[^\][]|\[[^\]]*\])+)\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/,
    make: (m) => link(m[1], m[2], true),
  },
  // autolink
  { re: /^<(https?:\/\/[^\s<>]+)>/, make: (m) => link(m[1], m[1]) },
  { re: /^(https?:\/\/[^\s<>()]*[^\s<>().,;:!?'"*_~])/, make: (m) => link(m[1], m[1]) },
  // strong, emphasis, strike
  { re: /^\*\*(?=\S)([\s\S]*?\S)\*\*/, make: (m) => wrapInline('strong', m[1]) },
  { re: /^__(?=\S)([\s\S]*?\S)__(?!\w)/, make: (m) => wrapInline('strong', m[1]) },
  { re: /^\*(?=[^\s*])([\s\S]*?[^\s*])\*(?!\*)/, make: (m) => wrapInline('em', m[1]) },
  { re: /^_(?=[^\s_])([\s\S]*?[^\s_])_(?!\w)/, make: (m) => wrapInline('em', m[1]) },
  { re: /^~~(?=\S)([\s\S]*?\S)~~/, make: (m) => wrapInline('del', m[1]) },
];

function wrapInline(tag, text) {
  const node = el(tag);
  inline(text, node);
  return node;
}

function link(text, url, markdown) {
  const target = safeUrl(url);
  if (!target) {
    return document.createTextNode(markdown ? `[${text}](${url})` : text);
  }
  const a = el('a');
  a.href = target;
  a.rel = 'noopener noreferrer nofollow';
  a.target = '_blank';
  if (markdown) inline(text, a);
  else a.textContent = text;
  return a;
}

/** Appends the inline Markdown of `text` to `parent`. */
export function inline(text, parent) {
  let rest = String(text);
  let plain = '';
  const flush = () => {
    if (plain) parent.append(document.createTextNode(plain));
    plain = '';
  };
  outer: while (rest.length) {
    const c = rest[0];
    if ('`\\![<h*_~'.includes(c)) {
      const previous = plain.slice(-1);
      for (const rule of INLINE) {
        const m = rest.match(rule.re);
        if (!m) continue;
        // intraword underscores and `http` in the middle of a word stay text
        if ((c === '_' || c === 'h') && previous && /\w/.test(previous)) continue;
        flush();
        parent.append(rule.make(m));
        rest = rest.slice(m[0].length);
        continue outer;
      }
    }
    plain += c;
    rest = rest.slice(1);
  }
  flush();
}
