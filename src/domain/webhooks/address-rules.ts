import { BlockList, isIP } from "node:net";

/**
 * Which IP addresses a webhook may be sent to (docs/decisions.md "Webhooks"), the SSRF
 * rule checked at registration and again at every delivery, after DNS:
 *
 * - `public`: anything routable on the internet;
 * - `private`: loopback, RFC 1918, carrier-grade NAT (100.64/10), IPv6 unique-local (fc00::/7):
 *   allowed only with `WEBHOOK_ALLOW_PRIVATE=true` (development and tests);
 * - `forbidden`, always: unspecified, link-local (169.254/16 with the cloud metadata address
 *   169.254.169.254, fe80::/10), known metadata addresses elsewhere (100.100.100.200, fd00:ec2::254),
 *   multicast, broadcast, reserved and documentation ranges, and IPv6 forms that tunnel an IPv4
 *   address we cannot vouch for. An IPv6 address that embeds an IPv4 one (mapped ::ffff:a.b.c.d,
 *   compatible ::a.b.c.d, NAT64 64:ff9b::/96, 6to4 2002::/16) is judged by the IPv4 address.
 */
export type AddressClass = "public" | "private" | "forbidden";

const PRIVATE_V4: [string, number][] = [
  ["127.0.0.0", 8],
  ["10.0.0.0", 8],
  ["172.16.0.0", 12],
  ["192.168.0.0", 16],
  ["100.64.0.0", 10],
];
const FORBIDDEN_V4: [string, number][] = [
  ["0.0.0.0", 8],
  ["169.254.0.0", 16],
  ["192.0.0.0", 24],
  ["192.0.2.0", 24],
  ["198.18.0.0", 15],
  ["198.51.100.0", 24],
  ["203.0.113.0", 24],
  ["224.0.0.0", 4],
  ["240.0.0.0", 4],
];
/** metadata services at addresses the ranges above would otherwise let through */
const METADATA = ["100.100.100.200", "fd00:ec2::254"];

const PRIVATE_V6: [string, number][] = [
  ["::1", 128],
  ["fc00::", 7],
];
const FORBIDDEN_V6: [string, number][] = [
  ["::", 128],
  ["fe80::", 10],
  ["fec0::", 10],
  ["ff00::", 8],
  ["100::", 64],
  ["2001::", 32],
  ["2001:db8::", 32],
  ["64:ff9b:1::", 48],
];

function list(v4: [string, number][], v6: [string, number][]): BlockList {
  const b = new BlockList();
  for (const [a, p] of v4) b.addSubnet(a, p, "ipv4");
  for (const [a, p] of v6) b.addSubnet(a, p, "ipv6");
  return b;
}
const privateList = list(PRIVATE_V4, PRIVATE_V6);
const forbiddenList = list(FORBIDDEN_V4, FORBIDDEN_V6);

/** The eight 16-bit groups of an IPv6 address (zone dropped), or null when it does not parse. */
export function ipv6Groups(address: string): number[] | null {
  let a = address.toLowerCase();
  const zone = a.indexOf("%");
  if (zone >= 0) a = a.slice(0, zone);
  if (isIP(a) !== 6) return null;
  // a trailing dotted IPv4 part becomes two groups
  const dotted = /(\d+\.\d+\.\d+\.\d+)$/.exec(a);
  if (dotted?.[1]) {
    const o = dotted[1].split(".").map(Number);
    a = `${a.slice(0, -dotted[1].length)}${(((o[0] ?? 0) << 8) | (o[1] ?? 0)).toString(16)}:${(((o[2] ?? 0) << 8) | (o[3] ?? 0)).toString(16)}`;
  }
  const [head = "", tail] = a.split("::");
  const left = head === "" ? [] : head.split(":");
  const right = tail === undefined || tail === "" ? [] : tail.split(":");
  const fill = tail === undefined ? 0 : 8 - left.length - right.length;
  const groups = [...left, ...new Array<string>(fill).fill("0"), ...right].map((g) => Number.parseInt(g, 16));
  return groups.length === 8 && groups.every((g) => Number.isInteger(g) && g >= 0 && g <= 0xffff) ? groups : null;
}

/** The IPv4 address an IPv6 one carries (mapped, compatible, NAT64, 6to4), else null. */
function embeddedIpv4(g: number[]): string | null {
  const v4 = (hi: number, lo: number) => `${hi >> 8}.${hi & 0xff}.${lo >> 8}.${lo & 0xff}`;
  const zero = (from: number, to: number) => g.slice(from, to).every((x) => x === 0);
  const [g0 = 0, g1 = 0, g2 = 0, , , g5 = 0, g6 = 0, g7 = 0] = g;
  // ::ffff:a.b.c.d (mapped) and ::a.b.c.d (compatible; not :: or ::1)
  if (zero(0, 5) && g5 === 0xffff) return v4(g6, g7);
  if (zero(0, 6) && (g6 !== 0 || g7 > 1)) return v4(g6, g7);
  // 64:ff9b::a.b.c.d (NAT64, well-known prefix)
  if (g0 === 0x64 && g1 === 0xff9b && zero(2, 6)) return v4(g6, g7);
  // 2002:aabb:ccdd::/48 (6to4)
  if (g0 === 0x2002) return v4(g1, g2);
  return null;
}

/** The class of one IP address (IPv4 or IPv6 text); anything that is not an address is forbidden. */
export function classifyAddress(address: string): AddressClass {
  const family = isIP(address.split("%")[0] ?? "");
  if (family === 4) {
    if (METADATA.includes(address) || address === "255.255.255.255") return "forbidden";
    if (forbiddenList.check(address, "ipv4")) return "forbidden";
    return privateList.check(address, "ipv4") ? "private" : "public";
  }
  const groups = family === 6 ? ipv6Groups(address) : null;
  if (!groups) return "forbidden";
  const embedded = embeddedIpv4(groups);
  if (embedded) return classifyAddress(embedded);
  const canonical = groups.map((x) => x.toString(16)).join(":");
  if (METADATA.some((m) => ipv6Groups(m)?.join(":") === groups.join(":"))) return "forbidden";
  if (forbiddenList.check(canonical, "ipv6")) return "forbidden";
  return privateList.check(canonical, "ipv6") ? "private" : "public";
}

/** Whether a webhook may be sent to `address`. */
export function addressAllowed(address: string, allowPrivate: boolean): boolean {
  const c = classifyAddress(address);
  return c === "public" || (c === "private" && allowPrivate);
}
