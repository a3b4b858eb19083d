// A worker thread of `lockcheck explore --jobs N`: loads the TypeScript worker through tsx, as the bin does.
import { register } from 'tsx/esm/api';

register();
await import('./exploreWorker.ts');
