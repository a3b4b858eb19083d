// The docs' worked example: a backend written from scratch, registered with one call.
import { conformanceSuite } from '../conformance/suite.ts';
import { tinyLock } from '../docs/examples/tinyLock.ts';

conformanceSuite(tinyLock, { runs: 300, seed: 42 });
