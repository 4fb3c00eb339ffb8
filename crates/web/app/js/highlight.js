// A tiny syntax highlighter: one pass of a tokenizer per language family, emitting text nodes
// and spans (never HTML). Good enough to tell strings, comments, keywords and numbers apart.

const KEYWORDS = {
  c: 'auto break case char const continue default do double else enum extern float for goto if inline int long register return short signed sizeof static struct switch typedef union unsigned void volatile while class public private protected virtual template typename namespace using new delete this true false nullptr include define',
  rust: 'as async await break const continue crate dyn else enum extern false fn for if impl in let loop match mod move mut pub ref return self Self static struct super trait true type unsafe use where while Some None Ok Err',
  js: 'async await break case catch class const continue debugger default delete do else export extends false finally for from function if import in instanceof let new null of return static super switch this throw true try typeof undefined var void while with yield interface type enum implements readonly',
  py: 'and as assert async await break class continue def del elif else except False finally for from global if import in is lambda None nonlocal not or pass raise return True try while with yield self',
  sh: 'if then else elif fi for while until do done case esac in function return export local set unset echo cd exit source alias readonly shift trap',
  go: 'break case chan const continue default defer else fallthrough for func go goto if import interface map package range return select struct switch type var nil true false',
  json: 'true false null',
  sql: 'select from where insert into values update set delete create table drop alter join left right inner outer on group by order having limit and or not null as distinct union',
};

const ALIASES = {
  rs: 'rust', rust: 'rust', js: 'js', javascript: 'js', mjs: 'js', ts: 'js', typescript: 'js', tsx: 'js', jsx: 'js',
  py: 'py', python: 'py', sh: 'sh', bash: 'sh', shell: 'sh', zsh: 'sh', c: 'c', h: 'c', cpp: 'c', 'c++': 'c',
  java: 'c', cs: 'c', csharp: 'c', go: 'go', json: 'json', jsonc: 'json', toml: 'sh', yaml: 'sh', yml: 'sh', sql: 'sql',
};

const cache = new Map();
function keywordSet(family) {
  if (!cache.has(family)) {
    const words = KEYWORDS[family] || '';
    cache.set(family, new Set(family === 'sql' ? words.split(' ').flatMap((w) => [w, w.toUpperCase()]) : words.split(' ')));
  }
  return cache.get(family);
}

function span(kind, text) {
  const node = document.createElement('span');
  node.className = `tok-${kind}`;
  node.textContent = text;
  return node;
}

/** The highlighted nodes of `code` as a DocumentFragment. */
export function highlight(code, lang) {
  const fragment = document.createDocumentFragment();
  const family = ALIASES[String(lang || '').toLowerCase()];
  if (!family || code.length > 200000) {
    fragment.append(document.createTextNode(code));
    return fragment;
  }
  const keywords = keywordSet(family);
  const hashComment = family === 'py' || family === 'sh';
  const slashComment = family !== 'py' && family !== 'sh' && family !== 'sql';
  let plain = '';
  const flush = () => {
    if (plain) fragment.append(document.createTextNode(plain));
    plain = '';
  };
  let i = 0;
  while (i < code.length) {
    const rest = code.slice(i, i + 2);
    const c = code[i];
    let m = null;
    let kind = null;
    if ((slashComment && rest === '//') || (hashComment && c === '#') || (family === 'sql' && rest === '--')) {
      const end = code.indexOf('\n', i);
      m = code.slice(i, end < 0 ? code.length : end);
      kind = 'comment';
    } else if (slashComment && rest === '/*') {
      const end = code.indexOf('*/', i + 2);
      m = code.slice(i, end < 0 ? code.length : end + 2);
      kind = 'comment';
    } else if (c === '"' || c === "'" || (c === '`' && family === 'js')) {
      let j = i + 1;
      while (j < code.length && code[j] !== c && !(code[j] === '\n' && c !== '`')) j += code[j] === '\\' ? 2 : 1;
      m = code.slice(i, Math.min(j + 1, code.length));
      kind = 'string';
    } else if (/[0-9]/.test(c) && !/[\w$]/.test(code[i - 1] || '')) {
      m = code.slice(i).match(/^(0x[0-9a-fA-F_]+|[0-9][0-9_]*(\.[0-9_]+)?([eE][+-]?[0-9]+)?)/)[0];
      kind = 'number';
    } else if (/[A-Za-z_$]/.test(c) && !/[\w$]/.test(code[i - 1] || '')) {
      m = code.slice(i).match(/^[A-Za-z_$][\w$]*/)[0];
      if (keywords.has(m)) kind = 'keyword';
      else if (code[i + m.length] === '(') kind = 'function';
      else if (/^[A-Z]/.test(m) && family !== 'sql') kind = 'type';
    }
    if (m) {
      if (kind) {
        flush();
        fragment.append(span(kind, m));
      } else plain += m;
      i += m.length;
    } else {
      plain += c;
      i++;
    }
  }
  flush();
  return fragment;
}
