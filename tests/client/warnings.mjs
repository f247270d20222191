// What a page's console said: `console.warn` and `console.error` are captured (clients
// report rejected events and failed patches there), and echoed only with DRIVE_VERBOSE.
// Shared by the Node drivers of tests/ (drive.mjs, ../copilotkit/session.mjs).
export function captureWarnings() {
  const warnings = [];
  for (const level of ["warn", "error"]) {
    const original = console[level];
    console[level] = (...args) => {
      warnings.push(args.map((a) => (a instanceof Error ? a.message : String(a))).join(" "));
      if (process.env.DRIVE_VERBOSE) original(...args);
    };
  }
  return warnings;
}
