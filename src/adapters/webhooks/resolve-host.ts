import { lookup } from "node:dns/promises";

/**
 * Every address a host name resolves to (IPv4 and IPv6), as the HTTP client would connect:
 * `getaddrinfo` through node:dns `lookup` (so /etc/hosts counts). Injectable: the webhook rules take
 * one as a dependency, so a test can map a name to an address of its choosing.
 */
export type ResolveHost = (hostname: string) => Promise<string[]>;

/** Resolution this slow is treated as a failure (the caller refuses the URL or fails the attempt). */
export const RESOLVE_TIMEOUT_MS = 5_000;

export const systemResolveHost: ResolveHost = async (hostname) => {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new Error(`resolving ${hostname} took over ${RESOLVE_TIMEOUT_MS} ms`)),
      RESOLVE_TIMEOUT_MS,
    );
    timer.unref();
  });
  try {
    const found = await Promise.race([lookup(hostname, { all: true, verbatim: true }), timeout]);
    return found.map((a) => a.address);
  } finally {
    clearTimeout(timer);
  }
};
