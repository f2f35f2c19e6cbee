/** OpenAI routes reported by name; anything else under /v1 is `other` (bounded label values). */
const KNOWN = new Set([
  '/v1/chat/completions',
  '/v1/completions',
  '/v1/embeddings',
  '/v1/models',
  '/v1/responses',
  '/v1/rerank',
  '/v1/score',
  '/v1/moderations',
  '/v1/audio/transcriptions',
  '/v1/audio/speech',
  '/v1/images/generations',
  '/v1/tokenize',
  '/v1/detokenize',
]);

export function routeLabel(url: string | undefined): string {
  if (url === undefined) return 'other';
  const q = url.indexOf('?');
  const path = q >= 0 ? url.slice(0, q) : url;
  return KNOWN.has(path) ? path : 'other';
}
