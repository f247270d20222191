// Bundles the app (app.jsx, its CSS, index.html) into a static directory with esbuild, from
// the installed node_modules only (no network):
//   node tests/react/build.mjs OUT_DIR          build into OUT_DIR
//   node tests/react/build.mjs --cache DIR      build into DIR/<hash of the app's sources and
//                                               package-lock.json>, unless it is there already;
//                                               older builds in DIR are removed
// Prints one JSON line: {"out": the directory, "cached": true when nothing was built, "ms",
// "bytes": {file: size}}.
import { createHash } from "node:crypto";
import { copyFileSync, existsSync, readFileSync, readdirSync, renameSync, rmSync, statSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";

const here = dirname(fileURLToPath(import.meta.url));
const sources = ["app.jsx", "index.html", "build.mjs", "package-lock.json"];
const started = Date.now();

async function bundle(out) {
  await build({
    entryPoints: { app: join(here, "app.jsx") },
    outdir: out,
    bundle: true,
    format: "esm",
    // CopilotKit loads its heavy parts (diagrams, highlighting) on demand: separate chunks.
    splitting: true,
    chunkNames: "chunks/[name]-[hash]",
    platform: "browser",
    target: "es2022",
    jsx: "automatic",
    minify: true,
    // A production build, as an app ships: CopilotKit's inspector stays off.
    define: { "process.env.NODE_ENV": '"production"' },
    loader: { ".woff": "file", ".woff2": "file", ".ttf": "file", ".svg": "file", ".png": "file" },
    logLevel: "warning",
    absWorkingDir: here,
  });
  copyFileSync(join(here, "index.html"), join(out, "index.html"));
}

let out;
let cached = false;
if (process.argv[2] === "--cache") {
  const dir = resolve(process.argv[3]);
  const hash = createHash("sha256");
  for (const f of sources) hash.update(f).update(readFileSync(join(here, f)));
  const key = hash.digest("hex").slice(0, 16);
  out = join(dir, key);
  if (existsSync(join(out, "index.html"))) {
    cached = true;
  } else {
    // Built aside, then moved in whole: a concurrent run never serves half a bundle.
    const aside = join(dir, `${key}.tmp-${process.pid}`);
    await bundle(aside);
    try {
      renameSync(aside, out);
    } catch (e) {
      rmSync(aside, { recursive: true, force: true });
      if (!existsSync(join(out, "index.html"))) throw e;
    }
    for (const old of readdirSync(dir)) {
      if (old !== key && !old.includes(".tmp-")) rmSync(join(dir, old), { recursive: true, force: true });
    }
  }
} else if (process.argv[2]) {
  out = resolve(process.argv[2]);
  await bundle(out);
} else {
  console.error("usage: build.mjs OUT_DIR | build.mjs --cache DIR");
  process.exit(2);
}
const bytes = Object.fromEntries(["index.html", "app.js", "app.css"].map((f) => [f, statSync(join(out, f)).size]));
console.log(JSON.stringify({ out, cached, ms: Date.now() - started, bytes }));
