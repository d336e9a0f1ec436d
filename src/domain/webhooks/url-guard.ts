import { isIP } from "node:net";
import type { ResolveHost } from "../../adapters/webhooks/resolve-host.js";
import { DomainError } from "../../lib/errors.js";
import { addressAllowed } from "./address-rules.js";

/**
 * A webhook URL's target, checked (docs/decisions.md "Webhooks"): https (http too when
 * private addresses are allowed), no user name or password, and a host whose every address — an IP
 * literal, or all that DNS answers — is allowed by `addressAllowed`. Run at registration (a refusal
 * is 400 naming `url`) and before every delivery attempt (a refusal fails the attempt), so a name
 * that later resolves somewhere private (DNS rebinding) is not followed; the delivery then connects
 * to the address checked here.
 */
export interface UrlRules {
  /** WEBHOOK_ALLOW_PRIVATE: loopback and private addresses, and http, are allowed */
  allowPrivate: boolean;
  resolveHost: ResolveHost;
}

/** Names of cloud metadata services, refused before any lookup. */
const METADATA_NAMES = /^(metadata|metadata\.google\.internal|instance-data|metadata\.azure\.com)\.?$/;
/** This machine's names (RFC 6761), refused unless private targets are allowed. */
const LOCAL_NAMES = /(^|\.)localhost\.?$/;

export type UrlCheck = { ok: true; url: URL; address: string } | { ok: false; reason: string };

/** The URL and the address to connect to, or why not (as the 400's message would say it). */
export async function checkTarget(raw: string, rules: UrlRules): Promise<UrlCheck> {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return { ok: false, reason: "url must be an absolute https URL." };
  }
  if (url.protocol !== "https:" && !(url.protocol === "http:" && rules.allowPrivate)) {
    return { ok: false, reason: "url must use https." };
  }
  if (url.username !== "" || url.password !== "") {
    return { ok: false, reason: "url must not carry a user name or password." };
  }
  // the URL parser has already normalised IPv4 forms (0x7f.1, 2130706433) to dotted quads
  const host = url.hostname.replace(/^\[(.*)\]$/, "$1").toLowerCase();
  if (host === "") return { ok: false, reason: "url must name a host." };
  if (METADATA_NAMES.test(host) || (LOCAL_NAMES.test(host) && !rules.allowPrivate)) {
    return { ok: false, reason: `url's host ${host} is not on the public internet.` };
  }
  let addresses: string[];
  if (isIP(host) !== 0) addresses = [host];
  else {
    try {
      addresses = await rules.resolveHost(host);
    } catch (e) {
      return { ok: false, reason: `url's host ${host} does not resolve (${(e as Error).message}).` };
    }
  }
  if (addresses.length === 0) return { ok: false, reason: `url's host ${host} does not resolve.` };
  const refused = addresses.find((a) => !addressAllowed(a, rules.allowPrivate));
  if (refused !== undefined) {
    return {
      ok: false,
      reason: `url's host ${host} resolves to ${refused}, which is not a public address (loopback, private, link-local and metadata addresses are refused).`,
    };
  }
  return { ok: true, url, address: addresses[0] as string };
}

/** `checkTarget` at registration: the URL, or 400 `invalid_request` naming `url` (nothing changed). */
export async function assertWebhookUrl(raw: string, rules: UrlRules): Promise<URL> {
  const r = await checkTarget(raw, rules);
  if (!r.ok) throw new DomainError("invalid_request", `${r.reason} Nothing was changed.`, { field: "url" });
  return r.url;
}
