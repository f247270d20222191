// Runs recorded AG-UI event streams through the event verifier (`verifyEvents`) of each
// @ag-ui/client version named (0.0.x: after its `EventSchemas` parse, as its HttpAgent does): what a client does with every stream it reads, replays
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
  // 0.0.x clients parse every event with `EventSchemas` before verifying it (an unknown type
  // fails the run there); 1.0's verifier checks the shapes itself.
  const { EventSchemas } = require("@ag-ui/core");
  const { from, lastValueFrom, toArray } = require("rxjs");
  const version = require("@ag-ui/client/package.json").version;
  const results = {};
  for (const stream of input.streams) {
    try {
      if (EventSchemas) stream.events.forEach((event) => EventSchemas.parse(event));
      await lastValueFrom(from(stream.events).pipe(client.verifyEvents(false), toArray()));
      results[stream.name] = "ok";
    } catch (e) {
      results[stream.name] = String(e?.message ?? e);
    }
  }
  report[version] = results;
}
console.log(JSON.stringify(report));
