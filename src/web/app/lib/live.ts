import { useEffect, useReducer, useRef } from "react";
import { type AnyVariables, type DocumentInput, useSubscription } from "urql";

/**
 * Live data without polling: a subscription event triggers `onEvent`; bursts (a busy market
 * clears many times a second) are coalesced into one call per `waitMs`, trailing.
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

export function useCoalesced(fn: () => void, waitMs: number): () => void {
  const ref = useRef(fn);
  ref.current = fn;
  const timer = useRef<ReturnType<typeof setTimeout> | undefined>(undefined);
  useEffect(() => () => clearTimeout(timer.current), []);
  const trigger = useRef(() => {
    if (timer.current !== undefined) return;
    timer.current = setTimeout(() => {
      timer.current = undefined;
      ref.current();
    }, waitMs);
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
