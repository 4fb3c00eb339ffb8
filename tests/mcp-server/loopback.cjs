// Preloaded by the dsh-mcp tests (NODE_OPTIONS=--require): the reference server listens on
// every interface when given only a PORT; the tests must bind loopback only.
"use strict";
const net = require("node:net");
const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  if (typeof args[0] === "number" || (typeof args[0] === "string" && /^\d+$/.test(args[0]))) {
    const port = Number(args[0]);
    const rest = args.slice(1).filter((a) => typeof a === "function");
    return listen.call(this, port, "127.0.0.1", ...rest);
  }
  return listen.apply(this, args);
};
