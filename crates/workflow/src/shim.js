// The workflow hooks, evaluated in front of every workflow body (inside the Code Mode
// wrapper function). `__wf` is the host namespace; the engine substitutes the arguments and
// the item cap below. Every misuse reports a fatal error to the host (which kills the run)
// and throws, so a script cannot catch its way past it.
const args = JSON.parse(__WF_ARGS__);
const __wfItemCap = __WF_ITEM_CAP__;
let __wfDead = false;
function __wfDie(code, message) {
  __wfDead = true;
  __wf.fatal({ code, message });
  const error = new Error(message);
  error.name = "WorkflowError";
  throw error;
}
// A description of the first value that is not plain JSON, or null.
function __wfNotPlain(root, rootPath) {
  const seen = new Set();
  const stack = [[root, rootPath]];
  while (stack.length > 0) {
    const [value, path] = stack.pop();
    switch (typeof value) {
      case "string": case "boolean": continue;
      case "number":
        if (!Number.isFinite(value)) return path + " is a non-finite number";
        if (Object.is(value, -0)) return path + " is -0";
        continue;
      case "undefined": return path + " is undefined";
      case "function": return path + " is a function";
      case "bigint": return path + " is a bigint";
      case "symbol": return path + " is a symbol";
    }
    if (value === null) continue;
    if (seen.has(value)) return path + " is a circular reference";
    seen.add(value);
    if (Array.isArray(value)) {
      for (let i = value.length - 1; i >= 0; i--) {
        if (!(i in value)) return path + "[" + i + "] is a hole";
        stack.push([value[i], path + "[" + i + "]"]);
      }
      continue;
    }
    const proto = Object.getPrototypeOf(value);
    if (proto !== Object.prototype && proto !== null) {
      const name = proto && proto.constructor && proto.constructor.name ? proto.constructor.name : "non-plain";
      return path + " is a " + name + " object";
    }
    const keys = Object.keys(value);
    for (let i = keys.length - 1; i >= 0; i--) stack.push([value[keys[i]], path + "." + keys[i]]);
  }
  return null;
}
async function agent(prompt, opts) {
  if (typeof prompt !== "string" || prompt.length === 0) {
    __wfDie("INVALID_ARGUMENT", "agent() requires a non-empty prompt string");
  }
  if (opts !== undefined) {
    if (opts === null || typeof opts !== "object" || Array.isArray(opts)) {
      __wfDie("INVALID_ARGUMENT", "agent() options must be an object");
    }
    const bad = __wfNotPlain(opts, "options");
    if (bad !== null) __wfDie("INVALID_ARGUMENT", "agent() options must be plain JSON data — " + bad);
  }
  return await __wf.agent({ prompt, opts: opts === undefined ? null : opts });
}
async function parallel(thunks) {
  if (!Array.isArray(thunks)) {
    __wfDie("INVALID_ARGUMENT", "parallel() requires an array of zero-argument functions");
  }
  if (thunks.length > __wfItemCap) {
    __wfDie("ITEM_CAP", "parallel() received " + thunks.length + " items — over the per-call cap (" + __wfItemCap + "); split the work or raise maxItemsPerCall in the engine config");
  }
  for (let i = 0; i < thunks.length; i++) {
    if (typeof thunks[i] !== "function") __wfDie("INVALID_ARGUMENT", "parallel() item " + i + " is not a function");
  }
  return await Promise.all(thunks.map(async (thunk) => {
    try {
      return await thunk();
    } catch (error) {
      if (__wfDead) throw error;
      return null;
    }
  }));
}
async function pipeline(items, ...stages) {
  if (!Array.isArray(items)) __wfDie("INVALID_ARGUMENT", "pipeline() requires an items array");
  if (stages.length === 0) __wfDie("INVALID_ARGUMENT", "pipeline() requires at least one stage function");
  for (let i = 0; i < stages.length; i++) {
    if (typeof stages[i] !== "function") __wfDie("INVALID_ARGUMENT", "pipeline() stage " + i + " is not a function");
  }
  if (items.length > __wfItemCap) {
    __wfDie("ITEM_CAP", "pipeline() received " + items.length + " items — over the per-call cap (" + __wfItemCap + "); split the work or raise maxItemsPerCall in the engine config");
  }
  return await Promise.all(items.map(async (item, index) => {
    let previous = item;
    try {
      for (const stage of stages) previous = await stage(previous, item, index);
      return previous;
    } catch (error) {
      if (__wfDead) throw error;
      return null;
    }
  }));
}
function phase(title) {
  if (typeof title !== "string" || title.length === 0) {
    __wfDie("INVALID_ARGUMENT", "phase() requires a non-empty title string");
  }
  __wf.phase({ title });
}
function log(message) {
  if (typeof message !== "string") __wfDie("INVALID_ARGUMENT", "log() requires a message string");
  __wf.log({ message });
}
const __wfResult = await (async () => {
__WF_BODY__
})();
if (__wfResult === undefined) return null;
const __wfBad = __wfNotPlain(__wfResult, "result");
if (__wfBad !== null) {
  __wfDie("RESULT_UNSERIALIZABLE", "the workflow's return value is not plain JSON data — " + __wfBad + ". Return only JSON-serializable objects/arrays/scalars.");
}
return __wfResult;
