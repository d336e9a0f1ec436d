// The funding simulation's world (docs/decisions.md "Seeded money simulation (issue 38)", the funding
// part): the REAL funding domain — FundingService and PaymentReconciler, unchanged — on a fresh
// database cloned from the test template, a fresh local chain (anvil with the local USDC), the HTTP
// facilitator stand-in settling on that chain through the service's own HTTP facilitator adapter,
// and a node in front of the chain that the reconciler reads through and that can fall behind. One
// manual clock drives the service; the chain's block times follow it (one second per block, set
// forward when the clock moves), so a seed's chain is the same every time it runs.
import { encodePaymentSignatureHeader } from "@x402/core/http";
import { createPubSub } from "graphql-yoga";
import {
  type Address,
  createTestClient,
  type Hex,
  http,
  keccak256,
  type PublicClient,
  type TestClient,
  toHex,
} from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { type ChainGateway, createChainGateway } from "../../../src/adapters/chain/usdc-gateway.js";
import { createPrisma, type Db } from "../../../src/adapters/db.js";
import { v2Requirements } from "../../../src/adapters/facilitator/envelopes.js";
import { createHttpFacilitator } from "../../../src/adapters/facilitator/http.js";
import type { ExactRequirements } from "../../../src/adapters/facilitator/types.js";
import type { EventBus, Topics } from "../../../src/adapters/pubsub.js";
import type { RedisClient } from "../../../src/adapters/redis/client.js";
import { createRedis } from "../../../src/adapters/redis/client.js";
import { createSignupFuse } from "../../../src/adapters/redis/fuse.js";
import { redisKeys } from "../../../src/adapters/redis/keys.js";
import { type Config, loadConfig } from "../../../src/config.js";
import { upsertAccountByWallet } from "../../../src/domain/accounts/account-upsert.js";
import type { FundingKind } from "../../../src/domain/funding/funding-request.js";
import { FundingService } from "../../../src/domain/funding/funding-service.js";
import type { PaymentReconciler } from "../../../src/domain/funding/reconciler.js";
import { ApiKeyService } from "../../../src/domain/keys/api-key-service.js";
import { type LocalChain, startLocalChain } from "../../../src/local/chain/index.js";
import { createTestDatabase, REDIS_URL } from "../../db.js";
import { chainEnv, signAuthorization, writeXPayment, type XPaymentAuthorization } from "../../funding.js";
import { type HttpFacilitatorStandIn, startHttpFacilitator } from "../../http-facilitator.js";
import { type LaggingRpc, startLaggingRpc } from "../../lagging-rpc.js";
import { manualClock } from "../../market-pipeline.js";
import type { Prng } from "../prng.js";
import { type FundingDefect, plantDefects } from "./plants.js";
import { authKey, type FacilitatorBehaviour, STAND_IN_MODE, simFetch } from "./transport.js";

export { authKey, type FacilitatorBehaviour };

/** The simulation's epoch: every authorization's times and every block time are measured from it. */
export const EPOCH = new Date("2030-01-15T12:00:00.000Z");
export const EPOCH_S = EPOCH.getTime() / 1000;
/** CONFIRMATION_BLOCKS of the simulated deployment. */
export const CONFIRMATION_BLOCKS = 5;

export interface SimPayer {
  label: string;
  privateKey: Hex;
  /** lower-case */
  address: Address;
  /** the account of this wallet, once it has one (a sign-in, or a credited signup) */
  accountId: string | null;
}

/** One EIP-3009 authorization a payer signed. */
export interface SimAuth {
  label: string;
  payer: SimPayer;
  /** the route it was signed for (its amount is that route's body) */
  kind: FundingKind;
  amount: bigint;
  /** lower-case bytes32 */
  nonce: Hex;
  /** seconds */
  validBefore: number;
  authorization: XPaymentAuthorization;
  signature: Hex;
  /** signed by another key than the payer's (a forgery of the payer's authorization) */
  forged: boolean;
  /** the payer cancelled it on chain (`AuthorizationCanceled`) */
  cancelled: boolean;
}

export interface FundingSimOptions {
  seed: number;
  steps: number;
  defects?: readonly FundingDefect[];
}

/** A set of payments the reconciliation queue holds (the BullMQ queue's twin: a job per payment, retried while waiting). */
export class SimQueue {
  readonly ids: string[] = [];
  async enqueue(paymentId: string): Promise<void> {
    if (!this.ids.includes(paymentId)) this.ids.push(paymentId);
  }
}

export class FundingWorld {
  readonly clock = manualClock(EPOCH);
  readonly payers: SimPayer[] = [];
  readonly auths: SimAuth[] = [];
  readonly queue = new SimQueue();
  readonly trace: string[] = [];
  /** the behaviour drawn for an authorization's settle calls in the current step (by `authKey`) */
  readonly behaviours = new Map<string, FacilitatorBehaviour>();
  /**
   * Duplicates sent at once whose verify calls are slow: every verify of the authorization but the
   * first waits until `open()` (the first settle call done, or the first call answered).
   */
  readonly verifyGates = new Map<string, { verifies: number; opened: Promise<void>; open(): void }>();
  /** settle calls whose process died: they never return */
  dead = 0;
  /** the reconciler's node stands still until this step (0: in step with the chain) */
  lagUntil = 0;
  step = 0;
  /** what the schedule did (a test checks it was not idle) */
  readonly stats = {
    calls: 0,
    funded: 0,
    duplicates: 0,
    forged: 0,
    crashes: 0,
    cancels: 0,
    lags: 0,
    heldLanded: 0,
    reversed: 0,
    /** answers the reconciler gave: payments it credited from the chain, and failed */
    reconciledCredited: 0,
    reconciledFailed: 0,
    /** the facilitator behaviour drawn for each submission */
    behaviours: {} as Partial<Record<FacilitatorBehaviour, number>>,
  };
  private closers: (() => Promise<unknown>)[] = [];

  private constructor(
    readonly prng: Prng,
    readonly defects: ReadonlySet<FundingDefect>,
    readonly chain: LocalChain,
    readonly testClient: TestClient,
    readonly db: Db,
    readonly config: Config,
    readonly standIn: HttpFacilitatorStandIn,
    /** the node the reconciler reads through (it can fall behind) */
    readonly node: LaggingRpc,
    /** the chain as it is (the invariants read it) */
    readonly truth: ChainGateway,
    readonly payTo: Address,
  ) {}

  /** the real funding domain, built once the world exists (its transport consults the world) */
  service!: FundingService;
  reconciler!: PaymentReconciler;

  get publicClient(): PublicClient {
    return this.truth.publicClient as PublicClient;
  }

  static async start(prng: Prng, defects: readonly FundingDefect[], redis: RedisClient): Promise<FundingWorld> {
    const closers: (() => Promise<unknown>)[] = [];
    try {
      const chain = await startLocalChain();
      closers.push(() => chain.stop());
      const testClient = createTestClient({ mode: "anvil", transport: http(chain.rpcUrl) });
      // the chain's time is the simulation's: one second per block from the epoch on
      await testClient.setBlockTimestampInterval({ interval: 1 });
      await testClient.setNextBlockTimestamp({ timestamp: BigInt(EPOCH_S) });
      await testClient.mine({ blocks: 1 });

      const database = await createTestDatabase();
      closers.push(() => database.drop());
      const db = createPrisma(database.url, { max: 8 });
      closers.push(() => db.$disconnect());

      // the facilitator speaks v1, or v1 and v2 (then the service's adapter sends v2 bodies)
      const standIn = await startHttpFacilitator(chain, { versions: prng.chance(0.5) ? [1] : [1, 2] });
      closers.push(() => standIn.close());
      const node = await startLaggingRpc(chain.rpcUrl, null);
      closers.push(() => node.close());

      const env = chainEnv(chain, {
        FACILITATOR_URL: standIn.url,
        CONFIRMATION_BLOCKS: String(CONFIRMATION_BLOCKS),
        SIGNUP_FUSE_MAX: "1000000",
        LOG_LEVEL: "silent",
      });
      const loaded = loadConfig(env, { mode: "local", redisPrefix: "fundsim" });
      if (!loaded.ok) throw new Error(loaded.errors.join("\n"));
      const config = loaded.config;
      const usdc = { chainId: chain.chainId, usdcAddress: chain.usdcAddress };
      const truth = createChainGateway({ rpcUrl: chain.rpcUrl, ...usdc });
      const behind = createChainGateway({ rpcUrl: node.url, ...usdc });

      const world = new FundingWorld(
        prng,
        new Set(defects),
        chain,
        testClient,
        db,
        config,
        standIn,
        node,
        truth,
        (config.chain.payTo ?? "").toLowerCase() as Address,
      );
      world.closers = closers;
      const clock = world.clock;
      const bus = createPubSub<Topics>() as EventBus;
      const apiKeys = new ApiKeyService(db, clock);
      const facilitator = createHttpFacilitator({ url: standIn.url, fetch: simFetch(world) });
      const planted = plantDefects(world.defects, db);
      world.service = new FundingService({
        db: planted.fundingDb,
        config,
        clock,
        bus,
        facilitator,
        apiKeys,
        fuse: createSignupFuse(
          redis,
          redisKeys(`fundsim:${process.pid}:${prng.seed}:${Date.now()}`),
          config.signupFuse.max,
          60,
        ),
        reconciliation: world.queue,
        chain: truth,
      });
      planted.patchService(world.service);
      world.reconciler = new planted.Reconciler({
        db,
        clock,
        bus,
        chain: behind,
        apiKeys,
        confirmationBlocks: CONFIRMATION_BLOCKS,
      });
      standIn.modeFor = (p) => {
        const b = world.behaviours.get(authKey(p.authorization.from, p.authorization.nonce));
        return b ? (STAND_IN_MODE[b] ?? undefined) : undefined;
      };
      // a wrong verdict arrives after the reconciler credited the transfer from the chain
      standIn.afterSettle = async (_settled, p) => {
        await world.reconcileNow(p.authorization.from, p.authorization.nonce);
      };
      return world;
    } catch (e) {
      for (const c of closers.reverse()) await c().catch(() => undefined);
      throw e;
    }
  }

  private onDeath: (() => void) | null = null;

  /** The process dies where its call stands: the call never returns (its settle request may have gone out). */
  die(): Promise<never> {
    this.dead++;
    this.onDeath?.();
    return new Promise<never>(() => undefined);
  }

  /** `work`'s value, or `died` when the process died while it ran (the work is abandoned, never resumed). */
  async unlessDead<T>(work: Promise<T>): Promise<{ died: false; value: T } | { died: true }> {
    const death = new Promise<{ died: true }>((resolve) => {
      this.onDeath = () => resolve({ died: true });
    });
    try {
      return await Promise.race([work.then((value) => ({ died: false as const, value })), death]);
    } finally {
      this.onDeath = null;
    }
  }

  async close(): Promise<void> {
    for (const c of this.closers.reverse()) await c().catch(() => undefined);
    this.closers = [];
  }

  log(line: string): void {
    this.trace.push(`#${this.step} ${line}`);
  }

  /** seconds since the epoch, for the trace */
  rel(seconds: number): string {
    return `T+${seconds - EPOCH_S}s`;
  }

  nowS(): number {
    return Math.floor(this.clock.now().getTime() / 1000);
  }

  /** A payer: a deterministic key for this seed, USDC on chain, and sometimes an account already (signed in). */
  async addPayer(): Promise<SimPayer> {
    const i = this.payers.length + 1;
    const privateKey = keccak256(toHex(`funding-sim ${this.prng.seed} payer ${i}`));
    const address = privateKeyToAccount(privateKey).address.toLowerCase() as Address;
    const payer: SimPayer = { label: `w${i}`, privateKey, address, accountId: null };
    this.payers.push(payer);
    const usdc = BigInt(this.prng.pick([30, 60, 200])) * 1_000_000n;
    await this.chain.mintUsdc(address, usdc);
    if (this.prng.chance(0.5)) {
      // signed in (SIWE) before paying: top-ups and refills are open to it
      const a = await upsertAccountByWallet(this.db, { walletAddress: address, provider: "siwe" });
      payer.accountId = a.id;
    }
    this.log(`payer ${payer.label}: ${usdc / 1_000_000n} USDC${payer.accountId ? ", signed in" : ""}`);
    return payer;
  }

  /** An account for `payer` if one exists now (a credited signup makes one). */
  async accountOf(payer: SimPayer): Promise<string | null> {
    if (payer.accountId) return payer.accountId;
    const a = await this.db.account.findUnique({ where: { walletAddress: payer.address } });
    payer.accountId = a?.id ?? null;
    return payer.accountId;
  }

  /** `signer` signs `payer`'s authorization (the payer itself, or a forger). */
  async sign(
    payer: SimPayer,
    o: { kind: FundingKind; amount: bigint; nonce: Hex; validBefore: number; signer?: SimPayer },
  ): Promise<SimAuth> {
    const authorization: XPaymentAuthorization = {
      from: privateKeyToAccount(payer.privateKey).address,
      to: this.config.chain.payTo as Address,
      value: o.amount.toString(),
      validAfter: "0",
      validBefore: String(o.validBefore),
      nonce: o.nonce,
    };
    const signer = o.signer ?? payer;
    const signature = await signAuthorization(this.chain, signer, authorization);
    const auth: SimAuth = {
      label: `a${this.auths.length + 1}`,
      payer,
      kind: o.kind,
      amount: o.amount,
      nonce: o.nonce.toLowerCase() as Hex,
      validBefore: o.validBefore,
      authorization,
      signature,
      forged: signer !== payer,
      cancelled: false,
    };
    this.auths.push(auth);
    return auth;
  }

  /** The payment header of `auth`: `X-PAYMENT` (v1) or `PAYMENT-SIGNATURE` (v2), one authorization either way. */
  header(auth: SimAuth, version: 1 | 2): { xPayment: string | undefined; paymentSignature: string | undefined } {
    if (version === 1)
      return { xPayment: writeXPayment(auth.authorization, auth.signature), paymentSignature: undefined };
    const exact: ExactRequirements = {
      chainId: this.chain.chainId,
      amountMicroUsdc: auth.amount,
      payTo: this.config.chain.payTo as Address,
      asset: this.chain.usdcAddress,
      resource: resourceOf(auth.kind),
      description: "",
      mimeType: "application/json",
      maxTimeoutSeconds: 300,
      extra: { name: this.config.chain.usdcName, version: this.config.chain.usdcVersion },
    };
    const header = encodePaymentSignatureHeader({
      x402Version: 2,
      accepted: v2Requirements(exact) as never,
      payload: { authorization: auth.authorization, signature: auth.signature },
    } as never);
    return { xPayment: undefined, paymentSignature: header };
  }

  /** Moves the clock; the chain's next blocks carry the new time (it never goes back), and a few are mined at it. */
  async advance(ms: number): Promise<void> {
    this.clock.advance(ms);
    const latest = await this.publicClient.getBlock({ blockTag: "latest" });
    const next = Math.max(this.nowS(), Number(latest.timestamp) + 1);
    await this.testClient.setNextBlockTimestamp({ timestamp: BigInt(next) });
    // blocks go on being made while time passes: enough that a block CONFIRMATION_BLOCKS deep has the new time
    await this.testClient.mine({ blocks: CONFIRMATION_BLOCKS + 1 });
  }

  async head(): Promise<bigint> {
    return this.publicClient.getBlockNumber({ cacheTime: 0 });
  }

  /** The reconciliation job of one payment runs now (between a settlement and its verdict: `settle-then-refuse`). */
  async reconcileNow(payer: string, nonce: string): Promise<void> {
    const p = await this.db.payment.findUnique({
      where: {
        payerAddress_authorizationNonce: { payerAddress: payer.toLowerCase(), authorizationNonce: nonce.toLowerCase() },
      },
    });
    if (!p) return;
    const outcome = await this.reconciler.reconcilePayment(p.id);
    if (outcome === "credited") this.stats.reconciledCredited++;
    this.log(`  the reconciler, between the settlement and its verdict: ${this.paymentLabel(payer, nonce)} ${outcome}`);
  }

  paymentLabel(payer: string, nonce: string): string {
    const w = this.payers.find((p) => p.address === payer.toLowerCase())?.label ?? payer.slice(0, 8);
    const n = this.nonceLabels.get(nonce.toLowerCase()) ?? nonce.slice(0, 10);
    return `${w}/${n}`;
  }

  readonly nonceLabels = new Map<string, string>();

  /** A fresh nonce (drawn from the seed), labelled for the trace. */
  freshNonce(): Hex {
    const words = Array.from({ length: 8 }, () => this.prng.u32().toString(16).padStart(8, "0"));
    const nonce = `0x${words.join("")}` as Hex;
    this.nonceLabels.set(nonce, `n${this.nonceLabels.size + 1}`);
    return nonce;
  }
}

export function resourceOf(kind: FundingKind): string {
  return `http://127.0.0.1:8080/v1/x402/${kind === "top_up" ? "top-up" : kind}`;
}

/** The Redis the signup fuse counts in (one connection for a whole run; each seed has its own keys). */
export function sharedRedis(): RedisClient {
  return createRedis(REDIS_URL, "command");
}
