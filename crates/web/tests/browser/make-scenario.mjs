// Writes scenario/model.jsonl and scenario/scenario.json: the replayed model of the browser
// tests. dsh names its session in a header, and the replay server binds each new session to
// the next script in first-request order: the suite starts its sessions in this order.
// Run `node make-scenario.mjs` after editing.
import { writeFileSync } from 'node:fs';

export const PROMPTS = {
  markdown: 'Show me some markdown, please.',
  write: 'Create hello.txt with a greeting.',
  escalate: 'Write outside the workspace, with my permission.',
  followup: 'And one more thing.',
  question: 'Ask me which colour to use.',
};

export const XSS = '<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script>';

const usage = (prompt, completion) => ({ prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion });
const words = (text) => text.match(/\S+\s*|\s+/g) || [];

function response(session, index, { reasoning, content, tool_calls = [], finish_reason }) {
  const stream = [];
  for (const piece of words(reasoning || '')) stream.push({ reasoning: piece });
  for (const piece of words(content || '')) stream.push({ content: piece });
  tool_calls.forEach((call, k) => stream.push({ tool_call: k, id: call.id, name: call.name, arguments: call.arguments }));
  return {
    session, route: 'main', index, purpose: 'turn', source: 'authored', kind: 'response',
    reasoning: reasoning || null, content: content || null, tool_calls,
    finish_reason: finish_reason || (tool_calls.length ? 'tool_calls' : 'stop'),
    usage: usage(1800 + index * 400, 120), stream,
  };
}

const markdownAnswer = [
  '# Release notes',
  '',
  'Here is **bold**, *emphasis*, `inline code` and a [link](https://example.com).',
  '',
  `Hostile text stays text: ${XSS} and [a trap](javascript:window.__pwned=3).`,
  '',
  '```rust',
  'fn main() {',
  '    // greet the world',
  '    let name = "dsh";',
  '    println!("hello, {}", name);',
  '}',
  '```',
  '',
  '| crate | owns |',
  '|---|---|',
  '| `dsh-acp` | the editor bridge |',
  '| `dsh-web` | the browser app |',
  '',
  '- [x] stream the answer',
  '- [ ] approve an escalation',
].join('\n');

const entries = [
  response(0, 0, { reasoning: 'The user wants a Markdown sample.', content: markdownAnswer }),
  response(1, 0, {
    reasoning: 'I will write the file.',
    tool_calls: [{ id: 'call_write_1', name: 'write', arguments: JSON.stringify({ file_path: 'hello.txt', content: 'hello\nfrom dsh web\n' }) }],
  }),
  response(1, 1, { content: 'Wrote `hello.txt`.' }),
  response(2, 0, {
    reasoning: 'This needs full access; I will ask.',
    tool_calls: [{
      id: 'call_bash_1', name: 'bash',
      arguments: JSON.stringify({
        command: 'for i in 1 2 3 4 5 6 7 8; do echo tick $i; sleep 0.5; done',
        description: 'Count slowly',
        sandbox_permissions: 'danger-full-access',
        justification: 'the user asked to run outside the sandbox',
      }),
    }],
  }),
  response(2, 1, { content: 'All eight ticks are done.' }),
  response(2, 2, { content: 'Here is the one more thing.' }),
  response(3, 0, {
    tool_calls: [{
      id: 'call_ask_1', name: 'ask_user_question',
      arguments: JSON.stringify({
        questions: [{
          id: 'colour', header: 'Colour', question: 'Which colour should the banner use?',
          options: [{ label: 'Blue (Recommended)', description: 'Calm, and the brand colour' }, { label: 'Red', description: 'Loud' }],
        }],
      }),
    }],
  }),
  response(3, 1, { content: 'Blue it is.' }),
];

const spec = {
  format_version: 1,
  suite: 'web',
  name: 'browser',
  sessions: [
    { session: 0, first_user_text: PROMPTS.markdown },
    { session: 1, first_user_text: PROMPTS.write },
    { session: 2, first_user_text: PROMPTS.escalate },
    { session: 3, first_user_text: PROMPTS.question },
  ],
};

const here = new URL('./scenario/', import.meta.url);
if (process.argv[1] && import.meta.url.endsWith(process.argv[1].split('/').pop())) {
  writeFileSync(new URL('model.jsonl', here), entries.map((e) => JSON.stringify(e)).join('\n') + '\n');
  writeFileSync(new URL('scenario.json', here), JSON.stringify(spec, null, 2) + '\n');
}
