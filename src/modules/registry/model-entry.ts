/** One entry of an OpenAI model list, as the replica wrote it (`id` a non-empty string; `parent` for a LoRA adapter). */
export type ModelEntry = Readonly<Record<string, unknown>> & { readonly id: string };
