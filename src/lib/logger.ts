import { pino } from "pino";

/**
 * Structured JSON logs. Never log secrets: API keys, upstream keys, signatures, session ids.
 * Log key prefixes instead. The level comes from config (LOG_LEVEL) via `setLogLevel`.
 */
export const logger = pino({
  level: "info",
  base: undefined,
  redact: {
    paths: ["*.authorization", "*.apiKey", "*.upstreamApiKey", "*.secret", "*.privateKey", "*.signature", "*.cookie"],
    censor: "[redacted]",
  },
});

export type Logger = typeof logger;

export function setLogLevel(level: string): void {
  logger.level = level;
}
