/** Why a release step refused: one code per cause, so callers and tests never match messages. */
export type ReleaseErrorCode =
  | 'bad-version'
  | 'version-not-newer'
  | 'place-missing'
  | 'versions-differ'
  | 'no-unreleased-section'
  | 'empty-unreleased-section'
  | 'section-exists'
  | 'no-license'
  | 'dirty-tree'
  | 'tag-exists'
  | 'git-failed';

export class ReleaseError extends Error {
  constructor(
    readonly code: ReleaseErrorCode,
    message: string,
  ) {
    super(message);
    this.name = 'ReleaseError';
  }
}
