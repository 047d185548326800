import type { Clock } from "../../src/deps.ts";

/** A clock tests move by hand across the TTLs (30 min setup, 24 h sessions, 15 min links, 1 h installs). */
export class ManualClock implements Clock {
  constructor(private current = 1_800_000_000) {}
  now(): number {
    return this.current;
  }
  advance(seconds: number): void {
    this.current += seconds;
  }
  set(epochSeconds: number): void {
    this.current = epochSeconds;
  }
}
