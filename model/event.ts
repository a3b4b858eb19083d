import type { StorePolicy } from './design.ts';
import type { Owner } from './state.ts';

/**
 * What a step did, beyond its outcome: the facts the event-based properties
 * judge. Each carries the ghost values it needs from before the step, so a
 * property check is a pure function of the events and the state after.
 */
export type WorldEvent =
  | {
      readonly kind: 'granted';
      readonly client: number;
      readonly resource: string;
      readonly token: bigint;
      readonly epoch: number;
      readonly maxTokenBefore: bigint | null;
    }
  | {
      readonly kind: 'write';
      readonly client: number;
      readonly resource: string;
      readonly token: bigint;
      readonly epoch: number;
      readonly policy: StorePolicy;
      readonly highestBefore: bigint | null;
      readonly accepted: boolean;
      readonly lastAcceptedEpochBefore: number;
    }
  | {
      readonly kind: 'key-changed';
      readonly node: number;
      readonly resource: string;
      readonly byClient: number;
      /** The owner value the caller presented. */
      readonly byOwner: Owner;
      readonly ownerBefore: Owner;
      readonly change: 'deleted' | 'extended';
    }
  | {
      readonly kind: 'restarted';
      readonly node: number;
      readonly countersBefore: Readonly<Record<string, bigint>>;
      readonly countersAfter: Readonly<Record<string, bigint>>;
    };
