/** The kinds exitpool's failure report takes (`POST /api/sessions/{key}/failure`, docs/api.md). */
export type FailureKind = 'captcha' | 'blocked' | 'rate_limited' | 'transport' | 'other';
