import { ConsensusGroup, GroupMember, type MemberCommand } from '../conformance/env/consensusGroup.ts';

/**
 * A ConsensusGroup of the tests' own: members that are never spawned, have no
 * status, leader or peers, and need nothing installed. A test's group
 * overrides what its case is about (its ports, a command, slow statuses).
 */
export abstract class TestGroup extends ConsensusGroup<GroupMember, { readonly member: number }> {
  protected readonly addressInUse = /never/;
  protected readonly leaderWanted = 'a leader';

  protected command(): MemberCommand {
    throw new Error('no member is to be spawned');
  }
  protected memberStatus(_m: GroupMember, _timeoutMs: number): Promise<{ readonly member: number } | null> {
    return Promise.resolve(null);
  }
  protected leaderOf(): number | null {
    return null;
  }
  protected notInstalled(): null {
    return null;
  }
  protected peerPorts(_m: GroupMember): readonly number[] {
    return [];
  }
}
