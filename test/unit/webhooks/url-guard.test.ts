import { describe, expect, test } from "vitest";
import { addressAllowed, classifyAddress, ipv6Groups } from "../../../src/domain/webhooks/address-rules.js";
import { assertWebhookUrl, checkTarget } from "../../../src/domain/webhooks/url-guard.js";
import { DomainError } from "../../../src/lib/errors.js";

// docs/decisions.md "Webhooks (issue 30)": which addresses a webhook may reach, and the URL check
// run at registration and before every delivery (after DNS).

describe("classifyAddress", () => {
  test.each([
    ["a public IPv4 address", "93.184.216.34", "public"],
    ["a public IPv6 address", "2606:2800:220:1:248:1893:25c8:1946", "public"],
    ["loopback", "127.0.0.1", "private"],
    ["loopback, anywhere in 127/8", "127.255.0.9", "private"],
    ["RFC 1918 10/8", "10.0.0.1", "private"],
    ["RFC 1918 172.16/12", "172.31.255.255", "private"],
    ["just outside 172.16/12", "172.32.0.1", "public"],
    ["RFC 1918 192.168/16", "192.168.1.1", "private"],
    ["carrier-grade NAT", "100.64.0.1", "private"],
    ["IPv6 loopback", "::1", "private"],
    ["IPv6 unique-local", "fd12:3456::1", "private"],
    ["cloud metadata", "169.254.169.254", "forbidden"],
    ["link-local", "169.254.1.1", "forbidden"],
    ["IPv6 link-local", "fe80::1", "forbidden"],
    ["IPv6 link-local with a zone", "fe80::1%eth0", "forbidden"],
    ["Alibaba metadata (inside CGNAT)", "100.100.100.200", "forbidden"],
    ["AWS IPv6 metadata (inside unique-local)", "fd00:ec2::254", "forbidden"],
    ["unspecified", "0.0.0.0", "forbidden"],
    ["IPv6 unspecified", "::", "forbidden"],
    ["multicast", "224.0.0.1", "forbidden"],
    ["broadcast", "255.255.255.255", "forbidden"],
    ["documentation", "192.0.2.10", "forbidden"],
    ["IPv4-mapped loopback", "::ffff:127.0.0.1", "private"],
    ["IPv4-mapped metadata, hex form", "::ffff:a9fe:a9fe", "forbidden"],
    ["IPv4-mapped public", "::ffff:93.184.216.34", "public"],
    ["NAT64 of a private address", "64:ff9b::10.0.0.1", "private"],
    ["6to4 of the metadata address", "2002:a9fe:a9fe::1", "forbidden"],
    ["not an address", "example.com", "forbidden"],
  ])("%s: %s is %s", (_label, address, expected) => {
    expect(classifyAddress(address)).toBe(expected);
  });

  test("private addresses are allowed only with WEBHOOK_ALLOW_PRIVATE; forbidden ones never", () => {
    expect(addressAllowed("10.0.0.1", false)).toBe(false);
    expect(addressAllowed("10.0.0.1", true)).toBe(true);
    expect(addressAllowed("169.254.169.254", true)).toBe(false);
    expect(addressAllowed("93.184.216.34", false)).toBe(true);
  });

  test("IPv6 groups", () => {
    expect(ipv6Groups("::1")).toEqual([0, 0, 0, 0, 0, 0, 0, 1]);
    expect(ipv6Groups("::ffff:1.2.3.4")).toEqual([0, 0, 0, 0, 0, 0xffff, 0x102, 0x304]);
    expect(ipv6Groups("2001:db8::8:800:200c:417a")).toEqual([0x2001, 0xdb8, 0, 0, 8, 0x800, 0x200c, 0x417a]);
    expect(ipv6Groups("1.2.3.4")).toBeNull();
  });
});

/** A resolver that knows only these names (what the tests inject instead of node:dns). */
function hosts(map: Record<string, string[]>) {
  return async (name: string) => {
    const found = map[name];
    if (!found) throw new Error(`ENOTFOUND ${name}`);
    return found;
  };
}

const publicRules = {
  allowPrivate: false,
  resolveHost: hosts({
    "hooks.example.com": ["93.184.216.34"],
    "internal.example.com": ["10.0.0.1"],
    "mixed.example.com": ["93.184.216.34", "fd00::1"],
    "empty.example.com": [],
  }),
};

async function refusal(url: string, rules = publicRules): Promise<string> {
  try {
    await assertWebhookUrl(url, rules);
  } catch (e) {
    if (e instanceof DomainError && e.code === "invalid_request" && e.details.field === "url") return e.message;
    throw e;
  }
  throw new Error(`${url} was accepted`);
}

describe("the URL check", () => {
  test("a public https URL passes and keeps the address to connect to", async () => {
    const r = await checkTarget("https://hooks.example.com/svc?x=1", publicRules);
    expect(r).toMatchObject({ ok: true, address: "93.184.216.34" });
  });

  test.each([
    ["http without private targets", "http://hooks.example.com/x", "must use https"],
    ["loopback over http", "http://127.0.0.1/hook", "must use https"],
    ["loopback over https", "https://127.0.0.1/hook", "127.0.0.1, which is not a public address"],
    ["the metadata address", "https://169.254.169.254/latest/meta-data", "169.254.169.254"],
    ["an IPv4 literal in another notation", "https://2130706433/x", "127.0.0.1"],
    ["an IPv6 literal", "https://[::1]/x", "::1"],
    ["a name resolving to 10.0.0.1", "https://internal.example.com/x", "10.0.0.1"],
    ["a name with one private address among public ones", "https://mixed.example.com/x", "fd00::1"],
    ["a name that does not resolve", "https://nowhere.example.com/x", "does not resolve"],
    ["a name resolving to nothing", "https://empty.example.com/x", "does not resolve"],
    ["localhost", "https://localhost/x", "not on the public internet"],
    ["a metadata name", "https://metadata.google.internal/x", "not on the public internet"],
    ["credentials in the URL", "https://user:pw@hooks.example.com/x", "user name or password"],
  ])("%s is refused: %s", async (_label, url, says) => {
    expect(await refusal(url)).toContain(says);
  });

  test("WEBHOOK_ALLOW_PRIVATE allows loopback and private targets, and http; never metadata", async () => {
    const rules = { ...publicRules, allowPrivate: true };
    expect(await checkTarget("http://127.0.0.1:9999/hook", rules)).toMatchObject({ ok: true, address: "127.0.0.1" });
    expect(await checkTarget("https://internal.example.com/x", rules)).toMatchObject({ ok: true, address: "10.0.0.1" });
    expect(await refusal("http://169.254.169.254/", rules)).toContain("169.254.169.254");
    expect(await refusal("ftp://hooks.example.com/", rules)).toContain("must use https");
  });
});
