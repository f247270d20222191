// Runs recorded AG-UI event streams through the event verifier (`verifyEvents`) of each
// @ag-ui/client version named: what a client does with every stream it reads, replays
// included (ag-ui #2813: a replay that ends with a message or tool call still open is
// refused). Usage:
//   node verify.mjs < '{"clients": ["<dir with node_modules/@ag-ui/client>", ...],
//                       "streams": [{"name": "...", "events": [AG-UI event, ...]}]}'
// Prints one JSON object: {"<client version>": {"<stream name>": "ok" | "<the error>"}}.
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";

const input = JSON.parse(readFileSync(0, "utf8"));
const report = {};
for (const dir of input.clients) {
  // Each client with its own rxjs, as an app bundling that version has it.
  const require = createRequire(path.resolve(dir, "package.json"));
  const client = require("@ag-ui/client");
  const { from, lastValueFrom, toArray } = require("rxjs");
  const version = require("@ag-ui/client/package.json").version;
  const results = {};
  for (const stream of input.streams) {
    try {
      await lastValueFrom(from(stream.events).pipe(client.verifyEvents(false), toArray()));
      results[stream.name] = "ok";
    } catch (e) {
      results[stream.name] = String(e?.message ?? e);
    }
  }
  report[version] = results;
}
console.log(JSON.stringify(report));
