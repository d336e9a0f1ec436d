import { type FormEvent, useState } from "react";
import { Empty, Notice, Panel } from "../../components/ui";
import { parseDecimal6 } from "../../lib/money";
import type { Session } from "../../lib/session";
import { devWalletProvider, injectedProvider, rememberedDevWallet, topUp } from "../../lib/wallet";

export function TopUpPanel(props: { session: Session; walletAddress: string; onDone: () => void }) {
  const { config } = props.session;
  const [amount, setAmount] = useState("10");
  const [busy, setBusy] = useState(false);
  const [result, setResult] = useState<{ tone: "ok" | "error"; text: string } | undefined>();
  const dev = rememberedDevWallet();
  const devMatches = dev && dev.address.toLowerCase() === props.walletAddress.toLowerCase() ? dev : undefined;
  const provider = devMatches ? devWalletProvider(devMatches, config.chainId) : injectedProvider();

  async function submit(e: FormEvent) {
    e.preventDefault();
    const micro = parseDecimal6(amount);
    if (micro === undefined || micro < 1_000_000n || micro > 1_000_000_000n) {
      setResult({ tone: "error", text: "Enter an amount from 1 to 1000 USDC (at most six decimals)." });
      return;
    }
    if (!provider) return;
    setBusy(true);
    setResult(undefined);
    try {
      const r = await topUp(config, provider, { amountMicroUsdc: micro, sessionWallet: props.walletAddress });
      setResult({
        tone: "ok",
        text: `Paid ${r.topUpAmountUsdc} USDC. It is pending until ${config.confirmationBlocks} blocks confirm it; this page updates when it does.`,
      });
      props.onDone();
    } catch (err) {
      setResult({ tone: "error", text: err instanceof Error ? err.message : String(err) });
    } finally {
      setBusy(false);
    }
  }

  return (
    <Panel title="Top up">
      {provider ? (
        <form className="form" onSubmit={submit}>
          <p>
            Pay USDC on Base with x402 from{" "}
            {devMatches ? `the dev wallet (${devMatches.label})` : "your browser wallet"}. The payer must be the
            signed-in wallet.
          </p>
          <label>
            Amount (USDC)
            <input
              name="amount"
              inputMode="decimal"
              value={amount}
              onChange={(e) => setAmount(e.target.value)}
              required
            />
          </label>
          <button type="submit" disabled={busy}>
            {busy ? "Waiting for the payment…" : "Top up"}
          </button>
        </form>
      ) : (
        <Empty>
          No browser wallet found. Install an EIP-1193 wallet to top up here, or fund from an agent with POST
          /v1/x402/refill and an API key.
        </Empty>
      )}
      {result ? <Notice tone={result.tone}>{result.text}</Notice> : null}
    </Panel>
  );
}
