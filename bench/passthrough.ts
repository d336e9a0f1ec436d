// A bare pass-through proxy, for reference only: what any Node proxy in front of the simulator
// costs on this machine, with no auth, clearing, gates or settlement. The bench runs it in its own
// process, exactly like the service, so the two figures compare the same way.
import http from "node:http";
import { Pool } from "undici";

const upstream = new URL(process.env.UPSTREAM_BASE_URL ?? "http://127.0.0.1:1");
const pool = new Pool(upstream.origin, { connections: 64, pipelining: 1 });
const prefix = upstream.pathname.replace(/\/$/, "");

const server = http.createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on("data", (c: Buffer) => chunks.push(c));
  req.on("end", async () => {
    try {
      const up = await pool.request({
        method: "POST",
        path: `${prefix}${(req.url ?? "/").replace(/^\/v1/, "")}`,
        headers: { authorization: req.headers.authorization ?? "", "content-type": "application/json" },
        body: Buffer.concat(chunks),
      });
      res.writeHead(up.statusCode, { "content-type": String(up.headers["content-type"] ?? "application/json") });
      for await (const chunk of up.body) res.write(chunk);
      res.end();
    } catch (e) {
      res.writeHead(502).end(String(e));
    }
  });
});
server.listen(Number(process.env.PORT), "127.0.0.1", () => process.stdout.write("ready\n"));
process.on("SIGTERM", () => {
  server.close();
  void pool.close();
  process.exit(0);
});
