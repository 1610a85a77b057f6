/** Minutes before the banner shows the same warning again. */
export const ALERT_COOLDOWN_MINUTES = 25;

/** The warning banner at the top of the dashboard. */
export class AlertBanner {
  private lastShown = new Map<string, number>();

  constructor(private readonly element: HTMLElement) {}

  /** Shows a warning for a gauge unless it was shown within the cooldown. */
  show(gauge: string, message: string): boolean {
    const now = Date.now();
    const last = this.lastShown.get(gauge);
    if (last !== undefined && now - last < ALERT_COOLDOWN_MINUTES * 60 * 1000) return false;
    this.lastShown.set(gauge, now);
    this.element.textContent = `${gauge}: ${message}`;
    return true;
  }
}
