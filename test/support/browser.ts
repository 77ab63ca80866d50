/**
 * A real headless browser for tests of the live page: Debian's chromium driven by playwright-core,
 * with a new empty profile per launch. The flags that stop chromium's own background traffic are
 * required on this machine (its closed network refuses those connections). No chromium, no test:
 * the launch fails with a message saying how to install it (`.ci/run` does so when it is missing).
 */
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { type BrowserContext, chromium, type Page } from 'playwright-core';
import { PNG } from 'pngjs';

export const CHROMIUM_PATH = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
export const CHROMIUM_FLAGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
] as const;

export interface Browser {
  readonly context: BrowserContext;
  readonly page: Page;
  close(): Promise<void>;
}

export async function launchBrowser(options: { width?: number; height?: number } = {}): Promise<Browser> {
  if (!existsSync(CHROMIUM_PATH)) {
    throw new Error(`chromium is not installed at ${CHROMIUM_PATH}: run \`apt-get update && apt-get install -y chromium\` (.ci/run does this when it is missing).`);
  }
  const profile = mkdtempSync(join(tmpdir(), 'chromium-profile-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM_PATH,
    headless: true,
    args: [...CHROMIUM_FLAGS],
    viewport: { width: options.width ?? 1280, height: options.height ?? 1000 },
    deviceScaleFactor: 1,
  });
  const page = context.pages()[0] ?? (await context.newPage());
  return {
    context,
    page,
    close: async () => {
      await context.close();
      rmSync(profile, { recursive: true, force: true });
    },
  };
}

export interface Rgb {
  readonly r: number;
  readonly g: number;
  readonly b: number;
}

export function hexColor(hex: string): Rgb {
  const n = Number.parseInt(hex.replace('#', ''), 16);
  return { r: (n >> 16) & 255, g: (n >> 8) & 255, b: n & 255 };
}

/** A decoded screenshot: pixel colours by page coordinates (device scale 1). */
export class Screenshot {
  private readonly png: PNG;

  constructor(readonly bytes: Buffer) {
    this.png = PNG.sync.read(bytes);
  }

  get width(): number {
    return this.png.width;
  }

  get height(): number {
    return this.png.height;
  }

  pixel(x: number, y: number): Rgb {
    const i = (this.png.width * Math.round(y) + Math.round(x)) * 4;
    const d = this.png.data;
    return { r: d[i] ?? 0, g: d[i + 1] ?? 0, b: d[i + 2] ?? 0 };
  }

  /**
   * The row of pixels across a box at its vertical middle, classified by the nearest of `palette`
   * (within `tolerance` per channel; otherwise 'other'): how many pixels of each.
   */
  classifyRow(box: { x: number; y: number; width: number; height: number }, palette: Readonly<Record<string, Rgb>>, tolerance = 24): Record<string, number> {
    const counts: Record<string, number> = { other: 0 };
    for (const name of Object.keys(palette)) counts[name] = 0;
    const y = box.y + box.height / 2;
    for (let x = Math.ceil(box.x); x < Math.floor(box.x + box.width); x += 1) {
      const p = this.pixel(x, y);
      const match = Object.entries(palette).find(([, c]) => Math.abs(c.r - p.r) <= tolerance && Math.abs(c.g - p.g) <= tolerance && Math.abs(c.b - p.b) <= tolerance);
      const name = match?.[0] ?? 'other';
      counts[name] = (counts[name] ?? 0) + 1;
    }
    return counts;
  }
}
