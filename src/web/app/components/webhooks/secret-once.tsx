import { useState } from "react";

/**
 * A signing secret the server shows this once (at registration or rotation): a copy button and a
 * clear note. Dismissed, it is gone from the page; nothing keeps it.
 */
export function SecretOnce(props: { secret: string; url: string; rotated: boolean; onDismiss: () => void }) {
  const [copied, setCopied] = useState(false);
  return (
    <div className="callout secret" role="status" data-testid="webhook-secret">
      <p>
        <strong>Copy the signing secret now: it is shown once.</strong>{" "}
        {props.rotated ? "The old secret stopped working at once. " : null}
        Verify each delivery to <span className="mono">{props.url}</span> with it (Standard Webhooks,{" "}
        <code>new Webhook(secret).verify(body, headers)</code>).
      </p>
      <div className="row">
        <code className="secret-value" data-testid="webhook-secret-value">
          {props.secret}
        </code>
        <button
          type="button"
          className="secondary"
          onClick={() => {
            void navigator.clipboard?.writeText(props.secret).then(
              () => setCopied(true),
              () => setCopied(false),
            );
          }}
        >
          {copied ? "Copied" : "Copy secret"}
        </button>
        <button type="button" className="secondary" onClick={props.onDismiss}>
          I stored it
        </button>
      </div>
    </div>
  );
}
