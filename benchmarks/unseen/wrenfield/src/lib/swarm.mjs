// Swarm detection: a colony leaving takes a good share of the hive's weight at once.

/** A fall in weight at least this large, in decagrams, counts as a swarm. */
export const SWARM_DROP_DAG = 260;

/** The fall must happen within this many minutes. */
export const SWARM_WINDOW_MINUTES = 11;

/**
 * Look for a swarm in one hive's readings.
 * @param {Array<{ dag: number, at: Date }>} readings the hive's readings, oldest first
 * @returns {{ from: Date, to: Date, lost: number } | null} the drop found, or null
 */
export function detectSwarm(readings) {
  const windowMs = SWARM_WINDOW_MINUTES * 60 * 1000;
  for (let i = 0; i < readings.length; i++) {
    for (let j = i + 1; j < readings.length; j++) {
      if (readings[j].at - readings[i].at > windowMs) break;
      const lost = readings[i].dag - readings[j].dag;
      if (lost >= SWARM_DROP_DAG) {
        return { from: readings[i].at, to: readings[j].at, lost };
      }
    }
  }
  return null;
}

/**
 * The text of a swarm alert, short enough for one SMS.
 * @param {string} hive the hive's name
 * @param {{ to: Date, lost: number }} drop what detectSwarm found
 * @returns {string}
 */
export function swarmMessage(hive, drop) {
  const kg = (drop.lost / 100).toFixed(1);
  const time = drop.to.toTimeString().slice(0, 5);
  return `Hive ${hive} lost ${kg} kg by ${time}: likely swarm.`;
}
