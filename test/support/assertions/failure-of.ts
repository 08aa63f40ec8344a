/** What `p` was rejected with; a promise that resolves instead fails the test. */
export async function failureOf(p: Promise<unknown>): Promise<unknown> {
  try {
    await p;
  } catch (e) {
    return e;
  }
  throw new Error('it did not fail');
}
