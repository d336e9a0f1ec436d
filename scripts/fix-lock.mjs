// Adds stub lock entries for optional platform packages that the registry here does not serve
// (see STACK_NOTES "npm 11 + reproducible npm ci"): without them `npm ci` fails with
// "Missing: X from lock file". Run after every `npm install` that adds dependencies.
import { readFileSync, writeFileSync } from "node:fs";

const lock = JSON.parse(readFileSync("package-lock.json", "utf8"));
const pkgs = lock.packages;
let added = 0;
for (const [path, entry] of Object.entries(pkgs)) {
  for (const [dep, range] of Object.entries(entry.optionalDependencies ?? {})) {
    // resolve like node: nested first, then hoisted
    const nested = `${path ? `${path}/` : ""}node_modules/${dep}`;
    const hoisted = `node_modules/${dep}`;
    if (pkgs[nested] || pkgs[hoisted]) continue;
    const version = String(range).replace(/^[\^~=]/, "");
    const os = /darwin/.test(dep)
      ? ["darwin"]
      : /win32|windows/.test(dep)
        ? ["win32"]
        : /freebsd/.test(dep)
          ? ["freebsd"]
          : /android/.test(dep)
            ? ["android"]
            : /linux/.test(dep)
              ? ["linux"]
              : ["sunos"];
    const cpu = /arm64|aarch64/.test(dep)
      ? ["arm64"]
      : /arm/.test(dep)
        ? ["arm"]
        : /ia32|x86/.test(dep)
          ? ["ia32"]
          : ["x64"];
    pkgs[hoisted] = { version, os, cpu, ...(/musl/.test(dep) ? { libc: ["musl"] } : {}), optional: true };
    added++;
    console.log(`stubbed ${hoisted}@${version} (${os}/${cpu})`);
  }
}
writeFileSync("package-lock.json", `${JSON.stringify(lock, null, 2)}\n`);
console.log(`${added} stub(s) added`);
