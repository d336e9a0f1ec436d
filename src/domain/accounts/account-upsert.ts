import type { Prisma } from "../../generated/prisma/client.js";
import { DEFAULT_CEILING_CENTS } from "../../lib/money.js";
import type { AuthProviderName } from "./account-types.js";

type Tx = Prisma.TransactionClient;

export interface UpsertedAccount {
  id: string;
  walletAddress: string;
  authProvider: AuthProviderName;
  created: boolean;
}

/**
 * Race-free account upsert by wallet (INSERT … ON CONFLICT): concurrent first sign-ins or signups
 * of one wallet all get the same row, none fails on the unique index.
 *   - `idp`: creates or upgrades any account to `idp` and records the IdP subject;
 *   - `siwe`: creates, or upgrades an `x402` account to `siwe` (never downgrades `idp`);
 *   - `x402`: creates with the given ceiling, or leaves an existing account untouched.
 */
export async function upsertAccountByWallet(
  tx: Tx,
  input: { walletAddress: string; provider: AuthProviderName; idpSubject?: string; maxPriceCentsPerDollar?: number },
): Promise<UpsertedAccount> {
  const wallet = input.walletAddress.toLowerCase();
  const ceiling = input.maxPriceCentsPerDollar ?? DEFAULT_CEILING_CENTS;
  const rows =
    input.provider === "idp"
      ? await tx.$queryRaw<{ id: string; wallet_address: string; auth_provider: AuthProviderName; created: boolean }[]>`
          INSERT INTO accounts (wallet_address, auth_provider, idp_subject, max_price_cents_per_dollar)
          VALUES (${wallet}, 'idp', ${input.idpSubject ?? null}, ${ceiling})
          ON CONFLICT (wallet_address) DO UPDATE
             SET auth_provider = 'idp', idp_subject = EXCLUDED.idp_subject, updated_at = now()
          RETURNING id, wallet_address, auth_provider::text AS auth_provider, (xmax = 0) AS created`
      : input.provider === "siwe"
        ? await tx.$queryRaw<
            { id: string; wallet_address: string; auth_provider: AuthProviderName; created: boolean }[]
          >`
            INSERT INTO accounts (wallet_address, auth_provider, max_price_cents_per_dollar)
            VALUES (${wallet}, 'siwe', ${ceiling})
            ON CONFLICT (wallet_address) DO UPDATE
               SET auth_provider = CASE WHEN accounts.auth_provider = 'x402' THEN 'siwe'::auth_provider ELSE accounts.auth_provider END,
                   updated_at = now()
            RETURNING id, wallet_address, auth_provider::text AS auth_provider, (xmax = 0) AS created`
        : await tx.$queryRaw<
            { id: string; wallet_address: string; auth_provider: AuthProviderName; created: boolean }[]
          >`
            INSERT INTO accounts (wallet_address, auth_provider, max_price_cents_per_dollar)
            VALUES (${wallet}, 'x402', ${ceiling})
            ON CONFLICT (wallet_address) DO UPDATE SET updated_at = accounts.updated_at
            RETURNING id, wallet_address, auth_provider::text AS auth_provider, (xmax = 0) AS created`;
  const r = rows[0];
  if (!r) throw new Error("account upsert returned nothing");
  return { id: r.id, walletAddress: r.wallet_address, authProvider: r.auth_provider, created: r.created };
}
