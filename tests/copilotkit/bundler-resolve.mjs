// A module resolution hook for session.mjs: a package's ES module build (package.json
// "module") where it has one, as the bundlers that build CopilotKit apps resolve it.
// Node resolves "main" instead; for fast-json-patch 3.1.1 (used by @ag-ui/client 0.0.48,
// which @copilotkitnext/core pins) that is CommonJS whose named exports Node cannot see, and
// every STATE_DELTA would fail with "applyPatch is not a function" — in Node only.
import { readFileSync } from "node:fs";

export async function resolve(specifier, context, next) {
  const resolved = await next(specifier, context);
  if (specifier !== "fast-json-patch") return resolved;
  const manifest = new URL("package.json", resolved.url);
  const { module } = JSON.parse(readFileSync(manifest, "utf8"));
  return module ? { url: new URL(module, manifest).href, format: "module", shortCircuit: true } : resolved;
}
