// Renders words with SAM (the sam-js port of the 1982 Software Automatic Mouth) for bench/kws_foreign_engine.py.
// stdin: {"library": path of samjs.common.min.js, "requests": [{"text", "speed", "pitch", "mouth", "throat"}, …]}
// stdout: one line per request, in order: base64 of SAM's unsigned 8-bit samples at 22,050 Hz, or "" when SAM
// could not say the text.
"use strict";
const chunks = [];
process.stdin.on("data", (chunk) => chunks.push(chunk));
process.stdin.on("end", () => {
  const job = JSON.parse(Buffer.concat(chunks).toString("utf8"));
  const SamJs = require(job.library);
  const lines = job.requests.map((request) => {
    const { text, ...voice } = request;
    const samples = new SamJs(voice).buf8(text);
    return samples ? Buffer.from(samples).toString("base64") : "";
  });
  process.stdout.write(lines.join("\n") + "\n");
});
