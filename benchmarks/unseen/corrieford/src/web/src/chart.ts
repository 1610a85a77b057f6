/** How many hours of readings the stage chart shows. */
export const CHART_WINDOW_HOURS = 36;

export interface StagePoint {
  taken: Date;
  stageMm: number;
}

/** Draws the river stage at one gauge over the last CHART_WINDOW_HOURS. */
export function drawStageChart(canvas: HTMLCanvasElement, points: StagePoint[]): void {
  const ctx = canvas.getContext("2d");
  if (!ctx || points.length === 0) return;
  const since = Date.now() - CHART_WINDOW_HOURS * 3600 * 1000;
  const shown = points.filter((p) => p.taken.getTime() >= since);
  const top = Math.max(...shown.map((p) => p.stageMm));
  ctx.beginPath();
  shown.forEach((p, i) => {
    const x = (i / Math.max(shown.length - 1, 1)) * canvas.width;
    const y = canvas.height - (p.stageMm / top) * canvas.height;
    if (i === 0) ctx.moveTo(x, y);
    else ctx.lineTo(x, y);
  });
  ctx.stroke();
}
