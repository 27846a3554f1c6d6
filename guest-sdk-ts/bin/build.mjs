#!/usr/bin/env node
// callai-pack: builds a pack written in TypeScript (or JavaScript) into a
// WebAssembly component of the `openwop:callai/pack-node` world.
//
//   callai-pack build <entry.ts> -o <out.wasm> [--no-compile]
//
// The entry is bundled with this SDK by esbuild (types are stripped, not
// checked: run `tsc --noEmit` for that), then componentize-js turns it into
// a component, with the WASI features the sandbox does not grant (stdio,
// HTTP) left out of the engine. Last, `callai compile` (the `callai` on
// PATH, or $CALLAI) fills the compiled-component cache, so the first
// `callai run` after a build does not compile; `--no-compile` skips it.

import { build } from 'esbuild';
import { spawnSync } from 'node:child_process';
import { componentize } from '@bytecodealliance/componentize-js';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const sdk = dirname(dirname(fileURLToPath(import.meta.url)));

function usage(message) {
  console.error(`callai-pack: ${message}\nusage: callai-pack build <entry.ts> -o <out.wasm> [--no-compile]`);
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
if (!args.includes('--no-compile')) precompile(resolve(out));

// `callai compile OUT`, so that the first run loads the pack instead of
// compiling it; without a `callai` to run, the first run compiles.
function precompile(wasm) {
  const callai = process.env.CALLAI || 'callai';
  const done = spawnSync(callai, ['compile', wasm], { stdio: 'inherit' });
  if (done.error && done.error.code === 'ENOENT') {
    console.error(`callai-pack: no \`${callai}\` to run (set CALLAI to its path): the first \`callai run\` compiles the pack`);
  } else if (done.status !== 0) {
    console.error(`callai-pack: \`${callai} compile ${wasm}\` failed`);
    process.exit(done.status ?? 1);
  }
}
