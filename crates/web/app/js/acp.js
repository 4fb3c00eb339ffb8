// An ACP client over one WebSocket (one JSON-RPC 2.0 message per text frame), with
// reconnection. The page is an ordinary ACP client: it initializes, lists, loads and prompts
// sessions, and answers the agent's requests (permission, elicitation) through handlers.

const PROTOCOL_VERSION = 1;

export class AcpClient extends EventTarget {
  constructor(url) {
    super();
    this.url = url;
    this.nextId = 1;
    this.pending = new Map();
    this.handlers = new Map();
    this.socket = null;
    this.state = 'connecting';
    this.backoff = 500;
    this.agent = null;
    this.closedByUs = false;
  }

  /** Registers the answer to an agent→client request method (returns a result or throws). */
  handle(method, fn) {
    this.handlers.set(method, fn);
  }

  connect() {
    this.closedByUs = false;
    this.setState(this.agent ? 'reconnecting' : 'connecting');
    let socket;
    try {
      socket = new WebSocket(this.url);
    } catch (error) {
      this.scheduleReconnect();
      return;
    }
    this.socket = socket;
    socket.addEventListener('open', () => this.opened());
    socket.addEventListener('message', (event) => this.received(event.data));
    socket.addEventListener('close', () => {
      if (this.socket !== socket) return;
      this.socket = null;
      for (const [, call] of this.pending) call.reject(new Error('connection lost'));
      this.pending.clear();
      if (!this.closedByUs) this.scheduleReconnect();
    });
  }

  close() {
    this.closedByUs = true;
    this.socket?.close();
  }

  scheduleReconnect() {
    this.setState('reconnecting');
    const delay = Math.min(10000, this.backoff) * (0.75 + Math.random() * 0.5);
    this.backoff = Math.min(10000, this.backoff * 2);
    setTimeout(() => this.connect(), delay);
  }

  async opened() {
    try {
      const result = await this.request('initialize', {
        protocolVersion: PROTOCOL_VERSION,
        clientCapabilities: {
          fs: { readTextFile: false, writeTextFile: false },
          terminal: false,
          elicitation: { form: {} },
        },
        clientInfo: { name: 'dsh-web', title: 'dsh web', version: '1' },
      });
      const first = !this.agent;
      this.agent = result;
      this.backoff = 500;
      this.setState('connected');
      this.dispatchEvent(new CustomEvent(first ? 'ready' : 'reconnected', { detail: result }));
    } catch (error) {
      this.socket?.close();
    }
  }

  setState(state) {
    this.state = state;
    this.dispatchEvent(new CustomEvent('state', { detail: state }));
  }

  send(message) {
    if (!this.socket || this.socket.readyState !== WebSocket.OPEN) {
      throw new Error('not connected');
    }
    this.socket.send(JSON.stringify({ jsonrpc: '2.0', ...message }));
  }

  request(method, params) {
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      try {
        this.send({ id, method, params });
      } catch (error) {
        reject(error);
        return;
      }
      this.pending.set(id, { resolve, reject, method });
    });
  }

  notify(method, params) {
    this.send({ method, params });
  }

  async received(data) {
    let message;
    try {
      message = JSON.parse(data);
    } catch {
      console.warn('dsh web: a frame that is not JSON was ignored');
      return;
    }
    if (message === null || typeof message !== 'object') return;
    if ('method' in message && 'id' in message) {
      await this.answer(message);
    } else if ('method' in message) {
      this.dispatchEvent(new CustomEvent('notification', { detail: message }));
    } else if ('id' in message) {
      const call = this.pending.get(message.id);
      if (!call) return;
      this.pending.delete(message.id);
      if (message.error) {
        const error = new Error(message.error.message || 'request failed');
        error.code = message.error.code;
        error.data = message.error.data;
        call.reject(error);
      } else {
        call.resolve(message.result);
      }
    }
  }

  async answer(message) {
    const handler = this.handlers.get(message.method);
    let reply;
    if (!handler) {
      reply = { id: message.id, error: { code: -32601, message: `Method not found: ${message.method}` } };
    } else {
      try {
        reply = { id: message.id, result: await handler(message.params || {}, message) };
      } catch (error) {
        reply = { id: message.id, error: { code: -32603, message: String(error?.message || error) } };
      }
    }
    try {
      this.send(reply);
    } catch {
      // The connection dropped while the person answered; the server asks again on reconnect.
    }
  }
}
