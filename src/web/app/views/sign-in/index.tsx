import { type FormEvent, useEffect, useState } from "react";
import { Notice, Panel } from "../../components/ui";
import { navigate } from "../../lib/router";
import type { Session } from "../../lib/session";
import { shortAddress } from "../../lib/time";
import {
  type DevWallet,
  devWalletProvider,
  fetchDevWallets,
  injectedProvider,
  mintDevIdpTokens,
  rememberDevWallet,
  signInWithEthereum,
  signInWithIdp,
} from "../../lib/wallet";

/** Sign-in: a browser wallet (SIWE), the identity provider's tokens, or (local mode) a dev wallet. */
export function SignInView(props: { session: Session; reason?: string }) {
  const { config, viewer } = props.session;
  const [busy, setBusy] = useState<string | undefined>();
  const [error, setError] = useState<string | undefined>();
  const [dev, setDev] = useState<{ wallets: DevWallet[]; idpTokens: boolean } | undefined>();
  const injected = injectedProvider();

  useEffect(() => {
    if (config.devSignIn) fetchDevWallets().then(setDev, () => setDev(undefined));
  }, [config.devSignIn]);

  async function run(label: string, action: () => Promise<void>, then: "buyer" | "supplier") {
    setBusy(label);
    setError(undefined);
    try {
      await action();
      props.session.refreshSession();
      navigate(then);
    } catch (e) {
      setError(e instanceof Error ? e.message : String(e));
    } finally {
      setBusy(undefined);
    }
  }

  return (
    <div className="view sign-in-view">
      <div className="view-head">
        <h1>Sign in</h1>
        <p className="lede">
          {props.reason ?? "One account per wallet: the same sign-in opens the buyer and the supplier dashboards."}
          {viewer ? ` You are signed in as ${shortAddress(viewer.walletAddress)}.` : null}
        </p>
      </div>
      <Notice tone="error">{error}</Notice>
      {busy ? <Notice>{busy}…</Notice> : null}

      {config.devSignIn && dev ? (
        <Panel title="Dev wallets (local mode)">
          <p>
            One click signs in with Sign-In with Ethereum as one of the seeded wallets (anvil's public test keys; this
            panel exists only on a local-mode server). The buyers hold local USDC for top-ups.
          </p>
          <ul className="wallet-list">
            {dev.wallets.map((w) => (
              <li key={w.address}>
                <button
                  type="button"
                  disabled={busy !== undefined}
                  data-testid={`dev-wallet-${w.role}`}
                  onClick={() =>
                    run(
                      `Signing in as ${w.label}`,
                      async () => {
                        await signInWithEthereum(config, devWalletProvider(w, config.chainId));
                        rememberDevWallet(w);
                      },
                      w.role === "supplier" ? "supplier" : "buyer",
                    )
                  }
                >
                  {w.label} <span className="mono">{shortAddress(w.address)}</span>
                </button>
              </li>
            ))}
          </ul>
        </Panel>
      ) : null}

      <Panel title="Browser wallet">
        <p>Sign a Sign-In with Ethereum message with your wallet extension. Nothing is sent on chain.</p>
        {injected ? (
          <button
            type="button"
            disabled={busy !== undefined}
            onClick={() =>
              run(
                "Waiting for your wallet",
                async () => {
                  await signInWithEthereum(config, injected);
                  rememberDevWallet(undefined);
                },
                "buyer",
              )
            }
          >
            Sign in with wallet
          </button>
        ) : (
          <p className="empty">
            No browser wallet found. Install an EIP-1193 wallet extension
            {config.devSignIn ? ", or use a dev wallet above" : ", or use the identity provider below"}.
          </p>
        )}
      </Panel>

      <IdpPanel session={props.session} canMint={dev?.idpTokens ?? false} busy={busy !== undefined} run={run} />
    </div>
  );
}

function IdpPanel(props: {
  session: Session;
  canMint: boolean;
  busy: boolean;
  run: (label: string, action: () => Promise<void>, then: "buyer" | "supplier") => Promise<void>;
}) {
  const { config } = props.session;
  const [walletAddress, setWallet] = useState("");
  const [accessToken, setAccess] = useState("");
  const [identityToken, setIdentity] = useState("");
  const [note, setNote] = useState<string | undefined>();

  function submit(e: FormEvent) {
    e.preventDefault();
    void props.run(
      "Verifying with the identity provider",
      async () => {
        await signInWithIdp(config, {
          accessToken: accessToken.trim(),
          identityToken: identityToken.trim(),
          walletAddress: walletAddress.trim(),
        });
        rememberDevWallet(undefined);
      },
      "buyer",
    );
  }

  async function mint() {
    setNote(undefined);
    try {
      const t = await mintDevIdpTokens(walletAddress.trim());
      setAccess(t.accessToken);
      setIdentity(t.identityToken);
      setNote("Local identity-provider tokens minted for this wallet.");
    } catch (e) {
      setNote(e instanceof Error ? e.message : String(e));
    }
  }

  return (
    <Panel title="Identity provider">
      <p>
        The identity provider's login widget hands the app an access token and an identity token for a linked wallet;
        the service verifies both and opens the session.
        {config.idpConfigured ? null : " This deployment has no identity provider configured."}
      </p>
      <form className="form" onSubmit={submit}>
        <label>
          Wallet address
          <input
            name="walletAddress"
            value={walletAddress}
            onChange={(e) => setWallet(e.target.value)}
            pattern="^0x[0-9a-fA-F]{40}$"
            placeholder="0x…"
            required
            autoComplete="off"
            spellCheck={false}
          />
        </label>
        <label>
          Access token
          <textarea
            name="accessToken"
            value={accessToken}
            onChange={(e) => setAccess(e.target.value)}
            required
            rows={2}
            spellCheck={false}
          />
        </label>
        <label>
          Identity token
          <textarea
            name="identityToken"
            value={identityToken}
            onChange={(e) => setIdentity(e.target.value)}
            required
            rows={2}
            spellCheck={false}
          />
        </label>
        <div className="row">
          <button type="submit" disabled={props.busy || !config.idpConfigured}>
            Sign in with identity provider
          </button>
          {props.canMint ? (
            <button
              type="button"
              className="secondary"
              onClick={mint}
              disabled={!/^0x[0-9a-fA-F]{40}$/.test(walletAddress.trim())}
            >
              Mint local tokens
            </button>
          ) : null}
        </div>
        {note ? <p role="status">{note}</p> : null}
      </form>
    </Panel>
  );
}
