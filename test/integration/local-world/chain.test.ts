import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import {
  type Address,
  createPublicClient,
  type Hex,
  hashDomain,
  http,
  parseSignature,
  serializeSignature,
  toHex,
} from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { createChainClients, defineLocalOrBaseChain } from "../../../src/adapters/chain/clients.js";
import { createChainGateway } from "../../../src/adapters/chain/usdc-gateway.js";
import { compileUsdc, type LocalChain, localUsdcAbi, startLocalChain } from "../../../src/local/chain/index.js";
import { closedPortUrl } from "../../../testkit/stub-server.js";

const AUTH_TYPES = {
  TransferWithAuthorization: [
    { name: "from", type: "address" },
    { name: "to", type: "address" },
    { name: "value", type: "uint256" },
    { name: "validAfter", type: "uint256" },
    { name: "validBefore", type: "uint256" },
    { name: "nonce", type: "bytes32" },
  ],
} as const;
const RECEIVE_TYPES = { ReceiveWithAuthorization: AUTH_TYPES.TransferWithAuthorization } as const;
const CANCEL_TYPES = {
  CancelAuthorization: [
    { name: "authorizer", type: "address" },
    { name: "nonce", type: "bytes32" },
  ],
} as const;
/** secp256k1 group order: n - s flips a signature to its high-s twin. */
const SECP256K1_N = 0xfffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141n;

let chain: LocalChain;
let startMs: number;

beforeAll(async () => {
  const t0 = performance.now();
  chain = await startLocalChain();
  startMs = performance.now() - t0;
});

afterAll(async () => {
  await chain?.stop();
});

function clients() {
  return createChainClients({ rpcUrl: chain.rpcUrl, chainId: chain.chainId });
}

function nowSec(): bigint {
  return BigInt(Math.floor(Date.now() / 1000));
}

function randomNonce(): Hex {
  return toHex(crypto.getRandomValues(new Uint8Array(32)));
}

async function fundedBuyer(amountMicro: bigint) {
  const buyer = privateKeyToAccount(generatePrivateKey());
  await chain.mintUsdc(buyer.address, amountMicro);
  return buyer;
}

async function balanceOf(address: Address): Promise<bigint> {
  return clients().publicClient.readContract({
    address: chain.usdcAddress,
    abi: localUsdcAbi,
    functionName: "balanceOf",
    args: [address],
  });
}

describe("local chain: startup and token metadata", () => {
  test("starts fast on chain id 8453 with anvil's dev accounts", async () => {
    const { publicClient } = clients();
    expect(await publicClient.getChainId()).toBe(8453);
    expect(chain.chainId).toBe(8453);
    expect(chain.devAccounts).toHaveLength(10);
    expect(chain.devAccounts[0]?.address).toBe("0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266");
    expect(privateKeyToAccount(chain.devAccounts[3]?.privateKey ?? "0x").address).toBe(chain.devAccounts[3]?.address);
    expect(chain.deployer).toBe(chain.devAccounts[0]?.address);
    // Generous bound (shared CI machine); typically ~70-200 ms with a warm compile cache.
    expect(startMs).toBeLessThan(5_000);
  });

  test("token exposes the FiatTokenV2 metadata x402 relies on", async () => {
    const { publicClient } = clients();
    const read = <F extends "name" | "version" | "decimals" | "symbol" | "DOMAIN_SEPARATOR" | "owner">(
      functionName: F,
    ) => publicClient.readContract({ address: chain.usdcAddress, abi: localUsdcAbi, functionName });
    expect(await read("name")).toBe("USD Coin");
    expect(await read("version")).toBe("2");
    expect(await read("decimals")).toBe(6);
    expect(await read("symbol")).toBe("USDC");
    expect(await read("owner")).toBe(chain.deployer);
    const expected = hashDomain({
      domain: { name: "USD Coin", version: "2", chainId: 8453n, verifyingContract: chain.usdcAddress },
      types: {
        EIP712Domain: [
          { name: "name", type: "string" },
          { name: "version", type: "string" },
          { name: "chainId", type: "uint256" },
          { name: "verifyingContract", type: "address" },
        ],
      },
    });
    expect(await read("DOMAIN_SEPARATOR")).toBe(expected);
  });

  test("compile artifact is cached and the typed ABI matches the compiler's", async () => {
    const artifact = await compileUsdc();
    expect(artifact.fromCache).toBe(true);
    expect(artifact.solcVersion).toMatch(/^0\.8\.37/);
    const signature = (item: unknown) => {
      const i = item as { type: string; name?: string; inputs?: { type: string }[]; outputs?: { type: string }[] };
      return `${i.type} ${i.name ?? ""}(${(i.inputs ?? []).map((x) => x.type).join(",")})->(${(i.outputs ?? []).map((x) => x.type).join(",")})`;
    };
    expect(new Set(artifact.abi.map(signature))).toEqual(new Set(localUsdcAbi.map(signature)));
  });

  test("defineLocalOrBaseChain keeps Base's id but only the given RPC", () => {
    const c = defineLocalOrBaseChain("http://127.0.0.1:1", 8453);
    expect(c.id).toBe(8453);
    expect(c.rpcUrls.default.http).toEqual(["http://127.0.0.1:1"]);
    expect(JSON.stringify(c.rpcUrls)).not.toContain("mainnet.base.org");
  });
});

describe("local chain: USDC and EIP-3009", () => {
  test("owner mints; others cannot", async () => {
    const buyer = privateKeyToAccount(generatePrivateKey());
    await chain.mintUsdc(buyer.address, 5_000_000n);
    expect(await balanceOf(buyer.address)).toBe(5_000_000n);

    const stranger = chain.devAccounts[5];
    if (stranger === undefined) throw new Error("dev account missing");
    const { walletClient } = createChainClients({
      rpcUrl: chain.rpcUrl,
      chainId: chain.chainId,
      privateKey: stranger.privateKey,
    });
    await expect(
      walletClient?.writeContract({
        address: chain.usdcAddress,
        abi: localUsdcAbi,
        functionName: "mint",
        args: [stranger.address, 1n],
      }),
    ).rejects.toThrow(/caller is not the owner/);
  });

  test("parallel mints all land (serialised nonces)", async () => {
    const accounts = Array.from({ length: 5 }, () => privateKeyToAccount(generatePrivateKey()));
    await Promise.all(accounts.map((a, i) => chain.mintUsdc(a.address, BigInt(i + 1))));
    for (const [i, a] of accounts.entries()) expect(await balanceOf(a.address)).toBe(BigInt(i + 1));
  });

  test("transferWithAuthorization: both signature forms, replay, expiry, bad signer, high-s", async () => {
    const buyer = await fundedBuyer(3_000_000n);
    const relayerKey = chain.devAccounts[4]?.privateKey;
    if (relayerKey === undefined) throw new Error("dev account missing");
    const { walletClient: relayer, publicClient } = createChainClients({
      rpcUrl: chain.rpcUrl,
      chainId: chain.chainId,
      privateKey: relayerKey,
    });
    if (relayer === undefined) throw new Error("wallet missing");
    const payTo = chain.devAccounts[6]?.address as Address;
    const domain = { name: "USD Coin", version: "2", chainId: 8453, verifyingContract: chain.usdcAddress } as const;
    const sign = async (message: { value: bigint; validAfter: bigint; validBefore: bigint; nonce: Hex }) => {
      const full = { from: buyer.address, to: payTo, ...message };
      const signature = await buyer.signTypedData({
        domain,
        types: AUTH_TYPES,
        primaryType: "TransferWithAuthorization",
        message: full,
      });
      return { full, signature };
    };
    const send = (
      full: { from: Address; to: Address; value: bigint; validAfter: bigint; validBefore: bigint; nonce: Hex },
      signature: Hex,
      form: "bytes" | "vrs",
    ) => {
      const base = [full.from, full.to, full.value, full.validAfter, full.validBefore, full.nonce] as const;
      if (form === "bytes") {
        return relayer.writeContract({
          address: chain.usdcAddress,
          abi: localUsdcAbi,
          functionName: "transferWithAuthorization",
          args: [...base, signature],
        });
      }
      const { r, s, yParity } = parseSignature(signature);
      return relayer.writeContract({
        address: chain.usdcAddress,
        abi: localUsdcAbi,
        functionName: "transferWithAuthorization",
        args: [...base, 27 + yParity, r, s],
      });
    };
    const window = { validAfter: nowSec() - 600n, validBefore: nowSec() + 600n };

    // (v, r, s) form
    const a = await sign({ value: 1_000_000n, ...window, nonce: randomNonce() });
    const hashA = await send(a.full, a.signature, "vrs");
    const receiptA = await relayer.waitForTransactionReceipt({ hash: hashA });
    expect(receiptA.status).toBe("success");
    const eventNames = receiptA.logs.map((l) => l.topics[0]);
    expect(eventNames.length).toBe(2); // AuthorizationUsed + Transfer
    expect(
      await publicClient.readContract({
        address: chain.usdcAddress,
        abi: localUsdcAbi,
        functionName: "authorizationState",
        args: [buyer.address, a.full.nonce],
      }),
    ).toBe(true);

    // bytes form
    const b = await sign({ value: 500_000n, ...window, nonce: randomNonce() });
    await relayer.waitForTransactionReceipt({ hash: await send(b.full, b.signature, "bytes") });
    expect(await balanceOf(buyer.address)).toBe(1_500_000n);
    expect(await balanceOf(payTo)).toBeGreaterThanOrEqual(1_500_000n);

    // replay (either form) → "authorization is used or canceled"
    await expect(send(a.full, a.signature, "bytes")).rejects.toThrow(/authorization is used or canceled/);
    await expect(send(b.full, b.signature, "vrs")).rejects.toThrow(/authorization is used or canceled/);

    // expired / not yet valid
    const expired = await sign({ value: 1n, validAfter: 0n, validBefore: nowSec() - 10n, nonce: randomNonce() });
    await expect(send(expired.full, expired.signature, "bytes")).rejects.toThrow(/authorization is expired/);
    const early = await sign({
      value: 1n,
      validAfter: nowSec() + 3600n,
      validBefore: nowSec() + 7200n,
      nonce: randomNonce(),
    });
    await expect(send(early.full, early.signature, "bytes")).rejects.toThrow(/not yet valid/);

    // tampered value → invalid signature
    const c = await sign({ value: 1n, ...window, nonce: randomNonce() });
    await expect(send({ ...c.full, value: 2n }, c.signature, "bytes")).rejects.toThrow(/invalid signature/);

    // malleable high-s twin of a valid signature is refused
    const d = await sign({ value: 1n, ...window, nonce: randomNonce() });
    const parsed = parseSignature(d.signature);
    const highS = serializeSignature({
      r: parsed.r,
      s: toHex(SECP256K1_N - BigInt(parsed.s), { size: 32 }),
      yParity: parsed.yParity === 0 ? 1 : 0,
    });
    await expect(send(d.full, highS, "bytes")).rejects.toThrow(/invalid signature/);
    await relayer.waitForTransactionReceipt({ hash: await send(d.full, d.signature, "bytes") });
  });

  test("receiveWithAuthorization needs the payee as caller; cancelAuthorization burns the nonce", async () => {
    const buyer = await fundedBuyer(1_000_000n);
    const payee = chain.devAccounts[7];
    const other = chain.devAccounts[8];
    if (payee === undefined || other === undefined) throw new Error("dev accounts missing");
    const domain = { name: "USD Coin", version: "2", chainId: 8453, verifyingContract: chain.usdcAddress } as const;
    const message = {
      from: buyer.address,
      to: payee.address,
      value: 250_000n,
      validAfter: 0n,
      validBefore: nowSec() + 600n,
      nonce: randomNonce(),
    };
    const signature = await buyer.signTypedData({
      domain,
      types: RECEIVE_TYPES,
      primaryType: "ReceiveWithAuthorization",
      message,
    });
    const args = [
      message.from,
      message.to,
      message.value,
      message.validAfter,
      message.validBefore,
      message.nonce,
      signature,
    ] as const;
    const walletOf = (privateKey: Hex) => {
      const w = createChainClients({ rpcUrl: chain.rpcUrl, chainId: chain.chainId, privateKey }).walletClient;
      if (w === undefined) throw new Error("wallet missing");
      return w;
    };
    await expect(
      walletOf(other.privateKey).writeContract({
        address: chain.usdcAddress,
        abi: localUsdcAbi,
        functionName: "receiveWithAuthorization",
        args,
      }),
    ).rejects.toThrow(/caller must be the payee/);
    const payeeWallet = walletOf(payee.privateKey);
    const hash = await payeeWallet.writeContract({
      address: chain.usdcAddress,
      abi: localUsdcAbi,
      functionName: "receiveWithAuthorization",
      args,
    });
    expect((await payeeWallet.waitForTransactionReceipt({ hash })).status).toBe("success");
    expect(await balanceOf(buyer.address)).toBe(750_000n);

    // cancel an authorization before use; using it afterwards fails
    const nonce = randomNonce();
    const cancelSig = await buyer.signTypedData({
      domain,
      types: CANCEL_TYPES,
      primaryType: "CancelAuthorization",
      message: { authorizer: buyer.address, nonce },
    });
    const cancelHash = await payeeWallet.writeContract({
      address: chain.usdcAddress,
      abi: localUsdcAbi,
      functionName: "cancelAuthorization",
      args: [buyer.address, nonce, cancelSig],
    });
    await payeeWallet.waitForTransactionReceipt({ hash: cancelHash });
    const later = { ...message, nonce, value: 1n };
    const laterSig = await buyer.signTypedData({
      domain,
      types: AUTH_TYPES,
      primaryType: "TransferWithAuthorization",
      message: later,
    });
    await expect(
      payeeWallet.writeContract({
        address: chain.usdcAddress,
        abi: localUsdcAbi,
        functionName: "transferWithAuthorization",
        args: [later.from, later.to, later.value, later.validAfter, later.validBefore, later.nonce, laterSig],
      }),
    ).rejects.toThrow(/authorization is used or canceled/);
  });
});

describe("chain gateway (src/adapters/chain)", () => {
  test("confirmations: 1 at inclusion, 20 after mine(19)", async () => {
    const gateway = createChainGateway({
      rpcUrl: chain.rpcUrl,
      chainId: chain.chainId,
      usdcAddress: chain.usdcAddress,
    });
    const recipient = privateKeyToAccount(generatePrivateKey()).address;
    const txHash = await chain.mintUsdc(recipient, 42n);
    const first = await gateway.getConfirmations(txHash);
    expect(first.ok && first.value.confirmations).toBe(1);
    expect(first.ok && first.value.status).toBe("success");
    await chain.mine(19);
    const after = await gateway.getConfirmations(txHash);
    expect(after.ok && after.value.confirmations).toBe(20);

    const missing = await gateway.getConfirmations(`0x${"ab".repeat(32)}`);
    expect(missing).toMatchObject({ ok: false, failure: { kind: "not_found" } });
  });

  test("transfer logs by recipient and by transaction", async () => {
    const gateway = createChainGateway({
      rpcUrl: chain.rpcUrl,
      chainId: chain.chainId,
      usdcAddress: chain.usdcAddress,
    });
    const recipient = privateKeyToAccount(generatePrivateKey()).address;
    const head = await gateway.getBlockNumber();
    if (!head.ok) throw new Error(head.failure.message);
    const h1 = await chain.mintUsdc(recipient, 7n);
    const h2 = await chain.mintUsdc(recipient, 8n);
    const logs = await gateway.getUsdcTransferLogs({ to: recipient, fromBlock: head.value, toBlock: "latest" });
    if (!logs.ok) throw new Error(logs.failure.message);
    expect(logs.value.map((l) => [l.txHash, l.valueMicroUsdc, l.to, l.from])).toEqual([
      [h1, 7n, recipient, "0x0000000000000000000000000000000000000000"],
      [h2, 8n, recipient, "0x0000000000000000000000000000000000000000"],
    ]);
    expect(typeof logs.value[0]?.blockNumber).toBe("bigint");
    expect(typeof logs.value[0]?.logIndex).toBe("number");
    const inTx = await gateway.getUsdcTransfersInTx(h2);
    expect(inTx.ok && inTx.value.map((l) => l.valueMicroUsdc)).toEqual([8n]);
  });

  test("transferUsdc pays out; an unaffordable payout is failure data", async () => {
    const payout = privateKeyToAccount(generatePrivateKey());
    // the paying key needs ETH for gas: use a dev key
    const devKey = chain.devAccounts[9]?.privateKey as Hex;
    const dev = privateKeyToAccount(devKey);
    await chain.mintUsdc(dev.address, 2_000_000n);
    const gateway = createChainGateway({
      rpcUrl: chain.rpcUrl,
      chainId: chain.chainId,
      usdcAddress: chain.usdcAddress,
      privateKey: devKey,
    });
    const before = await balanceOf(dev.address);
    const sent = await Promise.all([
      gateway.transferUsdc({ to: payout.address, amountMicro: 300_000n }),
      gateway.transferUsdc({ to: payout.address, amountMicro: 200_000n }),
    ]);
    for (const r of sent) {
      if (!r.ok) throw new Error(r.failure.message);
      const conf = await gateway.getConfirmations(r.value.txHash);
      expect(conf.ok && conf.value.status).toBe("success");
    }
    expect(await balanceOf(payout.address)).toBe(500_000n);
    expect(await balanceOf(dev.address)).toBe(before - 500_000n);

    const tooMuch = await gateway.transferUsdc({ to: payout.address, amountMicro: 10n ** 15n });
    expect(tooMuch).toMatchObject({ ok: false, failure: { kind: "reverted" } });
    if (!tooMuch.ok) expect(tooMuch.failure.message).toMatch(/exceeds balance/);

    const readOnly = createChainGateway({
      rpcUrl: chain.rpcUrl,
      chainId: chain.chainId,
      usdcAddress: chain.usdcAddress,
    });
    expect(await readOnly.transferUsdc({ to: payout.address, amountMicro: 1n })).toMatchObject({
      ok: false,
      failure: { kind: "no_wallet" },
    });
  });

  test("an unreachable RPC is failure data, not a throw", async () => {
    const gateway = createChainGateway({
      rpcUrl: await closedPortUrl(),
      chainId: 8453,
      usdcAddress: chain.usdcAddress,
    });
    const r = await gateway.getBlockNumber();
    expect(r).toMatchObject({ ok: false, failure: { kind: "network" } });
  });
});

describe("local chain: process lifecycle", () => {
  test("stop() leaves no anvil process and is idempotent", async () => {
    const second = await startLocalChain();
    const probe = createPublicClient({ transport: http(second.rpcUrl) });
    expect(await probe.getChainId()).toBe(8453);
    await second.stop();
    expect(() => process.kill(second.pid, 0)).toThrow();
    await second.stop();
  });

  test.concurrent.each([
    ["SIGKILL (watchdog)", "SIGKILL"],
    ["SIGTERM (signal hook)", "SIGTERM"],
  ] as const)("anvil dies with its parent on %s", async (_label, signal) => {
    const fixture = fileURLToPath(new URL("./fixtures/chain-child.ts", import.meta.url));
    const child = spawn(process.execPath, ["--import", "tsx", fixture], { stdio: ["ignore", "pipe", "inherit"] });
    const info = await new Promise<{ pid: number }>((resolve, reject) => {
      let out = "";
      child.stdout.on("data", (d: Buffer) => {
        out += d.toString();
        const line = out.split("\n").find((l) => l.startsWith("{"));
        if (line) resolve(JSON.parse(line) as { pid: number });
      });
      child.once("exit", (code) => reject(new Error(`child exited early (${code})`)));
    });
    expect(() => process.kill(info.pid, 0)).not.toThrow();
    const exited = new Promise((resolve) => child.once("exit", resolve));
    child.kill(signal);
    await exited;
    const deadline = Date.now() + 5_000;
    let alive = true;
    while (alive && Date.now() < deadline) {
      try {
        process.kill(info.pid, 0);
        await new Promise((r) => setTimeout(r, 25));
      } catch {
        alive = false;
      }
    }
    expect(alive).toBe(false);
  });
});
