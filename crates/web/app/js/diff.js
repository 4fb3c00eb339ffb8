// Line diffs for the `write` / `edit` cards: the common prefix and suffix are trimmed, the
// middle is diffed by longest common subsequence (bounded: a huge middle shows as replaced),
// and long unchanged runs fold to three lines of context on each side.

const CONTEXT = 3;
const MAX_CELLS = 4_000_000;

/** The edit script of `oldText` → `newText`: `[{op: ' '|'-'|'+', text, a, b}]`. */
export function diffLines(oldText, newText) {
  const a = oldText ? oldText.replace(/\n$/, '').split('\n') : [];
  const b = newText ? newText.replace(/\n$/, '').split('\n') : [];
  let start = 0;
  while (start < a.length && start < b.length && a[start] === b[start]) start++;
  let endA = a.length;
  let endB = b.length;
  while (endA > start && endB > start && a[endA - 1] === b[endB - 1]) {
    endA--;
    endB--;
  }
  const out = [];
  for (let i = 0; i < start; i++) out.push({ op: ' ', text: a[i], a: i + 1, b: i + 1 });
  const midA = a.slice(start, endA);
  const midB = b.slice(start, endB);
  if (midA.length * midB.length > MAX_CELLS) {
    midA.forEach((text, i) => out.push({ op: '-', text, a: start + i + 1 }));
    midB.forEach((text, i) => out.push({ op: '+', text, b: start + i + 1 }));
  } else {
    const n = midA.length;
    const m = midB.length;
    const table = new Uint32Array((n + 1) * (m + 1));
    for (let i = n - 1; i >= 0; i--) {
      for (let j = m - 1; j >= 0; j--) {
        table[i * (m + 1) + j] =
          midA[i] === midB[j] ? table[(i + 1) * (m + 1) + j + 1] + 1 : Math.max(table[(i + 1) * (m + 1) + j], table[i * (m + 1) + j + 1]);
      }
    }
    let i = 0;
    let j = 0;
    while (i < n || j < m) {
      if (i < n && j < m && midA[i] === midB[j]) {
        out.push({ op: ' ', text: midA[i], a: start + i + 1, b: start + j + 1 });
        i++;
        j++;
      } else if (j < m && (i >= n || table[i * (m + 1) + j + 1] >= table[(i + 1) * (m + 1) + j])) {
        out.push({ op: '+', text: midB[j], b: start + j + 1 });
        j++;
      } else {
        out.push({ op: '-', text: midA[i], a: start + i + 1 });
        i++;
      }
    }
  }
  const shift = endB - endA;
  for (let i = endA; i < a.length; i++) out.push({ op: ' ', text: a[i], a: i + 1, b: i + 1 + shift });
  return out;
}

/** A rendered diff (a table of numbered lines) of one file. */
export function renderDiff(path, oldText, newText) {
  const lines = diffLines(oldText ?? '', newText ?? '');
  const added = lines.filter((l) => l.op === '+').length;
  const removed = lines.filter((l) => l.op === '-').length;
  const wrap = document.createElement('div');
  wrap.className = 'diff';
  const head = document.createElement('div');
  head.className = 'diff-head';
  const name = document.createElement('span');
  name.className = 'diff-path';
  name.textContent = path;
  const stats = document.createElement('span');
  stats.className = 'diff-stats';
  const plus = document.createElement('span');
  plus.className = 'add';
  plus.textContent = `+${added}`;
  const minus = document.createElement('span');
  minus.className = 'del';
  minus.textContent = `−${removed}`;
  stats.append(plus, ' ', minus);
  if (oldText === null || oldText === undefined) stats.append(' (new file)');
  head.append(name, stats);
  const body = document.createElement('div');
  body.className = 'diff-body';
  body.setAttribute('role', 'table');
  body.setAttribute('aria-label', `Changes to ${path}`);
  const keep = new Array(lines.length).fill(false);
  lines.forEach((line, i) => {
    if (line.op !== ' ') for (let k = Math.max(0, i - CONTEXT); k <= Math.min(lines.length - 1, i + CONTEXT); k++) keep[k] = true;
  });
  let skipped = 0;
  const flushSkip = () => {
    if (!skipped) return;
    const row = document.createElement('div');
    row.className = 'diff-line fold';
    row.textContent = `⋯ ${skipped} unchanged line${skipped === 1 ? '' : 's'}`;
    body.append(row);
    skipped = 0;
  };
  lines.forEach((line, i) => {
    if (!keep[i]) {
      skipped++;
      return;
    }
    flushSkip();
    const row = document.createElement('div');
    row.className = `diff-line ${line.op === '+' ? 'add' : line.op === '-' ? 'del' : 'ctx'}`;
    row.setAttribute('role', 'row');
    const num = document.createElement('span');
    num.className = 'ln';
    num.textContent = String(line.op === '-' ? line.a : line.b ?? '');
    const sign = document.createElement('span');
    sign.className = 'sign';
    sign.textContent = line.op === ' ' ? ' ' : line.op === '-' ? '−' : '+';
    const text = document.createElement('span');
    text.className = 'text';
    text.textContent = line.text;
    row.append(num, sign, text);
    body.append(row);
  });
  flushSkip();
  wrap.append(head, body);
  return wrap;
}
