/**
 * The live page (GET /api/dashboard, functions/dashboard.ts): one HTML document built from dashboard/ at the
 * app's root (index.html with dashboard.css and dashboard.js put inline), so the whole page is one
 * keyed request and its script reads the key from its own URL. Read once per process.
 *
 * The Content-Security-Policy allows exactly that style and script (by hash), requests to this
 * origin only, and nothing else: no CDN, no frames, no forms elsewhere. `no-referrer` keeps the key
 * in the page's URL from leaking to any other site.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';

/** dashboard/ at the app root (this file is <root>/<outDir>/shared/observability/dashboardPage.js). */
export const DASHBOARD_DIR = resolve(__dirname, '..', '..', '..', 'dashboard');

export interface DashboardPage {
  readonly html: string;
  readonly contentSecurityPolicy: string;
}

const sha256 = (text: string): string => `'sha256-${createHash('sha256').update(text, 'utf8').digest('base64')}'`;

export function buildDashboardPage(dir: string = DASHBOARD_DIR): DashboardPage {
  const read = (name: string): string => readFileSync(join(dir, name), 'utf8');
  const css = read('dashboard.css');
  const js = read('dashboard.js');
  // Closing tags inside the inlined text would end the element early.
  if (/<\/style/i.test(css) || /<\/script/i.test(js)) throw new Error('dashboard assets must not contain </style or </script');
  const html = read('index.html')
    .replace('<!--inline:dashboard.css-->', () => `<style>${css}</style>`)
    .replace('<!--inline:dashboard.js-->', () => `<script>${js}</script>`);
  const contentSecurityPolicy = [
    "default-src 'none'",
    `script-src ${sha256(js)}`,
    `style-src ${sha256(css)}`,
    "connect-src 'self'",
    "img-src 'self' data:",
    "base-uri 'none'",
    "form-action 'none'",
    "frame-ancestors 'none'",
  ].join('; ');
  return { html, contentSecurityPolicy };
}
