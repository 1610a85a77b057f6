/** The Sump: events no subscriber would take, kept until someone replays them. */
import type { RelayEvent } from "./relay";

export class Sump {
  private parked: Array<{ url: string; event: RelayEvent }> = [];

  /** Keep an event that exhausted its retries. */
  park(url: string, event: RelayEvent): void {
    this.parked.push({ url, event });
  }

  /** Take every parked event out, oldest first, for a replay. */
  drain(): Array<{ url: string; event: RelayEvent }> {
    const out = this.parked;
    this.parked = [];
    return out;
  }
}
