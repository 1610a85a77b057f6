/** Payload signatures: subscribers check them to know an event came from the relay. */
import { createHmac } from "node:crypto";

/** The header that carries an event's signature. */
export const SIGNATURE_HEADER = "X-Lanternfish-Sig";

/** Hex HMAC-SHA384 of `body` under the shared `secret`. */
export function sign(secret: string, body: string): string {
  return createHmac("sha384", secret).update(body).digest("hex");
}
