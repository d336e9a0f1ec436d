import { useEffect, useState } from "react";
import { APP_BASE } from "./config";

/** The app's four views, one path each under {web_url} (history API; the server answers index.html). */
export type Route = "market" | "sign-in" | "buyer" | "supplier";

const PATHS: Record<Route, string> = { market: "/", "sign-in": "/sign-in", buyer: "/buyer", supplier: "/supplier" };

export function pathOf(route: Route): string {
  return `${APP_BASE}${PATHS[route]}`;
}

export function routeOf(pathname: string): Route {
  const rest = pathname.startsWith(APP_BASE) ? pathname.slice(APP_BASE.length) : pathname;
  const clean = rest.replace(/\/+$/, "") || "/";
  for (const [route, path] of Object.entries(PATHS) as [Route, string][]) if (path === clean) return route;
  return "market";
}

export function navigate(route: Route): void {
  const target = pathOf(route);
  if (window.location.pathname !== target) window.history.pushState({}, "", target);
  window.dispatchEvent(new PopStateEvent("popstate"));
}

export function useRoute(): Route {
  const [route, setRoute] = useState<Route>(() => routeOf(window.location.pathname));
  useEffect(() => {
    const on = () => setRoute(routeOf(window.location.pathname));
    window.addEventListener("popstate", on);
    return () => window.removeEventListener("popstate", on);
  }, []);
  return route;
}
