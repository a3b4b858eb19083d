#!/usr/bin/env node
// The `lockcheck` bin: loads the TypeScript CLI through tsx's loader (Node 20 cannot run .ts itself).
import { register } from 'tsx/esm/api';

register();
await import('./main.ts');
