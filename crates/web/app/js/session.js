// One session's conversation as the page shows it: ACP `session/update`s folded into message
// blocks, thoughts, tool cards (command and live output, diffs), the plan, usage and the
// command list. Rendering only: the shell (main.js) owns the connection and the composer.

import { renderMarkdown } from './markdown.js';
import { renderDiff } from './diff.js';

const IMAGE_TYPES = new Set(['image/png', 'image/jpeg', 'image/gif', 'image/webp']);

const el = (tag, className, text) => {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
};

const KIND_ICONS = {
  read: '📄', edit: '✎', delete: '🗑', move: '⇄', search: '🔍', execute: '›_', think: '💭', fetch: '🌐', other: '⚙',
};
const STATUS_LABELS = {
  pending: 'waiting', in_progress: 'running', completed: 'done', failed: 'failed',
};

export function imageNode(block, alt) {
  const type = String(block.mimeType || '').toLowerCase();
  if (!IMAGE_TYPES.has(type) || typeof block.data !== 'string' || !/^[A-Za-z0-9+/=\s]*$/.test(block.data)) {
    return el('span', 'notice', '[image not shown]');
  }
  const img = el('img', 'inline-image');
  img.alt = alt || 'image';
  img.loading = 'lazy';
  img.src = `data:${type};base64,${block.data.replace(/\s/g, '')}`;
  return img;
}

/** A streamed Markdown block: text accumulates, and the DOM is rebuilt at most once a frame. */
class TextBlock {
  constructor(className, label) {
    this.text = '';
    this.node = el('div', `msg ${className}`);
    if (label) this.node.setAttribute('aria-label', label);
    this.body = el('div', 'md');
    this.node.append(this.body);
    this.scheduled = false;
  }

  append(text) {
    this.text += text;
    if (this.scheduled) return;
    this.scheduled = true;
    requestAnimationFrame(() => this.flush());
  }

  flush() {
    this.scheduled = false;
    this.body.replaceChildren(renderMarkdown(this.text));
  }
}

class ThoughtBlock {
  constructor() {
    this.text = '';
    this.node = el('details', 'thought');
    const summary = el('summary', null);
    summary.append(el('span', 'thought-label', 'Thinking'));
    this.preview = el('span', 'thought-preview');
    summary.append(this.preview);
    this.body = el('div', 'md');
    this.node.append(summary, this.body);
    this.scheduled = false;
  }

  append(text) {
    this.text += text;
    if (this.scheduled) return;
    this.scheduled = true;
    requestAnimationFrame(() => {
      this.scheduled = false;
      const flat = this.text.replace(/\s+/g, ' ').trim();
      this.preview.textContent = flat.length > 90 ? `${flat.slice(0, 90)}…` : flat;
      if (this.node.open) this.body.replaceChildren(renderMarkdown(this.text));
    });
  }
}

class ToolCard {
  constructor(view, call) {
    this.view = view;
    this.id = call.toolCallId;
    this.call = {};
    this.node = el('details', 'tool');
    this.node.dataset.toolCallId = this.id;
    this.summary = el('summary');
    this.icon = el('span', 'tool-icon');
    this.icon.setAttribute('aria-hidden', 'true');
    this.title = el('span', 'tool-title');
    this.status = el('span', 'tool-status');
    this.summary.append(this.icon, this.title, this.status);
    this.body = el('div', 'tool-body');
    this.input = el('div', 'tool-input');
    this.content = el('div', 'tool-content');
    this.body.append(this.input, this.content);
    this.node.append(this.summary, this.body);
    this.node.addEventListener('toggle', () => {
      if (this.node.open) this.renderContent();
    });
    this.update(call);
  }

  update(fields) {
    for (const [key, value] of Object.entries(fields)) {
      if (value !== undefined && value !== null) this.call[key] = value;
    }
    const call = this.call;
    const kind = call.kind || 'other';
    this.node.dataset.kind = kind;
    this.node.dataset.status = call.status || 'pending';
    this.icon.textContent = KIND_ICONS[kind] || KIND_ICONS.other;
    this.title.textContent = call.title || 'tool call';
    this.status.textContent = STATUS_LABELS[call.status] || call.status || '';
    this.status.className = `tool-status ${call.status || ''}`;
    this.renderInput();
    const diffs = (call.content || []).some((c) => c.type === 'diff');
    // Diffs and running commands are what a person wants to see without a click.
    if ((diffs || kind === 'execute') && !this.userToggled) this.node.open = true;
    if (this.node.open) this.renderContent();
  }

  renderInput() {
    const raw = this.call.rawInput;
    this.input.replaceChildren();
    if (!raw || typeof raw !== 'object') return;
    if (this.call.kind === 'execute' && typeof raw.command === 'string') {
      const pre = el('pre', 'command');
      const code = el('code', null, raw.command);
      pre.append(code);
      pre.setAttribute('aria-label', 'Command');
      this.input.append(pre);
      const facts = [];
      if (raw.sandbox_permissions) facts.push(['mode', raw.sandbox_permissions]);
      if (raw.workdir || raw.cwd) facts.push(['in', raw.workdir || raw.cwd]);
      if (raw.timeout) facts.push(['timeout', `${raw.timeout}`]);
      if (facts.length) {
        const list = el('div', 'facts');
        for (const [k, v] of facts) {
          const fact = el('span', 'fact');
          fact.append(el('b', null, `${k} `), String(v));
          list.append(fact);
        }
        this.input.append(list);
      }
      if (raw.justification) this.input.append(el('p', 'justification', raw.justification));
    }
  }

  renderContent() {
    const parts = [];
    for (const item of this.call.content || []) {
      if (item.type === 'diff') {
        parts.push(renderDiff(this.view.relative(item.path), item.oldText, item.newText));
      } else if (item.type === 'content' && item.content) {
        const block = item.content;
        if (block.type === 'text') {
          const wrap = el('div', 'md tool-text');
          wrap.append(renderMarkdown(block.text));
          parts.push(wrap);
        } else if (block.type === 'image') {
          parts.push(imageNode(block, 'tool image'));
        } else if (block.type === 'resource_link') {
          parts.push(el('div', 'notice', block.uri || block.name || 'resource'));
        }
      } else if (item.type === 'terminal') {
        parts.push(el('div', 'notice', 'output in a terminal'));
      }
    }
    this.content.replaceChildren(...parts);
  }
}

export class SessionView extends EventTarget {
  constructor(id, cwd, scroller) {
    super();
    this.id = id;
    this.cwd = cwd || '';
    // Each session keeps its own rendered conversation, shown or not: updates of a session in
    // the background keep folding into it, and switching back shows it as it is.
    this.container = el('div', 'session-messages');
    this.container.dataset.sessionId = id;
    this.scroller = scroller;
    this.cards = new Map();
    this.current = null;
    this.currentKind = null;
    this.title = null;
    this.plan = [];
    this.commands = [];
    this.usage = null;
    this.modes = null;
    this.configOptions = null;
    this.lastUser = null;
  }

  relative(path) {
    const text = String(path || '');
    if (this.cwd && text.startsWith(`${this.cwd}/`)) return text.slice(this.cwd.length + 1);
    return text;
  }

  clear() {
    this.container.replaceChildren();
    this.cards.clear();
    this.current = null;
    this.currentKind = null;
  }

  add(node) {
    const stick = this.nearBottom();
    this.container.append(node);
    if (stick) this.scrollToEnd();
  }

  get shown() {
    return this.container.isConnected;
  }

  nearBottom() {
    const scroller = this.scroller;
    return !this.shown || scroller.scrollHeight - scroller.scrollTop - scroller.clientHeight < 120;
  }

  scrollToEnd() {
    if (this.shown) requestAnimationFrame(() => (this.scroller.scrollTop = this.scroller.scrollHeight));
  }

  textBlock(kind, make) {
    if (this.currentKind !== kind) {
      this.current = make();
      this.currentKind = kind;
      this.add(this.current.node);
    }
    return this.current;
  }

  endBlock() {
    this.current = null;
    this.currentKind = null;
  }

  /** Shows a prompt the person sent from this page, before the agent's echo. */
  localUser(blocks) {
    const node = this.userNode(blocks);
    node.dataset.local = 'true';
    this.add(node);
    this.lastUser = { node, text: blocks.filter((b) => b.type === 'text').map((b) => b.text).join(''), echoed: '' };
    this.endBlock();
    this.scrollToEnd();
  }

  userNode(blocks) {
    const node = el('div', 'msg user');
    node.setAttribute('aria-label', 'You');
    for (const block of blocks) {
      if (block.type === 'text') {
        const body = el('div', 'md');
        body.append(renderMarkdown(block.text));
        node.append(body);
      } else if (block.type === 'image') {
        node.append(imageNode(block, block.name || 'attached image'));
      }
    }
    return node;
  }

  notice(text, kind = 'info') {
    this.endBlock();
    this.add(el('div', `notice-row ${kind}`, text));
  }

  /** Folds one `session/update`. */
  apply(update) {
    const kind = update.sessionUpdate;
    switch (kind) {
      case 'user_message_chunk': {
        const block = update.content || {};
        // The echo of a prompt this page already shows is not shown twice.
        if (this.lastUser && block.type === 'text' && this.lastUser.text.startsWith(this.lastUser.echoed + block.text)) {
          this.lastUser.echoed += block.text;
          if (this.lastUser.echoed === this.lastUser.text) this.lastUser = null;
          return;
        }
        if (this.currentKind !== 'user') {
          this.current = { node: el('div', 'msg user'), text: '' };
          this.current.node.setAttribute('aria-label', 'You');
          this.currentKind = 'user';
          this.add(this.current.node);
        }
        if (block.type === 'text') {
          const body = el('div', 'md');
          body.append(renderMarkdown(block.text));
          this.current.node.append(body);
        } else if (block.type === 'image') {
          this.current.node.append(imageNode(block, 'attached image'));
        }
        break;
      }
      case 'agent_message_chunk': {
        const block = update.content || {};
        if (block.type === 'text') this.textBlock('agent', () => new TextBlock('agent', 'dsh')).append(block.text);
        else if (block.type === 'image') {
          this.endBlock();
          this.add(imageNode(block, 'image from the agent'));
        }
        this.lastUser = null;
        break;
      }
      case 'agent_thought_chunk': {
        const block = update.content || {};
        if (block.type === 'text') this.textBlock('thought', () => new ThoughtBlock()).append(block.text);
        break;
      }
      case 'tool_call': {
        this.endBlock();
        const existing = this.cards.get(update.toolCallId);
        if (existing) existing.update(update);
        else {
          const card = new ToolCard(this, update);
          this.cards.set(update.toolCallId, card);
          this.add(card.node);
        }
        break;
      }
      case 'tool_call_update': {
        const card = this.cards.get(update.toolCallId);
        if (card) {
          const stick = this.nearBottom();
          card.update(update);
          if (stick) this.scrollToEnd();
        } else {
          this.endBlock();
          const fresh = new ToolCard(this, update);
          this.cards.set(update.toolCallId, fresh);
          this.add(fresh.node);
        }
        this.dispatchEvent(new CustomEvent('call-status', { detail: update }));
        break;
      }
      case 'plan':
        this.plan = update.entries || [];
        this.dispatchEvent(new Event('plan'));
        break;
      case 'available_commands_update':
        this.commands = update.availableCommands || [];
        break;
      case 'current_mode_update':
        if (this.modes) this.modes.currentModeId = update.currentModeId;
        this.dispatchEvent(new Event('modes'));
        break;
      case 'config_option_update':
        this.configOptions = update.configOptions || this.configOptions;
        this.dispatchEvent(new Event('modes'));
        break;
      case 'session_info_update':
        if (typeof update.title === 'string') this.title = update.title;
        this.dispatchEvent(new Event('info'));
        break;
      case 'usage_update':
        this.usage = update;
        this.dispatchEvent(new Event('usage'));
        break;
      default:
        break;
    }
  }
}
