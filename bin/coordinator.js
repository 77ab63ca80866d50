#!/usr/bin/env node
// `npx coordinator <command>`: the command line (cli/coordinator.ts, compiled by `npm run build`).
// A file of its own, outside dist/, so a build never rewrites it and git keeps its execute bit.
const { join } = require('node:path');
const { existsSync } = require('node:fs');

const entry = join(__dirname, '..', 'dist', 'cli', 'coordinator.js');
if (!existsSync(entry)) {
  console.error(`coordinator: ${entry} is missing: build first (npm run build, or npm start which builds).`);
  process.exit(1);
}
require(entry).runCli();
