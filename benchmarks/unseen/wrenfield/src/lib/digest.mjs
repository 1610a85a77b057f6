// The hive log and the morning digest built from it.
import { readFile, writeFile, appendFile } from "node:fs/promises";

/** The log every reading is appended to, one JSON object per line. */
export const LOG_FILE = "hivelog.ndjson";

/** Readings older than this many days are pruned from the hive log. */
export const PRUNE_AFTER_DAYS = 163;

/**
 * Append one reading to the hive log.
 * @param {{ hive: string, dag: number, at: Date }} reading
 */
export async function logReading(reading) {
  await appendFile(LOG_FILE, JSON.stringify(reading) + "\n");
}

/**
 * Drop the readings older than PRUNE_AFTER_DAYS from the hive log.
 * @param {Date} now the current time
 */
export async function pruneLog(now) {
  const cutoff = now.getTime() - PRUNE_AFTER_DAYS * 24 * 60 * 60 * 1000;
  const lines = (await readFile(LOG_FILE, "utf8")).split("\n").filter(Boolean);
  const kept = lines.filter((line) => new Date(JSON.parse(line).at).getTime() >= cutoff);
  await writeFile(LOG_FILE, kept.map((line) => line + "\n").join(""));
}

/**
 * Build the morning digest: each hive's latest weight and its change since yesterday.
 * @param {Array<{ hive: string, dag: number, at: string }>} readings the last day's readings
 * @returns {string} the digest, one line per hive
 */
export function composeDigest(readings) {
  const byHive = new Map();
  for (const r of readings) {
    if (!byHive.has(r.hive)) byHive.set(r.hive, []);
    byHive.get(r.hive).push(r);
  }
  const lines = [];
  for (const [hive, rs] of [...byHive].sort(([a], [b]) => a.localeCompare(b))) {
    const change = rs.at(-1).dag - rs[0].dag;
    const sign = change >= 0 ? "+" : "";
    lines.push(`${hive}: ${(rs.at(-1).dag / 100).toFixed(2)} kg (${sign}${change} dag)`);
  }
  return lines.join("\n");
}
