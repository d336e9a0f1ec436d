/**
 * `REDIS_URL` may name one Redis (`redis://`, `rediss://`) or a Redis Cluster by its seed nodes:
 *
 *   redis+cluster://[user:password@]host:port[,host:port…][/]
 *   rediss+cluster://…   (TLS to every node)
 *
 * One node is enough to find the rest (the client asks it for the slot map); more seeds let a
 * process start while one of them is down. The user and password (percent-encoded, as in any URL)
 * are every node's. No database number: a cluster has only database 0.
 */
export interface ClusterUrl {
  nodes: Array<{ host: string; port: number }>;
  username?: string;
  password?: string;
  tls: boolean;
}

export const CLUSTER_SCHEMES = ["redis+cluster:", "rediss+cluster:"] as const;

export function isClusterUrl(url: string): boolean {
  return CLUSTER_SCHEMES.some((s) => url.startsWith(`${s}//`));
}

/**
 * Parses a cluster URL; throws an Error whose message never repeats the password (it may be shown
 * in a config error).
 */
export function parseClusterUrl(url: string): ClusterUrl {
  const scheme = CLUSTER_SCHEMES.find((s) => url.startsWith(`${s}//`));
  if (!scheme) throw new Error(`expected ${CLUSTER_SCHEMES.map((s) => `${s}//`).join(" or ")}`);
  let rest = url.slice(scheme.length + 2);
  const at = rest.lastIndexOf("@");
  let username: string | undefined;
  let password: string | undefined;
  if (at >= 0) {
    const userinfo = rest.slice(0, at);
    rest = rest.slice(at + 1);
    const colon = userinfo.indexOf(":");
    const user = colon >= 0 ? userinfo.slice(0, colon) : userinfo;
    const pass = colon >= 0 ? userinfo.slice(colon + 1) : "";
    try {
      username = user === "" ? undefined : decodeURIComponent(user);
      password = pass === "" ? undefined : decodeURIComponent(pass);
    } catch {
      throw new Error("the user or password has a % that is not a percent-escape (not shown)");
    }
  }
  rest = rest.replace(/\/$/, "");
  if (rest.includes("/") || rest.includes("?") || rest.includes("#")) {
    throw new Error("a cluster URL has no path or query (a cluster has only database 0)");
  }
  const nodes = rest.split(",").map((hp) => {
    const m = /^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9_.-]+):(\d{1,5})$/.exec(hp.trim());
    const port = m ? Number(m[2]) : 0;
    if (!m || port < 1 || port > 65535) throw new Error(`expected host:port for every seed node, got "${hp}"`);
    return { host: (m[1] as string).replace(/^\[|\]$/g, ""), port };
  });
  return { nodes, username, password, tls: scheme === "rediss+cluster:" };
}
