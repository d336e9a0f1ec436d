/** The `data:` payloads of an SSE body, one per event (a multi-line payload joined by newlines). */
export function frames(text: string): string[] {
  return text
    .split("\n\n")
    .map((f) =>
      f
        .split("\n")
        .filter((l) => l.startsWith("data: "))
        .map((l) => l.slice(6))
        .join("\n"),
    )
    .filter((d) => d !== "");
}
