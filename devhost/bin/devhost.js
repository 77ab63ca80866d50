#!/usr/bin/env node
// `npx devhost [appRoot] [options]`: the development host process (src/main.ts, compiled by `npm run build`).
// A file of its own, outside dist/, so a build never rewrites it and git keeps its execute bit.
const { join } = require('node:path');
const { existsSync } = require('node:fs');

const entry = join(__dirname, '..', 'dist', 'src', 'main.js');
if (!existsSync(entry)) {
  console.error(`devhost: ${entry} is missing: build first (npm run build, or npm start which builds).`);
  process.exit(1);
}
require(entry).runHostProcess();
