import { type ReactNode, useEffect, useId, useRef } from "react";
import { errorInfo } from "../lib/graphql";

/** A titled panel; its heading labels the region for screen readers. */
export function Panel(props: { title: string; children: ReactNode; actions?: ReactNode; className?: string }) {
  const id = useId();
  return (
    <section className={`panel ${props.className ?? ""}`} aria-labelledby={id}>
      <header className="panel-head">
        <h2 id={id}>{props.title}</h2>
        {props.actions}
      </header>
      {props.children}
    </section>
  );
}

/** One headline figure. `testId` lets the end-to-end tests read it. */
export function Stat(props: { label: string; value: ReactNode; hint?: ReactNode; title?: string; testId?: string }) {
  return (
    <div className="stat">
      <dt>{props.label}</dt>
      <dd title={props.title} data-testid={props.testId}>
        {props.value}
      </dd>
      {props.hint ? <dd className="stat-hint">{props.hint}</dd> : null}
    </div>
  );
}

export function Stats(props: { children: ReactNode; label?: string }) {
  return (
    <dl className="stats" aria-label={props.label}>
      {props.children}
    </dl>
  );
}

export function Empty(props: { children: ReactNode }) {
  return (
    <p className="empty" role="status">
      {props.children}
    </p>
  );
}

export function ErrorNote(props: { error: unknown; what?: string; onRetry?: () => void }) {
  const { code, message } = errorInfo(props.error);
  return (
    <div className="error-note" role="alert">
      <p>
        <strong>{props.what ? `Could not load ${props.what}.` : "Something went wrong."}</strong> {message}
        {code ? <span className="code"> ({code})</span> : null}
      </p>
      {props.onRetry ? (
        <button type="button" className="secondary" onClick={props.onRetry}>
          Try again
        </button>
      ) : null}
    </div>
  );
}

export function Loading(props: { what: string }) {
  return (
    <p className="loading" role="status" aria-live="polite">
      Loading {props.what}…
    </p>
  );
}

/** A horizontally scrollable table with a caption (phone widths keep every column reachable). */
export function Table(props: { caption: string; children: ReactNode; testId?: string }) {
  return (
    // biome-ignore lint/a11y/noNoninteractiveTabindex: a scrollable region must be reachable by keyboard
    <section className="table-wrap" tabIndex={0} aria-label={props.caption}>
      <table data-testid={props.testId}>
        <caption className="sr-only">{props.caption}</caption>
        {props.children}
      </table>
    </section>
  );
}

/** A modal dialog on the native <dialog> (focus trap, Escape to close). */
export function Dialog(props: { title: string; open: boolean; onClose: () => void; children: ReactNode }) {
  const ref = useRef<HTMLDialogElement>(null);
  const id = useId();
  useEffect(() => {
    const d = ref.current;
    if (!d) return;
    if (props.open && !d.open) d.showModal();
    if (!props.open && d.open) d.close();
  }, [props.open]);
  return (
    <dialog ref={ref} aria-labelledby={id} onClose={props.onClose} className="dialog">
      <header className="panel-head">
        <h2 id={id}>{props.title}</h2>
        <button type="button" className="secondary" onClick={props.onClose}>
          Close
        </button>
      </header>
      {props.open ? props.children : null}
    </dialog>
  );
}

/** A polite live region for the outcome of an action. */
export function Notice(props: { tone?: "ok" | "error"; children: ReactNode }) {
  if (!props.children) return null;
  return (
    <p
      className={`notice ${props.tone === "error" ? "notice-error" : "notice-ok"}`}
      role={props.tone === "error" ? "alert" : "status"}
    >
      {props.children}
    </p>
  );
}

export function StatusBadge(props: { status: string }) {
  const s = props.status.toLowerCase();
  return <span className={`badge badge-${s.replace(/[^a-z_]/g, "")}`}>{s.replace(/_/g, " ")}</span>;
}
