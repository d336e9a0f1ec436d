import type { Db } from "../../adapters/db.js";
import type { EventBus } from "../../adapters/pubsub.js";
import type { ReadDb } from "../../adapters/read-replica.js";
import type { InFlightRegistry } from "../../adapters/redis/in-flight.js";
import { parseCeiling } from "../../contract/account.js";
import { assertUuid } from "../../contract/common.js";
import type { Clock } from "../../lib/clock.js";
import {
  type CursorKey,
  decodeCursor,
  encodeCursor,
  MAX_EXPORT_PAGE_SIZE,
  type Page,
  pageSize,
} from "../../lib/cursor.js";
import { DomainError } from "../../lib/errors.js";
import { type HistoryReader, insufficientScope } from "../keys/key-scopes.js";
import { accountLedgerLines } from "../ledger/ledger-lines.js";
import { liveBalanceColumns } from "../ledger/live-figures.js";
import type {
  AccountCaller,
  AccountIdentity,
  AccountSummary,
  Balances,
  HistoryRow,
  LedgerLine,
  Savings,
} from "./account-types.js";
import { authProviderFor } from "./auth-provider.js";
import { type BalanceColumns, balancesOf, type HeldSlice } from "./balances.js";
import { historyPage, requestByReference } from "./history-reads.js";

export const RECENT_LEDGER_LINES = 20;

/** The keyset cursor of a ledger line (`ledgerLines`' `olderThan` and `newerThan`): its time and id. */
export function ledgerCursor(line: { createdAt: Date; id: string }): string {
  return encodeCursor({ at: line.createdAt, id: line.id });
}

/** The buyer history's filters (every one optional). */
export interface HistoryFilter {
  /** text, image or video */
  modality?: string;
  /** requests made with this key of the account (a revoked one too) */
  keyId?: string;
  /** requests started at or after it */
  from?: Date;
  /** requests started before it */
  to?: Date;
}

/** Accounts: identity, balances, ceiling, buyer history and savings. Every method is scoped to one account. */
export class AccountService {
  constructor(
    private readonly db: Db,
    private readonly bus: EventBus,
    private readonly clock: Clock,
    /** the ceiling changed here: the router forgets its cached copy (this process) */
    private readonly onCeilingChanged?: (accountId: string) => void,
    /** streamed requests in flight (their records are written when they end) */
    private readonly inFlight?: InFlightRegistry,
    /** what requests in flight use of each holder's escrow slice of the buyer (the router's `escrow.inUse`) */
    private readonly escrowInUse?: (accountId: string, holders: readonly string[]) => Promise<Map<string, bigint>>,
    /** where the read-only pages (summary, ledger, history, savings) read: a replica when fresh enough */
    private readonly readDb?: ReadDb,
  ) {}

  /** the client of one read-only page of `accountId` (adapters/read-replica.ts); never for read-then-write */
  private read(accountId: string): Promise<Db> {
    return this.readDb ? this.readDb(accountId) : Promise.resolve(this.db);
  }

  /** Prisma `where` that scopes reads to the viewer's own account (GraphQL prismaField). */
  scopeFor(viewer: { accountId: string }): { id: string } {
    return { id: viewer.accountId };
  }

  /**
   * The caller's identity; `authProvider` as `authProviderFor` decides (a session's own provider).
   * @throws not_found when the account does not exist
   */
  async getIdentity(viewer: AccountCaller): Promise<AccountIdentity> {
    const a = await this.db.account.findUnique({ where: { id: viewer.accountId } });
    if (!a) throw new DomainError("not_found", "Account not found.");
    return { accountId: a.id, walletAddress: a.walletAddress, authProvider: authProviderFor(viewer, a.authProvider) };
  }

  /** The account's balances (`balancesOf`). Reads only. @throws not_found when the account does not exist */
  async balances(accountId: string): Promise<Balances> {
    const a = await liveBalanceColumns(this.db, accountId);
    if (!a) throw new DomainError("not_found", "Account not found.");
    return this.balancesOf(a);
  }

  /** `balancesOf` an account's live columns: asks the slices' holders only when it has slices. */
  private async balancesOf(a: BalanceColumns & { id: string; buyerEscrows: HeldSlice[] }): Promise<Balances> {
    const slices = a.buyerEscrows;
    const inUse =
      slices.length > 0 && this.escrowInUse
        ? await this.escrowInUse(
            a.id,
            slices.map((s) => s.holder),
          )
        : new Map<string, bigint>();
    return balancesOf(a, slices, inUse);
  }

  /** Balances, ceiling, funding flags and the most recent ledger lines of the caller's account. Reads only. */
  async getSummary(viewer: AccountCaller): Promise<AccountSummary> {
    const accountId = viewer.accountId;
    const db = await this.read(accountId);
    const [a, live, recentLedger] = await Promise.all([
      db.account.findUnique({ where: { id: accountId } }),
      liveBalanceColumns(db, accountId),
      accountLedgerLines(db, { accountId, limit: RECENT_LEDGER_LINES, now: this.clock.now() }),
    ]);
    if (!a || !live) throw new DomainError("not_found", "Account not found.");
    return {
      accountId: a.id,
      walletAddress: a.walletAddress,
      authProvider: authProviderFor(viewer, a.authProvider),
      maxPriceCentsPerDollar: a.maxPriceCentsPerDollar,
      balances: await this.balancesOf(live),
      hasEverFunded: a.hasEverFunded,
      firstFundedAt: a.firstFundedAt,
      createdAt: a.createdAt,
      recentLedger,
    };
  }

  /**
   * The account's ledger lines (`accountLedgerLines`: written entries and the lines its clears
   * imply), newest first after `olderThan` (a `ledgerCursor`), or oldest first after `newerThan`
   * with `oldestFirst` (a backward page); both bound a range. Reads only (GraphQL `Account.ledger`).
   * @throws invalid_request a cursor that is not one
   */
  async ledgerLines(input: {
    accountId: string;
    limit: number;
    olderThan?: string;
    newerThan?: string;
    oldestFirst?: boolean;
  }): Promise<LedgerLine[]> {
    return accountLedgerLines(await this.read(input.accountId), {
      accountId: input.accountId,
      now: this.clock.now(),
      limit: input.limit,
      olderThan: input.olderThan === undefined ? undefined : decodeCursor(input.olderThan),
      newerThan: input.newerThan === undefined ? undefined : decodeCursor(input.newerThan),
      oldestFirst: input.oldestFirst,
    });
  }

  /**
   * Sets the buyer ceiling (30–80). Nothing is clamped: an out-of-range value is a 400 and
   * nothing changes.
   */
  async setMaxPrice(input: { accountId: string; maxPriceCentsPerDollar: unknown }): Promise<{
    walletAddress: string;
    maxPriceCentsPerDollar: number;
  }> {
    const cents = parseCeiling(input.maxPriceCentsPerDollar);
    const a = await this.db.account.update({
      where: { id: input.accountId },
      data: { maxPriceCentsPerDollar: cents },
      select: { walletAddress: true, maxPriceCentsPerDollar: true },
    });
    // every router process plans this account's next request from the new ceiling
    this.onCeilingChanged?.(input.accountId);
    this.bus.publish("routingChanged", { kind: "ceiling_changed", id: input.accountId });
    this.bus.publish("balanceChanged", input.accountId, {
      accountId: input.accountId,
      kind: "max_price",
      at: this.clock.now().toISOString(),
    });
    return a;
  }

  /**
   * Buyer inference history, newest first, keyset-paginated, filtered by modality (text, image,
   * video), key and period (`from` inclusive, `to` exclusive, on the start). `export`: the CSV
   * export's pages (up to MAX_EXPORT_PAGE_SIZE rows, that many by default).
   * @throws invalid_request an unknown modality, a key id that is not a uuid, `to` not after `from`,
   *   a page size out of range, a bad cursor
   */
  async inferenceHistory(
    input: HistoryReader & { limit?: number; cursor?: string; export?: boolean } & HistoryFilter,
  ): Promise<Page<HistoryRow>> {
    const take = input.export
      ? pageSize(input.limit, MAX_EXPORT_PAGE_SIZE, MAX_EXPORT_PAGE_SIZE)
      : pageSize(input.limit);
    const after: CursorKey | undefined = input.cursor ? decodeCursor(input.cursor) : undefined;
    const modality = input.modality;
    if (modality !== undefined && modality !== "text" && modality !== "image" && modality !== "video") {
      throw new DomainError("invalid_request", "modality must be text, image or video.", { field: "modality" });
    }
    let keyId = input.keyId === undefined ? undefined : assertUuid(input.keyId, "keyId");
    if (input.onlyKeyId !== undefined) {
      // a key holding `inference` alone reads its own requests, not its account's other keys'
      if (keyId !== undefined && keyId !== input.onlyKeyId) throw insufficientScope("account", ["inference"]);
      keyId = input.onlyKeyId;
    }
    const { from, to } = input;
    for (const [field, at] of [
      ["from", from],
      ["to", to],
    ] as const) {
      if (at !== undefined && Number.isNaN(at.getTime())) {
        throw new DomainError("invalid_request", `${field} must be an ISO 8601 timestamp.`, { field });
      }
    }
    if (from && to && to.getTime() <= from.getTime()) {
      throw new DomainError("invalid_request", "to must be after from.", { field: "to" });
    }
    const db = await this.read(input.accountId);
    const rows = await historyPage(db, {
      accountId: input.accountId,
      modality,
      apiKeyId: keyId,
      from,
      to,
      after,
      now: this.clock.now(),
      limit: take + 1,
    });
    const items = rows.slice(0, take);
    const last = items[items.length - 1];
    return {
      items,
      nextCursor: rows.length > take && last ? encodeCursor({ at: last.startedAt, id: last.requestId }) : null,
    };
  }

  /**
   * One request of this account by support reference (GET /v1/agent/requests/{ref}).
   * @throws not_found when the reference is not on this account
   */
  async requestDetail(input: HistoryReader & { supportReference: string }): Promise<HistoryRow> {
    // a stream still in flight has no record yet (it is written when the stream ends): it is
    // `in_progress`. Looked at first: its in-flight record goes only once the record has committed.
    const live = await this.inFlight?.get(input.supportReference).catch(() => null);
    const mine = (keyId: string | null | undefined) => input.onlyKeyId === undefined || keyId === input.onlyKeyId;
    if (live && live.accountId === input.accountId && mine(live.apiKeyId)) {
      return {
        requestId: live.requestId,
        supportReference: live.supportReference,
        keyId: null,
        keyName: null,
        route: live.route,
        modality: "text",
        model: live.model,
        stream: live.stream,
        status: "in_progress",
        errorCode: null,
        maxPriceCents: live.maxPriceCents,
        clearingPriceCents: null,
        promptTokens: null,
        completionTokens: null,
        cachedTokens: null,
        cacheWriteTokens: null,
        burnMicroDiem: null,
        costMicroUsdc: null,
        attempts: 1,
        startedAt: new Date(live.startedAt),
        firstByteAt: null,
        completedAt: null,
      };
    }
    const db = await this.read(input.accountId);
    const row = await requestByReference(db, input.supportReference);
    if (!row || row.accountId !== input.accountId || !mine(row.keyId)) {
      throw new DomainError("not_found", "No request with this support reference on this account.");
    }
    const { accountId: _, ...detail } = row;
    return detail;
  }

  /**
   * What the buyer saved against face value and against their ceiling, over every clear: those kept
   * and, for retained months, what their clears summed (`clear_closings`).
   */
  async savings(accountId: string): Promise<Savings> {
    const db = await this.read(accountId);
    const [s] = await db.$queryRaw<
      { clears: bigint; face: bigint; at_ceiling: bigint; paid: bigint }[]
    >`SELECT COALESCE(SUM(x.clears), 0)::bigint AS clears, COALESCE(SUM(x.face), 0)::bigint AS face,
             COALESCE(SUM(x.at_ceiling), 0)::bigint AS at_ceiling, COALESCE(SUM(x.paid), 0)::bigint AS paid
        FROM (SELECT COUNT(*) AS clears, SUM(burn_micro_diem) AS face,
                     SUM((burn_micro_diem * ceiling_cents) / 100) AS at_ceiling, SUM(gross_micro_usdc) AS paid
                FROM clears WHERE buyer_account_id = ${accountId}::uuid AND refunded_at IS NULL
              UNION ALL
              SELECT SUM(clears), SUM(burn_micro_diem), SUM(at_ceiling_micro_usdc), SUM(gross_micro_usdc)
                FROM clear_closings WHERE buyer_account_id = ${accountId}::uuid) x`;
    const face = BigInt(s?.face ?? 0n);
    const atCeiling = BigInt(s?.at_ceiling ?? 0n);
    const paid = BigInt(s?.paid ?? 0n);
    return {
      clears: Number(s?.clears ?? 0n),
      faceMicroUsdc: face,
      atCeilingMicroUsdc: atCeiling,
      paidMicroUsdc: paid,
      savedVsFaceMicroUsdc: face - paid,
      savedVsCeilingMicroUsdc: atCeiling - paid,
    };
  }
}
