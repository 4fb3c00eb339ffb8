// Evaluated once per run; returns the setup function. Host functions arrive as arguments so
// they never appear on globalThis.
(function (hostCall, hostLog, hostSleep, namespaces, messages) {
  "use strict";
  const ObjectProto = Object.prototype;
  const isArray = Array.isArray;
  const getProto = Object.getPrototypeOf;
  const keysOf = Object.keys;

  class GetterFailure {
    constructor(message) { this.message = message; }
  }
  class Lossy {}

  function messageOf(e) {
    try {
      if (e !== null && typeof e === "object" && "message" in e) return String(e.message);
      return String(e);
    } catch (_) {
      return "<unprintable thrown value>";
    }
  }

  function guarded(f) {
    try { return f(); } catch (e) { throw new GetterFailure(messageOf(e)); }
  }

  // Iterative lossless snapshot: plain objects, dense arrays, strings, finite non-negative-zero
  // numbers, booleans and null; anything else (undefined, Date, functions, bigint, cycles, -0)
  // is lossy. Copies are null-prototype so a "__proto__" key stays an ordinary key.
  function leaf(v) {
    switch (typeof v) {
      case "string": case "boolean": return { v };
      case "number":
        if (!Number.isFinite(v) || Object.is(v, -0)) throw new Lossy();
        return { v };
      case "object":
        if (v === null) return { v };
        return null;
      default: throw new Lossy();
    }
  }
  function snapshot(root) {
    const first = leaf(root);
    if (first) return first.v;
    const path = new Set();
    const open = (src) => {
      if (path.has(src)) throw new Lossy();
      if (guarded(() => isArray(src))) {
        const n = guarded(() => src.length);
        path.add(src);
        return { src, arr: true, keys: null, n, i: 0, out: [] };
      }
      const proto = guarded(() => getProto(src));
      if (proto !== ObjectProto && proto !== null) throw new Lossy();
      const keys = guarded(() => keysOf(src));
      path.add(src);
      return { src, arr: false, keys, n: keys.length, i: 0, out: Object.create(null) };
    };
    const stack = [open(root)];
    for (;;) {
      const top = stack[stack.length - 1];
      if (top.i < top.n) {
        const i = top.i++;
        const key = top.arr ? i : top.keys[i];
        if (top.arr && !guarded(() => i in top.src)) throw new Lossy();
        const child = guarded(() => top.src[key]);
        const simple = leaf(child);
        if (simple) {
          if (top.arr) top.out.push(simple.v); else top.out[key] = simple.v;
        } else {
          const frame = open(child);
          frame.parent = top; frame.key = key;
          stack.push(frame);
        }
        continue;
      }
      stack.pop();
      path.delete(top.src);
      if (stack.length === 0) return top.out;
      if (top.parent.arr) top.parent.out.push(top.out); else top.parent.out[top.key] = top.out;
    }
  }

  // A Node-flavoured, single-line `util.inspect` (depth 4, 100 items, 10 000 characters).
  const IDENT = /^[A-Za-z_$][A-Za-z0-9_$]*$/;
  function quote(s) {
    let cut = "";
    if (s.length > 10000) { cut = "... " + (s.length - 10000) + " more characters"; s = s.slice(0, 10000); }
    return "'" + s.replace(/\\/g, "\\\\").replace(/'/g, "\\'").replace(/\n/g, "\\n") + "'" + cut;
  }
  function inspect(v, depth, seen) {
    switch (typeof v) {
      case "string": return quote(v);
      case "number": return Object.is(v, -0) ? "-0" : String(v);
      case "bigint": return String(v) + "n";
      case "undefined": return "undefined";
      case "boolean": return String(v);
      case "symbol": return v.toString();
      case "function": {
        const name = v.name ? v.name : "";
        const text = Function.prototype.toString.call(v);
        if (text.startsWith("class")) return "[class " + (name || "(anonymous)") + "]";
        return name ? "[Function: " + name + "]" : "[Function (anonymous)]";
      }
    }
    if (v === null) return "null";
    if (seen.includes(v)) return "[Circular]";
    if (v instanceof Error) return describe(v);
    if (v instanceof Date) return isNaN(v.getTime()) ? "Invalid Date" : v.toISOString();
    if (v instanceof RegExp) return String(v);
    if (isArray(v)) {
      if (v.length === 0) return "[]";
      if (depth > 4) return "[Array]";
      const parts = [];
      const shown = Math.min(v.length, 100);
      seen.push(v);
      for (let i = 0; i < shown; i++) parts.push(i in v ? inspect(v[i], depth + 1, seen) : "<empty item>");
      seen.pop();
      if (v.length > shown) parts.push("... " + (v.length - shown) + " more items");
      return "[ " + parts.join(", ") + " ]";
    }
    let prefix = "";
    const proto = getProto(v);
    if (proto === null) prefix = "[Object: null prototype] ";
    else if (proto !== ObjectProto && proto.constructor && proto.constructor.name) prefix = proto.constructor.name + " ";
    if (v instanceof Map || v instanceof Set) {
      if (depth > 4) return "[" + proto.constructor.name + "]";
      seen.push(v);
      const parts = [];
      for (const entry of v) {
        parts.push(v instanceof Map ? inspect(entry[0], depth + 1, seen) + " => " + inspect(entry[1], depth + 1, seen) : inspect(entry, depth + 1, seen));
      }
      seen.pop();
      return proto.constructor.name + "(" + v.size + ") " + (parts.length ? "{ " + parts.join(", ") + " }" : "{}");
    }
    const keys = keysOf(v);
    if (keys.length === 0) return prefix + "{}";
    if (depth > 4) return "[" + (prefix ? prefix.trim() : "Object") + "]";
    seen.push(v);
    const parts = keys.map((k) => (IDENT.test(k) ? k : quote(k)) + ": " + inspect(v[k], depth + 1, seen));
    seen.pop();
    return prefix + "{ " + parts.join(", ") + " }";
  }
  function format(args) {
    const parts = [];
    for (const a of args) {
      try { parts.push(typeof a === "string" ? a : inspect(a, 0, [])); }
      catch (e) { parts.push("<uninspectable value: " + messageOf(e) + ">"); }
    }
    return parts.join(" ");
  }

  // The stack or the message of a thrown value.
  function describe(e) {
    try {
      if (e instanceof Error) {
        const head = String(e.name) + ": " + String(e.message);
        const stack = typeof e.stack === "string" ? e.stack.replace(/\s+$/, "") : "";
        return stack ? head + "\n" + stack : head;
      }
      return typeof e === "string" ? e : inspect(e, 0, []);
    } catch (inner) {
      return "<unprintable thrown value>";
    }
  }

  // Timers: waits count against the wall clock, never the compute budget.
  let nextTimer = 0;
  const timers = new Set();
  const setTimeout = (callback, ms, ...args) => {
    const id = ++nextTimer;
    timers.add(id);
    const delay = Number(ms);
    hostSleep(Number.isFinite(delay) && delay > 0 ? delay : 0).then(() => {
      if (timers.delete(id) && typeof callback === "function") callback(...args);
    });
    return id;
  };
  const clearTimeout = (id) => { timers.delete(id); };
  Object.defineProperty(globalThis, "setTimeout", { value: setTimeout, writable: true, configurable: true });
  Object.defineProperty(globalThis, "clearTimeout", { value: clearTimeout, writable: true, configurable: true });

  const log = (...args) => { hostLog(format(args)); };
  const console = Object.freeze({ log, info: log, warn: log, error: log, debug: log });

  // Reading a name the namespace does not have fails with the cause, instead of the engine's
  // later "not a function". `then` stays undefined so that awaiting the namespace still works.
  function guardUnknown(global, table, names) {
    return new Proxy(table, {
      get(target, prop, receiver) {
        if (typeof prop === "string" && !(prop in target) && prop !== "then" && !(prop in ObjectProto)) {
          const known = names.length ? names.join(", ") : "(none)";
          throw new TypeError(global + "." + prop + " is not an available tool; " + global + " has: " + known);
        }
        return Reflect.get(target, prop, receiver);
      },
    });
  }

  const params = [];
  const classes = [];
  namespaces.forEach((ns, index) => {
    let make = (name, message) => new Error(message);
    if (ns.errorClass) {
      const className = ns.errorClass.name;
      const member = ns.errorClass.member;
      const Cls = class extends Error {
        constructor(message, memberValue) {
          super(message);
          Object.defineProperty(this, member, { value: memberValue, enumerable: true, writable: false });
        }
      };
      Object.defineProperty(Cls, "name", { value: className });
      Object.defineProperty(Cls.prototype, "name", { value: className, writable: true, configurable: true });
      make = (name, message) => new Cls(message, name);
      classes.push(Cls);
    }
    const table = Object.create(null);
    for (const name of ns.names) {
      const binding = async function (args) {
        let snap;
        try {
          snap = snapshot(args);
        } catch (e) {
          throw make(name, e instanceof GetterFailure ? messages.argsGetter + e.message : messages.argsLossy);
        }
        const reply = await hostCall(index, name, snap);
        if (reply.ok) return reply.value;
        throw make(name, reply.message);
      };
      Object.defineProperty(table, name, { value: binding, enumerable: true });
    }
    params.push(guardUnknown(ns.global, Object.freeze(table), ns.names));
  });

  async function run(main) {
    let value;
    try {
      value = await main(...params, ...classes, console);
    } catch (e) {
      return { kind: "exception", message: describe(e) };
    }
    if (value === undefined) return { kind: "ok" };
    try {
      return { kind: "ok", value: snapshot(value) };
    } catch (_) {
      return { kind: "invalid-output" };
    }
  }

  return { run, describe };
})
