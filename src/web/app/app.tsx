import { lazy, type MouseEvent, type ReactNode, Suspense, useCallback, useEffect, useMemo, useState } from "react";
import { Provider, useQuery } from "urql";
import { createCache } from "./cache";
import { ErrorNote, Loading } from "./components/ui";
import { type AppConfig, loadAppConfig } from "./lib/config";
import { createGraphqlClient } from "./lib/graphql";
import { signOut } from "./lib/http";
import { navigate, pathOf, type Route, useRoute } from "./lib/router";
import type { Session } from "./lib/session";
import { shortAddress } from "./lib/time";
import { ViewerIdentityQuery } from "./lib/viewer";
import { MarketView } from "./views/market/index";

// the signed-in views (and viem, which signs for them) load when first opened: the public market
// page does not carry them
const SignInView = lazy(() => import("./views/sign-in/index").then((m) => ({ default: m.SignInView })));
const BuyerView = lazy(() => import("./views/buyer/index").then((m) => ({ default: m.BuyerView })));
const SupplierView = lazy(() => import("./views/supplier/index").then((m) => ({ default: m.SupplierView })));

export function App() {
  const [config, setConfig] = useState<AppConfig | undefined>();
  const [error, setError] = useState<unknown>();
  const [epoch, setEpoch] = useState(0);
  useEffect(() => {
    loadAppConfig().then(setConfig, setError);
  }, []);
  // biome-ignore lint/correctness/useExhaustiveDependencies: `epoch` makes a new client (and subscriptions) for a new credential
  const gql = useMemo(() => (config ? createGraphqlClient(config, createCache()) : undefined), [config, epoch]);
  useEffect(() => () => gql?.dispose(), [gql]);
  const refreshSession = useCallback(() => setEpoch((n) => n + 1), []);

  if (error) return <ErrorNote error={error} what="this deployment's settings" />;
  if (!config || !gql) return <Loading what="the market" />;
  return (
    <Provider value={gql.client}>
      <Shell config={config} refreshSession={refreshSession} />
    </Provider>
  );
}

function Shell(props: { config: AppConfig; refreshSession: () => void }) {
  const route = useRoute();
  const [viewerRes] = useQuery({ query: ViewerIdentityQuery, requestPolicy: "network-only" });
  const viewer = viewerRes.data?.viewer ?? null;
  const session: Session = { config: props.config, viewer, refreshSession: props.refreshSession };
  const checking = viewerRes.fetching && !viewerRes.data;

  useEffect(() => {
    const titles: Record<Route, string> = {
      market: "Market",
      "sign-in": "Sign in",
      buyer: "Buyer",
      supplier: "Supplier",
    };
    document.title = `${titles[route]} · svc inference market`;
  }, [route]);

  async function onSignOut() {
    await signOut(props.config);
    props.refreshSession();
    navigate("market");
  }

  let body: ReactNode;
  if (route === "market") body = <MarketView />;
  else if (route === "sign-in") body = <SignInView session={session} />;
  else if (checking) body = <Loading what="your account" />;
  else if (!viewer) body = <SignInView session={session} reason={`Sign in to see the ${route} dashboard.`} />;
  else if (route === "buyer") body = <BuyerView session={session} />;
  else body = <SupplierView session={session} />;

  return (
    <>
      <a className="skip-link" href="#main">
        Skip to content
      </a>
      <header className="top">
        <a className="brand" href={pathOf("market")} onClick={(e) => go(e, "market")}>
          svc<span aria-hidden="true">·</span>market
        </a>
        <nav aria-label="Main">
          <ul>
            <NavLink route="market" current={route} label="Market" />
            <NavLink route="buyer" current={route} label="Buyer" />
            <NavLink route="supplier" current={route} label="Supplier" />
          </ul>
        </nav>
        <div className="who">
          {viewer ? (
            <>
              <span className="wallet" title={viewer.walletAddress} data-testid="signed-in-wallet">
                {shortAddress(viewer.walletAddress)}
              </span>
              <button type="button" className="secondary" onClick={onSignOut}>
                Sign out
              </button>
            </>
          ) : (
            <a className="button" href={pathOf("sign-in")} onClick={(e) => go(e, "sign-in")}>
              Sign in
            </a>
          )}
        </div>
      </header>
      <main id="main" tabIndex={-1}>
        <Suspense fallback={<Loading what="the page" />}>{body}</Suspense>
      </main>
      <footer className="foot">
        <p>
          Prices in cents per $1 of face value. API: <code>{props.config.baseUrl}/v1</code> ·{" "}
          <a href={`${props.config.baseUrl}/llms.txt`}>llms.txt</a> ·{" "}
          <a href={`${props.config.baseUrl}/graphql`}>GraphQL</a>
          {props.config.mode === "local" ? " · local mode" : null}
        </p>
      </footer>
    </>
  );
}

function go(e: MouseEvent, route: Route) {
  if (e.metaKey || e.ctrlKey || e.shiftKey || e.button !== 0) return;
  e.preventDefault();
  navigate(route);
  document.getElementById("main")?.focus();
}

function NavLink(props: { route: Route; current: Route; label: string }) {
  const active = props.route === props.current;
  return (
    <li>
      <a
        href={pathOf(props.route)}
        aria-current={active ? "page" : undefined}
        className={active ? "active" : undefined}
        onClick={(e) => go(e, props.route)}
      >
        {props.label}
      </a>
    </li>
  );
}
