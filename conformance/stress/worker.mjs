// A stress run's client process: loads the TypeScript worker through tsx's loader (Node 20 cannot run .ts itself).
import { register } from 'tsx/esm/api';

register();
await import('./worker.ts');
