// Preloaded into server-everything (node --require): it has no host option and
// app.listen(PORT) binds every interface. This makes a listen on a bare port bind
// 127.0.0.1 only, so the interop tests never expose a server beyond loopback.
const net = require("net");
const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  const first = args[0];
  if (typeof first === "number" || (typeof first === "string" && /^\d+$/.test(first))) {
    if (typeof args[1] !== "string") args.splice(1, 0, "127.0.0.1");
  } else if (first && typeof first === "object" && first.port !== undefined && !first.host) {
    args[0] = { ...first, host: "127.0.0.1" };
  }
  return listen.apply(this, args);
};
