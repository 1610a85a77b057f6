/**
 * The Relay takes webhook events in, signs them and delivers them to every
 * subscriber, retrying failed deliveries and parking the hopeless ones in the Sump.
 */
import { nextDelay, MAX_ATTEMPTS } from "./retry";
import { sign, SIGNATURE_HEADER } from "./signing";
import { Sump } from "./sump";

/** Largest event body the relay accepts, in kilobytes. */
export const MAX_PAYLOAD_KB = 768;

/** How long an event id is remembered to drop duplicate deliveries, in minutes. */
export const DEDUPE_WINDOW_MINUTES = 135;

export interface RelayEvent {
  id: string;
  topic: string;
  body: string;
}

/** Delivers events to subscriber URLs. */
export class Relay {
  private seen = new Map<string, number>();

  constructor(
    private subscribers: string[],
    private secret: string,
    private sump: Sump,
  ) {}

  /** Accept one event; resolves once every subscriber has it or it is in the Sump. */
  async accept(event: RelayEvent): Promise<void> {
    if (event.body.length > MAX_PAYLOAD_KB * 1024) {
      throw new Error(`event ${event.id} is larger than ${MAX_PAYLOAD_KB} KB`);
    }
    const now = Date.now();
    const last = this.seen.get(event.id);
    if (last !== undefined && now - last < DEDUPE_WINDOW_MINUTES * 60_000) {
      return;
    }
    this.seen.set(event.id, now);
    await Promise.all(this.subscribers.map((url) => this.deliver(url, event)));
  }

  private async deliver(url: string, event: RelayEvent): Promise<void> {
    const headers = { [SIGNATURE_HEADER]: sign(this.secret, event.body) };
    for (let attempt = 1; attempt <= MAX_ATTEMPTS; attempt++) {
      const reply = await fetch(url, { method: "POST", headers, body: event.body });
      if (reply.ok) return;
      await new Promise((done) => setTimeout(done, nextDelay(attempt)));
    }
    this.sump.park(url, event);
  }
}
