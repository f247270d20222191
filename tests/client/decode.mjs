// Reads one run in AG-UI's protobuf encoding without HttpAgent: POSTs the body, splits the
// response into frames (a 4-byte big-endian length, then the message) and decodes each with
// @ag-ui/proto's own decoder. Usage:
//   node decode.mjs '{"url": "...", "accept": "...", "body": {...}}'
// Prints {"steps": [{status, contentType, events, frames, trailingBytes, error}]}.
import { decode } from "@ag-ui/proto";

const script = JSON.parse(process.argv[2]);
const response = await fetch(script.url, {
  method: "POST",
  headers: { "Content-Type": "application/json", Accept: script.accept },
  body: JSON.stringify(script.body),
});
const bytes = new Uint8Array(await response.arrayBuffer());
const events = [];
let offset = 0;
let error = null;
while (offset + 4 <= bytes.length) {
  const length = new DataView(bytes.buffer, bytes.byteOffset + offset, 4).getUint32(0, false);
  if (offset + 4 + length > bytes.length) break;
  try {
    events.push(decode(bytes.subarray(offset + 4, offset + 4 + length)));
  } catch (e) {
    error = String(e?.message ?? e);
    break;
  }
  offset += 4 + length;
}
process.stdout.write(
  JSON.stringify({
    steps: [
      {
        status: response.status,
        contentType: response.headers.get("content-type"),
        events,
        frames: events.length,
        trailingBytes: bytes.length - offset,
        error,
      },
    ],
  }),
);
