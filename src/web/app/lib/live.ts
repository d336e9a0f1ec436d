import { useEffect, useReducer, useRef } from "react";
import { type AnyVariables, type DocumentInput, useSubscription } from "urql";

/**
 * Live data without polling: a subscription event triggers `onEvent` (pair it with `useCoalesced`:
 * a busy market clears many times a second).
 */
export function useEvent<T>(
  query: DocumentInput<T, AnyVariables>,
  onEvent: (data: T) => void,
  opts: { pause?: boolean } = {},
): { error: unknown } {
  const ref = useRef(onEvent);
  ref.current = onEvent;
  const [res] = useSubscription<T, T>({ query, pause: opts.pause }, (_prev, data) => {
    ref.current(data);
    return data;
  });
  return { error: res.error };
}

/** Events closer together than this are one burst (one re-read). */
const BURST_MS = 100;

/**
 * Throttled re-reads: the first event of a burst re-reads after `BURST_MS`; then at most one
 * re-read per `minIntervalMs`, the last one trailing so the final state is always fetched. The
 * interval keeps a dashboard inside the API's per-caller GraphQL cost budget however busy the
 * market is (docs/decisions.md "Web app").
 */
export function useCoalesced(fn: () => void, minIntervalMs: number): () => void {
  const ref = useRef(fn);
  ref.current = fn;
  const state = useRef<{ timer?: ReturnType<typeof setTimeout>; last: number }>({ last: 0 });
  useEffect(() => () => clearTimeout(state.current.timer), []);
  const trigger = useRef(() => {
    const s = state.current;
    if (s.timer !== undefined) return; // a re-read is already scheduled and will see this change
    const wait = Math.max(BURST_MS, s.last + minIntervalMs - Date.now());
    s.timer = setTimeout(() => {
      s.timer = undefined;
      s.last = Date.now();
      ref.current();
    }, wait);
  });
  return trigger.current;
}

/** A value that re-renders every `ms` (the midnight countdown; no network). */
export function useNow(ms: number): Date {
  const [, force] = useReducer((n: number) => n + 1, 0);
  useEffect(() => {
    const t = setInterval(force, ms);
    return () => clearInterval(t);
  }, [ms]);
  return new Date();
}
