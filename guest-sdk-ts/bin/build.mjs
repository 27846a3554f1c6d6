#!/usr/bin/env node
// callai-pack: builds a pack written in TypeScript (or JavaScript) into a
// WebAssembly component of the `openwop:callai/pack-node` world.
//
//   callai-pack build <entry.ts> -o <out.wasm>
//
// The entry is bundled with this SDK by esbuild (types are stripped, not
// checked: run `tsc --noEmit` for that), then componentize-js turns it into
// a component, with the WASI features the sandbox does not grant (stdio,
// HTTP) left out of the engine.

import { build } from 'esbuild';
import { componentize } from '@bytecodealliance/componentize-js';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const sdk = dirname(dirname(fileURLToPath(import.meta.url)));

function usage(message) {
  console.error(`callai-pack: ${message}\nusage: callai-pack build <entry.ts> -o <out.wasm>`);
  process.exit(2);
}

const args = process.argv.slice(2);
if (args[0] !== 'build') usage('the only command is `build`');
const entry = args[1];
const out = args[args.indexOf('-o') + 1];
if (!entry || args.indexOf('-o') < 0 || !out) usage('an entry and -o <out.wasm> are needed');

const work = await mkdtemp(join(tmpdir(), 'callai-pack-'));
try {
  const bundle = join(work, 'pack.js');
  await build({
    entryPoints: [resolve(entry)],
    bundle: true,
    format: 'esm',
    platform: 'neutral',
    target: 'es2022',
    outfile: bundle,
    external: ['openwop:callai/*'],
    alias: { '@openwop/callai-sdk': join(sdk, 'src', 'index.ts') },
    logLevel: 'warning',
  });
  const { component } = await componentize({
    sourcePath: bundle,
    witPath: join(sdk, 'wit'),
    worldName: 'pack-node',
    disableFeatures: ['stdio', 'http', 'fetch-event'],
  });
  await writeFile(resolve(out), component);
  console.error(`callai-pack: ${out} (${component.length} bytes)`);
} finally {
  await rm(work, { recursive: true, force: true });
}
