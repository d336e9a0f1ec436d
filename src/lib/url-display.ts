/**
 * A URL as an error or a log line may show it (a URL can carry credentials): its scheme, host and port, never its user
 * and password, path, query or fragment, where deployments keep credentials (a Postgres or Redis
 * password, an RPC provider's key in the path, a token in the query). Nothing of a value that does
 * not parse: where its host ends and its password begins is then unknown.
 */
export function displayUrl(value: string): string {
  let u: URL;
  try {
    u = new URL(value);
  } catch {
    return "(a value that is not a URL; not shown)";
  }
  const hidden = u.username !== "" || u.password !== "" || (u.pathname !== "" && u.pathname !== "/") || u.search !== "";
  // `svc:pw@db/x` parses as scheme `svc:` with an opaque path: the scheme alone, then
  if (u.host === "") return `${u.protocol}${hidden ? "…" : ""}`;
  return `${u.protocol}//${u.host}${hidden ? "/…" : ""}`;
}
