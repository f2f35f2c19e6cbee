/** For the measuring children run with --expose-gc: two full collections, so RSS reads what is live. */
export function gcNow(): void {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (gc === undefined) throw new Error('run this child with --expose-gc');
  gc();
  gc();
}
