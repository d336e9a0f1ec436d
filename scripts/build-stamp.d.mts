/** scripts/build-stamp.mjs */
export const ROOT: string;
export function sourceStamp(): string;
