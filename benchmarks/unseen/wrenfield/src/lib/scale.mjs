// Talking to the hive scales: one ScaleLink per scale, on its own serial line.
import { EventEmitter } from "node:events";

/** How often each scale is asked for a reading, in seconds. */
export const READ_INTERVAL_SECONDS = 95;

/** Weights are stored as whole decagrams (tens of grams); this is the unit's symbol. */
export const WEIGHT_UNIT = "dag";

/** The heaviest weight a scale can report, in decagrams; anything above is a fault. */
export const SCALE_LIMIT_DAG = 15000;

/**
 * Parse one line a scale sends, such as `W+004312`, into a weight in decagrams.
 * @param {string} line the raw line, without its line ending
 * @returns {number | null} the weight, or null when the line is not a reading
 */
export function parseWeight(line) {
  const match = /^W([+-])(\d{6})$/.exec(line.trim());
  if (!match) return null;
  const value = Number(match[2]) * (match[1] === "-" ? -1 : 1);
  return value < 0 || value > SCALE_LIMIT_DAG ? null : value;
}

/**
 * Reads one hive scale over its serial line and emits a `reading` event,
 * `{ hive, dag, at }`, every READ_INTERVAL_SECONDS.
 */
export class ScaleLink extends EventEmitter {
  /**
   * @param {string} hive the hive's name, as in the config
   * @param {{ write(data: string): void, on(event: string, fn: Function): void }} port an open serial port
   */
  constructor(hive, port) {
    super();
    this.hive = hive;
    this.port = port;
    this.timer = null;
    port.on("line", (line) => {
      const dag = parseWeight(line);
      if (dag !== null) this.emit("reading", { hive, dag, at: new Date() });
    });
  }

  /** Start asking the scale for a weight on a fixed interval. */
  start() {
    this.port.write("W\r\n");
    this.timer = setInterval(() => this.port.write("W\r\n"), READ_INTERVAL_SECONDS * 1000);
  }

  /** Stop polling; the serial port stays open. */
  stop() {
    clearInterval(this.timer);
    this.timer = null;
  }
}
