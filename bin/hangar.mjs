#!/usr/bin/env node
// Runs the TypeScript sources directly through tsx, so `npx hangar` and `npm start` work right after
// `npm install` with no build step.
import { register } from "tsx/esm/api";

register();
const { main } = await import("../src/cli/main.ts");
const code = await main(process.argv.slice(2));
if (typeof code === "number") process.exitCode = code;
