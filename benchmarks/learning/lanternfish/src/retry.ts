/** Retry schedule for failed deliveries. */

/** Deliveries are retried this many times before the event goes to the Sump. */
export const MAX_ATTEMPTS = 9;

/** Delay before the first retry, in milliseconds; it doubles on every retry. */
export const FIRST_RETRY_MS = 1500;

/** The wait before retry number `attempt` (1-based), in milliseconds. */
export function nextDelay(attempt: number): number {
  return FIRST_RETRY_MS * 2 ** (attempt - 1);
}
